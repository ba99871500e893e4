// CudaOps' plumbing: construction, the step's host arrays (staging, upload, resolve), CUDA graphs, and the factory.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "common/align.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/cuda_backend.h"

namespace pagoda {

// Every Ops member runs on CUDA; a later op or weight format that lands on the CPU first is refused here by name.
bool cuda_runs_op(std::string_view) {
    return true;
}

namespace {

// Whether the environment variable `name` is set to `value` (the measuring and experimental switches below).
bool env_is(const char* name, const char* value) {
    const char* env = std::getenv(name);
    return env != nullptr && std::strcmp(env, value) == 0;
}

}  // namespace

CudaOps::CudaOps(const CudaOpsConfig& c)
    : device_(c.device), sm_count_(c.sm_count), stream_(c.stream), gemm_(c.stream), profiler_(c.stream) {
    // cuBLASLt's block-scaled fp8 GEMM (cuBLAS 12.9+) is Hopper's; PAGODA_CUDA_KERNELS=sm80/sm86 runs what those GPUs
    // get, and PAGODA_W8A8_GEMM=0 keeps W8A8 weights on the weight-only paths over rounded inputs.
    w8a8_gemm_ = c.compute_capability == 90 && !kcu::forced_kernel_family() && !env_is("PAGODA_W8A8_GEMM", "0");
    lora_tensor_cores_ = !env_is("PAGODA_LORA_MMA", "0");
    lora_overlap_ = !env_is("PAGODA_LORA_OVERLAP", "0");
    if (lora_overlap_) {
        int least = 0, greatest = 0;
        PAGODA_CUDA_OK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
        PAGODA_CUDA_OK(cudaStreamCreateWithPriority(&lora_stream_, cudaStreamNonBlocking, greatest));
        PAGODA_CUDA_OK(cudaEventCreateWithFlags(&lora_fork_, cudaEventDisableTiming));
        PAGODA_CUDA_OK(cudaEventCreateWithFlags(&lora_join_, cudaEventDisableTiming));
    }
    PAGODA_CUDA_OK(cudaEventCreateWithFlags(&staging_free_, cudaEventDisableTiming));
    PAGODA_CUDA_OK(cudaEventRecord(staging_free_, stream_));
    shared_expert_add_ = !env_is("PAGODA_SHARED_EXPERT_ADD", "0");
    early_loads_ = !env_is("PAGODA_EARLY_LOADS", "0");
    fused_int4_silu_mul_ = !env_is("PAGODA_INT4_SILU_MUL", "0");
}

CudaOps::~CudaOps() {
    cudaStreamSynchronize(stream_);
    cudaEventDestroy(staging_free_);
    if (lora_stream_ != nullptr) {
        cudaStreamSynchronize(lora_stream_);
        cudaStreamDestroy(lora_stream_);
        cudaEventDestroy(lora_fork_);
        cudaEventDestroy(lora_join_);
    }
}

void CudaOps::begin_step(const ForwardBatch& b) {
    if (!capturing_) profiler_.begin_step(b.max_query_len() == 1 ? "decode steps" : "prefill and mixed steps");
    const size_t bytes = stage(b);
    if (capturing_) captured_bytes_ = bytes;
    // Recorded into a graph, this copy reads the staging memory again at every replay (replay restages it).
    if (bytes > 0)
        PAGODA_CUDA_OK(cudaMemcpyAsync(step_device_.get(bytes, stream_), step_staging_.get(bytes), bytes,
                                       cudaMemcpyHostToDevice, stream_));
    if (bytes > 0 && !capturing_) PAGODA_CUDA_OK(cudaEventRecord(staging_free_, stream_));
    lora_slots_ = b.lora_slots;
}

void CudaOps::end_step() {
    if (!capturing_) profiler_.end_step();
    step_.clear();
    checked_.clear();
    invalidate_converted();
    lora_slots_ = {};
}

void CudaOps::begin_capture() {
    PAGODA_CUDA_OK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    capturing_ = true;
    capture_failed_ = false;
    gemm_.set_capturing(true);
}

std::unique_ptr<StepGraph> CudaOps::end_capture() {
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

void CudaOps::replay(const StepGraph& graph, const ForwardBatch& b) {
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

uint64_t CudaOps::memory_generation() const {
    // op_uploads_ is left out: an op that uploads its own array cannot be recorded (end_capture).
    return step_staging_.reallocations() + step_device_.reallocations() + convert_scratch_.reallocations() +
           dequantized_weight_.reallocations() + gathered_input_.reallocations() +
           attention_workspace_.reallocations() + moe_workspace_.reallocations() +
           delta_rule_workspace_.reallocations() + lora_shrunk_.reallocations();
}

size_t CudaOps::stage(const ForwardBatch& b) {
    step_.clear();
    checked_.clear();
    invalidate_converted();
    group_lora_tokens(b);
    const std::initializer_list<std::pair<const void*, size_t>> arrays = {
        {b.token_ids.data(), b.token_ids.size_bytes()},
        {b.positions.data(), b.positions.size_bytes()},
        {b.query_start_loc.data(), b.query_start_loc.size_bytes()},
        {b.seq_lens.data(), b.seq_lens.size_bytes()},
        {b.block_tables.data(), b.block_tables.size_bytes()},
        {b.slot_mapping.data(), b.slot_mapping.size_bytes()},
        {b.state_slots.data(), b.state_slots.size_bytes()},
        {b.logits_indices.data(), b.logits_indices.size_bytes()},
        {lora_groups_.order.data(), lora_groups_.order.size() * sizeof(int32_t)},
        {lora_groups_.tiles.data(), lora_groups_.tiles.size() * sizeof(LoraTile)}};
    size_t total = 0;
    for (const auto& [ptr, bytes] : arrays)
        total += align_up(bytes, 256);
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
        off += align_up(bytes, 256);
    }
    return off;
}

bool CudaOps::already_checked(const void* array, int64_t size) {
    if (step_.empty()) return false;
    for (const auto& [a, n] : checked_)
        if (a == array && n == size) return true;
    checked_.emplace_back(array, size);
    return false;
}

void CudaOps::resolve(std::initializer_list<HostArray> arrays, const void** out) {
    size_t missing = 0;
    for (const HostArray& a : arrays)
        if (a.bytes > 0 && !find_step(a)) missing += align_up(a.bytes, 256);
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
        off += align_up(a.bytes, 256);
        if (capturing_) {  // a copy from pageable memory cannot be recorded, and would not be redone at replay
            capture_failed_ = true;
            continue;
        }
        PAGODA_CUDA_OK(cudaMemcpyAsync(dst, a.data, a.bytes, cudaMemcpyHostToDevice, stream_));
    }
}

const void* CudaOps::find_step(const HostArray& a) const {
    for (const StepArray& s : step_)
        if (s.host == a.data && s.bytes == a.bytes) return s.device;
    return nullptr;
}

std::unique_ptr<CudaOpsBase> make_cuda_ops(const CudaOpsConfig& config) {
    return std::make_unique<CudaOps>(config);
}

}  // namespace pagoda
