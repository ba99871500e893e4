// Helpers for the CUDA tests: skip without a GPU, move tensors between host and device, poison, compare.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/backend.h"
#include "runtime/cuda_backend.h"
#include "tensor/buffer.h"

namespace pagoda::cuda_test {

#define PAGODA_REQUIRE_GPU()                                                                        \
    do {                                                                                            \
        if (::pagoda::cuda_device_count() == 0)                                                     \
            GTEST_SKIP() << (::pagoda::cuda_compiled() ? "no CUDA GPU visible: CUDA tests skipped"  \
                                                       : "built without CUDA: CUDA tests skipped"); \
    } while (0)

// A device tensor with its memory.
struct DeviceTensor {
    Buffer buffer;
    Tensor tensor;
};

inline DeviceTensor device_empty(Backend& gpu, DType dtype, const Shape& shape) {
    DeviceTensor d;
    auto b = Buffer::allocate(gpu.allocator(), static_cast<size_t>(shape.numel()) * dtype_size(dtype) + 16, 256);
    EXPECT_TRUE(b.ok()) << b.message();
    d.buffer = std::move(b).value();
    d.tensor = d.buffer.view(dtype, shape);
    return d;
}

inline DeviceTensor to_device(Backend& gpu, const Tensor& host) {
    DeviceTensor d = device_empty(gpu, host.dtype(), host.shape());
    gpu.copy(d.tensor, host);
    return d;
}

inline HostTensor to_host(Backend& gpu, const Tensor& dev) {
    HostTensor h = HostTensor::empty(dev.dtype(), dev.shape());
    gpu.copy(h.tensor, dev);
    return h;
}

// Fills a device F32 tensor (whole buffer) with NaN, so an output element the op forgets to write fails the test.
inline void poison(Backend& gpu, const DeviceTensor& d) {
    const int64_t n = static_cast<int64_t>(d.buffer.size() / 4);
    HostTensor nan = HostTensor::empty(DType::F32, Shape{n});
    for (int64_t i = 0; i < n; ++i)
        nan.tensor.data_as<float>()[i] = std::numeric_limits<float>::quiet_NaN();
    gpu.copy(Tensor(d.buffer.data(), DType::F32, Shape{n}, d.buffer.device()), nan.tensor);
}

// Uniform values in [-scale, scale], rounded to bf16 so a BF16 copy holds exactly the same numbers.
inline HostTensor random_f32(std::mt19937& rng, const Shape& shape, float scale = 1.0f) {
    HostTensor h = HostTensor::empty(DType::F32, shape);
    std::uniform_real_distribution<float> u(-scale, scale);
    float* p = h.tensor.data_as<float>();
    for (int64_t i = 0; i < shape.numel(); ++i)
        p[i] = bf16_to_f32(f32_to_bf16(u(rng)));
    return h;
}

inline HostTensor to_dtype(const Tensor& f32, DType dtype) {
    HostTensor h = HostTensor::empty(dtype, f32.shape());
    const float* s = f32.data_as<float>();
    for (int64_t i = 0; i < f32.numel(); ++i) {
        if (dtype == DType::BF16)
            h.tensor.data_as<uint16_t>()[i] = f32_to_bf16(s[i]);
        else if (dtype == DType::F16)
            h.tensor.data_as<uint16_t>()[i] = f32_to_f16(s[i]);
        else
            h.tensor.data_as<float>()[i] = s[i];
    }
    return h;
}

// max|got - ref| / max|ref| over the elements of two same-shaped F32 views (strided, rank ≤ 3); NaN anywhere fails.
inline float rel_error(const Tensor& ref, const Tensor& got) {
    EXPECT_EQ(ref.shape(), got.shape());
    const int r = ref.rank();
    const int64_t d0 = ref.dim(0), d1 = r > 1 ? ref.dim(1) : 1, d2 = r > 2 ? ref.dim(2) : 1;
    float max_ref = 0, max_diff = 0;
    for (int64_t i = 0; i < d0; ++i)
        for (int64_t j = 0; j < d1; ++j)
            for (int64_t k = 0; k < d2; ++k) {
                auto at = [&](const Tensor& t) {
                    int64_t off = i * t.stride(0);
                    if (r > 1) off += j * t.stride(1);
                    if (r > 2) off += k * t.stride(2);
                    return t.data_as<float>()[off];
                };
                const float a = at(ref), b = at(got);
                if (std::isnan(b) || std::isnan(a)) return std::numeric_limits<float>::infinity();
                max_ref = std::max(max_ref, std::fabs(a));
                max_diff = std::max(max_diff, std::fabs(a - b));
            }
    return max_diff / std::max(max_ref, 1e-30f);
}

}  // namespace pagoda::cuda_test
