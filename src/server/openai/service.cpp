// OpenAiService: the route table over the endpoint handlers, and the helpers they share.
#include "server/openai/service.h"

#include <chrono>
#include <cstdio>
#include <mutex>
#include <random>

#include "common/utf8.h"
#include "server/openai/service_context.h"

namespace pagoda::server::openai {

int64_t unix_seconds() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::string random_id(std::string_view prefix) {
    static std::mutex mu;
    static std::mt19937_64 rng(std::random_device{}());
    uint64_t a, b;
    {
        std::lock_guard<std::mutex> lock(mu);
        a = rng();
        b = rng();
    }
    char buf[40];
    std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(a),
                  static_cast<unsigned long long>(b));
    return std::string(prefix) + buf;
}

std::string lossy_utf8(std::string_view s) {
    if (utf8_is_valid(s)) return std::string(s);
    std::string out;
    size_t pos = 0;
    while (pos < s.size())
        utf8_append(out, utf8_decode(s, pos));
    return out;
}

ApiError unknown_model(const std::string& name) {
    return ApiError::not_found("The model `" + name + "` does not exist.", "model");
}

std::optional<ApiError> check_tenant_model(const ServiceContext& ctx, const Exchange& x, const std::string& name) {
    const std::string& served = name.empty() ? x.model->served_model_names.front() : name;
    if (x.tenant && !x.tenant->may_use(served))
        return ApiError{403, "tenant " + x.tenant->spec.name + " may not use the model `" + served + "`",
                        "PermissionDeniedError", "model"};
    return std::nullopt;
}

std::optional<ApiError> admit_prompt_tokens(Exchange& x, int64_t prompt_tokens) {
    if (!x.tenant) return std::nullopt;
    if (const double wait = x.tenant->admit_prompt(prompt_tokens); wait > 0.0)
        return rate_limited(x, wait, "tokens_per_minute");
    return std::nullopt;
}

ServiceContext::ServiceContext(ServiceConfig config_, Tokenizer tokenizer_,
                               std::unique_ptr<chat::ChatTemplate> chat_template_, Generator& generator_)
    : config(std::move(config_)),
      responses(config.max_stored_responses, config.max_stored_response_bytes),
      max_model_len(config.max_model_len),
      created(unix_seconds()) {
    if (config.served_model_names.empty()) config.served_model_names.push_back("model");
    // The model the server starts with; its generator answers once the engine is there (set_ready).
    auto first = std::make_shared<ServedModel>(std::move(tokenizer_), std::move(chat_template_), generator_);
    first->served_model_names = config.served_model_names;
    first->model_dir = config.model_root;
    first->max_model_len.store(config.max_model_len);
    (void)models.install(std::move(first));
    (void)tenants->load(config.api_keys, config.tenants);
}

ServiceContext::~ServiceContext() {
    if (reload_thread.joinable()) reload_thread.join();
}

bool serves_model(const ServedModel& model, std::string_view name) {
    if (name.empty()) return true;
    for (const std::string& served : model.served_model_names)
        if (served == name) return true;
    return false;
}

namespace {

std::vector<Route> route_table(ServiceContext& ctx) {
    // Every handler gets the served model in x.model. Those that need the model wait while a reload switches it
    // (the holder parks them and runs them on their connection's strand once the new model is in).
    auto to = [&ctx](void (*handler)(ServiceContext&, Exchange)) {
        return [&ctx, handler](Exchange x) {
            x.model = ctx.models.current();
            handler(ctx, std::move(x));
        };
    };
    auto to_model = [&ctx](void (*handler)(ServiceContext&, Exchange)) {
        return [&ctx, handler](Exchange x) {
            auto parked = std::make_shared<Exchange>(std::move(x));
            auto run = [&ctx, handler, parked] {
                parked->model = ctx.models.current();
                handler(ctx, std::move(*parked));
            };
            if (!ctx.models.paused()) return run();
            ctx.models.run_when_serving([parked, run] { parked->responder->post(run); });
        };
    };
    // method, path, handler, needs the model, answered while draining, path is a prefix ({id} follows)
    std::vector<Route> routes = {
        {"POST", "/v1/chat/completions", to_model(handle_chat_completions), true, false},
        {"POST", "/v1/completions", to_model(handle_completions), true, false},
        {"POST", "/v1/responses", to_model(handle_create_response), true, false},
        {"GET", "/v1/responses/", to(handle_get_response), false, false, true},
        {"DELETE", "/v1/responses/", to(handle_delete_response), false, false, true},
        {"POST", "/v1/embeddings", to_model(handle_embeddings), true, false},
        {"POST", "/v1/score", to_model(handle_score), true, false},
        {"POST", "/score", to_model(handle_score), true, false},
        {"POST", "/v1/rerank", to_model(handle_rerank), true, false},
        {"POST", "/rerank", to_model(handle_rerank), true, false},
        {"POST", "/v2/rerank", to_model(handle_rerank), true, false},
        {"GET", "/v1/models", to(handle_models), false, false},
        {"GET", "/v1/admin/tenants", to(handle_admin_tenants), false, false, false, true},
        {"POST", "/tokenize", to(handle_tokenize), false, false},
        {"POST", "/detokenize", to(handle_detokenize), false, false},
        {"GET", "/health", to(handle_health), false, false},
        {"GET", "/ping", to(handle_health), false, false},
        {"POST", "/ping", to(handle_health), false, false},  // SageMaker pings with either
        {"GET", "/version", to(handle_version), false, false},
        {"GET", "/metrics", to(handle_metrics), false, true},
        {"POST", "/v1/models/reload", to(handle_reload_model), true, false, false, true},
    };
    if (ctx.config.task != ModelTask::kGenerate) {  // a pooling model: the generation endpoints say why they refuse
        for (Route& route : routes)
            if (route.method == "POST" && (route.path == "/v1/chat/completions" || route.path == "/v1/completions" ||
                                           route.path == "/v1/responses"))
                route.handler = to(handle_not_generating);
    }
    if (ctx.config.enable_lora) {  // as vLLM: the adapter endpoints exist only when adapters can be served
        routes.push_back({"POST", "/v1/load_lora_adapter", to(handle_load_lora_adapter), true, false});
        routes.push_back({"POST", "/v1/unload_lora_adapter", to(handle_unload_lora_adapter), true, false});
    }
    return routes;
}

RouterOptions router_options(const ServiceContext& ctx) {
    const ServiceConfig& c = ctx.config;
    RouterOptions o;
    o.tenants = ctx.tenants;
    o.allowed_origins = c.allowed_origins;
    o.allowed_methods = c.allowed_methods;
    o.allowed_headers = c.allowed_headers;
    o.allow_credentials = c.allow_credentials;
    return o;
}

}  // namespace

OpenAiService::OpenAiService(ServiceConfig config, Tokenizer tokenizer, std::unique_ptr<chat::ChatTemplate> tmpl,
                             Generator& generator)
    : ctx_(std::make_unique<ServiceContext>(std::move(config), std::move(tokenizer), std::move(tmpl), generator)),
      router_(std::make_unique<Router>(router_options(*ctx_), route_table(*ctx_), ctx_->ready, ctx_->draining)) {}

OpenAiService::~OpenAiService() = default;

void OpenAiService::handle(http::Request request, std::shared_ptr<http::Responder> responder) {
    router_->dispatch(std::move(request), std::move(responder));
}

void OpenAiService::set_ready(bool ready) {
    if (ready) ctx_->metrics.set_max_model_len(ctx_->max_model_len.load());
    ctx_->ready.store(ready);
}

void OpenAiService::set_draining() {
    ctx_->draining.store(true);
}

void OpenAiService::count_http_response(int status) {
    ctx_->metrics.count_http_response(status);
}

Status OpenAiService::reload_tenants(std::vector<auth::TenantSpec> tenants) {
    return ctx_->tenants->load(ctx_->config.api_keys, std::move(tenants));
}

void OpenAiService::set_model_loader(ModelLoader loader) {
    ctx_->loader = std::make_shared<const ModelLoader>(std::move(loader));
}

void OpenAiService::install_model(std::shared_ptr<ServedModel> model) {
    if (model->served_model_names.empty()) model->served_model_names = ctx_->config.served_model_names;
    if (model->model_dir.empty()) model->model_dir = ctx_->config.model_root;
    ctx_->max_model_len.store(model->max_model_len.load());
    (void)ctx_->models.install(std::move(model));
}

std::shared_ptr<const ServedModel> OpenAiService::model() const {
    return ctx_->models.current();
}

void OpenAiService::probe_engine() {
    ctx_->models.current()->generator.wait_for_turn();
}

void OpenAiService::watch_engine() {
    if (ctx_->config.engine_stall_seconds <= 0) return;
    std::lock_guard lock(ctx_->liveness_mu);
    ctx_->liveness = std::make_unique<ops::EngineLiveness>([this] { probe_engine(); }, std::chrono::seconds(1));
}

void OpenAiService::stop_engine() {
    {
        std::lock_guard lock(ctx_->liveness_mu);
        ctx_->liveness.reset();  // its probe reads the engine
    }
    if (const auto model = ctx_->models.current(); model->stop) model->stop();
}

void OpenAiService::set_max_model_len(int32_t n) {
    ctx_->max_model_len.store(n);
}

const ServiceConfig& OpenAiService::config() const {
    return ctx_->config;
}

}  // namespace pagoda::server::openai
