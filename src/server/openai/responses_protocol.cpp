// Responses API request parsing (see responses_protocol.h). The item and tool shapes are the openai SDK's
// (openai/types/responses/response_input_item_param.py, function_tool_param.py); features a text-only server without
// hosted tools cannot honour are refused with a 400 that names them, as the chat endpoint does.
#include "server/openai/responses_protocol.h"

#include <algorithm>
#include <iterator>
#include <limits>

#include "server/openai/json_fields.h"

namespace pagoda::server::openai {

namespace {

// A required string member of an input item.
const std::string* item_string(Fields& f, const Json& item, const char* name, const std::string& where) {
    const Json* v = item.find(name);
    if (!v || !v->is_string()) {
        f.fail("'" + where + "." + name + "' is required and must be a string", where + "." + name);
        return nullptr;
    }
    return &v->as_string();
}

// The text of a reasoning item handed back (the openai-agents SDK returns the model's reasoning items with the next
// turn): its reasoning_text content, else its summary. Qwen templates render it as the turn's reasoning_content.
std::string reasoning_text(const Json& item) {
    std::string text;
    for (const char* list : {"content", "summary"}) {
        const Json* parts = item.find(list);
        if (!parts || !parts->is_array()) continue;
        for (const Json& p : parts->as_array()) {
            const Json* t = p.is_object() ? p.find("text") : nullptr;
            if (!t || !t->is_string()) continue;
            if (!text.empty()) text += "\n";
            text += t->as_string();
        }
        if (!text.empty()) break;
    }
    return text;
}

// Input items -> chat messages. A function_call joins the assistant message before it (one model turn: its text and
// its calls), a function_call_output becomes a tool message, a reasoning item the next assistant turn's
// reasoning_content; "developer" is "system" to Qwen templates.
void input_messages(Fields& f, const Json& input, Json& out) {
    out = Json::array();
    if (input.is_string()) {
        out.push_back(json_object({{"role", Json("user")}, {"content", input}}));
        return;
    }
    if (!input.is_array()) return f.wrong_type("input", "a string or an array of input items", input);
    std::string reasoning;  // of a reasoning item not yet attached to an assistant turn
    auto attach_reasoning = [&](Json& m) {
        if (!reasoning.empty()) m.set("reasoning_content", Json(std::move(reasoning)));
        reasoning.clear();
    };
    for (size_t i = 0; i < input.as_array().size() && !f.failed(); ++i) {
        const std::string where = "input[" + std::to_string(i) + "]";
        const Json& item = input.as_array()[i];
        if (!item.is_object()) {
            f.fail("'" + where + "' must be an object, got " + json_type_name(item), where);
            return;
        }
        const Json* type_v = item.find("type");
        if (type_v && !type_v->is_null() && !type_v->is_string()) {
            f.fail("'" + where + ".type' must be a string", where + ".type");
            return;
        }
        const std::string type = type_v && type_v->is_string() ? type_v->as_string() : "message";
        if (type == "message") {
            const std::string* role = item_string(f, item, "role", where);
            if (!role) return;
            if (*role != "user" && *role != "system" && *role != "developer" && *role != "assistant") {
                f.fail("'" + where + ".role' must be one of user, system, developer, assistant; got '" + *role + "'",
                       where + ".role");
                return;
            }
            const Json* content = item.find("content");
            if (!content || (!content->is_string() && !content->is_array())) {
                f.fail("'" + where + ".content' is required and must be a string or an array of content parts",
                       where + ".content");
                return;
            }
            Json m = json_object({{"role", Json(*role == "developer" ? "system" : *role)}, {"content", *content}});
            if (!normalize_content(f, m, where)) return;
            if (*role == "assistant") attach_reasoning(m);
            out.push_back(std::move(m));
        } else if (type == "function_call") {
            const std::string* call_id = item_string(f, item, "call_id", where);
            const std::string* name = call_id ? item_string(f, item, "name", where) : nullptr;
            const std::string* arguments = name ? item_string(f, item, "arguments", where) : nullptr;
            if (!arguments) return;
            Json call =
                json_object({{"id", Json(*call_id)},
                             {"type", Json("function")},
                             {"function", json_object({{"name", Json(*name)}, {"arguments", Json(*arguments)}})}});
            Json* last = out.size() ? &out.as_array().back() : nullptr;
            if (!last || last->find("role")->as_string() != "assistant") {
                out.push_back(json_object({{"role", Json("assistant")}, {"content", Json("")}}));
                last = &out.as_array().back();
                attach_reasoning(*last);
            }
            Json calls = last->find("tool_calls") ? *last->find("tool_calls") : Json::array();
            calls.push_back(std::move(call));
            last->set("tool_calls", std::move(calls));
        } else if (type == "function_call_output") {
            const std::string* call_id = item_string(f, item, "call_id", where);
            if (!call_id) return;
            const Json* output = item.find("output");
            if (!output || (!output->is_string() && !output->is_array())) {
                f.fail("'" + where + ".output' is required and must be a string or an array of content parts",
                       where + ".output");
                return;
            }
            Json m = json_object({{"role", Json("tool")}, {"tool_call_id", Json(*call_id)}, {"content", *output}});
            if (!normalize_content(f, m, where)) {  // its messages say ".content": the client wrote ".output"
                for (std::string* s : {&f.error->message, &f.error->param})
                    if (const size_t at = s->find(where + ".content"); at != std::string::npos)
                        s->replace(at + where.size(), 8, ".output");
                return;
            }
            out.push_back(std::move(m));
        } else if (type == "reasoning") {
            reasoning = reasoning_text(item);
        } else if (type == "item_reference") {
            f.fail("'" + where +
                       "': item references are not supported; send the item itself, or chain with "
                       "'previous_response_id'",
                   where);
        } else {
            f.fail("'" + where + "': input items of type '" + type +
                       "' are not supported (supported: message, function_call, function_call_output, reasoning)",
                   where + ".type");
        }
    }
}

// Flat function tools ({"type":"function","name",...}) -> chat tools ({"type":"function","function":{...}}).
void convert_tools(Fields& f, ResponsesRequest& out) {
    const Json* tools = f.array("tools");
    if (!tools) return;
    Json chat_tools = Json::array();
    for (size_t i = 0; i < tools->as_array().size(); ++i) {
        const std::string where = "tools[" + std::to_string(i) + "]";
        const Json& t = tools->as_array()[i];
        const Json* type = t.is_object() ? t.find("type") : nullptr;
        if (!type || !type->is_string()) {
            f.fail("'" + where + ".type' is required", where + ".type");
            return;
        }
        if (type->as_string() != "function") {
            f.fail("'" + where + "': tools of type '" + type->as_string() +
                       "' are not supported; only function tools are (the server runs no hosted tools)",
                   where + ".type");
            return;
        }
        const Json* name = t.find("name");
        if (!name || !name->is_string() || name->as_string().empty()) {
            f.fail("'" + where + ".name' is required", where + ".name");
            return;
        }
        Json fn = json_object({{"name", *name}});
        for (const char* key : {"description", "parameters", "strict"})
            if (const Json* v = t.find(key); v && !v->is_null()) fn.set(key, *v);
        chat_tools.push_back(json_object({{"type", Json("function")}, {"function", std::move(fn)}}));
    }
    out.tools = *tools;
    if (chat_tools.size()) out.chat_body.set("tools", std::move(chat_tools));
}

void convert_tool_choice(Fields& f, ResponsesRequest& out) {
    const Json* choice = f.get("tool_choice");
    if (!choice || f.failed()) return;
    out.tool_choice = *choice;
    if (choice->is_string()) {
        out.chat_body.set("tool_choice", *choice);  // none | auto | required: the chat parser checks the value
        return;
    }
    const Json* type = choice->is_object() ? choice->find("type") : nullptr;
    const Json* name = choice->is_object() ? choice->find("name") : nullptr;
    if (!type || !type->is_string() || type->as_string() != "function" || !name || !name->is_string()) {
        f.fail(
            "'tool_choice' must be 'none', 'auto', 'required' or {\"type\": \"function\", \"name\": ...}; other "
            "choices (hosted tools, allowed_tools, mcp) are not supported",
            "tool_choice");
        return;
    }
    out.chat_body.set("tool_choice",
                      json_object({{"type", Json("function")}, {"function", json_object({{"name", *name}})}}));
}

// reasoning.effort: "none" turns Qwen's thinking off, any other effort on (Qwen has no budget levels); absent leaves
// the template's default. An explicit chat_template_kwargs.enable_thinking (vLLM's extra field) wins.
void convert_reasoning(Fields& f, ResponsesRequest& out) {
    Json kwargs = Json::object();
    if (const Json* k = f.object("chat_template_kwargs")) kwargs = *k;
    if (const Json* reasoning = f.object("reasoning")) {
        out.reasoning = *reasoning;
        const Json* effort = reasoning->find("effort");
        if (effort && !effort->is_null()) {
            static const char* const kEfforts[] = {"none", "minimal", "low", "medium", "high", "xhigh"};
            const bool known =
                effort->is_string() && std::any_of(std::begin(kEfforts), std::end(kEfforts),
                                                   [&](const char* e) { return effort->as_string() == e; });
            if (!known) {
                f.fail("'reasoning.effort' must be one of none, minimal, low, medium, high, xhigh", "reasoning.effort");
                return;
            }
            if (!kwargs.find("enable_thinking")) kwargs.set("enable_thinking", Json(effort->as_string() != "none"));
        }
    }
    if (kwargs.size()) out.chat_body.set("chat_template_kwargs", std::move(kwargs));
}

}  // namespace

std::optional<ApiError> parse_responses_request(const Json& body, ResponsesRequest& out) {
    if (!body.is_object()) return ApiError::bad_request("the request body must be a JSON object");
    Fields f(body);
    out.chat_body = Json::object();
    // vLLM's sampling extras and the fields chat and responses share go through as they are: the chat parser checks
    // them, with the same names.
    for (const char* key : {"model",
                            "temperature",
                            "top_p",
                            "top_k",
                            "min_p",
                            "repetition_penalty",
                            "presence_penalty",
                            "frequency_penalty",
                            "seed",
                            "min_tokens",
                            "ignore_eos",
                            "stop",
                            "stop_token_ids",
                            "logit_bias",
                            "priority",
                            "cache_salt",
                            "skip_special_tokens",
                            "include_stop_str_in_output",
                            "stream",
                            "parallel_tool_calls",
                            "user"})
        if (const Json* v = f.get(key)) out.chat_body.set(key, *v);

    if (auto v = f.boolean("background"); v && *v)
        f.fail("background responses are not supported; leave 'background' unset", "background");
    if (f.get("conversation"))
        f.fail("'conversation' is not supported; chain responses with 'previous_response_id'", "conversation");
    if (f.get("prompt")) f.fail("stored prompt templates ('prompt') are not supported", "prompt");
    if (const Json* text = f.object("text")) {
        // text.format {"type": "json_schema", "name", "schema", "strict"} is chat's response_format with the
        // schema's fields one level up.
        const Json* format = text->find("format");
        const Json* type = format && format->is_object() ? format->find("type") : nullptr;
        if (type && type->is_string() && type->as_string() == "json_schema") {
            Json js = Json::object();
            for (const char* k : {"name", "schema", "strict", "description"})
                if (const Json* v = format->find(k)) js.set(k, *v);
            out.chat_body.set("response_format", Json::object({{"type", Json("json_schema")}, {"json_schema", js}}));
        } else if (type && type->is_string() && type->as_string() == "json_object") {
            out.chat_body.set("response_format", Json::object({{"type", Json("json_object")}}));
        } else if (type && (!type->is_string() || type->as_string() != "text")) {
            f.fail("'text.format.type' must be 'text', 'json_object' or 'json_schema'", "text.format.type");
        }
    }
    if (auto v = f.integer("top_logprobs", 0, 20); v && *v > 0)
        f.fail("'top_logprobs' is not supported on /v1/responses yet; use /v1/chat/completions", "top_logprobs");
    (void)f.array("include");  // what to add to the output (encrypted reasoning, logprobs): nothing to add here
    (void)f.string("truncation");
    (void)f.string("service_tier");

    if (auto v = f.integer("max_output_tokens", 1, std::numeric_limits<int32_t>::max())) {
        out.max_output_tokens = Json(*v);
        out.chat_body.set("max_tokens", Json(*v));
    }
    if (const Json* v = f.get("instructions"); v && !f.failed()) {
        if (!v->is_string()) {
            f.wrong_type("instructions", "a string", *v);
        } else {
            out.instructions = *v;
        }
    }
    if (const Json* m = f.object("metadata")) {
        for (const auto& [k, v] : m->as_object())
            if (!v.is_string()) f.fail("'metadata." + k + "' must be a string", "metadata." + k);
        out.metadata = *m;
    }
    if (auto v = f.string("user")) out.user = Json(*v);
    if (auto v = f.boolean("store")) out.store = *v;
    if (auto v = f.boolean("stream")) out.stream = *v;
    if (auto v = f.string("previous_response_id")) out.previous_response_id = *v;
    if (auto v = f.boolean("parallel_tool_calls")) out.parallel_tool_calls = *v;
    if (const Json* v = f.get("temperature")) out.temperature = *v;
    if (const Json* v = f.get("top_p")) out.top_p = *v;
    convert_tools(f, out);
    convert_tool_choice(f, out);
    convert_reasoning(f, out);
    if (f.failed()) return f.error;

    const Json* input = f.get("input");
    if (!input) return ApiError::bad_request("'input' is required", "input");
    input_messages(f, *input, out.input_messages);
    if (!f.failed() && out.input_messages.size() == 0 && out.previous_response_id.empty())
        f.fail("'input' must not be empty", "input");
    return f.error;
}

std::optional<ApiError> to_chat_request(const ResponsesRequest& r, const Json& history, ChatRequest& out) {
    Json messages = Json::array();
    if (r.instructions.is_string() && !r.instructions.as_string().empty())
        messages.push_back(json_object({{"role", Json("system")}, {"content", r.instructions}}));
    for (const Json* list : {&history, &r.input_messages})
        if (list->is_array())
            for (const Json& m : list->as_array())
                messages.push_back(m);
    // Instructions and the system items that open the input are one system message.
    Json merged = Json::array();
    for (Json& m : messages.as_array()) {
        const bool system = m.find("role")->as_string() == "system";
        Json* last = merged.size() ? &merged.as_array().back() : nullptr;
        if (system && last && merged.size() == 1 && last->find("role")->as_string() == "system") {
            last->set("content", Json(last->find("content")->as_string() + "\n\n" + m.find("content")->as_string()));
        } else {
            merged.push_back(std::move(m));
        }
    }
    if (merged.size() == 0) return ApiError::bad_request("'input' must not be empty", "input");
    Json body = r.chat_body;
    body.set("messages", std::move(merged));
    auto err = parse_chat_request(body, out);
    if (err && err->param.rfind("messages", 0) == 0) err->param = "input";  // our own messages: name the input
    return err;
}

}  // namespace pagoda::server::openai
