// The doctor's output: rows of (check, value, status, what to do), rendered as a table or JSON.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pagoda::doctor {

// INFO rows state a fact without a verdict (inventory, a benchmark that was not run); they never
// change the exit status. Only FAIL makes `pagoda doctor` exit 1.
enum class Level { kPass, kInfo, kWarn, kFail };

std::string_view level_name(Level level);  // "PASS", "INFO", "WARN", "FAIL"

struct CheckRow {
    std::string check;  // "gpu0.pcie.link", "driver.cuda"
    std::string value;  // what was read or measured
    Level level = Level::kPass;
    std::string action;  // the command a person could run, or what to change; empty when nothing to do
};

struct Report {
    std::vector<CheckRow> rows;

    void add(std::string check, std::string value, Level level, std::string action = {});
    int count(Level level) const;
    bool has_fail() const { return count(Level::kFail) > 0; }
    // First row whose check name equals `check`; nullptr when none (tests and the CLI use it).
    const CheckRow* find(std::string_view check) const;
};

// A plain-text table with a summary line; fits a terminal when values are short.
std::string render_table(const Report& report);
// One JSON object: {"summary": {...}, "checks": [{"check","value","status","action"}, ...]}.
std::string render_json(const Report& report);

}  // namespace pagoda::doctor
