// Golden tests: our CPU forward pass against transformers' fp32 logits for tiny random checkpoints of every
// architecture (tests/golden/<name>/, made by tools/make_tiny_models.py on a machine with torch), and for fp8 copies
// of three of them (<name>_fp8, made by tools/make_fp8_golden.py: e4m3 weights with block scales, as Qwen's FP8
// checkpoints; transformers' reference dequantises them).
//  - every position of a 116-token sequence (100-token prompt + 16-token greedy continuation) within
//    max|Δ| ≤ 1e-3·max|ref|;
//  - the same logits when the sequence arrives as a prefix followed by token-by-token decode, in uneven chunks,
//    and batched with other sequences;
//  - the greedy continuation wherever the reference's top-2 margin exceeds the tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "common/file.h"
#include "common/json.h"
#include "golden/golden_reference.h"
#include "model/model.h"
#include "model/runner.h"
#include "runtime/backend.h"

namespace pagoda::model {
namespace {

using golden::max_diff;
using golden::Reference;

// The model's logits at every position of the reference prompt, one prefill step (with the pools its layers need);
// `observer` sees each layer's residual stream.
void prefill_logits(Model& model, Backend& backend, const Reference& ref, const HiddenObserver& observer,
                    std::vector<float>& out) {
    ForwardBatchBuilder builder(16);
    std::vector<int32_t> table((ref.rows + 15) / 16);
    for (size_t i = 0; i < table.size(); ++i)
        table[i] = static_cast<int32_t>(i);
    builder.add_sequence(ref.ids, 0, table, 0, ForwardBatchBuilder::Logits::All);
    std::optional<KvCachePool> kv;
    std::optional<StateCachePool> states;
    if (model.spec().num_full_attention_layers() > 0) {
        auto pool =
            KvCachePool::create(backend.allocator(), model.kv_cache_config(static_cast<int32_t>(table.size()), 16));
        ASSERT_TRUE(pool.ok()) << pool.message();
        kv = std::move(pool).value();
    }
    if (model.spec().num_linear_attention_layers() > 0) {
        auto pool = StateCachePool::create(backend.allocator(), model.state_cache_config(1));
        ASSERT_TRUE(pool.ok()) << pool.message();
        states = std::move(pool).value();
    }
    HostTensor logits = HostTensor::empty(DType::F32, Shape{ref.rows, ref.vocab});
    const Status s =
        model.forward(builder.view(), kv ? &*kv : nullptr, states ? &*states : nullptr, logits.tensor, observer);
    ASSERT_TRUE(s.ok()) << s.message();
    out.assign(logits.tensor.data_as<float>(), logits.tensor.data_as<float>() + ref.rows * ref.vocab);
}

class GoldenTest : public ::testing::TestWithParam<std::string> {
  protected:
    void SetUp() override {
        dir_ = golden::dir(GetParam());
        if (!file_exists(dir_ + "/config.json")) GTEST_SKIP() << "no golden data in " << dir_;
        ref_ = golden::load(dir_);
        ASSERT_EQ(ref_.logits.size(), static_cast<size_t>(ref_.rows * ref_.vocab)) << "logits.bin unreadable";
        ASSERT_EQ(static_cast<int64_t>(ref_.ids.size()), ref_.rows);
        backend_ = make_cpu_backend();
        auto model = Model::load(dir_, *backend_);
        ASSERT_TRUE(model.ok()) << model.message();
        model_ = std::move(model).value();
        ASSERT_EQ(model_->vocab_size(), ref_.vocab);
        tol_ = 1e-3f * ref_.max_abs;
    }

    SequenceRunner runner(int32_t seqs = 1) {
        auto r = SequenceRunner::create(*model_, seqs, static_cast<int32_t>(ref_.rows) + 8);
        EXPECT_TRUE(r.ok()) << r.message();
        return std::move(r).value();
    }
    std::span<const int32_t> ids(int64_t begin, int64_t end) const {
        return std::span<const int32_t>(ref_.ids).subspan(static_cast<size_t>(begin), static_cast<size_t>(end - begin));
    }

    std::string dir_;
    Reference ref_;
    std::unique_ptr<Backend> backend_;
    std::unique_ptr<Model> model_;
    float tol_ = 0;
};

TEST_P(GoldenTest, PrefillLogitsMatchTransformersAtEveryPosition) {
    // Per-layer residual-stream differences, printed on failure to say where a mismatch starts.
    std::vector<float> layer_diff;
    const int64_t H = ref_.hidden_shape.size() == 3 ? ref_.hidden_shape[2] : 0;
    HiddenObserver observer = [&](int64_t layer, const Tensor& hidden) {
        if (ref_.hidden.empty() || layer >= ref_.hidden_shape[0] - 1) return;  // HF's last entry is normed
        float m = 0;
        const float* h = hidden.data_as<float>();
        const float* r = ref_.hidden.data() + layer * ref_.rows * H;
        for (int64_t i = 0; i < ref_.rows * H; ++i)
            m = std::max(m, std::fabs(h[i] - r[i]));
        layer_diff.push_back(m);
    };
    std::vector<float> ours;
    prefill_logits(*model_, *backend_, ref_, observer, ours);
    if (HasFatalFailure()) return;
    std::string layers;
    for (size_t i = 0; i < layer_diff.size(); ++i)
        layers += " " + std::to_string(layer_diff[i]);
    const float d = max_diff(ours, ref_, 0, ref_.rows);
    EXPECT_LE(d, tol_) << "max|Δ| " << d << " > " << tol_ << "; residual-stream max|Δ| by layer:" << layers;
    std::printf("[ %s ] max|Δ| %.3g (tolerance %.3g, max|ref| %.3g); by layer:%s\n", GetParam().c_str(), d, tol_,
                ref_.max_abs, layers.c_str());
}

TEST_P(GoldenTest, PrefixThenTokenByTokenDecodeMatches) {
    SequenceRunner r = runner();
    const int64_t split = 70;  // past the 64-token delta-rule chunk
    auto first = r.feed(0, ids(0, split), true);
    ASSERT_TRUE(first.ok()) << first.message();
    EXPECT_LE(max_diff(*first, ref_, 0, split), tol_);
    float worst = 0;
    for (int64_t t = split; t < ref_.rows; ++t) {
        auto step = r.feed(0, ids(t, t + 1), false);
        ASSERT_TRUE(step.ok()) << step.message();
        worst = std::max(worst, max_diff(*step, ref_, t, 1));
    }
    EXPECT_LE(worst, tol_) << "decode positions " << split << ".." << ref_.rows - 1;
}

TEST_P(GoldenTest, UnevenChunkedPrefillMatches) {
    SequenceRunner r = runner();
    const int64_t cuts[] = {0, 1, 41, 106, ref_.rows};
    for (size_t c = 0; c + 1 < std::size(cuts); ++c) {
        auto out = r.feed(0, ids(cuts[c], cuts[c + 1]), true);
        ASSERT_TRUE(out.ok()) << out.message();
        EXPECT_LE(max_diff(*out, ref_, cuts[c], cuts[c + 1] - cuts[c]), tol_)
            << "chunk [" << cuts[c] << ", " << cuts[c + 1] << ")";
    }
}

TEST_P(GoldenTest, BatchedSequencesMatch) {
    SequenceRunner r = runner(3);
    // Step 1: a long prefill and a short one together.
    SequenceRunner::Feed step1[] = {{0, ids(0, 80), true}, {1, ids(0, 30), true}};
    auto out1 = r.step(step1);
    ASSERT_TRUE(out1.ok()) << out1.message();
    EXPECT_LE(max_diff((*out1)[0], ref_, 0, 80), tol_);
    EXPECT_LE(max_diff((*out1)[1], ref_, 0, 30), tol_);
    // Step 2: decode of seq 1, a continued prefill of seq 0, a fresh sequence 2 — mixed in one batch.
    SequenceRunner::Feed step2[] = {{1, ids(30, 31), false}, {0, ids(80, ref_.rows), true}, {2, ids(0, 5), false}};
    auto out2 = r.step(step2);
    ASSERT_TRUE(out2.ok()) << out2.message();
    EXPECT_LE(max_diff((*out2)[0], ref_, 30, 1), tol_);
    EXPECT_LE(max_diff((*out2)[1], ref_, 80, ref_.rows - 80), tol_);
    EXPECT_LE(max_diff((*out2)[2], ref_, 4, 1), tol_);
}

TEST_P(GoldenTest, GreedyContinuationMatchesWhereTheMarginAllows) {
    SequenceRunner r = runner();
    auto out = r.feed(0, ids(0, ref_.prompt_len), false);
    ASSERT_TRUE(out.ok()) << out.message();
    int checked = 0;
    for (size_t step = 0; step < ref_.greedy.size(); ++step) {
        const auto& logits = *out;
        const int32_t ours = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
        if (ref_.margins[step] > 2 * tol_) {
            EXPECT_EQ(ours, ref_.greedy[step]) << "step " << step << " (reference margin " << ref_.margins[step] << ")";
            ++checked;
        }
        // Continue with the reference token so that one near-tie does not derail the later steps.
        const int32_t next = ref_.greedy[step];
        out = r.feed(0, std::span<const int32_t>(&next, 1), false);
        ASSERT_TRUE(out.ok()) << out.message();
    }
    EXPECT_GT(checked, 0);
}

// A Qwen3.5 language model saved on its own by transformers 5 (Qwen3_5ForCausalLM.save_pretrained, as text-only
// fine-tunes and quantizations are): config.json is the text config (model_type qwen3_5_text / qwen3_5_moe_text) and
// the tensors keep the multimodal names (model.language_model.layers...). Made here from the qwen3_5 and qwen3_5_moe
// goldens (their text_config and tie flag, the same tensors): the same logits as transformers'.
TEST(GoldenTextOnlySave, Qwen3_5LanguageModelSavedAloneMatchesTransformers) {
    namespace fs = std::filesystem;
    for (const char* name : {"qwen3_5", "qwen3_5_moe"}) {
        SCOPED_TRACE(name);
        const std::string src = golden::dir(name);
        if (!file_exists(src + "/config.json")) GTEST_SKIP() << "no golden data";
        auto config = Json::parse(*read_file(src + "/config.json"));
        ASSERT_TRUE(config.ok());
        Json text = *config->find("text_config");
        const Json* tie = config->find("tie_word_embeddings");
        text.set("tie_word_embeddings", tie ? *tie : Json(false));
        const fs::path dir = fs::temp_directory_path() / ("pagoda_text_only_" + std::string(name));
        fs::remove_all(dir);
        fs::create_directories(dir);
        std::ofstream((dir / "config.json").string()) << text.dump();
        for (const auto& entry : fs::directory_iterator(src))
            if (entry.path().extension() == ".safetensors" || entry.path().filename() == "model.safetensors.index.json")
                fs::create_symlink(entry.path(), dir / entry.path().filename());
        const Reference ref = golden::load(src);
        auto backend = make_cpu_backend();
        auto model = Model::load(dir.string(), *backend);
        ASSERT_TRUE(model.ok()) << model.message();
        EXPECT_EQ((*model)->spec().weight_prefix, "model.language_model.");
        std::vector<float> ours;
        prefill_logits(**model, *backend, ref, {}, ours);
        ASSERT_EQ(static_cast<int64_t>(ours.size()), ref.rows * ref.vocab);
        EXPECT_LE(max_diff(ours, ref, 0, ref.rows), 1e-3f * ref.max_abs);
        fs::remove_all(dir);
    }
}

INSTANTIATE_TEST_SUITE_P(Qwen, GoldenTest, ::testing::ValuesIn(golden::kModels),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// Quantized checkpoints packed as a device backend packs them (LoadOptions::pack_weights: every weight's data first,
// then the scales, then the zero points, each back to back): q/k/v and gate/up become one quantized view where they
// stack (fp8: channel scales, or blocks whole on every part but the last; int4/int8: the same groups, rounding and
// zero points, no act-order permutation), and the fused views give transformers' logits at every position as the
// golden test's separate weights do. qwen3_fp8's 128x128 blocks each cover a whole tiny matrix (64 q rows: not whole
// blocks) and act-order weights each have their own permutation: those stay separate.
TEST(GoldenQuantizedPacked, FusedProjectionsMatchTransformers) {
    int fp8_fused = 0, int_fused = 0;
    for (const char* name : {"qwen2_fp8",           "qwen3_fp8",
                             "qwen3_fp8_channel",   "qwen3_5_fp8",
                             "qwen3_next_fp8",      "qwen3_awq",
                             "qwen3_gptq",          "qwen2_gptq",
                             "qwen3_w4a16",         "qwen3_w4a16_asym",
                             "qwen2_gptq_int8",     "qwen2_gptq_int8_asym",
                             "qwen2_w8a16",         "qwen3_gptq_actorder",
                             "qwen3_autoround",     "qwen3_autoround_asym",
                             "qwen2_autoround_awq", "qwen3_autoround_mixed",
                             "qwen3_gptq_dynamic",  "qwen3_w4a16_mixed",
                             "qwen3_next_gptq"}) {  // (its int4 in_proj_qkvz re-ordered at load, then packed)
        SCOPED_TRACE(name);
        const std::string dir = golden::dir(name);
        if (!file_exists(dir + "/config.json")) continue;
        const Reference ref = golden::load(dir);
        auto backend = make_cpu_backend();
        LoadOptions options;
        options.pack_weights = true;
        auto loaded = Model::load(dir, *backend, single_communicator(), options);
        ASSERT_TRUE(loaded.ok()) << loaded.message();
        const std::unique_ptr<Model> model = std::move(loaded).value();
        int fused = 0;
        bool fp8 = false;
        for (const LayerWeights& layer : model->weights().layers)
            for (const LinearWeight* w : {&layer.attn.qkv, &layer.dense.gate_up})
                if (w->defined() && !w->is_dense()) ++fused, fp8 = w->format == WeightFormat::kFp8E4M3;
        (fp8 ? fp8_fused : int_fused) += fused > 0;
        std::printf("[ %s ] %d fused quantized projections\n", name, fused);

        std::vector<float> ours;
        prefill_logits(*model, *backend, ref, nullptr, ours);
        if (HasFatalFailure()) return;
        EXPECT_LE(max_diff(ours, ref, 0, ref.rows), 1e-3f * ref.max_abs);
    }
    EXPECT_GE(fp8_fused, 2) << "fp8 goldens fused too rarely for the test to see the fused path";
    EXPECT_GE(int_fused, 2) << "int4/int8 goldens fused too rarely for the test to see the fused path";
}

// The YaRN references are only worth something if plain RoPE misses them: the same checkpoint with the scaling
// dropped from its spec lands far outside the tolerance (transformers' own plain-RoPE run of it is as far off:
// reference.json's without_rope_scaling_max_abs_diff).
TEST(GoldenYarn, PlainRopeMissesTheReferenceByFarMoreThanTheTolerance) {
    for (const char* name : {"qwen3_yarn", "qwen3_5_yarn"}) {
        const std::string dir = golden::dir(name);
        if (!file_exists(dir + "/config.json")) GTEST_SKIP() << "no golden data in " << dir;
        const Reference ref = golden::load(dir);
        auto opened = ModelDir::open(dir, /*open_weights=*/true);
        ASSERT_TRUE(opened.ok()) << opened.message();
        ASSERT_EQ(opened->spec.rope.type, "yarn");
        opened->spec.rope.type = "default";
        auto backend = make_cpu_backend();
        auto model = Model::load(std::move(opened).value(), *backend);
        ASSERT_TRUE(model.ok()) << model.message();
        auto runner = SequenceRunner::create(**model, 1, static_cast<int32_t>(ref.rows) + 8);
        ASSERT_TRUE(runner.ok()) << runner.message();
        auto logits = runner->feed(0, ref.ids, true);
        ASSERT_TRUE(logits.ok()) << logits.message();
        const float d = max_diff(*logits, ref, 0, ref.rows), tol = 1e-3f * ref.max_abs;
        std::printf("[ %s ] without yarn: max|Δ| %.3g = %.0fx the tolerance %.3g\n", name, d, d / tol, tol);
        EXPECT_GT(d, 100 * tol) << name;
    }
}

}  // namespace
}  // namespace pagoda::model
