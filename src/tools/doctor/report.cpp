// Table and JSON rendering of the doctor's report.
#include "tools/doctor/report.h"

#include <algorithm>
#include <cstdio>

#include "common/json.h"

namespace pagoda::doctor {

std::string_view level_name(Level level) {
    switch (level) {
        case Level::kPass:
            return "PASS";
        case Level::kInfo:
            return "INFO";
        case Level::kWarn:
            return "WARN";
        case Level::kFail:
            return "FAIL";
    }
    return "?";
}

void Report::add(std::string check, std::string value, Level level, std::string action) {
    rows.push_back({std::move(check), std::move(value), level, std::move(action)});
}

int Report::count(Level level) const {
    return static_cast<int>(
        std::count_if(rows.begin(), rows.end(), [&](const CheckRow& r) { return r.level == level; }));
}

const CheckRow* Report::find(std::string_view check) const {
    for (const auto& r : rows)
        if (r.check == check) return &r;
    return nullptr;
}

namespace {

std::string pad(std::string_view s, size_t width) {
    std::string out(s);
    if (out.size() < width) out.append(width - out.size(), ' ');
    return out;
}

// Splits `text` at spaces into lines of at most `width` characters (longer words stay whole).
std::vector<std::string> wrap(const std::string& text, size_t width) {
    std::vector<std::string> lines;
    std::string line;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t end = text.find(' ', pos);
        if (end == std::string::npos) end = text.size();
        const std::string word = text.substr(pos, end - pos);
        if (!line.empty() && line.size() + 1 + word.size() > width) {
            lines.push_back(line);
            line.clear();
        }
        line += (line.empty() ? "" : " ") + word;
        pos = end + 1;
    }
    if (!line.empty() || lines.empty()) lines.push_back(line);
    return lines;
}

}  // namespace

std::string render_table(const Report& report) {
    // Values can be long (topology lists); cap the column so the status stays readable.
    constexpr size_t kMaxValueWidth = 60;
    size_t check_w = 5, value_w = 5;
    for (const auto& r : report.rows) {
        check_w = std::max(check_w, r.check.size());
        value_w = std::max(value_w, std::min(r.value.size(), kMaxValueWidth));
    }
    std::string out;
    out += pad("CHECK", check_w) + "  " + pad("VALUE", value_w) + "  STATUS  WHAT TO DO\n";
    out += std::string(check_w, '-') + "  " + std::string(value_w, '-') + "  ------  ----------\n";
    for (const auto& r : report.rows) {
        const std::vector<std::string> lines = wrap(r.value, value_w);
        for (size_t i = 0; i < lines.size(); ++i) {
            if (i == 0)
                out += pad(r.check, check_w) + "  " + pad(lines[i], value_w) + "  " + pad(level_name(r.level), 6) +
                       "  " + r.action;
            else
                out += std::string(check_w + 2, ' ') + lines[i];
            while (!out.empty() && out.back() == ' ')
                out.pop_back();
            out += '\n';
        }
    }
    char summary[96];
    std::snprintf(summary, sizeof(summary), "\n%d pass, %d warn, %d fail, %d info\n", report.count(Level::kPass),
                  report.count(Level::kWarn), report.count(Level::kFail), report.count(Level::kInfo));
    out += summary;
    return out;
}

std::string render_json(const Report& report) {
    Json summary = Json::object();
    summary.set("pass", report.count(Level::kPass));
    summary.set("warn", report.count(Level::kWarn));
    summary.set("fail", report.count(Level::kFail));
    summary.set("info", report.count(Level::kInfo));
    summary.set("ok", !report.has_fail());
    Json checks = Json::array();
    for (const auto& r : report.rows) {
        Json row = Json::object();
        row.set("check", r.check);
        row.set("value", r.value);
        row.set("status", std::string(level_name(r.level)));
        row.set("action", r.action);
        checks.push_back(std::move(row));
    }
    Json root = Json::object();
    root.set("summary", std::move(summary));
    root.set("checks", std::move(checks));
    return root.dump();
}

}  // namespace pagoda::doctor
