// Report rendering: the JSON is one parseable object with the rows; the table has every row.
#include <gtest/gtest.h>

#include "common/json.h"
#include "tools/doctor/report.h"

namespace pagoda::doctor {
namespace {

Report sample() {
    Report r;
    r.add("driver", "580.159.04", Level::kPass);
    r.add("gpu0.temperature", "90 C", Level::kFail, "check cooling");
    r.add("gpu0.mig", "enabled", Level::kWarn, "nvidia-smi -L");
    r.add("measured", "skipped (--quick)", Level::kInfo);
    return r;
}

TEST(DoctorReport, CountsAndFail) {
    const Report r = sample();
    EXPECT_EQ(r.count(Level::kPass), 1);
    EXPECT_EQ(r.count(Level::kFail), 1);
    EXPECT_TRUE(r.has_fail());
    Report ok;
    ok.add("x", "y", Level::kWarn);
    EXPECT_FALSE(ok.has_fail());
}

TEST(DoctorReport, JsonRoundTrips) {
    auto parsed = Json::parse(render_json(sample()));
    ASSERT_TRUE(parsed.ok()) << parsed.message();
    const Json& j = *parsed;
    EXPECT_EQ(j.find("summary")->find("fail")->as_int(), 1);
    EXPECT_EQ(j.find("summary")->find("ok")->as_bool(), false);
    const auto& checks = j.find("checks")->as_array();
    ASSERT_EQ(checks.size(), 4u);
    EXPECT_EQ(checks[1].find("check")->as_string(), "gpu0.temperature");
    EXPECT_EQ(checks[1].find("status")->as_string(), "FAIL");
    EXPECT_EQ(checks[1].find("action")->as_string(), "check cooling");
}

TEST(DoctorReport, TableHasEveryRowAndASummary) {
    const std::string t = render_table(sample());
    for (const char* s : {"CHECK", "gpu0.temperature", "FAIL", "check cooling", "skipped (--quick)"})
        EXPECT_NE(t.find(s), std::string::npos) << s;
    EXPECT_NE(t.find("1 pass, 1 warn, 1 fail, 1 info"), std::string::npos);
}

}  // namespace
}  // namespace pagoda::doctor
