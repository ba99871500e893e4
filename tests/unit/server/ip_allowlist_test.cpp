// IpAllowList: CIDR parsing (errors name the entry), IPv4, IPv6 and the IPv4-mapped form of a dual-stack socket.
#include "server/http/ip_allowlist.h"

#include <gtest/gtest.h>

namespace pagoda::server::http {
namespace {

IpAllowList parse(std::vector<std::string> cidrs) {
    auto list = IpAllowList::parse(cidrs);
    EXPECT_TRUE(list.ok()) << list.message();
    return std::move(list).value();
}

TEST(IpAllowList, EmptyAllowsEveryone) {
    IpAllowList list = parse({});
    EXPECT_TRUE(list.empty());
    EXPECT_TRUE(list.allows("203.0.113.9"));
}

TEST(IpAllowList, Ipv4Networks) {
    IpAllowList list = parse({"10.0.0.0/8", "192.168.1.7", "172.16.0.0/12"});
    EXPECT_TRUE(list.allows("10.255.1.2"));
    EXPECT_TRUE(list.allows("192.168.1.7"));
    EXPECT_FALSE(list.allows("192.168.1.8"));
    EXPECT_TRUE(list.allows("172.31.255.255"));
    EXPECT_FALSE(list.allows("172.32.0.0"));
    EXPECT_FALSE(list.allows("11.0.0.1"));
    // A dual-stack socket reports IPv4 peers in the mapped form.
    EXPECT_TRUE(list.allows("::ffff:10.1.2.3"));
    EXPECT_FALSE(list.allows("::ffff:11.1.2.3"));
    EXPECT_FALSE(list.allows("not an address"));
    EXPECT_FALSE(list.allows(""));
}

TEST(IpAllowList, Ipv6NetworksAndOddPrefixes) {
    IpAllowList list = parse({"fd00::/8", "2001:db8:abcd::/47", "::1"});
    EXPECT_TRUE(list.allows("fdff::1"));
    EXPECT_FALSE(list.allows("fe00::1"));
    EXPECT_TRUE(list.allows("2001:db8:abcd:1::5"));  // the 47-bit prefix keeps the low bit of the third group free
    EXPECT_FALSE(list.allows("2001:db8:abcf::5"));
    EXPECT_TRUE(list.allows("::1"));
    EXPECT_FALSE(list.allows("::2"));
    EXPECT_FALSE(list.allows("10.0.0.1"));
}

TEST(IpAllowList, ZeroPrefixMatchesItsFamilyOnly) {
    IpAllowList v4 = parse({"0.0.0.0/0"});
    EXPECT_TRUE(v4.allows("8.8.8.8"));
    EXPECT_FALSE(v4.allows("2001:db8::1"));
    IpAllowList v6 = parse({"::/0"});
    EXPECT_TRUE(v6.allows("2001:db8::1"));
    EXPECT_TRUE(v6.allows("8.8.8.8"));  // every IPv6 address, the mapped IPv4 ones included
}

TEST(IpAllowList, BadEntriesAreNamed) {
    for (const char* bad :
         {"10.0.0.0/33", "::/129", "10.0.0.0/", "10.0.0.0/x", "10.0.0.0/-1", "example.com", "10.0.0/8", "/8"}) {
        auto list = IpAllowList::parse({bad});
        ASSERT_FALSE(list.ok()) << bad;
        EXPECT_NE(list.message().find(bad), std::string::npos) << list.message();
    }
}

}  // namespace
}  // namespace pagoda::server::http
