// CudaOps' attention family: RoPE, the attention prologue (QK-norm, RoPE, K/V store), write_kv and paged attention,
// over BF16/F16/F32 caches or F8E4M3 ones with their layer's scales.
#include <algorithm>

#include "runtime/cuda/cuda_ops.h"

namespace pagoda {

namespace {
// A KV cache's element type: what elem_type takes, or e4m3 (which only a cache with scales holds).
kcu::ElemType cache_elem_type(const KvCacheLayer& cache, const char* op) {
    return cache.key.dtype() == DType::F8_E4M3 ? kcu::ElemType::F8E4M3 : elem_type(cache.key.dtype(), op);
}
}  // namespace

void CudaOps::rope(const Tensor& x, std::span<const int32_t> positions, const RopeTable& table) {
    const auto profile = profiler_.scope("rope");
    ops_checks::expect_heads(x, kHere, "rope", "x");
    expect(static_cast<int64_t>(positions.size()) == x.dim(0), "rope", "one position per row of x");
    const int rotary_dim = table.rotary_dim();
    expect(rotary_dim > 0 && rotary_dim <= x.dim(2) && rotary_dim / 2 <= kcu::kMaxRotaryHalf, "rope",
           "bad rotary_dim " + std::to_string(rotary_dim));
    const void* d_pos = nullptr;
    resolve({{positions.data(), positions.size_bytes()}}, &d_pos);
    kcu::RopeArgs a{};
    a.x = rows3(x), a.T = x.dim(0), a.H = x.dim(1), a.D = x.dim(2);
    a.positions = static_cast<const int32_t*>(d_pos), a.rotary_dim = rotary_dim;
    std::copy(table.inv_freq.begin(), table.inv_freq.end(), a.inv_freq);
    a.attention_factor = table.attention_factor;
    kcu::launch_rope(a, stream_);
    invalidate_converted();
}

void CudaOps::qk_norm_rope(const Tensor& q, const Tensor& k, const Tensor& q_norm, const Tensor& k_norm, float eps,
                           NormKind kind, std::span<const int32_t> positions, const RopeTable& table) {
    const auto profile = profiler_.scope("qk_norm_rope");
    const void* d_pos = nullptr;
    resolve({{positions.data(), positions.size_bytes()}}, &d_pos);
    kcu::launch_qk_norm_rope(prologue_args(q, k, q_norm, k_norm, eps, kind, positions, d_pos, table), stream_);
    invalidate_converted();
}

void CudaOps::qk_norm_rope_write_kv(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_norm,
                                    const Tensor& k_norm, float eps, NormKind kind, const ForwardBatch& batch,
                                    const RopeTable& table, const KvCacheLayer& cache) {
    if (settles_kv_scales(cache.scales, batch.slot_mapping)) {
        // Calculated scales come from the finished k rows, which the one-kernel prologue makes and stores at once:
        // this once (the first stored step), the two ops one after the other.
        Ops::qk_norm_rope_write_kv(q, k, v, q_norm, k_norm, eps, kind, batch, table, cache);
        return;
    }
    const auto profile = profiler_.scope("qk_norm_rope + write_kv");
    const void* d[2] = {};  // one resolve: per-op uploads of one call share a scratch buffer
    resolve({{batch.positions.data(), batch.positions.size_bytes()},
             {batch.slot_mapping.data(), batch.slot_mapping.size_bytes()}},
            d);
    kcu::QkNormRopeArgs a = prologue_args(q, k, q_norm, k_norm, eps, kind, batch.positions, d[0], table);
    const KvTarget target = kv_target(k, v, batch, cache, d[1], "qk_norm_rope_write_kv");
    a.v = rows3(v), a.slot_mapping = target.slots, a.key_cache = cache.key.data();
    a.value_cache = cache.value.data(), a.cache_type = target.type, a.num_slots = target.num_slots;
    a.k_inv_scale = target.k_inv_scale, a.v_inv_scale = target.v_inv_scale;
    a.k_head_scale = target.k_heads, a.v_head_scale = target.v_heads;
    kcu::launch_qk_norm_rope(a, stream_);
    invalidate_converted();
}

void CudaOps::write_kv(const Tensor& k, const Tensor& v, const ForwardBatch& batch, const KvCacheLayer& cache) {
    const auto profile = profiler_.scope("write_kv");
    const void* d_slots = nullptr;
    resolve({{batch.slot_mapping.data(), batch.slot_mapping.size_bytes()}}, &d_slots);
    const KvTarget target = kv_target(k, v, batch, cache, d_slots, "write_kv");
    kcu::launch_kv_write(
        {rows3(k), rows3(v), k.dim(0), k.dim(1), k.dim(2), target.slots, cache.key.data(), cache.value.data(),
         target.type, target.num_slots, target.k_inv_scale, target.v_inv_scale, target.k_heads, target.v_heads},
        stream_);
    invalidate_converted();
}

void CudaOps::paged_attention(const Tensor& q, const KvCacheLayer& cache, const ForwardBatch& batch, float scale,
                              const Tensor& out) {
    const auto profile = profiler_.scope("paged_attention");
    const char* op = "paged_attention";
    ops_checks::expect_heads(q, kHere, op, "q");
    ops_checks::expect_heads(out, kHere, op, "out");
    expect(q.shape() == out.shape() && q.dim(0) == batch.num_tokens, op, "q/out shapes do not match the batch");
    const Tensor& key_cache = cache.key;
    check_cache(cache, key_cache.dim(2), q.dim(2), batch, op);
    expect(q.dim(1) % key_cache.dim(2) == 0 && q.dim(1) / key_cache.dim(2) <= 64, op,
           "query heads must be a multiple (at most 64x) of kv heads");
    expect(kcu::paged_attention_supports_head_dim(static_cast<int>(q.dim(2))), op,
           "head_dim " + std::to_string(q.dim(2)) + " has no CUDA kernel (16, 32, 64, 128, 256)");
    expect(static_cast<int32_t>(batch.query_start_loc.size()) == batch.num_seqs + 1 &&
               static_cast<int32_t>(batch.seq_lens.size()) == batch.num_seqs &&
               static_cast<int64_t>(batch.block_tables.size()) >=
                   static_cast<int64_t>(batch.num_seqs) * batch.max_blocks_per_seq,
           op, "query_start_loc/seq_lens/block_tables sizes do not match num_seqs");
    // The kernel trusts these; a bad table would read outside the cache. Checked once per step and cache.
    if (!already_checked(batch.block_tables.data(), key_cache.dim(0))) check_tables(batch, key_cache.dim(0));
    const void* d[3] = {};
    resolve({{batch.query_start_loc.data(), batch.query_start_loc.size_bytes()},
             {batch.seq_lens.data(), batch.seq_lens.size_bytes()},
             {batch.block_tables.data(), batch.block_tables.size_bytes()}},
            d);
    kcu::PagedAttentionArgs a{};
    a.q = rows3(q), a.out = rows3(out), a.T = q.dim(0);
    a.H_q = static_cast<int>(q.dim(1)), a.H_kv = static_cast<int>(key_cache.dim(2)), a.D = static_cast<int>(q.dim(2));
    a.key_cache = key_cache.data(), a.value_cache = cache.value.data();
    a.cache_type = cache_elem_type(cache, op);
    if (cache.scales) {
        a.k_scale = cache.scales->k, a.v_scale = cache.scales->v;
        a.k_head_scale = cache.scales->k_heads, a.v_head_scale = cache.scales->v_heads;
    }
    a.block_size = batch.block_size, a.num_seqs = batch.num_seqs, a.max_blocks_per_seq = batch.max_blocks_per_seq;
    a.query_start_loc = static_cast<const int32_t*>(d[0]);
    a.seq_lens = static_cast<const int32_t*>(d[1]);
    a.block_tables = static_cast<const int32_t*>(d[2]);
    a.scale = scale, a.early_loads = early_loads_;
    a.max_query_len = batch.max_query_len();
    for (int32_t i = 0; i < batch.num_seqs && !a.has_decode_seqs; ++i)
        a.has_decode_seqs = batch.query_len(i) == 1;
    a.max_seq_len = std::max(batch.max_seq_len(), batch.seq_len_bound);  // a recorded step plans for the bound
    a.num_splits = kcu::plan_paged_attention_splits(a, sm_count_);
    const size_t ws = kcu::paged_attention_workspace_floats(a.T, a.H_q, a.D, a.num_splits);
    // Reserved at the bound by the first attention op (the warm-up step's, even where it needs none), so no
    // later step grows it and moves memory a CUDA graph points into.
    const size_t bound = kcu::paged_attention_workspace_bound_floats(a.H_q, a.H_kv, a.D, sm_count_);
    void* workspace = attention_workspace_.get(std::max(ws, bound) * sizeof(float), stream_);
    if (ws > 0) a.workspace = static_cast<float*>(workspace);
    kcu::launch_paged_attention(a, stream_);
    invalidate_converted();
}

kcu::QkNormRopeArgs CudaOps::prologue_args(const Tensor& q, const Tensor& k, const Tensor& q_norm, const Tensor& k_norm,
                                           float eps, NormKind kind, std::span<const int32_t> positions,
                                           const void* d_positions, const RopeTable& table) {
    const char* op = "qk_norm_rope";
    ops_checks::expect_heads(q, kHere, op, "q");
    ops_checks::expect_heads(k, kHere, op, "k");
    expect(q.dim(0) == k.dim(0) && q.dim(2) == k.dim(2), op, "q and k differ in tokens or head_dim");
    expect(static_cast<int64_t>(positions.size()) == q.dim(0), op, "one position per token");
    const int rotary_dim = table.rotary_dim();
    expect(rotary_dim > 0 && rotary_dim <= q.dim(2) && rotary_dim / 2 <= kcu::kMaxRotaryHalf, op,
           "bad rotary_dim " + std::to_string(rotary_dim));
    kcu::QkNormRopeArgs a{};
    a.norm = q_norm.defined();
    if (a.norm) {
        ops_checks::expect_vec(q_norm, q.dim(2), kHere, op, "q_norm");
        ops_checks::expect_vec(k_norm, q.dim(2), kHere, op, "k_norm");
        expect(q_norm.dtype() == k_norm.dtype(), op, "q_norm and k_norm differ in dtype");
        a.q_weight = q_norm.data(), a.k_weight = k_norm.data();
        a.weight_type = elem_type(q_norm.dtype(), op);
    }
    a.q = rows3(q), a.k = rows3(k), a.T = q.dim(0);
    a.Hq = static_cast<int>(q.dim(1)), a.Hk = static_cast<int>(k.dim(1)), a.D = static_cast<int>(q.dim(2));
    a.eps = eps, a.zero_centred = kind == NormKind::ZeroCentred;
    a.positions = static_cast<const int32_t*>(d_positions), a.rotary_dim = rotary_dim;
    std::copy(table.inv_freq.begin(), table.inv_freq.end(), a.inv_freq);
    a.attention_factor = table.attention_factor;
    a.early_loads = early_loads_;
    return a;
}

CudaOps::KvTarget CudaOps::kv_target(const Tensor& k, const Tensor& v, const ForwardBatch& batch,
                                     const KvCacheLayer& cache, const void* d_slots, const char* op) {
    ops_checks::expect_heads(k, kHere, op, "k");
    ops_checks::expect_heads(v, kHere, op, "v");
    check_cache(cache, k.dim(1), k.dim(2), batch, op);
    const Tensor& key_cache = cache.key;
    expect(k.shape() == v.shape() && k.dim(0) == batch.num_tokens &&
               static_cast<int64_t>(batch.slot_mapping.size()) == k.dim(0),
           op, "k/v/slot_mapping do not match the batch's tokens");
    const int64_t num_slots = key_cache.dim(0) * key_cache.dim(1);
    if (!already_checked(batch.slot_mapping.data(), num_slots))
        for (int64_t s : batch.slot_mapping)
            expect(s < num_slots, op, "slot beyond the cache");
    KvTarget target{static_cast<const int64_t*>(d_slots), cache_elem_type(cache, op), num_slots};
    if (cache.scales) {
        if (settles_kv_scales(cache.scales, batch.slot_mapping)) settle_scales(k, v, target.slots, *cache.scales);
        target.k_inv_scale = 1.0f / cache.scales->k, target.v_inv_scale = 1.0f / cache.scales->v;
        target.k_heads = cache.scales->k_heads, target.v_heads = cache.scales->v_heads;
    }
    return target;
}

void CudaOps::settle_scales(const Tensor& k, const Tensor& v, const int64_t* d_slots, KvScales& scales) {
    expect(!capturing_, "write_kv", "KV scales are calculated on an eager step, never while a graph is recorded");
    // The attention workspace is free between attention ops (it is reserved at its bound by the warm-up step, so
    // this takes no new memory after it).
    auto* d_amax = static_cast<float*>(attention_workspace_.get(2 * sizeof(float), stream_));
    kcu::KvWriteArgs a{};
    a.k = rows3(k), a.v = rows3(v), a.T = k.dim(0), a.H_kv = k.dim(1), a.D = k.dim(2), a.slot_mapping = d_slots;
    kcu::launch_kv_amax(a, d_amax, stream_);
    float amax[2] = {};
    PAGODA_CUDA_OK(cudaMemcpyAsync(amax, d_amax, sizeof(amax), cudaMemcpyDeviceToHost, stream_));
    PAGODA_CUDA_OK(cudaStreamSynchronize(stream_));
    settle_kv_scales(scales, amax[0], amax[1]);
}

void CudaOps::check_tables(const ForwardBatch& batch, int64_t num_blocks) {
    const char* op = "paged_attention";
    for (int32_t s = 0; s < batch.num_seqs; ++s) {
        expect(batch.query_len(s) >= 0 && batch.context_len(s) >= 0 &&
                   (batch.seq_lens[s] + batch.block_size - 1) / batch.block_size <= batch.max_blocks_per_seq,
               op, "sequence " + std::to_string(s) + " is longer than its block table");
    }
    expect(batch.query_start_loc[batch.num_seqs] == batch.num_tokens, op, "query_start_loc does not end at T");
    for (int32_t id : batch.block_tables)
        expect(id >= 0 && id < num_blocks, op, "block id out of range");
}

void CudaOps::check_cache(const KvCacheLayer& cache, int64_t H_kv, int64_t D, const ForwardBatch& batch,
                          const char* op) {
    const Tensor &kc = cache.key, &vc = cache.value;
    expect(on_gpu(kc) && on_gpu(vc) && kc.dtype() == vc.dtype() && kc.is_contiguous() && vc.is_contiguous() &&
               kc.rank() == 4 && kc.shape() == vc.shape(),
           op, "caches must be contiguous CUDA [blocks, block_size, H_kv, D] tensors, got " + kc.to_string());
    expect((kc.dtype() == DType::F8_E4M3) == (cache.scales != nullptr), op,
           "an F8_E4M3 cache comes with its scales, and only such a cache");
    cache_elem_type(cache, op);
    expect(kc.dim(1) == batch.block_size && kc.dim(2) == H_kv && kc.dim(3) == D, op,
           "cache " + kc.to_string() + " does not match block_size " + std::to_string(batch.block_size) + ", heads " +
               std::to_string(H_kv) + ", head_dim " + std::to_string(D));
}

}  // namespace pagoda
