// Logging to stderr with a level; debug logging is compiled in and off by default.
#pragma once

#include <string_view>

namespace pagoda {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

void set_log_level(LogLevel level);
LogLevel log_level();
void log_message(LogLevel level, std::string_view message);

}  // namespace pagoda

#define PAGODA_LOG(level, msg)                                                       \
    do {                                                                             \
        if (static_cast<int>(level) >= static_cast<int>(::pagoda::log_level()))      \
            ::pagoda::log_message(level, (msg));                                     \
    } while (0)
#define PAGODA_LOG_DEBUG(msg) PAGODA_LOG(::pagoda::LogLevel::kDebug, msg)
#define PAGODA_LOG_INFO(msg) PAGODA_LOG(::pagoda::LogLevel::kInfo, msg)
#define PAGODA_LOG_WARNING(msg) PAGODA_LOG(::pagoda::LogLevel::kWarning, msg)
#define PAGODA_LOG_ERROR(msg) PAGODA_LOG(::pagoda::LogLevel::kError, msg)
