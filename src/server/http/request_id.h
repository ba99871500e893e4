// X-Request-Id: the id an answer carries and the logs name, so that a client's report can be matched to a log line.
#pragma once

#include <string>

#include "server/http/http_server.h"

namespace pagoda::server::http {

// The client's own X-Request-Id when it sent a usable one (printable ASCII only, cut at kMaxRequestIdBytes: it is
// echoed in a header and written to logs, so control bytes and megabyte ids must not pass), else a fresh random one
// (32 hex digits).
std::string request_id_for(const Headers& headers);
// The same for a header value that was or was not sent (nullptr).
std::string request_id_for(const std::string* sent);

inline constexpr size_t kMaxRequestIdBytes = 128;

}  // namespace pagoda::server::http
