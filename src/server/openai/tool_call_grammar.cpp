#include "server/openai/tool_call_grammar.h"

#include <algorithm>
#include <cctype>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/json_string.h"
#include "grammar/regex.h"

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

// The tools' entries are OpenAI tool objects whose "function" the request parser has checked.
const Json& function_of(const Json& tool) {
    return *tool.find("function");
}

Json parameters_of(const Json& fn) {
    const Json* params = fn.find("parameters");
    return params && !params->is_null() ? *params : Json::object({{"type", Json("object")}});
}

// A JSON pointer token (RFC 6901): "~" and "/" escaped.
std::string pointer_token(const std::string& key) {
    std::string out;
    for (char c : key)
        out += c == '~' ? std::string("~0") : c == '/' ? std::string("~1") : std::string(1, c);
    return out;
}

void prefix_refs(grammar::Expr& e, const std::string& prefix) {
    if (e.kind == grammar::Expr::Kind::kRef) e.text = prefix + e.text;
    for (grammar::Expr& item : e.items)
        prefix_refs(item, prefix);
}

// Adds the rules of `part` to `into` under names starting with `prefix`; returns the reference to its root.
grammar::Expr embed(grammar::GrammarSource& into, grammar::GrammarSource part, const std::string& prefix) {
    for (auto& [name, body] : part.rules) {
        prefix_refs(body, prefix);
        into.rules.emplace_back(prefix + name, std::move(body));
    }
    return grammar::ref(prefix + part.root);
}

// Does the qwen3_coder parser keep this property's text as a string? (xml_param_convert.cpp: no "type" counts as
// "string", as in vLLM.)
bool raw_text_property(const Json& prop) {
    const Json* type = prop.is_object() ? prop.find("type") : nullptr;
    if (!type) return true;
    if (!type->is_string()) return false;
    std::string t;
    for (char c : type->as_string())
        if (c != ' ' && c != '\t' && c != '\n') t += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return t == "string" || t == "str" || t == "text" || t == "varchar" || t == "char" || t == "enum";
}

// Text without '<' (it would start a closing tag) that is not "null" in any case (the parser reads that as null).
grammar::Expr text_but_null() {
    using grammar::alt, grammar::cls, grammar::empty, grammar::seq, grammar::star;
    const grammar::Expr rest = star(cls({{'<', '<'}}, true));
    // Built from the back: after the first k letters of "null" the text may end, leave the word (any other
    // character, then anything), or go on with letter k + 1; after all four it must go on.
    grammar::Expr tail = seq({cls({{'<', '<'}}, true), rest});
    const char word[] = "null";
    for (int k = 3; k >= 0; --k) {
        const char lo = word[k], up = static_cast<char>(lo - 'a' + 'A');
        grammar::Expr leave =
            seq({cls({{'<', '<'}, {uint32_t(lo), uint32_t(lo)}, {uint32_t(up), uint32_t(up)}}, true), rest});
        grammar::Expr next = seq({cls({{uint32_t(lo), uint32_t(lo)}, {uint32_t(up), uint32_t(up)}}), std::move(tail)});
        tail = alt({empty(), std::move(leave), std::move(next)});
    }
    return tail;
}

// The schema a local "$ref" (a JSON pointer into `root`) names, or nullptr.
const Json* resolve_ref(const Json& root, const std::string& ref) {
    if (ref.rfind("#", 0) != 0) return nullptr;
    const Json* at = &root;
    size_t pos = 1;
    while (at && pos < ref.size() && ref[pos] == '/') {
        const size_t end = std::min(ref.find('/', pos + 1), ref.size());
        std::string token;
        for (size_t i = pos + 1; i < end; ++i) {
            if (ref[i] == '~' && i + 1 < end)
                token += ref[++i] == '1' ? '/' : '~';
            else
                token += ref[i];
        }
        at = at->is_object() ? at->find(token) : nullptr;
        pos = end;
    }
    return at;
}

// The raw text of a string property: its enum or const, its pattern or format, its length bounds, else any text.
// A property that is only a "$ref" is read as text too (it has no "type"): its target gives the constraints.
Result<grammar::Expr> raw_text_value(const Json& params, const Json& property) {
    using grammar::Expr;
    const Json* target = &property;
    for (int hops = 0; target && target->is_object() && hops < 8; ++hops) {
        const Json* ref = target->find("$ref");
        if (!ref || !ref->is_string()) break;
        target = resolve_ref(params, ref->as_string());
    }
    if (!target || !target->is_object()) return text_but_null();
    const Json& prop = *target;
    std::vector<Expr> literals;
    if (const Json* c = prop.find("const"); c && c->is_string()) literals.push_back(grammar::lit(c->as_string()));
    if (const Json* e = prop.find("enum"); e && e->is_array())
        for (const Json& v : e->as_array())
            if (v.is_string()) literals.push_back(grammar::lit(v.as_string()));
    if (!literals.empty()) return grammar::alt(std::move(literals));
    const Json* pattern = prop.find("pattern");
    const Json* format = prop.find("format");
    const char* format_re = format && format->is_string() ? grammar::format_regex(format->as_string()) : nullptr;
    if ((pattern && pattern->is_string()) || format_re) {
        auto re = grammar::parse_regex(pattern && pattern->is_string() ? std::string_view(pattern->as_string())
                                                                       : std::string_view(format_re));
        if (!re.ok()) return Status::error("'pattern': " + re.message());
        return std::move(re).value();
    }
    const Json* min_len = prop.find("minLength");
    const Json* max_len = prop.find("maxLength");
    if ((min_len && min_len->is_int()) || (max_len && max_len->is_int())) {
        const int64_t lo = min_len && min_len->is_int() ? min_len->as_int() : 0;
        const int64_t hi = max_len && max_len->is_int() ? max_len->as_int() : -1;
        if (lo < 0 || lo > grammar::kMaxRepeatBound || hi > grammar::kMaxRepeatBound || (hi >= 0 && hi < lo))
            return Status::error("'minLength'/'maxLength' out of range");
        return grammar::repeat(grammar::cls({{'<', '<'}}, true), static_cast<int32_t>(lo), static_cast<int32_t>(hi));
    }
    return text_but_null();
}

}  // namespace

Result<grammar::GrammarSource> hermes_tool_call_grammar(const Json& tools, bool parallel) {
    // One schema for the call object: anyOf over the tools of {"name": const, "arguments": parameters}.
    Json defs = Json::object();
    Json calls = Json::array();
    for (size_t i = 0; i < tools.as_array().size(); ++i) {
        const Json& fn = function_of(tools.as_array()[i]);
        const std::string def = "tool" + std::to_string(i);
        Json schema = parameters_of(fn);
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

Result<grammar::GrammarSource> xml_tool_call_grammar(const Json& tools, bool parallel) {
    using grammar::lit, grammar::ref, grammar::seq;
    grammar::GrammarSource g;
    std::vector<grammar::Expr> calls;
    for (size_t i = 0; i < tools.as_array().size(); ++i) {
        const Json& fn = function_of(tools.as_array()[i]);
        const std::string& name = fn.find("name")->as_string();
        Json params = parameters_of(fn);
        const Json* props = params.find("properties");
        std::vector<grammar::Expr> body{lit("<tool_call>\n<function=" + name + ">\n")};
        if (props && props->is_object()) {
            std::vector<std::string> required;
            if (const Json* r = params.find("required"); r && r->is_array())
                for (const Json& k : r->as_array())
                    if (k.is_string()) required.push_back(k.as_string());
            // Non-string values go through the JSON Schema compiler, with the parameters schema under $defs so
            // that its own references ("#/$defs/x") still resolve.
            Json rebased = params;
            rebase_refs(rebased, "#/$defs/params");
            size_t k = 0;
            for (const auto& [key, prop] : props->as_object()) {
                const std::string prefix = "t" + std::to_string(i) + "p" + std::to_string(k++) + "-";
                grammar::Expr value;
                if (raw_text_property(prop)) {
                    auto text = raw_text_value(params, prop);
                    if (!text.ok()) return Status::error("tools: parameter '" + key + "': " + text.message());
                    value = std::move(text).value();
                } else {
                    const Json one = Json::object({{"$defs", Json::object({{"params", rebased}})},
                                                   {"$ref", Json("#/$defs/params/properties/" + pointer_token(key))}});
                    auto part = grammar::json_schema_grammar(one);
                    if (!part.ok()) return Status::error("tools: parameter '" + key + "': " + part.message());
                    value = embed(g, std::move(part).value(), prefix);
                }
                grammar::Expr param =
                    seq({lit("<parameter=" + key + ">\n"), std::move(value), lit("\n</parameter>\n")});
                const bool needed = std::find(required.begin(), required.end(), key) != required.end();
                body.push_back(needed ? std::move(param) : grammar::opt(std::move(param)));
            }
        }
        body.push_back(lit("</function>\n</tool_call>"));
        calls.push_back(seq(std::move(body)));
    }
    g.set_rule("tool-call", grammar::alt(std::move(calls)));
    grammar::Expr root = ref("tool-call");
    if (parallel) root = seq({root, grammar::star(seq({lit("\n"), root}))});
    g.set_rule("root", std::move(root));
    return g;
}

}  // namespace pagoda::server::openai
