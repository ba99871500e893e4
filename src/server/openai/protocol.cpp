// Request validation for the OpenAI-compatible endpoints. Ranges follow vLLM's SamplingParams checks; messages name
// the field the way a client wrote it so that a user can fix the request from the error alone.
#include "server/openai/protocol.h"
#include "server/openai/structured_output.h"

#include <cmath>
#include <limits>

#include "server/openai/json_fields.h"

namespace pagoda::server::openai {

ApiError ApiError::bad_request(std::string message, std::string param) {
    return ApiError{400, std::move(message), "BadRequestError", std::move(param)};
}
ApiError ApiError::not_found(std::string message, std::string param) {
    return ApiError{404, std::move(message), "NotFoundError", std::move(param)};
}
ApiError ApiError::unauthorized() {
    return ApiError{401, "Unauthorized: a valid API key is required (Authorization: Bearer <key>)",
                    "AuthenticationError", ""};
}
ApiError ApiError::unavailable(std::string message) {
    return ApiError{503, std::move(message), "ServiceUnavailableError", ""};
}

std::string error_body(const ApiError& error) {
    Json e = Json::object();
    e.set("message", Json(error.message));
    e.set("type", Json(error.type));
    e.set("param", error.param.empty() ? Json() : Json(error.param));
    e.set("code", Json(error.status));
    Json body = Json::object();
    body.set("error", std::move(e));
    return body.dump();
}

const char* json_type_name(const Json& v) {
    switch (v.type()) {
        case Json::Type::kNull:
            return "null";
        case Json::Type::kBool:
            return "a boolean";
        case Json::Type::kInt:
            return "an integer";
        case Json::Type::kFloat:
            return "a number";
        case Json::Type::kString:
            return "a string";
        case Json::Type::kArray:
            return "an array";
        case Json::Type::kObject:
            return "an object";
    }
    return "a value";
}

Json json_object(std::initializer_list<std::pair<const char*, Json>> members) {
    Json o = Json::object();
    for (const auto& [k, v] : members)
        o.set(k, v);
    return o;
}

std::string format_number(double v) {
    if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
    std::string s = std::to_string(v);
    while (!s.empty() && s.back() == '0')
        s.pop_back();
    return s;
}

// Message content: a string, null, or a list of parts of which only text is supported (joined with "\n", as
// vLLM's "string" content format does).
bool normalize_content(Fields& f, Json& message, const std::string& where) {
    Json* content = message.find("content");
    if (!content || content->is_null() || content->is_string()) return true;
    if (!content->is_array()) {
        f.fail("'" + where + ".content' must be a string or an array of content parts, got " + json_type_name(*content),
               where + ".content");
        return false;
    }
    std::string text;
    for (size_t j = 0; j < content->as_array().size(); ++j) {
        const Json& part = content->as_array()[j];
        const std::string pwhere = where + ".content[" + std::to_string(j) + "]";
        const Json* type = part.is_object() ? part.find("type") : nullptr;
        if (!type || !type->is_string()) {
            f.fail("'" + pwhere + "' must be an object with a string 'type'", pwhere);
            return false;
        }
        const std::string& t = type->as_string();
        if (t == "text" || t == "input_text" || t == "output_text") {  // the last two: Responses API parts
            const Json* s = part.find("text");
            if (!s || !s->is_string()) {
                f.fail("'" + pwhere + ".text' must be a string", pwhere + ".text");
                return false;
            }
            if (!text.empty()) text += "\n";
            text += s->as_string();
        } else if (t == "image_url" || t == "input_image" || t == "image" || t == "input_audio" || t == "audio_url" ||
                   t == "video_url" || t == "file" || t == "input_file") {
            f.fail("'" + pwhere + "': content of type '" + t +
                       "' is not supported: this server serves text-only models (no vision or audio input yet)",
                   pwhere);
            return false;
        } else {
            f.fail("'" + pwhere + "': unknown content part type '" + t + "'", pwhere);
            return false;
        }
    }
    *content = Json(text);
    return true;
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kMaxInt = std::numeric_limits<int64_t>::max();
constexpr int32_t kMaxTokenId = std::numeric_limits<int32_t>::max();

std::optional<std::vector<int32_t>> token_list(Fields& f, const Json& v, const std::string& param) {
    std::vector<int32_t> ids;
    for (size_t i = 0; i < v.as_array().size(); ++i) {
        const Json& t = v.as_array()[i];
        if (!t.is_int() || t.as_int() < 0 || t.as_int() > kMaxTokenId) {
            f.fail("'" + param + "[" + std::to_string(i) + "]' must be a non-negative token id",
                   param + "[" + std::to_string(i) + "]");
            return std::nullopt;
        }
        ids.push_back(static_cast<int32_t>(t.as_int()));
    }
    return ids;
}

// The sampling fields chat and completions share (OpenAI's and vLLM's extra ones).
void parse_sampling(Fields& f, engine::SamplingParams& p, TextOptions& text, int32_t& priority,
                    std::string& cache_salt) {
    if (auto v = f.integer("n", 1, 128)) p.n = static_cast<int32_t>(*v);
    if (auto v = f.number("temperature", 0.0, kInf)) p.temperature = static_cast<float>(*v);
    if (auto v = f.number("top_p", 0.0, 1.0, /*lo_open=*/true)) p.top_p = static_cast<float>(*v);
    if (auto v = f.integer("top_k", -1, kMaxTokenId)) p.top_k = static_cast<int32_t>(*v);
    if (auto v = f.number("min_p", 0.0, 1.0)) p.min_p = static_cast<float>(*v);
    if (auto v = f.number("repetition_penalty", 0.0, kInf, /*lo_open=*/true))
        p.repetition_penalty = static_cast<float>(*v);
    if (auto v = f.number("presence_penalty", -2.0, 2.0)) p.presence_penalty = static_cast<float>(*v);
    if (auto v = f.number("frequency_penalty", -2.0, 2.0)) p.frequency_penalty = static_cast<float>(*v);
    if (auto v = f.integer("seed", std::numeric_limits<int64_t>::min(), kMaxInt)) p.seed = static_cast<uint64_t>(*v);
    if (auto v = f.integer("min_tokens", 0, kMaxTokenId)) p.min_tokens = static_cast<int32_t>(*v);
    if (auto v = f.boolean("ignore_eos")) p.ignore_eos = *v;
    if (auto v = f.integer("priority", std::numeric_limits<int32_t>::min(), kMaxTokenId))
        priority = static_cast<int32_t>(*v);
    if (auto v = f.string("cache_salt")) cache_salt = *v;

    // max_completion_tokens is the newer OpenAI name; it wins over max_tokens.
    if (auto v = f.integer("max_tokens", 1, kMaxTokenId)) p.max_tokens = static_cast<int32_t>(*v);
    if (auto v = f.integer("max_completion_tokens", 1, kMaxTokenId)) p.max_tokens = static_cast<int32_t>(*v);
    if (!f.failed() && p.max_tokens && p.min_tokens > *p.max_tokens) {
        f.fail("'min_tokens' (" + std::to_string(p.min_tokens) + ") must not exceed 'max_tokens' (" +
                   std::to_string(*p.max_tokens) + ")",
               "min_tokens");
    }

    if (const Json* bias = f.object("logit_bias")) {
        for (const auto& [key, value] : bias->as_object()) {
            const std::string param = "logit_bias." + key;
            char* end = nullptr;
            const long long id = std::strtoll(key.c_str(), &end, 10);
            if (key.empty() || *end != '\0' || id < 0 || id > kMaxTokenId) {
                f.fail("'logit_bias' keys must be token ids, got '" + key + "'", param);
                break;
            }
            if (!value.is_number() || !(value.as_double() >= -100.0 && value.as_double() <= 100.0)) {
                f.fail("'logit_bias' values must be numbers in [-100, 100]", param);
                break;
            }
            p.logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(value.as_double()));
        }
    }
    if (const Json* ids = f.array("stop_token_ids")) {
        if (auto list = token_list(f, *ids, "stop_token_ids")) p.stop_token_ids = std::move(*list);
    }
    if (const Json* stop = f.get("stop"); stop && !f.failed()) {
        if (stop->is_string()) {
            if (!stop->as_string().empty()) text.stop.push_back(stop->as_string());
        } else if (stop->is_array()) {
            for (size_t i = 0; i < stop->as_array().size(); ++i) {
                const Json& s = stop->as_array()[i];
                if (!s.is_string()) {
                    f.fail("'stop[" + std::to_string(i) + "]' must be a string", "stop[" + std::to_string(i) + "]");
                    break;
                }
                if (!s.as_string().empty()) text.stop.push_back(s.as_string());
            }
        } else {
            f.wrong_type("stop", "a string or an array of strings", *stop);
        }
    }
    if (auto v = f.boolean("include_stop_str_in_output")) text.include_stop_str_in_output = *v;
    if (auto v = f.boolean("skip_special_tokens")) text.skip_special_tokens = *v;
    (void)f.boolean("spaces_between_special_tokens");  // byte-level BPE has no spaces to add; accepted
    if (auto v = f.boolean("stream")) text.stream = *v;
    if (const Json* so = f.object("stream_options")) {
        if (!text.stream) {
            f.fail("'stream_options' is only allowed when 'stream' is true", "stream_options");
        } else {
            Fields sf(*so);
            if (auto v = sf.boolean("include_usage")) text.include_usage = *v;
            if (auto v = sf.boolean("continuous_usage_stats")) text.continuous_usage_stats = *v;
            if (sf.error) f.fail(sf.error->message, "stream_options." + sf.error->param);
        }
    }

    // Asked for but not available: a clear 400 rather than a silently different answer.
    if (f.failed()) return;
    if (auto v = f.integer("best_of", 1, kMaxInt); v && *v != p.n) {
        f.fail("'best_of' is not supported (as in vLLM V1); use 'n'", "best_of");
    }
    if (auto v = f.boolean("use_beam_search"); v && *v) f.fail("beam search is not supported", "use_beam_search");
    if (auto v = f.integer("prompt_logprobs", 0, engine::kMaxTopLogprobs)) {
        // vLLM's extra: the log-probabilities of the prompt's tokens, in the (non-streamed) response.
        if (text.stream) {
            f.fail("'prompt_logprobs' is not available when 'stream' is true", "prompt_logprobs");
        } else {
            p.prompt_logprobs = static_cast<int32_t>(*v);
        }
    }
    if (f.get("allowed_token_ids")) f.fail("'allowed_token_ids' is not supported yet", "allowed_token_ids");
    if (f.get("bad_words")) f.fail("'bad_words' is not supported yet", "bad_words");
    if (f.get("truncate_prompt_tokens"))
        f.fail("'truncate_prompt_tokens' is not supported yet", "truncate_prompt_tokens");
}

// response_format, structured_outputs and guided_*: at most one, well formed (the grammar is compiled later).
void parse_structured(Fields& f, const Json& body, const engine::SamplingParams& p,
                      std::optional<StructuredOutputRequest>& out) {
    if (f.failed()) return;
    if (auto err = parse_structured_output(body, out)) {
        f.fail(err->message, err->param);
        return;
    }
    if (out && p.min_tokens > 0) f.fail("'min_tokens' cannot be combined with structured output", "min_tokens");
}

void parse_messages(Fields& f, const Json* messages, Json& out) {
    if (f.failed()) return;
    if (!messages) {
        f.fail("'messages' is required", "messages");
        return;
    }
    if (!messages->is_array()) {
        f.wrong_type("messages", "an array", *messages);
        return;
    }
    if (messages->as_array().empty()) {
        f.fail("'messages' must not be empty", "messages");
        return;
    }
    out = Json::array();
    for (size_t i = 0; i < messages->as_array().size(); ++i) {
        const std::string where = "messages[" + std::to_string(i) + "]";
        Json m = messages->as_array()[i];
        if (!m.is_object()) {
            f.fail("'" + where + "' must be an object, got " + json_type_name(m), where);
            return;
        }
        const Json* role = m.find("role");
        if (!role || !role->is_string()) {
            f.fail("'" + where + ".role' is required and must be a string", where + ".role");
            return;
        }
        const std::string& r = role->as_string();
        if (r != "system" && r != "user" && r != "assistant" && r != "tool" && r != "developer" && r != "function") {
            f.fail("'" + where + ".role' must be one of system, developer, user, assistant, tool; got '" + r + "'",
                   where + ".role");
            return;
        }
        if (!normalize_content(f, m, where)) return;
        const Json* tool_calls = m.find("tool_calls");
        if (tool_calls && !tool_calls->is_null() && !tool_calls->is_array()) {
            f.wrong_type((where + ".tool_calls").c_str(), "an array", *tool_calls);
            f.error->param = where + ".tool_calls";
            return;
        }
        const Json* content = m.find("content");
        if (!content || content->is_null()) {
            if (r != "assistant") {
                f.fail("'" + where + ".content' is required for role '" + r + "'", where + ".content");
                return;
            }
            // An assistant turn that only called tools comes back with "content": null (the openai SDK, LangChain,
            // litellm); templates expect a string there, and vLLM gives them "". (set() may move m's members: no
            // pointer into m is used after it.)
            m.set("content", Json(""));
        }
        out.push_back(std::move(m));
    }
}

void parse_tools(Fields& f, ChatRequest& out) {
    if (const Json* tools = f.array("tools")) {
        for (size_t i = 0; i < tools->as_array().size(); ++i) {
            const std::string where = "tools[" + std::to_string(i) + "]";
            const Json& t = tools->as_array()[i];
            const Json* type = t.is_object() ? t.find("type") : nullptr;
            const Json* fn = t.is_object() ? t.find("function") : nullptr;
            if (!type || !type->is_string() || type->as_string() != "function") {
                f.fail("'" + where + ".type' must be 'function'", where + ".type");
                return;
            }
            const Json* name = fn && fn->is_object() ? fn->find("name") : nullptr;
            if (!name || !name->is_string() || name->as_string().empty()) {
                f.fail("'" + where + ".function.name' is required", where + ".function.name");
                return;
            }
        }
        if (!tools->as_array().empty()) out.tools = *tools;
    }
    if (const Json* choice = f.get("tool_choice"); choice && !f.failed()) {
        if (choice->is_string()) {
            const std::string& c = choice->as_string();
            if (c != "none" && c != "auto" && c != "required") {
                f.fail("'tool_choice' must be 'none', 'auto', 'required' or a named function, got '" + c + "'",
                       "tool_choice");
                return;
            }
            out.tool_choice = c;
        } else if (choice->is_object()) {
            const Json* fn = choice->find("function");
            const Json* name = fn && fn->is_object() ? fn->find("name") : nullptr;
            if (!name || !name->is_string()) {
                f.fail("'tool_choice.function.name' is required for a named tool choice", "tool_choice.function.name");
                return;
            }
            bool known = false;
            if (out.tools.is_array())
                for (const Json& t : out.tools.as_array())
                    known = known || t.find("function")->find("name")->as_string() == name->as_string();
            if (!known) {
                f.fail("'tool_choice' names the function '" + name->as_string() + "', which is not in 'tools'",
                       "tool_choice");
                return;
            }
            out.tool_choice = "function";
            out.tool_choice_name = name->as_string();
        } else {
            f.wrong_type("tool_choice", "a string or an object", *choice);
            return;
        }
        if ((out.tool_choice == "required") && out.tools.is_null()) {
            f.fail("'tool_choice' is 'required' but no 'tools' were given", "tool_choice");
        }
    } else if (out.tools.is_null()) {
        out.tool_choice = "none";
    }
    if (auto v = f.boolean("parallel_tool_calls")) out.parallel_tool_calls = *v;
}

}  // namespace

std::optional<ApiError> parse_chat_request(const Json& body, ChatRequest& out) {
    if (!body.is_object()) return ApiError::bad_request("the request body must be a JSON object");
    Fields f(body);
    if (auto v = f.string("model")) out.model = *v;
    parse_messages(f, f.get("messages"), out.messages);
    parse_sampling(f, out.params, out.text, out.priority, out.cache_salt);
    if (auto v = f.boolean("logprobs")) out.params.logprobs = *v;
    if (auto v = f.integer("top_logprobs", 0, engine::kMaxTopLogprobs)) {
        out.params.top_logprobs = static_cast<int32_t>(*v);
        if (*v > 0 && !out.params.logprobs) f.fail("'top_logprobs' requires 'logprobs' to be true", "top_logprobs");
    }
    parse_tools(f, out);
    if (auto v = f.boolean("add_generation_prompt")) out.add_generation_prompt = *v;
    if (auto v = f.boolean("continue_final_message")) out.continue_final_message = *v;
    if (auto v = f.boolean("add_special_tokens")) out.add_special_tokens = *v;
    if (auto v = f.boolean("echo")) out.echo = *v;
    if (auto v = f.boolean("include_reasoning")) out.include_reasoning = *v;
    if (const Json* k = f.object("chat_template_kwargs")) out.chat_template_kwargs = *k;
    if (auto v = f.string("chat_template")) out.chat_template = *v;
    (void)f.string("user");
    if (!f.failed() && out.continue_final_message && out.add_generation_prompt && f.get("add_generation_prompt")) {
        f.fail("'continue_final_message' and 'add_generation_prompt' cannot both be true", "continue_final_message");
    }
    if (!f.failed() && out.continue_final_message) {
        out.add_generation_prompt = false;
        const Json& last = out.messages.as_array().back();
        if (last.find("role")->as_string() != "assistant") {
            f.fail("'continue_final_message' needs the last message to be from the assistant",
                   "continue_final_message");
        }
    }
    parse_structured(f, body, out.params, out.structured);
    return f.error;
}

std::optional<ApiError> parse_completion_request(const Json& body, CompletionRequest& out) {
    if (!body.is_object()) return ApiError::bad_request("the request body must be a JSON object");
    Fields f(body);
    if (auto v = f.string("model")) out.model = *v;
    parse_prompt_list(f, "prompt", out.prompts);
    parse_sampling(f, out.params, out.text, out.priority, out.cache_salt);
    if (auto v = f.integer("logprobs", 0, engine::kMaxTopLogprobs)) {
        out.params.logprobs = true;
        out.params.top_logprobs = static_cast<int32_t>(*v);
    }
    if (auto v = f.boolean("echo")) out.echo = *v;
    if (auto v = f.boolean("add_special_tokens")) out.add_special_tokens = *v;
    if (auto v = f.string("suffix"); v && !v->empty()) f.fail("'suffix' is not supported", "suffix");
    (void)f.string("user");
    if (!f.failed() && out.prompts.size() * static_cast<size_t>(out.params.n) > 128) {
        f.fail("a request may ask for at most 128 completions (prompts x n)", "n");
    }
    parse_structured(f, body, out.params, out.structured);
    return f.error;
}

void parse_prompt_list(Fields& f, const std::string& name, std::vector<Prompt>& out) {
    const Json* prompt = f.get(name.c_str());
    if (!prompt) {
        f.fail("'" + name + "' is required", name);
    } else if (prompt->is_string()) {
        out.push_back(Prompt{prompt->as_string(), {}, false});
    } else if (prompt->is_array() && !prompt->as_array().empty()) {
        const Json::Array& items = prompt->as_array();
        if (items[0].is_int()) {
            if (auto ids = token_list(f, *prompt, name)) out.push_back(Prompt{"", std::move(*ids), true});
        } else {
            for (size_t i = 0; i < items.size() && !f.failed(); ++i) {
                const std::string where = name + "[" + std::to_string(i) + "]";
                if (items[i].is_string()) {
                    out.push_back(Prompt{items[i].as_string(), {}, false});
                } else if (items[i].is_array() && !items[i].as_array().empty()) {
                    if (auto ids = token_list(f, items[i], where)) out.push_back(Prompt{"", std::move(*ids), true});
                } else {
                    f.fail("'" + where + "' must be a string or a non-empty list of token ids", where);
                }
            }
        }
    } else {
        f.fail("'" + name + "' must be a string, a list of strings, a list of token ids or a list of such lists", name);
    }
}

}  // namespace pagoda::server::openai
