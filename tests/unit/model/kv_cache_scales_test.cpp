// A checkpoint's fp8 KV cache scales (self_attn.k_scale / v_scale, llm-compressor's names): read per full-attention
// layer, absent in most checkpoints, and refused when partial or malformed. Hand-built safetensors files.
#include "model/kv_cache_scales.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace pagoda::model {
namespace {

namespace fs = std::filesystem;

// A safetensors file of F32 tensors (name, values: one is a scalar of shape [], more a vector), in this order.
Result<Checkpoint> checkpoint_of(const std::vector<std::pair<std::string, std::vector<float>>>& tensors,
                                 const std::string& tag) {
    std::string header = "{", data;
    for (const auto& [name, values] : tensors) {
        if (header.size() > 1) header += ",";
        const std::string shape = values.size() == 1 ? "[]" : "[" + std::to_string(values.size()) + "]";
        header += "\"" + name + "\":{\"dtype\":\"F32\",\"shape\":" + shape + ",\"data_offsets\":[" +
                  std::to_string(data.size()) + "," + std::to_string(data.size() + 4 * values.size()) + "]}";
        data.append(reinterpret_cast<const char*>(values.data()), 4 * values.size());
    }
    header += "}";
    std::string file(8, '\0');
    for (int i = 0; i < 8; ++i)
        file[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    const fs::path path =
        fs::temp_directory_path() / ("pagoda_kv_scales_" + std::to_string(getpid()) + "_" + tag + ".safetensors");
    std::ofstream(path, std::ios::binary) << file << header << data;
    auto c = Checkpoint::open_files({path.string()});
    fs::remove(path);  // mapped: the views stay valid
    return c;
}

// Three layers: full, linear, full (a hybrid model's pattern); 2 KV heads.
ModelSpec hybrid_spec() {
    ModelSpec s;
    s.num_key_value_heads = 2;
    s.layers.resize(3);
    s.layers[1].attention = AttentionKind::kLinear;
    return s;
}

TEST(KvCacheScales, ReadsOnePairPerFullAttentionLayer) {
    auto c = checkpoint_of({{"model.layers.0.self_attn.k_scale", {0.5f}},
                            {"model.layers.0.self_attn.v_scale", {0.25f}},
                            {"model.layers.2.self_attn.k_scale", {2.0f}},
                            {"model.layers.2.self_attn.v_scale", {4.0f}}},
                           "ok");
    ASSERT_TRUE(c.ok()) << c.message();
    auto s = read_kv_cache_scales(hybrid_spec(), *c);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_EQ(s->size(), 2u);
    EXPECT_EQ((*s)[0].k, 0.5f);
    EXPECT_EQ((*s)[0].v, 0.25f);
    EXPECT_EQ((*s)[1].k, 2.0f);
    EXPECT_EQ((*s)[1].v, 4.0f);
    EXPECT_TRUE((*s)[1].k_heads.empty());
}

// llm-compressor's attn_head strategy: one scale per KV head (vLLM: k/v_scale = [num_kv_heads]); the other of a pair
// may stay per tensor.
TEST(KvCacheScales, ReadsPerHeadScales) {
    auto c = checkpoint_of({{"model.layers.0.self_attn.k_scale", {0.5f, 0.25f}},
                            {"model.layers.0.self_attn.v_scale", {2.0f}},
                            {"model.layers.2.self_attn.k_scale", {1.0f, 3.0f}},
                            {"model.layers.2.self_attn.v_scale", {4.0f, 8.0f}}},
                           "heads");
    ASSERT_TRUE(c.ok()) << c.message();
    auto s = read_kv_cache_scales(hybrid_spec(), *c);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_EQ(s->size(), 2u);
    EXPECT_EQ((*s)[0].k, 1.0f);
    EXPECT_EQ((*s)[0].k_heads, (std::vector<float>{0.5f, 0.25f}));
    EXPECT_EQ((*s)[0].v, 2.0f);
    EXPECT_TRUE((*s)[0].v_heads.empty());
    EXPECT_EQ((*s)[1].v_heads, (std::vector<float>{4.0f, 8.0f}));

    c = checkpoint_of({{"model.layers.0.self_attn.k_scale", {0.5f, 0.25f, 1.0f}},
                       {"model.layers.0.self_attn.v_scale", {2.0f}},
                       {"model.layers.2.self_attn.k_scale", {1.0f}},
                       {"model.layers.2.self_attn.v_scale", {1.0f}}},
                      "three");
    ASSERT_TRUE(c.ok()) << c.message();
    s = read_kv_cache_scales(hybrid_spec(), *c);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("one per KV head (2), not [3]"), std::string::npos) << s.message();
}

TEST(KvCacheScales, NoneIsEmpty) {
    auto c = checkpoint_of({{"model.norm.weight", {1.0f}}}, "none");
    ASSERT_TRUE(c.ok()) << c.message();
    auto s = read_kv_cache_scales(hybrid_spec(), *c);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_TRUE(s->empty());
}

TEST(KvCacheScales, PartialOrBadScalesAreRefusedByName) {
    auto c = checkpoint_of({{"model.layers.0.self_attn.k_scale", {0.5f}}, {"model.layers.0.self_attn.v_scale", {0.5f}}},
                           "partial");
    ASSERT_TRUE(c.ok()) << c.message();
    auto s = read_kv_cache_scales(hybrid_spec(), *c);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("1 of 2"), std::string::npos) << s.message();

    c = checkpoint_of({{"model.layers.0.self_attn.k_scale", {0.5f}}}, "unpaired");
    ASSERT_TRUE(c.ok()) << c.message();
    s = read_kv_cache_scales(hybrid_spec(), *c);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("model.layers.0.self_attn.v_scale"), std::string::npos) << s.message();

    c = checkpoint_of({{"model.layers.0.self_attn.k_scale", {-1.0f}},
                       {"model.layers.0.self_attn.v_scale", {1.0f}},
                       {"model.layers.2.self_attn.k_scale", {1.0f}},
                       {"model.layers.2.self_attn.v_scale", {1.0f}}},
                      "negative");
    ASSERT_TRUE(c.ok()) << c.message();
    s = read_kv_cache_scales(hybrid_spec(), *c);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("k_scale: a KV cache scale must be positive"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace pagoda::model
