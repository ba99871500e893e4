// The CUDA sampler against the CPU sampler (engine/sampler.cpp), row by row on fresh random logits: the same token
// for every row and parameter mix (greedy, temperature, min_p, top_k, top_p with ties at its boundary, penalties,
// logit_bias, the min_tokens mask), the same top logprobs, and the sampled token's logprob. It also prints how long
// a batch of 256 Qwen-sized rows, and one row, take to sample.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <utility>

#include "cuda_test_util.h"
#include "engine/sampler.h"
#include "engine/sampling_params.h"
#include "executor/device_sampling.h"
#include "runtime/device_sampler.h"

namespace pagoda {
namespace {

using namespace cuda_test;
using engine::SamplingContext;
using engine::SamplingParams;

struct Row {
    SamplingParams params;
    std::vector<int32_t> prompt, output, eos{1, 2};
    std::vector<uint32_t> mask;  // structured output: allowed tokens; empty = all
    uint64_t seed = 0;
    SamplingContext context() const {
        SamplingContext c;
        c.allowed_tokens = mask;
        c.params = &params;
        c.prompt_tokens = prompt;
        c.output_tokens = output;
        c.eos_token_ids = eos;
        c.seed = seed;
        return c;
    }
};

class CudaSamplerTest : public ::testing::Test {
  protected:
    void SetUp() override {
        PAGODA_REQUIRE_GPU();
        auto g = make_cuda_backend();
        ASSERT_TRUE(g.ok()) << g.message();
        gpu_ = std::move(g).value();
        sampler_ = make_device_sampler(*gpu_);
        ASSERT_NE(sampler_, nullptr);
    }

    Row random_row(int32_t V) {
        auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); };
        auto coin = [&](int percent) { return pick(1, 100) <= percent; };
        Row r;
        SamplingParams& p = r.params;
        p.temperature = coin(25) ? 0.0f : 0.2f + 0.2f * static_cast<float>(pick(0, 6));
        if (coin(50)) p.top_k = pick(1, 60);
        if (coin(50)) p.top_p = 0.05f * static_cast<float>(pick(1, 19));
        if (coin(30)) p.min_p = 0.05f * static_cast<float>(pick(1, 8));
        if (coin(30)) p.repetition_penalty = 0.7f + 0.1f * static_cast<float>(pick(0, 8));
        if (coin(30)) p.frequency_penalty = 0.25f * static_cast<float>(pick(-8, 8));
        if (coin(30)) p.presence_penalty = 0.25f * static_cast<float>(pick(-8, 8));
        if (coin(30)) p.logit_bias = {{pick(0, V - 1), static_cast<float>(pick(-100, 100))}};
        if (coin(20)) p.stop_token_ids = {pick(0, V - 1)};
        p.min_tokens = pick(0, 4);
        if (coin(50)) {
            p.logprobs = true;
            p.top_logprobs = pick(0, 20);
        }
        if (coin(30)) {
            // A structured-output mask: a sparse random set, now and then empty (a finished grammar whose model has
            // no EOS token: no token on either sampler); the engine refuses min_tokens with it.
            r.mask.assign((static_cast<size_t>(V) + 31) / 32, 0u);
            const bool empty = coin(10);
            for (int32_t t = 0; t < V && !empty; ++t)
                if (coin(12) || t == V / 2) r.mask[t / 32] |= 1u << (t % 32);
            p.min_tokens = 0;
        }
        engine::apply_generation_config(p, {});
        for (int i = pick(0, 30); i > 0; --i)
            r.prompt.push_back(pick(0, std::min(V - 1, 200)));
        for (int i = pick(0, 8); i > 0; --i)
            r.output.push_back(pick(0, std::min(V - 1, 200)));
        r.seed = rng_();
        return r;
    }

    // Raw logits of one row: normal values; some rows coarse (many ties, also at the top_p boundary).
    void fill_logits(std::span<float> row) {
        std::normal_distribution<float> d(0.0f, 3.0f);
        const int kind = static_cast<int>(rng_() % 4);
        for (float& x : row) {
            x = d(rng_);
            if (kind == 1) x = std::round(x * 2.0f) / 2.0f;  // steps of 0.5: ties everywhere
            if (kind == 2) x = std::round(x / 4.0f);         // a handful of distinct values
        }
    }

    // Samples `rows` on both samplers and compares; returns the number of rows compared.
    int compare(int32_t V, std::vector<Row>& rows) {
        const int64_t R = static_cast<int64_t>(rows.size()) + 2;  // two extra rows nobody samples
        HostTensor logits = HostTensor::empty(DType::F32, Shape{R, V});
        fill_logits(std::span<float>(logits.tensor.data_as<float>(), static_cast<size_t>(R * V)));
        DeviceTensor dev = to_device(*gpu_, logits.tensor);
        executor::DeviceSamplingBatch batch(V);
        for (size_t i = 0; i < rows.size(); ++i)
            batch.add(rows[i].context(), static_cast<int32_t>(i) + 1);  // row 0 and the last are not sampled
        std::vector<kernels::SampledToken> got(rows.size());
        const Status st = sampler_->sample(dev.tensor, batch.rows(), batch.edits(), batch.masks(), got);
        EXPECT_TRUE(st.ok()) << st.message();
        engine::Sampler cpu(V);
        for (size_t i = 0; i < rows.size(); ++i) {
            const std::span<const float> raw(logits.tensor.data_as<float>() + (i + 1) * V, static_cast<size_t>(V));
            const engine::SampleResult want = cpu.sample(raw, rows[i].context());
            const SamplingParams& p = rows[i].params;
            const std::string what =
                "V=" + std::to_string(V) + " row " + std::to_string(i) + " t=" + std::to_string(p.temperature_value()) +
                " top_k=" + std::to_string(p.top_k_value()) + " top_p=" + std::to_string(p.top_p_value()) +
                " min_p=" + std::to_string(p.min_p_value());
            EXPECT_EQ(got[i].token, want.token) << what;
            if (want.token == engine::kNoToken) {
                EXPECT_EQ(got[i].error, 1) << what;
            }
            if (!p.logprobs || want.token == engine::kNoToken) continue;
            EXPECT_NEAR(got[i].logprob, want.logprob, 2e-5f * std::max(1.0f, std::fabs(want.logprob))) << what;
            EXPECT_EQ(got[i].num_top, want.num_top) << what;
            for (int32_t k = 0; k < std::min(got[i].num_top, want.num_top); ++k) {
                EXPECT_EQ(got[i].top_ids[k], want.top[k].token) << what << " top " << k;
                EXPECT_NEAR(got[i].top_logprobs[k], want.top[k].logprob,
                            2e-5f * std::max(1.0f, std::fabs(want.top[k].logprob)))
                    << what << " top " << k;
            }
        }
        return static_cast<int>(rows.size());
    }

    std::mt19937 rng_{2026};
    std::unique_ptr<Backend> gpu_;
    std::unique_ptr<DeviceSampler> sampler_;
};

TEST_F(CudaSamplerTest, SameTokensAsTheCpuSampler) {
    int compared = 0;
    for (int32_t V : {37, 1000, 151936}) {
        const int batches = V > 100000 ? 6 : 40;
        for (int b = 0; b < batches; ++b) {
            std::vector<Row> rows;
            for (int i = 0; i < 24; ++i)
                rows.push_back(random_row(V));
            compared += compare(V, rows);
        }
    }
    std::printf("  %d rows compared\n", compared);
}

TEST_F(CudaSamplerTest, QwenDefaultsAndPlainSampling) {
    // The parameter sets real traffic uses most: Qwen3's generation_config, Qwen2.5's (with a repetition penalty),
    // OpenAI's defaults (full-vocabulary sampling), and greedy.
    std::vector<Row> rows;
    for (int i = 0; i < 32; ++i) {
        Row r = random_row(151936);
        SamplingParams& p = r.params;
        p = SamplingParams{};
        switch (i % 4) {
            case 0:
                p.temperature = 0.6f, p.top_k = 20, p.top_p = 0.95f;
                break;
            case 1:
                p.temperature = 0.7f, p.top_k = 20, p.top_p = 0.8f, p.repetition_penalty = 1.05f;
                break;
            case 2:
                break;
            default:
                p.temperature = 0.0f;
        }
        p.logprobs = i % 3 == 0;
        p.top_logprobs = 5;
        engine::apply_generation_config(p, {});
        rows.push_back(r);
    }
    compare(151936, rows);
}

// A row with every token at -inf samples no token (the engine ends that choice); the step and its other rows go on.
TEST_F(CudaSamplerTest, EveryTokenMaskedGivesNoTokenForThatRowOnly) {
    const int32_t V = 64;
    HostTensor logits = HostTensor::empty(DType::F32, Shape{2, V});
    for (int32_t v = 0; v < V; ++v) {
        logits.tensor.data_as<float>()[v] = -INFINITY;
        logits.tensor.data_as<float>()[V + v] = static_cast<float>(v % 7);
    }
    DeviceTensor dev = to_device(*gpu_, logits.tensor);
    executor::DeviceSamplingBatch batch(V);
    for (float t : {0.0f, 1.0f}) {
        Row r = random_row(V);
        r.params = SamplingParams{};
        r.params.temperature = t;
        engine::apply_generation_config(r.params, {});
        batch.clear();
        batch.add(r.context(), 0);
        batch.add(r.context(), 1);
        std::vector<kernels::SampledToken> got(2);
        const Status st = sampler_->sample(dev.tensor, batch.rows(), batch.edits(), batch.masks(), got);
        ASSERT_TRUE(st.ok()) << st.message();
        EXPECT_EQ(got[0].token, engine::kNoToken) << "temperature " << t;
        EXPECT_EQ(got[0].error, 1);
        EXPECT_GE(got[1].token, 0) << "temperature " << t;
        EXPECT_EQ(got[1].error, 0);
        if (t == 0.0f) {
            EXPECT_EQ(got[1].token % 7, 6) << "greedy takes a largest logit";
        }
    }
}

TEST_F(CudaSamplerTest, BadArgumentsAreErrors) {
    const int32_t V = 64;
    DeviceTensor dev = device_empty(*gpu_, DType::F32, Shape{2, V});
    std::vector<kernels::SampleRow> rows(1);
    rows[0].logits_row = 5;  // beyond the 2 rows
    std::vector<kernels::SampledToken> got(1);
    EXPECT_FALSE(sampler_->sample(dev.tensor, rows, {}, {}, got).ok());
    rows[0].logits_row = 0;
    std::vector<kernels::LogitEdit> edits(1);
    edits[0].token = V;  // outside the vocabulary
    rows[0].edit_end = 1;
    EXPECT_FALSE(sampler_->sample(dev.tensor, rows, edits, {}, got).ok());
    rows[0].edit_end = 0;
    rows[0].mask_row = 0;  // a mask row with no masks given
    EXPECT_FALSE(sampler_->sample(dev.tensor, rows, {}, {}, got).ok());
}

// Not a pass/fail check: the time of one step's sampling at a large batch (Qwen3's vocabulary) and at batch 1
// (Qwen3.5's), for the benchmark notes.
TEST_F(CudaSamplerTest, TimeOfQwenRows) {
    for (const auto& [R, V] : {std::pair<int64_t, int32_t>{256, 151936}, {1, 248320}}) {
        HostTensor logits = HostTensor::empty(DType::F32, Shape{R, V});
        fill_logits(std::span<float>(logits.tensor.data_as<float>(), static_cast<size_t>(R * V)));
        DeviceTensor dev = to_device(*gpu_, logits.tensor);
        for (const char* mode : {"greedy", "qwen3 defaults", "temperature 1"}) {
            std::vector<Row> rows(R);
            executor::DeviceSamplingBatch batch(V);
            for (int64_t i = 0; i < R; ++i) {
                SamplingParams& p = rows[i].params;
                if (mode[0] == 'g') p.temperature = 0.0f;
                if (mode[0] == 'q') p.temperature = 0.6f, p.top_k = 20, p.top_p = 0.95f;
                engine::apply_generation_config(p, {});
                batch.add(rows[i].context(), static_cast<int32_t>(i));
            }
            std::vector<kernels::SampledToken> got(R);
            ASSERT_TRUE(sampler_->sample(dev.tensor, batch.rows(), batch.edits(), batch.masks(), got).ok());  // warm-up
            double best = 1e30;
            for (int rep = 0; rep < 5; ++rep) {
                gpu_->copy(dev.tensor, logits.tensor);  // the sampler overwrote its rows; time it on fresh ones
                const auto t0 = std::chrono::steady_clock::now();
                ASSERT_TRUE(sampler_->sample(dev.tensor, batch.rows(), batch.edits(), batch.masks(), got).ok());
                best = std::min(
                    best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
            }
            std::printf("  sampling %lld rows x %d (%s): %.3f ms (best of 5)\n", static_cast<long long>(R), V, mode,
                        best);
        }
    }
}

}  // namespace
}  // namespace pagoda
