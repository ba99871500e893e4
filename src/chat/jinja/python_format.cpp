// Python's string formatting for templates: str.format and printf-style str % args.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <initializer_list>
#include <memory>

#include "chat/jinja/builtins.h"
#include "common/utf8.h"

namespace pagoda::jinja {

std::string str_format(Interpreter& in, const std::string& fmt, CallArgs& args) {
    std::string out;
    size_t auto_index = 0;
    for (size_t i = 0; i < fmt.size(); ++i) {
        char c = fmt[i];
        if (c == '{') {
            if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
                out += '{';
                ++i;
                continue;
            }
            size_t close = fmt.find('}', i);
            if (close == std::string::npos) type_error("Single '{' encountered in format string");
            std::string field = fmt.substr(i + 1, close - i - 1);
            std::string conv;
            size_t bang = field.find('!');
            if (bang != std::string::npos) {
                conv = field.substr(bang + 1);
                field = field.substr(0, bang);
            }
            if (field.find(':') != std::string::npos)
                type_error("format specifications are not supported in str.format");
            Value v;
            if (field.empty()) {
                if (auto_index >= args.positional.size()) type_error("Replacement index out of range");
                v = args.positional[auto_index++];
            } else if (std::all_of(field.begin(), field.end(),
                                   [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); })) {
                size_t k = std::stoul(field);
                if (k >= args.positional.size()) type_error("Replacement index out of range");
                v = args.positional[k];
            } else {
                const Value* kv = args.kw(field);
                if (!kv) type_error("KeyError: '" + field + "'");
                v = *kv;
            }
            out += conv == "r" ? v.repr() : v.to_str();
            in.check_string_size(out.size());
            i = close;
        } else if (c == '}') {
            if (i + 1 < fmt.size() && fmt[i + 1] == '}')
                ++i;
            else
                type_error("Single '}' encountered in format string");
            out += '}';
        } else {
            out += c;
        }
    }
    return out;
}

// ---- printf-style formatting (str % args) ----

std::string python_percent_format(Interpreter& in, const Value& fmt_value, const Value& args) {
    const std::string& fmt = fmt_value.str();
    std::vector<Value> positional;
    const Value* mapping = nullptr;
    if (args.is_tuple())
        positional = args.items();
    else if (args.is_dict())
        mapping = &args;
    else
        positional.push_back(args);
    size_t next_arg = 0;
    bool used_mapping = false;
    std::string out;
    for (size_t i = 0; i < fmt.size(); ++i) {
        if (fmt[i] != '%') {
            out += fmt[i];
            continue;
        }
        if (++i >= fmt.size()) type_error("incomplete format");
        Value arg;
        bool have_arg = false;
        if (fmt[i] == '(') {
            size_t close = fmt.find(')', i);
            if (close == std::string::npos) type_error("incomplete format key");
            if (!mapping) type_error("format requires a mapping");
            const Value* v = mapping->dict().find(fmt.substr(i + 1, close - i - 1));
            if (!v) type_error("KeyError: '" + fmt.substr(i + 1, close - i - 1) + "'");
            arg = *v;
            have_arg = true;
            used_mapping = true;
            i = close + 1;
        }
        std::string flags;
        while (i < fmt.size() && std::string("-+ #0").find(fmt[i]) != std::string::npos)
            flags += fmt[i++];
        auto take = [&]() -> Value {
            if (mapping && !positional.empty() && next_arg == 0 && !args.is_tuple()) {
                ++next_arg;
                return args;
            }
            if (next_arg >= positional.size()) type_error("not enough arguments for format string");
            return positional[next_arg++];
        };
        // Widths and precisions past kMostWidth are refused as they are read (a template's digits could overflow an
        // int before a check after the loop: fuzz_jinja found "%7777777777d").
        constexpr int64_t kMostWidth = int64_t{1} << 20;
        auto digits = [&](int& into) {
            for (into = 0; i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i])); ++i) {
                into = into * 10 + (fmt[i] - '0');
                if (into > kMostWidth) type_error("format width too large");
            }
        };
        int width = -1, precision = -1;
        if (i < fmt.size() && fmt[i] == '*') {
            const int64_t w = take().as_int();
            if (w > kMostWidth || w < -kMostWidth) type_error("format width too large");
            if (w < 0) flags += '-';  // Python: a negative * width left-justifies
            width = static_cast<int>(w < 0 ? -w : w);
            ++i;
        } else if (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i]))) {
            digits(width);
        }
        if (i < fmt.size() && fmt[i] == '.') {
            ++i;
            digits(precision);
        }
        if (i >= fmt.size()) type_error("incomplete format");
        char conv = fmt[i];
        if (conv == '%') {
            out += '%';
            continue;
        }
        if (!have_arg) arg = mapping ? *mapping : take();
        if (mapping && !have_arg) used_mapping = true;
        std::string body;
        if (conv == 's' || conv == 'r' || conv == 'a') {
            body = conv == 's' ? arg.to_str() : arg.repr();
            if (precision >= 0) body = encode(decode(body).substr(0, static_cast<size_t>(precision)));
        } else if (conv == 'd' || conv == 'i' || conv == 'u' || conv == 'x' || conv == 'X' || conv == 'o' ||
                   conv == 'c') {
            if (!arg.is_number())
                type_error(std::string("%") + conv + " format: a real number is required, not " + arg.type_name());
            int64_t v = arg.is_float() ? static_cast<int64_t>(std::trunc(arg.as_float())) : arg.as_int();
            if (conv == 'c') {
                utf8_append(body, static_cast<char32_t>(v));
            } else {
                std::string spec = "%" + std::string(flags.find('+') != std::string::npos ? "+" : "") +
                                   std::string(flags.find(' ') != std::string::npos ? " " : "") +
                                   std::string(flags.find('#') != std::string::npos ? "#" : "") + "ll" +
                                   (conv == 'i' || conv == 'u' ? 'd' : conv);
                char buf[64];
                std::snprintf(buf, sizeof(buf), spec.c_str(), static_cast<long long>(v));
                body = buf;
            }
        } else if (std::string("eEfFgG").find(conv) != std::string::npos) {
            if (!arg.is_number()) type_error(std::string("must be real number, not ") + arg.type_name());
            std::string spec = "%" + std::string(flags.find('+') != std::string::npos ? "+" : "") +
                               std::string(flags.find(' ') != std::string::npos ? " " : "") + "." +
                               std::to_string(precision < 0 ? 6 : precision) + conv;
            char buf[512];
            std::snprintf(buf, sizeof(buf), spec.c_str(), arg.as_float());
            body = buf;
        } else {
            type_error(std::string("unsupported format character '") + conv + "'");
        }
        int64_t len = static_cast<int64_t>(utf8_length(body));
        if (width > len) {
            size_t padn = static_cast<size_t>(width - len);
            if (flags.find('-') != std::string::npos)
                body += std::string(padn, ' ');
            else if (flags.find('0') != std::string::npos && conv != 's' && conv != 'r') {
                size_t sign = !body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ') ? 1 : 0;
                body.insert(sign, std::string(padn, '0'));
            } else
                body.insert(0, std::string(padn, ' '));
        }
        out += body;
        in.check_string_size(out.size());
    }
    if (!mapping && next_arg < positional.size()) type_error("not all arguments converted during string formatting");
    (void)used_mapping;
    return out;
}

}  // namespace pagoda::jinja
