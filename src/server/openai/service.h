// The OpenAI-compatible API over a Generator: a route table (router.h: auth, CORS, refusals) over one file per
// endpoint family (chat_completions.cpp, completions.cpp, models.cpp, tokenize.cpp, health.cpp); a completion runs
// as a CompletionJob (chat template -> tokens -> generator -> incremental detokenize -> stop strings ->
// reasoning/tool-call parsing -> SSE or JSON). Handlers run on the HTTP I/O threads; engine events reach them
// through Responder::post.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "chat/output/tool_parser.h"
#include "common/json.h"
#include "engine/lora_registry.h"
#include "engine/sampling_params.h"
#include "server/auth/tenants.h"
#include "server/http/http_server.h"
#include "server/openai/generator.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::server::openai {

// What the served model is for (--task, or the model directory's sentence-transformers files): text generation, or a
// pooling model whose endpoints are /v1/embeddings (kEmbed) or /v1/score and /v1/rerank (kScore). A pooling model
// refuses the generation endpoints with 400, as vLLM's pooling runner does.
enum class ModelTask { kGenerate, kEmbed, kScore };

struct ServiceConfig {
    ModelTask task = ModelTask::kGenerate;        // a reload keeps it; each model's pooling settings are its own
    std::vector<std::string> served_model_names;  // the first is the default; at least one
    std::string model_root;                       // "root" of /v1/models entries (the model directory)
    int32_t max_model_len = 4096;
    std::vector<std::string> api_keys;                 // the tenant "default"; with `tenants` empty too: no auth
    std::vector<auth::TenantSpec> tenants;             // --api-keys-file
    std::vector<std::string> allowed_origins = {"*"};  // CORS (vLLM's defaults)
    std::vector<std::string> allowed_methods = {"*"};
    std::vector<std::string> allowed_headers = {"*"};
    bool allow_credentials = false;
    bool enable_auto_tool_choice = false;
    bool enable_lora = false;  // --enable-lora: the adapter endpoints are routed (the adapters come with the model)
    std::optional<chat::ToolParserKind> tool_parser;
    bool reasoning_parser = false;          // qwen3: split <think>...</think>
    Json default_chat_template_kwargs;      // object or null; request values win
    Json tokenizer_config;                  // tokenizer_config.json (special tokens of request templates)
    std::string metrics_prefix = "pagoda";  // /metrics names: "<prefix>:num_requests_running", ...
    // --generation-config vllm or DIR: the defaults of the sampling fields a request leaves unset, filled in here so
    // that the model's generation_config.json (which the engine applies) never does. Unset: the model's.
    std::optional<engine::GenerationConfig> sampling_defaults;
    size_t max_unsent_bytes = 16 * 1024 * 1024;  // a streaming client this far behind is disconnected
    // /health answers 503 once the engine has been inside one step this long (a wedged engine; 0: never).
    double engine_stall_seconds = 300.0;
    // /v1/responses kept for previous_response_id (least recently used out first; 0 entries: none kept).
    size_t max_stored_responses = 4096;
    size_t max_stored_response_bytes = 256 * 1024 * 1024;
    std::string version = PAGODA_VERSION;
};

struct ServiceContext;  // what the endpoint handlers share (service_context.h)
struct ServedModel;     // model_holder.h
struct ModelLoader;     // model_reload.h
class Router;

class OpenAiService {
  public:
    // `chat_template` may be null (then /v1/chat/completions needs a "chat_template" in the request);
    // `generator` must outlive the service.
    OpenAiService(ServiceConfig config, Tokenizer tokenizer, std::unique_ptr<chat::ChatTemplate> chat_template,
                  Generator& generator);
    ~OpenAiService();

    // The http::Handler: bind with [&](auto req, auto r) { service.handle(std::move(req), std::move(r)); }.
    void handle(http::Request request, std::shared_ptr<http::Responder> responder);

    // /health and /ping answer 503 until ready and again once draining; while draining every new request but
    // /metrics is refused with 503 (requests in flight finish).
    void set_ready(bool ready);
    void set_draining();
    // Any thread: one HTTP answer's status, for /metrics (http::ServerOptions::on_status).
    void count_http_response(int status);
    // SIGHUP: a new --api-keys-file table (usage and bucket levels carry over by tenant name).
    Status reload_tenants(std::vector<auth::TenantSpec> tenants);
    // The context length the engine settled on (known once the model is loaded; before set_ready).
    void set_max_model_len(int32_t n);
    // Model hot reload: how a model directory is loaded (POST /v1/models/reload answers 400 without it).
    void set_model_loader(ModelLoader loader);
    // The model loaded at start, in place of the one the service was constructed with (served names: the config's).
    void install_model(std::shared_ptr<ServedModel> model);
    // The model served now.
    std::shared_ptr<const ServedModel> model() const;
    // The watchdog's proof of life: returns once the served engine answered between two steps.
    void probe_engine();
    // From now on /health watches the engine (config().engine_stall_seconds): once it is loaded, until stop_engine().
    void watch_engine();
    // At exit, once the HTTP server stopped serving: stops the served engine (a reload in progress is waited for
    // when the service is destroyed).
    void stop_engine();

    const ServiceConfig& config() const;

  private:
    std::unique_ptr<ServiceContext> ctx_;
    std::unique_ptr<Router> router_;
};

}  // namespace pagoda::server::openai
