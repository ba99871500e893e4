// CudaOps: checks the Tensor views (device, dtype, shape), resolves the batch's host arrays to their device copies,
// and calls the kernels/cuda launchers or cuBLASLt. Activations are F32 on the GPU, as on the CPU: the model code
// is the same for both, the residual stream keeps fp32 precision, and the extra bytes are small next to the weights
// (decode) or the GEMMs (prefill). GEMM inputs are rounded to the weights' 16-bit type right before cuBLASLt.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_kernels.h"
#include "runtime/cuda_gemm.h"
#include "runtime/cuda_internal.h"
#include "runtime/cuda_op_profiler.h"
#include "runtime/forward_batch.h"
#include "runtime/ops_checks.h"

namespace pagoda {

namespace kcu = kernels::cuda;

namespace {

// The shared contract checks (ops_checks.h), for CUDA tensors.
#define expect(cond, op, what) PAGODA_OP_EXPECT(cond, op, what)
constexpr DeviceKind kHere = DeviceKind::Cuda;
constexpr int64_t kGemvTokens = 1;  // linear() with at most this many tokens uses the GEMV kernel

bool on_gpu(const Tensor& t) {
    return t.defined() && t.device().kind == DeviceKind::Cuda;
}

kcu::ElemType elem_type(DType d, const char* op) {
    switch (d) {
        case DType::F32:
            return kcu::ElemType::F32;
        case DType::BF16:
            return kcu::ElemType::BF16;
        case DType::F16:
            return kcu::ElemType::F16;
        default:
            ops_checks::fail(op, "only F32, BF16 and F16 tensors on CUDA, got " + std::string(dtype_name(d)));
    }
}

kcu::Rows rows2(const Tensor& t) {
    return {t.data_as<float>(), t.stride(0), 0};
}
kcu::Rows rows3(const Tensor& t) {
    return {t.data_as<float>(), t.stride(0), t.stride(1)};
}

size_t align256(size_t n) {
    return (n + 255) / 256 * 256;
}

struct CudaStepGraph final : StepGraph {
    CudaStepGraph(cudaGraphExec_t e, size_t staged) : exec(e), staged_bytes(staged) {}
    ~CudaStepGraph() override { cudaGraphExecDestroy(exec); }
    CudaStepGraph(const CudaStepGraph&) = delete;
    CudaStepGraph& operator=(const CudaStepGraph&) = delete;
    cudaGraphExec_t exec;
    size_t staged_bytes;  // the recorded step's batch arrays: a replay must stage the same layout
};

class CudaOps final : public CudaOpsBase {
  public:
    explicit CudaOps(const CudaOpsConfig& c)
        : device_(c.device), sm_count_(c.sm_count), stream_(c.stream), gemm_(c.stream), profiler_(c.stream) {
        PAGODA_CUDA_OK(cudaEventCreateWithFlags(&staging_free_, cudaEventDisableTiming));
        PAGODA_CUDA_OK(cudaEventRecord(staging_free_, stream_));
    }
    ~CudaOps() override {
        cudaStreamSynchronize(stream_);
        cudaEventDestroy(staging_free_);
    }

    // --- the step's host arrays ----------------------------------------------------------------------------------
    void invalidate_caches() override { invalidate_converted(); }

    void begin_step(const ForwardBatch& b) override {
        if (!capturing_) profiler_.begin_step(b.max_query_len() == 1 ? "decode steps" : "prefill and mixed steps");
        const size_t bytes = stage(b);
        if (capturing_) captured_bytes_ = bytes;
        // Recorded into a graph, this copy reads the staging memory again at every replay (replay restages it).
        if (bytes > 0)
            PAGODA_CUDA_OK(cudaMemcpyAsync(step_device_.get(bytes, stream_), step_staging_.get(bytes), bytes,
                                           cudaMemcpyHostToDevice, stream_));
        if (bytes > 0 && !capturing_) PAGODA_CUDA_OK(cudaEventRecord(staging_free_, stream_));
    }
    void end_step() override {
        if (!capturing_) profiler_.end_step();
        step_.clear();
        checked_.clear();
        invalidate_converted();
    }

    // --- CUDA graphs -----------------------------------------------------------------------------------------------
    bool supports_graphs() const override { return true; }

    void begin_capture() override {
        PAGODA_CUDA_OK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
        capturing_ = true;
        capture_failed_ = false;
        gemm_.set_capturing(true);
    }

    std::unique_ptr<StepGraph> end_capture() override {
        cudaGraph_t graph = nullptr;
        const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
        capturing_ = false;
        gemm_.set_capturing(false);
        cudaGetLastError();  // a failed capture leaves its error behind; it must not surface at the next check
        cudaGraphExec_t exec = nullptr;
        const bool ok = ended == cudaSuccess && !capture_failed_ && graph != nullptr &&
                        cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
        if (graph) cudaGraphDestroy(graph);
        if (!ok) {
            cudaGetLastError();
            return nullptr;
        }
        return std::make_unique<CudaStepGraph>(exec, captured_bytes_);
    }

    void replay(const StepGraph& graph, const ForwardBatch& b) override {
        const auto& recorded = static_cast<const CudaStepGraph&>(graph);
        profiler_.begin_step("decode steps (CUDA graph)");
        const size_t bytes = stage(b);
        PAGODA_OP_EXPECT(bytes == recorded.staged_bytes, "replay",
                         "the batch's arrays take " + std::to_string(bytes) + " bytes, the recorded step's " +
                             std::to_string(recorded.staged_bytes) + ": not the recorded batch shape");
        {
            const auto profile = profiler_.scope("graph replay");
            PAGODA_CUDA_OK(cudaGraphLaunch(recorded.exec, stream_));
        }
        PAGODA_CUDA_OK(cudaEventRecord(staging_free_, stream_));
        profiler_.end_step();
        step_.clear();
        checked_.clear();
    }

    uint64_t memory_generation() const override {
        // op_uploads_ is left out: an op that uploads its own array cannot be recorded (end_capture).
        return step_staging_.reallocations() + step_device_.reallocations() + convert_scratch_.reallocations() +
               attention_workspace_.reallocations();
    }

    // --- ops -----------------------------------------------------------------------------------------------------
    void embedding(const Tensor& table, std::span<const int32_t> ids, const Tensor& out) override {
        const auto profile = profiler_.scope("embedding");
        ops_checks::expect_mat(out, kHere, "embedding", "out");
        expect(on_gpu(table) && table.rank() == 2 && table.stride(1) == 1, "embedding",
               "table must be a CUDA [V, H] tensor, got " + table.to_string());
        expect(out.dim(0) == static_cast<int64_t>(ids.size()) && out.dim(1) == table.dim(1), "embedding",
               "out " + out.to_string() + " does not match ids/table");
        for (int32_t id : ids)
            expect(id >= 0 && id < table.dim(0), "embedding", "token id out of range");
        const void* d_ids = nullptr;
        resolve({{ids.data(), ids.size_bytes()}}, &d_ids);
        kcu::launch_embedding(
            {table.data(), elem_type(table.dtype(), "embedding"), table.stride(0), table.dim(0), table.dim(1),
             static_cast<const int32_t*>(d_ids), static_cast<int64_t>(ids.size()), out.data_as<float>(), out.stride(0)},
            stream_);
        invalidate_converted();
    }

    void rms_norm(const Tensor& x, const Tensor& weight, float eps, NormKind kind, const Tensor& out) override {
        norm_impl("rms_norm", Tensor(), x, weight, eps, kind, out);
    }

    void add_rms_norm(const Tensor& residual, const Tensor& x, const Tensor& weight, float eps, NormKind kind,
                      const Tensor& out) override {
        ops_checks::expect_mat(residual, kHere, "add_rms_norm", "residual");
        expect(residual.shape() == x.shape(), "add_rms_norm", "residual and x shapes differ");
        norm_impl("add_rms_norm", residual, x, weight, eps, kind, out);
    }

    void head_rms_norm(const Tensor& x, const Tensor& weight, float eps, NormKind kind) override {
        const auto profile = profiler_.scope("head_rms_norm");
        ops_checks::expect_heads(x, kHere, "head_rms_norm", "x");
        ops_checks::expect_vec(weight, x.dim(2), kHere, "head_rms_norm", "weight");
        kcu::RmsNormArgs a{};
        a.x = a.out = rows3(x);
        a.T = x.dim(0), a.H = x.dim(1), a.D = x.dim(2);
        a.weight = weight.data(), a.weight_type = elem_type(weight.dtype(), "head_rms_norm"), a.eps = eps;
        a.zero_centred = kind == NormKind::ZeroCentred;
        kcu::launch_rms_norm(a, stream_);
        invalidate_converted();
    }

    void linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y) override {
        ops_checks::expect_mat(x, kHere, "linear", "x");
        ops_checks::expect_mat(y, kHere, "linear", "y");
        expect(on_gpu(weight) && weight.rank() == 2 && weight.stride(1) == 1, "linear",
               "weight must be a CUDA [N, K] tensor with a contiguous last dim, got " + weight.to_string());
        expect(weight.dim(1) == x.dim(1) && weight.dim(0) == y.dim(1) && x.dim(0) == y.dim(0), "linear",
               "x " + x.to_string() + " · weight " + weight.to_string() + "ᵀ does not give y " + y.to_string());
        if (bias.defined()) ops_checks::expect_vec(bias, weight.dim(0), kHere, "linear", "bias");
        const int64_t T = x.dim(0), N = weight.dim(0), K = weight.dim(1);
        const kcu::ElemType wt = elem_type(weight.dtype(), "linear");
        const kcu::ElemType bt = bias.defined() ? elem_type(bias.dtype(), "linear") : kcu::ElemType::F32;
        // y may overwrite memory an earlier conversion came from.
        if (overlaps(y, converted_src_)) invalidate_converted();
        if (T == 0 || N == 0) return;
        // The GEMV kernel streams the weights once for all tokens, but its per-token work grows with T: measured on an
        // H200 with Qwen3-8B's projections, it matches cuBLASLt at T = 1 only (qkv: 16.8 us; at T = 2 21.2 us and at
        // T = 8 64 us, where cuBLASLt takes 16-17 us).
        if (T <= kGemvTokens) {
            const auto profile = profiler_.scope("linear (gemv)");
            kcu::launch_gemv({x.data_as<float>(), x.stride(0), weight.data(), wt, weight.stride(0),
                              bias.defined() ? bias.data() : nullptr, bt, y.data_as<float>(), y.stride(0), T, N, K},
                             stream_);
            return;
        }
        const void* b = x.data();
        int64_t ldb = x.stride(0);
        if (wt != kcu::ElemType::F32) {
            const auto profile = profiler_.scope("convert to bf16");
            b = converted_input(x, wt);
            ldb = K;
        }
        const auto profile = profiler_.scope("linear (gemm)");
        gemm_.run(wt, weight.data(), weight.stride(0), b, ldb, y.data_as<float>(), y.stride(0), N, T, K);
        if (bias.defined()) kcu::launch_add_bias(y.data_as<float>(), y.stride(0), bias.data(), bt, T, N, stream_);
    }

    void rope(const Tensor& x, std::span<const int32_t> positions, int rotary_dim, float theta) override {
        const auto profile = profiler_.scope("rope");
        ops_checks::expect_heads(x, kHere, "rope", "x");
        expect(static_cast<int64_t>(positions.size()) == x.dim(0), "rope", "one position per row of x");
        expect(rotary_dim > 0 && rotary_dim % 2 == 0 && rotary_dim <= x.dim(2) && rotary_dim / 2 <= kcu::kMaxRotaryHalf,
               "rope", "bad rotary_dim " + std::to_string(rotary_dim));
        const void* d_pos = nullptr;
        resolve({{positions.data(), positions.size_bytes()}}, &d_pos);
        kcu::RopeArgs a{};
        a.x = rows3(x), a.T = x.dim(0), a.H = x.dim(1), a.D = x.dim(2);
        a.positions = static_cast<const int32_t*>(d_pos), a.rotary_dim = rotary_dim;
        fill_inv_freq(theta, rotary_dim, a.inv_freq);
        kcu::launch_rope(a, stream_);
        invalidate_converted();
    }

    void qk_norm_rope(const Tensor& q, const Tensor& k, const Tensor& q_norm, const Tensor& k_norm, float eps,
                      NormKind kind, std::span<const int32_t> positions, int rotary_dim, float theta) override {
        const auto profile = profiler_.scope("qk_norm_rope");
        const void* d_pos = nullptr;
        resolve({{positions.data(), positions.size_bytes()}}, &d_pos);
        kcu::launch_qk_norm_rope(prologue_args(q, k, q_norm, k_norm, eps, kind, positions, d_pos, rotary_dim, theta),
                                 stream_);
        invalidate_converted();
    }

    void qk_norm_rope_write_kv(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_norm,
                               const Tensor& k_norm, float eps, NormKind kind, const ForwardBatch& batch,
                               int rotary_dim, float theta, const Tensor& key_cache,
                               const Tensor& value_cache) override {
        const auto profile = profiler_.scope("qk_norm_rope + write_kv");
        const void* d[2] = {};  // one resolve: per-op uploads of one call share a scratch buffer
        resolve({{batch.positions.data(), batch.positions.size_bytes()},
                 {batch.slot_mapping.data(), batch.slot_mapping.size_bytes()}},
                d);
        kcu::QkNormRopeArgs a =
            prologue_args(q, k, q_norm, k_norm, eps, kind, batch.positions, d[0], rotary_dim, theta);
        const KvTarget target = kv_target(k, v, batch, key_cache, value_cache, d[1], "qk_norm_rope_write_kv");
        a.v = rows3(v), a.slot_mapping = target.slots, a.key_cache = key_cache.data();
        a.value_cache = value_cache.data(), a.cache_type = target.type, a.num_slots = target.num_slots;
        kcu::launch_qk_norm_rope(a, stream_);
        invalidate_converted();
    }

    void write_kv(const Tensor& k, const Tensor& v, const ForwardBatch& batch, const Tensor& key_cache,
                  const Tensor& value_cache) override {
        const auto profile = profiler_.scope("write_kv");
        const void* d_slots = nullptr;
        resolve({{batch.slot_mapping.data(), batch.slot_mapping.size_bytes()}}, &d_slots);
        const KvTarget target = kv_target(k, v, batch, key_cache, value_cache, d_slots, "write_kv");
        kcu::launch_kv_write({rows3(k), rows3(v), k.dim(0), k.dim(1), k.dim(2), target.slots, key_cache.data(),
                              value_cache.data(), target.type, target.num_slots},
                             stream_);
        invalidate_converted();
    }

    void paged_attention(const Tensor& q, const Tensor& key_cache, const Tensor& value_cache, const ForwardBatch& batch,
                         float scale, const Tensor& out) override {
        const auto profile = profiler_.scope("paged_attention");
        const char* op = "paged_attention";
        ops_checks::expect_heads(q, kHere, op, "q");
        ops_checks::expect_heads(out, kHere, op, "out");
        expect(q.shape() == out.shape() && q.dim(0) == batch.num_tokens, op, "q/out shapes do not match the batch");
        check_cache(key_cache, value_cache, key_cache.dim(2), q.dim(2), batch, op);
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
        a.H_q = static_cast<int>(q.dim(1)), a.H_kv = static_cast<int>(key_cache.dim(2)),
        a.D = static_cast<int>(q.dim(2));
        a.key_cache = key_cache.data(), a.value_cache = value_cache.data();
        a.cache_type = elem_type(key_cache.dtype(), op);
        a.block_size = batch.block_size, a.num_seqs = batch.num_seqs, a.max_blocks_per_seq = batch.max_blocks_per_seq;
        a.query_start_loc = static_cast<const int32_t*>(d[0]);
        a.seq_lens = static_cast<const int32_t*>(d[1]);
        a.block_tables = static_cast<const int32_t*>(d[2]);
        a.scale = scale;
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

    void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) override {
        binary("silu_mul", kcu::BinaryOp::SiluMul, gate, up, out);
    }
    void sigmoid_mul(const Tensor& x, const Tensor& gate) override {
        binary("sigmoid_mul", kcu::BinaryOp::SigmoidMul, x, gate, x);
    }
    void add(const Tensor& y, const Tensor& x) override { binary("add", kcu::BinaryOp::Add, y, x, y); }

    void copy(const Tensor& dst, const Tensor& src) override {
        const auto profile = profiler_.scope("copy");
        expect(dst.shape() == src.shape(), "copy", "shapes differ: " + dst.to_string() + " vs " + src.to_string());
        expect(on_gpu(dst) && on_gpu(src), "copy", "CUDA tensors only (use Backend::copy across devices)");
        expect(dst.rank() >= 1 && dst.rank() <= 2 && dst.stride(-1) == 1 && src.stride(-1) == 1, "copy",
               "rank 1 or 2 with a contiguous last dim");
        const bool two = dst.rank() == 2;
        kcu::CopyArgs a{};
        a.src = src.data(), a.src_type = elem_type(src.dtype(), "copy"), a.src_stride = two ? src.stride(0) : 0;
        a.dst = dst.data(), a.dst_type = elem_type(dst.dtype(), "copy"), a.dst_stride = two ? dst.stride(0) : 0;
        a.T = two ? dst.dim(0) : 1, a.N = dst.dim(-1);
        kcu::launch_copy(a, stream_);
        invalidate_converted();
    }

    void gather_rows(const Tensor& x, std::span<const int32_t> rows, const Tensor& out) override {
        const auto profile = profiler_.scope("gather_rows");
        ops_checks::expect_mat(x, kHere, "gather_rows", "x");
        ops_checks::expect_mat(out, kHere, "gather_rows", "out");
        expect(out.dim(0) == static_cast<int64_t>(rows.size()) && out.dim(1) == x.dim(1), "gather_rows",
               "out must be [rows, N]");
        for (int32_t r : rows)
            expect(r >= 0 && r < x.dim(0), "gather_rows", "row index out of range");
        const void* d_rows = nullptr;
        resolve({{rows.data(), rows.size_bytes()}}, &d_rows);
        kcu::CopyArgs a{};
        a.src = x.data(), a.src_type = kcu::ElemType::F32, a.src_stride = x.stride(0);
        a.dst = out.data(), a.dst_type = kcu::ElemType::F32, a.dst_stride = out.stride(0);
        a.T = out.dim(0), a.N = out.dim(1), a.rows = static_cast<const int32_t*>(d_rows);
        kcu::launch_copy(a, stream_);
        invalidate_converted();
    }

    void argmax(const Tensor& logits, std::span<int32_t> out) override {
        const auto profile = profiler_.scope("argmax");
        ops_checks::expect_mat(logits, kHere, "argmax", "logits");
        expect(static_cast<int64_t>(out.size()) == logits.dim(0), "argmax", "one output per row");
        if (out.empty()) return;
        auto* d_out = static_cast<int32_t*>(argmax_device_.get(out.size_bytes(), stream_));
        kcu::launch_argmax(logits.data_as<float>(), logits.stride(0), logits.dim(0), logits.dim(1), d_out, stream_);
        auto* h_out = static_cast<int32_t*>(argmax_host_.get(out.size_bytes()));
        PAGODA_CUDA_OK(cudaMemcpyAsync(h_out, d_out, out.size_bytes(), cudaMemcpyDeviceToHost, stream_));
        PAGODA_CUDA_OK(cudaStreamSynchronize(stream_));
        std::memcpy(out.data(), h_out, out.size_bytes());
    }

    // --- not on CUDA yet: MoE and Gated DeltaNet (dense models only; Model::load refuses the others) ----------
    void moe_topk_softmax(const Tensor&, bool, const Tensor&, const Tensor&) override { not_yet("moe_topk_softmax"); }
    void moe_experts(const Tensor&, const Tensor&, const Tensor&, const MoeExpertWeights&, const Tensor&) override {
        not_yet("moe_experts");
    }
    void causal_conv1d_silu(const Tensor&, const Tensor&, const Tensor&, const ForwardBatch&, const Tensor&) override {
        not_yet("causal_conv1d_silu");
    }
    void gdn_gating(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&) override {
        not_yet("gdn_gating");
    }
    void l2_norm(const Tensor&, float) override { not_yet("l2_norm"); }
    void gated_delta_rule(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                          const ForwardBatch&, float, const Tensor&, DeltaRuleMode) override {
        not_yet("gated_delta_rule");
    }
    void gated_rms_norm(const Tensor&, const Tensor&, const Tensor&, float, const Tensor&) override {
        not_yet("gated_rms_norm");
    }

  private:
    struct StepArray {
        const void* host;
        size_t bytes;
        void* device;
    };
    struct HostArray {
        const void* data;
        size_t bytes;
    };

    // Copies the batch's host arrays into the pinned staging memory, one after another at 256-byte offsets (the same
    // offsets for every batch of the same shape: a recorded upload finds a replayed batch's arrays where it expects
    // them), and remembers where each will be on the device. Returns the bytes to upload.
    size_t stage(const ForwardBatch& b) {
        step_.clear();
        checked_.clear();
        invalidate_converted();
        const std::initializer_list<std::pair<const void*, size_t>> arrays = {
            {b.token_ids.data(), b.token_ids.size_bytes()},
            {b.positions.data(), b.positions.size_bytes()},
            {b.query_start_loc.data(), b.query_start_loc.size_bytes()},
            {b.seq_lens.data(), b.seq_lens.size_bytes()},
            {b.block_tables.data(), b.block_tables.size_bytes()},
            {b.slot_mapping.data(), b.slot_mapping.size_bytes()},
            {b.state_slots.data(), b.state_slots.size_bytes()},
            {b.logits_indices.data(), b.logits_indices.size_bytes()}};
        size_t total = 0;
        for (const auto& [ptr, bytes] : arrays)
            total += align256(bytes);
        if (total == 0) return 0;
        // The previous step's upload must have left the staging memory before it is rewritten (while recording,
        // nothing runs, and the event must not be recorded into the graph).
        if (!capturing_) PAGODA_CUDA_OK(cudaEventSynchronize(staging_free_));
        auto* host = static_cast<char*>(step_staging_.get(total));
        auto* dev = static_cast<char*>(step_device_.get(total, stream_));
        size_t off = 0;
        for (const auto& [ptr, bytes] : arrays) {
            if (bytes == 0 || ptr == nullptr) continue;
            std::memcpy(host + off, ptr, bytes);
            step_.push_back({ptr, bytes, dev + off});
            off += align256(bytes);
        }
        return off;
    }

    // The checked arguments of the attention prologue kernel (q/k norm and RoPE; the caller adds the cache store).
    // `d_positions`: the device copy of `positions` (resolve()).
    kcu::QkNormRopeArgs prologue_args(const Tensor& q, const Tensor& k, const Tensor& q_norm, const Tensor& k_norm,
                                      float eps, NormKind kind, std::span<const int32_t> positions,
                                      const void* d_positions, int rotary_dim, float theta) {
        const char* op = "qk_norm_rope";
        ops_checks::expect_heads(q, kHere, op, "q");
        ops_checks::expect_heads(k, kHere, op, "k");
        expect(q.dim(0) == k.dim(0) && q.dim(2) == k.dim(2), op, "q and k differ in tokens or head_dim");
        expect(static_cast<int64_t>(positions.size()) == q.dim(0), op, "one position per token");
        expect(rotary_dim > 0 && rotary_dim % 2 == 0 && rotary_dim <= q.dim(2) && rotary_dim / 2 <= kcu::kMaxRotaryHalf,
               op, "bad rotary_dim " + std::to_string(rotary_dim));
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
        fill_inv_freq(theta, rotary_dim, a.inv_freq);
        return a;
    }

    // Where write_kv stores k and v: the checked caches, and the batch's slots on the device (`d_slots`, resolve()).
    struct KvTarget {
        const int64_t* slots;
        kcu::ElemType type;
        int64_t num_slots;
    };
    KvTarget kv_target(const Tensor& k, const Tensor& v, const ForwardBatch& batch, const Tensor& key_cache,
                       const Tensor& value_cache, const void* d_slots, const char* op) {
        ops_checks::expect_heads(k, kHere, op, "k");
        ops_checks::expect_heads(v, kHere, op, "v");
        check_cache(key_cache, value_cache, k.dim(1), k.dim(2), batch, op);
        expect(k.shape() == v.shape() && k.dim(0) == batch.num_tokens &&
                   static_cast<int64_t>(batch.slot_mapping.size()) == k.dim(0),
               op, "k/v/slot_mapping do not match the batch's tokens");
        const int64_t num_slots = key_cache.dim(0) * key_cache.dim(1);
        if (!already_checked(batch.slot_mapping.data(), num_slots))
            for (int64_t s : batch.slot_mapping)
                expect(s < num_slots, op, "slot beyond the cache");
        return {static_cast<const int64_t*>(d_slots), elem_type(key_cache.dtype(), op), num_slots};
    }

    static void check_tables(const ForwardBatch& batch, int64_t num_blocks) {
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

    // True when `array` (of the current step's batch) was already checked against a cache of `size` this step;
    // otherwise remembers it. Arrays from outside a step are always checked.
    bool already_checked(const void* array, int64_t size) {
        if (step_.empty()) return false;
        for (const auto& [a, n] : checked_)
            if (a == array && n == size) return true;
        checked_.emplace_back(array, size);
        return false;
    }

    [[noreturn]] static void not_yet(const char* op) {
        ops_checks::fail(op, "not on CUDA yet (this backend runs dense qwen2/qwen3 models)");
    }

    // Device copies of host arrays: those of the current step come from its upload; any other array is copied now
    // into per-op scratch (stream order keeps the previous op's reads before this copy).
    void resolve(std::initializer_list<HostArray> arrays, const void** out) {
        size_t missing = 0;
        for (const HostArray& a : arrays)
            if (a.bytes > 0 && !find_step(a)) missing += align256(a.bytes);
        char* scratch = missing ? static_cast<char*>(op_uploads_.get(missing, stream_)) : nullptr;
        size_t i = 0, off = 0;
        for (const HostArray& a : arrays) {
            if (a.bytes == 0) {
                out[i++] = nullptr;
                continue;
            }
            if (const void* d = find_step(a)) {
                out[i++] = d;
                continue;
            }
            char* dst = scratch + off;
            out[i++] = dst;
            off += align256(a.bytes);
            if (capturing_) {  // a copy from pageable memory cannot be recorded, and would not be redone at replay
                capture_failed_ = true;
                continue;
            }
            PAGODA_CUDA_OK(cudaMemcpyAsync(dst, a.data, a.bytes, cudaMemcpyHostToDevice, stream_));
        }
    }
    const void* find_step(const HostArray& a) const {
        for (const StepArray& s : step_)
            if (s.host == a.data && s.bytes == a.bytes) return s.device;
        return nullptr;
    }

    // Exactly the CPU reference's inverse frequencies (fp32, as transformers computes them); computed once per
    // (theta, rotary_dim), not on every call.
    void fill_inv_freq(float theta, int rotary_dim, float* out) {
        if (theta != rope_theta_ || rotary_dim != rope_dim_) {
            for (int j = 0; j < rotary_dim / 2; ++j)
                rope_inv_freq_[j] = 1.0f / std::pow(theta, static_cast<float>(2 * j) / static_cast<float>(rotary_dim));
            rope_theta_ = theta, rope_dim_ = rotary_dim;
        }
        std::memcpy(out, rope_inv_freq_, sizeof(float) * static_cast<size_t>(rotary_dim / 2));
    }

    void norm_impl(const char* op, const Tensor& residual, const Tensor& x, const Tensor& weight, float eps,
                   NormKind kind, const Tensor& out) {
        const auto profile = profiler_.scope("rms_norm");
        ops_checks::expect_mat(x, kHere, op, "x");
        ops_checks::expect_mat(out, kHere, op, "out");
        expect(x.shape() == out.shape(), op, "x " + x.to_string() + " and out " + out.to_string() + " differ");
        ops_checks::expect_vec(weight, x.dim(1), kHere, op, "weight");
        kcu::RmsNormArgs a{};
        a.x = rows2(x), a.out = rows2(out);
        if (residual.defined()) a.residual = rows2(residual);
        a.T = x.dim(0), a.H = 1, a.D = x.dim(1);
        a.weight = weight.data(), a.weight_type = elem_type(weight.dtype(), op), a.eps = eps;
        a.zero_centred = kind == NormKind::ZeroCentred;
        kcu::launch_rms_norm(a, stream_);
        invalidate_converted();
    }

    void binary(const char* op, kcu::BinaryOp kind, const Tensor& a_in, const Tensor& b, const Tensor& out) {
        const auto profile = profiler_.scope("elementwise");
        ops_checks::expect_mat(a_in, kHere, op, "a");
        ops_checks::expect_mat(b, kHere, op, "b");
        ops_checks::expect_mat(out, kHere, op, "out");
        const bool broadcast = kind == kcu::BinaryOp::SigmoidMul && b.dim(1) == 1;
        expect(a_in.shape() == out.shape() && b.dim(0) == a_in.dim(0) && (broadcast || b.dim(1) == a_in.dim(1)), op,
               "operand shapes " + a_in.to_string() + ", " + b.to_string() + ", " + out.to_string() + " differ");
        kcu::launch_binary({kind, a_in.data_as<float>(), a_in.stride(0), b.data_as<float>(), b.stride(0), b.dim(1),
                            out.data_as<float>(), out.stride(0), a_in.dim(0), a_in.dim(1)},
                           stream_);
        invalidate_converted();
    }

    void check_cache(const Tensor& kc, const Tensor& vc, int64_t H_kv, int64_t D, const ForwardBatch& batch,
                     const char* op) {
        expect(on_gpu(kc) && on_gpu(vc) && kc.dtype() == vc.dtype() && kc.is_contiguous() && vc.is_contiguous() &&
                   kc.rank() == 4 && kc.shape() == vc.shape(),
               op, "caches must be contiguous CUDA [blocks, block_size, H_kv, D] tensors, got " + kc.to_string());
        elem_type(kc.dtype(), op);
        expect(kc.dim(1) == batch.block_size && kc.dim(2) == H_kv && kc.dim(3) == D, op,
               "cache " + kc.to_string() + " does not match block_size " + std::to_string(batch.block_size) +
                   ", heads " + std::to_string(H_kv) + ", head_dim " + std::to_string(D));
    }

    // --- GEMM input conversion, reused by consecutive linears of the same input (q/k/v, gate/up) -------------
    // Valid only while nothing but linear() has run since the conversion, and no linear wrote over its source.
    struct Converted {
        const void* data = nullptr;
        int64_t rows = 0, cols = 0, stride = 0;
        kcu::ElemType type = kcu::ElemType::F32;
    };
    const void* converted_input(const Tensor& x, kcu::ElemType type) {
        const Converted want{x.data(), x.dim(0), x.dim(1), x.stride(0), type};
        if (converted_src_.data == want.data && converted_src_.rows == want.rows && converted_src_.cols == want.cols &&
            converted_src_.stride == want.stride && converted_src_.type == want.type)
            return converted_buffer_;
        converted_buffer_ = convert_scratch_.get(static_cast<size_t>(x.dim(0) * x.dim(1)) * 2, stream_);
        kcu::launch_convert_rows(x.data_as<float>(), x.stride(0), converted_buffer_, type, x.dim(0), x.dim(1), stream_);
        converted_src_ = want;
        return converted_buffer_;
    }
    void invalidate_converted() { converted_src_ = Converted{}; }
    static bool overlaps(const Tensor& y, const Converted& c) {
        if (!c.data) return false;
        const auto* y0 = static_cast<const char*>(y.data());
        const auto* y1 = y0 + ((y.dim(0) - 1) * y.stride(0) + y.dim(1)) * 4;
        const auto* c0 = static_cast<const char*>(c.data);
        const auto* c1 = c0 + ((c.rows - 1) * c.stride + c.cols) * 4;
        return y0 < c1 && c0 < y1;
    }

    int device_;
    int sm_count_;
    cudaStream_t stream_;
    CudaGemm gemm_;

    std::vector<StepArray> step_;
    std::vector<std::pair<const void*, int64_t>> checked_;
    PinnedScratch step_staging_;
    DeviceScratch step_device_;
    cudaEvent_t staging_free_ = nullptr;
    DeviceScratch op_uploads_;

    DeviceScratch convert_scratch_;
    void* converted_buffer_ = nullptr;
    Converted converted_src_;

    float rope_inv_freq_[kcu::kMaxRotaryHalf] = {};
    float rope_theta_ = 0;
    int rope_dim_ = 0;

    DeviceScratch attention_workspace_;
    DeviceScratch argmax_device_;
    PinnedScratch argmax_host_;

    CudaOpProfiler profiler_;
    bool capturing_ = false;
    bool capture_failed_ = false;
    size_t captured_bytes_ = 0;  // staged by the step being recorded
};

}  // namespace

std::unique_ptr<CudaOpsBase> make_cuda_ops(const CudaOpsConfig& config) {
    return std::make_unique<CudaOps>(config);
}

}  // namespace pagoda
