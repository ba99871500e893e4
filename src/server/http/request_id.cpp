// Request ids (see request_id.h).
#include "server/http/request_id.h"

#include <cstdio>
#include <random>

namespace pagoda::server::http {

std::string request_id_for(const std::string* sent) {
    std::string id;
    if (sent) {
        for (char c : *sent) {
            if (id.size() == kMaxRequestIdBytes) break;
            if (c >= 0x21 && c <= 0x7e) id += c;  // no spaces either: a log line splits on them
        }
    }
    if (!id.empty()) return id;
    // One generator per I/O thread: no lock on a path every request takes.
    thread_local std::mt19937_64 rng(std::random_device{}());
    char buf[33];
    std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(rng()),
                  static_cast<unsigned long long>(rng()));
    return buf;
}

std::string request_id_for(const Headers& headers) {
    return request_id_for(find_header(headers, "x-request-id"));
}

}  // namespace pagoda::server::http
