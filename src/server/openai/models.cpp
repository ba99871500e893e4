// GET /v1/models: the served names, each with the context length.
#include "server/openai/service_context.h"

namespace pagoda::server::openai {

void handle_models(ServiceContext& ctx, Exchange x) {
    Json data = Json::array();
    for (const auto& name : ctx.config.served_model_names) {
        Json m = Json::object();
        m.set("id", Json(name));
        m.set("object", Json("model"));
        m.set("created", Json(ctx.created));
        m.set("owned_by", Json("pagoda"));
        m.set("root", Json(ctx.config.model_root.empty() ? name : ctx.config.model_root));
        m.set("parent", Json());
        m.set("max_model_len", Json(ctx.max_model_len.load()));
        m.set("permission", Json::array());
        data.push_back(std::move(m));
    }
    append_lora_models(ctx, data);
    Json body = Json::object();
    body.set("object", Json("list"));
    body.set("data", std::move(data));
    send_json(x, 200, body.dump());
}

}  // namespace pagoda::server::openai
