// Scalar helpers of the CPU kernels.
#include <cstdlib>
#include <string_view>

#include "common/check.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/internal.h"

namespace pagoda::kernels::cpu {

float* scratch(int which, size_t count) {
    constexpr int kSlots = 8;
    thread_local std::vector<float> buffers[kSlots];
    PAGODA_CHECK(which >= 0 && which < kSlots);
    auto& b = buffers[which];
    if (b.size() < count) b.resize(count);
    return b.data();
}

const std::array<float, 256>& e4m3_table() {
    static const std::array<float, 256> table = [] {
        std::array<float, 256> t{};
        for (int i = 0; i < 256; ++i)
            t[i] = f8e4m3_to_f32(static_cast<uint8_t>(i));
        return t;
    }();
    return table;
}

namespace {
Isa detect_isa() {
#if PAGODA_HAS_ISA_VARIANTS
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma"))
        return Isa::Avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::Avx2;
#endif
    return Isa::Base;
}
}  // namespace

Isa cpu_isa() {
    // PAGODA_CPU_ISA=baseline|avx2|avx512 caps the variant (tests run every variant this CPU has).
    static const Isa isa = [] {
        Isa best = detect_isa();
        if (const char* env = std::getenv("PAGODA_CPU_ISA")) {
            const std::string_view want(env);
            const Isa cap = want == "baseline" ? Isa::Base : want == "avx2" ? Isa::Avx2 : Isa::Avx512;
            if (cap < best) best = cap;
        }
        return best;
    }();
    return isa;
}

const char* isa_name(Isa isa) {
    switch (isa) {
        case Isa::Avx512:
            return "avx512";
        case Isa::Avx2:
            return "avx2";
        default:
            return "baseline";
    }
}

const char* active_isa() {
    return isa_name(cpu_isa());
}

float load_as_f32(const void* data, DType dtype, int64_t i) {
    switch (dtype) {
        case DType::F32:
            return static_cast<const float*>(data)[i];
        case DType::BF16:
            return bf16_to_f32(static_cast<const uint16_t*>(data)[i]);
        case DType::F16:
            return f16_to_f32(static_cast<const uint16_t*>(data)[i]);
        case DType::F64:
            return static_cast<float>(static_cast<const double*>(data)[i]);
        case DType::F8_E4M3:
            return f8e4m3_to_f32(static_cast<const uint8_t*>(data)[i]);
        case DType::F8_E5M2:
            return f8e5m2_to_f32(static_cast<const uint8_t*>(data)[i]);
        default:
            PAGODA_CHECK_MSG(false, "load_as_f32: not a float dtype");
    }
    return 0.0f;
}

void to_f32(const void* src, DType dtype, int64_t n, float* dst) {
    if (dtype == DType::F32) {
        const float* s = static_cast<const float*>(src);
        for (int64_t i = 0; i < n; ++i)
            dst[i] = s[i];
    } else if (dtype == DType::BF16) {
        const uint16_t* s = static_cast<const uint16_t*>(src);
        for (int64_t i = 0; i < n; ++i)
            dst[i] = bf16_to_f32(s[i]);
    } else {
        for (int64_t i = 0; i < n; ++i)
            dst[i] = load_as_f32(src, dtype, i);
    }
}

}  // namespace pagoda::kernels::cpu
