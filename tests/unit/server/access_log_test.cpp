// AccessLog: the line's fields (absent ones left out, JSON-escaped), and the writer thread's file handling.
#include "server/http/access_log.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/json.h"

namespace pagoda::server::http {
namespace {

TEST(AccessRecord, FormatsOneJsonLine) {
    AccessRecord r;
    r.time_unix = 1700000000.25;
    r.request_id = "id-1";
    r.tenant = "acme \"corp\"";
    r.model = "m";
    r.method = "POST";
    r.path = "/v1/chat/completions";
    r.client = "::1";
    r.status = 200;
    r.prompt_tokens = 12;
    r.completion_tokens = 3;
    r.ttft_s = 0.0123456789;
    r.duration_s = 1.5;
    r.streamed = true;
    const std::string line = format_access_record(r);
    ASSERT_EQ(line.back(), '\n');
    EXPECT_EQ(line.find('\n'), line.size() - 1);
    auto j = Json::parse(line);
    ASSERT_TRUE(j.ok()) << j.message();
    EXPECT_EQ(j->find("time")->as_string(), "2023-11-14T22:13:20.250Z");
    EXPECT_EQ(j->find("tenant")->as_string(), "acme \"corp\"");
    EXPECT_EQ(j->find("prompt_tokens")->as_int(), 12);
    EXPECT_DOUBLE_EQ(j->find("ttft_s")->as_double(), 0.012346);
    EXPECT_TRUE(j->find("stream")->as_bool());
    EXPECT_EQ(j->find("complete"), nullptr);  // only written when false

    AccessRecord refused;
    refused.status = 401;
    auto k = Json::parse(format_access_record(refused));
    ASSERT_TRUE(k.ok());
    for (const char* absent : {"tenant", "model", "prompt_tokens", "completion_tokens", "ttft_s", "duration_s"})
        EXPECT_EQ(k->find(absent), nullptr) << absent;
}

std::vector<std::string> lines_of(const std::filesystem::path& p) {
    std::ifstream in(p);
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);)
        out.push_back(line);
    return out;
}

TEST(AccessLog, WritesEveryLineAndReopens) {
    const auto dir = std::filesystem::temp_directory_path() / ("pagoda-access-log-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const auto path = dir / "access.log";
    {
        auto log = AccessLog::open(path.string());
        ASSERT_TRUE(log.ok()) << log.message();
        AccessRecord r;
        r.status = 200;
        for (int i = 0; i < 1000; ++i) {
            r.request_id = std::to_string(i);
            (*log)->write(r);
        }
        std::filesystem::rename(path, dir / "access.log.1");
        ASSERT_TRUE((*log)->reopen().ok());
        r.request_id = "after";
        (*log)->write(r);
        EXPECT_EQ((*log)->dropped(), 0u);
    }  // the destructor writes what is queued
    auto old_lines = lines_of(dir / "access.log.1");
    auto new_lines = lines_of(path);
    // Lines queued before the reopen may land in either file, in order, none lost.
    EXPECT_EQ(old_lines.size() + new_lines.size(), 1001u);
    ASSERT_FALSE(new_lines.empty());
    EXPECT_NE(new_lines.back().find("\"request_id\":\"after\""), std::string::npos);
    EXPECT_FALSE(AccessLog::open((dir / "missing" / "x.log").string()).ok());
    std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pagoda::server::http
