// ChatTemplate: loading a model's chat template(s) and building the rendering context as transformers does
// (utils/chat_template_utils.py: _normalize_chat_messages, _alias_reasoning_fields, render_jinja_template).
#include "chat/chat_template.h"

#include <filesystem>
#include <system_error>

#include "chat/jinja/template.h"
#include "common/file.h"

namespace pagoda::chat {

struct ChatTemplate::Impl {
    struct Named {
        std::string name;
        std::string source;
        std::shared_ptr<jinja::Template> compiled;
    };
    std::vector<Named> templates;  // one unnamed, or several named ones
    Json special_tokens = Json::object();
};

ChatTemplate::ChatTemplate(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;
ChatTemplate::~ChatTemplate() = default;

namespace {

// transformers' SPECIAL_TOKENS_ATTRIBUTES: the named tokens apply_chat_template passes to the template.
constexpr const char* kSpecialTokenNames[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                              "pad_token", "cls_token", "mask_token"};

void add_token(Json& out, const std::string& name, const Json& v) {
    if (v.is_string()) {
        out.set(name, v);
    } else if (v.is_object()) {  // an AddedToken written as {"content": ..., ...}
        if (const Json* content = v.find("content"); content && content->is_string()) out.set(name, *content);
    }
}

Json special_tokens_from(const Json& config) {
    Json out = Json::object();
    if (!config.is_object()) return out;
    for (const char* name : kSpecialTokenNames)
        if (const Json* v = config.find(name)) add_token(out, name, *v);
    // transformers 5 also exposes model-specific named tokens ("extra_special_tokens" as a mapping).
    if (const Json* extra = config.find("extra_special_tokens"); extra && extra->is_object())
        for (const auto& [name, v] : extra->as_object())
            add_token(out, name, v);
    return out;
}

Status add_template(std::vector<std::pair<std::string, std::string>>& out, const Json& value,
                    const std::string& where) {
    if (value.is_string()) {
        out.emplace_back("", value.as_string());
        return ok_status();
    }
    if (value.is_array()) {
        for (const auto& item : value.as_array()) {
            const Json* name = item.find("name");
            const Json* tmpl = item.find("template");
            if (!name || !tmpl || !name->is_string() || !tmpl->is_string())
                return Status::error(where + ": chat_template list entries need string \"name\" and \"template\"");
            out.emplace_back(name->as_string(), tmpl->as_string());
        }
        if (out.empty()) return Status::error(where + ": chat_template list is empty");
        return ok_status();
    }
    return Status::error(where + ": chat_template must be a string or a list of {name, template}");
}

Result<std::unique_ptr<ChatTemplate::Impl>> compile(std::vector<std::pair<std::string, std::string>> sources,
                                                    const Json& config, const std::string& where) {
    auto impl = std::make_unique<ChatTemplate::Impl>();
    impl->special_tokens = special_tokens_from(config);
    for (auto& [name, source] : sources) {
        auto t = jinja::Template::parse(source);
        if (!t.ok())
            return Status::error(where + (name.empty() ? "" : " (template '" + name + "')") + ": " + t.message());
        impl->templates.push_back(
            {std::move(name), std::move(source), std::make_shared<jinja::Template>(std::move(t).value())});
    }
    return impl;
}

}  // namespace

Result<ChatTemplate> ChatTemplate::from_string(std::string_view source, const Json& tokenizer_config) {
    std::vector<std::pair<std::string, std::string>> sources{{"", std::string(source)}};
    PAGODA_ASSIGN_OR_RETURN(auto impl, compile(std::move(sources), tokenizer_config, "chat template"));
    return ChatTemplate(std::move(impl));
}

Result<ChatTemplate> ChatTemplate::from_model_dir(const std::string& dir) {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) return Status::error(dir + ": not a directory");
    Json config;
    const std::string config_path = dir + "/tokenizer_config.json";
    if (file_exists(config_path)) {
        PAGODA_ASSIGN_OR_RETURN(std::string text, read_file(config_path));
        auto parsed = Json::parse(text);
        if (!parsed.ok()) return Status::error(config_path + ": " + parsed.message());
        config = std::move(parsed).value();
    }
    std::vector<std::pair<std::string, std::string>> sources;
    std::string where;
    // transformers gives chat_template.jinja precedence over the copy inside tokenizer_config.json.
    if (const std::string jinja_path = dir + "/chat_template.jinja"; file_exists(jinja_path)) {
        PAGODA_ASSIGN_OR_RETURN(std::string text, read_file(jinja_path));
        sources.emplace_back("", std::move(text));
        where = jinja_path;
    } else if (const std::string json_path = dir + "/chat_template.json"; file_exists(json_path)) {
        PAGODA_ASSIGN_OR_RETURN(std::string text, read_file(json_path));
        auto parsed = Json::parse(text);
        if (!parsed.ok()) return Status::error(json_path + ": " + parsed.message());
        const Json* t = parsed->find("chat_template");
        if (!t) return Status::error(json_path + ": no \"chat_template\" key");
        PAGODA_RETURN_IF_ERROR(add_template(sources, *t, json_path));
        where = json_path;
    } else if (const Json* t = config.find("chat_template"); t && !t->is_null()) {
        PAGODA_RETURN_IF_ERROR(add_template(sources, *t, config_path));
        where = config_path;
    } else {
        return Status::error(dir +
                             ": no chat template (looked for chat_template.jinja, chat_template.json and "
                             "\"chat_template\" in tokenizer_config.json)");
    }
    PAGODA_ASSIGN_OR_RETURN(auto impl, compile(std::move(sources), config, where));
    return ChatTemplate(std::move(impl));
}

namespace {

const ChatTemplate::Impl::Named* pick(const ChatTemplate::Impl& impl, bool with_tools) {
    if (impl.templates.size() == 1 && impl.templates[0].name.empty()) return &impl.templates[0];
    // transformers' get_chat_template: "tool_use" when tools are given and it exists, else "default".
    if (with_tools)
        for (const auto& t : impl.templates)
            if (t.name == "tool_use") return &t;
    for (const auto& t : impl.templates)
        if (t.name == "default") return &t;
    return nullptr;
}

}  // namespace

const std::string& ChatTemplate::source(bool with_tools) const {
    static const std::string kEmpty;
    const auto* t = pick(*impl_, with_tools);
    return t ? t->source : kEmpty;
}

Result<Json> prepare_messages(const Json& messages) {
    if (!messages.is_array()) return Status::error("messages must be a JSON array");
    if (messages.size() == 0) return Status::error("cannot apply the chat template to an empty conversation");
    Json out = Json::array();
    size_t index = 0;
    for (const auto& message : messages.as_array()) {
        if (!message.is_object())
            return Status::error("messages[" + std::to_string(index) + "] must be an object, got " +
                                 Json::type_name(message.type()));
        // Drop keys whose value is null: templates handle a missing key better than None.
        Json m = Json::object();
        for (const auto& [k, v] : message.as_object())
            if (!v.is_null()) m.set(k, v);
        // vLLM (_postprocess_messages) gives templates tool-call arguments as objects: an object is kept, a JSON
        // string is parsed; anything else (empty or missing, not JSON, JSON but not an object: a client's record of a
        // model's malformed call) becomes {}, so that one bad call in the history does not fail every later turn.
        // An empty tool_calls list is dropped, keeping the template on its plain-assistant path.
        const Json* role = m.find("role");
        Json* calls = m.find("tool_calls");
        if (role && role->is_string() && role->as_string() == "assistant" && calls && calls->is_array()) {
            if (calls->size() == 0) {
                Json kept = Json::object();
                for (auto& [k, v] : m.as_object())
                    if (k != "tool_calls") kept.set(k, std::move(v));
                m = std::move(kept);
            } else {
                for (auto& call : calls->as_array()) {
                    Json* fn = call.find("function");
                    if (!fn || !fn->is_object()) continue;
                    Json* args = fn->find("arguments");
                    if (args && args->is_string()) {
                        auto parsed = Json::parse(args->as_string());
                        if (parsed.ok()) *args = std::move(parsed).value();
                    }
                    if (!args || !args->is_object()) fn->set("arguments", Json::object());
                }
            }
        }
        // transformers aliases reasoning fields: {"thinking": r, **message, "reasoning_content": r}.
        const Json* reasoning = nullptr;
        for (const char* key : {"reasoning_content", "thinking", "reasoning"})
            if (!reasoning) reasoning = m.find(key);
        if (reasoning) {
            Json r = *reasoning;
            Json aliased = Json::object();
            const Json* thinking = m.find("thinking");
            aliased.set("thinking", thinking ? *thinking : r);
            for (const auto& [k, v] : m.as_object())
                if (k != "thinking") aliased.set(k, k == "reasoning_content" ? r : v);
            aliased.set("reasoning_content", r);
            m = std::move(aliased);
        }
        out.push_back(std::move(m));
        ++index;
    }
    return out;
}

Result<std::string> ChatTemplate::render(const Json& messages, const Json& tools, bool add_generation_prompt,
                                         const Json& kwargs) const {
    const auto* t = pick(*impl_, !tools.is_null());
    if (!t) return Status::error("the model has several named chat templates and none is named \"default\"");
    if (!tools.is_null() && !tools.is_array()) return Status::error("tools must be a JSON array or null");
    if (!kwargs.is_null() && !kwargs.is_object()) return Status::error("chat template kwargs must be a JSON object");
    PAGODA_ASSIGN_OR_RETURN(Json prepared, prepare_messages(messages));

    Json context = impl_->special_tokens;
    if (kwargs.is_object()) {
        for (const auto& [k, v] : kwargs.as_object()) {
            if (k == "messages" || k == "tools" || k == "documents" || k == "add_generation_prompt")
                return Status::error("chat template kwarg '" + k + "' is reserved");
            context.set(k, v);
        }
    }
    context.set("messages", std::move(prepared));
    context.set("tools", tools);
    context.set("documents", Json());
    context.set("add_generation_prompt", add_generation_prompt);
    return t->compiled->render(context);
}

}  // namespace pagoda::chat
