#include "model/demo_model.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <vector>

#include "common/file.h"
#include "common/json.h"
#include "tensor/dtype.h"

namespace pagoda::model {
namespace {

namespace fs = std::filesystem;

// Shape of the demo model (Qwen3.5 text model in miniature).
constexpr int64_t kHidden = 64, kLayers = 4, kHeads = 4, kKvHeads = 2, kHeadDim = 32, kIntermediate = 192;
constexpr int64_t kLinKeyHeads = 2, kLinValueHeads = 4, kLinKeyDim = 32, kLinValueDim = 32, kConvKernel = 4;

struct Tensor {
    std::string dtype;  // "BF16" or "F32"
    std::vector<int64_t> shape;
    std::string bytes;
};

class Rng {
  public:
    explicit Rng(uint64_t seed) : gen_(seed) {}
    double uniform(double lo, double hi) {  // mt19937_64's output is fixed by the standard: same bytes everywhere
        return lo + (hi - lo) * static_cast<double>(gen_() >> 11) * (1.0 / 9007199254740992.0);
    }

  private:
    std::mt19937_64 gen_;
};

int64_t numel(const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t d : shape)
        n *= d;
    return n;
}

Tensor bf16_uniform(Rng& rng, std::vector<int64_t> shape, double lo, double hi) {
    Tensor t{"BF16", std::move(shape), {}};
    const int64_t n = numel(t.shape);
    t.bytes.resize(static_cast<size_t>(n) * 2);
    for (int64_t i = 0; i < n; ++i) {
        uint16_t b = f32_to_bf16(static_cast<float>(rng.uniform(lo, hi)));
        std::memcpy(&t.bytes[static_cast<size_t>(i) * 2], &b, 2);
    }
    return t;
}

// Uniform with the standard deviation of 1/sqrt(fan_in), fan_in = the last dimension.
Tensor bf16_linear(Rng& rng, std::vector<int64_t> shape) {
    const double a = std::sqrt(3.0 / static_cast<double>(shape.back()));
    return bf16_uniform(rng, std::move(shape), -a, a);
}

Tensor f32_uniform(Rng& rng, std::vector<int64_t> shape, double lo, double hi) {
    Tensor t{"F32", std::move(shape), {}};
    const int64_t n = numel(t.shape);
    t.bytes.resize(static_cast<size_t>(n) * 4);
    for (int64_t i = 0; i < n; ++i) {
        float f = static_cast<float>(rng.uniform(lo, hi));
        std::memcpy(&t.bytes[static_cast<size_t>(i) * 4], &f, 4);
    }
    return t;
}

Status write_text(const fs::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) return Status::error("cannot write " + path.string());
    return ok_status();
}

Status write_safetensors(const fs::path& path, const std::map<std::string, Tensor>& tensors) {
    Json header = Json::object();
    size_t offset = 0;
    for (const auto& [name, t] : tensors) {
        Json entry = Json::object();
        entry.set("dtype", t.dtype);
        Json shape = Json::array();
        for (int64_t d : t.shape)
            shape.push_back(d);
        entry.set("shape", std::move(shape));
        Json offsets = Json::array();
        offsets.push_back(static_cast<uint64_t>(offset));
        offsets.push_back(static_cast<uint64_t>(offset + t.bytes.size()));
        entry.set("data_offsets", std::move(offsets));
        header.set(name, std::move(entry));
        offset += t.bytes.size();
    }
    Json meta = Json::object();
    meta.set("format", "pt");
    header.set("__metadata__", std::move(meta));
    std::string h = header.dump();
    while (h.size() % 8 != 0)
        h += ' ';
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    const uint64_t n = h.size();
    char prefix[8];
    for (int i = 0; i < 8; ++i)
        prefix[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    out.write(prefix, 8);
    out.write(h.data(), static_cast<std::streamsize>(h.size()));
    for (const auto& [name, t] : tensors)
        out.write(t.bytes.data(), static_cast<std::streamsize>(t.bytes.size()));
    out.close();
    if (!out) return Status::error("cannot write " + path.string());
    return ok_status();
}

std::map<std::string, Tensor> make_weights(int64_t vocab, uint64_t seed) {
    Rng rng(seed);
    std::map<std::string, Tensor> w;
    const std::string p = "model.language_model.";
    const int64_t H = kHidden, Kd = kLinKeyHeads * kLinKeyDim, Vd = kLinValueHeads * kLinValueDim;
    const int64_t C = 2 * Kd + Vd;
    w[p + "embed_tokens.weight"] = bf16_uniform(rng, {vocab, H}, -0.17, 0.17);
    w[p + "norm.weight"] = bf16_uniform(rng, {H}, -0.1, 0.1);  // zero-centred: x̂·(1+w)
    for (int64_t i = 0; i < kLayers; ++i) {
        const std::string l = p + "layers." + std::to_string(i) + ".";
        w[l + "input_layernorm.weight"] = bf16_uniform(rng, {H}, -0.1, 0.1);
        w[l + "post_attention_layernorm.weight"] = bf16_uniform(rng, {H}, -0.1, 0.1);
        if ((i + 1) % 4 != 0) {
            const std::string a = l + "linear_attn.";
            w[a + "in_proj_qkv.weight"] = bf16_linear(rng, {C, H});
            w[a + "in_proj_z.weight"] = bf16_linear(rng, {Vd, H});
            w[a + "in_proj_b.weight"] = bf16_linear(rng, {kLinValueHeads, H});
            w[a + "in_proj_a.weight"] = bf16_linear(rng, {kLinValueHeads, H});
            w[a + "conv1d.weight"] = bf16_uniform(rng, {C, 1, kConvKernel}, -0.8, 0.8);
            w[a + "A_log"] = f32_uniform(rng, {kLinValueHeads}, -2.0, 0.5);
            w[a + "dt_bias"] = bf16_uniform(rng, {kLinValueHeads}, -1.0, 1.0);
            w[a + "norm.weight"] = bf16_uniform(rng, {kLinValueDim}, 0.9, 1.1);
            w[a + "out_proj.weight"] = bf16_linear(rng, {H, Vd});
        } else {
            const std::string a = l + "self_attn.";
            w[a + "q_proj.weight"] = bf16_linear(rng, {2 * kHeads * kHeadDim, H});
            w[a + "k_proj.weight"] = bf16_linear(rng, {kKvHeads * kHeadDim, H});
            w[a + "v_proj.weight"] = bf16_linear(rng, {kKvHeads * kHeadDim, H});
            w[a + "o_proj.weight"] = bf16_linear(rng, {H, kHeads * kHeadDim});
            w[a + "q_norm.weight"] = bf16_uniform(rng, {kHeadDim}, -0.1, 0.1);
            w[a + "k_norm.weight"] = bf16_uniform(rng, {kHeadDim}, -0.1, 0.1);
        }
        w[l + "mlp.gate_proj.weight"] = bf16_linear(rng, {kIntermediate, H});
        w[l + "mlp.up_proj.weight"] = bf16_linear(rng, {kIntermediate, H});
        w[l + "mlp.down_proj.weight"] = bf16_linear(rng, {H, kIntermediate});
    }
    return w;
}

Json int_list(std::initializer_list<int64_t> v) {
    Json a = Json::array();
    for (int64_t x : v)
        a.push_back(x);
    return a;
}

std::string config_json(int64_t vocab, int64_t bos, int64_t eos_im_end, int64_t eos_text) {
    Json rope = Json::object();
    rope.set("rope_type", "default");
    rope.set("rope_theta", 10000000.0);
    rope.set("partial_rotary_factor", 0.25);
    rope.set("mrope_section", int_list({2, 1, 1}));
    rope.set("mrope_interleaved", true);
    Json layer_types = Json::array();
    for (int64_t i = 0; i < kLayers; ++i)
        layer_types.push_back((i + 1) % 4 ? "linear_attention" : "full_attention");
    Json text = Json::object();
    text.set("model_type", "qwen3_5_text");
    text.set("vocab_size", vocab);
    text.set("hidden_size", kHidden);
    text.set("intermediate_size", kIntermediate);
    text.set("num_hidden_layers", kLayers);
    text.set("num_attention_heads", kHeads);
    text.set("num_key_value_heads", kKvHeads);
    text.set("head_dim", kHeadDim);
    text.set("hidden_act", "silu");
    text.set("max_position_embeddings", static_cast<int64_t>(32768));
    text.set("rms_norm_eps", 1e-6);
    text.set("tie_word_embeddings", true);
    text.set("attention_bias", false);
    text.set("attn_output_gate", true);
    text.set("full_attention_interval", static_cast<int64_t>(4));
    text.set("layer_types", std::move(layer_types));
    text.set("linear_conv_kernel_dim", kConvKernel);
    text.set("linear_key_head_dim", kLinKeyDim);
    text.set("linear_value_head_dim", kLinValueDim);
    text.set("linear_num_key_heads", kLinKeyHeads);
    text.set("linear_num_value_heads", kLinValueHeads);
    text.set("mamba_ssm_dtype", "float32");
    text.set("mtp_num_hidden_layers", static_cast<int64_t>(0));
    text.set("rope_parameters", std::move(rope));
    text.set("bos_token_id", bos);
    text.set("eos_token_id", eos_text);
    Json config = Json::object();
    Json arch = Json::array();
    arch.push_back("Qwen3_5ForConditionalGeneration");
    config.set("architectures", std::move(arch));
    config.set("model_type", "qwen3_5");
    config.set("dtype", "bfloat16");
    config.set("tie_word_embeddings", true);
    config.set("eos_token_id", eos_im_end);
    config.set("text_config", std::move(text));
    // A minimal vision tower description (its weights are absent; pagoda serves text only), so that other tools
    // that read this directory do not build a full-size default one.
    Json vision = Json::object();
    vision.set("model_type", "qwen3_5_vision");
    vision.set("depth", static_cast<int64_t>(1));
    vision.set("hidden_size", static_cast<int64_t>(32));
    vision.set("intermediate_size", static_cast<int64_t>(64));
    vision.set("num_heads", static_cast<int64_t>(2));
    vision.set("out_hidden_size", kHidden);
    vision.set("num_position_embeddings", static_cast<int64_t>(64));
    config.set("vision_config", std::move(vision));
    config.set("pagoda_demo_model", "random weights: the words it produces are random");
    return config.dump_pretty(2) + "\n";
}

// GPT-2's byte-to-unicode map: printable bytes stand for themselves, the rest are shifted above U+0100.
std::vector<std::string> byte_level_alphabet() {
    std::vector<int> cps(256, -1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
        const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        cps[b] = printable ? b : next++;
    }
    std::vector<std::string> out(256);
    for (int b = 0; b < 256; ++b) {
        const int cp = cps[b];
        std::string s;
        if (cp < 0x80) {
            s += static_cast<char>(cp);
        } else {
            s += static_cast<char>(0xC0 | (cp >> 6));
            s += static_cast<char>(0x80 | (cp & 0x3F));
        }
        out[b] = s;
    }
    return out;
}

constexpr const char* kQwenPretokenizeRegex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";

constexpr const char* kChatMlTemplate =
    "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}\n";

Json added_token(int64_t id, const std::string& content, bool special) {
    Json t = Json::object();
    t.set("id", id);
    t.set("content", content);
    t.set("single_word", false);
    t.set("lstrip", false);
    t.set("rstrip", false);
    t.set("normalized", false);
    t.set("special", special);
    return t;
}

// tokenizer.json in the layout of Qwen's own (byte-level BPE, Qwen's pre-tokenizer regex, NFC). It is what
// transformers reads: from version 5 AutoTokenizer picks the class from config.json's model_type (Qwen3_5Tokenizer),
// which is built from tokenizer.json only; a directory without one loads as a tokenizer of the added tokens alone
// whose encode() is empty, and HF-tokenizer clients (guidellm, vllm bench) hang on it.
Status write_tokenizer_json(const fs::path& path, Json vocab, Json merges, Json added_tokens) {
    Json model = Json::object();
    model.set("type", "BPE");
    model.set("dropout", nullptr);
    model.set("unk_token", nullptr);
    model.set("continuing_subword_prefix", "");
    model.set("end_of_word_suffix", "");
    model.set("fuse_unk", false);
    model.set("byte_fallback", false);
    model.set("ignore_merges", false);
    model.set("vocab", std::move(vocab));
    model.set("merges", std::move(merges));
    Json split = Json::object();
    split.set("type", "Split");
    Json pattern = Json::object();
    pattern.set("Regex", kQwenPretokenizeRegex);
    split.set("pattern", std::move(pattern));
    split.set("behavior", "Isolated");
    split.set("invert", false);
    Json byte_level = Json::object();
    byte_level.set("type", "ByteLevel");
    byte_level.set("add_prefix_space", false);
    byte_level.set("trim_offsets", false);
    byte_level.set("use_regex", false);
    Json pre = Json::object();
    pre.set("type", "Sequence");
    Json list = Json::array();
    list.push_back(std::move(split));
    list.push_back(byte_level);
    pre.set("pretokenizers", std::move(list));
    Json normalizer = Json::object();
    normalizer.set("type", "NFC");
    Json tok = Json::object();
    tok.set("version", "1.0");
    tok.set("truncation", nullptr);
    tok.set("padding", nullptr);
    tok.set("added_tokens", std::move(added_tokens));
    tok.set("normalizer", std::move(normalizer));
    tok.set("pre_tokenizer", std::move(pre));
    tok.set("post_processor", byte_level);
    tok.set("decoder", std::move(byte_level));
    tok.set("model", std::move(model));
    return write_text(path, tok.dump() + "\n");
}

// Byte-level tokenizer: ids 0..255 are the bytes, then <|endoftext|>, <|im_start|>, <|im_end|>.
Status write_byte_level_tokenizer(const fs::path& dir) {
    const std::vector<std::string> alphabet = byte_level_alphabet();
    Json vocab = Json::object();
    for (int b = 0; b < 256; ++b)
        vocab.set(alphabet[b], static_cast<int64_t>(b));
    Json added = Json::array();
    const char* specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
    for (int i = 0; i < 3; ++i)
        added.push_back(added_token(256 + i, specials[i], true));
    PAGODA_RETURN_IF_ERROR(write_tokenizer_json(dir / "tokenizer.json", std::move(vocab), Json::array(), added));
    Json config = Json::object();
    config.set("tokenizer_class", "Qwen2Tokenizer");
    config.set("eos_token", "<|im_end|>");
    config.set("pad_token", "<|endoftext|>");
    config.set("chat_template", kChatMlTemplate);
    PAGODA_RETURN_IF_ERROR(write_text(dir / "tokenizer_config.json", config.dump_pretty(2) + "\n"));
    return write_text(dir / "chat_template.jinja", kChatMlTemplate);
}

// A Qwen tokenizer directory that has vocab.json and merges.txt but no tokenizer.json (the shared copies keep
// tokenizer.json compressed): the same tokenizer as tokenizer.json, written from those files and the added tokens
// of tokenizer_config.json (vocab.json and merges.txt are what transformers writes from tokenizer.json, so nothing
// is lost).
Status tokenizer_json_from_vocab(const fs::path& src, const fs::path& out) {
    auto vocab_text = read_file((src / "vocab.json").string());
    if (!vocab_text.ok()) return vocab_text.status();
    auto vocab = Json::parse(*vocab_text);
    if (!vocab.ok() || !vocab->is_object()) return Status::error((src / "vocab.json").string() + ": not a JSON object");
    auto merges_text = read_file((src / "merges.txt").string());
    if (!merges_text.ok()) return merges_text.status();
    Json merges = Json::array();
    std::string_view rest = *merges_text;
    while (!rest.empty()) {
        const size_t eol = rest.find('\n');
        std::string_view line = rest.substr(0, eol);
        rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 1);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        const size_t space = line.find(' ');
        if (line.empty() || line.front() == '#' || space == std::string_view::npos) continue;  // "#version: 0.2"
        Json pair = Json::array();
        pair.push_back(Json(line.substr(0, space)));
        pair.push_back(Json(line.substr(space + 1)));
        merges.push_back(std::move(pair));
    }
    Json added = Json::array();
    if (auto config_text = read_file((src / "tokenizer_config.json").string()); config_text.ok()) {
        auto config = Json::parse(*config_text);
        const Json* decoder = config.ok() ? config->find("added_tokens_decoder") : nullptr;
        if (decoder && decoder->is_object()) {
            for (const auto& [id, token] : decoder->as_object()) {
                const Json* content = token.is_object() ? token.find("content") : nullptr;
                if (!content || !content->is_string()) continue;
                const Json* special = token.find("special");
                Json t = added_token(std::strtoll(id.c_str(), nullptr, 10), content->as_string(),
                                     special && special->is_bool() && special->as_bool());
                for (const char* flag : {"single_word", "lstrip", "rstrip", "normalized"})
                    if (const Json* v = token.find(flag); v && v->is_bool()) t.set(flag, *v);
                added.push_back(std::move(t));
            }
        }
    }
    return write_tokenizer_json(out, std::move(vocab).value(), std::move(merges), std::move(added));
}

// Copies a Qwen tokenizer (writing tokenizer.json when the source has none) and its chat template.
Status copy_qwen_tokenizer(const fs::path& src, const fs::path& dir) {
    std::error_code ec;
    for (const char* name : {"vocab.json", "merges.txt", "tokenizer_config.json", "tokenizer.json"}) {
        if (!fs::exists(src / name)) continue;
        fs::copy_file(src / name, dir / name, fs::copy_options::overwrite_existing, ec);
        if (ec) return Status::error("copying " + (src / name).string() + ": " + ec.message());
        fs::permissions(dir / name,
                        fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read,
                        ec);
    }
    if (!fs::exists(src / "tokenizer.json"))
        PAGODA_RETURN_IF_ERROR(tokenizer_json_from_vocab(src, dir / "tokenizer.json"));
    auto text = read_file((src / "tokenizer_config.json").string());
    if (text.ok()) {
        auto json = Json::parse(*text);
        if (json.ok()) {
            const Json* tpl = json->find("chat_template");
            if (tpl != nullptr && tpl->is_string()) {
                PAGODA_RETURN_IF_ERROR(write_text(dir / "chat_template.jinja", tpl->as_string()));
            }
        }
    }
    return ok_status();
}

constexpr const char* kReadme =
    "# pagoda demo model\n\n"
    "This directory was written by `pagoda demo-model`. It is a tiny model of the Qwen3.5 architecture\n"
    "(3 Gated DeltaNet layers and 1 gated-attention layer, hidden size 64) with **random weights**:\n"
    "the words it produces are random. It exists so that pagoda can be tried without downloading a model.\n\n"
    "To use a real model instead, point pagoda at a Hugging Face model directory (config.json,\n"
    "*.safetensors and the tokenizer files), for example:\n\n"
    "    pagoda generate --model /path/to/Qwen3-0.6B --prompt \"Hello\" -n 32\n";

}  // namespace

std::string default_demo_tokenizer_dir() {
    const char* shared = std::getenv("PAGODA_SHARED_DIR");
    const fs::path dir =
        fs::path(shared != nullptr && *shared ? shared : "/work/shared") / "qwen-tokenizers" / "qwen3-4b";
    std::error_code ec;
    if (fs::exists(dir / "vocab.json", ec) && fs::exists(dir / "merges.txt", ec)) return dir.string();
    return "";
}

Status write_demo_model(const std::string& dir_name, const DemoModelOptions& options) {
    const fs::path dir(dir_name);
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return Status::error("cannot create " + dir.string() + ": " + ec.message());

    int64_t vocab = 0, bos = 0, eos_im_end = 0, eos_text = 0;
    if (options.tokenizer_dir.empty()) {
        PAGODA_RETURN_IF_ERROR(write_byte_level_tokenizer(dir));
        vocab = 264;  // 259 ids, padded to a multiple of 8
        eos_text = bos = 256;
        eos_im_end = 258;
    } else {
        PAGODA_RETURN_IF_ERROR(copy_qwen_tokenizer(options.tokenizer_dir, dir));
        // Qwen2.5/Qwen3 vocabulary: 151,669 ids used, 151,936 embedding rows; <|endoftext|> 151643, <|im_end|> 151645.
        vocab = 151936;
        eos_text = bos = 151643;
        eos_im_end = 151645;
    }
    PAGODA_RETURN_IF_ERROR(write_text(dir / "config.json", config_json(vocab, bos, eos_im_end, eos_text)));
    Json gen = Json::object();
    gen.set("bos_token_id", bos);
    gen.set("eos_token_id", int_list({eos_im_end, eos_text}));
    gen.set("do_sample", true);
    gen.set("temperature", 0.8);
    gen.set("top_p", 0.95);
    PAGODA_RETURN_IF_ERROR(write_text(dir / "generation_config.json", gen.dump_pretty(2) + "\n"));
    PAGODA_RETURN_IF_ERROR(write_safetensors(dir / "model.safetensors", make_weights(vocab, options.seed)));
    return write_text(dir / "README.md", kReadme);
}

}  // namespace pagoda::model
