#include "server/openai/structured_output.h"

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "server/openai/service_context.h"
#include "server/openai/tool_call_grammar.h"

namespace pagoda::server::openai {

namespace {

using Kind = StructuredOutputRequest::Kind;

// Compiled grammars kept for reuse (each with a mask cache of at most 16 MB: 512 MB at worst).
constexpr size_t kMaxCachedGrammars = 32;

// A JSON schema given as an object, or as the text of one (vLLM accepts both for guided_json).
std::optional<ApiError> schema_from(const Json& v, const std::string& param, StructuredOutputRequest& out) {
    if (v.is_string()) {
        auto parsed = Json::parse(v.as_string());
        if (!parsed.ok()) return ApiError::bad_request("'" + param + "' is not valid JSON: " + parsed.message(), param);
        out.schema = std::move(parsed).value();
    } else if (v.is_object() || v.is_bool()) {
        out.schema = v;
    } else {
        return ApiError::bad_request("'" + param + "' must be a JSON schema (an object or its text)", param);
    }
    out.kind = Kind::kJsonSchema;
    return std::nullopt;
}

std::optional<ApiError> string_from(const Json& v, const std::string& param, Kind kind, StructuredOutputRequest& out) {
    if (!v.is_string() || v.as_string().empty())
        return ApiError::bad_request("'" + param + "' must be a non-empty string", param);
    out.kind = kind;
    out.text = v.as_string();
    return std::nullopt;
}

std::optional<ApiError> choices_from(const Json& v, const std::string& param, StructuredOutputRequest& out) {
    if (!v.is_array() || v.as_array().empty())
        return ApiError::bad_request("'" + param + "' must be a non-empty array of strings", param);
    for (const Json& c : v.as_array()) {
        if (!c.is_string()) return ApiError::bad_request("'" + param + "' must list strings", param);
        out.choices.push_back(c.as_string());
    }
    out.kind = Kind::kChoice;
    return std::nullopt;
}

std::optional<ApiError> from_response_format(const Json& rf, std::optional<StructuredOutputRequest>& out) {
    if (!rf.is_object()) return ApiError::bad_request("'response_format' must be an object", "response_format");
    const Json* type = rf.find("type");
    if (!type || !type->is_string())
        return ApiError::bad_request("'response_format.type' must be a string", "response_format.type");
    const std::string& t = type->as_string();
    if (t == "text") return std::nullopt;
    StructuredOutputRequest r;
    r.param = "response_format";
    if (t == "json_object") {
        r.kind = Kind::kJsonObject;
    } else if (t == "json_schema") {
        const Json* js = rf.find("json_schema");
        if (!js || !js->is_object())
            return ApiError::bad_request("'response_format.json_schema' is required for type 'json_schema'",
                                         "response_format.json_schema");
        const Json* schema = js->find("schema");
        if (!schema || schema->is_null())
            return ApiError::bad_request("'response_format.json_schema.schema' is required",
                                         "response_format.json_schema.schema");
        r.param = "response_format.json_schema.schema";
        if (auto err = schema_from(*schema, r.param, r)) return err;
    } else {
        return ApiError::bad_request(
            "'response_format.type' must be 'text', 'json_object' or 'json_schema', got '" + t + "'",
            "response_format.type");
    }
    out = std::move(r);
    return std::nullopt;
}

std::optional<ApiError> from_structured_outputs(const Json& so, std::optional<StructuredOutputRequest>& out) {
    if (!so.is_object()) return ApiError::bad_request("'structured_outputs' must be an object", "structured_outputs");
    int given = 0;
    StructuredOutputRequest r;
    for (const auto& [key, v] : so.as_object()) {
        if (v.is_null()) continue;
        const std::string param = "structured_outputs." + key;
        std::optional<ApiError> err;
        if (key == "json") {
            err = schema_from(v, param, r);
        } else if (key == "regex") {
            err = string_from(v, param, Kind::kRegex, r);
        } else if (key == "choice") {
            err = choices_from(v, param, r);
        } else if (key == "grammar") {
            err = string_from(v, param, Kind::kGrammar, r);
        } else if (key == "json_object") {
            if (!v.is_bool()) return ApiError::bad_request("'" + param + "' must be a boolean", param);
            if (!v.as_bool()) continue;
            r.kind = Kind::kJsonObject;
        } else if (key == "structural_tag") {
            return ApiError::bad_request("'structured_outputs.structural_tag' is not supported", param);
        } else {
            continue;  // options such as disable_any_whitespace or backend: the one engine here has no such knobs
        }
        if (err) return err;
        r.param = param;
        ++given;
    }
    if (given > 1)
        return ApiError::bad_request(
            "'structured_outputs' must set only one of json, regex, choice, grammar, json_object",
            "structured_outputs");
    if (given == 1) out = std::move(r);
    return std::nullopt;
}

std::string cache_key(const StructuredOutputRequest& r) {
    switch (r.kind) {
        case Kind::kJsonSchema:
            return "s" + r.schema.dump();
        case Kind::kJsonObject:
            return "o";
        case Kind::kRegex:
            return "r" + r.text;
        case Kind::kGrammar:
            return "g" + r.text;
        case Kind::kChoice: {
            std::string k = "c";
            for (const std::string& c : r.choices)
                k += std::to_string(c.size()) + ":" + c;
            return k;
        }
    }
    return {};
}

}  // namespace

std::optional<ApiError> parse_structured_output(const Json& body, std::optional<StructuredOutputRequest>& out) {
    out.reset();
    std::optional<StructuredOutputRequest> found;
    int sources = 0;
    auto take = [&](std::optional<StructuredOutputRequest>& r) {
        if (r) ++sources, found = std::move(r);
    };
    if (const Json* rf = body.find("response_format"); rf && !rf->is_null()) {
        std::optional<StructuredOutputRequest> r;
        if (auto err = from_response_format(*rf, r)) return err;
        take(r);
    }
    if (const Json* so = body.find("structured_outputs"); so && !so->is_null()) {
        std::optional<StructuredOutputRequest> r;
        if (auto err = from_structured_outputs(*so, r)) return err;
        take(r);
    }
    struct Guided {
        const char* field;
        Kind kind;
    };
    for (const Guided g : {Guided{"guided_json", Kind::kJsonSchema}, Guided{"guided_regex", Kind::kRegex},
                           Guided{"guided_choice", Kind::kChoice}, Guided{"guided_grammar", Kind::kGrammar}}) {
        const Json* v = body.find(g.field);
        if (!v || v->is_null()) continue;
        StructuredOutputRequest r;
        r.param = g.field;
        std::optional<ApiError> err;
        if (g.kind == Kind::kJsonSchema)
            err = schema_from(*v, g.field, r);
        else if (g.kind == Kind::kChoice)
            err = choices_from(*v, g.field, r);
        else
            err = string_from(*v, g.field, g.kind, r);
        if (err) return err;
        std::optional<StructuredOutputRequest> some(std::move(r));
        take(some);
    }
    if (const Json* v = body.find("guided_json_object"); v && v->is_bool() && v->as_bool()) {
        std::optional<StructuredOutputRequest> r(
            StructuredOutputRequest{Kind::kJsonObject, {}, {}, {}, "guided_json_object"});
        take(r);
    }
    if (sources > 1)
        return ApiError::bad_request(
            "only one structured-output request is allowed (response_format, structured_outputs or one guided_* field)",
            found->param);
    out = std::move(found);
    return std::nullopt;
}

GrammarCompiler::GrammarCompiler(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

std::shared_ptr<const grammar::TokenVocabulary> GrammarCompiler::vocabulary() {
    // Built on first use (151k strings for Qwen): a server that never sees structured output never pays for it.
    std::call_once(vocab_once_, [this] {
        std::vector<std::string> bytes(static_cast<size_t>(tokenizer_.vocab_size()));
        std::vector<int32_t> excluded;
        for (int32_t id = 0; id < tokenizer_.vocab_size(); ++id) {
            // Special tokens (EOS, <|im_start|>, ...) never come from a grammar; the engine allows EOS where the
            // grammar may end. Non-special added tokens (<tool_call>) are their text.
            if (tokenizer_.is_special(id) || !tokenizer_.is_valid_id(id))
                excluded.push_back(id);
            else
                bytes[id] = std::string(tokenizer_.token_bytes(id));
        }
        vocab_ = std::make_shared<const grammar::TokenVocabulary>(std::move(bytes), excluded);
    });
    return vocab_;
}

GrammarCompiler::Compiled GrammarCompiler::compile(const StructuredOutputRequest& request) {
    return cached(cache_key(request), request.param, [&]() -> Result<grammar::GrammarSource> {
        switch (request.kind) {
            case Kind::kJsonSchema:
                return grammar::json_schema_grammar(request.schema);
            case Kind::kJsonObject:
                return grammar::json_object_grammar();
            case Kind::kRegex:
                return grammar::regex_grammar(request.text);
            case Kind::kChoice:
                return grammar::choice_grammar(request.choices);
            case Kind::kGrammar:
                return grammar::parse_gbnf(request.text);
        }
        return Status::error("unknown structured output kind");
    });
}

GrammarCompiler::Compiled GrammarCompiler::compile_tool_calls(const Json& tools, bool parallel, bool xml) {
    return cached(std::string(xml ? "x" : "h") + (parallel ? "T" : "t") + tools.dump(), "tools", [&] {
        return xml ? xml_tool_call_grammar(tools, parallel) : hermes_tool_call_grammar(tools, parallel);
    });
}

GrammarCompiler::Compiled GrammarCompiler::cached(const std::string& key, const std::string& param,
                                                  const std::function<Result<grammar::GrammarSource>()>& make_source) {
    {
        std::lock_guard lock(mu_);
        if (auto it = by_key_.find(key); it != by_key_.end()) {
            lru_.splice(lru_.begin(), lru_, it->second);
            return it->second->second;
        }
    }
    const Result<grammar::GrammarSource> source = make_source();
    if (!source.ok()) return ApiError::bad_request(source.message(), param);
    auto compiled = grammar::compile_grammar(*source);
    if (!compiled.ok()) return ApiError::bad_request(compiled.message(), param);
    auto g = std::make_shared<const grammar::CompiledGrammar>(std::move(compiled).value(), vocabulary());
    std::lock_guard lock(mu_);
    if (auto it = by_key_.find(key); it != by_key_.end()) return it->second->second;  // compiled meanwhile
    lru_.emplace_front(key, g);
    by_key_[key] = lru_.begin();
    if (lru_.size() > kMaxCachedGrammars) {
        by_key_.erase(lru_.back().first);
        lru_.pop_back();
    }
    return g;
}

std::optional<ApiError> apply_structured_output(const ServedModel& model,
                                                const std::optional<StructuredOutputRequest>& structured,
                                                engine::SamplingParams& params) {
    if (!structured) return std::nullopt;
    auto compiled = model.grammars.compile(*structured);
    if (auto* err = std::get_if<ApiError>(&compiled)) return *err;
    params.grammar = std::get<std::shared_ptr<const grammar::CompiledGrammar>>(std::move(compiled));
    return std::nullopt;
}

}  // namespace pagoda::server::openai
