// The schema compiler: one recursive walk producing grammar expressions, with a rule per $ref target (so recursive
// schemas are finite) and per object (its property-order rules).
#include "grammar/json_schema.h"

#include <cmath>
#include <set>
#include <unordered_map>

#include "grammar/grammar.h"
#include "grammar/int_range.h"
#include "grammar/json_string.h"
#include "grammar/regex.h"

namespace pagoda::grammar {

namespace {

// Keywords that constrain instances in ways this compiler does not express: refusing beats ignoring them.
constexpr const char* kUnsupported[] = {"patternProperties",
                                        "propertyNames",
                                        "minProperties",
                                        "maxProperties",
                                        "dependentRequired",
                                        "dependentSchemas",
                                        "dependencies",
                                        "if",
                                        "then",
                                        "else",
                                        "not",
                                        "contains",
                                        "minContains",
                                        "maxContains",
                                        "uniqueItems",
                                        "unevaluatedItems",
                                        "unevaluatedProperties",
                                        "multipleOf",
                                        "$dynamicRef",
                                        "$recursiveRef"};

constexpr int kMaxDepth = 64;

// Keywords that describe without constraining (the specification's annotations, SchemaStore's editor hints,
// "x-" extensions): an allOf branch made of them and object keywords still merges.
bool is_annotation(std::string_view k) {
    for (const char* a : {"title", "description", "markdownDescription", "$comment", "$schema", "$id", "id", "default",
                          "examples", "deprecated", "readOnly", "writeOnly"})
        if (k == a) return true;
    return k.rfind("x-", 0) == 0;
}

struct SchemaError {
    std::string message;
};

// The common rules every schema grammar may reference.
void add_json_basics(GrammarSource& g) {
    const Expr hex = cls({{'0', '9'}, {'A', 'F'}, {'a', 'f'}});
    g.set_rule("json-char", alt({cls({{'"', '"'}, {'\\', '\\'}, {0, 0x1F}}, true),
                                 seq({lit("\\"), alt({cls({{'"', '"'},
                                                           {'\\', '\\'},
                                                           {'/', '/'},
                                                           {'b', 'b'},
                                                           {'f', 'f'},
                                                           {'n', 'n'},
                                                           {'r', 'r'},
                                                           {'t', 't'}}),
                                                      seq({lit("u"), repeat(hex, 4, 4)})})})}));
    g.set_rule("json-string", seq({lit("\""), star(ref("json-char")), lit("\"")}));
    const Expr digit = cls({{'0', '9'}});
    g.set_rule("json-int", seq({opt(lit("-")), alt({lit("0"), seq({cls({{'1', '9'}}), star(digit)})})}));
    g.set_rule("json-number",
               seq({ref("json-int"), opt(seq({lit("."), plus(digit)})),
                    opt(seq({cls({{'e', 'e'}, {'E', 'E'}}), opt(cls({{'+', '+'}, {'-', '-'}})), plus(digit)}))}));
    g.set_rule("json-bool", alt({lit("true"), lit("false")}));
    g.set_rule("json-null", lit("null"));
    g.set_rule("json-value", alt({ref("json-object"), ref("json-array"), ref("json-string"), ref("json-number"),
                                  ref("json-bool"), ref("json-null")}));
    const Expr member = seq({ref("json-string"), lit(":"), ref("json-value")});
    g.set_rule("json-object", seq({lit("{"), opt(seq({member, star(seq({lit(","), member}))})), lit("}")}));
    g.set_rule("json-array",
               seq({lit("["), opt(seq({ref("json-value"), star(seq({lit(","), ref("json-value")}))})), lit("]")}));
}

std::string sanitize(std::string_view s) {
    std::string out;
    for (char c : s)
        out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-') ? c : '-';
    return out.empty() ? std::string("x") : out;
}

class SchemaCompiler {
  public:
    explicit SchemaCompiler(const Json& root) : root_(root) { add_json_basics(g_); }

    GrammarSource run() {
        g_.set_rule("root", compile(root_, "root", 0));
        // $ref targets are compiled here, one after another, not inside the reference: a chain of a thousand
        // definitions each naming the next must not nest a thousand calls deep.
        while (!pending_.empty()) {
            const auto [name, pointer] = std::move(pending_.back());
            pending_.pop_back();
            g_.set_rule(name, compile(resolve(pointer), name, 0));
        }
        return std::move(g_);
    }

  private:
    [[noreturn]] static void fail(const std::string& message) { throw SchemaError{message}; }

    std::string fresh(const std::string& base) { return sanitize(base) + "-" + std::to_string(++counter_); }

    static std::optional<int64_t> int_field(const Json& s, const char* key, bool round_up) {
        const Json* v = s.find(key);
        if (!v || v->is_bool()) return std::nullopt;
        if (!v->is_number()) fail(std::string("'") + key + "' must be a number");
        const double d = v->as_double();
        if (!(std::fabs(d) < 9.0e18)) fail(std::string("'") + key + "' is out of range");
        return static_cast<int64_t>(round_up ? std::ceil(d) : std::floor(d));
    }

    static std::optional<int32_t> count_field(const Json& s, const char* key) {
        const Json* v = s.find(key);
        if (!v) return std::nullopt;
        if (!v->is_int() || v->as_int() < 0) fail(std::string("'") + key + "' must be a non-negative integer");
        if (v->as_int() > kMaxRepeatBound)
            fail(std::string("'") + key + "' above " + std::to_string(kMaxRepeatBound) + " is not supported");
        return static_cast<int32_t>(v->as_int());
    }

    const Json& resolve(const std::string& pointer) {
        if (pointer.empty() || pointer[0] != '#') fail("'$ref' '" + pointer + "' must point into this schema (#...)");
        const Json* at = &root_;
        size_t i = 1;
        while (i < pointer.size()) {
            if (pointer[i] != '/') fail("'$ref' '" + pointer + "' is not a JSON pointer");
            const size_t j = pointer.find('/', i + 1);
            std::string part = pointer.substr(i + 1, j == std::string::npos ? std::string::npos : j - i - 1);
            for (size_t k; (k = part.find("~1")) != std::string::npos;)
                part.replace(k, 2, "/");
            for (size_t k; (k = part.find("~0")) != std::string::npos;)
                part.replace(k, 2, "~");
            const Json* next = nullptr;
            if (at->is_object()) {
                next = at->find(part);
            } else if (at->is_array() && !part.empty() && part.find_first_not_of("0123456789") == std::string::npos) {
                const size_t idx = std::stoul(part);
                if (idx < at->as_array().size()) next = &at->as_array()[idx];
            }
            if (!next) fail("'$ref' '" + pointer + "' points to nothing");
            at = next;
            i = j == std::string::npos ? pointer.size() : j;
        }
        return *at;
    }

    Expr reference(const std::string& pointer) {
        auto it = refs_.find(pointer);
        if (it != refs_.end()) return ref(it->second);
        const std::string name = fresh("ref-" + pointer.substr(pointer.rfind('/') + 1));
        refs_.emplace(pointer, name);
        resolve(pointer);            // a reference to nothing is an error here, naming it
        g_.set_rule(name, empty());  // compiled by run(); the target may refer back to itself
        pending_.emplace_back(name, pointer);
        return ref(name);
    }

    Expr compile(const Json& s, const std::string& name, int depth) {
        if (depth > kMaxDepth) fail("the schema is nested too deeply");
        if (s.is_bool()) {
            if (!s.as_bool()) fail("the schema 'false' matches nothing");
            return ref("json-value");
        }
        if (!s.is_object())
            fail("a schema must be an object or a boolean, got " + std::string(Json::type_name(s.type())));
        for (const char* kw : kUnsupported)
            if (const Json* v = s.find(kw)) {
                if (std::string_view(kw) == "uniqueItems" && v->is_bool() && !v->as_bool()) continue;
                fail(std::string("the JSON schema keyword '") + kw + "' is not supported");
            }
        Expr e = compile_unwrapped(s, name, depth);
        if (const Json* n = s.find("nullable"); n && n->is_bool() && n->as_bool()) e = alt({std::move(e), lit("null")});
        return e;
    }

    Expr compile_unwrapped(const Json& s, const std::string& name, int depth) {
        if (const Json* r = s.find("$ref")) {
            if (!r->is_string()) fail("'$ref' must be a string");
            return reference(r->as_string());
        }
        if (const Json* c = s.find("const")) return lit(c->dump());
        if (const Json* en = s.find("enum")) {
            if (!en->is_array() || en->as_array().empty()) fail("'enum' must be a non-empty array");
            std::vector<Expr> alts;
            for (const Json& v : en->as_array())
                alts.push_back(lit(v.dump()));
            return alt(std::move(alts));
        }
        for (const char* key : {"anyOf", "oneOf"}) {
            if (const Json* list = s.find(key)) {
                if (!list->is_array() || list->as_array().empty())
                    fail(std::string("'") + key + "' must be a non-empty array");
                // Keywords beside anyOf/oneOf apply to every branch (SchemaStore writes "type", "properties" and
                // "required" next to a oneOf of "required" lists): each branch becomes allOf[siblings, branch].
                Json siblings = Json::object();
                bool constrained = false;
                for (const auto& [k, v] : s.as_object()) {
                    if (k == key) continue;
                    siblings.set(k, v);
                    constrained = constrained || !(is_annotation(k) || k == "$defs" || k == "definitions");
                }
                std::vector<Expr> alts;
                for (const Json& sub : list->as_array())
                    alts.push_back(constrained
                                       ? compile(merge_all_of(Json::object(), Json::array({siblings, sub}),
                                                              std::string("'") + key + "' beside other keywords"),
                                                 name, depth + 1)
                                       : compile(sub, name, depth + 1));
                return alt(std::move(alts));
            }
        }
        if (const Json* all = s.find("allOf")) return compile(merge_all_of(s, *all), name, depth + 1);

        const Json* type = s.find("type");
        if (type && type->is_array()) {
            std::vector<Expr> alts;
            for (const Json& t : type->as_array()) {
                if (!t.is_string()) fail("'type' must be a string or a list of strings");
                alts.push_back(of_type(t.as_string(), s, name, depth));
            }
            if (alts.empty()) fail("'type' must not be an empty list");
            return alt(std::move(alts));
        }
        if (type && !type->is_string()) fail("'type' must be a string or a list of strings");
        return of_type(type ? type->as_string() : infer_type(s), s, name, depth);
    }

    static std::string infer_type(const Json& s) {
        for (const char* k : {"properties", "additionalProperties", "required"})
            if (s.find(k)) return "object";
        for (const char* k : {"items", "prefixItems", "minItems", "maxItems"})
            if (s.find(k)) return "array";
        for (const char* k : {"pattern", "format", "minLength", "maxLength"})
            if (s.find(k)) return "string";
        for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
            if (s.find(k)) return "number";
        return "any";
    }

    // allOf: the object schemas (after $ref) merged into one: properties and required joined, the strictest
    // additionalProperties kept. Anything else cannot be intersected here.
    // `what` names the construct in errors: allOf itself, or anyOf/oneOf whose sibling keywords are merged.
    Json merge_all_of(const Json& s, const Json& all, const std::string& what = "'allOf'") {
        if (!all.is_array() || all.as_array().empty()) fail("'allOf' must be a non-empty array");
        Json merged = Json::object();
        for (const auto& [k, v] : s.as_object())
            if (k != "allOf") merged.set(k, v);
        Json props = merged.find("properties") ? *merged.find("properties") : Json::object();
        Json required = merged.find("required") ? *merged.find("required") : Json::array();
        for (const Json& part0 : all.as_array()) {
            const Json* part = &part0;
            for (int hops = 0; part->is_object() && part->find("$ref") && hops < 32; ++hops) {
                const Json* r = part->find("$ref");
                if (!r->is_string()) fail("'$ref' must be a string");
                part = &resolve(r->as_string());
            }
            if (!part->is_object()) fail(what + " entries must be schemas");
            for (const auto& [k, v] : part->as_object()) {
                if (k == "properties" && v.is_object()) {
                    for (const auto& [pk, pv] : v.as_object())
                        props.set(pk, pv);
                } else if (k == "required" && v.is_array()) {
                    for (const Json& r : v.as_array())
                        required.push_back(r);
                } else if (k == "type" || k == "additionalProperties" || k == "$defs" || k == "definitions" ||
                           is_annotation(k)) {
                    if (k == "type" && !(v.is_string() && v.as_string() == "object"))
                        fail(what + " is supported only for object schemas");
                    if (k == "additionalProperties" && !merged.find(k)) merged.set(k, v);
                } else {
                    fail(what + " is supported only for object schemas (found '" + k + "')");
                }
            }
        }
        merged.set("type", Json("object"));
        merged.set("properties", std::move(props));
        merged.set("required", std::move(required));
        return merged;
    }

    Expr of_type(const std::string& type, const Json& s, const std::string& name, int depth) {
        if (type == "any") return ref("json-value");
        if (type == "null") return lit("null");
        if (type == "boolean") return ref("json-bool");
        if (type == "string") return string_schema(s);
        if (type == "integer") return integer_schema(s);
        if (type == "number") return number_schema(s);
        if (type == "object") return object_schema(s, name, depth);
        if (type == "array") return array_schema(s, name, depth);
        fail("unknown 'type' '" + type + "'");
    }

    Expr string_schema(const Json& s) {
        const auto min_len = count_field(s, "minLength");
        const auto max_len = count_field(s, "maxLength");
        const Json* pattern = s.find("pattern");
        const Json* format = s.find("format");
        const char* format_re = nullptr;
        if (format) {
            if (!format->is_string()) fail("'format' must be a string");
            format_re = format_regex(format->as_string());
        }
        if (pattern && format_re) fail("'pattern' together with 'format' is not supported");
        if ((pattern || format_re) && (min_len || max_len))
            fail("'minLength'/'maxLength' together with 'pattern' or 'format' is not supported");
        if (pattern || format_re) {
            if (pattern && !pattern->is_string()) fail("'pattern' must be a string");
            auto re = parse_regex(pattern ? std::string_view(pattern->as_string()) : std::string_view(format_re));
            if (!re.ok()) fail("'pattern': " + re.message());
            return seq({lit("\""), json_escaped(*re), lit("\"")});
        }
        if (min_len || max_len) {
            const int32_t lo = min_len.value_or(0), hi = max_len ? *max_len : -1;
            if (hi >= 0 && hi < lo) fail("'maxLength' is less than 'minLength'");
            return seq({lit("\""), repeat(ref("json-char"), lo, hi), lit("\"")});
        }
        return ref("json-string");
    }

    Expr integer_schema(const Json& s) {
        std::optional<int64_t> lo = int_field(s, "minimum", true), hi = int_field(s, "maximum", false);
        // exclusiveMinimum/Maximum: a number (draft 6 on) or a flag on minimum/maximum (draft 4).
        if (const Json* e = s.find("exclusiveMinimum")) {
            if (e->is_bool()) {
                if (e->as_bool() && lo) *lo = static_cast<int64_t>(std::floor(s.find("minimum")->as_double())) + 1;
            } else if (auto v = int_field(s, "exclusiveMinimum", false)) {
                lo = lo ? std::max(*lo, *v + 1) : *v + 1;
            }
        }
        if (const Json* e = s.find("exclusiveMaximum")) {
            if (e->is_bool()) {
                if (e->as_bool() && hi) *hi = static_cast<int64_t>(std::ceil(s.find("maximum")->as_double())) - 1;
            } else if (auto v = int_field(s, "exclusiveMaximum", true)) {
                hi = hi ? std::min(*hi, *v - 1) : *v - 1;
            }
        }
        if (!lo && !hi) return ref("json-int");
        if (lo && hi && *lo > *hi) fail("the integer bounds ('minimum'/'maximum') leave no value");
        return integer_range(lo, hi);
    }

    Expr number_schema(const Json& s) {
        // Only a zero lower bound can be written into the grammar (no sign); any other bound is refused.
        for (const char* k : {"maximum", "exclusiveMaximum"})
            if (const Json* v = s.find(k); v && !v->is_bool())
                fail(std::string("'") + k + "' on a 'number' is not supported (use 'integer' for bounded values)");
        const Json* min = s.find("minimum");
        const Json* emin = s.find("exclusiveMinimum");
        if (emin && !emin->is_bool())
            fail("'exclusiveMinimum' on a 'number' is not supported (use 'integer' for bounded values)");
        if (!min) return ref("json-number");
        if (!min->is_number() || min->as_double() != 0.0)
            fail("'minimum' on a 'number' is supported only as 0 (use 'integer' for other bounds)");
        if (emin && emin->as_bool()) fail("'exclusiveMinimum' on a 'number' is not supported");
        const Expr digit = cls({{'0', '9'}});
        return seq({alt({lit("0"), seq({cls({{'1', '9'}}), star(digit)})}), opt(seq({lit("."), plus(digit)})),
                    opt(seq({cls({{'e', 'e'}, {'E', 'E'}}), opt(cls({{'+', '+'}, {'-', '-'}})), plus(digit)}))});
    }

    Expr object_schema(const Json& s, const std::string& name, int depth) {
        const Json* props = s.find("properties");
        if (props && !props->is_object()) fail("'properties' must be an object");
        std::set<std::string> required;
        if (const Json* r = s.find("required")) {
            if (!r->is_array()) fail("'required' must be an array");
            for (const Json& k : r->as_array()) {
                if (!k.is_string()) fail("'required' must list strings");
                required.insert(k.as_string());
            }
        }
        const bool has_props = props && !props->as_object().empty();
        // Extra members: additionalProperties false -> none; true or absent without properties -> any value;
        // a schema -> values of that schema. Their keys are any string (declared names are not excluded).
        std::optional<Expr> extra_value;
        if (const Json* ap = s.find("additionalProperties")) {
            if (!(ap->is_bool() && !ap->as_bool())) extra_value = compile(*ap, name + "-extra", depth + 1);
        } else if (!has_props) {
            extra_value = ref("json-value");
        }
        std::vector<Expr> members;
        std::vector<bool> is_required;
        if (props) {
            for (const auto& [key, sub] : props->as_object()) {
                if (!sub.is_object() && !sub.is_bool())
                    fail("'properties' entry '" + key + "' must be a schema (an object or a boolean), got " +
                         Json::type_name(sub.type()));
                members.push_back(seq({lit(Json(key).dump() + ":"), compile(sub, name + "-" + key, depth + 1)}));
                is_required.push_back(required.erase(key) > 0);
            }
        }
        if (!required.empty() && !extra_value)
            fail("'required' names '" + *required.begin() + "', which 'properties' does not define");
        // Required names that 'properties' leaves out are extra members that must be there.
        for (const std::string& key : required) {
            members.push_back(seq({lit(Json(key).dump() + ":"), *extra_value}));
            is_required.push_back(true);
        }

        // rest(i, first): members i.. with `first` telling whether none was written yet (no comma before the next).
        const std::string base = fresh(name);
        const size_t n = members.size();
        auto rule = [&](size_t i, bool first) { return base + "-" + std::to_string(i) + (first ? "-f" : "-r"); };
        std::optional<Expr> extra;
        if (extra_value) extra = seq({ref("json-string"), lit(":"), *extra_value});
        g_.set_rule(rule(n, true), extra ? opt(seq({*extra, star(seq({lit(","), *extra}))})) : empty());
        g_.set_rule(rule(n, false), extra ? star(seq({lit(","), *extra})) : empty());
        for (size_t i = n; i-- > 0;) {
            for (bool first : {true, false}) {
                Expr with = seq({first ? empty() : lit(","), members[i], ref(rule(i + 1, false))});
                g_.set_rule(rule(i, first),
                            is_required[i] ? std::move(with) : alt({std::move(with), ref(rule(i + 1, first))}));
            }
        }
        return seq({lit("{"), ref(rule(0, true)), lit("}")});
    }

    Expr array_schema(const Json& s, const std::string& name, int depth) {
        const int32_t min = count_field(s, "minItems").value_or(0);
        const std::optional<int32_t> max = count_field(s, "maxItems");
        if (max && *max < min) fail("'maxItems' is less than 'minItems'");
        std::vector<Expr> prefix;
        if (const Json* p = s.find("prefixItems")) {
            if (!p->is_array()) fail("'prefixItems' must be an array");
            for (size_t i = 0; i < p->as_array().size(); ++i)
                prefix.push_back(compile(p->as_array()[i], name + "-" + std::to_string(i), depth + 1));
        }
        // Items after the prefix: `items` (false: none), else any value.
        std::optional<Expr> item;
        const Json* items = s.find("items");
        if (items && items->is_array()) {
            // Draft 4-2019's tuple form: items as a list means prefixItems.
            for (size_t i = 0; i < items->as_array().size(); ++i)
                prefix.push_back(compile(items->as_array()[i], name + "-" + std::to_string(i), depth + 1));
            items = s.find("additionalItems");
        }
        if (!items)
            item = ref("json-value");
        else if (!(items->is_bool() && !items->as_bool()))
            item = compile(*items, name + "-item", depth + 1);
        const int32_t k = static_cast<int32_t>(prefix.size());
        if (max && *max < k) prefix.resize(static_cast<size_t>(*max));
        const int32_t kept = static_cast<int32_t>(prefix.size());
        if (!item && min > kept) fail("'minItems' asks for more items than 'prefixItems' allows");

        // After the prefix: extra items, each after a comma.
        const int32_t extra_min = std::max(0, min - kept);
        const int32_t extra_max = !item ? 0 : max ? *max - kept : -1;
        if (kept == 0) {
            if (!item || extra_max == 0) return lit("[]");
            // The first item has no comma before it.
            Expr rest = repeat(seq({lit(","), *item}), std::max(0, extra_min - 1), extra_max < 0 ? -1 : extra_max - 1);
            Expr list = seq({*item, std::move(rest)});
            return seq({lit("["), extra_min == 0 ? opt(std::move(list)) : std::move(list), lit("]")});
        }
        Expr tail = item ? repeat(seq({lit(","), *item}), extra_min, extra_max) : empty();
        // Prefix items j >= min are optional, and absent items leave the rest absent too.
        for (int32_t j = kept - 1; j >= 0; --j) {
            Expr here = seq({j == 0 ? empty() : lit(","), prefix[j], std::move(tail)});
            tail = j >= min ? opt(std::move(here)) : std::move(here);
        }
        return seq({lit("["), std::move(tail), lit("]")});
    }

    const Json& root_;
    GrammarSource g_;
    std::unordered_map<std::string, std::string> refs_;
    std::vector<std::pair<std::string, std::string>> pending_;  // (rule, pointer) of $ref targets to compile
    int counter_ = 0;
};

}  // namespace

Result<GrammarSource> json_schema_grammar(const Json& schema) {
    try {
        return SchemaCompiler(schema).run();
    } catch (const SchemaError& e) {
        return Status::error("json_schema: " + e.message);
    }
}

GrammarSource json_object_grammar() {
    GrammarSource g;
    add_json_basics(g);
    g.set_rule("root", ref("json-object"));
    return g;
}

GrammarSource choice_grammar(const std::vector<std::string>& choices) {
    std::vector<Expr> alts;
    for (const std::string& c : choices)
        alts.push_back(lit(c));
    GrammarSource g;
    g.set_rule("root", alt(std::move(alts)));
    return g;
}

}  // namespace pagoda::grammar
