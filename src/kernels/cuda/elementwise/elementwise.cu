// Embedding gather, SiLU·mul / sigmoid·mul / add, dtype-converting row copies and gathers, bias add, argmax,
// and the F32 -> BF16/F16 conversion of GEMM inputs.
#include <cfloat>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/elementwise/elementwise.h"

namespace pagoda::kernels::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void embedding_kernel(EmbeddingArgs a) {
    PAGODA_KERNEL_PROLOGUE();
    const int64_t n = a.T * a.H;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t t = i / a.H, h = i % a.H;
        const int64_t id = a.ids[t];
        a.out[t * a.out_stride + h] = load_as_f32(a.table, a.table_type, id * a.table_stride + h);
    }
}

__device__ __forceinline__ float binary_op(BinaryOp op, float x, float y) {
    switch (op) {
        case BinaryOp::SiluMul:
            return silu(x) * y;
        case BinaryOp::SigmoidMul:
            return x * sigmoid(y);
        default:
            return x + y;
    }
}

// Rows (t, h) from blockIdx.y, striding by gridDim.y past 65,535; a row's columns from blockIdx.x. The flat loop this
// replaces split every element's index with four 64-bit divisions; SiLU·mul of a 2,048-token prefill took 7.6 ms a
// step with it on an H100 (session 36) and 3.49 ms with this kernel, which also writes the bf16 copy (session 38).
// kVec4: four columns a thread (N % 4 == 0, every row 16-byte aligned; launch_binary checks); the same bits either way.
template <bool kVec4>
__global__ void binary_kernel(BinaryArgs a) {
    PAGODA_KERNEL_PROLOGUE();
    const int rows = static_cast<int>(a.T * a.H), H = static_cast<int>(a.H);
    const int64_t cols = kVec4 ? a.N / 4 : a.N;
    const int64_t c0 = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
    if (c0 >= cols) return;
    for (int row = blockIdx.y; row < rows; row += gridDim.y) {
        const int t = row / H, h = row - t * H;
        const float* x = a.a + t * a.a_stride + h * a.a_stride_h;
        const float* y = a.b + t * a.b_stride + h * a.b_stride_h;
        float* out = a.out + t * a.out_stride + h * a.out_stride_h;
        __nv_bfloat16* out16 = a.out_bf16 ? static_cast<__nv_bfloat16*>(a.out_bf16) + row * a.N : nullptr;
        for (int64_t c = c0; c < cols; c += int64_t(gridDim.x) * blockDim.x) {
            if constexpr (kVec4) {
                const float4 xv = reinterpret_cast<const float4*>(x)[c];
                const float4 yv =
                    a.b_cols == 1 ? make_float4(y[0], y[0], y[0], y[0]) : reinterpret_cast<const float4*>(y)[c];
                const float4 v = make_float4(binary_op(a.op, xv.x, yv.x), binary_op(a.op, xv.y, yv.y),
                                             binary_op(a.op, xv.z, yv.z), binary_op(a.op, xv.w, yv.w));
                reinterpret_cast<float4*>(out)[c] = v;
                if (out16) {  // 8 bytes a thread: launch_binary checked the copy's alignment
                    const __nv_bfloat162 lo{from_f32<__nv_bfloat16>(v.x), from_f32<__nv_bfloat16>(v.y)};
                    const __nv_bfloat162 hi{from_f32<__nv_bfloat16>(v.z), from_f32<__nv_bfloat16>(v.w)};
                    reinterpret_cast<uint2*>(out16)[c] =
                        make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
                }
            } else {
                const float v = binary_op(a.op, x[c], y[a.b_cols == 1 ? 0 : c]);
                out[c] = v;
                if (out16) out16[c] = from_f32<__nv_bfloat16>(v);
            }
        }
    }
}

__global__ void copy_kernel(CopyArgs a) {
    PAGODA_KERNEL_PROLOGUE();
    const int64_t n = a.T * a.N;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t t = i / a.N, c = i % a.N;
        const int64_t src_row = a.rows ? a.rows[t] : t;
        store_from_f32(a.dst, a.dst_type, t * a.dst_stride + c,
                       load_as_f32(a.src, a.src_type, src_row * a.src_stride + c));
    }
}

__global__ void add_bias_kernel(float* y, int64_t y_stride, const void* bias, ElemType bias_type, int64_t T,
                                int64_t N) {
    PAGODA_KERNEL_PROLOGUE();
    const int64_t n = T * N;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t t = i / N, c = i % N;
        y[t * y_stride + c] += load_as_f32(bias, bias_type, c);
    }
}

// One block per row; (value, index) reduced with the lower index winning ties. NaN compares false and loses.
// One block a row, 1,024 threads: a decode step's row is one block on one SM, so the pass is as fast as the loads the
// block keeps in flight. Each thread reads 16-byte chunks (4 logits) tid, tid + blockDim, ... with the loads of four
// chunks issued before any is compared, then the ids past the last whole chunk (a row not 16-byte aligned: all of
// them one by one). A thread sees its ids in increasing order, so its first maximum is its lowest id.
constexpr int kArgmaxThreads = 1024;
constexpr int kArgmaxUnroll = 4;

__device__ __forceinline__ void argmax_take(float v, int64_t i, int64_t V, float& best, int64_t& best_i) {
    if (v > best || (best_i == V && !(v != v))) best = v, best_i = i;  // best_i == V: none yet (NaN never taken)
}

__global__ void __launch_bounds__(kArgmaxThreads)
    argmax_kernel(const float* logits, int64_t stride, int64_t V, int32_t* out) {
    PAGODA_KERNEL_PROLOGUE();
    const float* row = logits + blockIdx.x * stride;
    float best = -INFINITY;
    int64_t best_i = V;  // "none yet": loses every tie
    int64_t tail = 0;
    if ((reinterpret_cast<uintptr_t>(row) & 15) == 0) {
        const float4* row4 = reinterpret_cast<const float4*>(row);
        const int64_t chunks = V / 4;
        for (int64_t c0 = threadIdx.x; c0 < chunks; c0 += int64_t(kArgmaxUnroll) * blockDim.x) {
            float4 x[kArgmaxUnroll];
#pragma unroll
            for (int u = 0; u < kArgmaxUnroll; ++u) {
                const int64_t c = c0 + int64_t(u) * blockDim.x;
                x[u] = c < chunks ? __ldg(row4 + c) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            }
#pragma unroll
            for (int u = 0; u < kArgmaxUnroll; ++u) {
                const int64_t c = c0 + int64_t(u) * blockDim.x;
                if (c >= chunks) break;
                argmax_take(x[u].x, 4 * c, V, best, best_i);
                argmax_take(x[u].y, 4 * c + 1, V, best, best_i);
                argmax_take(x[u].z, 4 * c + 2, V, best, best_i);
                argmax_take(x[u].w, 4 * c + 3, V, best, best_i);
            }
        }
        tail = chunks * 4;
    }
    for (int64_t i = tail + threadIdx.x; i < V; i += blockDim.x)
        argmax_take(row[i], i, V, best, best_i);
    __shared__ float vals[kArgmaxThreads];
    __shared__ int64_t idxs[kArgmaxThreads];
    vals[threadIdx.x] = best;
    idxs[threadIdx.x] = best_i;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            const float ov = vals[threadIdx.x + s];
            const int64_t oi = idxs[threadIdx.x + s];
            const float mv = vals[threadIdx.x];
            const int64_t mi = idxs[threadIdx.x];
            if (oi != V && (mi == V || ov > mv || (ov == mv && oi < mi)))
                vals[threadIdx.x] = ov, idxs[threadIdx.x] = oi;
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = static_cast<int32_t>(idxs[0] == V ? 0 : idxs[0]);
}

template <typename T>
__global__ void convert_rows_kernel(const float* src, int64_t src_stride, T* dst, int64_t rows, int64_t K) {
    PAGODA_KERNEL_PROLOGUE();
    const int64_t n = rows * K;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t t = i / K, c = i % K;
        dst[i] = from_f32<T>(src[t * src_stride + c]);
    }
}

// Four elements per thread when rows are 16-byte aligned (the usual case: contiguous activations, K % 4 == 0).
template <typename T>
__global__ void convert_rows_vec4_kernel(const float* src, int64_t src_stride, T* dst, int64_t rows, int64_t K) {
    PAGODA_KERNEL_PROLOGUE();
    const int64_t k4 = K / 4, n = rows * k4;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t t = i / k4, c = (i % k4) * 4;
        const float4 v = *reinterpret_cast<const float4*>(src + t * src_stride + c);
        T* d = dst + t * K + c;
        d[0] = from_f32<T>(v.x), d[1] = from_f32<T>(v.y), d[2] = from_f32<T>(v.z), d[3] = from_f32<T>(v.w);
    }
}

template <typename T>
void convert_rows(bool vec4, unsigned blocks, const float* src, int64_t src_stride, void* dst, int64_t rows, int64_t K,
                  cudaStream_t stream) {
    T* d = static_cast<T*>(dst);
    if (vec4)
        launch_kernel<convert_rows_vec4_kernel<T>>(blocks, kThreads, 0, stream, src, src_stride, d, rows, K);
    else
        launch_kernel<convert_rows_kernel<T>>(blocks, kThreads, 0, stream, src, src_stride, d, rows, K);
}

// One thread an output element; the reads of a row are scattered by perm but stay within the row (K floats, in L1/L2).
__global__ void gather_columns_kernel(const float* x, int64_t x_stride, const int32_t* perm, float* out, int64_t T,
                                      int64_t K) {
    PAGODA_KERNEL_PROLOGUE();
    const int64_t n = T * K;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t t = i / K, k = i % K;
        out[i] = x[t * x_stride + perm[k]];
    }
}

unsigned blocks_for(int64_t n) {
    const unsigned b = grid_for(n, kThreads);
    return b > 65535u * 16 ? 65535u * 16 : b;
}

}  // namespace

void launch_embedding(const EmbeddingArgs& a, cudaStream_t stream) {
    if (a.T == 0) return;
    launch_kernel<embedding_kernel>(blocks_for(a.T * a.H), kThreads, 0, stream, a);
    PAGODA_CUDA_CHECK_LAUNCH();
}

void launch_binary(const BinaryArgs& a, cudaStream_t stream) {
    if (a.T == 0 || a.N == 0 || a.H == 0) return;
    PAGODA_KERNEL_REQUIRE(a.T * a.H <= INT32_MAX, "binary: more than 2^31 rows");
    const auto rows16 = [](const float* p, int64_t stride, int64_t stride_h) {  // every row 16-byte aligned
        return aligned(p, 16) && stride % 4 == 0 && stride_h % 4 == 0;
    };
    PAGODA_KERNEL_REQUIRE(a.out_bf16 == nullptr || a.H == 1, "binary: a bf16 copy of out only over [T, N]");
    const bool vec4 = a.N % 4 == 0 && rows16(a.a, a.a_stride, a.a_stride_h) &&
                      rows16(a.out, a.out_stride, a.out_stride_h) &&
                      (a.b_cols == 1 || rows16(a.b, a.b_stride, a.b_stride_h)) && aligned(a.out_bf16, 8);
    const int64_t cols = vec4 ? a.N / 4 : a.N, rows = a.T * a.H;
    const dim3 grid(grid_for(cols, kThreads), static_cast<unsigned>(rows < 65535 ? rows : 65535));
    if (vec4)
        launch_kernel<binary_kernel<true>>(grid, kThreads, 0, stream, a);
    else
        launch_kernel<binary_kernel<false>>(grid, kThreads, 0, stream, a);
    PAGODA_CUDA_CHECK_LAUNCH();
}

void launch_copy(const CopyArgs& a, cudaStream_t stream) {
    if (a.T == 0 || a.N == 0) return;
    launch_kernel<copy_kernel>(blocks_for(a.T * a.N), kThreads, 0, stream, a);
    PAGODA_CUDA_CHECK_LAUNCH();
}

void launch_add_bias(float* y, int64_t y_stride, const void* bias, ElemType bias_type, int64_t T, int64_t N,
                     cudaStream_t stream) {
    if (T == 0 || N == 0) return;
    launch_kernel<add_bias_kernel>(blocks_for(T * N), kThreads, 0, stream, y, y_stride, bias, bias_type, T, N);
    PAGODA_CUDA_CHECK_LAUNCH();
}

void launch_argmax(const float* logits, int64_t stride, int64_t R, int64_t V, int32_t* out, cudaStream_t stream) {
    if (R == 0) return;
    launch_kernel<argmax_kernel>(static_cast<unsigned>(R), kArgmaxThreads, 0, stream, logits, stride, V, out);
    PAGODA_CUDA_CHECK_LAUNCH();
}

void launch_gather_columns(const float* x, int64_t x_stride, const int32_t* perm, float* out, int64_t T, int64_t K,
                           cudaStream_t stream) {
    if (T == 0 || K == 0) return;
    launch_kernel<gather_columns_kernel>(blocks_for(T * K), kThreads, 0, stream, x, x_stride, perm, out, T, K);
    PAGODA_CUDA_CHECK_LAUNCH();
}

void launch_convert_rows(const float* src, int64_t src_stride, void* dst, ElemType dst_type, int64_t T, int64_t K,
                         cudaStream_t stream) {
    if (T == 0 || K == 0) return;
    PAGODA_KERNEL_REQUIRE(dst_type != ElemType::F32, "convert_rows: destination must be BF16 or F16");
    const bool vec4 = K % 4 == 0 && src_stride % 4 == 0 && reinterpret_cast<uintptr_t>(src) % 16 == 0;
    const unsigned blocks = blocks_for(vec4 ? T * K / 4 : T * K);
    if (dst_type == ElemType::BF16)
        convert_rows<__nv_bfloat16>(vec4, blocks, src, src_stride, dst, T, K, stream);
    else
        convert_rows<__half>(vec4, blocks, src, src_stride, dst, T, K, stream);
    PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace pagoda::kernels::cuda
