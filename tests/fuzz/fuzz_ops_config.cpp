// Fuzzes what operators write: the --api-keys-file parser and --allowed-ips entries (one per line), then lookups
// in what parsed. Any input gives a table or an error, never a crash.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "server/auth/tenants.h"
#include "server/http/ip_allowlist.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace pagoda::server;
    const std::string text(reinterpret_cast<const char*>(data), size);
    auto specs = auth::parse_tenants_file(text);
    if (specs.ok()) {
        auth::TenantRegistry registry;
        (void)registry.load({"k"}, *specs);
        for (const auto& spec : *specs)
            for (const auto& key : spec.keys)
                if (auto t = registry.find(key)) (void)t->may_use(text);
        (void)registry.find(text);
    }
    std::vector<std::string> cidrs;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);)
        cidrs.push_back(line);
    auto list = http::IpAllowList::parse(cidrs);
    if (list.ok())
        for (const auto& c : cidrs)
            (void)list->allows(c.substr(0, c.find('/')));
    return 0;
}
