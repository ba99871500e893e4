// Helpers for the runtime tests: random host tensors and comparisons.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "tensor/buffer.h"

namespace pagoda::testing {

inline HostTensor random_f32(Shape shape, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
    HostTensor t = HostTensor::empty(DType::F32, shape);
    std::uniform_real_distribution<float> d(lo, hi);
    float* p = t.tensor.data_as<float>();
    for (int64_t i = 0; i < t.tensor.numel(); ++i)
        p[i] = d(rng);
    return t;
}

// A random weight in `dtype` plus its exact f32 values (what the kernel sees after conversion).
struct Weight {
    HostTensor stored;
    std::vector<float> values;
};
inline Weight random_weight(DType dtype, Shape shape, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
    Weight w;
    w.stored = HostTensor::empty(dtype, shape);
    std::uniform_real_distribution<float> d(lo, hi);
    const int64_t n = shape.numel();
    w.values.resize(n);
    for (int64_t i = 0; i < n; ++i) {
        const float v = d(rng);
        if (dtype == DType::BF16) {
            const uint16_t b = f32_to_bf16(v);
            w.stored.tensor.data_as<uint16_t>()[i] = b;
            w.values[i] = bf16_to_f32(b);
        } else if (dtype == DType::F16) {
            const uint16_t b = f32_to_f16(v);
            w.stored.tensor.data_as<uint16_t>()[i] = b;
            w.values[i] = f16_to_f32(b);
        } else {
            w.stored.tensor.data_as<float>()[i] = v;
            w.values[i] = v;
        }
    }
    return w;
}

inline std::vector<float> to_vector(const Tensor& t) {
    const float* p = t.data_as<float>();
    return std::vector<float>(p, p + t.numel());
}

// max |a-b| <= rtol * max|ref| + atol
inline void expect_close(const float* got, const std::vector<double>& ref, double rtol, double atol, const char* what) {
    double mx = 0.0;
    for (double r : ref)
        mx = std::max(mx, std::abs(r));
    for (size_t i = 0; i < ref.size(); ++i)
        ASSERT_NEAR(got[i], ref[i], rtol * mx + atol) << what << " at " << i;
}

}  // namespace pagoda::testing
