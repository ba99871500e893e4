// POST /v1/responses (OpenAI's Responses API, as vLLM serves it): the request becomes a chat request
// (responses_protocol.h), runs through the chat path, and a ResponsesSink answers (responses_output.h).
// GET and DELETE /v1/responses/{id} read and drop stored responses.
#include "server/openai/response_store.h"
#include "server/openai/responses_output.h"
#include "server/openai/responses_protocol.h"
#include "server/openai/service_context.h"

namespace pagoda::server::openai {

namespace {

constexpr std::string_view kResponsesPath = "/v1/responses/";

ApiError response_not_found(const std::string& id, std::string param = {}) {
    return ApiError::not_found("Response with id '" + id + "' not found.", std::move(param));
}

// The {id} of /v1/responses/{id}; empty for deeper paths (/input_items, /cancel), which are not served.
std::string response_id_of(const std::string& path) {
    std::string id = path.substr(std::min(path.size(), kResponsesPath.size()));
    return id.find('/') == std::string::npos ? id : std::string();
}

}  // namespace

void handle_create_response(ServiceContext& ctx, Exchange x) {
    auto body = parse_json_body(x);
    if (!body) return;
    ResponsesRequest rr;
    if (auto err = parse_responses_request(*body, rr)) return send_error(x, *err);
    Json history = Json::array();
    if (!rr.previous_response_id.empty()) {
        auto previous = ctx.responses.get(rr.previous_response_id);
        if (!previous) return send_error(x, response_not_found(rr.previous_response_id, "previous_response_id"));
        history = previous->conversation;
    }
    ChatRequest cr;
    if (auto err = to_chat_request(rr, history, cr)) return send_error(x, *err);

    ResponseContext rc;
    rc.base = response_base(rr, random_id("resp_"), unix_seconds(),
                            cr.model.empty() ? x.model->served_model_names.front() : cr.model);
    if (rr.store) {
        rc.store_to = &ctx.responses;
        rc.conversation = std::move(history);
        for (const Json& m : rr.input_messages.as_array())
            rc.conversation.push_back(m);
    }
    rc.tokenizer = &x.model->tokenizer;
    start_chat(ctx, std::move(x), cr, make_responses_sink(std::move(rc)));
}

void handle_get_response(ServiceContext& ctx, Exchange x) {
    const std::string id = response_id_of(x.request.path);
    if (id.empty()) return send_error(x, ApiError::not_found("no route for GET " + x.request.path));
    auto stored = ctx.responses.get(id);
    if (!stored) return send_error(x, response_not_found(id));
    send_json(x, 200, stored->response.dump());
}

void handle_delete_response(ServiceContext& ctx, Exchange x) {
    const std::string id = response_id_of(x.request.path);
    if (id.empty()) return send_error(x, ApiError::not_found("no route for DELETE " + x.request.path));
    if (!ctx.responses.erase(id)) return send_error(x, response_not_found(id));
    Json out = Json::object();
    out.set("id", Json(id));
    out.set("object", Json("response.deleted"));
    out.set("deleted", Json(true));
    send_json(x, 200, out.dump());
}

}  // namespace pagoda::server::openai
