// The engine's size limits when the user gives none: sequences per step, tokens per step and context length, chosen
// from the hardware and the model. vLLM's rule on a GPU (1,024 sequences and 8,192 tokens a step on one of 70 GiB or
// more, 256 and 2,048 below), the model's whole context when the memory holds one such sequence; small defaults on
// the CPU. Kept apart from create_engine so the rule is a pure function that tests can drive with any GPU's numbers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace pagoda::executor {

// What the defaults depend on.
struct SizeFacts {
    bool gpu = false;
    std::string gpu_name;
    size_t gpu_total_bytes = 0;  // the GPU's whole memory (picks vLLM's large or small batch defaults)
    // GPU: what the KV pool and the state slots may take (the --gpu-memory-utilization share, less the weights and
    // the activations' estimate). Unused on the CPU.
    size_t memory_budget = 0;
    int64_t context_length = 0;       // the model's context: max_position_embeddings, or YaRN's extension (0: unknown)
    size_t kv_bytes_per_token = 0;    // over all full-attention layers, in the pool's dtype (fp8: half bf16's)
    size_t state_bytes_per_slot = 0;  // conv + recurrent state of one sequence; 0: no linear-attention layer
    int32_t block_size = 16;
};

// The sizes given by the user (0: not given) and those chosen.
struct EngineSizes {
    int32_t max_num_seqs = 0;
    int32_t max_num_batched_tokens = 0;
    int32_t max_model_len = 0;
};

struct SizeChoice {
    EngineSizes sizes;                // all positive
    std::vector<std::string> chosen;  // one phrase per size chosen here, with the reason ("max_num_seqs 1024 (...)")
};

// The CPU's defaults: 16 sequences, 2,048 tokens a step, min(context, 8,192).
inline constexpr int32_t kCpuMaxNumSeqs = 16, kCpuMaxNumBatchedTokens = 2048, kCpuMaxModelLen = 8192;
// Hybrid models keep up to three state slots per running sequence (its state, a checkpoint, a prefix snapshot:
// create_engine's slot rule); the default sequence count lets them take at most half of the GPU budget, so the KV
// pool of the full-attention layers keeps the other half.
inline constexpr int32_t kStateSlotsPerSeq = 3;

// The sizes the engine runs with. Given sizes are kept as they are (the checks against the memory come later).
SizeChoice choose_sizes(const EngineSizes& given, const SizeFacts& facts);

// The start-up log line of a choice: "engine sizes chosen for <where>: ...; give --max-num-seqs ... to change".
std::string describe_choice(const SizeChoice& choice, const SizeFacts& facts);

}  // namespace pagoda::executor
