// The accuracy of an fp8 (e4m3) KV cache on a golden tiny model, measured against the backend's own cache (F32 on
// the CPU, BF16 on a GPU) with everything else alike: the logits of every position of the golden sequence, fed as a
// 70-token prefill and then token by token (so both the prefill and the decode attention paths read the fp8 cache).
// Shared by kv_fp8_golden_test (CPU) and cuda_golden_test (GPU).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/model.h"
#include "model/runner.h"
#include "runtime/backend.h"

namespace pagoda::golden {

struct KvFp8Accuracy {
    float max_abs_diff = 0;   // max |logit(fp8 KV) - logit(own KV)| over every position and token
    float max_abs_logit = 0;  // max |logit(own KV)|: what max_abs_diff is relative to
    int positions = 0;
    int top1_agree = 0;  // positions whose highest logit is the same token with both caches

    float relative() const { return max_abs_logit > 0 ? max_abs_diff / max_abs_logit : 0.0f; }
    double agreement() const { return positions ? static_cast<double>(top1_agree) / positions : 0.0; }
};

// What an fp8 KV cache may move on these models. They are random tiny models whose logits are close together and
// which amplify rounding (transformers' own bf16 forward moves qwen3's logits by 0.12, qwen3_moe's by 0.85 and
// qwen3_next's by 2.6 of max|logit| ~5: reference.json), and e4m3 keeps 4 significant bits where bf16 keeps 8. So:
// max|Δ| within 20% of max|logit| or 5x transformers' bf16 drift, whichever is more, and the top-1 token the same at
// 70% of the positions or more (measured: 2-11% on the CPU's dense models; on an H200 up to 17.4%, qwen3_yarn with
// scales of 1.0, whose YaRN attention factor sharpens the scores the rounded keys feed). A cache read without its
// scale, or one read from the wrong slots, misses both by far.
inline float kv_fp8_max_diff_bound(float max_abs_logit, double transformers_bf16_drift) {
    return std::max(0.2f * max_abs_logit, 5.0f * static_cast<float>(transformers_bf16_drift));
}
inline constexpr double kKvFp8MinTop1 = 0.7;

// Every position's logits [rows, vocab] of `ids` through a model loaded with `options`: a 70-token prefill, then one
// token a step.
inline std::vector<float> prefill_then_decode_logits(Backend& backend, const std::string& dir,
                                                     std::span<const int32_t> ids, const model::LoadOptions& options) {
    auto model = model::Model::load(dir, backend, single_communicator(), options);
    EXPECT_TRUE(model.ok()) << model.message();
    if (!model.ok()) return {};
    auto runner = model::SequenceRunner::create(**model, 1, static_cast<int32_t>(ids.size()) + 8);
    EXPECT_TRUE(runner.ok()) << runner.message();
    if (!runner.ok()) return {};
    const size_t split = std::min<size_t>(70, ids.size());
    auto first = runner->feed(0, ids.subspan(0, split), true);
    EXPECT_TRUE(first.ok()) << first.message();
    if (!first.ok()) return {};
    std::vector<float> logits = std::move(first).value();
    for (size_t t = split; t < ids.size(); ++t) {
        auto step = runner->feed(0, ids.subspan(t, 1), false);
        EXPECT_TRUE(step.ok()) << step.message();
        if (!step.ok()) return {};
        logits.insert(logits.end(), step->begin(), step->end());
    }
    return logits;
}

inline KvFp8Accuracy kv_fp8_accuracy(Backend& backend, const std::string& dir, std::span<const int32_t> ids,
                                     int64_t vocab, bool calculate_scales) {
    const std::vector<float> own = prefill_then_decode_logits(backend, dir, ids, {});
    model::LoadOptions fp8;
    fp8.kv_cache_dtype = KvCacheDtype::kFp8E4M3;
    fp8.calculate_kv_scales = calculate_scales;
    const std::vector<float> q = prefill_then_decode_logits(backend, dir, ids, fp8);
    KvFp8Accuracy a;
    EXPECT_EQ(own.size(), ids.size() * static_cast<size_t>(vocab));
    EXPECT_EQ(q.size(), own.size());
    if (own.size() != q.size() || own.empty()) return a;
    a.positions = static_cast<int>(ids.size());
    for (int p = 0; p < a.positions; ++p) {
        const float* x = own.data() + static_cast<int64_t>(p) * vocab;
        const float* y = q.data() + static_cast<int64_t>(p) * vocab;
        for (int64_t i = 0; i < vocab; ++i) {
            a.max_abs_diff = std::max(a.max_abs_diff, std::fabs(x[i] - y[i]));
            a.max_abs_logit = std::max(a.max_abs_logit, std::fabs(x[i]));
        }
        a.top1_agree += std::max_element(x, x + vocab) - x == std::max_element(y, y + vocab) - y;
    }
    return a;
}

}  // namespace pagoda::golden
