#include "executor/engine_sizes.h"

#include <algorithm>
#include <cstdio>

namespace pagoda::executor {

namespace {

constexpr size_t kGiB = size_t{1} << 30;
constexpr size_t kLargeGpuBytes = 70 * kGiB;  // vLLM's line between its large and small batch defaults

std::string gib(size_t bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f GiB", static_cast<double>(bytes) / static_cast<double>(kGiB));
    return text;
}

std::string mib(size_t bytes) {
    return std::to_string((bytes + (size_t{1} << 19)) >> 20) + " MiB";
}

int32_t to_i32(int64_t v) {
    return static_cast<int32_t>(std::clamp<int64_t>(v, 1, INT32_MAX));
}

// Where the batch defaults come from: the CPU's small ones, or vLLM's large or small GPU ones.
enum class BatchRule { kCpu, kLargeGpu, kSmallGpu };

BatchRule batch_rule(const SizeFacts& f) {
    if (!f.gpu) return BatchRule::kCpu;
    return f.gpu_total_bytes >= kLargeGpuBytes ? BatchRule::kLargeGpu : BatchRule::kSmallGpu;
}

const char* reason(BatchRule r) {
    switch (r) {
        case BatchRule::kCpu:
            return "the CPU's default";
        case BatchRule::kLargeGpu:
            return "vLLM's default on a GPU of 70 GiB or more";
        case BatchRule::kSmallGpu:
            return "vLLM's default on a GPU under 70 GiB";
    }
    return "";
}

int32_t default_seqs(const SizeFacts& f, std::string& why) {
    const BatchRule rule = batch_rule(f);
    why = reason(rule);
    if (rule == BatchRule::kCpu) return kCpuMaxNumSeqs;
    int32_t seqs = rule == BatchRule::kLargeGpu ? 1024 : 256;
    if (f.state_bytes_per_slot == 0) return seqs;
    // Every running sequence of a hybrid model holds state slots whatever its length; unlike KV blocks they are
    // reserved up front, so the count is bounded by the memory.
    const size_t per_seq = kStateSlotsPerSeq * f.state_bytes_per_slot;
    const auto cap = static_cast<int64_t>(f.memory_budget / 2 / per_seq);
    if (cap >= seqs) return seqs;
    seqs = to_i32(cap >= 16 ? cap / 16 * 16 : cap);  // multiples of 16 are the decode graphs' buckets
    why = "the linear-attention states of " + std::to_string(kStateSlotsPerSeq) + " x " + mib(f.state_bytes_per_slot) +
          " a sequence within half of the " + gib(f.memory_budget) + " left";
    return seqs;
}

int32_t default_context(const SizeFacts& f, int32_t seqs, std::string& why) {
    const int64_t model_len = f.context_length;
    if (!f.gpu) {
        if (model_len > 0 && model_len <= kCpuMaxModelLen) {
            why = "the model's context";
            return to_i32(model_len);
        }
        why = "the CPU's cap";
        return kCpuMaxModelLen;
    }
    if (model_len <= 0) {
        why = "config.json gives no max_position_embeddings";
        return kCpuMaxModelLen;
    }
    why = "the model's context";
    if (f.kv_bytes_per_token == 0) return to_i32(model_len);
    const size_t states = static_cast<size_t>(seqs) * kStateSlotsPerSeq * f.state_bytes_per_slot;
    const size_t kv_budget = f.memory_budget - std::min(f.memory_budget, states);
    const auto fit = static_cast<int64_t>(kv_budget / f.kv_bytes_per_token) / f.block_size * f.block_size;
    if (fit >= model_len) return to_i32(model_len);
    why = "the most the KV cache holds (" + gib(kv_budget) + " at " + std::to_string(f.kv_bytes_per_token) +
          " bytes a token; the model's context is " + std::to_string(model_len) + ")";
    return to_i32(std::max<int64_t>(fit, f.block_size));
}

}  // namespace

SizeChoice choose_sizes(const EngineSizes& given, const SizeFacts& f) {
    SizeChoice c;
    c.sizes = given;
    std::string why;
    if (given.max_num_seqs <= 0) {
        c.sizes.max_num_seqs = default_seqs(f, why);
        c.chosen.push_back("max_num_seqs " + std::to_string(c.sizes.max_num_seqs) + " (" + why + ")");
    }
    if (given.max_num_batched_tokens <= 0) {
        const BatchRule rule = batch_rule(f);
        c.sizes.max_num_batched_tokens = rule == BatchRule::kLargeGpu ? 8192 : kCpuMaxNumBatchedTokens;
        c.chosen.push_back("max_num_batched_tokens " + std::to_string(c.sizes.max_num_batched_tokens) + " (" +
                           reason(rule) + ")");
    }
    if (given.max_model_len <= 0) {
        c.sizes.max_model_len = default_context(f, c.sizes.max_num_seqs, why);
        c.chosen.push_back("max_model_len " + std::to_string(c.sizes.max_model_len) + " (" + why + ")");
    }
    return c;
}

std::string describe_choice(const SizeChoice& choice, const SizeFacts& f) {
    if (choice.chosen.empty()) return {};
    std::string line = "engine sizes for ";
    line += f.gpu ? "the GPU (" + f.gpu_name + ", " + gib(f.gpu_total_bytes) + ")" : std::string("the CPU");
    line += ": ";
    for (size_t i = 0; i < choice.chosen.size(); ++i)
        line += (i ? "; " : "") + choice.chosen[i];
    line += ". --max-num-seqs, --max-num-batched-tokens and --max-model-len set them";
    return line;
}

}  // namespace pagoda::executor
