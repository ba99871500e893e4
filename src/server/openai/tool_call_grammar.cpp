#include "server/openai/tool_call_grammar.h"

#include "grammar/json_schema.h"

namespace pagoda::server::openai {

namespace {

// References inside a function's parameters point into that schema ("#/$defs/x"); once the schema sits under
// "#/$defs/<tool>" of the combined schema, they point there.
void rebase_refs(Json& schema, const std::string& base) {
    if (schema.is_object()) {
        for (auto& [key, value] : schema.as_object()) {
            if (key == "$ref" && value.is_string() && !value.as_string().empty() && value.as_string()[0] == '#')
                value = Json(base + value.as_string().substr(1));
            else
                rebase_refs(value, base);
        }
    } else if (schema.is_array()) {
        for (Json& v : schema.as_array())
            rebase_refs(v, base);
    }
}

}  // namespace

Result<grammar::GrammarSource> hermes_tool_call_grammar(const Json& tools, bool parallel) {
    // One schema for the call object: anyOf over the tools of {"name": const, "arguments": parameters}.
    Json defs = Json::object();
    Json calls = Json::array();
    for (size_t i = 0; i < tools.as_array().size(); ++i) {
        const Json& fn = *tools.as_array()[i].find("function");
        const std::string def = "tool" + std::to_string(i);
        const Json* params = fn.find("parameters");
        Json schema = params && !params->is_null() ? *params : Json::object({{"type", Json("object")}});
        rebase_refs(schema, "#/$defs/" + def);
        defs.set(def, std::move(schema));
        Json props = Json::object({{"name", Json::object({{"const", *fn.find("name")}})},
                                   {"arguments", Json::object({{"$ref", Json("#/$defs/" + def)}})}});
        calls.push_back(Json::object({{"type", Json("object")},
                                      {"properties", std::move(props)},
                                      {"required", Json::array({Json("name"), Json("arguments")})}}));
    }
    const Json combined = Json::object({{"$defs", std::move(defs)}, {"anyOf", std::move(calls)}});
    auto source = grammar::json_schema_grammar(combined);
    if (!source.ok()) return Status::error("tools: " + source.message());
    grammar::GrammarSource g = std::move(source).value();
    for (auto& [name, body] : g.rules)
        if (name == "root") name = "tool-call-json";
    g.set_rule("tool-call", grammar::seq({grammar::lit("<tool_call>\n"), grammar::ref("tool-call-json"),
                                          grammar::lit("\n</tool_call>")}));
    grammar::Expr root = grammar::ref("tool-call");
    if (parallel) root = grammar::seq({root, grammar::star(grammar::seq({grammar::lit("\n"), root}))});
    g.set_rule("root", std::move(root));
    return g;
}

}  // namespace pagoda::server::openai
