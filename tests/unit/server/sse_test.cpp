// SSE chunk formatting: every event is `data: <one JSON object>\n\n` with the fields OpenAI clients read.
#include "server/openai/sse.h"

#include <gtest/gtest.h>

#include "common/json.h"

namespace pagoda::server::openai {
namespace {

Json event_json(const std::string& event) {
    EXPECT_EQ(event.rfind("data: ", 0), 0u) << event;
    EXPECT_GE(event.size(), 8u);
    EXPECT_EQ(event.substr(event.size() - 2), "\n\n");
    auto j = Json::parse(std::string_view(event).substr(6, event.size() - 8));
    EXPECT_TRUE(j.ok()) << j.message() << ": " << event;
    return j.ok() ? *j : Json();
}

TEST(SseTest, FirstChatDeltaCarriesRoleAndEmptyContent) {
    SseChunks sse(SseChunks::Kind::kChat, "chatcmpl-1", 123, "m\"x");
    Json j = event_json(sse.chat_delta(0, true, "", "", {}, ""));
    EXPECT_EQ(j.find("id")->as_string(), "chatcmpl-1");
    EXPECT_EQ(j.find("object")->as_string(), "chat.completion.chunk");
    EXPECT_EQ(j.find("created")->as_int(), 123);
    EXPECT_EQ(j.find("model")->as_string(), "m\"x");
    const Json& c = j.find("choices")->as_array().at(0);
    EXPECT_EQ(c.find("index")->as_int(), 0);
    EXPECT_EQ(c.find("delta")->find("role")->as_string(), "assistant");
    EXPECT_EQ(c.find("delta")->find("content")->as_string(), "");
    EXPECT_TRUE(c.find("finish_reason")->is_null());
    EXPECT_TRUE(c.find("logprobs")->is_null());
    EXPECT_FALSE(j.contains("usage"));
}

TEST(SseTest, ContentReasoningToolCallsAndFinish) {
    SseChunks sse(SseChunks::Kind::kChat, "id", 1, "m");
    const std::string tricky = "line\n\"quoted\"\t\\ \xe4\xbd\xa0\x01";
    Json j = event_json(sse.chat_delta(2, false, "think", tricky, {}, "stop"));
    const Json& c = j.find("choices")->as_array().at(0);
    EXPECT_EQ(c.find("index")->as_int(), 2);
    EXPECT_EQ(c.find("delta")->find("content")->as_string(), tricky);
    EXPECT_EQ(c.find("delta")->find("reasoning_content")->as_string(), "think");
    EXPECT_EQ(c.find("delta")->find("reasoning")->as_string(), "think");
    EXPECT_FALSE(c.find("delta")->contains("role"));
    EXPECT_EQ(c.find("finish_reason")->as_string(), "stop");

    std::vector<chat::ToolCallDelta> calls = {{0, "call_1", "get_weather", ""}, {1, "", "", "{\"a\":"}};
    j = event_json(sse.chat_delta(0, false, "", "", calls, ""));
    const Json& d = *j.find("choices")->as_array().at(0).find("delta");
    ASSERT_TRUE(d.contains("tool_calls"));
    EXPECT_FALSE(d.contains("content"));
    const Json& t0 = d.find("tool_calls")->as_array().at(0);
    EXPECT_EQ(t0.find("id")->as_string(), "call_1");
    EXPECT_EQ(t0.find("type")->as_string(), "function");
    EXPECT_EQ(t0.find("function")->find("name")->as_string(), "get_weather");
    EXPECT_EQ(t0.find("function")->find("arguments")->as_string(), "");
    const Json& t1 = d.find("tool_calls")->as_array().at(1);
    EXPECT_EQ(t1.find("index")->as_int(), 1);
    EXPECT_FALSE(t1.contains("id"));
    EXPECT_EQ(t1.find("function")->find("arguments")->as_string(), "{\"a\":");
}

TEST(SseTest, CompletionChunkAndUsage) {
    SseChunks sse(SseChunks::Kind::kCompletion, "cmpl-1", 5, "m");
    UsageCounts u{10, 4, 8};
    Json j = event_json(sse.completion_text(1, "abc", "length", R"({"tokens":["a"]})", &u));
    EXPECT_EQ(j.find("object")->as_string(), "text_completion");
    const Json& c = j.find("choices")->as_array().at(0);
    EXPECT_EQ(c.find("text")->as_string(), "abc");
    EXPECT_EQ(c.find("finish_reason")->as_string(), "length");
    EXPECT_EQ(c.find("logprobs")->find("tokens")->as_array().at(0).as_string(), "a");
    EXPECT_EQ(j.find("usage")->find("total_tokens")->as_int(), 14);

    Json last = event_json(sse.usage_chunk(u));
    EXPECT_TRUE(last.find("choices")->as_array().empty());
    const Json* usage = last.find("usage");
    EXPECT_EQ(usage->find("prompt_tokens")->as_int(), 10);
    EXPECT_EQ(usage->find("completion_tokens")->as_int(), 4);
    EXPECT_EQ(usage->find("total_tokens")->as_int(), 14);
    EXPECT_EQ(usage->find("prompt_tokens_details")->find("cached_tokens")->as_int(), 8);
    EXPECT_EQ(SseChunks::done(), "data: [DONE]\n\n");
}

}  // namespace
}  // namespace pagoda::server::openai
