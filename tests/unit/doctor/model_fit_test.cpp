// The fit arithmetic against hand-computed numbers: budget = 90% of GPU memory minus the reserve,
// sequences = (budget - weights/TP) / (KV per token per GPU × length + state per GPU).
#include <gtest/gtest.h>

#include "tools/doctor/model_fit.h"

namespace pagoda::doctor {
namespace {

// Qwen3-8B: 36 layers × K,V × 8 KV heads × head_dim 128 × 2 bytes per token; 32 attention heads.
ModelFootprint qwen3_8b() {
    ModelFootprint m;
    m.name = "Qwen3-8B";
    m.weight_bytes = 16'381'000'000;
    m.kv_bytes_per_token = 36 * 2 * 8 * 128 * 2;
    m.num_attention_heads = 32;
    m.num_kv_heads = 8;
    m.max_context_length = 40960;
    return m;
}

constexpr uint64_t kGiB = 1ull << 30;

uint64_t budget(uint64_t gpu_bytes) {
    return uint64_t(double(gpu_bytes) * kGpuMemoryUtilization) - kActivationReserveBytes;
}

TEST(DoctorModelFit, Qwen3_8bOnOneH100) {
    const ModelFootprint m = qwen3_8b();
    FitRequest req;
    req.gpu_memory_bytes = 80 * kGiB;
    req.gpu_count = 1;
    const FitResult fit = compute_fit(m, req);
    EXPECT_EQ(fit.max_model_len, 40960);
    ASSERT_EQ(fit.by_tp.size(), 4u);
    const int64_t expect_tp1 = int64_t((budget(80 * kGiB) - m.weight_bytes) / (m.kv_bytes_per_token * 40960));
    EXPECT_EQ(fit.by_tp[0].max_sequences, expect_tp1);
    // TP2 halves weights and KV per GPU.
    const int64_t expect_tp2 = int64_t((budget(80 * kGiB) - m.weight_bytes / 2) / (m.kv_bytes_per_token / 2 * 40960));
    EXPECT_EQ(fit.by_tp[1].max_sequences, expect_tp2);
    EXPECT_EQ(fit.min_tp, 1);
    Report r;
    add_fit_rows(m, req, fit, r);
    ASSERT_NE(r.find("model.fit"), nullptr);
    EXPECT_EQ(r.find("model.fit")->level, Level::kPass);
}

TEST(DoctorModelFit, ShorterContextFitsMoreSequences) {
    FitRequest req;
    req.gpu_memory_bytes = 80 * kGiB;
    req.gpu_count = 1;
    req.max_model_len = 4096;
    const FitResult fit = compute_fit(qwen3_8b(), req);
    EXPECT_EQ(fit.by_tp[0].max_sequences,
              int64_t((budget(80 * kGiB) - qwen3_8b().weight_bytes) / (qwen3_8b().kv_bytes_per_token * 4096)));
}

TEST(DoctorModelFit, BigModelNeedsMoreGpusThanTheMachineHas) {
    ModelFootprint m = qwen3_8b();
    m.weight_bytes = 470'000'000'000;  // a 235B bf16 checkpoint
    m.num_attention_heads = 64;
    m.num_kv_heads = 4;
    FitRequest req;
    req.gpu_memory_bytes = 80 * kGiB;
    req.gpu_count = 1;
    req.max_model_len = 4096;
    const FitResult fit = compute_fit(m, req);
    ASSERT_TRUE(fit.min_tp.has_value());
    EXPECT_EQ(*fit.min_tp, 8);
    // Only 4 KV heads: at TP8 each rank keeps a whole head, so KV per GPU is a quarter, not an eighth.
    EXPECT_EQ(fit.by_tp[3].kv_per_token_per_gpu, m.kv_bytes_per_token / 4);
    Report r;
    add_fit_rows(m, req, fit, r);
    EXPECT_EQ(r.find("model.fit")->level, Level::kFail);
    EXPECT_NE(r.find("model.fit")->value.find("needs TP8"), std::string::npos);
}

TEST(DoctorModelFit, TooBigEvenAtTp8) {
    ModelFootprint m = qwen3_8b();
    m.weight_bytes = 2'000'000'000'000;
    FitRequest req;
    req.gpu_memory_bytes = 80 * kGiB;
    req.gpu_count = 8;
    const FitResult fit = compute_fit(m, req);
    EXPECT_FALSE(fit.min_tp.has_value());
    Report r;
    add_fit_rows(m, req, fit, r);
    EXPECT_EQ(r.find("model.fit")->level, Level::kFail);
}

TEST(DoctorModelFit, TensorParallelSizesMustDivideTheHeads) {
    ModelFootprint m = qwen3_8b();
    m.num_attention_heads = 28;  // Qwen2.5-7B
    FitRequest req;
    req.gpu_memory_bytes = 80 * kGiB;
    req.gpu_count = 1;
    const FitResult fit = compute_fit(m, req);
    ASSERT_EQ(fit.by_tp.size(), 3u);
    EXPECT_EQ(fit.by_tp.back().tp, 4);
}

TEST(DoctorModelFit, LinearAttentionStateCountsPerSequence) {
    ModelFootprint m = qwen3_8b();
    m.state_bytes_per_sequence = 100ull << 20;
    FitRequest req;
    req.gpu_memory_bytes = 80 * kGiB;
    req.gpu_count = 1;
    req.max_model_len = 1024;
    const FitResult fit = compute_fit(m, req);
    EXPECT_EQ(fit.by_tp[0].max_sequences, int64_t((budget(80 * kGiB) - m.weight_bytes) /
                                                  (m.kv_bytes_per_token * 1024 + m.state_bytes_per_sequence)));
}

TEST(DoctorModelFit, MaxNumSeqsThatDoesNotFitWarns) {
    FitRequest req;
    req.gpu_memory_bytes = 80 * kGiB;
    req.gpu_count = 1;
    req.max_num_seqs = 256;
    const FitResult fit = compute_fit(qwen3_8b(), req);
    Report r;
    add_fit_rows(qwen3_8b(), req, fit, r);
    EXPECT_EQ(r.find("model.fit")->level, Level::kPass);
    EXPECT_EQ(r.find("model.max_num_seqs")->level, Level::kWarn);
    req.max_num_seqs = 2;
    Report ok;
    add_fit_rows(qwen3_8b(), req, compute_fit(qwen3_8b(), req), ok);
    EXPECT_EQ(ok.find("model.max_num_seqs")->level, Level::kPass);
}

TEST(DoctorModelFit, ContextOverTheModelLimitWarns) {
    FitRequest req;
    req.gpu_memory_bytes = 80 * kGiB;
    req.gpu_count = 1;
    req.max_model_len = qwen3_8b().max_context_length + 1;
    Report r;
    add_fit_rows(qwen3_8b(), req, compute_fit(qwen3_8b(), req), r);
    ASSERT_NE(r.find("model.max_model_len"), nullptr);
    EXPECT_EQ(r.find("model.max_model_len")->level, Level::kWarn);
    req.max_model_len = qwen3_8b().max_context_length;
    Report ok;
    add_fit_rows(qwen3_8b(), req, compute_fit(qwen3_8b(), req), ok);
    EXPECT_EQ(ok.find("model.max_model_len"), nullptr);
}

TEST(DoctorModelFit, NoGpuIsInfo) {
    FitRequest req;
    Report r;
    add_fit_rows(qwen3_8b(), req, compute_fit(qwen3_8b(), req), r);
    EXPECT_EQ(r.find("model.fit")->level, Level::kInfo);
    EXPECT_EQ(r.find("model.weights")->level, Level::kInfo);
}

}  // namespace
}  // namespace pagoda::doctor
