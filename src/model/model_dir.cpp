// Model directory discovery and the weight summary that `pagoda inspect` reports.
#include "model/model_dir.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "common/file.h"
#include "common/json.h"

namespace pagoda::model {
namespace {

namespace fs = std::filesystem;

std::optional<std::string> optional_file(const fs::path& dir, const char* name) {
    std::error_code ec;
    const fs::path p = dir / name;
    if (fs::is_regular_file(p, ec)) return p.string();
    return std::nullopt;
}

bool starts_with(std::string_view s, std::string_view prefix) {
    return s.substr(0, prefix.size()) == prefix;
}

// The id of tokenizer_config.json's eos_token (a string, or an added-token object with "content") among its
// added_tokens_decoder; none when the file does not say. A malformed file is the tokenizer loader's to report.
std::optional<int64_t> tokenizer_eos_id(const std::string& path) {
    auto text = read_file(path);
    if (!text.ok()) return std::nullopt;
    auto config = Json::parse(*text);
    if (!config.ok() || !config->is_object()) return std::nullopt;
    const Json* eos = config->find("eos_token");
    if (eos && eos->is_object()) eos = eos->find("content");
    const Json* added = config->find("added_tokens_decoder");
    if (!eos || !eos->is_string() || !added || !added->is_object()) return std::nullopt;
    for (const auto& [id, token] : added->as_object()) {
        const Json* content = token.is_object() ? token.find("content") : nullptr;
        if (!content || !content->is_string() || content->as_string() != eos->as_string()) continue;
        char* end = nullptr;
        const long long value = std::strtoll(id.c_str(), &end, 10);
        if (end != id.c_str() && *end == '\0' && value >= 0) return value;
    }
    return std::nullopt;
}

}  // namespace

Result<ModelFiles> locate_model_files(const std::string& dir) {
    std::error_code ec;
    const fs::path root(dir);
    if (!fs::exists(root, ec)) return Status::error(dir + ": no such model directory");
    if (!fs::is_directory(root, ec)) return Status::error(dir + ": not a directory (expected a model directory)");
    ModelFiles f;
    f.dir = dir;
    auto config = optional_file(root, "config.json");
    if (!config) return Status::error(dir + ": missing config.json (not a Hugging Face model directory?)");
    f.config = *config;
    f.generation_config = optional_file(root, "generation_config.json");
    f.tokenizer_json = optional_file(root, "tokenizer.json");
    f.vocab_json = optional_file(root, "vocab.json");
    f.merges_txt = optional_file(root, "merges.txt");
    f.tokenizer_config = optional_file(root, "tokenizer_config.json");
    f.chat_template = optional_file(root, "chat_template.jinja");
    f.safetensors_index = optional_file(root, "model.safetensors.index.json");

    if (!f.safetensors_index) {
        if (auto single = optional_file(root, "model.safetensors")) {
            f.safetensors.push_back(*single);
        } else {
            for (const auto& entry : fs::directory_iterator(root, ec))
                if (entry.is_regular_file(ec) && entry.path().extension() == ".safetensors")
                    f.safetensors.push_back(entry.path().string());
            std::sort(f.safetensors.begin(), f.safetensors.end());
        }
    }
    // With an index, the shard list comes from its weight_map (read when the checkpoint opens).
    return f;
}

Status require_weights(const ModelFiles& files) {
    if (files.safetensors_index || !files.safetensors.empty()) return ok_status();
    return Status::error(files.dir +
                         ": no safetensors weights (expected model.safetensors or "
                         "model.safetensors.index.json)");
}

Status require_tokenizer(const ModelFiles& files) {
    if (files.has_tokenizer()) return ok_status();
    return Status::error(files.dir + ": missing tokenizer.json (or vocab.json + merges.txt)");
}

WeightSummary summarize_weights(const ModelSpec& spec, const Checkpoint& checkpoint) {
    WeightSummary w;
    const std::string& prefix = spec.weight_prefix;
    const std::string embed = prefix + "embed_tokens.";
    for (const TensorView* t : checkpoint.tensors()) {
        const int64_t n = t->numel();
        w.params.total += n;
        w.weight_bytes += t->nbytes;
        w.num_tensors += 1;
        w.params_by_dtype[std::string(storage_dtype_name(t->dtype))] += n;
        const std::string& name = t->name;
        if (starts_with(name, embed) || starts_with(name, "lm_head.")) {
            w.params.embedding += n;
        } else if (starts_with(name, "mtp.") || starts_with(name, "model.mtp.")) {
            w.params.other += n, w.params.mtp += n;
        } else if (starts_with(name, "model.visual.") || starts_with(name, "visual.")) {
            w.params.other += n, w.params.vision += n;
        } else if (starts_with(name, prefix)) {
            w.params.text_model += n;
        } else {
            w.params.other += n;
        }
    }
    return w;
}

Result<ModelDir> ModelDir::open(const std::string& dir, bool open_weights) {
    ModelDir m;
    PAGODA_ASSIGN_OR_RETURN(m.files, locate_model_files(dir));
    PAGODA_ASSIGN_OR_RETURN(m.spec, load_model_spec(m.files.config));
    if (m.files.generation_config) {
        PAGODA_ASSIGN_OR_RETURN(m.generation, load_generation_defaults(*m.files.generation_config));
    }
    if (m.files.tokenizer_config) m.tokenizer_eos_token_id = tokenizer_eos_id(*m.files.tokenizer_config);
    if (open_weights) {
        PAGODA_RETURN_IF_ERROR(require_weights(m.files));
        PAGODA_ASSIGN_OR_RETURN(Checkpoint c, Checkpoint::open_dir(dir));
        // transformers 5 saves a Qwen3.5 language model on its own (Qwen3_5ForCausalLM, Qwen3_5MoeForCausalLM:
        // config.json its text config, model_type qwen3_5_text) under the multimodal checkpoint's tensor names, which
        // it maps both ways: the tensors say where the layers are.
        const bool qwen3_5_text =
            m.spec.text_model_type == "qwen3_5_text" || m.spec.text_model_type == "qwen3_5_moe_text";
        if (qwen3_5_text && m.spec.weight_prefix == "model." && !c.find("model.embed_tokens.weight") &&
            c.find("model.language_model.embed_tokens.weight"))
            m.spec.weight_prefix = "model.language_model.";
        m.checkpoint = std::move(c);
    }
    return m;
}

}  // namespace pagoda::model
