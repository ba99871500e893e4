// Probes and observability: GET /health and GET|POST /ping (200 once the model is ready), GET /version,
// GET /metrics (Prometheus).
#include "server/openai/service_context.h"

namespace pagoda::server::openai {

void handle_health(ServiceContext& ctx, Exchange x) {
    if (ctx.ready.load()) {
        x.responder->send(http::Response{200, std::move(x.headers), "", ""});
    } else {
        send_error(x, ApiError::unavailable("the model is loading"));
    }
}

void handle_version(ServiceContext& ctx, Exchange x) {
    Json v = Json::object();
    v.set("version", Json(ctx.config.version));
    send_json(x, 200, v.dump());
}

void handle_metrics(ServiceContext& ctx, Exchange x) {
    std::string text =
        ctx.metrics.render(ctx.generator.stats(), ctx.config.metrics_prefix, ctx.config.served_model_names.front());
    std::vector<metrics::TenantCounters> tenants;
    for (const auto& u : ctx.tenants->usage())
        tenants.push_back({u->name, u->requests.load(), u->prompt_tokens.load(), u->generation_tokens.load(),
                           u->rate_limited.load()});
    text += metrics::render_tenant_counters(tenants, ctx.config.metrics_prefix, ctx.config.served_model_names.front());
    x.responder->send(
        http::Response{200, std::move(x.headers), std::move(text), "text/plain; version=0.0.4; charset=utf-8"});
}

}  // namespace pagoda::server::openai
