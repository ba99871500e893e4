// How `pagoda serve` loads a model directory into a ServedModel (model_holder.h): at start and for every hot reload
// (POST /v1/models/reload). Kept apart from cmd_serve.cpp, which holds the flag table and calls in here.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "chat/chat_template.h"
#include "cli/args.h"
#include "common/json.h"
#include "executor/create_engine.h"
#include "server/openai/model_holder.h"
#include "server/openai/model_reload.h"
#include "server/openai/service.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::cli {

// What a model directory gives besides the engine: the tokenizer, tokenizer_config.json (null when absent) and the
// chat template (--chat-template FILE|TEXT when given, else the directory's own; none: null, with a warning).
struct ModelTextParts {
    Tokenizer tokenizer;
    Json tokenizer_config;
    std::unique_ptr<chat::ChatTemplate> chat_template;
};
Result<ModelTextParts> load_model_text_parts(const std::string& model_dir,
                                             const std::optional<std::string>& chat_template_flag);

// The engine of `model_dir` started, served with `tokenizer` and `chat_template` (the server's first model reuses
// those it read before listening) for `task` (a pooling task reads the model's PoolingSettings): a ServedModel that
// owns the engine. `summary` gets the KV cache's size and the limits chosen, for the log.
Result<std::shared_ptr<server::openai::ServedModel>> start_served_model(
    const std::string& model_dir, Tokenizer tokenizer, std::shared_ptr<const chat::ChatTemplate> chat_template,
    const executor::EngineOptions& options, server::openai::ModelTask task, std::string* summary = nullptr);
// load_model_text_parts, then start_served_model (a reload).
Result<std::shared_ptr<server::openai::ServedModel>> load_served_model(
    const std::string& model_dir, const std::optional<std::string>& chat_template_flag,
    const executor::EngineOptions& options, server::openai::ModelTask task);

// --reload-strategy.
void add_reload_flags(ArgParser& p);
enum class ReloadStrategy { kAuto, kBeside, kAfterDrain };
Result<ReloadStrategy> reload_strategy_from(const ArgParser& p);

// The loader the reload endpoint uses: checks a directory, loads it with the server's engine options and
// --chat-template, and says whether it fits beside the served model. `unavailable`: why reloading is off (empty: on).
// `test_delay_ms` (the hidden --x-test-reload-delay-ms) stretches each reload's load as a large model's would, so
// that tests can act while it runs.
server::openai::ModelLoader make_model_loader(executor::EngineOptions options, server::openai::ModelTask task,
                                              std::optional<std::string> chat_template_flag, ReloadStrategy strategy,
                                              std::string unavailable, int test_delay_ms = 0);

}  // namespace pagoda::cli
