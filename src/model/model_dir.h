// ModelDir: the files of a Hugging Face model directory, located once with clear errors, and the
// facts derived from them (parameter counts, weight bytes, cache sizes) that `pagoda inspect` shows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/model_spec.h"
#include "model/safetensors.h"

namespace pagoda::model {

struct ModelFiles {
    std::string dir;
    std::string config;                            // config.json (required)
    std::optional<std::string> generation_config;  // generation_config.json
    std::optional<std::string> tokenizer_json;     // tokenizer.json
    std::optional<std::string> vocab_json;         // vocab.json  (with merges.txt: the slow-tokenizer form)
    std::optional<std::string> merges_txt;         // merges.txt
    std::optional<std::string> tokenizer_config;   // tokenizer_config.json
    std::optional<std::string> chat_template;      // chat_template.jinja
    std::optional<std::string> safetensors_index;  // model.safetensors.index.json
    std::vector<std::string> safetensors;          // weight files (the shards, or the single file)

    bool has_tokenizer() const { return tokenizer_json.has_value() || (vocab_json && merges_txt); }
};

// Finds the files in `dir`. Errors: `dir` missing or not a directory, config.json missing.
// Weights and tokenizer files are optional here; use require_weights()/require_tokenizer().
Result<ModelFiles> locate_model_files(const std::string& dir);
Status require_weights(const ModelFiles& files);    // error naming the directory when none
Status require_tokenizer(const ModelFiles& files);  // needs tokenizer.json or vocab.json + merges.txt

// Parameters by where they belong.
struct ParameterCounts {
    int64_t total = 0;
    int64_t embedding = 0;   // embed_tokens (+ lm_head when untied)
    int64_t text_model = 0;  // the language model's layers and final norm (embeddings excluded)
    int64_t other = 0;       // vision tower, MTP head, anything else
    int64_t mtp = 0;         // the part of `other` under mtp.*
    int64_t vision = 0;      // the part of `other` under model.visual.* / visual.*
};

struct WeightSummary {
    ParameterCounts params;
    size_t weight_bytes = 0;
    size_t num_tensors = 0;
    std::map<std::string, int64_t> params_by_dtype;  // "BF16" → element count
};

// Classifies the checkpoint's tensors with the spec's weight prefix.
WeightSummary summarize_weights(const ModelSpec& spec, const Checkpoint& checkpoint);

// A model directory: files, spec, generation defaults and (when present) the checkpoint.
struct ModelDir {
    ModelFiles files;
    ModelSpec spec;
    GenerationDefaults generation;  // all unset when generation_config.json is absent
    // tokenizer_config.json's eos_token, as an id of its added_tokens_decoder: vLLM stops at the tokenizer's EOS
    // whatever config.json and generation_config.json list (a chat fine-tune may set <|im_end|> only there).
    std::optional<int64_t> tokenizer_eos_token_id;
    std::optional<Checkpoint> checkpoint;

    // Locates the files and parses config.json and generation_config.json. When `open_weights`,
    // the weights must be present and are mapped (headers validated).
    static Result<ModelDir> open(const std::string& dir, bool open_weights);
};

}  // namespace pagoda::model
