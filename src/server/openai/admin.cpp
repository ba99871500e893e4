// Admin endpoints (admin tenants only, when keys are configured): GET /v1/admin/tenants, the usage counted per tenant
// since start (the same numbers as the tenant_* series of /metrics, as JSON for scripts and billing).
#include "server/openai/service_context.h"

namespace pagoda::server::openai {

void handle_admin_tenants(ServiceContext& ctx, Exchange x) {
    Json data = Json::array();
    for (const auto& u : ctx.tenants->usage()) {
        Json t = Json::object();
        t.set("tenant", Json(u->name));
        t.set("requests", Json(u->requests.load()));
        t.set("prompt_tokens", Json(u->prompt_tokens.load()));
        t.set("generation_tokens", Json(u->generation_tokens.load()));
        t.set("rate_limited", Json(u->rate_limited.load()));
        data.push_back(std::move(t));
    }
    Json body = Json::object();
    body.set("object", Json("list"));
    body.set("data", std::move(data));
    send_json(x, 200, body.dump());
}

}  // namespace pagoda::server::openai
