// The step messages node 0 sends to the other nodes (dist/step_codec.h): a step decodes to the same arrays and
// scalars it was encoded from, and bytes that are not such a message — cut short, with bytes after the end, with
// one byte changed, or with arrays that disagree — are rejected with an error (never an out-of-bounds read).
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dist/step_codec.h"
#include "runtime/forward_batch.h"

namespace pagoda::dist {
namespace {

// The pools the steps below were scheduled for.
const PoolSizes kLimits{/*num_kv_blocks=*/64,   /*block_size=*/16,
                        /*num_state_slots=*/16, /*max_num_seqs=*/8,
                        /*max_model_len=*/4096, /*max_num_batched_tokens=*/64};

// A mixed step: a prefill chunk with cached context, two decodes, one prompt with every row's logits.
struct Step {
    ForwardBatchBuilder builder{16};
    ForwardBatch batch;
    std::vector<engine::StateCopy> restores{{3, 7}}, saves{{7, 9}, {2, 11}};
    engine::StepInput input;

    Step() {
        const std::vector<int32_t> chunk{5, 6, 7, 8, 9}, one{42}, other{17}, all{1, 2, 3};
        const std::vector<int32_t> table_a{4, 8}, table_b{1}, table_c{2, 3, 5}, table_d{6};
        builder.add_sequence(chunk, 20, table_a, 0);
        builder.add_sequence(one, 15, table_b, 1, ForwardBatchBuilder::Logits::Last, 7);  // with LoRA adapter 7
        builder.add_sequence(other, 40, table_c, 2);
        builder.add_sequence(all, 0, table_d, 3, ForwardBatchBuilder::Logits::All);
        batch = builder.view();
        batch.seq_len_bound = 4096;
        input.batch = batch;
        input.state_restores = restores;
        input.state_saves = saves;
    }
};

template <typename T>
std::vector<T> vec(std::span<const T> s) {
    return {s.begin(), s.end()};
}

std::vector<std::pair<int32_t, int32_t>> pairs(std::span<const engine::StateCopy> copies) {
    std::vector<std::pair<int32_t, int32_t>> out;
    for (const auto& c : copies)
        out.emplace_back(c.src_slot, c.dst_slot);
    return out;
}

void expect_same(const engine::StepInput& got, const engine::StepInput& want) {
    const ForwardBatch &g = got.batch, &w = want.batch;
    EXPECT_EQ(g.num_tokens, w.num_tokens);
    EXPECT_EQ(g.num_seqs, w.num_seqs);
    EXPECT_EQ(g.block_size, w.block_size);
    EXPECT_EQ(g.max_blocks_per_seq, w.max_blocks_per_seq);
    EXPECT_EQ(g.seq_len_bound, w.seq_len_bound);
    EXPECT_EQ(vec(g.token_ids), vec(w.token_ids));
    EXPECT_EQ(vec(g.positions), vec(w.positions));
    EXPECT_EQ(vec(g.query_start_loc), vec(w.query_start_loc));
    EXPECT_EQ(vec(g.seq_lens), vec(w.seq_lens));
    EXPECT_EQ(vec(g.block_tables), vec(w.block_tables));
    EXPECT_EQ(vec(g.slot_mapping), vec(w.slot_mapping));
    EXPECT_EQ(vec(g.state_slots), vec(w.state_slots));
    EXPECT_EQ(vec(g.logits_indices), vec(w.logits_indices));
    EXPECT_EQ(pairs(got.state_restores), pairs(want.state_restores));
    EXPECT_EQ(pairs(got.state_saves), pairs(want.state_saves));
    EXPECT_EQ(vec(g.lora_ids), vec(w.lora_ids));
    EXPECT_TRUE(got.sample_rows.empty() && got.sampling.empty());  // only node 0 samples
}

TEST(StepCodec, RoundTrip) {
    Step step;
    std::vector<std::byte> bytes;
    encode_step(step.input, bytes);
    DecodedStep decoded;
    Status s = decode_step(bytes, kLimits, decoded);
    ASSERT_TRUE(s.ok()) << s.message();
    expect_same(decoded.input(), step.input);

    EXPECT_EQ(vec(decoded.input().batch.lora_ids), (std::vector<int32_t>{0, 0, 0, 0, 0, 7, 0, 0, 0, 0}));

    // The same DecodedStep takes the next step (its arrays reused); a step without state slots, copies or adapters.
    step.batch.state_slots = {};
    step.batch.lora_ids = {};
    step.input.batch = step.batch;
    step.input.state_restores = {};
    encode_step(step.input, bytes);
    s = decode_step(bytes, kLimits, decoded);
    ASSERT_TRUE(s.ok()) << s.message();
    expect_same(decoded.input(), step.input);
}

// A step the engine would not schedule under the pools' sizes is refused before anything is sized for it, and
// max_step_bytes bounds the message of the largest step that fits.
TEST(StepCodec, StepsBeyondThePoolSizesAreErrors) {
    Step step;
    std::vector<std::byte> bytes;
    DecodedStep decoded;
    auto refused = [&](PoolSizes limits, const char* what) {
        encode_step(step.input, bytes);
        Status s = decode_step(bytes, limits, decoded);
        EXPECT_FALSE(s.ok()) << what;
        EXPECT_NE(s.message().find("malformed step message"), std::string::npos) << s.message();
    };
    PoolSizes limits = kLimits;
    limits.max_num_batched_tokens = 9;  // the step has 10 tokens
    refused(limits, "tokens");
    limits = kLimits;
    limits.max_num_seqs = 3;  // 4 sequences
    refused(limits, "sequences");
    limits = kLimits;
    limits.max_model_len = 40;  // a 41-token sequence, three-block tables of 16, a bound of 4096
    refused(limits, "context");
    limits = kLimits;
    limits.block_size = 8;
    refused(limits, "block size");
    limits = kLimits;
    limits.num_state_slots = 1;  // two saves
    refused(limits, "state copies");

    // The largest step that fits: max_num_seqs sequences sharing the token budget, each with a full-width table,
    // every token a logits row, every slot restored and saved.
    ForwardBatchBuilder builder(kLimits.block_size);
    const int32_t width = kLimits.max_model_len / kLimits.block_size;
    const std::vector<int32_t> table(static_cast<size_t>(width), 0);
    const int32_t per_seq = kLimits.max_num_batched_tokens / kLimits.max_num_seqs;
    for (int32_t s = 0; s < kLimits.max_num_seqs; ++s)
        builder.add_sequence(std::vector<int32_t>(static_cast<size_t>(per_seq), 1), 0, table, s,
                             ForwardBatchBuilder::Logits::All);
    const std::vector<engine::StateCopy> copies(static_cast<size_t>(kLimits.num_state_slots), {0, 1});
    engine::StepInput full;
    full.batch = builder.view();
    full.state_restores = copies;
    full.state_saves = copies;
    encode_step(full, bytes);
    Status s = decode_step(bytes, kLimits, decoded);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_LE(bytes.size(), max_step_bytes(kLimits));
    EXPECT_LT(max_step_bytes(kLimits), 2 * bytes.size());  // a bound, not a blank cheque
}

TEST(StepCodec, EveryTruncationAndTrailingBytesAreErrors) {
    Step step;
    std::vector<std::byte> bytes;
    encode_step(step.input, bytes);
    DecodedStep decoded;
    for (size_t n = 0; n < bytes.size(); ++n) {
        Status s = decode_step(std::span(bytes).first(n), kLimits, decoded);
        ASSERT_FALSE(s.ok()) << "cut at " << n;
        EXPECT_NE(s.message().find("malformed step message"), std::string::npos) << s.message();
        EXPECT_EQ(decoded.input().batch.num_tokens, 0);  // a failed decode hands out no step
    }
    bytes.push_back(std::byte{0});
    Status s = decode_step(bytes, kLimits, decoded);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("bytes after the last array"), std::string::npos) << s.message();
}

TEST(StepCodec, AnyChangedByteDecodesToAConsistentStepOrAnError) {
    Step step;
    std::vector<std::byte> bytes;
    encode_step(step.input, bytes);
    DecodedStep decoded;
    int rejected = 0;
    for (size_t i = 0; i < bytes.size(); ++i) {
        for (int value : {0x00, 0x01, 0x80, 0xff}) {
            std::vector<std::byte> changed = bytes;
            changed[i] = static_cast<std::byte>(value);
            if (!decode_step(changed, kLimits, decoded).ok()) {
                ++rejected;
                continue;
            }
            // Accepted: then the arrays agree with the counts, as the decoder promises.
            const ForwardBatch& b = decoded.input().batch;
            ASSERT_EQ(static_cast<int32_t>(b.token_ids.size()), b.num_tokens);
            ASSERT_EQ(static_cast<int32_t>(b.query_start_loc.size()), b.num_seqs + 1);
            ASSERT_EQ(b.query_start_loc[static_cast<size_t>(b.num_seqs)], b.num_tokens);
            for (int32_t row : b.logits_indices)
                ASSERT_LT(row, b.num_tokens);
        }
    }
    EXPECT_GT(rejected, 0);
}

TEST(StepCodec, ArraysThatDisagreeAreErrors) {
    struct Case {
        const char* says;
        void (*spoil)(ForwardBatch&, std::vector<int32_t>&);
    };
    const Case cases[] = {
        {"token arrays", [](ForwardBatch& b, std::vector<int32_t>&) { b.num_tokens += 1; }},
        {"sequence arrays", [](ForwardBatch& b, std::vector<int32_t>&) { b.seq_lens = b.seq_lens.first(2); }},
        {"block tables", [](ForwardBatch& b, std::vector<int32_t>&) { b.max_blocks_per_seq += 1; }},
        {"query starts do not span",
         [](ForwardBatch& b, std::vector<int32_t>& scratch) {
             scratch.assign(b.query_start_loc.begin(), b.query_start_loc.end());
             scratch[0] = 1;
             b.query_start_loc = scratch;
         }},
        {"query starts go backwards",
         [](ForwardBatch& b, std::vector<int32_t>& scratch) {
             scratch.assign(b.query_start_loc.begin(), b.query_start_loc.end());
             std::swap(scratch[1], scratch[2]);
             b.query_start_loc = scratch;
         }},
        {"shorter than its new tokens",
         [](ForwardBatch& b, std::vector<int32_t>& scratch) {
             scratch.assign(b.seq_lens.begin(), b.seq_lens.end());
             scratch[3] = 1;  // the last prompt has 3 new tokens
             b.seq_lens = scratch;
         }},
        {"logits row outside",
         [](ForwardBatch& b, std::vector<int32_t>& scratch) {
             scratch.assign(b.logits_indices.begin(), b.logits_indices.end());
             scratch.back() = b.num_tokens;
             b.logits_indices = scratch;
         }},
        {"negative position",
         [](ForwardBatch& b, std::vector<int32_t>& scratch) {
             scratch.assign(b.positions.begin(), b.positions.end());
             scratch[0] = -1;
             b.positions = scratch;
         }},
        {"adapter ids of the wrong size",
         [](ForwardBatch& b, std::vector<int32_t>&) { b.lora_ids = b.lora_ids.first(3); }},
        {"a negative adapter id",
         [](ForwardBatch& b, std::vector<int32_t>& scratch) {
             scratch.assign(b.lora_ids.begin(), b.lora_ids.end());
             scratch[2] = -4;
             b.lora_ids = scratch;
         }},
    };
    for (const Case& c : cases) {
        Step step;
        std::vector<int32_t> scratch;
        c.spoil(step.batch, scratch);
        step.input.batch = step.batch;
        std::vector<std::byte> bytes;
        encode_step(step.input, bytes);
        DecodedStep decoded;
        Status s = decode_step(bytes, kLimits, decoded);
        ASSERT_FALSE(s.ok()) << c.says;
        EXPECT_NE(s.message().find(c.says), std::string::npos) << s.message();
    }
}

// The adapter a step will use, named to the other nodes: id and directory round-trip; every truncation, trailing
// bytes, a non-positive id and an empty directory are errors.
TEST(LoraAdapterMessage, RoundTripAndBadInput) {
    std::vector<std::byte> bytes;
    dist::encode_lora_adapter(12, "/models/adapters/customer-a", bytes);
    int32_t id = 0;
    std::string path;
    ASSERT_TRUE(dist::decode_lora_adapter(bytes, id, path).ok());
    EXPECT_EQ(id, 12);
    EXPECT_EQ(path, "/models/adapters/customer-a");
    for (size_t n = 0; n < bytes.size(); ++n)
        EXPECT_FALSE(dist::decode_lora_adapter(std::span(bytes).first(n), id, path).ok()) << n;
    bytes.push_back(std::byte{0});
    EXPECT_FALSE(dist::decode_lora_adapter(bytes, id, path).ok());
    for (const auto& [bad_id, bad_path] :
         {std::pair{0, std::string("/a")}, std::pair{-3, std::string("/a")}, std::pair{5, std::string()}}) {
        dist::encode_lora_adapter(bad_id, bad_path, bytes);
        EXPECT_FALSE(dist::decode_lora_adapter(bytes, id, path).ok()) << bad_id << " '" << bad_path << "'";
    }
}

TEST(PoolSizes, RoundTripAndBadInput) {
    engine::EngineConfig config;
    config.num_kv_blocks = 321;
    config.block_size = 32;
    config.num_state_slots = 48;
    config.max_num_seqs = 16;
    config.max_model_len = 8192;
    config.max_num_batched_tokens = 4096;
    std::vector<std::byte> bytes;
    encode_pool_sizes(PoolSizes::of(config), bytes);
    auto decoded = decode_pool_sizes(bytes);
    ASSERT_TRUE(decoded.ok()) << decoded.message();
    EXPECT_EQ(*decoded, PoolSizes::of(config));
    const engine::EngineConfig back = decoded->to_config();
    EXPECT_EQ(back.num_kv_blocks, 321);
    EXPECT_EQ(back.max_num_batched_tokens, 4096);

    EXPECT_FALSE(decode_pool_sizes(std::span(bytes).first(bytes.size() - 1)).ok());
    bytes.push_back(std::byte{0});
    EXPECT_FALSE(decode_pool_sizes(bytes).ok());
    config.block_size = 0;
    encode_pool_sizes(PoolSizes::of(config), bytes);
    auto zero = decode_pool_sizes(bytes);
    ASSERT_FALSE(zero.ok());
    EXPECT_NE(zero.message().find("zero"), std::string::npos) << zero.message();
}

}  // namespace
}  // namespace pagoda::dist
