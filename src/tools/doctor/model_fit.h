// "Will this model fit?": weights, KV cache per token and linear-attention state per sequence
// against the GPUs' memory, for tensor-parallel sizes 1, 2, 4, 8.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "tools/doctor/report.h"

namespace pagoda::doctor {

// Memory the server keeps per GPU outside weights and KV cache (CUDA context, cuBLAS workspaces,
// activations at the batch-token limit). An estimate; the server measures its real peak at start.
inline constexpr uint64_t kActivationReserveBytes = 2ull << 30;
inline constexpr double kGpuMemoryUtilization = 0.90;  // the fraction of GPU memory pagoda plans to use

struct ModelFootprint {
    std::string name;  // the directory, for messages
    uint64_t weight_bytes = 0;
    uint64_t kv_bytes_per_token = 0;        // K and V of every full-attention layer, bf16
    uint64_t state_bytes_per_sequence = 0;  // linear-attention (Gated DeltaNet) state, fp32
    int64_t num_attention_heads = 0;
    int64_t num_kv_heads = 0;
    int64_t max_context_length = 0;  // max_position_embeddings, or with YaRN the original context × factor
};

struct FitRequest {
    int64_t max_model_len = 0;      // 0: the model's max_context_length
    int64_t max_num_seqs = 0;       // 0: not asked; only the largest batch is reported
    uint64_t gpu_memory_bytes = 0;  // per GPU (the smallest of the machine's GPUs)
    int gpu_count = 0;
};

struct FitAtTp {
    int tp = 1;
    uint64_t weights_per_gpu = 0;
    uint64_t kv_per_token_per_gpu = 0;
    int64_t max_sequences = 0;  // full-length sequences that fit at once (0: not even one)
};

struct FitResult {
    int64_t max_model_len = 0;
    uint64_t budget_per_gpu = 0;
    std::vector<FitAtTp> by_tp;          // tp = 1, 2, 4, 8 where tp divides the attention heads
    std::optional<int> min_tp;           // smallest tp where one full-length sequence fits
    std::optional<int> min_tp_for_seqs;  // smallest tp where max_num_seqs full-length sequences fit
};

FitResult compute_fit(const ModelFootprint& model, const FitRequest& request);

// Adds the model.* rows for `result` (exit status FAIL when the model fits on no TP size this
// machine has).
void add_fit_rows(const ModelFootprint& model, const FitRequest& request, const FitResult& result, Report& report);

// Reads config.json and the safetensors headers of a model directory (needs pagoda_model).
Result<ModelFootprint> read_model_footprint(const std::string& dir);

}  // namespace pagoda::doctor
