// The demo model: a small, deterministic, random-weight model of the Qwen3.5 architecture (3 Gated DeltaNet layers,
// 1 gated-attention layer, tied embeddings) written as a Hugging Face model directory, so that `pagoda` can be tried
// without downloading anything. Its output words are random.
#pragma once

#include <string>

#include "common/status.h"

namespace pagoda::model {

struct DemoModelOptions {
    // A directory with a Qwen tokenizer (vocab.json + merges.txt [+ tokenizer_config.json], or tokenizer.json).
    // Empty: a byte-level tokenizer (256 byte tokens + ChatML specials) is written instead.
    std::string tokenizer_dir;
    uint64_t seed = 20251202;
};

// Writes config.json, generation_config.json, model.safetensors, the tokenizer files, chat_template.jinja and a
// README.md into `dir` (created when absent). The same options always give the same bytes.
Status write_demo_model(const std::string& dir, const DemoModelOptions& options);

// The tokenizer directory write_demo_model uses by default: $PAGODA_SHARED_DIR/qwen-tokenizers/qwen3-4b when it
// holds vocab.json and merges.txt, else empty (byte-level).
std::string default_demo_tokenizer_dir();

}  // namespace pagoda::model
