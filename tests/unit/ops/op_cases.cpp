// The op harness's cases: one builder per op (what tensors the op takes, which outputs are compared, what one call
// moves and computes) and the tables that list its shapes. A new case is one line in a table; a new op is one
// builder plus its lines.
#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <numeric>
#include <random>
#include <span>

#include "ops/op_harness.h"
#include "tensor/dtype.h"

namespace pagoda::op_harness {

namespace {

std::string fmt(const char* f, ...) {
    char buf[160];
    va_list args;
    va_start(args, f);
    std::vsnprintf(buf, sizeof buf, f, args);
    va_end(args);
    return buf;
}

const char* kind_name(NormKind k) {
    return k == NormKind::Plain ? "plain" : "zero_centred";
}

const char* dtype_str(DType d) {
    return d == DType::BF16      ? "bf16"
           : d == DType::F16     ? "f16"
           : d == DType::I32     ? "i32"
           : d == DType::F8_E4M3 ? "fp8"
                                 : "f32";
}

// q heads interleaved with gate heads, as Qwen3-Next's q/gate projection leaves them: a [T, 2·H·D] buffer seen as
// [T, H, D] with head stride 2·D.
Tensor gated_heads(const Tensor& buf, int64_t H, int64_t D) {
    const int64_t strides[3] = {buf.stride(0), 2 * D, 1};
    return Tensor(buf.data(), DType::F32, Shape{buf.dim(0), H, D}, strides, buf.device());
}

// --- KV caches ---------------------------------------------------------------------------------------------------

// The cache a case writes or reads: the backend's own dtype (F32 on the CPU, BF16 on CUDA), or e4m3 (the same on
// every backend) with fixed scales, with scales pending, which the case's write calculates from its rows' amax, or
// with per-head factors beside the fixed scales (a checkpoint's per-attention-head scales).
enum class Kv { Native, Fp8, Fp8Calc, Fp8Heads };

const char* kv_suffix(Kv kv) {
    return kv == Kv::Fp8 ? " kv=fp8" : kv == Kv::Fp8Calc ? " kv=fp8-calc" : kv == Kv::Fp8Heads ? " kv=fp8-heads" : "";
}

// A layer's K and V caches [blocks, bs, Hk, D]. Fixed fp8 scales are 1/64 (K) and 1/32 (V): activations in [-1, 1]
// (or [-2, 2]) are stored in e4m3's upper range, and a case with `saturate` scales them by 1/1024 instead, so values
// beyond ±448 show the saturation. The cached prefixes of an fp8 cache hold random e4m3 values of the stored range.
KvCacheLayer kv_layer(CaseRun& r, const Shape& shape, Kv kv, bool saturate = false) {
    if (kv == Kv::Native) return {r.kv_cache(shape), r.kv_cache(shape), nullptr};
    KvScales& scales =
        r.keep(KvScales{saturate ? 1.0f / 1024 : 1.0f / 64, saturate ? 1.0f / 1024 : 1.0f / 32, kv == Kv::Fp8Calc});
    if (kv == Kv::Fp8Heads) {  // K's heads 0.5, 0.625, ..., V's 1.5, 1.375, ... (binary-exact, cycling over 8)
        const int64_t Hk = shape[2];
        HostTensor f = HostTensor::empty(DType::F32, Shape{2, Hk});
        auto* v = static_cast<float*>(f.tensor.data());
        for (int64_t h = 0; h < Hk; ++h)
            v[h] = 0.5f + 0.125f * static_cast<float>(h % 8), v[Hk + h] = 1.5f - 0.125f * static_cast<float>(h % 8);
        const Tensor heads = r.upload_dense(f);
        scales.k_heads = static_cast<const float*>(heads.data());
        scales.v_heads = scales.k_heads + Hk;
    }
    return {r.dense(shape, DType::F8_E4M3, 64.0f), r.dense(shape, DType::F8_E4M3, 32.0f), &scales};
}

// --- sequences of a paged batch --------------------------------------------------------------------------------

struct Seq {
    int32_t ctx, n;  // cached tokens, new tokens
};

// A batch of `seqs` over a pool with its blocks shuffled (as a server's are after a while), plus a few spare blocks.
struct PagedBatch {
    ForwardBatch* batch;
    int32_t num_blocks;
    double kv_tokens;     // Σ seq_len: the cached and new keys attention reads
    double causal_pairs;  // Σ over new tokens of the keys each one attends to
};
PagedBatch paged_batch(CaseRun& r, const std::vector<Seq>& seqs, int32_t bs, int32_t first_slot = 0) {
    int32_t blocks = 0;
    for (const Seq& s : seqs)
        blocks += (s.ctx + s.n + bs - 1) / bs;
    const int32_t num_blocks = blocks + 7;
    std::vector<int32_t> pool(static_cast<size_t>(num_blocks));
    std::iota(pool.begin(), pool.end(), 0);
    std::shuffle(pool.begin(), pool.end(), std::mt19937(7));  // the same on every backend
    auto builder = std::make_unique<ForwardBatchBuilder>(bs);
    size_t next = 0;
    PagedBatch p{nullptr, num_blocks, 0, 0};
    int32_t slot = first_slot;
    for (const Seq& s : seqs) {
        std::vector<int32_t> table(static_cast<size_t>((s.ctx + s.n + bs - 1) / bs));
        for (auto& b : table)
            b = pool[next++];
        const std::vector<int32_t> tokens(static_cast<size_t>(s.n), 1);
        builder->add_sequence(tokens, s.ctx, table, slot++);
        p.kv_tokens += s.ctx + s.n;
        p.causal_pairs += static_cast<double>(s.n) * s.ctx + 0.5 * s.n * (s.n + 1.0);
    }
    p.batch = &r.batch(std::move(builder));
    return p;
}

std::vector<Seq> decode_seqs(int n, int32_t max_ctx) {
    std::mt19937 rng(11);
    std::vector<Seq> s;
    for (int i = 0; i < n; ++i)
        s.push_back({static_cast<int32_t>(rng() % static_cast<uint32_t>(max_ctx)), 1});
    return s;
}

std::string seqs_name(const std::vector<Seq>& seqs) {
    std::string s;
    if (seqs.size() > 6) return fmt("%zu seqs", seqs.size());
    for (const Seq& q : seqs)
        s += fmt("%s%d+%d", s.empty() ? "" : ",", q.ctx, q.n);
    return s;
}

// --- builders: one per op ---------------------------------------------------------------------------------------

OpCase embedding(int64_t V, int64_t H, int64_t T, DType dt) {
    return {fmt("embedding V=%lld H=%lld T=%lld %s", (long long)V, (long long)H, (long long)T, dtype_str(dt)),
            "embedding", [=](CaseRun& r) {
                const Tensor table = r.dense(Shape{V, H}, dt);
                const auto ids = r.ints(static_cast<size_t>(T), 0, static_cast<int32_t>(V));
                const Tensor out = r.out(Shape{T, H}, "out", kExact);
                r.set_bytes(static_cast<double>(T * H) * (dtype_size(dt) + 4));
                return [=, &r] { r.ops().embedding(table, ids, out); };
            }};
}

OpCase rms_norm(int64_t T, int64_t H, NormKind kind, bool in_place) {
    return {
        fmt("rms_norm T=%lld H=%lld %s%s", (long long)T, (long long)H, kind_name(kind), in_place ? " in_place" : ""),
        "rms_norm", [=](CaseRun& r) {
            const Tensor x = r.act(Shape{T, H}, 3.0f), w = r.dense(Shape{H});
            Tensor out = x;
            if (in_place)
                r.check(x, "x (in place)", kF32Tol);
            else
                out = r.out(Shape{T, H}, "out", kF32Tol);
            return [=, &r] { r.ops().rms_norm(x, w, 1e-6f, kind, out); };
        }};
}

OpCase add_rms_norm(int64_t T, int64_t H, NormKind kind) {
    return {fmt("add_rms_norm T=%lld H=%lld %s", (long long)T, (long long)H, kind_name(kind)), "add_rms_norm",
            [=](CaseRun& r) {
                const Tensor res = r.act(Shape{T, H}, 2.0f), x = r.act(Shape{T, H}), w = r.dense(Shape{H});
                const Tensor out = r.out(Shape{T, H}, "out", kF32Tol);
                r.check(res, "residual", kF32Tol);
                return [=, &r] { r.ops().add_rms_norm(res, x, w, 1e-6f, kind, out); };
            }};
}

// Heads strided as in gated attention when `gated` (the gate heads between them must stay untouched).
OpCase head_rms_norm(int64_t T, int64_t H, int64_t D, NormKind kind, bool gated) {
    return {fmt("head_rms_norm T=%lld H=%lld D=%lld %s%s", (long long)T, (long long)H, (long long)D, kind_name(kind),
                gated ? " gated_heads" : ""),
            "head_rms_norm", [=](CaseRun& r) {
                const Tensor buf = r.act(Shape{T, (gated ? 2 : 1) * H * D}, 2.0f), w = r.dense(Shape{D});
                const Tensor x = gated ? gated_heads(buf, H, D) : buf.unflatten(1, H, D);
                r.check(buf, gated ? "x (and untouched gates)" : "x", kF32Tol);
                return [=, &r] { r.ops().head_rms_norm(x, w, 1e-6f, kind); };
            }};
}

// x is a column slice of a wider buffer (as q/k/v slices of a fused output are). T = 1 takes the GEMV kernel on
// CUDA, more tokens cuBLASLt; 16-bit weights round x to their type on CUDA (bf16 tolerance).
OpCase linear(int64_t T, int64_t N, int64_t K, DType wt, bool bias, const char* label = "") {
    return {fmt("linear%s%s T=%lld N=%lld K=%lld %s%s", *label ? " " : "", label, (long long)T, (long long)N,
                (long long)K, dtype_str(wt), bias ? " bias" : ""),
            "linear", [=](CaseRun& r) {
                const Tensor x = r.act(Shape{T, K + 8}).narrow(1, 4, K);
                const Tensor w = r.dense(Shape{N, K}, wt, 0.1f);
                const Tensor b = bias ? r.dense(Shape{N}) : Tensor();
                const Tensor y = r.out(Shape{T, N}, "y", wt == DType::F32 ? kF32Tol : kBf16Tol);
                r.set_bytes(static_cast<double>(N * K * dtype_size(wt) + (T * K + T * N) * 4));
                r.set_flops(2.0 * T * N * K);
                return [=, &r] { call_linear(r.ops(), x, w, b, y); };
            }};
}

const char* layout_str(ScaleLayout layout) {
    return layout == ScaleLayout::kBlock ? "block128x128" : layout == ScaleLayout::kPerChannel ? "channel" : "tensor";
}

// Weight-only fp8: e4m3 weights over their whole range with 128x128 block (ragged last blocks where N or K is not a
// multiple of 128), per-channel or per-tensor scales. T = 1 takes the fp8 GEMV on CUDA, more tokens the bf16 copy
// and cuBLASLt; both round the dequantised weight and x to bf16 (bf16 tolerance against the CPU's f32).
// input_group != 0: W8A8 (LinearWeight::input_quant_group, 128 or -1 per token): both backends round x to fp8 first;
// on Hopper cuBLASLt's fp8 GEMM takes 128x128 blocks with K a multiple of 512 and per-channel weights (N a multiple
// of 16, 2 tokens or more), every other case the weight-only paths over the rounded input.
OpCase linear_fp8(int64_t T, int64_t N, int64_t K, ScaleLayout layout, bool bias, const char* label = "",
                  int64_t input_group = 0) {
    const std::string activations = input_group == 0  ? ""
                                    : input_group > 0 ? fmt(" fp8 activations /%lld", (long long)input_group)
                                                      : std::string(" fp8 activations per token");
    return {fmt("linear fp8%s%s T=%lld N=%lld K=%lld %s%s%s", *label ? " " : "", label, (long long)T, (long long)N,
                (long long)K, layout_str(layout), bias ? " bias" : "", activations.c_str()),
            "linear", [=](CaseRun& r) {
                const Tensor x = r.act(Shape{T, K + 8}).narrow(1, 4, K);
                const Tensor q = r.dense(Shape{N, K}, DType::F8_E4M3, 448.0f);
                const Tensor b = bias ? r.dense(Shape{N}) : Tensor();
                LinearWeight w = LinearWeight::fp8(q, Tensor(), layout, 128, 128, b);
                w.input_quant_group = input_group;
                w.scales = r.dense(w.expected_scales_shape(), DType::F32, 1e-3f);
                const Tensor y = r.out(Shape{T, N}, "y", kBf16Tol);
                r.set_bytes(static_cast<double>(N * K + (T * K + T * N) * 4));
                r.set_flops(2.0 * T * N * K);
                return [=, &r] { call_linear(r.ops(), x, w, y); };
            }};
}

// Group scales and zero points as the loaders write them (runtime/linear_weight.h, kInt4): scales values of the
// format's dequant_dtype (its stored scales: F16 for AWQ/GPTQ), zero points whole numbers in [0, 2 * zero) or none
// (symmetric). The CUDA GEMV relies on both where it dequantises two weights at a time (gemm/int4_dequant.cuh).
struct GroupParams {
    Tensor scales, zeros;
};
GroupParams group_params(CaseRun& r, const Shape& groups, float scale, float zero, bool zero_points,
                         DType dequant_dtype) {
    HostTensor s = r.host_random(groups, scale);
    for (float& v : std::span(s.tensor.data_as<float>(), static_cast<size_t>(groups.numel()))) {
        if (dequant_dtype == DType::F16) v = f16_to_f32(f32_to_f16(v));
        if (dequant_dtype == DType::BF16) v = bf16_to_f32(f32_to_bf16(v));
    }
    GroupParams p{r.upload_dense(s), Tensor()};
    if (zero_points) {
        HostTensor z = r.host_random(groups, zero);
        for (float& v : std::span(z.tensor.data_as<float>(), static_cast<size_t>(groups.numel())))
            v = std::clamp(std::floor(v + zero), 0.0f, 2 * zero - 1);
        p.zeros = r.upload_dense(z);
    }
    return p;
}

// A random permutation of [0, K) from the case's random ints (the same on every backend) on the run's device: an
// act-order weight's LinearWeight::input_perm.
Tensor random_input_perm(CaseRun& r, int64_t K) {
    const std::span<const int32_t> keys = r.ints(static_cast<size_t>(K), 0, 1 << 30);
    HostTensor perm = HostTensor::empty(DType::I32, Shape{K});
    int32_t* p = perm.tensor.data_as<int32_t>();
    std::iota(p, p + K, 0);
    std::stable_sort(p, p + K, [&keys](int32_t a, int32_t b) { return keys[a] < keys[b]; });
    return r.upload_dense(perm);
}

// Weight-only int4 in LinearWeight's layout (as AWQ, GPTQ and compressed-tensors checkpoints load): random packed
// bytes, group scales, zero points or the symmetric 8, each weight rounded to f16 (AWQ/GPTQ's dequantisation) or not.
// T = 1 takes the int4 GEMV on CUDA (its 16-byte path when the group is a multiple of 32, else its element path),
// more tokens the bf16 copy and cuBLASLt; both round the weight and x to bf16 (bf16 tolerance against the CPU's f32).
// bits 8: LinearWeight's int8 (GPTQ 8-bit), one value a byte, symmetric zero 128, the same kernels at 8 bits (16-byte
// GEMV path when the group is a multiple of 16). act_order: the weight of a GPTQ act-order checkpoint, with a random
// input permutation (LinearWeight::input_perm) the backend gathers x's columns by before the kernel.
// A grouped int weight [N, K] as linear_int4 below describes it (random packed bytes, group scales and zeros).
struct GroupedInt {
    int64_t group = 128;
    bool zero_points = false;
    DType round_to = DType::F16;
    bool bias = false;
    int bits = 4;
    bool act_order = false;

    std::string name() const {
        return fmt(" group %lld%s%s%s%s", (long long)group, zero_points ? " zeros" : "",
                   round_to == DType::F16 ? " f16" : "", bias ? " bias" : "", act_order ? " act-order" : "");
    }
    LinearWeight make(CaseRun& r, int64_t N, int64_t K) const {
        const Tensor b = bias ? r.dense(Shape{N}) : Tensor();
        // Scales and zeros of the size of the format's values.
        const float scale = bits == 8 ? 1e-3f : 2e-2f, zero = bits == 8 ? 128.0f : 8.0f;
        const GroupParams g = group_params(r, Shape{N, K / group}, scale, zero, zero_points, round_to);
        LinearWeight w =
            LinearWeight::grouped_int(bits, r.dense(Shape{N, K * bits / 8}, DType::U8), g.scales, g.zeros, group, b);
        w.dequant_dtype = round_to;
        if (act_order) w.input_perm = random_input_perm(r, K);
        return w;
    }
    // The bytes a call reads of it.
    double bytes(int64_t N, int64_t K) const {
        return static_cast<double>(N * K * bits / 8 + (zero_points ? 8 : 4) * N * (K / group));
    }
};

OpCase linear_int4(int64_t T, int64_t N, int64_t K, int64_t group, bool zero_points, DType round_to, bool bias,
                   int bits = 4, bool act_order = false) {
    const GroupedInt q{group, zero_points, round_to, bias, bits, act_order};
    return {fmt("linear int%d T=%lld N=%lld K=%lld", bits, (long long)T, (long long)N, (long long)K) + q.name(),
            "linear", [=](CaseRun& r) {
                const Tensor x = r.act(Shape{T, K + 8}).narrow(1, 4, K);
                const LinearWeight w = q.make(r, N, K);
                const Tensor y = r.out(Shape{T, N}, "y", kBf16Tol);
                r.set_bytes(q.bytes(N, K) + static_cast<double>((T * K + T * N) * 4));
                r.set_flops(2.0 * T * N * K);
                return [=, &r] { call_linear(r.ops(), x, w, y); };
            }};
}

// q/k/v of an act-order checkpoint: two act-order int4 weights (each its own permutation) on one x, more tokens than
// the GEMV takes. CUDA gathers both into the same scratch, so the second must not reuse the bf16 conversion cached
// for the first's gathered input.
OpCase linear_act_order_pair(int64_t T, int64_t N, int64_t K, int64_t group) {
    return {fmt("linear int4 act-order twice on one input T=%lld N=%lld K=%lld group %lld", (long long)T, (long long)N,
                (long long)K, (long long)group),
            "linear", [=](CaseRun& r) {
                const Tensor x = r.act(Shape{T, K});
                LinearWeight w[2];
                for (LinearWeight& one : w) {
                    one = LinearWeight::int4(r.dense(Shape{N, K / 2}, DType::U8),
                                             r.dense(Shape{N, K / group}, DType::F32, 2e-2f), Tensor(), group);
                    one.dequant_dtype = DType::F16;
                    one.input_perm = random_input_perm(r, K);
                }
                const Tensor y1 = r.out(Shape{T, N}, "first", kBf16Tol), y2 = r.out(Shape{T, N}, "second", kBf16Tol);
                return [=, &r] {
                    call_linear(r.ops(), x, w[0], y1);
                    call_linear(r.ops(), x, w[1], y2);
                };
            }};
}

// q/k/v share one converted input on CUDA; a linear that overwrites that input must not reuse the stale conversion.
OpCase linear_overwritten_input(int64_t T, int64_t K) {
    return {fmt("linear after its input was overwritten T=%lld K=%lld", (long long)T, (long long)K), "linear",
            [=](CaseRun& r) {
                const Tensor x = r.act(Shape{T, K}), x2 = r.act(Shape{T, K});
                const Tensor w1 = r.dense(Shape{K, K}, DType::BF16, 0.1f), w2 = r.dense(Shape{K, K}, DType::BF16, 0.1f);
                const Tensor y = r.out(Shape{T, K}, "y", kBf16Tol);
                return [=, &r] {
                    call_linear(r.ops(), x, w1, Tensor(), y);
                    call_linear(r.ops(), x2, w2, Tensor(), x);
                    call_linear(r.ops(), x, w1, Tensor(), y);
                };
            }};
}

// The tables a model hands the RoPE ops: plain (theta 1e6), or YaRN with factor 4 over a 4096-token original context
// (Qwen3's long-context setting, scaled down so that the ramp falls inside small rotary dims): blended frequencies
// and a cos/sin scale of 1.139 that every backend must apply as given.
RopeTable rope_table(int rot, bool yarn) {
    if (!yarn) return default_rope_table(1e6f, rot);
    YarnParams p;
    p.theta = 1e6, p.rotary_dim = rot, p.factor = 4, p.original_max_position_embeddings = 4096;
    p.attention_factor = yarn_mscale(p.factor);
    return yarn_rope_table(p);
}

const char* yarn_suffix(bool yarn) {
    return yarn ? " yarn" : "";
}

OpCase rope(int64_t T, int64_t H, int64_t D, int rot, bool yarn = false) {
    return {fmt("rope T=%lld H=%lld D=%lld rot=%d%s", (long long)T, (long long)H, (long long)D, rot, yarn_suffix(yarn)),
            "rope", [=](CaseRun& r) {
                const Tensor x = r.act(Shape{T, H, D});
                const auto pos = r.ints(static_cast<size_t>(T), 0, 100000);
                r.check(x, "x", kF32Tol);
                return [=, &r, table = rope_table(rot, yarn)] { r.ops().rope(x, pos, table); };
            }};
}

// variant 0: RoPE only (qwen2), 1: QK-norm plain, 2: QK-norm zero-centred. q heads strided as in gated attention.
OpCase qk_norm_rope(int64_t T, int64_t Hq, int64_t Hk, int64_t D, int rot, int variant, bool yarn = false) {
    return {fmt("qk_norm_rope T=%lld Hq=%lld Hk=%lld D=%lld rot=%d v%d%s", (long long)T, (long long)Hq, (long long)Hk,
                (long long)D, rot, variant, yarn_suffix(yarn)),
            "qk_norm_rope", [=](CaseRun& r) {
                const Tensor qbuf = r.act(Shape{T, 2 * Hq * D}, 2.0f), k = r.act(Shape{T, Hk, D}, 2.0f);
                const Tensor qw = variant ? r.dense(Shape{D}) : Tensor(), kw = variant ? r.dense(Shape{D}) : Tensor();
                const NormKind kind = variant == 2 ? NormKind::ZeroCentred : NormKind::Plain;
                const auto pos = r.ints(static_cast<size_t>(T), 0, 100000);
                const Tensor q = gated_heads(qbuf, Hq, D);
                r.check(qbuf, "q (and untouched gates)", kF32Tol);
                r.check(k, "k", kF32Tol);
                return [=, &r, table = rope_table(rot, yarn)] {
                    r.ops().qk_norm_rope(q, k, qw, kw, 1e-6f, kind, pos, table);
                };
            }};
}

// The whole prologue into the caches; one slot skipped (negative), GQA. Caches are BF16 on CUDA: within one bf16
// rounding of the CPU's F32 values.
OpCase qk_norm_rope_write_kv(std::vector<Seq> seqs, int64_t Hq, int64_t Hk, int64_t D, int rot, int variant,
                             int32_t bs = 16, bool yarn = false, Kv kv = Kv::Native) {
    return {fmt("qk_norm_rope_write_kv %s Hq=%lld Hk=%lld D=%lld rot=%d v%d bs=%d%s%s", seqs_name(seqs).c_str(),
                (long long)Hq, (long long)Hk, (long long)D, rot, variant, bs, yarn_suffix(yarn), kv_suffix(kv)),
            "qk_norm_rope_write_kv", [=](CaseRun& r) {
                PagedBatch p = paged_batch(r, seqs, bs);
                auto& slots = r.keep(std::vector<int64_t>(p.batch->slot_mapping.begin(), p.batch->slot_mapping.end()));
                if (slots.size() > 1) slots[1] = -1;  // skipped
                p.batch->slot_mapping = slots;
                const int64_t T = p.batch->num_tokens;
                const Tensor q = r.act(Shape{T, Hq, D}, 2.0f), k = r.act(Shape{T, Hk, D}, 2.0f),
                             v = r.act(Shape{T, Hk, D}, 2.0f);
                const Tensor qw = variant ? r.dense(Shape{D}) : Tensor(), kw = variant ? r.dense(Shape{D}) : Tensor();
                const NormKind kind = variant == 2 ? NormKind::ZeroCentred : NormKind::Plain;
                const KvCacheLayer cache = kv_layer(r, Shape{p.num_blocks, bs, Hk, D}, kv);
                r.check(q, "q", kF32Tol);
                r.check(k, "k", kF32Tol);
                r.check(v, "v (unchanged)", kExact);
                // fp8: v is quantised from the same bits on every backend; k from rows that differ in the last fp32
                // bits, which can move a value across an e4m3 rounding boundary (one step: 1/16 of its binade's top).
                r.check(cache.key, "key cache", kv == Kv::Native ? 8e-3f : 0.07f);
                r.check(cache.value, "value cache", kv == Kv::Native ? 8e-3f : kExact);
                r.set_bytes(static_cast<double>(T * (Hq + 2 * Hk) * D) * 4 * 2);
                const ForwardBatch& batch = *p.batch;
                return [=, &r, &batch, table = rope_table(rot, yarn)] {
                    r.ops().qk_norm_rope_write_kv(q, k, v, qw, kw, 1e-6f, kind, batch, table, cache);
                };
            }};
}

// fp8: quantised with the one rounding of each backend (e4m3 RNE, saturating): the same bytes. With `saturate`, most
// values are beyond ±448 before rounding. Kv::Fp8Calc: the scales come from the rows' amax on each backend first.
OpCase write_kv(std::vector<Seq> seqs, int64_t Hk, int64_t D, int32_t bs = 16, Kv kv = Kv::Native,
                bool saturate = false) {
    return {fmt("write_kv %s Hk=%lld D=%lld bs=%d%s%s", seqs_name(seqs).c_str(), (long long)Hk, (long long)D, bs,
                kv_suffix(kv), saturate ? " saturating" : ""),
            "write_kv", [=](CaseRun& r) {
                PagedBatch p = paged_batch(r, seqs, bs);
                auto& slots = r.keep(std::vector<int64_t>(p.batch->slot_mapping.begin(), p.batch->slot_mapping.end()));
                if (kv == Kv::Fp8Calc) slots[0] = -1;  // a row not stored is no part of the amax
                p.batch->slot_mapping = slots;
                const int64_t T = p.batch->num_tokens;
                const Tensor k = r.act(Shape{T, Hk, D}), v = r.act(Shape{T, Hk, D});
                const KvCacheLayer cache = kv_layer(r, Shape{p.num_blocks, bs, Hk, D}, kv, saturate);
                r.check(cache.key, "key cache", kExact);  // k and v are bf16-exact
                r.check(cache.value, "value cache", kExact);
                const double cache_bytes = kv == Kv::Native ? (r.on_cuda() ? 2 : 4) : 1;
                r.set_bytes(static_cast<double>(T * Hk * D) * 2 * (4 + cache_bytes));
                const ForwardBatch& batch = *p.batch;
                return [=, &r, &batch] { r.ops().write_kv(k, v, batch, cache); };
            }};
}

// The new tokens' k/v are written first (setup), then attention over cached prefix + new tokens is the timed call.
// Head dims 64/128/256 take the tensor-core kernels on CUDA (Q and softmax weights rounded to bf16, as
// FlashAttention does); 16/32 the fp32 kernel.
// fp8 caches: the same e4m3 values on every backend (the write is exact, as above); CUDA's tensor-core kernels fold
// K's scale into Q before rounding it to bf16 and V's into the output, so the tolerance is the bf16 one.
OpCase paged_attention(const char* label, std::vector<Seq> seqs, int64_t Hq, int64_t Hkv, int64_t D, int32_t bs = 16,
                       Kv kv = Kv::Native) {
    return {fmt("paged_attention %s %s Hq=%lld Hkv=%lld D=%lld bs=%d%s", label, seqs_name(seqs).c_str(), (long long)Hq,
                (long long)Hkv, (long long)D, bs, kv_suffix(kv)),
            "paged_attention", [=](CaseRun& r) {
                PagedBatch p = paged_batch(r, seqs, bs);
                const int64_t T = p.batch->num_tokens;
                const KvCacheLayer cache = kv_layer(r, Shape{p.num_blocks, bs, Hkv, D}, kv);
                const Tensor k = r.act(Shape{T, Hkv, D}), v = r.act(Shape{T, Hkv, D}), q = r.act(Shape{T, Hq, D});
                r.ops().write_kv(k, v, *p.batch, cache);
                const Tensor out = r.out(Shape{T, Hq, D}, "out", D >= 64 ? 5e-3f : 2e-5f);
                const double cache_bytes = kv == Kv::Native ? (r.on_cuda() ? 2 : 4) : 1;
                const double kv_bytes = 2.0 * p.kv_tokens * static_cast<double>(Hkv * D) * cache_bytes;
                r.set_bytes(kv_bytes + 2.0 * static_cast<double>(T * Hq * D) * 4);
                r.set_flops(4.0 * p.causal_pairs * static_cast<double>(Hq * D));
                const float scale = 1.0f / std::sqrt(static_cast<float>(D));
                const ForwardBatch& batch = *p.batch;
                return [=, &r, &batch] { r.ops().paged_attention(q, cache, batch, scale, out); };
            }};
}

// The gated shared expert's down projection added into the mixture's output: one token through a dense weight takes
// the GEMV that adds its rows times sigmoid(gate) on CUDA (unless PAGODA_SHARED_EXPERT_ADD=0), else linear,
// sigmoid_mul and add.
OpCase linear_gated_add(int64_t T, int64_t N, int64_t K, DType wt) {
    return {fmt("linear_gated_add T=%lld N=%lld K=%lld %s", (long long)T, (long long)N, (long long)K, dtype_str(wt)),
            "linear_gated_add", [=](CaseRun& r) {
                const Tensor x = r.act(Shape{T, K}), gate = r.act(Shape{T, 1}, 2.0f);
                auto& kept = r.keep(LinearWeight::dense(r.dense(Shape{N, K}, wt, 0.1f)));
                const Tensor y = r.act(Shape{T, N});  // scratch
                const Tensor out = r.act(Shape{T, N}, 2.0f);
                r.check(out, "out", kBf16Tol);
                r.set_bytes(static_cast<double>(N * K * dtype_size(wt) + (T * K + 2 * T * N) * 4));
                r.set_flops(2.0 * T * N * K);
                return [=, &r, &kept] { r.ops().linear_gated_add(x, kept, y, gate, out); };
            }};
}

// gate and up are the halves of one fused [T, 2N] output.
// The gated MLP's first half, gate and up stacked in one weight [2I, K]: one token takes the fused GEMV on CUDA (no
// silu_mul launch), more tokens linear then silu_mul. bf16 weights, or fp8 with 128x128 blocks.
OpCase linear_silu_mul(int64_t T, int64_t I, int64_t K, DType wt) {
    return {fmt("linear_silu_mul T=%lld I=%lld K=%lld %s", (long long)T, (long long)I, (long long)K, dtype_str(wt)),
            "linear_silu_mul", [=](CaseRun& r) {
                const Tensor x = r.act(Shape{T, K});
                const bool fp8 = wt == DType::F8_E4M3;
                const Tensor data = r.dense(Shape{2 * I, K}, wt, fp8 ? 448.0f : 0.1f);
                LinearWeight w =
                    fp8 ? LinearWeight::fp8(data, Tensor(), ScaleLayout::kBlock, 128, 128) : LinearWeight::dense(data);
                if (fp8) w.scales = r.dense(w.expected_scales_shape(), DType::F32, 1e-3f);
                auto& kept = r.keep(std::move(w));
                const Tensor gu = r.act(Shape{T, 2 * I});  // scratch: what the op leaves there is not compared
                const Tensor out = r.out(Shape{T, I}, "out", kBf16Tol);
                r.set_bytes(static_cast<double>(2 * I * K * dtype_size(wt) + (T * K + T * I) * 4));
                r.set_flops(4.0 * T * I * K);
                return [=, &r, &kept] { r.ops().linear_silu_mul(x, kept, gu, out); };
            }};
}

// The same with a grouped int gate/up weight (linear_int4's): one token of an int4 weight the tensor-core GEMV takes
// (2I >= 2,048 rows, not act-order) runs it with SiLU·mul in its store on CUDA (PAGODA_INT4_SILU_MUL=0: linear then
// silu_mul); a smaller weight, an act-order or an int8 one, linear then silu_mul.
OpCase linear_silu_mul_int(int64_t T, int64_t I, int64_t K, const GroupedInt& q) {
    return {
        fmt("linear_silu_mul int%d T=%lld I=%lld K=%lld", q.bits, (long long)T, (long long)I, (long long)K) + q.name(),
        "linear_silu_mul", [=](CaseRun& r) {
            const Tensor x = r.act(Shape{T, K});
            auto& kept = r.keep(q.make(r, 2 * I, K));
            const Tensor gu = r.act(Shape{T, 2 * I});  // scratch: what the op leaves there is not compared
            const Tensor out = r.out(Shape{T, I}, "out", kBf16Tol);
            r.set_bytes(q.bytes(2 * I, K) + static_cast<double>((T * K + T * I) * 4));
            r.set_flops(4.0 * T * I * K);
            return [=, &r, &kept] { r.ops().linear_silu_mul(x, kept, gu, out); };
        }};
}

OpCase silu_mul(int64_t T, int64_t N) {
    return {fmt("silu_mul T=%lld N=%lld", (long long)T, (long long)N), "silu_mul", [=](CaseRun& r) {
                const Tensor gu = r.act(Shape{T, 2 * N}, 4.0f);
                const Tensor out = r.out(Shape{T, N}, "out", kF32Tol);
                return [=, &r] { r.ops().silu_mul(gu.narrow(1, 0, N), gu.narrow(1, N, N), out); };
            }};
}

// An op that hands its output to the next GEMM in bf16 on CUDA (SiLU·mul, RMSNorm with or without the residual add,
// the gated RMSNorm), then a linear over more tokens than the GEMV takes; or with h overwritten in between (add into
// it), after which the handed-off copy is stale and the GEMM must convert h again. wt: the weight's type (f16 cannot
// take the bf16 copy).
enum class Producer { kSiluMul, kRmsNorm, kAddRmsNorm, kGatedRmsNorm };
OpCase handoff_linear(Producer producer, int64_t T, int64_t I, int64_t K, DType wt, bool overwritten) {
    const char* names[] = {"silu_mul", "rms_norm", "add_rms_norm", "gated_rms_norm"};
    return {
        fmt("%s then linear T=%lld I=%lld K=%lld %s%s", names[static_cast<int>(producer)], (long long)T, (long long)I,
            (long long)K, dtype_str(wt), overwritten ? " (h overwritten between)" : ""),
        "linear", [=](CaseRun& r) {
            const Tensor gu = r.act(Shape{T, 2 * I}, 4.0f), extra = r.act(Shape{T, I});
            const Tensor norm_w = r.dense(Shape{I}), head_w = r.dense(Shape{32}), w = r.dense(Shape{K, I}, wt, 0.1f);
            const Tensor h = r.act(Shape{T, I});  // scratch: compared through y
            const Tensor y = r.out(Shape{T, K}, "y", kBf16Tol);
            // A (strided) [T, I] as [T, I / 32, 32] heads.
            const auto as_heads = [](const Tensor& m) {
                const int64_t strides[3] = {m.stride(0), 32, 1};
                return Tensor(m.data(), m.dtype(), Shape{m.dim(0), m.dim(1) / 32, 32}, strides, m.device());
            };
            return [=, &r] {
                const Tensor x = gu.narrow(1, 0, I), up = gu.narrow(1, I, I);
                if (producer == Producer::kSiluMul) r.ops().silu_mul(x, up, h);
                if (producer == Producer::kRmsNorm) r.ops().rms_norm(x, norm_w, 1e-6f, NormKind::Plain, h);
                if (producer == Producer::kAddRmsNorm) r.ops().add_rms_norm(up, x, norm_w, 1e-6f, NormKind::Plain, h);
                if (producer == Producer::kGatedRmsNorm)  // heads of 32 (I a multiple of 32)
                    r.ops().gated_rms_norm(as_heads(x), as_heads(up), head_w, 1e-6f, as_heads(h));
                if (overwritten) r.ops().add(h, extra);
                call_linear(r.ops(), h, w, Tensor(), y);
            };
        }};
}

// gate_cols = N (a gate per element) or 1 (one per row: the shared-expert gate).
OpCase sigmoid_mul(int64_t T, int64_t N, int64_t gate_cols) {
    return {fmt("sigmoid_mul T=%lld N=%lld gate=[T,%lld]", (long long)T, (long long)N, (long long)gate_cols),
            "sigmoid_mul", [=](CaseRun& r) {
                const Tensor x = r.act(Shape{T, N}, 4.0f), g = r.act(Shape{T, gate_cols}, 4.0f);
                r.check(x, "x", kF32Tol);
                return [=, &r] { r.ops().sigmoid_mul(x, g); };
            }};
}

// Gated attention's output gate: x [T, H, D] times the sigmoid of the gate heads interleaved with the queries (the
// query heads between them must stay untouched).
OpCase sigmoid_mul_heads(int64_t T, int64_t H, int64_t D) {
    return {fmt("sigmoid_mul T=%lld H=%lld D=%lld gate=interleaved heads", (long long)T, (long long)H, (long long)D),
            "sigmoid_mul", [=](CaseRun& r) {
                const Tensor x = r.act(Shape{T, H * D}, 4.0f), qg = r.act(Shape{T, 2 * H * D}, 4.0f);
                r.check(x, "x", kF32Tol);
                r.check(qg, "q/gate buffer (untouched)", kExact);
                const Tensor x3 = x.unflatten(1, H, D);
                const Tensor gate = gated_heads(qg.narrow(1, D, 2 * H * D - D), H, D);
                return [=, &r] { r.ops().sigmoid_mul(x3, gate); };
            }};
}

OpCase add(int64_t T, int64_t N) {
    return {fmt("add T=%lld N=%lld", (long long)T, (long long)N), "add", [=](CaseRun& r) {
                const Tensor y = r.act(Shape{T, N}, 4.0f), x = r.act(Shape{T, N}, 4.0f);
                r.check(y, "y", kF32Tol);
                return [=, &r] { r.ops().add(y, x); };
            }};
}

// f32 -> `mid` -> f32 (values are bf16-exact, so F16 rounds them alike on every backend).
OpCase copy(int64_t T, int64_t N, DType mid) {
    return {fmt("copy T=%lld N=%lld via %s", (long long)T, (long long)N, dtype_str(mid)), "copy", [=](CaseRun& r) {
                const Tensor src = r.act(Shape{T, N}, 2.0f);
                const Tensor m = r.dense_out(Shape{T, N}, mid, "intermediate", kExact);
                const Tensor out = r.out(Shape{T, N}, "out", kExact);
                return [=, &r] {
                    r.ops().copy(m, src);
                    r.ops().copy(out, m);
                };
            }};
}

OpCase gather_rows(int64_t T, int64_t N, int64_t R) {
    return {fmt("gather_rows T=%lld N=%lld R=%lld", (long long)T, (long long)N, (long long)R), "gather_rows",
            [=](CaseRun& r) {
                const Tensor x = r.act(Shape{T, N});
                const auto rows = r.ints(static_cast<size_t>(R), 0, static_cast<int32_t>(T));
                const Tensor out = r.out(Shape{R, N}, "out", kExact);
                return [=, &r] { r.ops().gather_rows(x, rows, out); };
            }};
}

// Row 1 holds a tie (the lower index wins), row 2 its max at index 0.
OpCase argmax(int64_t R, int64_t V) {
    return {fmt("argmax R=%lld V=%lld", (long long)R, (long long)V), "argmax", [=](CaseRun& r) {
                HostTensor h = r.host_random(Shape{R, V});
                float* p = h.tensor.data_as<float>();
                if (R > 2) {
                    p[1 * V + V / 2] = 7.0f, p[1 * V + V - 1] = 7.0f;
                    p[2 * V + 0] = 9.0f;
                }
                const Tensor logits = r.upload_act(h);
                const auto out = r.int_out(static_cast<size_t>(R), "argmax");
                return [=, &r] { r.ops().argmax(logits, out); };
            }};
}

OpCase moe_topk_softmax(int64_t T, int64_t E, int64_t k, bool normalize) {
    return {fmt("moe_topk_softmax T=%lld E=%lld k=%lld%s", (long long)T, (long long)E, (long long)k,
                normalize ? " normalize" : ""),
            "moe_topk_softmax", [=](CaseRun& r) {
                const Tensor logits = r.act(Shape{T, E}, 3.0f);
                const Tensor w = r.dense_out(Shape{T, k}, DType::F32, "topk weights", kF32Tol);
                const Tensor ids = r.dense_out(Shape{T, k}, DType::I32, "topk ids", kExact);
                return [=, &r] { r.ops().moe_topk_softmax(logits, normalize, w, ids); };
            }};
}

// How moe_experts cases route their tokens.
enum class Routing : uint8_t {
    Strided,  // ids (3t + 5j) mod E, weights 1/k: may repeat an expert within a token
    Random,   // k distinct random experts per token with random weights summing to 1, as a router gives
    Skewed,   // slot 0 of every token to expert 0, the others to 2(k-1) experts: most experts get no token
};

// Experts from one fused gate_up [E, 2I, H] and down [E, H, I] (Qwen3.5-MoE's layout). The bytes a call moves are
// the experts it reads (the routed ones, each once), not the whole stack: decode reads k experts of E. held > 0:
// expert parallelism, the stacks are experts [first, first + held) of the E (a middle range, as one rank of a group
// holds), and the routed slots naming the others contribute nothing. int4_group > 0: int4 experts in LinearWeight's
// layout (wt is then ignored): random packed bytes, group scales, zero points or the symmetric 8, each weight rounded
// to f16 as GPTQ/AWQ checkpoints load (Qwen3-MoE int4 experts).
OpCase moe_experts(int64_t T, int64_t H, int64_t I, int64_t E, int64_t k, Routing routing = Routing::Strided,
                   DType wt = DType::BF16, const char* label = "", int64_t held = 0, int64_t int4_group = 0,
                   bool int4_zeros = false) {
    const char* routing_name = routing == Routing::Strided ? "" : routing == Routing::Random ? " random" : " skewed";
    const std::string format = int4_group > 0
                                   ? fmt("int4 group %lld%s", (long long)int4_group, int4_zeros ? " zeros" : "")
                                   : std::string(dtype_str(wt));
    return {fmt("moe_experts%s T=%lld H=%lld I=%lld E=%lld k=%lld %s%s", label, (long long)T, (long long)H,
                (long long)I, (long long)E, (long long)k, format.c_str(), routing_name),
            "moe_experts", [=](CaseRun& r) {
                const Tensor x = r.act(Shape{T, H});
                const bool fp8 = wt == DType::F8_E4M3;  // e4m3 over its range, 32x32 block scales of ~1e-3
                const bool int4 = int4_group > 0;
                const Tensor gate_up = int4 ? r.dense(Shape{E, 2 * I, H / 2}, DType::U8)
                                            : r.dense(Shape{E, 2 * I, H}, wt, fp8 ? 448.0f : 0.3f);
                const Tensor down =
                    int4 ? r.dense(Shape{E, H, I / 2}, DType::U8) : r.dense(Shape{E, H, I}, wt, fp8 ? 448.0f : 0.3f);
                HostTensor w = HostTensor::empty(DType::F32, Shape{T, k});
                HostTensor ids = HostTensor::empty(DType::I32, Shape{T, k});
                int32_t* id = ids.tensor.data_as<int32_t>();
                float* wv = w.tensor.data_as<float>();
                const auto n = static_cast<size_t>(T * k);
                const std::span<const int32_t> pick = r.ints(n, 0, 1 << 30), weight = r.ints(n, 1, 9);
                std::vector<char> used(static_cast<size_t>(E));
                for (int64_t t = 0; t < T; ++t) {
                    std::fill(used.begin(), used.end(), 0);
                    float sum = 0;
                    for (int64_t j = 0; j < k; ++j) {
                        const size_t i = static_cast<size_t>(t * k + j);
                        int32_t e = static_cast<int32_t>((t * 3 + j * 5) % E);
                        if (routing == Routing::Skewed) e = static_cast<int32_t>(j == 0 ? 0 : j + (t % 2) * (k - 1));
                        if (routing == Routing::Random) {
                            e = pick[i] % static_cast<int32_t>(E);
                            while (used[static_cast<size_t>(e)])
                                e = static_cast<int32_t>((e + 1) % E);
                        }
                        used[static_cast<size_t>(e)] = 1;
                        id[i] = e;
                        wv[i] = routing == Routing::Strided ? 1.0f : static_cast<float>(weight[i]);
                        sum += wv[i];
                    }
                    for (int64_t j = 0; j < k; ++j)
                        wv[t * k + j] /= sum;
                }
                size_t experts_read = 0;
                std::vector<char> read(static_cast<size_t>(E));
                for (size_t i = 0; i < n; ++i)
                    experts_read += read[static_cast<size_t>(id[i])]++ == 0;
                const Tensor dw = r.upload_dense(w), dids = r.upload_dense(ids);
                // The stacked expert weights (runtime/ops.h), as Qwen3.5-MoE checkpoints store them.
                const auto stack = [&r, fp8, int4, int4_group, int4_zeros](const Tensor& data) {
                    if (int4) {
                        const Shape groups{data.dim(0), data.dim(1), 2 * data.dim(2) / int4_group};
                        const GroupParams g = group_params(r, groups, 2e-2f, 8.0f, int4_zeros, DType::F16);
                        LinearWeight w = LinearWeight::int4(data, g.scales, g.zeros, int4_group);
                        w.dequant_dtype = DType::F16;
                        return w;
                    }
                    if (!fp8) return LinearWeight::dense(data);
                    LinearWeight w = LinearWeight::fp8(data, Tensor(), ScaleLayout::kBlock, 32, 32);
                    w.scales = r.dense(w.expected_scales_shape(), DType::F32, 1e-3f);
                    return w;
                };
                const int64_t first = held > 0 ? (E - held) / 2 : 0, count = held > 0 ? held : E;
                auto& gu = r.keep(stack(gate_up.narrow(0, first, count)));
                auto& dn = r.keep(stack(down.narrow(0, first, count)));
                r.set_flops(6.0 * T * k * H * I);
                const double expert_bytes =
                    int4 ? 3.0 * H * I * (0.5 + (int4_zeros ? 8.0 : 4.0) / int4_group) : 3.0 * H * I * 2.0;
                r.set_bytes(static_cast<double>(experts_read) * expert_bytes + 8.0 * T * H + 8.0 * T * k);
                const Tensor out = r.out(Shape{T, H}, "out", kBf16Tol);
                return [=, &r, &gu, &dn] { r.ops().moe_experts(x, dw, dids, MoeExpertWeights{gu, dn, first, E}, out); };
            }};
}

// Fresh sequences and ones with cached context (history from their conv state slot).
OpCase causal_conv1d_silu(std::vector<Seq> seqs, int64_t C, int64_t K) {
    return {fmt("causal_conv1d_silu %s C=%lld K=%lld", seqs_name(seqs).c_str(), (long long)C, (long long)K),
            "causal_conv1d_silu", [=](CaseRun& r) {
                PagedBatch p = paged_batch(r, seqs, 16, 1);
                const int64_t T = p.batch->num_tokens;
                const int64_t slots = static_cast<int64_t>(seqs.size()) + 2;
                const Tensor x = r.act(Shape{T, C}, 2.0f), w = r.dense(Shape{C, K}, DType::BF16);
                const Tensor state = r.dense(Shape{slots, C, K - 1});
                const Tensor out = r.out(Shape{T, C}, "out", kF32Tol);
                r.check(state, "conv state", kF32Tol);
                const ForwardBatch& batch = *p.batch;
                return [=, &r, &batch] { r.ops().causal_conv1d_silu(x, w, state, batch, out); };
            }};
}

OpCase gdn_gating(int64_t T, int64_t Hv) {
    return {fmt("gdn_gating T=%lld Hv=%lld", (long long)T, (long long)Hv), "gdn_gating", [=](CaseRun& r) {
                const Tensor a = r.act(Shape{T, Hv}, 4.0f), b = r.act(Shape{T, Hv}, 4.0f);
                const Tensor a_log = r.dense(Shape{Hv}, DType::BF16), dt_bias = r.dense(Shape{Hv}, DType::BF16);
                const Tensor g = r.out(Shape{T, Hv}, "g", kF32Tol), beta = r.out(Shape{T, Hv}, "beta", kF32Tol);
                return [=, &r] { r.ops().gdn_gating(a, b, a_log, dt_bias, g, beta); };
            }};
}

OpCase l2_norm(int64_t T, int64_t H, int64_t D) {
    return {fmt("l2_norm T=%lld H=%lld D=%lld", (long long)T, (long long)H, (long long)D), "l2_norm", [=](CaseRun& r) {
                const Tensor x = r.act(Shape{T, H, D}, 2.0f);
                r.check(x, "x", kF32Tol);
                return [=, &r] { r.ops().l2_norm(x, 1e-6f); };
            }};
}

// The tolerance of a delta rule that may run in the chunked form on the GPU (Auto, Chunked, and the fused op, which
// runs Auto): its products round their operands to TF32 (unit roundoff 2^-11 ≈ 4.9e-4; delta_rule_chunked.cu).
// tools/delta_rule_tf32_error.py follows the kernels' order of operations with TF32-rounded operands against the fp64
// recurrent rule on data drawn as here (dk 32 and 128, 1 to 4,097 tokens, decays down to -0.002 per token): outputs
// and states stayed within 8.1e-4 of max|ref|; 3e-3 leaves over three times that. The recurrent form keeps 1e-4.
constexpr float kChunkedTol = 3e-3f;

// q, k of unit-ish norm (the op expects them L2-normalised), decays g = -decay·(0..1) (decay 1: fast, the state
// forgets within tens of tokens; 0.02: slow, so errors carried in the state over many chunks show), β in (0.05, 0.95);
// fresh sequences and ones continuing from their state slot.
OpCase gated_delta_rule(std::vector<Seq> seqs, int64_t Hk, int64_t Hv, int64_t dk, int64_t dv, DeltaRuleMode mode,
                        float decay = 1.0f) {
    const char* mode_name = mode == DeltaRuleMode::Auto      ? "auto"
                            : mode == DeltaRuleMode::Chunked ? "chunked"
                                                             : "recurrent";
    const float tol = mode == DeltaRuleMode::Recurrent ? 1e-4f : kChunkedTol;
    return {fmt("gated_delta_rule %s Hk=%lld Hv=%lld dk=%lld dv=%lld %s%s", seqs_name(seqs).c_str(), (long long)Hk,
                (long long)Hv, (long long)dk, (long long)dv, mode_name, decay == 1.0f ? "" : " slow"),
            "gated_delta_rule", [=](CaseRun& r) {
                PagedBatch p = paged_batch(r, seqs, 16, 1);
                const int64_t T = p.batch->num_tokens;
                const int64_t slots = static_cast<int64_t>(seqs.size()) + 2;
                const float unit = std::sqrt(3.0f / static_cast<float>(dk));
                const Tensor q = r.act(Shape{T, Hk, dk}, unit), k = r.act(Shape{T, Hk, dk}, unit);
                const Tensor v = r.act(Shape{T, Hv, dv});
                HostTensor g = r.host_random(Shape{T, Hv}), beta = r.host_random(Shape{T, Hv});
                for (int64_t i = 0; i < T * Hv; ++i) {
                    g.tensor.data_as<float>()[i] = -0.5f * decay * (1.0f + g.tensor.data_as<float>()[i]);
                    beta.tensor.data_as<float>()[i] = 0.5f + 0.45f * beta.tensor.data_as<float>()[i];
                }
                const Tensor dg = r.upload_act(g), dbeta = r.upload_act(beta);
                const Tensor state = r.dense(Shape{slots, Hv, dk, dv}, DType::F32, 0.1f);
                const Tensor out = r.out(Shape{T, Hv, dv}, "out", tol);
                r.check(state, "state", tol);
                const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
                const ForwardBatch& batch = *p.batch;
                return
                    [=, &r, &batch] { r.ops().gated_delta_rule(q, k, v, dg, dbeta, state, batch, q_scale, out, mode); };
            }};
}

// The fused recurrence (gating, q/k L2 norm, delta rule in one call) against the four ops it stands for on the CPU.
// q and k are not normalised on input; g, beta, q and k are scratch a fused backend may leave as they are, so only
// the output and the state are compared.
OpCase gated_delta_net(std::vector<Seq> seqs, int64_t Hk, int64_t Hv, int64_t dk, int64_t dv) {
    return {fmt("gated_delta_net %s Hk=%lld Hv=%lld dk=%lld dv=%lld", seqs_name(seqs).c_str(), (long long)Hk,
                (long long)Hv, (long long)dk, (long long)dv),
            "gated_delta_net", [=](CaseRun& r) {
                PagedBatch p = paged_batch(r, seqs, 16, 1);
                const int64_t T = p.batch->num_tokens;
                const int64_t slots = static_cast<int64_t>(seqs.size()) + 2;
                const Tensor q = r.act(Shape{T, Hk, dk}), k = r.act(Shape{T, Hk, dk}), v = r.act(Shape{T, Hv, dv});
                const Tensor a = r.act(Shape{T, Hv}, 4.0f), b = r.act(Shape{T, Hv}, 4.0f);
                const Tensor a_log = r.dense(Shape{Hv}, DType::F32), dt_bias = r.dense(Shape{Hv}, DType::BF16);
                const Tensor g = r.act(Shape{T, Hv}), beta = r.act(Shape{T, Hv});
                const Tensor state = r.dense(Shape{slots, Hv, dk, dv}, DType::F32, 0.1f);
                const Tensor out = r.out(Shape{T, Hv, dv}, "out", kChunkedTol);
                r.check(state, "state", kChunkedTol);
                const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
                const ForwardBatch& batch = *p.batch;
                return [=, &r, &batch] {
                    r.ops().gated_delta_net(q, k, v, a, b, a_log, dt_bias, g, beta, state, batch, q_scale, 1e-6f, out);
                };
            }};
}

OpCase gated_rms_norm(int64_t T, int64_t H, int64_t D) {
    return {fmt("gated_rms_norm T=%lld H=%lld D=%lld", (long long)T, (long long)H, (long long)D), "gated_rms_norm",
            [=](CaseRun& r) {
                const Tensor x = r.act(Shape{T, H, D}, 2.0f), z = r.act(Shape{T, H, D}, 2.0f), w = r.dense(Shape{D});
                const Tensor out = r.out(Shape{T, H, D}, "out", kF32Tol);
                return [=, &r] { r.ops().gated_rms_norm(x, z, w, 1e-6f, out); };
            }};
}

constexpr DType BF16 = DType::BF16, F16 = DType::F16, F32 = DType::F32;
constexpr NormKind kPlain = NormKind::Plain, kZc = NormKind::ZeroCentred;

// Several sequences in one batch: a decode with a long cached context (split-KV), a prefill chunk with a cached
// prefix, a fresh prefill, a short decode, a short chunk.
const std::vector<Seq> kMixed = {{2000, 1}, {37, 50}, {0, 130}, {5, 1}, {300, 9}};
const std::vector<Seq> kDecode = {{2000, 1}, {0, 1}, {300, 1}, {16, 1}, {47, 1}};
// One sequence decoding (batch 1): on an H100/H200 its 8 splits of Qwen3's heads are combined in a thread block
// cluster (decode_attention.cu); kDecode's batches take clusters of 7 (8 KV heads) and 4 (16), or none.
const std::vector<Seq> kDecodeOne = {{511, 1}};
const std::vector<Seq> kPrefill = {{0, 300}};
const std::vector<Seq> kChunk = {{700, 200}, {0, 65}};
const std::vector<Seq> kPrologue = {{5, 7}};

}  // namespace

const std::vector<OpCase>& op_cases() {
    static const std::vector<OpCase> cases = [] {
        const std::vector<Seq> decode160 = decode_seqs(160, 400);
        std::vector<OpCase> c = {
            embedding(50, 64, 7, BF16),
            embedding(50, 64, 7, F32),
            embedding(1000, 4096, 33, BF16),
            embedding(1000, 4096, 33, F32),
            rms_norm(1, 64, kPlain, false),
            rms_norm(5, 4096, kZc, false),
            rms_norm(130, 1000, kPlain, true),
            rms_norm(130, 1000, kZc, true),
            add_rms_norm(1, 64, kPlain),
            add_rms_norm(5, 4096, kZc),
            add_rms_norm(130, 1000, kPlain),
            head_rms_norm(3, 4, 32, kPlain, true),
            head_rms_norm(40, 32, 128, kPlain, true),
            head_rms_norm(9, 8, 256, kZc, false),
            // T = 1: the GEMV kernel on CUDA (aligned and odd shapes, N past its one-warp-per-row threshold);
            // T > 1: cuBLASLt. Every weight dtype, with and without bias.
            linear(1, 64, 128, BF16, false),
            linear(1, 64, 128, F16, true),
            linear(1, 77, 96, F32, true),
            linear(1, 129, 100, BF16, false),
            linear(1, 8200, 264, BF16, true),
            linear(1, 1024, 4096, BF16, false),
            linear(2, 77, 96, F32, true),
            linear(3, 300, 264, BF16, true),
            linear(5, 9000, 1024, BF16, false),
            linear(8, 129, 100, F16, false),
            linear(9, 64, 128, BF16, false),
            linear(20, 50, 64, F32, false),
            linear(37, 512, 256, BF16, true),
            linear(64, 96, 72, F16, false),
            linear(128, 256, 512, F16, true),
            linear(300, 1000, 1024, BF16, false),
            linear(512, 384, 256, BF16, true),
            linear(512, 128, 128, F32, false),
            // Multi-LoRA: a decode token, tiles of one slot past 16 tokens with K past the shrink's 256-input chunk
            // (rank 20: the expand's float4 path; 21: its scalar one), four uneven parts, a prefill of many tiles;
            // and steps of 2 to 8 tokens, whose kernels hold 2, 4 and 8 tokens a tile (their whole 1,024-input split
            // in one chunk, or 512 inputs a chunk), with ragged last splits (K 2,500 and 1,000) and, on one slot,
            // full tiles.
            lora_linear(1, 300, 16, {64}),
            lora_linear(2, 2048, 16, {96, 32}),
            lora_linear(3, 2500, 16, {64}),
            lora_linear(7, 1000, 8, {48, 16}),
            lora_linear(4, 2500, 16, {64, 32}, {.one_slot = true}),
            lora_linear(8, 1000, 16, {48, 16}, {.one_slot = true}),
            lora_linear(40, 1000, 20, {40, 24, 8, 8}),
            lora_linear(40, 1000, 21, {40, 24, 8, 8}),
            lora_linear(300, 512, 16, {100, 28}),
            lora_linear(1100, 512, 16, {100, 28}),  // a prefill-sized step: ~70 tiles over three slots
            // Gated MLP: four warps per row (2I < 8192), one warp per row (2I >= 8192), an odd K (the element-wise
            // GEMV), fp8, and more tokens (the default: linear then silu_mul).
            linear_silu_mul(1, 96, 256, BF16),
            linear_silu_mul(1, 4500, 512, BF16),
            linear_silu_mul(1, 40, 100, F16),
            linear_silu_mul(1, 300, 256, DType::F8_E4M3),
            // 32 chunks: with PAGODA_FP8_GEMV_MMA=1 the tensor-core GEMV, in clusters of 4 with
            // PAGODA_GEMV_MMA_SPLIT=4.
            linear_silu_mul(1, 300, 2048, DType::F8_E4M3),
            linear_silu_mul(6, 96, 256, BF16),
            // Grouped int: AWQ-like int4 (f16 scales, zero points) and symmetric bf16 on the tensor-core GEMV with
            // SiLU·mul; a ragged last row tile (I % 16 = 8) with a bias; 64 row tiles over 32 chunks (clusters of 4
            // on an H100) and 96 over 128 (group 32); then what takes linear then silu_mul: a weight too small for
            // the tensor-core GEMV, an act-order one, an int8 one.
            linear_silu_mul_int(1, 1024, 512, {.group = 128, .zero_points = true}),
            linear_silu_mul_int(1, 1024, 512, {.group = 64, .round_to = BF16}),
            linear_silu_mul_int(1, 1032, 512, {.group = 128, .zero_points = true, .bias = true}),
            linear_silu_mul_int(1, 1024, 4096, {.group = 128, .round_to = BF16}),
            linear_silu_mul_int(1, 1536, 4096, {.group = 32, .zero_points = true}),
            linear_silu_mul_int(1, 96, 256, {.group = 128, .zero_points = true}),
            linear_silu_mul_int(1, 1024, 512, {.group = 128, .zero_points = true, .act_order = true}),
            linear_silu_mul_int(1, 1024, 512, {.group = 128, .bits = 8}),
            linear_gated_add(1, 2048, 512, BF16),
            linear_gated_add(1, 96, 100, F32),  // the element-wise GEMV
            linear_gated_add(4, 2048, 256, BF16),
            linear_overwritten_input(24, 64),
            handoff_linear(Producer::kSiluMul, 24, 96, 64, BF16, false),
            handoff_linear(Producer::kSiluMul, 24, 96, 64, BF16, true),
            handoff_linear(Producer::kSiluMul, 7, 98, 40, BF16, false),  // N % 4 != 0: the scalar path writes the copy
            handoff_linear(Producer::kSiluMul, 24, 96, 64, F16, false),
            handoff_linear(Producer::kRmsNorm, 24, 96, 64, BF16, false),
            handoff_linear(Producer::kRmsNorm, 24, 96, 64, BF16, true),
            handoff_linear(Producer::kRmsNorm, 5, 9000, 64, BF16, false),  // more than 8 elements a thread: the loop
            handoff_linear(Producer::kAddRmsNorm, 24, 96, 64, BF16, false),
            handoff_linear(Producer::kGatedRmsNorm, 24, 96, 64, BF16, false),
            handoff_linear(Producer::kGatedRmsNorm, 24, 96, 64, BF16, true),
            // fp8: the GEMV's vector path (K a multiple of 16) and its element path, ragged blocks, every layout.
            // int4: the GEMV's 16-byte path (group a multiple of 32; one warp per row from 8,192 rows) and its element
            // path (group 16), zero points or symmetric, f16 rounding, and the dequantise-then-GEMM path.
            linear_int4(1, 256, 512, 128, true, DType::F16, false),
            linear_int4(1, 300, 256, 32, false, DType::F32, true),
            linear_int4(1, 8200, 256, 64, true, DType::F16, true),
            linear_int4(1, 72, 96, 16, true, DType::F16, false),
            linear_int4(1, 300, 512, 64, true, DType::BF16,
                        true),  // bf16 scales: the all-bf16 pairs (int4_dequant.cuh)
            linear_int4(1, 256, 512, 128, false, DType::BF16, false, 8),
            linear_int4(2, 300, 256, 32, true, DType::F16, true),
            linear_int4(37, 512, 384, 128, false, DType::BF16, false),
            linear_int4(4, 300, 4096, 128, true, DType::F16, true),
            linear_int4(16, 1000, 256, 16, false, DType::BF16, false),
            linear_int4(70, 136, 512, 32, true, DType::F32, false),
            linear_int4(8, 300, 2048, 64, true, DType::F16, false, 8),
            // 2-8 tokens with K a multiple of 128 and groups of 32 or more: the tensor-core GEMV (from 2 tokens by
            // default; PAGODA_INT4_GEMV_MMA=0 the dequantised weight's GEMM, =1 from one token); bf16 and f16 scales,
            // symmetric or with zeros, rows past a block's 32; K = 4096 (linear_int4(4, 300, 4096, ...) above)
            // gives each of 16 warps (PAGODA_GEMV_MMA_WARPS=16) two chunks.
            linear_int4(3, 520, 384, 64, false, DType::BF16, false),
            linear_int4(8, 136, 1024, 128, true, DType::F16, false),
            linear_int4(6, 72, 512, 32, true, DType::BF16, true),
            // act-order GPTQ: x gathered by the weight's input permutation, then the GEMV (T = 1) or the dequantised
            // weight's GEMM; 4 and 8 bits.
            linear_int4(1, 256, 512, 32, false, DType::F16, false, 4, true),
            linear_int4(1, 72, 96, 16, true, DType::F16, true, 4, true),
            linear_int4(37, 512, 384, 128, true, DType::F16, false, 4, true),
            linear_int4(1, 300, 256, 32, true, DType::F16, true, 8, true),
            linear_int4(5, 256, 512, 64, false, DType::F16, false, 8, true),
            linear_act_order_pair(6, 128, 256, 32),
            // GPTQ 8-bit: the GEMV's 16-byte path (groups of 32, 128; one warp a row past 8192 rows), its element
            // path (group 8), the bf16 copy for prefill (T = 2, 37).
            linear_int4(1, 256, 512, 128, false, DType::F16, false, 8),
            linear_int4(1, 300, 256, 32, true, DType::F16, true, 8),
            linear_int4(1, 8200, 256, 64, true, DType::F16, true, 8),
            linear_int4(1, 72, 96, 8, true, DType::F16, false, 8),
            linear_int4(2, 300, 256, 32, true, DType::F16, true, 8),
            linear_int4(37, 512, 384, 128, false, DType::F32, false, 8),
            linear_fp8(1, 256, 512, ScaleLayout::kBlock, false),
            linear_fp8(1, 300, 264, ScaleLayout::kBlock, true),
            linear_fp8(1, 129, 100, ScaleLayout::kBlock, false),
            linear_fp8(1, 8200, 384, ScaleLayout::kPerChannel, true),
            linear_fp8(1, 1100, 512, ScaleLayout::kBlock, true),  // one warp a row from 1,024 rows (gemv.h)
            linear_fp8(1, 77, 96, ScaleLayout::kPerTensor, false),
            linear_fp8(2, 300, 264, ScaleLayout::kBlock, true),
            linear_fp8(9, 129, 100, ScaleLayout::kPerChannel, false),
            linear_fp8(37, 512, 256, ScaleLayout::kBlock, false),
            linear_fp8(300, 1000, 1024, ScaleLayout::kBlock, true),
            linear_fp8(64, 96, 72, ScaleLayout::kPerTensor, false),
            // The weight-only tensor-core GEMM (2 .. 128 tokens, K a multiple of 32): weight rows past a 128-row tile,
            // K ranges added in order (16 at K = 4096), tokens past a 64-row tile, every scale layout.
            linear_fp8(2, 300, 512, ScaleLayout::kBlock, true),
            linear_fp8(8, 1000, 4096, ScaleLayout::kPerChannel, false),
            linear_fp8(64, 2048, 1024, ScaleLayout::kPerTensor, false),
            linear_fp8(100, 256, 256, ScaleLayout::kBlock, false),
            // W8A8: cuBLASLt's fp8 GEMM (block scales at 2 .. 300 tokens, T not a multiple of 4 for the scales'
            // padding; per channel), and the weight-only paths over the rounded input (T = 1, K not a multiple of
            // 512, N not of 16, per-tensor scales).
            linear_fp8(300, 1024, 2048, ScaleLayout::kBlock, true, "", 128),
            linear_fp8(7, 512, 512, ScaleLayout::kBlock, false, "", 128),
            linear_fp8(2, 256, 1024, ScaleLayout::kBlock, false, "", 128),
            linear_fp8(64, 1008, 1024, ScaleLayout::kPerChannel, true, "", -1),
            linear_fp8(3, 512, 4096, ScaleLayout::kPerChannel, false, "", -1),
            linear_fp8(1, 256, 512, ScaleLayout::kBlock, true, "", 128),
            linear_fp8(37, 256, 384, ScaleLayout::kBlock, false, "", 128),
            linear_fp8(1, 300, 264, ScaleLayout::kPerChannel, false, "", -1),
            linear_fp8(9, 129, 100, ScaleLayout::kPerChannel, false, "", -1),
            linear_fp8(64, 96, 72, ScaleLayout::kPerTensor, false, "", -1),
            rope(5, 4, 32, 32),
            rope(70, 8, 128, 64),
            rope(3, 2, 256, 128),
            qk_norm_rope(5, 4, 2, 64, 64, 0),
            qk_norm_rope(5, 4, 2, 64, 64, 1),
            qk_norm_rope(5, 4, 2, 64, 64, 2),
            qk_norm_rope(70, 32, 8, 128, 128, 1),
            qk_norm_rope(70, 32, 8, 128, 128, 2),
            qk_norm_rope(3, 8, 1, 256, 64, 1),
            qk_norm_rope_write_kv(kPrologue, 8, 2, 128, 128, 1),
            qk_norm_rope_write_kv(kPrologue, 8, 2, 128, 128, 0),
            qk_norm_rope_write_kv(kPrologue, 8, 2, 128, 128, 2),
            qk_norm_rope_write_kv({{5, 3}}, 4, 4, 64, 32, 1),
            qk_norm_rope_write_kv({{5, 9}}, 4, 1, 32, 32, 1),
            qk_norm_rope_write_kv(kMixed, 16, 4, 256, 128, 1, 32),
            // YaRN: Qwen3's full rotary dims and Qwen3.5's partial ones (64 of 256).
            rope(70, 8, 128, 128, true),
            rope(3, 2, 256, 64, true),
            qk_norm_rope(70, 32, 8, 128, 128, 1, true),
            qk_norm_rope(5, 8, 2, 256, 64, 2, true),
            qk_norm_rope_write_kv(kPrologue, 8, 2, 128, 128, 1, 16, true),
            qk_norm_rope_write_kv(kMixed, 16, 4, 256, 64, 2, 32, true),
            write_kv(kMixed, 2, 32),
            write_kv(kMixed, 8, 128, 32),
            write_kv(kDecode, 4, 256),
            // fp8 (e4m3) KV caches: the writes, the prologue's store, scales calculated from the first rows.
            write_kv(kMixed, 8, 128, 32, Kv::Fp8),
            write_kv(kDecode, 4, 256, 16, Kv::Fp8),
            write_kv(kMixed, 2, 32, 16, Kv::Fp8, true),
            write_kv(kMixed, 8, 128, 16, Kv::Fp8Calc),
            qk_norm_rope_write_kv(kPrologue, 8, 2, 128, 128, 1, 16, false, Kv::Fp8),
            qk_norm_rope_write_kv(kMixed, 16, 4, 256, 64, 2, 32, false, Kv::Fp8),
            qk_norm_rope_write_kv(kPrologue, 8, 2, 128, 128, 1, 16, false, Kv::Fp8Calc),
            write_kv(kMixed, 8, 128, 32, Kv::Fp8Heads),
            qk_norm_rope_write_kv(kMixed, 16, 4, 256, 64, 2, 32, false, Kv::Fp8Heads),
        };
        // Attention: every head-dim kernel, GQA group sizes 1 to 16, decode-only batches (split-KV and one split),
        // prefills, mixed batches, block sizes 16 and 32.
        struct Heads {
            int64_t Hq, Hkv, D;
        };
        for (Heads h : {Heads{4, 2, 32}, Heads{32, 8, 128}, Heads{16, 16, 64}, Heads{8, 1, 256}, Heads{28, 4, 128},
                        Heads{64, 4, 128}}) {
            c.push_back(paged_attention("mixed", kMixed, h.Hq, h.Hkv, h.D));
            c.push_back(paged_attention("decode", kDecode, h.Hq, h.Hkv, h.D));
            c.push_back(paged_attention("decode", decode160, h.Hq, h.Hkv, h.D));
            c.push_back(paged_attention("mixed", kMixed, h.Hq, h.Hkv, h.D, 16, Kv::Fp8));
            c.push_back(paged_attention("decode", decode160, h.Hq, h.Hkv, h.D, 16, Kv::Fp8));
        }
        for (const OpCase& more : {
                 paged_attention("prefill", kPrefill, 32, 8, 128),
                 paged_attention("prefill", kPrefill, 16, 16, 64),
                 paged_attention("prefill", kPrefill, 8, 2, 256),
                 paged_attention("chunk", kChunk, 32, 8, 128),
                 // Prefill chunks as the Hopper kernel (PAGODA_PREFILL_ATTENTION=wgmma) tiles them, 128 query rows and
                 // 128 keys (64 at head_dim 256) a block: a long fresh prompt (17 query tiles, the last partly
                 // filled), chunks after cached prefixes that end inside a key tile beside a decode, query lengths
                 // that are not multiples of 64, block sizes 16 and 32, GQA groups 4 and 8, head dims 64/128/256.
                 paged_attention("prefill", {{0, 2100}}, 8, 2, 128),
                 paged_attention("chunk", {{1000, 333}, {0, 77}, {129, 64}, {5, 1}, {60, 200}}, 16, 4, 128, 32),
                 paged_attention("chunk", {{200, 150}, {0, 70}, {3, 1}}, 16, 2, 256),
                 paged_attention("chunk", {{100, 190}, {0, 64}}, 8, 2, 64, 32),
                 paged_attention("mixed", kMixed, 32, 8, 128, 32),
                 paged_attention("decode", kDecode, 16, 2, 64, 32),
                 paged_attention("decode", kDecodeOne, 32, 4, 128),
                 paged_attention("decode", kDecodeOne, 32, 8, 128, 16, Kv::Fp8),
                 paged_attention("mixed", kMixed, 8, 8, 16),
                 paged_attention("prefill", kPrefill, 32, 8, 128, 16, Kv::Fp8),
                 paged_attention("prefill", kPrefill, 8, 2, 256, 16, Kv::Fp8),
                 paged_attention("chunk", kChunk, 32, 8, 128, 16, Kv::Fp8),
                 paged_attention("decode", kDecode, 16, 2, 64, 32, Kv::Fp8),
                 // Per-head scales: the decode (split and not), prefill and general kernels.
                 paged_attention("mixed", kMixed, 32, 8, 128, 16, Kv::Fp8Heads),
                 paged_attention("decode", decode160, 28, 4, 128, 16, Kv::Fp8Heads),
                 paged_attention("prefill", kPrefill, 8, 2, 256, 16, Kv::Fp8Heads),
                 paged_attention("mixed", kMixed, 4, 2, 32, 16, Kv::Fp8Heads),
                 silu_mul(1, 17),
                 silu_mul(33, 4096),
                 silu_mul(5, 4098),  // rows 8-byte aligned: one column a thread on CUDA
                 add(70000, 4),      // more rows than a CUDA grid's y (65,535)
                 sigmoid_mul(1, 17, 17),
                 sigmoid_mul(33, 4096, 4096),
                 sigmoid_mul(1, 17, 1),
                 sigmoid_mul_heads(1, 4, 256),
                 sigmoid_mul_heads(37, 3, 24),
                 sigmoid_mul(33, 4096, 1),
                 add(1, 17),
                 add(33, 4096),
                 copy(9, 300, BF16),
                 copy(9, 300, F16),
                 copy(9, 300, F32),
                 gather_rows(9, 300, 4),
                 gather_rows(64, 4096, 64),
                 argmax(4, 5),
                 argmax(4, 1000),
                 argmax(4, 151936),
                 argmax(3, 248320),  // Qwen3.5's vocabulary, ties in row 1
                 argmax(3, 1001),    // rows not 16-byte aligned: the one-by-one path
                 // MoE routing: Qwen3-30B-A3B's 128 experts / top-8, Qwen3-Next's and Qwen3.5's 512 / top-10 (random
                 // bf16 logits there tie often: the ids must break ties as the CPU does).
                 moe_topk_softmax(9, 12, 3, false),
                 moe_topk_softmax(9, 12, 3, true),
                 moe_topk_softmax(33, 128, 8, true),
                 moe_topk_softmax(5, 512, 10, false),
                 moe_topk_softmax(64, 512, 10, true),
                 // MoE experts. On CUDA up to 4 rows per expert on average run the GEMV kernels, more the mma ones;
                 // K and N not multiples of the tiles (H = 200, I = 72) and not of 8 (I = 20, H = 36: the element-
                 // wise loads); one expert with most rows (several tiles) and most experts empty; F16 weights.
                 moe_experts(7, 32, 20, 5, 2),
                 moe_experts(100, 36, 20, 4, 2),
                 moe_experts(33, 256, 96, 16, 4),
                 moe_experts(1, 256, 96, 128, 8, Routing::Random),
                 moe_experts(3, 256, 96, 128, 8, Routing::Random),
                 moe_experts(64, 256, 96, 128, 8, Routing::Random),
                 moe_experts(300, 256, 96, 128, 8, Routing::Random),
                 moe_experts(64, 256, 96, 128, 8, Routing::Skewed),
                 // One rank of four in an expert-parallel group: the pair passes, the grouped GEMV and the mma path.
                 moe_experts(1, 256, 96, 128, 8, Routing::Random, DType::BF16, " ep", 32),
                 moe_experts(3, 256, 96, 128, 8, Routing::Random, DType::BF16, " ep", 32),
                 moe_experts(64, 256, 96, 128, 8, Routing::Random, DType::BF16, " ep", 32),
                 moe_experts(300, 256, 96, 128, 8, Routing::Random, DType::BF16, " ep", 32),
                 // fp8 experts. CUDA: read as stored by the pair passes (1 token) and the grouped GEMV passes (9
                 // and 20 tokens, 6 on one rank of four in expert parallelism: up to 2 rows an expert), else
                 // dequantised to a bf16 stack for the mma passes (33).
                 moe_experts(1, 256, 96, 16, 4, Routing::Random, DType::F8_E4M3),
                 moe_experts(9, 256, 96, 32, 4, Routing::Random, DType::F8_E4M3),
                 moe_experts(20, 256, 96, 128, 8, Routing::Random, DType::F8_E4M3),
                 moe_experts(6, 256, 96, 128, 8, Routing::Random, DType::F8_E4M3, " ep", 32),
                 moe_experts(33, 256, 96, 16, 4, Routing::Random, DType::F8_E4M3),
                 moe_experts(300, 256, 96, 128, 8, Routing::Skewed),
                 moe_experts(5, 200, 72, 16, 4, Routing::Random),
                 moe_experts(300, 200, 72, 16, 4, Routing::Random),
                 // The ends of issue 16's ranges: Qwen3-Next's 512 experts / top-10 at one token (pair passes), 64
                 // (grouped GEMV) and 8,192 (the mma passes over a whole prefill chunk); top-1 over 8 experts, and
                 // 8,192 tokens all sent to expert 0 (the others get none).
                 moe_experts(1, 128, 64, 512, 10, Routing::Random),
                 moe_experts(64, 128, 64, 512, 10, Routing::Random),
                 moe_experts(8192, 64, 32, 512, 10, Routing::Random),
                 moe_experts(5, 128, 64, 8, 1, Routing::Random),
                 moe_experts(8192, 64, 32, 8, 1, Routing::Skewed),
                 moe_experts(2, 128, 64, 8, 2, Routing::Random, F16),
                 moe_experts(40, 128, 64, 8, 2, Routing::Random, F16),
                 // int4 experts. CUDA: read as stored by the pair passes (1 and 3 tokens) and the grouped GEMV passes
                 // (9 tokens over 32 experts; 64 skewed over 128), else dequantised to a bf16 stack first: prefill
                 // (33, 300: mma) and a GEMV-sized call whose rows (I = 72: 36 bytes) do not fit the int4 loads;
                 // groups of 128 with zero points (GPTQ/AWQ), 32 symmetric, 16, and 8.
                 moe_experts(1, 256, 128, 16, 4, Routing::Random, BF16, "", 0, 128, true),
                 moe_experts(3, 256, 96, 128, 8, Routing::Random, BF16, "", 0, 32, false),
                 moe_experts(33, 256, 96, 16, 4, Routing::Random, BF16, "", 0, 32, true),
                 moe_experts(300, 208, 80, 16, 4, Routing::Random, BF16, "", 0, 16, true),
                 moe_experts(64, 256, 96, 128, 8, Routing::Skewed, BF16, "", 0, 32, false),
                 moe_experts(9, 256, 96, 32, 4, Routing::Random, BF16, "", 0, 32, true),
                 moe_experts(6, 256, 72, 16, 2, Routing::Random, BF16, "", 0, 8, false),
                 // int4 experts with expert parallelism (32 of 128 held): the pair and the grouped GEMV passes.
                 moe_experts(3, 256, 96, 128, 8, Routing::Random, BF16, " ep", 32, 32, true),
                 moe_experts(64, 256, 96, 128, 8, Routing::Random, BF16, " ep", 32, 32, true),
                 // Gated DeltaNet.
                 causal_conv1d_silu({{0, 7}, {5, 1}, {3, 4}}, 64, 4),
                 gdn_gating(9, 16),
                 l2_norm(9, 4, 128),
                 gated_delta_rule({{0, 70}, {4, 1}, {0, 3}}, 2, 4, 32, 48, DeltaRuleMode::Recurrent),
                 gated_delta_rule({{0, 70}, {4, 1}, {0, 3}}, 2, 4, 32, 48, DeltaRuleMode::Chunked),
                 gated_delta_rule({{9, 20}, {4, 1}}, 2, 2, 64, 64, DeltaRuleMode::Auto),
                 // The chunked (tensor-core) path on CUDA: Chunked runs every sequence chunked (chunks of 64: lengths
                 // at and around the chunk's edges, one token, two), Auto from 32 new tokens on, the rest recurrent
                 // in the same step. Qwen3.5-9B's heads (Hk 16, Hv 32, dk = dv = 128); small odd shapes (dk 20 and
                 // 80 padded to 32 and 128, dv 24 and 72: a partial column block); dk 256, which runs recurrent.
                 gated_delta_rule({{0, 1}, {0, 2}, {0, 63}, {0, 64}, {0, 65}, {0, 130}}, 16, 32, 128, 128,
                                  DeltaRuleMode::Chunked),
                 gated_delta_rule({{3, 1}, {9, 2}, {20, 63}, {0, 64}, {64, 65}, {1, 130}, {0, 31}, {7, 32}}, 16, 32,
                                  128, 128, DeltaRuleMode::Auto),
                 gated_delta_rule({{0, 1000}, {5, 1}, {40, 130}}, 16, 32, 128, 128, DeltaRuleMode::Auto, 0.02f),
                 gated_delta_rule({{100, 4097}}, 16, 32, 128, 128, DeltaRuleMode::Auto, 0.02f),
                 gated_delta_rule({{5, 100}, {0, 33}, {2, 1}, {0, 64}}, 3, 6, 20, 24, DeltaRuleMode::Chunked),
                 gated_delta_rule({{0, 129}, {11, 40}, {4, 1}}, 2, 6, 80, 72, DeltaRuleMode::Auto, 0.02f),
                 gated_delta_rule({{0, 100}, {3, 2}}, 1, 2, 256, 64, DeltaRuleMode::Chunked),
                 gated_delta_net({{0, 70}, {4, 1}, {0, 3}}, 2, 4, 32, 48),
                 gated_delta_net({{5, 1}, {9, 1}, {0, 1}}, 2, 4, 128, 128),
                 gated_delta_net({{0, 1000}, {3, 1}, {50, 130}, {0, 2}}, 16, 32, 128, 128),
                 gated_delta_net({{0, 65}, {2, 40}, {0, 1}}, 2, 4, 32, 48),
                 gated_rms_norm(9, 4, 128),
             })
            c.push_back(more);
        return c;
    }();
    return cases;
}

const std::vector<OpCase>& qwen3_30b_a3b_cases() {
    static const std::vector<OpCase> cases = [] {
        // Qwen3-30B-A3B's MoE layers: hidden 2048, 128 experts of intermediate 768, top-8.
        const int64_t H = 2048, I = 768, E = 128, k = 8;
        std::vector<OpCase> c;
        for (int64_t T : {1, 8, 16, 32, 64, 128, 256, 2048}) {
            c.push_back(moe_topk_softmax(T, E, k, true));
            c.push_back(moe_experts(T, H, I, E, k, Routing::Random, BF16, " qwen3-30b-a3b"));
        }
        return c;
    }();
    return cases;
}

const std::vector<OpCase>& qwen3_8b_cases() {
    static const std::vector<OpCase> cases = [] {
        // Qwen3-8B: hidden 4096, 32 query heads and 8 KV heads of 128, intermediate 12288, vocabulary 151936.
        const int64_t H = 4096, Hq = 32, Hkv = 8, D = 128, I = 12288, V = 151936;
        std::vector<OpCase> c;
        for (int64_t T : {1, 2, 8, 64, 256, 2048}) {
            c.push_back(linear(T, (Hq + 2 * Hkv) * D, H, BF16, false, "qkv"));
            c.push_back(linear(T, H, Hq * D, BF16, false, "o"));
            c.push_back(linear(T, 2 * I, H, BF16, false, "gate_up"));
            c.push_back(linear(T, H, I, BF16, false, "down"));
            // Qwen3-8B-FP8: the same projections in e4m3 with 128x128 block scales.
            c.push_back(linear_fp8(T, (Hq + 2 * Hkv) * D, H, ScaleLayout::kBlock, false, "qkv"));
            c.push_back(linear_fp8(T, H, Hq * D, ScaleLayout::kBlock, false, "o"));
            c.push_back(linear_fp8(T, 2 * I, H, ScaleLayout::kBlock, false, "gate_up"));
            c.push_back(linear_fp8(T, H, I, ScaleLayout::kBlock, false, "down"));
            // Qwen3-8B-AWQ: int4, group 128, zero points, f16 products: q (= o's shape), k/v, gate (= up) and down as
            // separate weights, then q/k/v (6,144 rows) and gate/up (24,576) fused as a device backend packs them.
            c.push_back(linear_int4(T, Hq * D, H, 128, true, DType::F16, false));
            c.push_back(linear_int4(T, Hkv * D, H, 128, true, DType::F16, false));
            c.push_back(linear_int4(T, I, H, 128, true, DType::F16, false));
            c.push_back(linear_int4(T, H, I, 128, true, DType::F16, false));
            c.push_back(linear_int4(T, (Hq + 2 * Hkv) * D, H, 128, true, DType::F16, false));
            c.push_back(linear_int4(T, 2 * I, H, 128, true, DType::F16, false));
            // compressed-tensors W4A16 (llm-compressor's default): symmetric, group 128, bf16 scales.
            c.push_back(linear_int4(T, (Hq + 2 * Hkv) * D, H, 128, false, DType::BF16, false));
            c.push_back(linear_int4(T, H, I, 128, false, DType::BF16, false));
        }
        // Rank-16 adapters on decode steps and a prefill chunk (issue 19): the base projection plus both LoRA kernels,
        // tokens spread over three adapter slots and the base model (lora_cases.cpp).
        for (int64_t T : {1, 8, 64, 2048}) {
            c.push_back(lora_linear(T, H, 16, {Hq * D, Hkv * D, Hkv * D}));
            c.push_back(lora_linear(T, I, 16, {H}));
        }
        for (int64_t T : {1, 256})
            c.push_back(linear(T, V, H, BF16, false, "lm_head"));
        for (int64_t T : {1, 256, 2048}) {
            c.push_back(rms_norm(T, H, kPlain, false));
            c.push_back(add_rms_norm(T, H, kPlain));
            c.push_back(silu_mul(T, I));
        }
        c.push_back(linear_silu_mul(1, I, H, BF16));
        // fp8 (block 128): one token's gate/up with SiLU·mul, on the tensor-core GEMV (the default since session 29,
        // with its f16 products) or the plain one (PAGODA_FP8_GEMV_MMA=2).
        c.push_back(linear_silu_mul(1, I, H, DType::F8_E4M3));
        // AWQ int4 (group 128, f16 scales, zero points): with SiLU·mul in the GEMV, or not (PAGODA_INT4_SILU_MUL=0).
        c.push_back(linear_silu_mul_int(1, I, H, {.group = 128, .zero_points = true}));
        c.push_back(embedding(V, H, 256, BF16));
        c.push_back(argmax(256, V));
        const std::vector<Seq> decode256(256, Seq{1535, 1}), decode16(16, Seq{4095, 1});
        c.push_back(qk_norm_rope_write_kv(decode256, Hq, Hkv, D, static_cast<int>(D), 1));
        c.push_back(qk_norm_rope_write_kv({{0, 2048}}, Hq, Hkv, D, static_cast<int>(D), 1));
        c.push_back(paged_attention("decode", decode256, Hq, Hkv, D));
        c.push_back(paged_attention("decode", {{511, 1}}, Hq, Hkv, D));
        c.push_back(paged_attention("decode", decode16, Hq, Hkv, D));
        // The e4m3 cache's decode: its staged ring widened (the default), PAGODA_FP8_DECODE=direct or =registers.
        c.push_back(paged_attention("decode", decode256, Hq, Hkv, D, 16, Kv::Fp8));
        c.push_back(paged_attention("decode", decode16, Hq, Hkv, D, 16, Kv::Fp8));
        c.push_back(paged_attention("prefill", {{0, 2048}}, Hq, Hkv, D));
        c.push_back(paged_attention("chunk", {{1536, 512}}, Hq, Hkv, D));
        return c;
    }();
    return cases;
}

}  // namespace pagoda::op_harness
