// The tiny golden checkpoints (tests/golden/<name>/, made by tools/make_tiny_models.py) and what transformers
// recorded for them: reference.json (token ids, greedy continuation and its top-2 margins, shapes) and the fp32
// logits.bin / hidden.bin. Shared by the CPU, CUDA, serving and tensor-parallel tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "common/file.h"
#include "common/json.h"

namespace pagoda::golden {

// PAGODA_SOURCE_DIR in the environment overrides the source tree compiled in: test binaries carried to the GPU
// machine run from a checkout at another path.
inline std::string dir(const std::string& name) {
    const char* root = std::getenv("PAGODA_SOURCE_DIR");
    return std::string(root && *root ? root : PAGODA_SOURCE_DIR) + "/tests/golden/" + name;
}

// Every golden checkpoint the CPU and CUDA golden tests run (GoldenTest, CudaGoldenTest): the bf16 families, YaRN,
// then the fp8 and the int4 / int8 checkpoints.
// (clang-format would put one name a line.)
// clang-format off
inline const std::string kModels[] = {
    "qwen2", "qwen2_tied", "qwen3", "qwen3_moe", "qwen3_next", "qwen3_5", "qwen3_5_moe", "qwen3_yarn",
    "qwen3_5_yarn", "qwen2_fp8", "qwen3_fp8", "qwen3_5_fp8", "qwen3_fp8_channel", "qwen3_moe_fp8",
    "qwen3_moe_fp8_channel", "qwen3_5_moe_fp8", "qwen3_next_fp8", "qwen3_awq", "qwen3_gptq", "qwen2_gptq",
    "qwen3_w4a16", "qwen3_moe_gptq", "qwen3_moe_awq", "qwen3_moe_w4a16", "qwen3_next_gptq", "qwen3_5_moe_gptq",
    "qwen2_gptq_int8", "qwen2_gptq_int8_asym", "qwen3_gptq_actorder", "qwen3_w4a16_asym", "qwen2_w8a16",
    "qwen3_autoround", "qwen3_autoround_asym", "qwen2_autoround_awq", "qwen3_5_moe_autoround",
    "qwen3_autoround_mixed", "qwen3_gptq_dynamic", "qwen3_w4a16_mixed"};
// clang-format on

struct Reference {
    std::vector<int32_t> ids;     // prompt + greedy continuation
    std::vector<int32_t> greedy;  // the continuation
    std::vector<double> margins;  // top-2 logit margin at each greedy step
    int64_t prompt_len = 0, rows = 0, vocab = 0;
    double logits_max_abs = 0;  // as recorded in reference.json
    // max |Δ| of transformers' own bf16 forward from these fp32 logits (bench/gpu/golden_bf16_drift.py); 0 when
    // not recorded.
    double transformers_bf16_max_abs_diff = 0;
    // The same for the W8A8 computation (inputs rounded to e4m3; tools/make_fp8_golden.py --w8a8-drift): 0 when not
    // recorded.
    double w8a8_transformers_bf16_max_abs_diff = 0;
    std::vector<float> logits;          // [rows, vocab] (with_tensors)
    float max_abs = 0;                  // max |logits| read (with_tensors)
    std::vector<int64_t> hidden_shape;  // [n, rows, H] when recorded
    std::vector<float> hidden;
    // MoE goldens: the positions whose fp32 expert choice is a near-tie that bf16 cannot resolve (reference.json's
    // router_near_ties, tools/record_router_ties.py); empty when not recorded.
    std::vector<int64_t> router_near_ties;
};

inline std::vector<float> read_f32(const std::string& path, size_t count) {
    std::vector<float> v(count);
    std::ifstream in(path, std::ios::binary);
    in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(count * sizeof(float)));
    if (!in) v.clear();
    return v;
}

// Reads reference.json, and with_tensors also logits.bin (and hidden.bin when recorded). A missing or broken
// reference.json fails the calling test and gives an empty Reference.
inline Reference load(const std::string& dir, bool with_tensors = true) {
    Reference r;
    auto text = read_file(dir + "/reference.json");
    EXPECT_TRUE(text.ok()) << text.message();
    if (!text.ok()) return r;
    auto json = Json::parse(*text);
    EXPECT_TRUE(json.ok()) << json.message();
    if (!json.ok()) return r;
    for (const Json& v : json->find("ids")->as_array())
        r.ids.push_back(static_cast<int32_t>(v.as_int()));
    for (const Json& v : json->find("greedy_ids")->as_array())
        r.greedy.push_back(static_cast<int32_t>(v.as_int()));
    for (const Json& v : json->find("greedy_top2_margin")->as_array())
        r.margins.push_back(v.as_double());
    r.prompt_len = json->find("prompt_len")->as_int();
    r.logits_max_abs = json->find("logits_max_abs")->as_double();
    if (const Json* d = json->find("transformers_bf16_max_abs_diff")) r.transformers_bf16_max_abs_diff = d->as_double();
    if (const Json* d = json->find("w8a8_transformers_bf16_max_abs_diff"))
        r.w8a8_transformers_bf16_max_abs_diff = d->as_double();
    if (const Json* ties = json->find("router_near_ties"))
        for (const Json& v : ties->find("positions")->as_array())
            r.router_near_ties.push_back(v.as_int());
    const auto& shape = json->find("logits_shape")->as_array();
    r.rows = shape[0].as_int();
    r.vocab = shape[1].as_int();
    if (!with_tensors) return r;
    r.logits = read_f32(dir + "/logits.bin", static_cast<size_t>(r.rows * r.vocab));
    for (float x : r.logits)
        r.max_abs = std::max(r.max_abs, std::fabs(x));
    const Json* hs = json->find("hidden_shape");
    if (hs != nullptr && hs->is_array()) {
        size_t n = 1;
        for (const Json& v : hs->as_array()) {
            r.hidden_shape.push_back(v.as_int());
            n *= static_cast<size_t>(v.as_int());
        }
        r.hidden = read_f32(dir + "/hidden.bin", n);
    }
    return r;
}

// max |ours - ref| over `rows` rows, ours starting at row 0, the reference at row `ref_row`; NaN gives infinity.
inline float max_diff(const std::vector<float>& ours, const Reference& ref, int64_t ref_row, int64_t rows) {
    float m = 0;
    for (int64_t i = 0; i < rows * ref.vocab; ++i) {
        const float d =
            std::fabs(ours[static_cast<size_t>(i)] - ref.logits[static_cast<size_t>(ref_row * ref.vocab + i)]);
        if (std::isnan(d)) return INFINITY;
        m = std::max(m, d);
    }
    return m;
}

// Row i's max |ours - ref| (ours from row 0, the reference from ref_row), for each of `rows` rows: where an error sits.
inline std::vector<float> row_diffs(const std::vector<float>& ours, const Reference& ref, int64_t ref_row,
                                    int64_t rows) {
    std::vector<float> d;
    for (int64_t i = 0; i < rows; ++i) {
        const std::vector<float> row(ours.begin() + i * ref.vocab, ours.begin() + (i + 1) * ref.vocab);
        d.push_back(max_diff(row, ref, ref_row + i, 1));
    }
    return d;
}

// max |ours - ref| as max_diff, apart over the rows at router near-ties (Reference::router_near_ties) and the rest:
// what a bf16 computation is held to (CudaGoldenTest), since at a near-tie it may take the other expert.
struct Bf16Diff {
    float off_ties = 0, at_ties = 0;
    void add(const Bf16Diff& o) { off_ties = std::max(off_ties, o.off_ties), at_ties = std::max(at_ties, o.at_ties); }
};
inline Bf16Diff bf16_diff(const std::vector<float>& ours, const Reference& ref, int64_t ref_row, int64_t rows) {
    Bf16Diff d;
    const std::vector<float> per_row = row_diffs(ours, ref, ref_row, rows);
    const auto& ties = ref.router_near_ties;
    for (int64_t i = 0; i < rows; ++i) {
        float& into = std::find(ties.begin(), ties.end(), ref_row + i) != ties.end() ? d.at_ties : d.off_ties;
        into = std::max(into, per_row[static_cast<size_t>(i)]);
    }
    return d;
}

}  // namespace pagoda::golden
