// The tensor-parallel sharding plan (model/shard_plan.h) and the cutting of weights (model/tensor_parallel.h):
// for real model shapes and every size that splits them, each rank's slice of each weight the model declares
// (visit_weights), that the ranks together cover every split weight exactly once (KV heads: once per replica), that
// each rank's query heads read KV heads it holds, and that shard_weights copies exactly those slices (with zero
// vocabulary padding).
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/file.h"
#include "common/json.h"
#include "model/arch/arch.h"
#include "model/shard_plan.h"
#include "model/tensor_parallel.h"
#include "tensor/buffer.h"

namespace pagoda::model {
namespace {

ModelSpec spec_from(const std::string& text) {
    auto json = Json::parse(text);
    EXPECT_TRUE(json.ok()) << json.message();
    auto spec = parse_model_spec(*json);
    EXPECT_TRUE(spec.ok()) << spec.message();
    return spec.ok() ? *spec : ModelSpec{};
}

// Fields of the released configs that the plan reads.
ModelSpec qwen3_8b() {
    return spec_from(R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "head_dim": 128,
        "hidden_size": 4096, "intermediate_size": 12288, "num_attention_heads": 32, "num_hidden_layers": 36,
        "num_key_value_heads": 8, "vocab_size": 151936, "max_position_embeddings": 40960, "rope_theta": 1000000,
        "tie_word_embeddings": false})");
}
ModelSpec qwen3_32b() {
    return spec_from(R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "head_dim": 128,
        "hidden_size": 5120, "intermediate_size": 25600, "num_attention_heads": 64, "num_hidden_layers": 64,
        "num_key_value_heads": 8, "vocab_size": 151936, "max_position_embeddings": 40960, "rope_theta": 1000000,
        "tie_word_embeddings": false})");
}
ModelSpec qwen25_7b() {
    return spec_from(R"({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 3584,
        "intermediate_size": 18944, "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4,
        "vocab_size": 152064, "max_position_embeddings": 32768, "rope_theta": 1000000.0,
        "tie_word_embeddings": false})");
}
ModelSpec qwen25_05b() {
    return spec_from(R"({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896,
        "intermediate_size": 4864, "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2,
        "vocab_size": 151936, "max_position_embeddings": 32768, "rope_theta": 1000000.0,
        "tie_word_embeddings": true})");
}
std::string golden_config(const std::string& name) {
    return std::string(PAGODA_SOURCE_DIR) + "/tests/golden/" + name + "/config.json";
}
ModelSpec golden(const std::string& name) {
    auto spec = load_model_spec(golden_config(name));
    EXPECT_TRUE(spec.ok()) << spec.message();
    return spec.ok() ? *spec : ModelSpec{};
}

// The model's tensors as its weights structs declare them (visit_weights), each once: the first layer stands for all.
std::vector<WeightEntry> declared_entries(const ModelSpec& spec) {
    ModelWeights w = declared_weights(spec);
    w.layers.resize(1);
    std::vector<WeightEntry> out;
    Status s = visit_weights(w, spec, [&](const WeightEntry& e) {
        out.push_back(e);
        return ok_status();
    });
    EXPECT_TRUE(s.ok()) << s.message();
    return out;
}

// The role declared for the tensor whose name ends in `suffix` ("self_attn.q_proj.weight").
ShardRole role_of(const ModelSpec& spec, const std::string& suffix) {
    for (const WeightEntry& e : declared_entries(spec))
        if (e.name.size() >= suffix.size() && e.name.compare(e.name.size() - suffix.size(), suffix.size(), suffix) == 0)
            return e.role;
    ADD_FAILURE() << "no declared tensor ends in " << suffix;
    return ShardRole::no_rule();
}

// Every property of the plans of all ranks of a group of `size`.
void check_group(const std::string& label, const ModelSpec& spec, int size) {
    SCOPED_TRACE(label + " tp=" + std::to_string(size));
    std::vector<ShardPlan> plans;
    for (int r = 0; r < size; ++r) {
        auto plan = make_shard_plan(spec, size, r);
        ASSERT_TRUE(plan.ok()) << plan.message();
        plans.push_back(*plan);
    }
    const int64_t group = spec.num_attention_heads / spec.num_key_value_heads;  // query heads per KV head
    for (const ShardPlan& p : plans) {
        EXPECT_EQ(p.q_heads * size, spec.num_attention_heads);
        EXPECT_EQ(p.intermediate * size, spec.intermediate_size);
        EXPECT_EQ(p.kv_heads * size, spec.num_key_value_heads * p.kv_replicas);
        // GQA inside a rank: local query head h reads local KV head h / (q_heads / kv_heads); that must be the KV
        // head its global index reads in the whole model.
        for (int64_t h = 0; h < p.q_heads; ++h) {
            const int64_t global_kv = (p.first_q_head + h) / group;
            EXPECT_EQ(p.first_kv_head + h / (p.q_heads / p.kv_heads), global_kv) << "rank " << p.rank << " head " << h;
        }
    }
    // Every declared tensor has a split, and the ranks' slices of it cover it exactly once (KV heads: once per
    // replica), part by part.
    for (const WeightEntry& e : declared_entries(spec)) {
        SCOPED_TRACE(e.name + " (" + describe(e.role) + ")");
        ASSERT_TRUE(e.role.splittable());
        if (e.role.split == Split::kReplicated) {
            for (const ShardPlan& p : plans)
                EXPECT_EQ(p.slice(e.role).dim, SplitDim::kNone);
            continue;
        }
        const SplitDim dim = e.role.split == Split::kRows ? SplitDim::kRows : SplitDim::kColumns;
        const int rank = e.shape.rank();
        const int64_t n = e.shape[dim == SplitDim::kRows ? std::max(rank - 2, 0) : rank - 1];
        const bool kv = e.role.unit() == SplitUnit::kKvHeads;
        std::vector<int> held(static_cast<size_t>(n), 0);
        for (const ShardPlan& p : plans) {
            const WeightSlice s = p.slice(e.role);
            ASSERT_EQ(s.dim, dim);
            ASSERT_EQ(s.ranges.size(), size_t{e.role.num_parts});
            for (const WeightSlice::Range& r : s.ranges) {
                ASSERT_GE(r.begin, 0);
                ASSERT_GE(r.length, 0);
                ASSERT_LE(r.begin + r.length, n);
                for (int64_t i = r.begin; i < r.begin + r.length; ++i)
                    ++held[static_cast<size_t>(i)];
            }
            if (e.role.unit() == SplitUnit::kVocab) {
                EXPECT_EQ(s.padded_length, (n + size - 1) / size);  // the vocabulary padded to a multiple of N
                EXPECT_EQ(s.ranges[0].begin, p.rank * s.padded_length);
            } else {
                EXPECT_EQ(s.padded_length, s.length());
                EXPECT_EQ(s.length() * size, n * (kv ? p.kv_replicas : 1));
            }
        }
        const int once = kv ? static_cast<int>(plans[0].kv_replicas) : 1;
        for (int64_t i = 0; i < n; ++i)
            ASSERT_EQ(held[static_cast<size_t>(i)], once) << "index " << i;
    }
}

TEST(ShardPlan, EverySliceOfEveryShapeAndSize) {
    ModelSpec odd_vocab = qwen3_8b();
    odd_vocab.vocab_size = 151643;  // not a multiple of any size > 1: padding on the last rank
    const struct {
        std::string name;
        ModelSpec spec;
        std::vector<int> sizes;
    } cases[] = {
        {"Qwen3-8B", qwen3_8b(), {1, 2, 4, 8, 16, 32}},
        {"Qwen3-32B", qwen3_32b(), {1, 2, 4, 8, 16, 32, 64}},
        {"Qwen2.5-7B", qwen25_7b(), {1, 2, 4}},
        {"Qwen2.5-0.5B", qwen25_05b(), {1, 2}},
        {"Qwen3-8B, vocab 151643", odd_vocab, {1, 2, 4, 8, 16, 32}},
        {"golden qwen2", golden("qwen2"), {1, 2}},
        {"golden qwen2_tied", golden("qwen2_tied"), {1, 2, 4}},
        {"golden qwen3", golden("qwen3"), {1, 2, 4}},
        {"golden qwen3_moe", golden("qwen3_moe"), {1, 2, 4}},
        {"golden qwen3_5", golden("qwen3_5"), {1, 2}},  // 2 linear-attention key heads
        {"golden qwen3_next", golden("qwen3_next"), {1, 2}},
        {"golden qwen3_5_moe", golden("qwen3_5_moe"), {1, 2}},
    };
    for (const auto& c : cases) {
        EXPECT_EQ(valid_tensor_parallel_sizes(c.spec), c.sizes) << c.name;
        for (int size : c.sizes)
            check_group(c.name, c.spec, size);
    }
}

TEST(ShardPlan, Qwen3_8bRank2Of4) {
    auto p = make_shard_plan(qwen3_8b(), 4, 2);
    ASSERT_TRUE(p.ok()) << p.message();
    auto expect = [&](const std::string& name, SplitDim dim, int64_t begin, int64_t length) {
        const WeightSlice s = p->slice(role_of(qwen3_8b(), name));
        EXPECT_EQ(s.dim, dim) << name;
        ASSERT_EQ(s.ranges.size(), dim == SplitDim::kNone ? 0u : 1u) << name;
        if (dim == SplitDim::kNone) return;
        EXPECT_EQ(s.ranges[0].begin, begin) << name;
        EXPECT_EQ(s.ranges[0].length, length) << name;
    };
    expect("q_proj.weight", SplitDim::kRows, 16 * 128, 8 * 128);  // heads 16..23
    expect("k_proj.weight", SplitDim::kRows, 4 * 128, 2 * 128);   // KV heads 4..5
    expect("v_proj.weight", SplitDim::kRows, 4 * 128, 2 * 128);
    expect("o_proj.weight", SplitDim::kColumns, 16 * 128, 8 * 128);
    expect("gate_proj.weight", SplitDim::kRows, 2 * 3072, 3072);
    expect("up_proj.weight", SplitDim::kRows, 2 * 3072, 3072);
    expect("down_proj.weight", SplitDim::kColumns, 2 * 3072, 3072);
    expect("embed_tokens.weight", SplitDim::kRows, 2 * 37984, 37984);
    expect("lm_head.weight", SplitDim::kRows, 2 * 37984, 37984);
    expect("q_norm.weight", SplitDim::kNone, 0, 0);
    expect("input_layernorm.weight", SplitDim::kNone, 0, 0);
}

TEST(ShardPlan, KvHeadsAreReplicatedWhenRanksOutnumberThem) {
    // Qwen3-32B on 16 ranks: 8 KV heads, each held by 2 consecutive ranks; rank 5 has query heads 20..23 (KV head 2).
    auto p = make_shard_plan(qwen3_32b(), 16, 5);
    ASSERT_TRUE(p.ok()) << p.message();
    EXPECT_EQ(p->kv_replicas, 2);
    EXPECT_EQ(p->kv_heads, 1);
    EXPECT_EQ(p->first_kv_head, 2);
    EXPECT_EQ(p->first_q_head, 20);
    EXPECT_EQ(p->slice(role_of(qwen3_32b(), "k_proj.weight")).ranges[0].begin, 2 * 128);
    EXPECT_EQ(p->slice(ShardRole::rows(SplitUnit::kKvHeads, 128)).length(), 128);  // v_proj's bias, on qwen2
}

TEST(ShardPlan, PaddedVocabularyOnTheLastRank) {
    ModelSpec spec = qwen3_8b();
    spec.vocab_size = 151643;
    auto last = make_shard_plan(spec, 8, 7);
    ASSERT_TRUE(last.ok()) << last.message();
    EXPECT_EQ(last->vocab_per_rank, 18956);  // ceil(151643 / 8); padded vocabulary 151648
    EXPECT_EQ(last->first_vocab, 7 * 18956);
    EXPECT_EQ(last->vocab_rows(), 151643 - 7 * 18956);
    const WeightSlice s = last->slice(role_of(spec, "embed_tokens.weight"));
    EXPECT_EQ(s.length(), 151643 - 7 * 18956);
    EXPECT_EQ(s.padded_length, 18956);
}

std::string plan_error(const ModelSpec& spec, int size, int rank = 0) {
    auto p = make_shard_plan(spec, size, rank);
    EXPECT_FALSE(p.ok()) << "size " << size;
    return p.ok() ? std::string() : p.message();
}

TEST(ShardPlan, ClearErrorsForSizesThatDoNotSplitTheModel) {
    std::string e = plan_error(qwen25_7b(), 8);
    EXPECT_NE(e.find("num_attention_heads (28) is not divisible by the tensor-parallel size 8"), std::string::npos)
        << e;
    EXPECT_NE(e.find("sizes that work for this model: 1, 2, 4"), std::string::npos) << e;

    e = plan_error(golden("qwen2"), 3);  // 6 heads split 3 ways, but 2 KV heads cannot serve 3 ranks
    EXPECT_NE(e.find("neither a divisor nor a multiple of num_key_value_heads (2)"), std::string::npos) << e;
    e = plan_error(golden("qwen2"), 6);  // heads and KV heads fine, intermediate_size 160 is not
    EXPECT_NE(e.find("intermediate_size (160) is not divisible"), std::string::npos) << e;

    e = plan_error(golden("qwen3_5"), 4);  // 4 heads and 2 KV heads split 4 ways, 2 linear-attention key heads do not
    EXPECT_NE(e.find("linear_num_key_heads (2) is not divisible by the tensor-parallel size 4"), std::string::npos)
        << e;
    EXPECT_NE(e.find("sizes that work for this model: 1, 2"), std::string::npos) << e;
    ModelSpec moe = golden("qwen3_next");
    moe.moe_intermediate_size = 33;
    e = plan_error(moe, 2);
    EXPECT_NE(e.find("moe_intermediate_size (33) is not divisible"), std::string::npos) << e;
    moe = golden("qwen3_next");
    moe.shared_expert_intermediate_size = 49;
    e = plan_error(moe, 2);
    EXPECT_NE(e.find("shared_expert_intermediate_size (49) is not divisible"), std::string::npos) << e;
    EXPECT_TRUE(make_shard_plan(moe, 1, 0).ok());  // size 1: nothing to split, any model

    // Expert parallelism splits whole experts: num_experts must divide, moe_intermediate_size need not.
    moe = golden("qwen3_next");  // 8 experts
    moe.moe_intermediate_size = 33;
    EXPECT_TRUE(make_shard_plan(moe, 2, 1, /*expert_parallel=*/true).ok());
    moe.num_experts = 6;
    auto ep = make_shard_plan(moe, 2, 0, /*expert_parallel=*/true);
    EXPECT_TRUE(ep.ok()) << ep.message();
    moe.num_experts = 7;
    ep = make_shard_plan(moe, 2, 0, /*expert_parallel=*/true);
    ASSERT_FALSE(ep.ok());
    EXPECT_NE(ep.message().find("num_experts (7) is not divisible by the tensor-parallel size 2"), std::string::npos)
        << ep.message();
    EXPECT_NE(ep.message().find("sizes that work for this model: 1)"), std::string::npos) << ep.message();

    EXPECT_NE(plan_error(qwen3_8b(), 0).find("at least 1"), std::string::npos);
    EXPECT_NE(plan_error(qwen3_8b(), 4, 4).find("rank 4 is outside a tensor-parallel group of 4"), std::string::npos);
    EXPECT_NE(plan_error(qwen3_8b(), 2, -1).find("outside"), std::string::npos);
}

// --- shard_weights ------------------------------------------------------------------------------------------------

// A new tensor in `storage` whose every element holds a distinct value (tag * 10000 + flat index).
Tensor distinct_values(std::vector<HostTensor>& storage, int tag, Shape shape) {
    HostTensor t = HostTensor::empty(DType::F32, shape);
    for (int64_t i = 0; i < shape.numel(); ++i)
        t.tensor.data_as<float>()[i] = static_cast<float>(tag * 10000 + i);
    storage.push_back(std::move(t));
    return storage.back().tensor;
}

// A miniature dense model whose every weight element holds a distinct value.
struct TinyWeights {
    ModelSpec spec;
    ModelWeights weights;
    std::vector<HostTensor> storage;

    TinyWeights(bool tied, int64_t vocab) {
        spec.family = ModelFamily::kQwen2;
        spec.hidden_size = 4;
        spec.num_attention_heads = 4;
        spec.num_key_value_heads = 2;
        spec.head_dim = 2;
        spec.intermediate_size = 8;
        spec.vocab_size = vocab;
        spec.num_hidden_layers = 1;
        spec.layers.resize(1);
        const int64_t H = 4, Q = 8, KV = 4, I = 8;
        weights.embed = make(1, {vocab, H});
        weights.lm_head = LinearWeight::dense(tied ? weights.embed : make(2, {vocab, H}));
        weights.final_norm = make(3, {H});
        LayerWeights l;
        l.input_norm = make(4, {H});
        l.post_norm = make(5, {H});
        l.attn.q = LinearWeight::dense(make(6, {Q, H}));
        l.attn.k = LinearWeight::dense(make(7, {KV, H}));
        l.attn.v = LinearWeight::dense(make(8, {KV, H}));
        l.attn.o = LinearWeight::dense(make(9, {H, Q}));
        l.attn.q.bias = make(10, {Q});
        l.attn.k.bias = make(11, {KV});
        l.attn.v.bias = make(12, {KV});
        l.dense.gate = LinearWeight::dense(make(13, {I, H}));
        l.dense.up = LinearWeight::dense(make(14, {I, H}));
        l.dense.down = LinearWeight::dense(make(15, {H, I}));
        weights.layers.push_back(l);
    }
    Tensor make(int tag, Shape shape) { return distinct_values(storage, tag, std::move(shape)); }
};

float at(const Tensor& t, int64_t row, int64_t col) {
    return t.data_as<float>()[row * (t.rank() == 2 ? t.stride(0) : 1) + col];
}

// shard == the slice of full (zero past the slice's length along the split dimension); one range.
void expect_slice(const char* what, const Tensor& full, const Tensor& shard, const WeightSlice& s) {
    SCOPED_TRACE(what);
    ASSERT_EQ(s.ranges.size(), 1u);
    const int64_t begin = s.ranges[0].begin, length = s.ranges[0].length;
    const int64_t cols = full.rank() == 2 ? full.dim(1) : 1;
    if (s.dim == SplitDim::kColumns) {
        ASSERT_EQ(shard.shape(), (Shape{full.dim(0), length}));
        for (int64_t r = 0; r < full.dim(0); ++r)
            for (int64_t c = 0; c < length; ++c)
                ASSERT_EQ(at(shard, r, c), at(full, r, begin + c));
        return;
    }
    ASSERT_GE(shard.dim(0), s.padded_length);
    for (int64_t r = 0; r < shard.dim(0); ++r)
        for (int64_t c = 0; c < cols; ++c) {
            const float want = r < length ? at(full, begin + r, c) : 0.0f;
            ASSERT_EQ(at(shard, r, c), want) << "row " << r << " col " << c;
        }
}

TEST(ShardWeights, EachShardHoldsItsSliceAndTheVocabularyIsZeroPadded) {
    for (bool tied : {false, true}) {
        for (int size : {2, 4}) {
            for (int rank = 0; rank < size; ++rank) {
                SCOPED_TRACE("tied " + std::to_string(tied) + " tp " + std::to_string(size) + " rank " +
                             std::to_string(rank));
                TinyWeights full(tied, /*vocab=*/7);
                TinyWeights cut(tied, 7);
                auto plan = make_shard_plan(full.spec, size, rank);
                ASSERT_TRUE(plan.ok()) << plan.message();
                ASSERT_TRUE(shard_weights(cut.spec, *plan, cut.weights).ok());
                const ModelWeights& f = full.weights;
                const ModelWeights& c = cut.weights;
                const LayerWeights &fl = f.layers[0], &cl = c.layers[0];
                // The embedding: the padded shard plus the zero row that other ranks' ids read.
                EXPECT_EQ(c.embed.dim(0), plan->vocab_per_rank + 1);
                expect_slice("embed", f.embed, c.embed, plan->slice(role_of(full.spec, "embed_tokens.weight")));
                EXPECT_EQ(c.lm_head.data.shape(), (Shape{plan->vocab_per_rank, 4}));
                expect_slice("lm_head", f.lm_head.data, c.lm_head.data,
                             plan->slice(role_of(full.spec, "lm_head.weight")));
                if (tied) {
                    EXPECT_EQ(c.lm_head.data.data(), c.embed.data());
                }
                expect_slice("q", fl.attn.q.data, cl.attn.q.data, plan->slice(role_of(full.spec, "q_proj.weight")));
                expect_slice("k", fl.attn.k.data, cl.attn.k.data, plan->slice(role_of(full.spec, "k_proj.weight")));
                expect_slice("v", fl.attn.v.data, cl.attn.v.data, plan->slice(role_of(full.spec, "v_proj.weight")));
                expect_slice("o", fl.attn.o.data, cl.attn.o.data, plan->slice(role_of(full.spec, "o_proj.weight")));
                expect_slice("q_bias", fl.attn.q.bias, cl.attn.q.bias, plan->slice(role_of(full.spec, "q_proj.bias")));
                expect_slice("k_bias", fl.attn.k.bias, cl.attn.k.bias, plan->slice(role_of(full.spec, "k_proj.bias")));
                expect_slice("v_bias", fl.attn.v.bias, cl.attn.v.bias, plan->slice(role_of(full.spec, "v_proj.bias")));
                expect_slice("gate", fl.dense.gate.data, cl.dense.gate.data,
                             plan->slice(role_of(full.spec, "gate_proj.weight")));
                expect_slice("up", fl.dense.up.data, cl.dense.up.data,
                             plan->slice(role_of(full.spec, "up_proj.weight")));
                expect_slice("down", fl.dense.down.data, cl.dense.down.data,
                             plan->slice(role_of(full.spec, "down_proj.weight")));
                // Row slices are views of the checkpoint (no copy); norms are untouched.
                // (storage order: embed, [lm_head,] final_norm, input_norm, post_norm, q, ...)
                const size_t after_head = tied ? 0 : 1;
                EXPECT_EQ(cl.attn.q.data.data(),
                          cut.storage[4 + after_head].tensor.data_as<float>() + plan->first_q_head * 2 * 4);
                EXPECT_EQ(cl.input_norm.data(), cut.storage[2 + after_head].tensor.data());
                EXPECT_EQ(c.final_norm.data(), cut.storage[1 + after_head].tensor.data());
            }
        }
    }
}

TEST(ShardWeights, SizeOneChangesNothing) {
    TinyWeights w(false, 7);
    const ModelWeights before = [&] {
        ModelWeights copy;
        copy.embed = w.weights.embed;
        copy.lm_head = w.weights.lm_head;
        copy.layers = w.weights.layers;
        return copy;
    }();
    auto plan = make_shard_plan(w.spec, 1, 0);
    ASSERT_TRUE(plan.ok());
    ASSERT_TRUE(shard_weights(w.spec, *plan, w.weights).ok());
    EXPECT_EQ(w.weights.embed.data(), before.embed.data());
    EXPECT_EQ(w.weights.embed.shape(), before.embed.shape());
    EXPECT_EQ(w.weights.layers[0].attn.o.data.data(), before.layers[0].attn.o.data.data());
    EXPECT_EQ(w.weights.layers[0].dense.down.data.shape(), before.layers[0].dense.down.data.shape());
    EXPECT_TRUE(w.weights.owned.buffers.empty());
}

// A miniature Qwen3.5-MoE layer (a Gated DeltaNet, routed experts and a shared expert) whose every weight element
// holds a distinct value: 2 key heads of 2, 4 value heads of 3 (conv channels q 4 | k 4 | v 12), 3 experts of 4
// features, a shared expert of 2.
struct TinyHybridMoe {
    ModelSpec spec;
    ModelWeights weights;
    std::vector<HostTensor> storage;

    TinyHybridMoe() {
        spec.family = ModelFamily::kQwen3_5Moe;
        spec.hidden_size = 4;
        spec.vocab_size = 8;
        spec.linear_num_key_heads = 2, spec.linear_num_value_heads = 4;
        spec.linear_key_head_dim = 2, spec.linear_value_head_dim = 3, spec.linear_conv_kernel_dim = 4;
        spec.num_experts = 3, spec.num_experts_per_tok = 1;
        spec.moe_intermediate_size = 4, spec.shared_expert_intermediate_size = 2;
        spec.num_hidden_layers = 1;
        spec.layers = {LayerSpec{AttentionKind::kLinear, MlpKind::kMoe}};
        weights = declared_weights(spec);
        weights.embed = make(1, {8, 4});
        weights.lm_head = LinearWeight::dense(make(2, {8, 4}));
        weights.final_norm = make(3, {4});
        LayerWeights& l = weights.layers[0];
        l.input_norm = make(4, {4});
        l.post_norm = make(5, {4});
        DeltaNetWeights& d = l.delta;
        d.qkv = LinearWeight::dense(make(6, {20, 4}));
        d.z = LinearWeight::dense(make(7, {12, 4}));
        d.b = LinearWeight::dense(make(8, {4, 4}));
        d.a = LinearWeight::dense(make(9, {4, 4}));
        d.conv = make(10, {20, 4});
        d.a_log = make(11, {4});
        d.dt_bias = make(12, {4});
        d.norm = make(13, {3});
        d.out = LinearWeight::dense(make(14, {4, 12}));
        MoeWeights& m = l.moe;
        m.router = LinearWeight::dense(make(15, {3, 4}));
        m.gate_up = LinearWeight::dense(make(16, {3, 8, 4}));
        m.down = LinearWeight::dense(make(17, {3, 4, 4}));
        m.has_shared = true;
        m.shared.gate = LinearWeight::dense(make(18, {2, 4}));
        m.shared.up = LinearWeight::dense(make(19, {2, 4}));
        m.shared.down = LinearWeight::dense(make(20, {4, 2}));
        m.shared_gate = LinearWeight::dense(make(21, {1, 4}));
    }
    Tensor make(int tag, Shape shape) { return distinct_values(storage, tag, std::move(shape)); }
};

// shard == full's entries `indices` along `axis`, in that order (every other dimension whole).
void expect_taken(const char* what, const Tensor& full, const Tensor& shard, int axis, std::vector<int64_t> indices) {
    SCOPED_TRACE(what);
    Shape want = full.shape();
    want[axis] = static_cast<int64_t>(indices.size());
    ASSERT_EQ(shard.shape(), want);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; ++d)
        outer *= full.dim(d);
    for (int d = axis + 1; d < full.rank(); ++d)
        inner *= full.dim(d);
    for (int64_t o = 0; o < outer; ++o)
        for (size_t j = 0; j < indices.size(); ++j)
            for (int64_t i = 0; i < inner; ++i)
                ASSERT_EQ(shard.data_as<float>()[(o * want[axis] + static_cast<int64_t>(j)) * inner + i],
                          full.data_as<float>()[(o * full.dim(axis) + indices[j]) * inner + i])
                    << "outer " << o << " entry " << j << " inner " << i;
}

std::vector<int64_t> indices(std::initializer_list<std::pair<int64_t, int64_t>> ranges) {  // [begin, end) each
    std::vector<int64_t> out;
    for (const auto& [begin, end] : ranges)
        for (int64_t i = begin; i < end; ++i)
            out.push_back(i);
    return out;
}

TEST(ShardWeights, DeltaNetHeadsAndExpertFeaturesAreCutPartByPart) {
    for (int rank = 0; rank < 2; ++rank) {
        SCOPED_TRACE("rank " + std::to_string(rank));
        TinyHybridMoe full, cut;
        auto plan = make_shard_plan(full.spec, 2, rank);
        ASSERT_TRUE(plan.ok()) << plan.message();
        const void* norm = cut.weights.layers[0].delta.norm.data();
        Status s = shard_weights(cut.spec, *plan, cut.weights);
        ASSERT_TRUE(s.ok()) << s.message();
        const int64_t r = rank;
        const DeltaNetWeights &fd = full.weights.layers[0].delta, &cd = cut.weights.layers[0].delta;
        // qkv rows and conv channels: this rank's key head's q (2 rows) and k (2 rows), its 2 value heads' v (6 rows).
        const std::vector<int64_t> qkv =
            indices({{2 * r, 2 * r + 2}, {4 + 2 * r, 4 + 2 * r + 2}, {8 + 6 * r, 14 + 6 * r}});
        expect_taken("qkv", fd.qkv.data, cd.qkv.data, 0, qkv);
        expect_taken("conv", fd.conv, cd.conv, 0, qkv);
        expect_taken("z", fd.z.data, cd.z.data, 0, indices({{6 * r, 6 * r + 6}}));
        for (auto [what, f, c] :
             {std::tuple{"b", fd.b.data, cd.b.data}, std::tuple{"a", fd.a.data, cd.a.data},
              std::tuple{"A_log", fd.a_log, cd.a_log}, std::tuple{"dt_bias", fd.dt_bias, cd.dt_bias}})
            expect_taken(what, f, c, 0, indices({{2 * r, 2 * r + 2}}));
        expect_taken("out_proj", fd.out.data, cd.out.data, 1, indices({{6 * r, 6 * r + 6}}));
        EXPECT_EQ(cd.norm.data(), norm);  // replicated: untouched

        const MoeWeights &fm = full.weights.layers[0].moe, &cm = cut.weights.layers[0].moe;
        // Every expert: its gate rows [2r, 2r+2) and its up rows [4+2r, 4+2r+2); down's columns [2r, 2r+2).
        expect_taken("gate_up", fm.gate_up.data, cm.gate_up.data, 1,
                     indices({{2 * r, 2 * r + 2}, {4 + 2 * r, 6 + 2 * r}}));
        expect_taken("down", fm.down.data, cm.down.data, 2, indices({{2 * r, 2 * r + 2}}));
        expect_taken("shared gate", fm.shared.gate.data, cm.shared.gate.data, 0, {r});
        expect_taken("shared up", fm.shared.up.data, cm.shared.up.data, 0, {r});
        expect_taken("shared down", fm.shared.down.data, cm.shared.down.data, 1, {r});
        expect_taken("router", fm.router.data, cm.router.data, 0, indices({{0, 3}}));
        expect_taken("shared_expert_gate", fm.shared_gate.data, cm.shared_gate.data, 0, {0});
        // The local head counts the forward pass reads off the weights, and the state pool's.
        EXPECT_EQ(plan->linear_key_heads.count, 1);
        EXPECT_EQ(plan->linear_value_heads.count, 2);
        EXPECT_EQ(plan->linear_value_heads.first, 2 * r);
    }
}

TEST(ShardPlan, ExpertParallelRanksHoldWholeExperts) {
    const ModelSpec moe = golden("qwen3_moe");  // 8 experts of 32 features
    for (int rank = 0; rank < 4; ++rank) {
        auto p = make_shard_plan(moe, 4, rank, /*expert_parallel=*/true);
        ASSERT_TRUE(p.ok()) << p.message();
        EXPECT_TRUE(p->expert_parallel);
        EXPECT_EQ(p->experts.count, 2);
        EXPECT_EQ(p->experts.first, 2 * rank);
        EXPECT_EQ(p->expert_intermediate.count, 32);  // every feature of the experts it holds
        EXPECT_EQ(p->expert_intermediate.first, 0);
        const WeightSlice s = p->slice(role_of(moe, "mlp.experts.gate_up_proj"));
        EXPECT_EQ(s.dim, SplitDim::kExperts);
        ASSERT_EQ(s.ranges.size(), 1u);
        EXPECT_EQ(s.ranges[0].begin, 2 * rank);
        EXPECT_EQ(s.ranges[0].length, 2);
    }
    auto tp = make_shard_plan(moe, 4, 1);  // without it: every expert, a quarter of each one's features
    ASSERT_TRUE(tp.ok());
    EXPECT_FALSE(tp->expert_parallel);
    EXPECT_EQ(tp->experts.count, 8);
    EXPECT_EQ(tp->expert_intermediate.count, 8);
    auto dense = make_shard_plan(golden("qwen3"), 2, 0, /*expert_parallel=*/true);  // nothing to place: a no-op
    ASSERT_TRUE(dense.ok()) << dense.message();
    EXPECT_FALSE(dense->expert_parallel);
}

TEST(ShardWeights, ExpertParallelCutsWholeExpertsAndKeepsTheRestAsTensorParallel) {
    // TinyHybridMoe with 4 experts (two per rank); full and cut hold the same values (distinct_values is by tag).
    const auto four_experts = [](TinyHybridMoe& m) {
        m.spec.num_experts = 4;
        MoeWeights& moe = m.weights.layers[0].moe;
        moe.router = LinearWeight::dense(m.make(22, {4, 4}));
        moe.gate_up = LinearWeight::dense(m.make(23, {4, 8, 4}));
        moe.down = LinearWeight::dense(m.make(24, {4, 4, 4}));
    };
    for (int rank = 0; rank < 2; ++rank) {
        SCOPED_TRACE("rank " + std::to_string(rank));
        TinyHybridMoe full, cut;
        four_experts(full);
        four_experts(cut);
        auto plan = make_shard_plan(cut.spec, 2, rank, /*expert_parallel=*/true);
        ASSERT_TRUE(plan.ok()) << plan.message();
        Status s = shard_weights(cut.spec, *plan, cut.weights);
        ASSERT_TRUE(s.ok()) << s.message();
        const int64_t r = rank;
        const MoeWeights &fm = full.weights.layers[0].moe, &cm = cut.weights.layers[0].moe;
        expect_taken("gate_up", fm.gate_up.data, cm.gate_up.data, 0, indices({{2 * r, 2 * r + 2}}));
        expect_taken("down", fm.down.data, cm.down.data, 0, indices({{2 * r, 2 * r + 2}}));
        EXPECT_EQ(cm.first_expert, 2 * r);
        expect_taken("router", fm.router.data, cm.router.data, 0, indices({{0, 4}}));  // every rank routes alike
        // The shared expert and the Gated DeltaNet stay split by features and heads.
        expect_taken("shared gate", fm.shared.gate.data, cm.shared.gate.data, 0, {r});
        expect_taken("shared down", fm.shared.down.data, cm.shared.down.data, 1, {r});
        expect_taken("z", full.weights.layers[0].delta.z.data, cut.weights.layers[0].delta.z.data, 0,
                     indices({{6 * r, 6 * r + 6}}));
    }
}

// Quantized weights keep their scales (and int4 zero points) with the rows or columns they cover: TinyWeights' q as
// fp8 with 2x2 block scales (rows split), o as fp8 with 2x2 blocks (columns split), up as int4 with groups of 2 and
// zero points (rows), down as int4 (columns: two inputs a byte).
TEST(ShardWeights, QuantizedWeightsKeepTheScalesOfTheirSlice) {
    const auto bytes = [](std::vector<HostTensor>& storage, int tag, Shape shape, DType dtype) {
        HostTensor t = HostTensor::empty(dtype, shape);
        for (int64_t i = 0; i < shape.numel(); ++i)
            static_cast<uint8_t*>(t.tensor.data())[i] = static_cast<uint8_t>((tag * 37 + i) % 251);
        storage.push_back(std::move(t));
        return storage.back().tensor;
    };
    const auto quantize = [&bytes](TinyWeights& t) {
        LayerWeights& l = t.weights.layers[0];
        l.attn.q = LinearWeight::fp8(bytes(t.storage, 30, {8, 4}, DType::F8_E4M3), t.make(31, {4, 2}),
                                     ScaleLayout::kBlock, 2, 2, l.attn.q.bias);
        l.attn.o = LinearWeight::fp8(bytes(t.storage, 32, {4, 8}, DType::F8_E4M3), t.make(33, {2, 4}),
                                     ScaleLayout::kBlock, 2, 2);
        l.dense.up =
            LinearWeight::int4(bytes(t.storage, 34, {8, 2}, DType::U8), t.make(35, {8, 2}), t.make(36, {8, 2}), 2);
        l.dense.down = LinearWeight::int4(bytes(t.storage, 37, {4, 4}, DType::U8), t.make(38, {4, 4}), Tensor(), 2);
    };
    for (int rank = 0; rank < 2; ++rank) {
        SCOPED_TRACE("rank " + std::to_string(rank));
        TinyWeights full(false, 8), cut(false, 8);
        quantize(full);
        quantize(cut);
        auto plan = make_shard_plan(cut.spec, 2, rank);
        ASSERT_TRUE(plan.ok()) << plan.message();
        Status s = shard_weights(cut.spec, *plan, cut.weights);
        ASSERT_TRUE(s.ok()) << s.message();
        const LayerWeights &f = full.weights.layers[0], &c = cut.weights.layers[0];
        const int64_t r = rank;
        const auto same_bytes = [](const char* what, const Tensor& full_t, const Tensor& shard, int axis, int64_t begin,
                                   int64_t length) {
            SCOPED_TRACE(what);
            Shape want = full_t.shape();
            want[axis] = length;
            ASSERT_EQ(shard.shape(), want);
            const int64_t cols = full_t.dim(1), shard_cols = shard.dim(1);
            for (int64_t i = 0; i < shard.dim(0); ++i)
                for (int64_t j = 0; j < shard_cols; ++j) {
                    const int64_t fi = axis == 0 ? begin + i : i, fj = axis == 1 ? begin + j : j;
                    ASSERT_EQ(static_cast<const uint8_t*>(shard.data())[i * shard_cols + j],
                              static_cast<const uint8_t*>(full_t.data())[fi * cols + fj]);
                }
        };
        // q: rows [4r, 4r + 4) and their block rows [2r, 2r + 2); o: columns [4r, 4r + 4) and block columns [2r, +2).
        same_bytes("q", f.attn.q.data, c.attn.q.data, 0, 4 * r, 4);
        expect_taken("q scales", f.attn.q.scales, c.attn.q.scales, 0, indices({{2 * r, 2 * r + 2}}));
        same_bytes("o", f.attn.o.data, c.attn.o.data, 1, 4 * r, 4);
        expect_taken("o scales", f.attn.o.scales, c.attn.o.scales, 1, indices({{2 * r, 2 * r + 2}}));
        // up: rows [4r, 4r + 4) with their scale and zero rows; down: inputs [4r, 4r + 4) = bytes [2r, 2r + 2), groups
        // of 2 inputs [2r, 2r + 2).
        same_bytes("up", f.dense.up.data, c.dense.up.data, 0, 4 * r, 4);
        expect_taken("up scales", f.dense.up.scales, c.dense.up.scales, 0, indices({{4 * r, 4 * r + 4}}));
        expect_taken("up zeros", f.dense.up.zeros, c.dense.up.zeros, 0, indices({{4 * r, 4 * r + 4}}));
        same_bytes("down", f.dense.down.data, c.dense.down.data, 1, 2 * r, 2);
        expect_taken("down scales", f.dense.down.scales, c.dense.down.scales, 1, indices({{2 * r, 2 * r + 2}}));
        EXPECT_EQ(c.attn.q.format, WeightFormat::kFp8E4M3);
        EXPECT_EQ(c.dense.down.in_features(), 4);
    }
}

}  // namespace
}  // namespace pagoda::model
