// The seam of model hot reload: ModelHolder holds the model being served (a ServedModel: its engine's generator,
// tokenizer, chat template, grammar cache, names and directory) and every request that needs the model takes a
// reference to it when it starts (`current()`), kept until its answer is finished. A reload installs a new
// ServedModel; requests already holding the old one finish on it, and the old one is destroyed (its engine shut
// down) by the reloader once nobody holds it. While a switch cannot overlap (the new model does not fit beside the
// old), the holder is paused: requests that need the model are parked and run once a model is installed again, so
// they wait rather than fail.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "common/json.h"
#include "engine/lora_registry.h"
#include "server/openai/generator.h"
#include "server/openai/structured_output.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::server::openai {

// What a pooling model (--task embed|score) takes from its own files.
struct PoolingSettings {
    int32_t hidden_size = 0;  // config.json's, which bounds /v1/embeddings' dimensions; 0: unknown
    // kScore: the tokens whose logits at the end of a query + document make the score, p = softmax([no, yes])[yes]
    // (Qwen3-Reranker's "no" and "yes"; vLLM's classifier_from_token).
    std::vector<int32_t> score_token_ids;
};

struct ServedModel {
    ServedModel(Tokenizer tokenizer_, std::shared_ptr<const chat::ChatTemplate> chat_template_, Generator& generator_)
        : tokenizer(std::move(tokenizer_)), chat_template(std::move(chat_template_)), generator(generator_) {}
    ServedModel(const ServedModel&) = delete;
    ServedModel& operator=(const ServedModel&) = delete;

    std::vector<std::string> served_model_names;  // the first is the default; never empty once installed
    std::string model_dir;                        // "root" of /v1/models, the path label of model_info
    int64_t loaded_at = 0;                        // unix seconds: when it started serving
    Tokenizer tokenizer;
    std::shared_ptr<const chat::ChatTemplate> chat_template;  // may be null
    mutable GrammarCompiler grammars{tokenizer};  // structured output (token masks depend on the vocabulary; own lock)
    Generator& generator;
    std::atomic<int32_t> max_model_len{0};
    // What the generator runs on (the engine): destroyed with this model. Null when the owner lives elsewhere (the
    // test generator, or the placeholder the server starts with while the first model loads).
    std::shared_ptr<void> keep_alive;
    engine::LoraRegistry* lora = nullptr;  // the engine's adapters (--enable-lora), alive as long as keep_alive
    PoolingSettings pooling;
    // Stops the engine (idempotent; the destructor of keep_alive does it too): the server calls it at exit, while
    // the HTTP server its requests answer on still exists.
    std::function<void()> stop;
};

class ModelHolder {
  public:
    // The model a request runs on; never null once the service is constructed.
    std::shared_ptr<const ServedModel> current() const;
    // Installs `model` (its loaded_at is set now) and, with `resume`, runs the requests parked meanwhile; returns the
    // one it replaces. Without `resume` the holder stays paused (a stand-in while the old model drains).
    std::shared_ptr<ServedModel> install(std::shared_ptr<ServedModel> model, bool resume = true);
    // From now until install(): requests that need the model are parked instead of run.
    void pause();
    // Ends a pause without a new model: the parked requests run on the current one.
    void resume();
    bool paused() const;
    // Runs `fn` now, or parks it until the next install() while paused (it then runs on the installing thread:
    // `fn` must only post work to the request's connection).
    void run_when_serving(std::function<void()> fn);
    size_t parked() const;
    // Requests parked since start (a counter: a switch's parked requests are seen after it, however short it was).
    uint64_t parked_total() const;

  private:
    mutable std::mutex mu_;
    std::shared_ptr<ServedModel> current_;
    bool paused_ = false;
    std::vector<std::function<void()>> parked_;
    uint64_t parked_total_ = 0;
};

// Blocks until nobody but `model`'s last owner (the caller) holds it, then destroys it (its engine stops).
// Returns the seconds waited. Runs on the reloader's thread, never on an HTTP I/O thread (requests on the old model
// need those threads to finish).
double retire_when_drained(std::shared_ptr<ServedModel> model);

}  // namespace pagoda::server::openai
