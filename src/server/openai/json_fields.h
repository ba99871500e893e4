// Typed reads of one JSON object's fields for the request parsers (protocol.cpp, responses_protocol.cpp): the first
// error is kept, with a message that names the field as the client wrote it. Internal to server/openai.
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "common/json.h"
#include "server/openai/protocol.h"

namespace pagoda::server::openai {

// "a string", "an array", ... for messages that say what was sent instead.
const char* json_type_name(const Json& v);
// 2, 0.5: a number as a person writes it in a range.
std::string format_number(double v);

// {"a": x, "b": y} in that order, for the response bodies built as trees.
Json json_object(std::initializer_list<std::pair<const char*, Json>> members);

class Fields;
// `name` as /v1/completions reads "prompt" (and /v1/embeddings "input"): a string, a list of strings, a list of token
// ids, or a list of such lists, appended to `out`; the first error goes to `f`.
void parse_prompt_list(Fields& f, const std::string& name, std::vector<Prompt>& out);
// A message's "content" made a string: text parts (text, input_text, output_text) joined with "\n"; images, audio
// and files refused. False (and `f` holds the error, named after `where`) when refused.
bool normalize_content(Fields& f, Json& message, const std::string& where);

// Reads typed fields of one JSON object and keeps the first error. A null value counts as absent.
class Fields {
  public:
    explicit Fields(const Json& body) : body_(body) {}

    const Json* get(const char* name) const {
        const Json* v = body_.find(name);
        return v && !v->is_null() ? v : nullptr;
    }
    bool failed() const { return error.has_value(); }
    void fail(std::string message, std::string param) {
        if (!error) error = ApiError::bad_request(std::move(message), std::move(param));
    }
    void wrong_type(const char* name, const char* want, const Json& got) {
        fail(std::string("'") + name + "' must be " + want + ", got " + json_type_name(got), name);
    }

    std::optional<double> number(const char* name, double lo, double hi, bool lo_open = false) {
        const Json* v = get(name);
        if (!v || failed()) return std::nullopt;
        if (!v->is_number()) {
            wrong_type(name, "a number", *v);
            return std::nullopt;
        }
        const double d = v->as_double();
        if (!std::isfinite(d) || (lo_open ? d <= lo : d < lo) || d > hi) {
            std::string range =
                hi == std::numeric_limits<double>::infinity()
                    ? (lo_open ? "> " : ">= ") + format_number(lo)
                    : std::string("in ") + (lo_open ? "(" : "[") + format_number(lo) + ", " + format_number(hi) + "]";
            fail(std::string("'") + name + "' must be " + range + ", got " + format_number(d), name);
            return std::nullopt;
        }
        return d;
    }
    std::optional<int64_t> integer(const char* name, int64_t lo, int64_t hi) {
        const Json* v = get(name);
        if (!v || failed()) return std::nullopt;
        int64_t i = 0;
        if (v->is_int()) {
            i = v->as_int();
        } else if (v->is_float() && std::isfinite(v->as_double()) && v->as_double() == std::floor(v->as_double()) &&
                   std::fabs(v->as_double()) < 9e15) {
            i = static_cast<int64_t>(v->as_double());  // 16.0 is an integer to Python clients
        } else {
            wrong_type(name, "an integer", *v);
            return std::nullopt;
        }
        if (i < lo || i > hi) {
            std::string range = hi == std::numeric_limits<int64_t>::max()
                                    ? ">= " + std::to_string(lo)
                                    : "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
            fail(std::string("'") + name + "' must be " + range + ", got " + std::to_string(i), name);
            return std::nullopt;
        }
        return i;
    }
    std::optional<bool> boolean(const char* name) {
        const Json* v = get(name);
        if (!v || failed()) return std::nullopt;
        if (!v->is_bool()) {
            wrong_type(name, "a boolean", *v);
            return std::nullopt;
        }
        return v->as_bool();
    }
    std::optional<std::string> string(const char* name) {
        const Json* v = get(name);
        if (!v || failed()) return std::nullopt;
        if (!v->is_string()) {
            wrong_type(name, "a string", *v);
            return std::nullopt;
        }
        return v->as_string();
    }
    const Json* object(const char* name) {
        const Json* v = get(name);
        if (!v || failed()) return nullptr;
        if (!v->is_object()) {
            wrong_type(name, "an object", *v);
            return nullptr;
        }
        return v;
    }
    const Json* array(const char* name) {
        const Json* v = get(name);
        if (!v || failed()) return nullptr;
        if (!v->is_array()) {
            wrong_type(name, "an array", *v);
            return nullptr;
        }
        return v;
    }

    std::optional<ApiError> error;

  private:
    const Json& body_;
};

}  // namespace pagoda::server::openai
