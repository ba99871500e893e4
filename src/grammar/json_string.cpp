#include "grammar/json_string.h"

#include <cstdio>

#include "common/utf8.h"

namespace pagoda::grammar {

namespace {

// The JSON spelling of one codepoint inside a string.
std::string escape_codepoint(char32_t c) {
    switch (c) {
        case '"':
            return "\\\"";
        case '\\':
            return "\\\\";
        case '\n':
            return "\\n";
        case '\t':
            return "\\t";
        case '\r':
            return "\\r";
        case '\b':
            return "\\b";
        case '\f':
            return "\\f";
        default:
            break;
    }
    std::string s;
    if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04X", static_cast<unsigned>(c));
        s = buf;
    } else {
        utf8_append(s, c);
    }
    return s;
}

bool needs_escape(uint32_t c) {
    return c < 0x20 || c == '"' || c == '\\';
}

}  // namespace

Expr json_escaped(const Expr& e) {
    switch (e.kind) {
        case Expr::Kind::kEmpty:
        case Expr::Kind::kRef:
            return e;
        case Expr::Kind::kLiteral: {
            std::string out;
            for (size_t i = 0; i < e.text.size();)
                out += escape_codepoint(utf8_decode(e.text, i));
            return lit(std::move(out));
        }
        case Expr::Kind::kClass: {
            std::vector<CodepointRange> plain;
            std::vector<Expr> alts;
            for (const CodepointRange& r : class_codepoints(e)) {
                for (uint32_t c = r.lo; c <= r.hi && c < 0x60; ++c)
                    if (needs_escape(c)) alts.push_back(lit(escape_codepoint(c)));
                // The range without the characters that need escapes ('"' 0x22, '\' 0x5C, controls below 0x20).
                uint32_t lo = std::max(r.lo, 0x20u);
                for (uint32_t cut : {0x22u, 0x5Cu}) {
                    if (lo > r.hi) break;
                    if (cut >= lo && cut <= r.hi) {
                        if (cut > lo) plain.push_back({lo, cut - 1});
                        lo = cut + 1;
                    }
                }
                if (lo <= r.hi) plain.push_back({lo, r.hi});
            }
            if (!plain.empty()) alts.insert(alts.begin(), cls(std::move(plain)));
            if (alts.empty()) return cls({});  // matches nothing, as the class did
            return alt(std::move(alts));
        }
        case Expr::Kind::kSeq:
        case Expr::Kind::kAlt:
        case Expr::Kind::kRepeat: {
            Expr out = e;
            for (Expr& item : out.items)
                item = json_escaped(item);
            return out;
        }
    }
    return e;
}

const char* format_regex(std::string_view format) {
    // Dates and times as RFC 3339 writes them (JSON Schema's definition); the day is not checked against the month.
    if (format == "date") return R"([0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01]))";
    if (format == "time")
        return R"(([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9]))";
    if (format == "date-time")
        return R"([0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9]))";
    if (format == "uuid") return R"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})";
    // A practical address: a dot-atom local part, '@', and dot-separated labels ending in an alphabetic one. Labels
    // are not limited to 63 characters (RFC 1035's limit is not enforced).
    if (format == "email")
        return R"([A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@([A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?\.)+[A-Za-z][A-Za-z]+)";
    if (format == "ipv4")
        return R"(((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9]))";
    if (format == "hostname")
        return R"([A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*)";
    return nullptr;
}

}  // namespace pagoda::grammar
