// libFuzzer target: the safetensors header parser and validator on arbitrary bytes. It must return
// an error or valid views (each inside the buffer), never crash, hang or read out of bounds.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "model/safetensors.h"

namespace {

void check(std::string_view bytes) {
    auto r = pagoda::model::parse_safetensors(bytes, "fuzz.safetensors");
    if (!r.ok()) return;
    const auto* begin = reinterpret_cast<const std::byte*>(bytes.data());
    const auto* end = begin + bytes.size();
    for (const auto& t : r.value().tensors) {
        if (t.data < begin || t.data > end || t.nbytes > static_cast<size_t>(end - t.data)) std::abort();
        if (static_cast<size_t>(t.numel()) * pagoda::model::storage_dtype_size(t.dtype) != t.nbytes) std::abort();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
    if (data[0] & 1) {
        // Mode 1: the input is the header text; give it a correct length prefix and `data[0]` bytes of
        // tensor data, so the fuzzer reaches the offset/shape validation instead of the length check.
        std::string file(8, '\0');
        const uint64_t n = input.size();
        for (int i = 0; i < 8; ++i)
            file[i] = static_cast<char>((n >> (8 * i)) & 0xff);
        file.append(input);
        file.append(data[0], '\0');
        check(file);
    } else {
        check(input);  // Mode 0: raw file bytes.
    }
    return 0;
}
