// cuBLASLt GEMMs for CudaOps::linear with more tokens than the GEMV kernel takes: y[T, N] = x[T, K] · W[N, K]ᵀ with
// 16-bit or fp32 inputs, fp32 output and accumulation. Descriptors are made once per problem (shape, leading
// dimensions, pointer alignments) and cached.
//
// Algorithm choice: cuBLASLt's heuristic ranks candidates, and its first choice is often slow for the skinny
// problems of decode steps (T of 16..512 against N, K of thousands: too few output tiles for 132 SMs, where split-K or
// smaller tiles win). So the first problem of each (shape, power-of-two bucket of T) times up to kCandidates of the
// heuristic's algorithms on the live operands and keeps the fastest; later problems of the same bucket use it when
// cuBLASLt accepts it for their T (cublasLtMatmulAlgoCheck), else the heuristic's first. Timing makes the choice,
// and so the rounding of results, depend on the run; PAGODA_GEMM_TUNING=0 turns it off (the heuristic's first
// algorithm always, reproducible).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <unordered_map>

#include "kernels/cuda/cuda_kernels.h"
#include "runtime/cuda/internal.h"

namespace pagoda {

class CudaGemm {
  public:
    explicit CudaGemm(cudaStream_t stream);
    ~CudaGemm();
    CudaGemm(const CudaGemm&) = delete;
    CudaGemm& operator=(const CudaGemm&) = delete;

    // y[T, N] (row stride ldd) = x[T, K] (row stride ldx) · w[N, K]ᵀ (row stride ldw); x and w of `type`.
    void run(kernels::cuda::ElemType type, const void* w, int64_t ldw, const void* x, int64_t ldx, float* y,
             int64_t ldd, int64_t N, int64_t T, int64_t K);

    // W8A8 on Hopper: y[T, N] = x[T, K] · w[N, K]ᵀ with x and w e4m3 (rows of K bytes) and their fp32 scales applied by
    // cuBLASLt, accumulating in fp32:
    //   kBlock128:   w_scales one per 128x128 block, [ceil(N/128), K/128] (K-major; K a multiple of 512, so that
    //                the stride between block columns is a multiple of 4); x_scales one per token and 128 inputs,
    //                [K/128, T] (token-major); N and T multiples of 4;
    //   kPerChannel: w_scales [N], x_scales [T] (cuBLASLt's outer-vector scaling).
    // cuBLAS's scaling-factor layouts for these modes (its documentation, "Scaling factors layouts"; Transformer
    // Engine's "GEMM ready" layouts and PyTorch's _scaled_mm checks say the same); scale pointers 16-byte aligned.
    // false when cuBLASLt offers no algorithm for the problem (the caller takes another path); the answer is kept.
    enum class Fp8Scaling { kBlock128 = 1, kPerChannel = 2 };
    bool run_fp8(Fp8Scaling scaling, const void* w, const float* w_scales, const void* x, const float* x_scales,
                 float* y, int64_t ldd, int64_t N, int64_t T, int64_t K);

    // While a CUDA graph is being captured nothing may be timed: new problems take the heuristic's first choice
    // until their first call outside a capture.
    void set_capturing(bool capturing) { capturing_ = capturing; }

    struct Key {
        int type;  // kernels::cuda::ElemType of A and B
        int64_t m, n, k, lda, ldb, ldd;
        uint32_t align_a, align_b, align_d;
        int scaling = 0;  // Fp8Scaling, 0 for unscaled inputs
        bool operator==(const Key&) const = default;
    };
    struct KeyHash {
        size_t operator()(const Key& k) const;
    };

  private:
    static constexpr int kCandidates = 8;
    struct Plan {
        cublasLtMatmulDesc_t desc = nullptr;
        cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
        cublasLtMatmulAlgo_t algo{};
        cublasLtMatmulHeuristicResult_t candidates[kCandidates] = {};  // the heuristic's ranking
        int found = 0;        // 0: cuBLASLt has no algorithm (only run_fp8 keeps such a plan)
        bool chosen = false;  // algo is final: timed, taken from the bucket, or tuning is off
    };
    // What one matmul reads and writes; the scales only for fp8 inputs.
    struct Operands {
        const void* w;
        const void* x;
        float* y;
        const float* w_scales = nullptr;
        const float* x_scales = nullptr;
    };
    Plan make_plan(const Key& key, const Operands& o);  // descriptors and the heuristic's candidates (found 0: none)
    Plan& plan_for(const Key& key, const Operands& o);
    void choose_algo(const Key& key, Plan& plan, const Operands& o);
    bool launch(const Plan& p, const cublasLtMatmulAlgo_t& algo, const Operands& o);

    cudaStream_t stream_;
    cublasLtHandle_t lt_ = nullptr;
    DeviceScratch workspace_scratch_;
    void* workspace_ = nullptr;
    cudaEvent_t start_ = nullptr, stop_ = nullptr;
    bool tuning_ = true;
    bool capturing_ = false;
    std::unordered_map<Key, Plan, KeyHash> plans_;
    std::unordered_map<Key, cublasLtMatmulAlgo_t, KeyHash> tuned_;  // key with n = the bucket of T
};

}  // namespace pagoda
