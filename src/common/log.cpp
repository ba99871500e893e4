#include "common/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

namespace pagoda {
namespace {

LogLevel initial_level() {
    const char* env = std::getenv("PAGODA_LOG_LEVEL");
    if (!env) return LogLevel::kInfo;
    if (!std::strcmp(env, "debug")) return LogLevel::kDebug;
    if (!std::strcmp(env, "warning")) return LogLevel::kWarning;
    if (!std::strcmp(env, "error")) return LogLevel::kError;
    return LogLevel::kInfo;
}

std::atomic<int> g_level{static_cast<int>(initial_level())};

const char* level_name(LogLevel level) {
    switch (level) {
        case LogLevel::kDebug: return "DEBUG";
        case LogLevel::kInfo: return "INFO";
        case LogLevel::kWarning: return "WARNING";
        case LogLevel::kError: return "ERROR";
    }
    return "?";
}

}  // namespace

void set_log_level(LogLevel level) { g_level.store(static_cast<int>(level), std::memory_order_relaxed); }
LogLevel log_level() { return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed)); }

void log_message(LogLevel level, std::string_view message) {
    auto now = std::chrono::system_clock::now();
    std::time_t t = std::chrono::system_clock::to_time_t(now);
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
    std::tm tm{};
    gmtime_r(&t, &tm);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    // One fprintf per line so lines from several threads do not interleave.
    std::string line = std::string(stamp) + "." + std::to_string(1000 + ms).substr(1) + "Z " + level_name(level) + " " +
                       std::string(message) + "\n";
    std::fputs(line.c_str(), stderr);
}

}  // namespace pagoda
