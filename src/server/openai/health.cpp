// Probes and observability: GET /health and GET|POST /ping (200 once the model is ready, with the served model and
// since when; 503 while loading, draining, or while the engine is stuck in one step), GET /version, GET /metrics
// (Prometheus).
#include <chrono>

#include "server/openai/service_context.h"

namespace pagoda::server::openai {

namespace {

// Seconds the engine has been inside one step, when that is past --engine-stall-timeout; else 0.
double engine_stalled_for(const ServiceContext& ctx) {
    std::lock_guard lock(ctx.liveness_mu);
    const double silent = ctx.liveness ? ctx.liveness->seconds_silent() : 0.0;
    return silent > ctx.config.engine_stall_seconds ? silent : 0.0;
}

}  // namespace

void handle_health(ServiceContext& ctx, Exchange x) {
    if (const double stalled = engine_stalled_for(ctx); stalled > 0) {
        return send_error(
            x, ApiError::unavailable("the engine has not finished a step for " +
                                     std::to_string(static_cast<int>(stalled)) + " s (--engine-stall-timeout)"));
    }
    if (ctx.ready.load()) {
        // Which model answers and since when (a reload changes both); a body probes that only read the status ignore.
        Json body = Json::object();
        body.set("status", Json("ok"));
        body.set("model", Json(x.model->served_model_names.front()));
        body.set("path", Json(x.model->model_dir));
        body.set("loaded_at", Json(x.model->loaded_at));
        body.set("reloading", Json(ctx.reloading.load()));
        send_json(x, 200, body.dump());
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
    const ServedModel& model = *x.model;
    const engine::EngineStats stats = model.generator.stats();
    const std::string& name = model.served_model_names.front();
    std::string text = ctx.metrics.render(stats, ctx.config.metrics_prefix, name);
    text += metrics::render_model_info({name, model.model_dir, model.loaded_at, ctx.reloads_ok.load(),
                                        ctx.reloads_failed.load(), ctx.models.parked(), ctx.models.parked_total()},
                                       ctx.config.metrics_prefix);
    std::vector<metrics::TenantCounters> tenants;
    for (const auto& u : ctx.tenants->usage())
        tenants.push_back({u->name, u->requests.load(), u->prompt_tokens.load(), u->generation_tokens.load(),
                           u->rate_limited.load()});
    text += metrics::render_tenant_counters(tenants, ctx.config.metrics_prefix, name);
    if (engine::LoraRegistry* lora = model.lora) {
        metrics::LoraRequestsInfo info;
        info.max_lora = lora->max_loras();
        for (int32_t id : stats.running_lora_ids)
            info.running.push_back(lora->name_of(id));
        for (int32_t id : stats.waiting_lora_ids)
            info.waiting.push_back(lora->name_of(id));
        text += metrics::render_lora_requests_info(
            info, ctx.config.metrics_prefix,
            std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
    }
    x.responder->send(
        http::Response{200, std::move(x.headers), std::move(text), "text/plain; version=0.0.4; charset=utf-8"});
}

}  // namespace pagoda::server::openai
