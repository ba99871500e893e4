// The fit arithmetic. Tensor parallelism splits attention heads (and so the KV cache) and the big
// matrices; small replicated tensors (norms) are ignored, which is within the reserve's slack.
#include "tools/doctor/model_fit.h"

#include <algorithm>
#include <cstdio>

namespace pagoda::doctor {
namespace {

std::string gib(uint64_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1f GiB", double(bytes) / double(1ull << 30));
    return buf;
}

std::string kib(uint64_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.0f KiB", double(bytes) / 1024.0);
    return buf;
}

uint64_t ceil_div(uint64_t a, uint64_t b) {
    return (a + b - 1) / b;
}

}  // namespace

FitResult compute_fit(const ModelFootprint& model, const FitRequest& request) {
    FitResult out;
    out.max_model_len = request.max_model_len > 0 ? request.max_model_len : model.max_context_length;
    const double usable = double(request.gpu_memory_bytes) * kGpuMemoryUtilization;
    out.budget_per_gpu = usable > double(kActivationReserveBytes) ? uint64_t(usable) - kActivationReserveBytes : 0;
    for (int tp : {1, 2, 4, 8}) {
        if (model.num_attention_heads > 0 && model.num_attention_heads % tp != 0) continue;
        FitAtTp f;
        f.tp = tp;
        f.weights_per_gpu = ceil_div(model.weight_bytes, tp);
        // KV heads split across ranks until there are fewer heads than ranks; then they are replicated.
        const int64_t kv_split = model.num_kv_heads > 0 ? std::min<int64_t>(tp, model.num_kv_heads) : tp;
        f.kv_per_token_per_gpu = ceil_div(model.kv_bytes_per_token, kv_split);
        const uint64_t per_sequence = f.kv_per_token_per_gpu * uint64_t(std::max<int64_t>(out.max_model_len, 1)) +
                                      ceil_div(model.state_bytes_per_sequence, tp);
        if (out.budget_per_gpu > f.weights_per_gpu && per_sequence > 0)
            f.max_sequences = int64_t((out.budget_per_gpu - f.weights_per_gpu) / per_sequence);
        if (!out.min_tp && f.max_sequences >= 1) out.min_tp = tp;
        if (request.max_num_seqs > 0 && !out.min_tp_for_seqs && f.max_sequences >= request.max_num_seqs)
            out.min_tp_for_seqs = tp;
        out.by_tp.push_back(f);
    }
    return out;
}

void add_fit_rows(const ModelFootprint& model, const FitRequest& request, const FitResult& fit, Report& r) {
    r.add("model.weights", gib(model.weight_bytes), Level::kInfo);
    std::string kv = kib(model.kv_bytes_per_token) + " KV cache per token (bf16)";
    if (model.state_bytes_per_sequence > 0)
        kv += ", " + gib(model.state_bytes_per_sequence) + " linear-attention state per sequence";
    r.add("model.kv_cache", kv, Level::kInfo);
    if (model.max_context_length > 0 && fit.max_model_len > model.max_context_length)
        r.add("model.max_model_len",
              std::to_string(fit.max_model_len) + " is over the model's limit of " +
                  std::to_string(model.max_context_length) + " tokens",
              Level::kWarn,
              "quality degrades past the trained context: lower --max-model-len (or add YaRN rope_scaling to "
              "config.json)");
    if (request.gpu_memory_bytes == 0 || request.gpu_count == 0) {
        r.add("model.fit", "no GPU to fit against", Level::kInfo,
              "plan for a part with: pagoda doctor --model DIR --gpu-memory-gib 80");
        return;
    }
    const std::string len = std::to_string(fit.max_model_len);
    std::string per_tp;
    for (const auto& f : fit.by_tp)
        per_tp += (per_tp.empty() ? "" : ", ") + std::string("TP") + std::to_string(f.tp) + ": " +
                  std::to_string(f.max_sequences);
    r.add("model.batch",
          "full-length (" + len + " tokens) sequences at once, " + per_tp + " (budget " + gib(fit.budget_per_gpu) +
              " per GPU)",
          Level::kInfo);
    const std::string gpus = std::to_string(request.gpu_count) + " GPU" + (request.gpu_count == 1 ? "" : "s");
    if (!fit.min_tp) {
        r.add("model.fit", "does not fit even at TP8 with max-model-len " + len, Level::kFail,
              "use a quantized checkpoint or lower --max-model-len");
        return;
    }
    const int tp = *fit.min_tp;
    if (tp > request.gpu_count) {
        r.add("model.fit", "needs TP" + std::to_string(tp) + "; this machine has " + gpus, Level::kFail,
              "run on a machine with " + std::to_string(tp) + " GPUs (--tensor-parallel-size " + std::to_string(tp) +
                  "), or lower --max-model-len");
        return;
    }
    int64_t at_tp = 0;
    for (const auto& f : fit.by_tp)
        if (f.tp == tp) at_tp = f.max_sequences;
    r.add("model.fit",
          "fits at TP" + std::to_string(tp) + ": up to " + std::to_string(at_tp) + " sequences of " + len + " tokens",
          Level::kPass, tp > 1 ? "--tensor-parallel-size " + std::to_string(tp) : "");
    if (request.max_num_seqs > 0) {
        if (!fit.min_tp_for_seqs || *fit.min_tp_for_seqs > request.gpu_count)
            r.add("model.max_num_seqs",
                  std::to_string(request.max_num_seqs) + " full-length sequences do not fit on " + gpus, Level::kWarn,
                  "fine when most requests are shorter; otherwise lower --max-num-seqs or --max-model-len");
        else
            r.add("model.max_num_seqs",
                  std::to_string(request.max_num_seqs) + " full-length sequences fit at TP" +
                      std::to_string(*fit.min_tp_for_seqs),
                  Level::kPass);
    }
}

}  // namespace pagoda::doctor
