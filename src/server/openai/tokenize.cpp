// vLLM's POST /tokenize ({"prompt"} or {"messages"} -> token ids) and POST /detokenize ({"tokens"} -> text).
#include "server/openai/service_context.h"

namespace pagoda::server::openai {

void handle_tokenize(ServiceContext& ctx, Exchange x) {
    auto body = parse_json_body(x);
    if (!body) return;
    std::string text;
    const Json* prompt = body->find("prompt");
    const Json* messages = body->find("messages");
    if (prompt && prompt->is_string()) {
        text = prompt->as_string();
    } else if (messages) {
        ChatRequest cr;
        if (auto err = parse_chat_request(*body, cr)) return send_error(x, *err);
        if (!x.model->chat_template) return send_error(x, ApiError::bad_request("this model has no chat template"));
        auto rendered =
            x.model->chat_template->render(cr.messages, cr.tools, cr.add_generation_prompt, cr.chat_template_kwargs);
        if (!rendered.ok()) return send_error(x, ApiError::bad_request(rendered.message(), "messages"));
        text = std::move(rendered).value();
    } else {
        return send_error(x, ApiError::bad_request("give 'prompt' (a string) or 'messages'", "prompt"));
    }
    const std::vector<int32_t> ids = x.model->tokenizer.encode(text, true);
    Json tokens = Json::array();
    for (int32_t id : ids)
        tokens.push_back(Json(id));
    Json out = Json::object();
    out.set("count", Json(static_cast<int64_t>(ids.size())));
    out.set("max_model_len", Json(x.model->max_model_len.load()));
    out.set("tokens", std::move(tokens));
    const Json* strs = body->find("return_token_strs");
    if (strs && strs->is_bool() && strs->as_bool()) {
        Json s = Json::array();
        for (int32_t id : ids)
            s.push_back(Json(lossy_utf8(x.model->tokenizer.token_bytes(id))));
        out.set("token_strs", std::move(s));
    } else {
        out.set("token_strs", Json());
    }
    send_json(x, 200, out.dump());
}

void handle_detokenize(ServiceContext& ctx, Exchange x) {
    auto body = parse_json_body(x);
    if (!body) return;
    const Json* tokens = body->find("tokens");
    if (!tokens || !tokens->is_array())
        return send_error(x, ApiError::bad_request("'tokens' must be an array of token ids", "tokens"));
    std::vector<int32_t> ids;
    for (size_t i = 0; i < tokens->as_array().size(); ++i) {
        const Json& t = tokens->as_array()[i];
        if (!t.is_int() || t.as_int() < 0 || t.as_int() > INT32_MAX ||
            !x.model->tokenizer.is_valid_id(static_cast<int32_t>(t.as_int()))) {
            const std::string where = "tokens[" + std::to_string(i) + "]";
            return send_error(x, ApiError::bad_request("'" + where + "' is not a token id of this model", where));
        }
        ids.push_back(static_cast<int32_t>(t.as_int()));
    }
    auto text = x.model->tokenizer.decode(ids);
    if (!text.ok()) return send_error(x, ApiError::bad_request(text.message(), "tokens"));
    Json out = Json::object();
    out.set("prompt", Json(std::move(text).value()));
    send_json(x, 200, out.dump());
}

}  // namespace pagoda::server::openai
