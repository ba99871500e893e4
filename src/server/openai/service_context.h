// What the endpoint handlers of OpenAiService share (internal to server/openai): the configuration, the served model
// (model_holder.h: generator, tokenizer, chat template; a request takes it as Exchange::model) and metrics, and one
// handler function per endpoint, each in its family's file.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "chat/chat_template.h"
#include "engine/lora_registry.h"
#include "server/metrics/metrics.h"
#include "server/openai/generator.h"
#include "server/openai/model_holder.h"
#include "server/openai/model_reload.h"
#include "server/openai/response_store.h"
#include "server/openai/router.h"
#include "server/openai/service.h"
#include "server/openai/structured_output.h"
#include "server/ops/engine_liveness.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::server::openai {

class OutputSink;  // completion_job.h

struct ServiceContext {
    ServiceContext(ServiceConfig config_, Tokenizer tokenizer_, std::unique_ptr<chat::ChatTemplate> chat_template_,
                   Generator& generator_);
    ~ServiceContext();  // waits for a reload in progress

    ServiceConfig config;
    ModelHolder models;  // the served model; a reload swaps it (model_reload.cpp)
    metrics::ServingMetrics metrics;
    std::shared_ptr<auth::TenantRegistry> tenants = std::make_shared<auth::TenantRegistry>();
    ResponseStore responses;  // /v1/responses kept for previous_response_id and GET
    std::atomic<bool> ready{false};
    std::atomic<bool> draining{false};
    // Whether the engine still turns (OpenAiService::watch_engine); null before it is loaded and after it stops.
    mutable std::mutex liveness_mu;
    std::unique_ptr<ops::EngineLiveness> liveness;
    std::atomic<int32_t> max_model_len{0};
    int64_t created = 0;  // unix seconds, for /v1/models
    // Model hot reload (model_reload.cpp): one at a time, on its own thread (it waits for requests to drain).
    std::shared_ptr<const ModelLoader> loader;  // set before the server answers; null: reload unavailable
    std::atomic<bool> reloading{false};
    std::thread reload_thread;
    std::atomic<uint64_t> reloads_ok{0}, reloads_failed{0};

    // Multi-LoRA (lora_endpoints.cpp): each served model has its own adapters (ServedModel::lora). Loading or
    // unloading one holds this, and a reload takes the adapter list under it, after it has set `reloading` (which
    // load and unload then refuse): no change falls between the list and the new model.
    std::mutex lora_admin;
};

// Whether `name` is one of the names `model` is served under (empty: the default, which it is).
bool serves_model(const ServedModel& model, std::string_view name);
// What a request's "model" names on `model` (the one it runs on): the base model (id 0, no hold) or one of its
// adapters; nullopt: neither (404).
std::optional<engine::LoraRegistry::Ref> resolve_model(const ServedModel& model, std::string_view name);

// POST /v1/chat/completions (chat_completions.cpp)
void handle_chat_completions(ServiceContext& ctx, Exchange x);
// A validated chat request from there on (model check, chat template, tokens, submit); `sink` (may be null: the chat
// completion shape) formats the answer. Errors are answered on `x`.
void start_chat(ServiceContext& ctx, Exchange x, ChatRequest& cr, std::unique_ptr<OutputSink> sink);
// POST /v1/responses, GET and DELETE /v1/responses/{id} (responses.cpp)
void handle_create_response(ServiceContext& ctx, Exchange x);
void handle_get_response(ServiceContext& ctx, Exchange x);
void handle_delete_response(ServiceContext& ctx, Exchange x);
// POST /v1/completions (completions.cpp)
void handle_completions(ServiceContext& ctx, Exchange x);
// POST /v1/embeddings (embeddings.cpp)
void handle_embeddings(ServiceContext& ctx, Exchange x);
// POST /v1/score and /score; POST /v1/rerank, /rerank and /v2/rerank (rerank.cpp)
void handle_score(ServiceContext& ctx, Exchange x);
void handle_rerank(ServiceContext& ctx, Exchange x);
// What a pooling model answers on the generation endpoints, and the check of the pooling endpoints (model_task.cpp).
void handle_not_generating(ServiceContext& ctx, Exchange x);
std::optional<ApiError> check_task(const ServiceContext& ctx, ModelTask want, std::string_view endpoint);
// A prompt-only request's tokens (model_task.cpp): a text's (with the tokenizer's special tokens around it when
// `add_special_tokens`, as Hugging Face tokenizers add them), or the client's ids, checked; cut to the last
// `truncate` tokens when it is given (-1: max_model_len), else refused past max_model_len. `where` names the input.
std::optional<ApiError> pooling_prompt_tokens(const ServedModel& model, const Prompt& p, bool add_special_tokens,
                                              std::optional<int64_t> truncate, const std::string& where,
                                              std::vector<int32_t>& out);
// GET /v1/models (models.cpp)
void handle_models(ServiceContext& ctx, Exchange x);
// POST /v1/load_lora_adapter, POST /v1/unload_lora_adapter (lora_endpoints.cpp; routed with --enable-lora only)
void handle_load_lora_adapter(ServiceContext& ctx, Exchange x);
void handle_unload_lora_adapter(ServiceContext& ctx, Exchange x);
// The served adapters as /v1/models entries (lora_endpoints.cpp).
void append_lora_models(ServiceContext& ctx, const ServedModel& model, Json& data);
// POST /tokenize, POST /detokenize (tokenize.cpp)
void handle_tokenize(ServiceContext& ctx, Exchange x);
void handle_detokenize(ServiceContext& ctx, Exchange x);
// GET /v1/admin/tenants: every tenant's usage (admin.cpp)
void handle_admin_tenants(ServiceContext& ctx, Exchange x);
// POST /v1/models/reload (model_reload.cpp; admin only)
void handle_reload_model(ServiceContext& ctx, Exchange x);
// GET /health, GET|POST /ping, GET /version, GET /metrics (health.cpp)
void handle_health(ServiceContext& ctx, Exchange x);
void handle_version(ServiceContext& ctx, Exchange x);
void handle_metrics(ServiceContext& ctx, Exchange x);

// Small helpers of the handlers (service.cpp).
int64_t unix_seconds();
std::string random_id(std::string_view prefix);
// Text that is always valid UTF-8 (token pieces may split a character): invalid bytes become U+FFFD.
std::string lossy_utf8(std::string_view s);
// 404 for a model name that is not served.
ApiError unknown_model(const std::string& name);
// Structured output: compiles what `structured` asks for into `params.grammar`; the 400 when it cannot be used.
std::optional<ApiError> apply_structured_output(const ServedModel& model,
                                                const std::optional<StructuredOutputRequest>& structured,
                                                engine::SamplingParams& params);
// 403 for a model (the base model or a LoRA adapter, resolve_model) the request's tenant may not use
// (empty: the default model).
std::optional<ApiError> check_tenant_model(const ServiceContext& ctx, const Exchange& x, const std::string& name);
// The tenant's token-rate limit at admission: 429 (with Retry-After) while its bucket is empty, else the prompt's
// tokens are charged (see auth::Tenant::admit_prompt).
std::optional<ApiError> admit_prompt_tokens(Exchange& x, int64_t prompt_tokens);

}  // namespace pagoda::server::openai
