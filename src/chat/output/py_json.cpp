// Python-compatible JSON serialisation (see py_json.h).
#include "chat/output/py_json.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "common/json.h"

namespace pagoda::chat {

void py_float_repr_to(std::string& out, double v) {
    if (std::isnan(v)) {
        out += "NaN";
        return;
    }
    if (std::isinf(v)) {
        out += v < 0 ? "-Infinity" : "Infinity";
        return;
    }
    // Shortest round-trip digits in scientific form, then laid out by Python's repr rule:
    // fixed notation when the decimal exponent is in [-4, 16), else d.ddde+XX.
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
    std::string_view s(buf, static_cast<size_t>(res.ptr - buf));
    bool negative = false;
    if (!s.empty() && s[0] == '-') {
        negative = true;
        s.remove_prefix(1);
    }
    const size_t e_pos = s.find('e');
    std::string digits;
    for (char c : s.substr(0, e_pos)) {
        if (c != '.') digits.push_back(c);
    }
    const int exponent = std::atoi(std::string(s.substr(e_pos + 1)).c_str());
    if (negative) out.push_back('-');
    if (exponent >= -5 + 1 && exponent < 16) {
        if (exponent < 0) {
            out += "0.";
            out.append(static_cast<size_t>(-exponent - 1), '0');
            out += digits;
        } else {
            const size_t int_len = static_cast<size_t>(exponent) + 1;
            if (digits.size() <= int_len) {
                out += digits;
                out.append(int_len - digits.size(), '0');
                out += ".0";
            } else {
                out.append(digits, 0, int_len);
                out.push_back('.');
                out.append(digits, int_len, std::string::npos);
            }
        }
        return;
    }
    out.push_back(digits[0]);
    if (digits.size() > 1) {
        out.push_back('.');
        out.append(digits, 1, std::string::npos);
    }
    out.push_back('e');
    out.push_back(exponent < 0 ? '-' : '+');
    const int mag = exponent < 0 ? -exponent : exponent;
    if (mag < 10) out.push_back('0');
    out += std::to_string(mag);
}

void py_json_dump_to(std::string& out, const Json& value) {
    switch (value.type()) {
        case Json::Type::kNull:
            out += "null";
            break;
        case Json::Type::kBool:
            out += value.as_bool() ? "true" : "false";
            break;
        case Json::Type::kInt:
            out += std::to_string(value.as_int());
            break;
        case Json::Type::kFloat:
            py_float_repr_to(out, value.as_double());
            break;
        case Json::Type::kString:
            json_escape_to(out, value.as_string());
            break;
        case Json::Type::kArray: {
            out.push_back('[');
            bool first = true;
            for (const Json& item : value.as_array()) {
                if (!first) out += ", ";
                first = false;
                py_json_dump_to(out, item);
            }
            out.push_back(']');
            break;
        }
        case Json::Type::kObject: {
            out.push_back('{');
            bool first = true;
            for (const auto& [key, item] : value.as_object()) {
                if (!first) out += ", ";
                first = false;
                json_escape_to(out, key);
                out += ": ";
                py_json_dump_to(out, item);
            }
            out.push_back('}');
            break;
        }
    }
}

std::string py_json_dump(const Json& value) {
    std::string out;
    py_json_dump_to(out, value);
    return out;
}

}  // namespace pagoda::chat
