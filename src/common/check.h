// CHECK: broken invariants (programmer errors) abort with file:line. Never for user input.
#pragma once

namespace pagoda::detail {
[[noreturn]] void check_failed(const char* file, int line, const char* condition, const char* message);
}

#define PAGODA_CHECK(cond)                                                               \
    do {                                                                                 \
        if (!(cond)) [[unlikely]] ::pagoda::detail::check_failed(__FILE__, __LINE__, #cond, nullptr); \
    } while (0)

#define PAGODA_CHECK_MSG(cond, msg)                                                      \
    do {                                                                                 \
        if (!(cond)) [[unlikely]] ::pagoda::detail::check_failed(__FILE__, __LINE__, #cond, (msg)); \
    } while (0)
