// IpAllowList (see ip_allowlist.h). Every address becomes 16 bytes (IPv4 as ::ffff:a.b.c.d) so that one prefix
// comparison serves both families.
#include "server/http/ip_allowlist.h"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <optional>

namespace pagoda::server::http {

namespace {

struct Parsed {
    std::array<uint8_t, 16> bytes{};
    bool v4 = false;
};

std::optional<Parsed> parse_address(std::string_view text) {
    const std::string s(text);
    Parsed p;
    uint8_t v4[4];
    if (inet_pton(AF_INET, s.c_str(), v4) == 1) {
        p.v4 = true;
        p.bytes[10] = p.bytes[11] = 0xff;
        for (int i = 0; i < 4; ++i)
            p.bytes[12 + i] = v4[i];
        return p;
    }
    if (inet_pton(AF_INET6, s.c_str(), p.bytes.data()) == 1) return p;
    return std::nullopt;
}

}  // namespace

Result<IpAllowList> IpAllowList::parse(const std::vector<std::string>& cidrs) {
    IpAllowList list;
    for (const std::string& entry : cidrs) {
        const size_t slash = entry.find('/');
        auto address = parse_address(std::string_view(entry).substr(0, slash));
        if (!address) return Status::error("--allowed-ips: '" + entry + "' is not an IP address or CIDR network");
        const int family_bits = address->v4 ? 32 : 128;
        int bits = family_bits;
        if (slash != std::string::npos) {
            const char* first = entry.data() + slash + 1;
            const char* last = entry.data() + entry.size();
            auto [ptr, ec] = std::from_chars(first, last, bits);
            if (first == last || ec != std::errc() || ptr != last || bits < 0 || bits > family_bits)
                return Status::error("--allowed-ips: '" + entry + "': the prefix length must be 0.." +
                                     std::to_string(family_bits));
        }
        Network n;
        n.bytes = address->bytes;
        n.prefix_bits = address->v4 ? 96 + bits : bits;
        list.networks_.push_back(n);
    }
    return list;
}

bool IpAllowList::allows(std::string_view address) const {
    if (networks_.empty()) return true;
    auto a = parse_address(address);
    if (!a) return false;
    for (const Network& n : networks_) {
        bool match = true;
        for (int bit = 0; bit < n.prefix_bits && match; bit += 8) {
            const int take = std::min(8, n.prefix_bits - bit);
            const auto mask = static_cast<uint8_t>(0xff << (8 - take));
            match = (a->bytes[static_cast<size_t>(bit / 8)] & mask) == (n.bytes[static_cast<size_t>(bit / 8)] & mask);
        }
        if (match) return true;
    }
    return false;
}

}  // namespace pagoda::server::http
