// --allowed-ips: the client networks the server answers (CIDR, IPv4 and IPv6); any other peer gets 403 before its
// request is looked at. Plain bytes, no sockets: the HTTP layer passes the peer's address as text.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace pagoda::server::http {

class IpAllowList {
  public:
    // "10.0.0.0/8", "192.168.1.7" (one host), "fd00::/8", "::1"; an IPv4 network also matches the IPv4-mapped IPv6
    // form (::ffff:10.1.2.3) a dual-stack socket reports. An error names the entry that is wrong.
    static Result<IpAllowList> parse(const std::vector<std::string>& cidrs);

    bool empty() const { return networks_.empty(); }  // empty: every address is allowed
    // `address` without a port, as the socket reports it ("10.1.2.3", "::1", "::ffff:10.1.2.3"); unparsable: false.
    bool allows(std::string_view address) const;

  private:
    struct Network {
        std::array<uint8_t, 16> bytes{};  // IPv4 as IPv4-mapped IPv6
        int prefix_bits = 0;              // of the 128
    };
    std::vector<Network> networks_;
};

}  // namespace pagoda::server::http
