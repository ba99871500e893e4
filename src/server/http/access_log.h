// The access log (--access-log PATH|-): one JSON line per answered request, for billing, audits and debugging a
// client's report by its X-Request-Id. Lines are formatted on the I/O thread and written by a thread of their own,
// so a slow disk never holds up a request; the API key is never part of a line.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

namespace pagoda::server::http {

// One line. Negative numbers and empty strings are left out of it (a 404 has no model, a 401 no tenant).
struct AccessRecord {
    double time_unix = 0.0;  // when the request was read (seconds since the epoch, UTC)
    std::string request_id, tenant, model, method, path, client;
    int status = 0;  // 499: the client went away before any answer was sent (nginx's number)
    int64_t prompt_tokens = -1, completion_tokens = -1;
    double ttft_s = -1.0;      // request read -> first token
    double duration_s = -1.0;  // request read -> last byte queued for the socket (or the connection's end)
    bool streamed = false;     // a streamed (SSE) answer
    bool complete = true;      // false: the connection ended before the whole answer was written
};

std::string format_access_record(const AccessRecord& r);

class AccessLog {
  public:
    // "-" is standard output; anything else a file opened for appending (created if missing).
    static Result<std::unique_ptr<AccessLog>> open(const std::string& path);
    ~AccessLog();  // writes what is queued, then closes
    AccessLog(const AccessLog&) = delete;
    AccessLog& operator=(const AccessLog&) = delete;

    // Any thread; never waits for I/O. Past kMaxQueuedLines unwritten lines, new ones are dropped and counted.
    void write(const AccessRecord& record);
    // SIGHUP: reopens the file under its name (logrotate moved the old one away); an error keeps the old file.
    Status reopen();
    uint64_t dropped() const;

    static constexpr size_t kMaxQueuedLines = 65536;

    struct Impl;

  private:
    explicit AccessLog(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace pagoda::server::http
