#include "common/check.h"

#include <cstdio>
#include <cstdlib>

namespace pagoda::detail {

void check_failed(const char* file, int line, const char* condition, const char* message) {
    std::fprintf(stderr, "pagoda: CHECK failed at %s:%d: %s%s%s\n", file, line, condition, message ? ": " : "",
                 message ? message : "");
    std::fflush(stderr);
    std::abort();
}

}  // namespace pagoda::detail
