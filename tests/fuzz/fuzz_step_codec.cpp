// libFuzzer target: the decoders of the messages node 0 sends to the other nodes of a multi-node group
// (dist/step_codec.h: steps, pool sizes, LoRA adapters' names) on arbitrary bytes. They must return an error or a step
// whose arrays agree with its counts (what the decoder promises the kernels), and an accepted step must encode back to
// the same bytes; never crash, hang or read out of bounds.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "dist/node_messages.h"
#include "dist/step_codec.h"

namespace {

// Generous pools, so that what the limits refuse does not hide what the array checks would.
const pagoda::dist::PoolSizes kLimits{1 << 20, 16, 1 << 10, 1 << 12, 1 << 20, 1 << 20};

void check_step(std::span<const std::byte> bytes) {
    pagoda::dist::DecodedStep step;
    if (!pagoda::dist::decode_step(bytes, kLimits, step).ok()) return;
    const pagoda::ForwardBatch& b = step.input().batch;
    const auto T = static_cast<size_t>(b.num_tokens), S = static_cast<size_t>(b.num_seqs);
    if (b.token_ids.size() != T || b.positions.size() != T || b.slot_mapping.size() != T) std::abort();
    if (b.query_start_loc.size() != S + 1 || b.seq_lens.size() != S) std::abort();
    if (b.query_start_loc[0] != 0 || b.query_start_loc[S] != b.num_tokens) std::abort();
    for (size_t s = 0; s < S; ++s)
        if (b.query_start_loc[s + 1] < b.query_start_loc[s] || b.seq_lens[s] < b.query_len(static_cast<int32_t>(s)))
            std::abort();
    for (int32_t row : b.logits_indices)
        if (row < 0 || row >= b.num_tokens) std::abort();
    std::vector<std::byte> again;
    pagoda::dist::encode_step(step.input(), again);
    if (again.size() != bytes.size() || !std::equal(again.begin(), again.end(), bytes.begin())) std::abort();
}

// A LoRA adapter's name (id, directory): an accepted one is what the contract says, and encodes back to the bytes.
void check_lora_adapter(std::span<const std::byte> bytes) {
    int32_t id = 0;
    std::string path;
    if (!pagoda::dist::decode_lora_adapter(bytes, id, path).ok()) return;
    if (id <= 0 || path.empty() || path.size() > pagoda::dist::kMaxLoraPathBytes) std::abort();
    std::vector<std::byte> again;
    pagoda::dist::encode_lora_adapter(id, path, again);
    if (again.size() != bytes.size() || !std::equal(again.begin(), again.end(), bytes.begin())) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto bytes = std::as_bytes(std::span<const uint8_t>(data, size));
    check_step(bytes);
    check_lora_adapter(bytes);
    auto sizes = pagoda::dist::decode_pool_sizes(bytes);
    if (sizes.ok() && (sizes->block_size < 1 || sizes->num_kv_blocks < 0)) std::abort();
    return 0;
}
