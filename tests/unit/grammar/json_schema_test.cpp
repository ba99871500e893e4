#include <gtest/gtest.h>

#include "grammar/json_schema.h"
#include "grammar_test_util.h"

namespace pagoda::grammar {
namespace {

using testing::full_match;

Grammar compile_schema(std::string_view schema_text) {
    auto schema = Json::parse(schema_text);
    EXPECT_TRUE(schema.ok()) << schema.message();
    auto src = json_schema_grammar(*schema);
    EXPECT_TRUE(src.ok()) << src.message();
    auto g = compile_grammar(*src);
    EXPECT_TRUE(g.ok()) << g.message();
    return std::move(g).value();
}

void expect(const Grammar& g, std::vector<const char*> yes, std::vector<const char*> no) {
    for (const char* s : yes)
        EXPECT_TRUE(full_match(g, s)) << "should accept " << s;
    for (const char* s : no)
        EXPECT_FALSE(full_match(g, s)) << "should reject " << s;
}

TEST(JsonSchema, ObjectWithRequiredAndOptionalProperties) {
    const Grammar g = compile_schema(R"({"type":"object","properties":{
        "name":{"type":"string"},"age":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}}},
        "required":["name"]})");
    expect(g,
           {R"({"name":"x"})", R"({"name":"x","age":3})", R"({"name":"","tags":["a","b"]})",
            R"({"name":"x","age":-1,"tags":[]})"},
           {R"({})", R"({"age":3})", R"({"age":3,"name":"x"})", R"({"name":"x",})", R"({"name":"x","extra":1})",
            R"({ "name":"x"})", R"({"name":"x","age":1.5})"});
}

TEST(JsonSchema, AdditionalProperties) {
    expect(compile_schema(R"({"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":true})"),
           {R"({"a":1,"b":[1,{"c":null}]})", R"({"b":true})", R"({})"}, {R"({"a":1,})", R"({"a":1 })"});
    expect(compile_schema(R"({"type":"object","additionalProperties":{"type":"number"}})"),
           {R"({"x":1.5e3,"y":-2})", R"({})"}, {R"({"x":"1"})"});
    expect(compile_schema(R"({"type":"object"})"), {R"({"any":["thing"]})"}, {R"([])"});
}

TEST(JsonSchema, EnumConstAnyOfAndTypeLists) {
    expect(compile_schema(R"({"enum":["red","green",3,null]})"), {R"("red")", "3", "null"}, {R"("blue")", "4"});
    expect(compile_schema(R"({"const":{"k":[1,2]}})"), {R"({"k":[1,2]})"}, {R"({"k":[1]})"});
    expect(compile_schema(R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":2}]})"), {"12", R"("ab")"},
           {R"("abc")", "true"});
    expect(compile_schema(R"({"oneOf":[{"type":"boolean"},{"type":"null"}]})"), {"true", "null"}, {"0"});
    expect(compile_schema(R"({"type":["string","null"]})"), {R"("s")", "null"}, {"1"});
    expect(compile_schema(R"({"type":"string","nullable":true})"), {R"("s")", "null"}, {"1"});
}

TEST(JsonSchema, RefsIncludingRecursion) {
    const Grammar g = compile_schema(R"({"$defs":{"node":{"type":"object","properties":{
        "value":{"type":"integer"},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}},
        "required":["value","children"]}},"$ref":"#/$defs/node"})");
    expect(g, {R"({"value":1,"children":[]})", R"({"value":1,"children":[{"value":2,"children":[]}]})"},
           {R"({"value":1})", R"({"value":1,"children":[{"value":2}]})"});
    expect(
        compile_schema(R"({"definitions":{"a":{"type":"boolean"}},"type":"array","items":{"$ref":"#/definitions/a"}})"),
        {"[true,false]"}, {"[1]"});
    // "#" is the root itself.
    expect(
        compile_schema(
            R"({"type":"object","properties":{"next":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},"required":["next"]})"),
        {R"({"next":null})", R"({"next":{"next":null}})"}, {R"({"next":{}})"});
}

TEST(JsonSchema, LongRefChainsDoNotRecurseDeeply) {
    // 20000 definitions, each an array of the next: compiled one after another, not nested.
    std::string defs;
    const int n = 20000;
    for (int i = 0; i < n; ++i)
        defs +=
            "\"d" + std::to_string(i) + "\":" +
            (i + 1 < n ? R"({"type":"array","maxItems":1,"items":{"$ref":"#/$defs/d)" + std::to_string(i + 1) + "\"}}"
                       : std::string(R"({"type":"integer"})")) +
            (i + 1 < n ? "," : "");
    const Grammar g = compile_schema(R"({"$ref":"#/$defs/d0","$defs":{)" + defs + "}}");
    expect(g, {"[]", "[[]]", "[[[]]]"}, {"[7]", "7", "[[],[]]"});
}

TEST(JsonSchema, Arrays) {
    expect(compile_schema(R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3})"),
           {"[1,2]", "[1,2,3]"}, {"[]", "[1]", "[1,2,3,4]", "[1,]"});
    expect(compile_schema(R"({"type":"array","items":{"type":"integer"},"maxItems":0})"), {"[]"}, {"[1]"});
    expect(compile_schema(R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false})"),
           {R"(["a",1])", R"(["a"])", "[]"}, {R"([1,"a"])", R"(["a",1,2])"});
    expect(
        compile_schema(R"({"type":"array","prefixItems":[{"type":"string"}],"items":{"type":"integer"},"minItems":2})"),
        {R"(["a",1])", R"(["a",1,2])"}, {R"(["a"])", "[1,2]"});
}

TEST(JsonSchema, Strings) {
    expect(compile_schema(R"({"type":"string","minLength":2,"maxLength":3})"), {R"("ab")", R"("a\nc")", R"("\u00e9é")"},
           {R"("a")", R"("abcd")"});
    expect(compile_schema(R"({"type":"string","pattern":"^[A-Z]{2}\\d+$"})"), {R"("AB12")"}, {R"("A12")", R"("ab1")"});
    // The pattern constrains the decoded string; quotes and backslashes are produced escaped.
    expect(compile_schema(R"({"type":"string","pattern":"a\"b\\\\c"})"), {R"("a\"b\\c")"}, {R"("a"b\c")"});
    expect(compile_schema(R"({"type":"string","pattern":"[^x]"})"), {R"("\"")", R"("\n")", R"("y")"},
           {R"("x")", R"(""")"});
    expect(compile_schema(R"({"type":"string","format":"date"})"), {R"("2024-02-29")"},
           {R"("2024-13-01")", R"("24-01-01")"});
    expect(compile_schema(R"({"type":"string","format":"date-time"})"),
           {R"("2024-02-29T13:45:00Z")", R"("2024-02-29T13:45:00.123+02:00")"}, {R"("2024-02-29 13:45:00Z")"});
    expect(compile_schema(R"({"type":"string","format":"time"})"), {R"("23:59:59Z")"}, {R"("24:00:00Z")"});
    expect(compile_schema(R"({"type":"string","format":"uuid"})"), {R"("123e4567-e89b-12d3-a456-426614174000")"},
           {R"("123e4567e89b12d3a456426614174000")"});
    expect(compile_schema(R"({"type":"string","format":"email"})"), {R"("a.b+c@example.co.uk")"},
           {R"("a@b")", R"("@example.com")"});
    expect(compile_schema(R"({"type":"string","format":"uri"})"), {R"("anything")"}, {"1"});
}

TEST(JsonSchema, IntegerBounds) {
    const Grammar g = compile_schema(R"({"type":"integer","minimum":-15,"maximum":247})");
    for (int v = -40; v <= 300; ++v) {
        EXPECT_EQ(full_match(g, std::to_string(v)), v >= -15 && v <= 247) << v;
    }
    expect(g, {"0"}, {"-0", "007", "+5"});
    const Grammar ex = compile_schema(R"({"type":"integer","exclusiveMinimum":9,"exclusiveMaximum":101})");
    for (int v = 0; v <= 200; ++v)
        EXPECT_EQ(full_match(ex, std::to_string(v)), v > 9 && v < 101) << v;
    const Grammar open = compile_schema(R"({"type":"integer","minimum":120})");
    for (int v = 0; v <= 2000; v += 7)
        EXPECT_EQ(full_match(open, std::to_string(v)), v >= 120) << v;
    EXPECT_TRUE(full_match(open, "123456789012"));
    const Grammar neg = compile_schema(R"({"type":"integer","maximum":-3})");
    for (int v = -200; v <= 20; ++v)
        EXPECT_EQ(full_match(neg, std::to_string(v)), v <= -3) << v;
    expect(compile_schema(R"({"type":"number","minimum":0})"), {"0", "1.5", "2e10"}, {"-1", "-0.5"});
    expect(compile_schema(R"({"type":"number"})"), {"-0.5", "1E+3", "0"}, {"01", "1.", ".5", "+1"});
}

TEST(JsonSchema, AllOfOfObjectsIsMerged) {
    expect(compile_schema(R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},
                                        {"properties":{"b":{"type":"string"}},"required":["b"]}]})"),
           {R"({"a":1,"b":"x"})"}, {R"({"a":1})", R"({"b":"x"})"});
    // Annotations in a branch (SchemaStore writes $schema, markdownDescription, x- hints there) do not stop it.
    expect(compile_schema(R"({"allOf":[{"$schema":"http://json-schema.org/draft-07/schema#","$comment":"c",
                                        "markdownDescription":"d","x-intellij-html-description":"e",
                                        "properties":{"a":{"type":"integer"}},"required":["a"]}]})"),
           {R"({"a":1})"}, {R"({})", R"({"a":"x"})"});
}

TEST(JsonSchema, RequiredNamesOutsidePropertiesAreExtraMembersThatMustBeThere) {
    expect(compile_schema(R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["b"],
                              "additionalProperties":{"type":"boolean"}})"),
           {R"({"b":true})", R"({"a":1,"b":false})", R"({"a":1,"b":true,"c":false})"},
           {R"({})", R"({"a":1})", R"({"b":1})"});
}

TEST(JsonSchema, KeywordsBesideOneOfApplyToEveryBranch) {
    expect(compile_schema(R"({"type":"object","properties":{"id":{"type":"integer"},"a":{"type":"string"},
                              "b":{"type":"string"}},"required":["id"],"oneOf":[{"required":["a"]},{"required":["b"]}]})"),
           {R"({"id":1,"a":"x"})", R"({"id":1,"b":"x"})", R"({"id":1,"a":"x","b":"y"})"},
           {R"({"a":"x"})", R"({"id":1})", R"({"":"x"})"});
}

TEST(JsonSchema, RefusalsNameTheKeyword) {
    struct Bad {
        const char* schema;
        const char* keyword;
    };
    for (const Bad& b :
         {Bad{R"({"type":"object","patternProperties":{"^a":{}}})", "patternProperties"},
          Bad{R"({"type":"array","uniqueItems":true})", "uniqueItems"}, Bad{R"({"not":{"type":"string"}})", "not"},
          Bad{R"({"type":"number","maximum":1.5})", "maximum"},
          Bad{R"({"type":"integer","multipleOf":3})", "multipleOf"}, Bad{R"({"if":{},"then":{}})", "if"},
          Bad{R"({"type":"foo"})", "foo"}, Bad{R"({"$ref":"http://example.com/s.json"})", "$ref"},
          Bad{R"({"$ref":"#/$defs/missing"})", "points to nothing"},
          Bad{R"({"type":"string","pattern":"(a)\\1"})", "pattern"},
          Bad{R"({"type":"string","maxLength":1,"minLength":2})", "maxLength"},
          Bad{R"({"type":"integer","minimum":5,"maximum":1})", "minimum"},
          Bad{R"({"type":"object","properties":{"a":{}},"required":["b"],"additionalProperties":false})", "required"},
          Bad{R"({"allOf":[{"type":"string"},{"maxLength":3}]})", "allOf"},
          Bad{R"({"type":"string","oneOf":[{"maxLength":2},{"minLength":5}]})", "'oneOf' beside other keywords"},
          Bad{R"({"properties":{"$comment":"a note"}})", "'properties' entry '$comment'"}, Bad{R"(false)", "false"},
          Bad{R"(3)", "schema must be"}}) {
        auto schema = Json::parse(b.schema);
        ASSERT_TRUE(schema.ok()) << b.schema;
        auto r = json_schema_grammar(*schema);
        ASSERT_FALSE(r.ok()) << b.schema;
        EXPECT_NE(r.message().find(b.keyword), std::string::npos) << r.message();
    }
}

TEST(JsonSchema, JsonObjectAndChoice) {
    auto g = compile_grammar(json_object_grammar());
    ASSERT_TRUE(g.ok());
    expect(*g, {R"({})", R"({"a":[1,{"b":"\u00e9"}],"c":-0.5e-3})"}, {"[]", R"("x")", R"({"a"})", "{} "});
    auto c = compile_grammar(choice_grammar({"yes", "no", "no way"}));
    ASSERT_TRUE(c.ok());
    expect(*c, {"yes", "no", "no way"}, {"n", "yes ", "maybe"});
}

}  // namespace
}  // namespace pagoda::grammar
