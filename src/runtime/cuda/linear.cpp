// CudaOps::linear: dispatch on the weight's format; dense weights run the GEMV kernel for single tokens, cuBLASLt
// otherwise, with the input conversion they share; weight-only fp8, int4 and int8 run a GEMV on the stored bytes for
// one token (fp8 and int4: the tensor-core GEMV on weights of 2,048 rows or more, and it for 2-8 tokens), the
// weight-only tensor-core GEMM (also on the stored bytes) for a few, or cuBLASLt on a bf16 copy of the weight for many.
// linear_silu_mul and linear_gated_add: one token's GEMV with the gated MLP's SiLU·mul (dense and fp8 weights; int4
// on the tensor-core GEMV), or the gated shared expert's sigmoid(gate) times its rows added into the mixture's output,
// in the same kernel.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <tuple>

#include "common/log.h"
#include "runtime/cuda/cuda_ops.h"

namespace pagoda {

namespace {
// Which token counts take the tensor-core GEMV (kernels/cuda/gemm/gemv_mma.cu, up to kGemvMmaTokens) for the format
// whose variable is PAGODA_FP8_GEMV_MMA / PAGODA_INT4_GEMV_MMA: 0 none, 1 every count, 2 from two tokens (one token
// keeps the plain GEMV), wide: from two tokens and one token too on weights of kMmaOneTokenRows rows or more.
// Defaults: both wide. Measured on an H100 (session 28, pagoda_op_bench --table qwen3-8b --cold at one token,
// each setting twice in the same call, µs; the tensor-core GEMV with its default cluster split, gemv_mma.cu): AWQ
// int4 q/k/v 14.1 against the plain GEMV's 18.2, o 10.7 against 13.5, gate_up 40.4 against 50.5, down 22.2 against
// 30.7, W4A16 (bf16 scales) q/k/v 12.6 against 16.8 and down 20.2 against 27.5; but 1,024 x 4,096 (a k or v alone)
// 7.3 against 5.9. Batch-1 decode of the AWQ Qwen3-8B shape: 216.1 tok/s wide against 192.6 with 2 (and the cluster
// split off). fp8 won in the op bench too (q/k/v 17.6 against 19.8, o 11.8 against 12.9, gate_up 50.2 against 52.4,
// down 27.2 against 31.8) but lost end to end: 187.1 tok/s wide against 190.3 with 2, where its gate_up runs fused
// with SiLU·mul (linear_silu_mul, not in that table). With the f16 products that fp8 takes at one token since session
// 29 (gemv_mma.cu's f16_products) the tensor-core GEMV wins there too: gate/up + SiLU·mul 48.3 µs against the plain
// GEMV's 53.8, and batch-1 decode 200.4 tok/s against 190.5 (two runs each, same call), so fp8 is wide too.
inline constexpr int64_t kMmaOneTokenRows = 2048;
struct GemvMmaShare {
    int64_t fewest;       // the fewest tokens it takes on any weight
    bool one_token_wide;  // and one token on kMmaOneTokenRows rows or more
};
GemvMmaShare gemv_mma_share(const char* env, const char* fallback) {
    const char* v = std::getenv(env);
    const std::string s = v != nullptr ? v : fallback;
    if (s == "0") return {kcu::kGemvMmaTokens + 1, false};
    if (s == "1") return {1, false};
    return {2, s == "wide"};
}
bool takes_gemv_mma(const GemvMmaShare& share, int64_t T, int64_t N) {
    if (T > kcu::kGemvMmaTokens) return false;
    return T >= share.fewest || (T == 1 && share.one_token_wide && N >= kMmaOneTokenRows);
}
const GemvMmaShare& fp8_gemv_mma() {
    static const GemvMmaShare share = gemv_mma_share("PAGODA_FP8_GEMV_MMA", "wide");
    return share;
}
// int4 from 2 tokens: the alternative dequantises the whole weight into bf16 scratch for cuBLASLt on every call.
// Measured on an H100 (session 24, --cold): at 2 tokens qkv-sized 4,096 x 4,096 15.2 µs against 34.2, gate_up 32.2
// against 104.0, down 39.2 against 103.0; at 8 tokens 16.4 / 34.8 / 44.0 against 34.2 / 104.0 / 102.1.
const GemvMmaShare& int4_gemv_mma() {
    static const GemvMmaShare share = gemv_mma_share("PAGODA_INT4_GEMV_MMA", "wide");
    return share;
}
}  // namespace

void CudaOps::linear(const Tensor& x, const LinearWeight& w, const Tensor& y) {
    ops_checks::expect_linear(x, w, y, kHere, "linear");
    kcu::LoraArgs lora{};
    const bool with_lora = w.lora != nullptr && !lora_slots_.empty() && lora_args(x, *w.lora, y, lora);
    if (with_lora) begin_lora(lora);
    switch (w.format) {
        case WeightFormat::kBf16:
        case WeightFormat::kF16:
        case WeightFormat::kF32:
            linear_dense(x, w, y);
            break;
        case WeightFormat::kFp8E4M3:
            linear_fp8(x, w, y);
            break;
        case WeightFormat::kInt4:
        case WeightFormat::kInt8:  // the int4 kernels at 8 bits a value
            linear_int4(x, w, y);
            break;
    }
    if (with_lora) finish_lora(lora);
}

void CudaOps::linear_dense(const Tensor& x, const LinearWeight& w, const Tensor& y) {
    const Tensor& weight = w.data;
    const Tensor& bias = w.bias;
    const int64_t T = x.dim(0), N = w.out_features(), K = w.in_features();
    const kcu::ElemType wt = elem_type(weight.dtype(), "linear");
    expect(elem_type(w.input_dtype(), "linear") == wt, "linear",
           "weight data " + weight.to_string() + " does not match its format " + w.describe());
    const kcu::ElemType bt = bias.defined() ? elem_type(bias.dtype(), "linear") : kcu::ElemType::F32;
    // y may overwrite memory an earlier conversion came from.
    if (overlaps(y, converted_src_)) invalidate_converted();
    if (T == 0 || N == 0) return;
    // One token: the GEMV kernel (gemv.h says why only one).
    static_assert(kcu::kGemvTokens == 1);
    if (T == kcu::kGemvTokens) {
        const auto profile = profiler_.scope("linear (gemv)");
        kcu::launch_gemv(gemv_args(x, w, y), stream_);
        return;
    }
    const void* b = x.data();
    int64_t ldb = x.stride(0);
    if (wt != kcu::ElemType::F32) {  // the GEMM takes its input in the weights' 16-bit type (w.input_dtype())
        const auto profile = profiler_.scope("convert to bf16");
        b = converted_input(x, wt);
        ldb = K;
    }
    const auto profile = profiler_.scope("linear (gemm)");
    gemm_.run(wt, weight.data(), weight.stride(0), b, ldb, y.data_as<float>(), y.stride(0), N, T, K);
    if (bias.defined()) kcu::launch_add_bias(y.data_as<float>(), y.stride(0), bias.data(), bt, T, N, stream_);
}

void CudaOps::linear_fp8(const Tensor& given_x, const LinearWeight& w, const Tensor& y) {
    ops_checks::expect_fp8(w, kHere, "linear");
    const int64_t T = given_x.dim(0), N = w.out_features(), K = w.in_features();
    if (overlaps(y, converted_src_)) invalidate_converted();
    if (T == 0 || N == 0) return;
    Tensor x = given_x;
    if (w.input_quant_group != 0) {  // W8A8: the fp8 GEMM, or the paths below over the input rounded to fp8
        if (T >= 2 && gemm_w8a8(given_x, w, y)) return;
        x = fp8_rounded_input(given_x, w);
    }
    if (takes_gemv_mma(fp8_gemv_mma(), T, N)) {
        const kcu::GemvArgs a = gemv_args(x, w, y);
        if (kcu::gemv_fp8_mma_fits(a, T, x.stride(0))) {
            const auto profile = profiler_.scope("linear fp8 (gemv mma)");
            kcu::launch_gemv_fp8_mma(a, T, x.stride(0), y.stride(0), stream_);
            return;
        }
    }
    const ScaleBlocks blocks = w.scale_blocks();
    const kcu::WeightScales scales{w.scales.data_as<float>(), blocks.rows, blocks.cols, blocks.stride};
    if (T == kcu::kGemvTokens) {
        const auto profile = profiler_.scope("linear fp8 (gemv)");
        kcu::launch_gemv(gemv_args(x, w, y), stream_);
        return;
    }
    kcu::WoMmaArgs wo{};
    wo.w = w.data.data(), wo.w_stride = w.data.stride(0), wo.scales = scales;
    if (gemm_weight_only(x, wo, w, y)) return;
    void* weight = dequantized_weight_.get(static_cast<size_t>(N * K) * 2, stream_);
    {
        const auto profile = profiler_.scope("dequantize fp8");
        kcu::launch_dequantize_fp8({w.data.data(), w.data.stride(0), scales, N, K, weight}, stream_);
    }
    gemm_bf16_copy(x, weight, w, y);
}

Tensor CudaOps::fp8_rounded_input(const Tensor& x, const LinearWeight& w) {
    const int64_t T = x.dim(0), K = w.in_features();
    auto* rounded = static_cast<float*>(gathered_input_.get(static_cast<size_t>(T * K) * 4, stream_));
    {
        const auto profile = profiler_.scope("round input to fp8");
        kcu::QuantizeFp8ActivationsArgs a;
        a.x = x.data_as<float>(), a.x_stride = x.stride(0), a.T = T, a.K = K, a.group = w.input_quant_group;
        a.qdq = rounded;
        kcu::launch_quantize_fp8_activations(a, stream_);
    }
    // The buffer is rewritten by every such layer: a conversion cached for an earlier one is stale.
    invalidate_converted();
    return Tensor(rounded, DType::F32, Shape{T, K}, x.device());
}

namespace {
int64_t round_up(int64_t v, int64_t to) {
    return (v + to - 1) / to * to;
}
void add_weight_bias(const LinearWeight& w, const Tensor& y, cudaStream_t stream);
}  // namespace

bool CudaOps::gemm_w8a8(const Tensor& x, const LinearWeight& w, const Tensor& y) {
    if (!w8a8_gemm_) return false;
    const int64_t T = x.dim(0), N = w.out_features(), K = w.in_features();
    using Scaling = CudaGemm::Fp8Scaling;
    Scaling scaling;
    if (w.scale_layout == ScaleLayout::kBlock && w.block_rows == 128 && w.block_cols == 128 &&
        w.input_quant_group == 128 && K % 512 == 0) {
        scaling = Scaling::kBlock128;  // 2-D weight blocks, 1-D input groups (K % 512: whole 16-byte scale rows)
    } else if (w.scale_layout == ScaleLayout::kPerChannel && w.input_quant_group < 0 && K % 16 == 0) {
        scaling = Scaling::kPerChannel;
    } else {
        return false;
    }
    // Block scaling wants both GEMM sizes multiples of 4 (cuBLAS's scaling-factor layouts): the input gets zero rows up
    // to T4 tokens and the product goes to scratch, whose first T rows are copied to y.
    const bool block = scaling == Scaling::kBlock128;
    const int64_t T4 = block ? round_up(T, 4) : T, groups = block ? K / 128 : 1;
    // 16-byte rows and scales (fp8 rows of K bytes, f32 output rows), and a problem cuBLASLt has not refused before
    // (by power-of-two bucket of tokens: an answer for a decode batch says nothing about a prefill's).
    int64_t bucket = 1;
    while (bucket < T4)
        bucket *= 2;
    const std::tuple<int, int64_t, int64_t, int64_t> problem{static_cast<int>(scaling), N, K, bucket};
    if (N % 16 != 0 || w.data.stride(0) != K || y.stride(0) % 4 != 0 ||
        reinterpret_cast<uintptr_t>(w.scales.data()) % 16 != 0 || w8a8_refused_.count(problem))
        return false;
    const int64_t q_bytes = round_up(T4 * K, 256);
    auto* q = static_cast<uint8_t*>(gathered_input_.get(static_cast<size_t>(q_bytes + groups * T4 * 4), stream_));
    auto* scales = reinterpret_cast<float*>(q + q_bytes);
    {
        const auto profile = profiler_.scope("quantize input to fp8");
        kcu::QuantizeFp8ActivationsArgs a;
        a.x = x.data_as<float>(), a.x_stride = x.stride(0), a.T = T, a.K = K, a.group = w.input_quant_group;
        a.q = q, a.scales = scales, a.scale_ld = T4, a.padded_T = T4;
        kcu::launch_quantize_fp8_activations(a, stream_);
    }
    float* out = y.data_as<float>();
    int64_t ldd = y.stride(0);
    if (T4 != T) {
        out = static_cast<float*>(dequantized_weight_.get(static_cast<size_t>(T4 * N) * 4, stream_));
        ldd = N;
    }
    bool ran = false;
    {
        const auto profile = profiler_.scope("linear (fp8 gemm)");
        ran = gemm_.run_fp8(scaling, w.data.data(), w.scales.data_as<float>(), q, scales, out, ldd, N, T4, K);
    }
    if (!ran) {
        w8a8_refused_.insert(problem);
        PAGODA_LOG_WARNING("cuBLASLt has no fp8 GEMM for " + std::to_string(T4) + " tokens of a " + std::to_string(N) +
                           " x " + std::to_string(K) + " " + w.describe() +
                           " weight: its inputs are rounded to fp8 and the weight-only kernels run");
        return false;
    }
    if (out != y.data_as<float>()) {
        PAGODA_CUDA_OK(cudaMemcpy2DAsync(y.data(), static_cast<size_t>(y.stride(0)) * 4, out,
                                         static_cast<size_t>(N) * 4, static_cast<size_t>(N) * 4, static_cast<size_t>(T),
                                         cudaMemcpyDeviceToDevice, stream_));
    }
    add_weight_bias(w, y, stream_);
    return true;
}

namespace {
// y += w's bias, if it has one: after the GEMMs of the weight-only formats, which leave it out.
void add_weight_bias(const LinearWeight& w, const Tensor& y, cudaStream_t stream) {
    if (!w.bias.defined()) return;
    kcu::launch_add_bias(y.data_as<float>(), y.stride(0), w.bias.data(), elem_type(w.bias.dtype(), "linear"), y.dim(0),
                         y.dim(1), stream);
}
}  // namespace

// y = x · dense(w)ᵀ (+ w's bias) with `dense` the weight-only format's bf16 copy of w ([N, K], contiguous): cuBLASLt on
// the bf16 input, as the dense path.
void CudaOps::gemm_bf16_copy(const Tensor& x, const void* dense, const LinearWeight& w, const Tensor& y) {
    const int64_t T = x.dim(0), N = w.out_features(), K = w.in_features();
    const void* b = nullptr;
    {
        const auto profile = profiler_.scope("convert to bf16");
        b = converted_input(x, kcu::ElemType::BF16);
    }
    const auto profile = profiler_.scope("linear (gemm of the dequantised weight)");
    gemm_.run(kcu::ElemType::BF16, dense, K, b, K, y.data_as<float>(), y.stride(0), N, T, K);
    add_weight_bias(w, y, stream_);
}

namespace {
// The most tokens the weight-only tensor-core GEMM takes before the bf16 copy + cuBLASLt. Measured on an H200
// (session 18, pagoda_op_bench --table qwen3-8b, PAGODA_WO_MMA_MAX_TOKENS 1 against 128): with int4 weights the kernel
// lost to the copy at 64 tokens by 1.2-1.5x (43.0 against 28.6 µs at 4096 x 4096, 105.7 against 82.6 at 12288 x
// 4096), and below 64 tokens it runs the same 64-token tile, so int4 / int8 weights take the copy; fp8 weights keep
// the first choice of 128 (there the copy was measured only from 256 tokens, where it wins: 47.8 against 118.5 µs).
// PAGODA_WO_MMA_MAX_TOKENS=N sets both (1 turns the kernel off).
int64_t wo_mma_max_tokens(bool fp8) {
    static const int64_t chosen = [] {
        const char* env = std::getenv("PAGODA_WO_MMA_MAX_TOKENS");
        return env != nullptr ? std::max<int64_t>(1, std::atoll(env)) : int64_t{0};
    }();
    if (chosen > 0) return chosen;
    return fp8 ? 128 : 1;
}
}  // namespace

bool CudaOps::gemm_weight_only(const Tensor& x, kcu::WoMmaArgs a, const LinearWeight& w, const Tensor& y) {
    const int64_t T = x.dim(0), N = w.out_features(), K = w.in_features();
    if (T > wo_mma_max_tokens(/*fp8=*/a.w != nullptr)) return false;
    a.y = y.data_as<float>(), a.ldy = y.stride(0), a.T = T, a.N = N, a.K = K;
    a.x = nullptr, a.ldx = K;
    // The input's conversion is what the check needs first (its alignment); the converted copy is cached, so a
    // fallback to gemm_bf16_copy reuses it.
    {
        const auto profile = profiler_.scope("convert to bf16");
        a.x = converted_input(x, kcu::ElemType::BF16);
    }
    if (!kcu::wo_mma_fits(a)) return false;
    a.splits = kcu::plan_wo_mma_splits(T, N, K, sm_count_);
    const size_t floats = kcu::wo_mma_workspace_floats(T, N, a.splits);
    a.workspace = floats ? static_cast<float*>(dequantized_weight_.get(floats * 4, stream_)) : nullptr;
    {
        const auto profile = profiler_.scope("linear (weight-only mma)");
        kcu::launch_wo_mma(a, stream_);
    }
    add_weight_bias(w, y, stream_);
    return true;
}

namespace {
// The int4 GEMV of x's rows through all of w's rows (and its bias) into y.
kcu::GemvInt4Args int4_gemv_args(const Tensor& x, const LinearWeight& w, const Tensor& y, const char* op) {
    const Tensor& bias = w.bias;
    return {x.data_as<float>(),
            int4_weight(w, w.data.stride(0), op),
            bias.defined() ? bias.data() : nullptr,
            bias.defined() ? elem_type(bias.dtype(), op) : kcu::ElemType::F32,
            y.data_as<float>(),
            w.out_features(),
            w.in_features()};
}
}  // namespace

void CudaOps::linear_int4(const Tensor& given_x, const LinearWeight& w, const Tensor& y) {
    ops_checks::expect_int4(w, kHere, "linear");
    const int64_t T = given_x.dim(0), N = w.out_features(), K = w.in_features();
    if (overlaps(y, converted_src_)) invalidate_converted();
    if (T == 0 || N == 0) return;
    Tensor x = given_x;
    if (w.input_perm.defined()) {  // act-order: the layout's input k is x's column input_perm[k]
        auto* gathered = static_cast<float*>(gathered_input_.get(static_cast<size_t>(T * K) * 4, stream_));
        {
            const auto profile = profiler_.scope("gather act-order input");
            kcu::launch_gather_columns(given_x.data_as<float>(), given_x.stride(0), w.input_perm.data_as<int32_t>(),
                                       gathered, T, K, stream_);
        }
        x = Tensor(gathered, DType::F32, Shape{T, K}, given_x.device());
        // The buffer is reused by every act-order layer: a conversion cached for an earlier one is stale.
        invalidate_converted();
    }
    const kcu::GemvInt4Args gemv = int4_gemv_args(x, w, y, "linear");
    const kcu::Int4Weight& weight = gemv.w;
    if (takes_gemv_mma(int4_gemv_mma(), T, N) && kcu::gemv_int4_mma_fits(gemv, T, x.stride(0))) {
        const auto profile = profiler_.scope("linear int4 (gemv mma)");
        kcu::launch_gemv_int4_mma(gemv, T, x.stride(0), y.stride(0), stream_);
        return;
    }
    if (T == kcu::kGemvTokens) {
        const auto profile =
            profiler_.scope(w.format == WeightFormat::kInt8 ? "linear int8 (gemv)" : "linear int4 (gemv)");
        kcu::launch_gemv_int4(gemv, stream_);
        return;
    }
    kcu::WoMmaArgs wo{};
    wo.int_w = weight;
    if (gemm_weight_only(x, wo, w, y)) return;
    void* dense = dequantized_weight_.get(static_cast<size_t>(N * K) * 2, stream_);
    {
        const auto profile = profiler_.scope(w.format == WeightFormat::kInt8 ? "dequantize int8" : "dequantize int4");
        kcu::launch_dequantize_int4({weight, N, K, dense}, stream_);
    }
    gemm_bf16_copy(x, dense, w, y);
}

void CudaOps::linear_silu_mul(const Tensor& x, const LinearWeight& w, const Tensor& gu, const Tensor& out) {
    const int64_t I = out.dim(1);
    const bool adapters = w.lora != nullptr && !lora_slots_.empty();  // the delta goes on gu, before silu_mul
    if (x.dim(0) != kcu::kGemvTokens || adapters) return Ops::linear_silu_mul(x, w, gu, out);
    // int4 (not act-order: its input is gathered first) on the tensor-core GEMV, which stores silu(gate) · up as the
    // fp8 one does; int4 weights it does not take, and int8, run linear then silu_mul.
    if (w.format == WeightFormat::kInt4 && !w.input_perm.defined()) return linear_int4_silu_mul(x, w, gu, out);
    // (fp8 weights with fp8 activations take linear(), which rounds their input first.)
    const bool gemv_format = w.is_dense() || (w.format == WeightFormat::kFp8E4M3 && w.input_quant_group == 0);
    if (!gemv_format) return Ops::linear_silu_mul(x, w, gu, out);
    ops_checks::expect_linear(x, w, gu, kHere, "linear_silu_mul");
    expect_silu_mul_out(w, out, x.dim(0));
    if (w.format == WeightFormat::kFp8E4M3) ops_checks::expect_fp8(w, kHere, "linear_silu_mul");
    if (overlaps(out, converted_src_)) invalidate_converted();
    const auto profile = profiler_.scope("linear + silu_mul (gemv)");
    kcu::GemvArgs a = gemv_args(x, w, out);
    a.N = I;
    a.glu_rows = I;
    if (w.format == WeightFormat::kFp8E4M3 && takes_gemv_mma(fp8_gemv_mma(), 1, I) && kcu::gemv_fp8_mma_fits(a, 1, 0))
        kcu::launch_gemv_fp8_mma(a, 1, 0, 0, stream_);
    else
        kcu::launch_gemv(a, stream_);
}

void CudaOps::expect_silu_mul_out(const LinearWeight& w, const Tensor& out, int64_t T) {
    expect(w.out_features() == 2 * out.dim(1) && out.dim(0) == T && out.dtype() == DType::F32, "linear_silu_mul",
           "out must be F32 [T, " + std::to_string(w.out_features() / 2) + "], got " + out.to_string());
}

// One token's int4 gate/up (one weight, gate rows first) with SiLU·mul in the tensor-core GEMV's store, where linear()
// would take that GEMV for the weight: the same sums as linear's (the same kernel, chunks and cluster split: a block
// takes 16 gate and their 16 up rows where linear's takes 32 rows, and both grids have 2I / 32 blocks; a row's sum
// does not depend on its place in the mma tile, as the fp8 fused path also assumes), so the same bits as linear then
// silu_mul (Int4SiluMulTest), without the gate/up rows' round trip through memory and the silu_mul launch.
void CudaOps::linear_int4_silu_mul(const Tensor& x, const LinearWeight& w, const Tensor& gu, const Tensor& out) {
    ops_checks::expect_linear(x, w, gu, kHere, "linear_silu_mul");
    ops_checks::expect_int4(w, kHere, "linear_silu_mul");
    expect_silu_mul_out(w, out, x.dim(0));
    const int64_t I = out.dim(1);
    kcu::GemvInt4Args a = int4_gemv_args(x, w, out, "linear_silu_mul");
    a.N = I, a.glu_rows = I;  // I outputs, each from gate row n and up row I + n
    if (!fused_int4_silu_mul_ || !takes_gemv_mma(int4_gemv_mma(), 1, 2 * I) || !kcu::gemv_int4_mma_fits(a, 1, 0))
        return Ops::linear_silu_mul(x, w, gu, out);
    if (overlaps(out, converted_src_)) invalidate_converted();
    const auto profile = profiler_.scope("linear int4 + silu_mul (gemv mma)");
    kcu::launch_gemv_int4_mma(a, 1, 0, 0, stream_);
}

void CudaOps::linear_gated_add(const Tensor& x, const LinearWeight& w, const Tensor& y, const Tensor& gate,
                               const Tensor& out) {
    const char* op = "linear_gated_add";
    const bool adapters = w.lora != nullptr && !lora_slots_.empty();
    if (!shared_expert_add_ || x.dim(0) != kcu::kGemvTokens || !w.is_dense() || adapters)
        return Ops::linear_gated_add(x, w, y, gate, out);
    ops_checks::expect_linear(x, w, y, kHere, op);
    ops_checks::expect_mat(out, kHere, op, "out");
    ops_checks::expect_mat(gate, kHere, op, "gate");
    expect(
        out.shape() == y.shape() && gate.dim(0) == y.dim(0) && gate.dim(1) == 1 && out.data() != x.data(), op,
        "out " + out.to_string() + " must be shaped as y " + y.to_string() + ", gate [T, 1], got " + gate.to_string());
    const auto profile = profiler_.scope("linear + sigmoid_mul + add (gemv)");
    kcu::GemvArgs a = gemv_args(x, w, y);
    a.add_to = out.data_as<float>(), a.add_gate = gate.data_as<float>();
    kcu::launch_gemv(a, stream_);
    invalidate_converted();
}

kcu::GemvArgs CudaOps::gemv_args(const Tensor& x, const LinearWeight& w, const Tensor& y) {
    const Tensor& bias = w.bias;
    const bool fp8 = w.format == WeightFormat::kFp8E4M3;
    kcu::GemvArgs a{x.data_as<float>(),
                    w.data.data(),
                    fp8 ? kcu::ElemType::F8E4M3 : elem_type(w.data.dtype(), "linear"),
                    w.data.stride(0),
                    bias.defined() ? bias.data() : nullptr,
                    bias.defined() ? elem_type(bias.dtype(), "linear") : kcu::ElemType::F32,
                    y.data_as<float>(),
                    w.out_features(),
                    w.in_features()};
    if (fp8) {
        const ScaleBlocks blocks = w.scale_blocks();
        a.scales = {w.scales.data_as<float>(), blocks.rows, blocks.cols, blocks.stride};
    }
    return a;
}

const void* CudaOps::converted_input(const Tensor& x, kcu::ElemType type) {
    const Converted want{x.data(), x.dim(0), x.dim(1), x.stride(0), type};
    if (converted_src_.data == want.data && converted_src_.rows == want.rows && converted_src_.cols == want.cols &&
        converted_src_.stride == want.stride && converted_src_.type == want.type)
        return converted_buffer_;
    void* buffer = claim_conversion(x, type);
    kcu::launch_convert_rows(x.data_as<float>(), x.stride(0), buffer, type, x.dim(0), x.dim(1), stream_);
    return buffer;
}

void* CudaOps::hand_off_bf16(const Tensor& out, bool handoff) {
    if (!handoff) {
        invalidate_converted();
        return nullptr;
    }
    return claim_conversion(out, kcu::ElemType::BF16);
}

void* CudaOps::claim_conversion(const Tensor& x, kcu::ElemType type) {
    converted_buffer_ = convert_scratch_.get(static_cast<size_t>(x.dim(0) * x.dim(1)) * 2, stream_);
    converted_src_ = Converted{x.data(), x.dim(0), x.dim(1), x.stride(0), type};
    return converted_buffer_;
}

bool CudaOps::overlaps(const Tensor& y, const Converted& c) {
    if (!c.data) return false;
    const auto* y0 = static_cast<const char*>(y.data());
    const auto* y1 = y0 + ((y.dim(0) - 1) * y.stride(0) + y.dim(1)) * 4;
    const auto* c0 = static_cast<const char*>(c.data);
    const auto* c1 = c0 + ((c.rows - 1) * c.stride + c.cols) * 4;
    return y0 < c1 && c0 < y1;
}

}  // namespace pagoda
