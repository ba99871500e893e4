// The CUDA rounding of activations to fp8 (W8A8: kernels/cuda/gemm/fp8_activations.h) against the CPU's, bit for bit:
// the e4m3 bytes and scales the fp8 GEMM takes (scales in its token-major layout with padded rows), and the rounded
// f32 values the other paths take, for groups of 128, ragged groups and whole rows, over values spanning e4m3's range
// (ties, subnormals after scaling, an all-zero group, huge and tiny magnitudes); and the zero rows that pad the token
// count to a multiple of 4 for the GEMM.
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/gemm/fp8_activations.h"
#include "tensor/dtype.h"

namespace pagoda {
namespace {

template <class T>
T* device_copy(const std::vector<T>& host) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, host.size() * sizeof(T) + 16), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    return static_cast<T*>(p);
}

template <class T>
std::vector<T> host_copy(const T* device, size_t n) {
    std::vector<T> h(n);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(h.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
}

void check(int64_t T, int64_t K, int64_t stride, int64_t group, std::mt19937& rng) {
    SCOPED_TRACE("T=" + std::to_string(T) + " K=" + std::to_string(K) + " group=" + std::to_string(group));
    std::vector<float> x(static_cast<size_t>(T * stride));
    std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
    std::uniform_int_distribution<int> exponent(-20, 20);
    for (float& v : x)
        v = std::ldexp(mantissa(rng), exponent(rng));
    for (int64_t k = 0; k < std::min<int64_t>(K, 128); ++k)
        x[static_cast<size_t>(k)] = 0.0f;  // row 0's first group all zero
    if (T > 1) x[static_cast<size_t>(stride)] = 448.0f, x[static_cast<size_t>(stride) + 1] = 17.0f;  // a tie
    const int64_t g = group > 0 ? group : K, groups = (K + g - 1) / g, ld = (T + 3) / 4 * 4;

    std::vector<float> want(static_cast<size_t>(T * K));
    kernels::cpu::launch_quantize_fp8_activations({x.data(), stride, want.data(), T, K, group});

    float* dx = device_copy(x);
    float* dqdq = device_copy(std::vector<float>(static_cast<size_t>(T * K), std::nanf("")));
    uint8_t* dq = device_copy(std::vector<uint8_t>(static_cast<size_t>(ld * K), 0xAB));
    float* dscales = device_copy(std::vector<float>(static_cast<size_t>(groups * ld), -1.0f));
    kernels::cuda::QuantizeFp8ActivationsArgs a;
    a.x = dx, a.x_stride = stride, a.T = T, a.K = K, a.group = group;
    a.qdq = dqdq, a.q = dq, a.scales = dscales, a.scale_ld = ld, a.padded_T = ld;
    kernels::cuda::launch_quantize_fp8_activations(a, nullptr);
    const auto qdq = host_copy(dqdq, static_cast<size_t>(T * K));
    const auto q = host_copy(dq, static_cast<size_t>(ld * K));
    const auto scales = host_copy(dscales, static_cast<size_t>(groups * ld));
    for (int64_t t = 0; t < T; ++t) {
        for (int64_t k = 0; k < K; ++k) {
            const size_t i = static_cast<size_t>(t * K + k);
            ASSERT_EQ(std::memcmp(&qdq[i], &want[i], 4), 0)
                << "t=" << t << " k=" << k << ": " << qdq[i] << " vs " << want[i];
            // The bytes and the scale give the same value: what the fp8 GEMM multiplies.
            const float scale = scales[static_cast<size_t>((k / g) * ld + t)];
            ASSERT_EQ(f8e4m3_to_f32(q[i]) * scale, want[i]) << "t=" << t << " k=" << k;
        }
    }
    for (int64_t t = T; t < ld; ++t) {  // the padding rows: zero inputs
        for (int64_t k = 0; k < K; ++k)
            ASSERT_EQ(q[static_cast<size_t>(t * K + k)], 0) << "padding row " << t;
        for (int64_t gi = 0; gi < groups; ++gi)
            ASSERT_EQ(scales[static_cast<size_t>(gi * ld + t)], 1e-12f);
    }
    cudaFree(dx), cudaFree(dqdq), cudaFree(dq), cudaFree(dscales);
}

TEST(Fp8Activations, CudaRoundsAsTheCpu) {
    PAGODA_REQUIRE_GPU();
    std::mt19937 rng(21);
    check(7, 512, 520, 128, rng);   // whole groups, T not a multiple of 4 (padded scale rows)
    check(3, 300, 300, 128, rng);   // a ragged last group
    check(5, 4096, 4100, -1, rng);  // one group a token: 512 threads, 8 inputs held each
    check(1, 96, 96, 32, rng);
    check(2, 12288, 12288, -1, rng);  // 1,024 threads: 8 inputs held each, 4 more read twice
    check(3, 100, 100, -1, rng);      // fewer inputs than threads
}

}  // namespace
}  // namespace pagoda
