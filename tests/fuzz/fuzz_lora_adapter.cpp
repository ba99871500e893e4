// libFuzzer target: a PEFT LoRA adapter as the server reads one (model/lora_adapter.h: adapter_config.json, then the
// lora_A / lora_B tensors of adapter_model.safetensors checked against the model's projections), from arbitrary
// bytes. It must return an error or an adapter whose every matrix fits its projection (A [r, K], B [rows, r], r the
// config's, at most --max-lora-rank); never crash, hang or read out of bounds.
//
// Input: u16 length L, then L bytes of adapter_config.json, then u16 D, then the safetensors header text; the file is
// written with a correct length prefix and D zero bytes of tensor data, so the fuzzer reaches the shape checks.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

#include "model/lora_adapter.h"

namespace {

constexpr int64_t kMaxRank = 16;

// q_proj and v_proj of one layer, and a packed projection whose B rows go to two weights (Qwen3-Next's in_proj_ba).
const pagoda::model::LoraTargets& targets() {
    static const pagoda::model::LoraTargets t = {
        {"model.layers.0.self_attn.q_proj", {64, 32, {{"model.layers.0.self_attn.q_proj.weight", {}}}}},
        {"model.layers.0.self_attn.v_proj", {16, 32, {{"model.layers.0.self_attn.v_proj.weight", {}}}}},
        {"model.layers.0.linear_attn.in_proj_ba",
         {8,
          32,
          {{"model.layers.0.linear_attn.in_proj_b.weight", {0, 2, 4, 6}},
           {"model.layers.0.linear_attn.in_proj_a.weight", {1, 3, 5, 7}}}}},
    };
    return t;
}

const std::string& dir() {
    static const std::string d = [] {
        std::string t = "/tmp/pagoda_fuzz_lora_XXXXXX";
        if (mkdtemp(t.data()) == nullptr) std::abort();
        return t;
    }();
    return d;
}

bool take_u16(std::string_view& in, size_t& v) {
    if (in.size() < 2) return false;
    v = static_cast<unsigned char>(in[0]) | static_cast<size_t>(static_cast<unsigned char>(in[1])) << 8;
    in.remove_prefix(2);
    return true;
}

void write(const std::string& path, std::string_view bytes) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view in(reinterpret_cast<const char*>(data), size);
    size_t config_bytes = 0, data_bytes = 0;
    if (!take_u16(in, config_bytes) || config_bytes > in.size()) return 0;
    const std::string_view config = in.substr(0, config_bytes);
    in.remove_prefix(config_bytes);
    if (!take_u16(in, data_bytes)) return 0;
    std::string file(8, '\0');
    for (int i = 0; i < 8; ++i)
        file[static_cast<size_t>(i)] = static_cast<char>((static_cast<uint64_t>(in.size()) >> (8 * i)) & 0xff);
    file.append(in);
    file.append(data_bytes, '\0');
    write(dir() + "/adapter_config.json", config);
    write(dir() + "/adapter_model.safetensors", file);

    auto adapter = pagoda::model::read_lora_adapter(dir(), targets(), "model.", kMaxRank);
    if (!adapter.ok()) return 0;
    const int64_t r = (*adapter)->rank;
    if (r <= 0 || r > kMaxRank) std::abort();
    for (const pagoda::model::LoraModule& m : (*adapter)->modules) {
        if (m.a.rank() != 2 || m.b.rank() != 2 || m.a.dim(0) != r || m.b.dim(1) != r || m.a.dim(1) != 32) std::abort();
        if (m.a.dtype() != pagoda::DType::F32 || m.b.dtype() != pagoda::DType::F32) std::abort();
        const int64_t rows = m.weight.find("q_proj") != std::string::npos   ? 64
                             : m.weight.find("v_proj") != std::string::npos ? 16
                                                                            : 4;
        if (m.b.dim(0) != rows) std::abort();
    }
    return 0;
}
