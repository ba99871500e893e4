// Python json.dumps compatibility. Expected strings were produced by CPython 3 json.dumps(v,
// ensure_ascii=False) on this machine (python3 -c "import json; print(json.dumps(...))").
#include "chat/output/py_json.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/json.h"

namespace pagoda::chat {
namespace {

std::string repr(double v) {
    std::string s;
    append_python_float(s, v);
    return s;
}

TEST(PyJson, FloatsAsPythonRepr) {
    EXPECT_EQ(repr(0.1), "0.1");
    EXPECT_EQ(repr(1.0), "1.0");
    EXPECT_EQ(repr(1e16), "1e+16");
    EXPECT_EQ(repr(1e15), "1000000000000000.0");
    EXPECT_EQ(repr(1e-5), "1e-05");
    EXPECT_EQ(repr(0.0001), "0.0001");
    EXPECT_EQ(repr(123.456), "123.456");
    EXPECT_EQ(repr(-2.5e-7), "-2.5e-07");
    EXPECT_EQ(repr(1.7976931348623157e308), "1.7976931348623157e+308");
    EXPECT_EQ(repr(5e-324), "5e-324");
    EXPECT_EQ(repr(1234567890123456.7), "1234567890123456.8");
    EXPECT_EQ(repr(-0.0), "-0.0");
    EXPECT_EQ(repr(100.0), "100.0");
    EXPECT_EQ(repr(0.0), "0.0");
    EXPECT_EQ(repr(-1e-300), "-1e-300");
}

TEST(PyJson, NonFiniteFloats) {
    EXPECT_EQ(repr(std::nan("")), "nan");  // repr(); json.dumps writes NaN, Infinity:
    EXPECT_EQ(repr(-INFINITY), "-inf");
    EXPECT_EQ(py_json_dump(Json::array({Json(std::nan("")), Json(INFINITY), Json(-INFINITY), Json(1e16)})),
              "[NaN, Infinity, -Infinity, 1e+16]");
}

TEST(PyJson, SeparatorsAndEscapes) {
    auto v = Json::parse(R"({"a": [1, 2.5, null, true, "x\n\"y\u00e9\u0001"], "b": {}})");
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(py_json_dump(*v), "{\"a\": [1, 2.5, null, true, \"x\\n\\\"y\xC3\xA9\\u0001\"], \"b\": {}}");
}

}  // namespace
}  // namespace pagoda::chat
