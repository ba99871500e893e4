// ChatTemplate: loading from model directories and the message preprocessing transformers/vLLM apply. Expected
// values were produced by transformers 5.x (render_jinja_template, _normalize_chat_messages, _alias_reasoning_fields).
#include "chat/chat_template.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/file.h"

namespace pagoda::chat {
namespace {

namespace fs = std::filesystem;

Json parse(std::string_view text) {
    auto j = Json::parse(text);
    EXPECT_TRUE(j.ok()) << j.message();
    return j.ok() ? *j : Json();
}

class TempDir {
  public:
    TempDir() {
        path_ = fs::temp_directory_path() /
                ("pagoda_chat_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
        fs::create_directories(path_);
    }
    ~TempDir() { fs::remove_all(path_); }
    std::string path() const { return path_.string(); }
    void write(const std::string& name, const std::string& text) const { std::ofstream(path_ / name) << text; }

  private:
    static inline int counter_ = 0;
    fs::path path_;
};

TEST(ChatTemplate, RendersQwen3FromModelDir) {
    const std::string dir = std::string(PAGODA_SHARED_DIR) + "/qwen-tokenizers/qwen3-4b";
    if (!file_exists(dir + "/tokenizer_config.json")) GTEST_SKIP() << dir << " is absent";
    auto t = ChatTemplate::from_model_dir(dir);
    ASSERT_TRUE(t.ok()) << t.message();
    auto messages = parse(R"([{"role": "user", "content": "Hi"},
                              {"role": "assistant", "content": "<think>\nr\n</think>\n\nHello"}])");
    auto r = t->render(messages, Json(), true, parse(R"({"enable_thinking": false})"));
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_EQ(*r,
              "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\nr\n</think>\n\nHello<|im_end|>\n"
              "<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(ChatTemplate, PrepareMessagesDropsNullsParsesArgumentsAliasesReasoning) {
    auto prepared = prepare_messages(parse(R"([
        {"role": "user", "content": "hi", "name": null},
        {"role": "assistant", "content": "x", "reasoning": "r",
         "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]}])"));
    ASSERT_TRUE(prepared.ok()) << prepared.message();
    EXPECT_EQ(prepared->dump(), parse(R"([{"role": "user", "content": "hi"},
        {"thinking": "r", "role": "assistant", "content": "x", "reasoning": "r",
         "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"a": 1}}}],
         "reasoning_content": "r"}])")
                                    .dump());
    auto kept = prepare_messages(
        parse(R"([{"role": "assistant", "thinking": "t0", "content": "x", "reasoning_content": "rc"}])"));
    ASSERT_TRUE(kept.ok());
    EXPECT_EQ(kept->dump(),
              parse(R"([{"thinking": "t0", "role": "assistant", "content": "x", "reasoning_content": "rc"}])").dump());
}

TEST(ChatTemplate, ToolCallArgumentsFollowVllm) {
    // vLLM: an object is kept and a JSON string parsed; empty, missing, not JSON, or JSON but not an object: {}.
    auto prepared = prepare_messages(parse(R"([{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [
        {"function": {"name": "a", "arguments": ""}}, {"function": {"name": "b"}},
        {"function": {"name": "c", "arguments": "{\"k\": [1, 2]}"}}, {"function": {"name": "d", "arguments": {"k": 1}}},
        {"function": {"name": "e", "arguments": "{oops"}}, {"function": {"name": "f", "arguments": "[1, 2]"}},
        {"function": {"name": "g", "arguments": 7}}]}])"));
    ASSERT_TRUE(prepared.ok()) << prepared.message();
    EXPECT_EQ(prepared->dump(), parse(R"([{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [
        {"function": {"name": "a", "arguments": {}}}, {"function": {"name": "b", "arguments": {}}},
        {"function": {"name": "c", "arguments": {"k": [1, 2]}}}, {"function": {"name": "d", "arguments": {"k": 1}}},
        {"function": {"name": "e", "arguments": {}}}, {"function": {"name": "f", "arguments": {}}},
        {"function": {"name": "g", "arguments": {}}}]}])")
                                    .dump());
    // An empty list of calls is dropped.
    auto no_calls = prepare_messages(parse(R"([{"role": "assistant", "content": "x", "tool_calls": []}])"));
    ASSERT_TRUE(no_calls.ok());
    EXPECT_EQ(no_calls->dump(), parse(R"([{"role": "assistant", "content": "x"}])").dump());
}

TEST(ChatTemplate, BadMessagesAreErrors) {
    auto t = ChatTemplate::from_string("{{ messages|length }}");
    ASSERT_TRUE(t.ok());
    EXPECT_FALSE(t->render(parse("[]"), Json(), true).ok());
    EXPECT_FALSE(t->render(parse(R"({"role": "user"})"), Json(), true).ok());
    EXPECT_FALSE(t->render(parse(R"(["just a string"])"), Json(), true).ok());
    EXPECT_FALSE(t->render(parse(R"([{"role": "user"}])"), parse(R"({"not": "a list"})"), true).ok());
    EXPECT_FALSE(t->render(parse(R"([{"role": "user"}])"), Json(), true, parse(R"({"messages": 1})")).ok());
}

TEST(ChatTemplate, NamedTemplatesPickToolUseWhenToolsAreGiven) {
    TempDir dir;
    dir.write("tokenizer_config.json", R"({"eos_token": {"content": "</s>"}, "chat_template": [
        {"name": "default", "template": "D{{ messages|length }}{{ eos_token }}"},
        {"name": "tool_use", "template": "T{{ tools|length }}"}]})");
    auto t = ChatTemplate::from_model_dir(dir.path());
    ASSERT_TRUE(t.ok()) << t.message();
    auto messages = parse(R"([{"role": "user", "content": "hi"}])");
    EXPECT_EQ(*t->render(messages, Json(), false), "D1</s>");
    EXPECT_EQ(*t->render(messages, parse(R"([{"type": "function"}, {}])"), false), "T2");
}

TEST(ChatTemplate, JinjaFileTakesPrecedenceOverTokenizerConfig) {
    TempDir dir;
    dir.write("tokenizer_config.json", R"({"chat_template": "from config", "bos_token": "<s>"})");
    dir.write("chat_template.jinja", "from file {{ bos_token }}{{ add_generation_prompt }}\n");
    auto t = ChatTemplate::from_model_dir(dir.path());
    ASSERT_TRUE(t.ok()) << t.message();
    EXPECT_EQ(*t->render(parse(R"([{"role": "user"}])"), Json(), true), "from file <s>True");
}

TEST(ChatTemplate, LoadErrorsNameTheFile) {
    TempDir dir;
    auto missing = ChatTemplate::from_model_dir(dir.path());
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.message().find(dir.path()), std::string::npos);
    dir.write("chat_template.jinja", "{% if %}");
    auto broken = ChatTemplate::from_model_dir(dir.path());
    ASSERT_FALSE(broken.ok());
    EXPECT_NE(broken.message().find("chat_template.jinja"), std::string::npos) << broken.message();
    EXPECT_NE(broken.message().find("1:7"), std::string::npos) << broken.message();
}

}  // namespace
}  // namespace pagoda::chat
