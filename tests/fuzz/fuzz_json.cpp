// Fuzzes the JSON parser: any bytes parse or fail with a message; what parses re-parses from
// its own dump to an equal document.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    auto parsed = pagoda::Json::parse(text, 64);
    if (!parsed.ok()) {
        if (parsed.message().empty()) std::abort();
        return 0;
    }
    auto again = pagoda::Json::parse(parsed->dump(), 64);
    if (!again.ok()) std::abort();
    // NaN never equals itself; compare dumps instead of values.
    if (again->dump() != parsed->dump()) std::abort();
    return 0;
}
