// AccessLog: a queue of formatted lines and the thread that writes them (see access_log.h).
#include "server/http/access_log.h"

#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

#include "common/json.h"
#include "common/log.h"

namespace pagoda::server::http {

namespace {

// 2026-12-04T05:33:56.123Z: sortable, and what log shippers parse without a format string.
std::string iso8601_utc(double unix_seconds) {
    const auto whole = static_cast<std::time_t>(std::floor(unix_seconds));
    const int millis = static_cast<int>((unix_seconds - static_cast<double>(whole)) * 1000.0);
    std::tm tm{};
    gmtime_r(&whole, &tm);
    char buf[40];
    const size_t n = std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
    std::snprintf(buf + n, sizeof(buf) - n, ".%03dZ", millis);
    return buf;
}

// Seconds with microsecond resolution (a JSON number, not a float's 17 digits).
Json seconds(double s) {
    return Json(std::round(s * 1e6) / 1e6);
}

}  // namespace

std::string format_access_record(const AccessRecord& r) {
    Json j = Json::object();
    j.set("time", Json(iso8601_utc(r.time_unix)));
    j.set("request_id", Json(r.request_id));
    if (!r.tenant.empty()) j.set("tenant", Json(r.tenant));
    if (!r.model.empty()) j.set("model", Json(r.model));
    j.set("method", Json(r.method));
    j.set("path", Json(r.path));
    j.set("status", Json(r.status));
    if (r.prompt_tokens >= 0) j.set("prompt_tokens", Json(r.prompt_tokens));
    if (r.completion_tokens >= 0) j.set("completion_tokens", Json(r.completion_tokens));
    if (r.ttft_s >= 0.0) j.set("ttft_s", seconds(r.ttft_s));
    if (r.duration_s >= 0.0) j.set("duration_s", seconds(r.duration_s));
    j.set("client", Json(r.client));
    j.set("stream", Json(r.streamed));
    if (!r.complete) j.set("complete", Json(false));
    std::string line = j.dump();
    line += '\n';
    return line;
}

struct AccessLog::Impl {
    std::string path;
    std::FILE* file = nullptr;         // owned unless it is stdout; only the writer thread touches it once started
    std::FILE* replacement = nullptr;  // set by reopen(), taken by the writer between batches
    std::mutex mu;                     // guards everything below but `file`
    std::condition_variable cv;
    std::deque<std::string> queue;
    bool stopping = false;
    uint64_t dropped = 0;
    std::thread writer;
    bool failing = false;  // the writer thread's: the last batch did not reach the file
    uint64_t failed_lines = 0;

    void run() {
        std::deque<std::string> batch;
        std::unique_lock lock(mu);
        while (true) {
            cv.wait(lock, [&] { return stopping || replacement || !queue.empty(); });
            if (replacement) {  // the file is swapped here, between batches, never under a write in progress
                close_file();
                file = std::exchange(replacement, nullptr);
            }
            if (queue.empty() && stopping) return;
            batch.swap(queue);
            lock.unlock();
            if (!batch.empty()) write_batch(batch);
            batch.clear();
            lock.lock();
        }
    }

    // A full disk (ENOSPC) or a failing device loses lines but never stops the server; the log says so once per
    // outage, and again when writing works again.
    void write_batch(const std::deque<std::string>& batch) {
        bool ok = true;
        for (const std::string& line : batch)
            ok = std::fwrite(line.data(), 1, line.size(), file) == line.size() && ok;
        ok = std::fflush(file) == 0 && ok;
        const int err = errno;
        if (!ok) {
            std::clearerr(file);
            failed_lines += batch.size();
            if (!failing)
                PAGODA_LOG_ERROR("access log: writing " + path + " failed (" + std::strerror(err) +
                                 "); requests are served, their lines are lost until it works again");
            failing = true;
        } else if (failing) {
            PAGODA_LOG_INFO("access log: writing " + path + " works again (" + std::to_string(failed_lines) +
                            " line(s) lost)");
            failing = false;
            failed_lines = 0;
        }
    }

    void close_file() {
        if (file && file != stdout) std::fclose(file);
        file = nullptr;
    }
};

Result<std::unique_ptr<AccessLog>> AccessLog::open(const std::string& path) {
    auto impl = std::make_unique<Impl>();
    impl->path = path;
    if (path == "-") {
        impl->file = stdout;
    } else {
        impl->file = std::fopen(path.c_str(), "a");
        if (!impl->file) return Status::error("--access-log: cannot open " + path + " for appending");
    }
    Impl* raw = impl.get();
    impl->writer = std::thread([raw] { raw->run(); });
    return std::unique_ptr<AccessLog>(new AccessLog(std::move(impl)));
}

AccessLog::AccessLog(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

AccessLog::~AccessLog() {
    {
        std::lock_guard lock(impl_->mu);
        impl_->stopping = true;
    }
    impl_->cv.notify_one();
    impl_->writer.join();
    impl_->close_file();
    if (impl_->replacement) std::fclose(impl_->replacement);
    if (impl_->dropped > 0)
        PAGODA_LOG_WARNING("access log: " + std::to_string(impl_->dropped) +
                           " line(s) dropped (the writer fell behind)");
}

void AccessLog::write(const AccessRecord& record) {
    std::string line = format_access_record(record);
    {
        std::lock_guard lock(impl_->mu);
        if (impl_->queue.size() >= kMaxQueuedLines) {
            ++impl_->dropped;
            return;
        }
        impl_->queue.push_back(std::move(line));
    }
    impl_->cv.notify_one();
}

Status AccessLog::reopen() {
    if (impl_->path == "-") return ok_status();
    std::FILE* fresh = std::fopen(impl_->path.c_str(), "a");
    if (!fresh) return Status::error("access log: cannot reopen " + impl_->path + "; still writing the old file");
    {
        std::lock_guard lock(impl_->mu);
        if (impl_->replacement) std::fclose(impl_->replacement);  // two SIGHUPs before the writer woke up
        impl_->replacement = fresh;
    }
    impl_->cv.notify_one();
    return ok_status();
}

uint64_t AccessLog::dropped() const {
    std::lock_guard lock(impl_->mu);
    return impl_->dropped;
}

}  // namespace pagoda::server::http
