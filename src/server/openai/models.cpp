// GET /v1/models: the served names, each with the context length.
#include "server/openai/service_context.h"

namespace pagoda::server::openai {

void handle_models(ServiceContext& ctx, Exchange x) {
    Json data = Json::array();
    const ServedModel& model = *x.model;
    for (const auto& name : model.served_model_names) {
        Json m = Json::object();
        m.set("id", Json(name));
        m.set("object", Json("model"));
        m.set("created", Json(model.loaded_at));
        m.set("owned_by", Json("pagoda"));
        m.set("root", Json(model.model_dir.empty() ? name : model.model_dir));
        m.set("parent", Json());
        m.set("max_model_len", Json(model.max_model_len.load()));
        m.set("permission", Json::array());
        data.push_back(std::move(m));
    }
    append_lora_models(ctx, model, data);
    Json body = Json::object();
    body.set("object", Json("list"));
    body.set("data", std::move(data));
    send_json(x, 200, body.dump());
}

}  // namespace pagoda::server::openai
