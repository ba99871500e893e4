// Multi-LoRA over HTTP, as vLLM serves it: POST /v1/load_lora_adapter {lora_name, lora_path} and POST
// /v1/unload_lora_adapter {lora_name} (routed only with --enable-lora), adapters listed in GET /v1/models with the base
// model as parent, and a request's "model" naming an adapter.
#include "server/openai/json_fields.h"
#include "server/openai/service_context.h"

namespace pagoda::server::openai {

std::optional<engine::LoraRegistry::Ref> resolve_model(const ServedModel& model, std::string_view name) {
    if (serves_model(model, name)) return engine::LoraRegistry::Ref{};
    if (model.lora != nullptr) return model.lora->find(name);
    return std::nullopt;
}

void append_lora_models(ServiceContext& ctx, const ServedModel& model, Json& data) {
    engine::LoraRegistry* registry = model.lora;
    if (registry == nullptr) return;
    for (const engine::LoraInfo& a : registry->list()) {
        Json m = Json::object();
        m.set("id", Json(a.name));
        m.set("object", Json("model"));
        m.set("created", Json(ctx.created));
        m.set("owned_by", Json("pagoda"));
        m.set("root", Json(a.path));
        m.set("parent", Json(model.served_model_names.front()));
        m.set("max_model_len", Json(ctx.max_model_len.load()));
        m.set("permission", Json::array());
        data.push_back(std::move(m));
    }
}

namespace {

// The request's string field `name` (required), or an answered 400.
std::optional<std::string> required_string(const Exchange& x, const Json& body, const char* name) {
    const Json* v = body.find(name);
    if (v != nullptr && v->is_string() && !v->as_string().empty()) return v->as_string();
    send_error(x, ApiError::bad_request(std::string("'") + name + "' must be a non-empty string", name));
    return std::nullopt;
}

// Adapters cannot change while the model loads or is being reloaded (the reload carries the served adapters over to
// the new model: ModelLoader::load).
std::optional<ApiError> reloading_error(const ServiceContext& ctx, const engine::LoraRegistry* registry) {
    if (ctx.reloading.load()) {
        return ApiError{409, "a model reload is in progress; load or unload adapters once it has answered",
                        "ConflictError", ""};
    }
    if (registry == nullptr) return ApiError::unavailable("the model is still loading");
    return std::nullopt;
}

void send_text(Exchange& x, std::string text) {
    x.responder->send(http::Response{200, std::move(x.headers), std::move(text), "text/plain; charset=utf-8"});
}

}  // namespace

void handle_load_lora_adapter(ServiceContext& ctx, Exchange x) {
    auto body = parse_json_body(x);
    if (!body) return;
    const auto name = required_string(x, *body, "lora_name");
    if (!name) return;
    const auto path = required_string(x, *body, "lora_path");
    if (!path) return;
    std::lock_guard<std::mutex> admin(ctx.lora_admin);
    engine::LoraRegistry* registry = x.model->lora;
    if (auto busy = reloading_error(ctx, registry)) return send_error(x, *busy);
    if (serves_model(*x.model, *name))
        return send_error(x, ApiError::bad_request("'" + *name + "' is the base model's name", "lora_name"));
    if (Status s = registry->load(*name, *path); !s.ok())
        return send_error(x, ApiError::bad_request(s.message(), "lora_path"));
    send_text(x, "Success: LoRA adapter '" + *name + "' added successfully.");
}

void handle_unload_lora_adapter(ServiceContext& ctx, Exchange x) {
    auto body = parse_json_body(x);
    if (!body) return;
    const auto name = required_string(x, *body, "lora_name");
    if (!name) return;
    std::lock_guard<std::mutex> admin(ctx.lora_admin);
    engine::LoraRegistry* registry = x.model->lora;
    if (auto busy = reloading_error(ctx, registry)) return send_error(x, *busy);
    if (!registry->find(*name))
        return send_error(x, ApiError::not_found("The lora adapter '" + *name + "' cannot be found.", "lora_name"));
    if (Status s = registry->unload(*name); !s.ok())
        return send_error(x, ApiError::not_found(s.message(), "lora_name"));
    send_text(x, "Success: LoRA adapter '" + *name + "' removed successfully.");
}

}  // namespace pagoda::server::openai
