#include "common/json.h"

#include <gtest/gtest.h>

#include <cmath>

namespace pagoda {
namespace {

TEST(Json, ParsesScalarsKeepingIntegersApartFromFloats) {
    auto j = Json::parse(R"({"a": 1, "b": 1.0, "c": -2e3, "d": true, "e": null, "f": "x"})");
    ASSERT_TRUE(j.ok()) << j.message();
    EXPECT_TRUE(j->find("a")->is_int());
    EXPECT_EQ(j->find("a")->as_int(), 1);
    EXPECT_TRUE(j->find("b")->is_float());
    EXPECT_DOUBLE_EQ(j->find("c")->as_double(), -2000.0);
    EXPECT_TRUE(j->find("d")->as_bool());
    EXPECT_TRUE(j->find("e")->is_null());
    EXPECT_EQ(j->find("f")->as_string(), "x");
    EXPECT_EQ(j->find("missing"), nullptr);
}

TEST(Json, KeepsInsertionOrderAndLastDuplicate) {
    auto j = Json::parse(R"({"z": 1, "a": 2, "z": 3})");
    ASSERT_TRUE(j.ok());
    const auto& o = j->as_object();
    ASSERT_EQ(o.size(), 2u);
    EXPECT_EQ(o[0].first, "z");
    EXPECT_EQ(o[0].second.as_int(), 3);
    EXPECT_EQ(o[1].first, "a");
    EXPECT_EQ(j->dump(), R"({"z":3,"a":2})");
}

TEST(Json, DecodesEscapesAndSurrogatePairs) {
    auto j = Json::parse(R"("a\n\t\"\\\/\u00e9\ud83d\ude00\ud800x")");
    ASSERT_TRUE(j.ok()) << j.message();
    EXPECT_EQ(j->as_string(), "a\n\t\"\\/\xC3\xA9\xF0\x9F\x98\x80\xEF\xBF\xBDx");
}

TEST(Json, RoundTripsThroughDump) {
    const char* text = R"({"k":[1,2.5,"\u0001é",{"n":null}],"b":false,"big":1e300})";
    auto j = Json::parse(text);
    ASSERT_TRUE(j.ok());
    auto again = Json::parse(j->dump());
    ASSERT_TRUE(again.ok()) << again.message();
    EXPECT_EQ(*j, *again);
    EXPECT_NE(j->dump().find("\\u0001"), std::string::npos);
    EXPECT_NE(j->dump().find("é"), std::string::npos);  // non-ASCII stays UTF-8
}

TEST(Json, FloatsStayFloatsWhenDumped) {
    EXPECT_EQ(Json(1.0).dump(), "1.0");
    EXPECT_EQ(Json(0.1).dump(), "0.1");
    EXPECT_EQ(Json(int64_t{7}).dump(), "7");
}

// The one JSON string escaper (json_escape_to) as Python's json module escapes; expected strings from CPython 3's
// json.dumps(s) (ensure_ascii=True) and json.dumps(s, ensure_ascii=False).
TEST(Json, EscapesAsPythonWithAndWithoutEnsureAscii) {
    const std::string s = "q\"b\\n\n\r\t\b\f\x01\x1f\x7f\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";
    std::string utf8, ascii;
    json_escape_to(utf8, s);
    json_escape_to(ascii, s, /*ensure_ascii=*/true);
    EXPECT_EQ(utf8, "\"q\\\"b\\\\n\\n\\r\\t\\b\\f\\u0001\\u001f\x7f\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\"");
    EXPECT_EQ(ascii, "\"q\\\"b\\\\n\\n\\r\\t\\b\\f\\u0001\\u001f\x7f\\u00e9\\u20ac\\ud83d\\ude00\"");
    std::string invalid;
    json_escape_to(invalid, "a\x80z", true);  // an invalid byte: U+FFFD
    EXPECT_EQ(invalid, "\"a\\ufffdz\"");
}

TEST(Json, WritesCompactPrettyAndPythonFormats) {
    auto j = Json::parse(R"({"a": [1, 2.5, 1e16, null], "b": {}, "c": "é"})");
    ASSERT_TRUE(j.ok());
    EXPECT_EQ(j->dump(), "{\"a\":[1,2.5,1e+16,null],\"b\":{},\"c\":\"é\"}");
    EXPECT_EQ(j->dump_pretty(2),
              "{\n  \"a\": [\n    1,\n    2.5,\n    1e+16,\n    null\n  ],\n  \"b\": {},\n  \"c\": \"é\"\n}");
    JsonFormat python;
    python.item_separator = ", ";
    python.key_separator = ": ";
    python.python_floats = true;
    python.ensure_ascii = true;
    std::string out;
    json_dump_to(out, *j, python);
    EXPECT_EQ(out, "{\"a\": [1, 2.5, 1e+16, null], \"b\": {}, \"c\": \"\\u00e9\"}");  // json.dumps(j)
}

TEST(Json, HugeIntegersBecomeFloats) {
    auto j = Json::parse("123456789012345678901234567890");
    ASSERT_TRUE(j.ok());
    EXPECT_TRUE(j->is_float());
}

TEST(Json, AcceptsPythonNonFiniteNumbers) {
    auto j = Json::parse("[NaN, Infinity, -Infinity]");
    ASSERT_TRUE(j.ok());
    EXPECT_TRUE(std::isnan(j->as_array()[0].as_double()));
    EXPECT_TRUE(std::isinf(j->as_array()[2].as_double()));
}

TEST(Json, ErrorsNameLineAndColumn) {
    auto j = Json::parse("{\n  \"a\": 1,\n  \"b\" 2\n}");
    ASSERT_FALSE(j.ok());
    EXPECT_NE(j.message().find("line 3"), std::string::npos) << j.message();
    EXPECT_NE(j.message().find("':'"), std::string::npos) << j.message();
}

TEST(Json, RejectsMalformedDocuments) {
    for (const char* bad : {"", "{", "[1,]", "{\"a\":}", "01", "1.", "-", "\"abc", "tru", "[1] x", "{\"a\" 1}",
                            "\"\x01\"", "\"\xff\"", "\"\xc3\"", "1e", "[\"\\x\"]"}) {
        auto j = Json::parse(bad);
        EXPECT_FALSE(j.ok()) << "accepted: " << bad;
    }
}

TEST(Json, DeepNestingIsAnErrorNotACrash) {
    std::string deep(100000, '[');
    auto j = Json::parse(deep);
    ASSERT_FALSE(j.ok());
    EXPECT_NE(j.message().find("nesting"), std::string::npos);
    std::string ok_depth = std::string(100, '[') + std::string(100, ']');
    EXPECT_TRUE(Json::parse(ok_depth).ok());
}

TEST(Json, TypedGettersNameTheField) {
    auto j = Json::parse(R"({"n": "x", "f": 4096.0, "i": 3})");
    ASSERT_TRUE(j.ok());
    auto n = json_get_int(*j, "n", 0);
    ASSERT_FALSE(n.ok());
    EXPECT_NE(n.message().find("\"n\""), std::string::npos);
    EXPECT_NE(n.message().find("string"), std::string::npos);
    EXPECT_EQ(*json_get_int(*j, "f", 0), 4096);
    EXPECT_EQ(*json_get_int(*j, "missing", 42), 42);
    EXPECT_DOUBLE_EQ(*json_get_double(*j, "i", 0.0), 3.0);
}

TEST(Json, CopiesAreDeep) {
    Json a = Json::object();
    a.set("x", Json::array({Json(1)}));
    Json b = a;
    b.find("x")->push_back(Json(2));
    EXPECT_EQ(a.find("x")->size(), 1u);
    EXPECT_EQ(b.find("x")->size(), 2u);
}

}  // namespace
}  // namespace pagoda
