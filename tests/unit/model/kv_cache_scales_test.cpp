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

// A safetensors file of F32 scalars (name, value), in this order.
Result<Checkpoint> checkpoint_of(const std::vector<std::pair<std::string, float>>& scalars, const std::string& tag) {
    std::string header = "{", data;
    for (const auto& [name, value] : scalars) {
        if (header.size() > 1) header += ",";
        header += "\"" + name + "\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[" + std::to_string(data.size()) +
                  "," + std::to_string(data.size() + 4) + "]}";
        char bytes[4];
        std::memcpy(bytes, &value, 4);
        data.append(bytes, 4);
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

// Three layers: full, linear, full (a hybrid model's pattern).
ModelSpec hybrid_spec() {
    ModelSpec s;
    s.layers.resize(3);
    s.layers[1].attention = AttentionKind::kLinear;
    return s;
}

TEST(KvCacheScales, ReadsOnePairPerFullAttentionLayer) {
    auto c = checkpoint_of({{"model.layers.0.self_attn.k_scale", 0.5f},
                            {"model.layers.0.self_attn.v_scale", 0.25f},
                            {"model.layers.2.self_attn.k_scale", 2.0f},
                            {"model.layers.2.self_attn.v_scale", 4.0f}},
                           "ok");
    ASSERT_TRUE(c.ok()) << c.message();
    auto s = read_kv_cache_scales(hybrid_spec(), *c);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_EQ(s->size(), 2u);
    EXPECT_EQ((*s)[0].k, 0.5f);
    EXPECT_EQ((*s)[0].v, 0.25f);
    EXPECT_EQ((*s)[1].k, 2.0f);
    EXPECT_EQ((*s)[1].v, 4.0f);
    EXPECT_FALSE((*s)[1].pending);
}

TEST(KvCacheScales, NoneIsEmpty) {
    auto c = checkpoint_of({{"model.norm.weight", 1.0f}}, "none");
    ASSERT_TRUE(c.ok()) << c.message();
    auto s = read_kv_cache_scales(hybrid_spec(), *c);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_TRUE(s->empty());
}

TEST(KvCacheScales, PartialOrBadScalesAreRefusedByName) {
    auto c = checkpoint_of({{"model.layers.0.self_attn.k_scale", 0.5f}, {"model.layers.0.self_attn.v_scale", 0.5f}},
                           "partial");
    ASSERT_TRUE(c.ok()) << c.message();
    auto s = read_kv_cache_scales(hybrid_spec(), *c);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("1 of 2"), std::string::npos) << s.message();

    c = checkpoint_of({{"model.layers.0.self_attn.k_scale", 0.5f}}, "unpaired");
    ASSERT_TRUE(c.ok()) << c.message();
    s = read_kv_cache_scales(hybrid_spec(), *c);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("model.layers.0.self_attn.v_scale"), std::string::npos) << s.message();

    c = checkpoint_of({{"model.layers.0.self_attn.k_scale", -1.0f},
                       {"model.layers.0.self_attn.v_scale", 1.0f},
                       {"model.layers.2.self_attn.k_scale", 1.0f},
                       {"model.layers.2.self_attn.v_scale", 1.0f}},
                      "negative");
    ASSERT_TRUE(c.ok()) << c.message();
    s = read_kv_cache_scales(hybrid_spec(), *c);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("k_scale: a KV cache scale must be positive"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace pagoda::model
