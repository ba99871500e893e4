// Request validation: good requests parse into the right SamplingParams; bad ones give a 400 naming the field.
#include "server/openai/protocol.h"

#include <gtest/gtest.h>

namespace pagoda::server::openai {
namespace {

Json parse(const std::string& text) {
    auto j = Json::parse(text);
    EXPECT_TRUE(j.ok()) << j.message();
    return j.ok() ? *j : Json();
}

std::optional<ApiError> chat_error(const std::string& body) {
    ChatRequest r;
    return parse_chat_request(parse(body), r);
}
std::optional<ApiError> completion_error(const std::string& body) {
    CompletionRequest r;
    return parse_completion_request(parse(body), r);
}

const std::string kMsgs = R"("messages":[{"role":"user","content":"hi"}])";

TEST(ProtocolTest, ChatRequestWithAllSamplingFields) {
    ChatRequest r;
    auto err = parse_chat_request(parse(R"({"model":"m",)" + kMsgs + R"(,
        "temperature":0.5,"top_p":0.9,"top_k":40,"min_p":0.05,"repetition_penalty":1.1,"presence_penalty":0.5,
        "frequency_penalty":-0.5,"seed":7,"n":2,"max_tokens":10,"min_tokens":2,"ignore_eos":true,
        "stop":["a","b"],"stop_token_ids":[5,6],"include_stop_str_in_output":true,"skip_special_tokens":false,
        "logprobs":true,"top_logprobs":3,"logit_bias":{"17":-100},"priority":3,"stream":true,
        "stream_options":{"include_usage":true},"chat_template_kwargs":{"enable_thinking":false},"user":"u"})"),
                                  r);
    ASSERT_FALSE(err) << err->message;
    EXPECT_EQ(r.model, "m");
    EXPECT_FLOAT_EQ(*r.params.temperature, 0.5f);
    EXPECT_FLOAT_EQ(*r.params.top_p, 0.9f);
    EXPECT_EQ(*r.params.top_k, 40);
    EXPECT_FLOAT_EQ(*r.params.min_p, 0.05f);
    EXPECT_FLOAT_EQ(*r.params.repetition_penalty, 1.1f);
    EXPECT_FLOAT_EQ(r.params.presence_penalty, 0.5f);
    EXPECT_FLOAT_EQ(r.params.frequency_penalty, -0.5f);
    EXPECT_EQ(*r.params.seed, 7u);
    EXPECT_EQ(r.params.n, 2);
    EXPECT_EQ(*r.params.max_tokens, 10);
    EXPECT_EQ(r.params.min_tokens, 2);
    EXPECT_TRUE(r.params.ignore_eos);
    EXPECT_EQ(r.text.stop, (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(r.params.stop_token_ids, (std::vector<int32_t>{5, 6}));
    EXPECT_TRUE(r.text.include_stop_str_in_output);
    EXPECT_FALSE(r.text.skip_special_tokens);
    EXPECT_TRUE(r.params.logprobs);
    EXPECT_EQ(r.params.top_logprobs, 3);
    ASSERT_EQ(r.params.logit_bias.size(), 1u);
    EXPECT_EQ(r.params.logit_bias[0].first, 17);
    EXPECT_EQ(r.priority, 3);
    EXPECT_TRUE(r.text.stream);
    EXPECT_TRUE(r.text.include_usage);
    EXPECT_FALSE(r.chat_template_kwargs.find("enable_thinking")->as_bool());
    EXPECT_EQ(r.tool_choice, "none");  // no tools
}

TEST(ProtocolTest, UnsetSamplingFieldsStayUnsetForGenerationConfig) {
    ChatRequest r;
    ASSERT_FALSE(parse_chat_request(parse("{" + kMsgs + "}"), r));
    EXPECT_FALSE(r.params.temperature.has_value());
    EXPECT_FALSE(r.params.top_p.has_value());
    EXPECT_FALSE(r.params.max_tokens.has_value());
    EXPECT_FALSE(r.text.stream);
    // null is absent, as Python clients send it
    ASSERT_FALSE(parse_chat_request(parse("{" + kMsgs + R"(,"temperature":null,"stop":null})"), r));
    EXPECT_FALSE(r.params.temperature.has_value());
}

TEST(ProtocolTest, MaxCompletionTokensWinsOverMaxTokens) {
    ChatRequest r;
    ASSERT_FALSE(parse_chat_request(parse("{" + kMsgs + R"(,"max_tokens":5,"max_completion_tokens":9})"), r));
    EXPECT_EQ(*r.params.max_tokens, 9);
}

TEST(ProtocolTest, ContentPartsAreJoinedAndImagesRejected) {
    ChatRequest r;
    ASSERT_FALSE(parse_chat_request(
        parse(R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]})"),
        r));
    EXPECT_EQ(r.messages.as_array()[0].find("content")->as_string(), "a\nb");
    auto err =
        chat_error(R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://x"}}]}]})");
    ASSERT_TRUE(err);
    EXPECT_EQ(err->status, 400);
    EXPECT_EQ(err->param, "messages[0].content[0]");
    EXPECT_NE(err->message.find("image_url"), std::string::npos);
}

struct BadCase {
    std::string body;
    std::string param;
};

// The turn after a tool call: an assistant message with "content": null, or none, reaches the template with "" (as
// vLLM); its calls are kept. A bad tool_calls is still named. (The fuzzer found a use after free here once.)
TEST(ProtocolTest, AssistantToolTurnWithoutContentGetsEmptyContent) {
    for (const char* assistant : {R"({"role":"assistant","content":null,"tool_calls":[{"id":"c"}]})",
                                  R"({"role":"assistant","tool_calls":[{"id":"c"}],"name":"x"})"}) {
        ChatRequest r;
        auto err = parse_chat_request(
            parse(std::string(R"({"messages":[{"role":"user","content":"hi"},)") + assistant + "]}"), r);
        ASSERT_FALSE(err) << err->message;
        const Json& m = r.messages.as_array().at(1);
        EXPECT_EQ(m.find("content")->as_string(), "") << assistant;
        EXPECT_EQ(m.find("tool_calls")->as_array().at(0).find("id")->as_string(), "c") << assistant;
    }
    auto err = chat_error(R"({"messages":[{"role":"assistant","tool_calls":{"id":"c"}}]})");
    ASSERT_TRUE(err);
    EXPECT_EQ(err->param, "messages[0].tool_calls");
    err = chat_error(R"({"messages":[{"role":"user","content":null}]})");
    ASSERT_TRUE(err);
    EXPECT_EQ(err->param, "messages[0].content");
}

TEST(ProtocolTest, BadChatFieldsNameTheField) {
    const std::vector<BadCase> cases = {
        {R"({})", "messages"},
        {R"({"messages":[]})", "messages"},
        {R"({"messages":"hi"})", "messages"},
        {R"({"messages":[{"role":"robot","content":"x"}]})", "messages[0].role"},
        {R"({"messages":[{"content":"x"}]})", "messages[0].role"},
        {R"({"messages":[{"role":"user"}]})", "messages[0].content"},
        {R"({"messages":[{"role":"user","content":5}]})", "messages[0].content"},
        {"{" + kMsgs + R"(,"temperature":-1})", "temperature"},
        {"{" + kMsgs + R"(,"temperature":"hot"})", "temperature"},
        {"{" + kMsgs + R"(,"top_p":0})", "top_p"},
        {"{" + kMsgs + R"(,"top_p":1.5})", "top_p"},
        {"{" + kMsgs + R"(,"top_k":-2})", "top_k"},
        {"{" + kMsgs + R"(,"min_p":2})", "min_p"},
        {"{" + kMsgs + R"(,"repetition_penalty":0})", "repetition_penalty"},
        {"{" + kMsgs + R"(,"presence_penalty":3})", "presence_penalty"},
        {"{" + kMsgs + R"(,"frequency_penalty":-3})", "frequency_penalty"},
        {"{" + kMsgs + R"(,"n":0})", "n"},
        {"{" + kMsgs + R"(,"n":100000})", "n"},
        {"{" + kMsgs + R"(,"max_tokens":0})", "max_tokens"},
        {"{" + kMsgs + R"(,"max_tokens":-5})", "max_tokens"},
        {"{" + kMsgs + R"(,"max_tokens":"ten"})", "max_tokens"},
        {"{" + kMsgs + R"(,"max_tokens":5,"min_tokens":6})", "min_tokens"},
        {"{" + kMsgs + R"(,"stop":5})", "stop"},
        {"{" + kMsgs + R"(,"stop":["a",1]})", "stop[1]"},
        {"{" + kMsgs + R"(,"stop_token_ids":[1,-1]})", "stop_token_ids[1]"},
        {"{" + kMsgs + R"(,"logit_bias":{"x":1}})", "logit_bias.x"},
        {"{" + kMsgs + R"(,"logit_bias":{"5":1000}})", "logit_bias.5"},
        {"{" + kMsgs + R"(,"top_logprobs":3})", "top_logprobs"},
        {"{" + kMsgs + R"(,"logprobs":true,"top_logprobs":21})", "top_logprobs"},
        {"{" + kMsgs + R"(,"stream_options":{"include_usage":true}})", "stream_options"},
        {"{" + kMsgs + R"(,"stream":true,"stream_options":{"include_usage":1}})", "stream_options.include_usage"},
        {"{" + kMsgs + R"(,"best_of":3})", "best_of"},
        {"{" + kMsgs + R"(,"use_beam_search":true})", "use_beam_search"},
        {"{" + kMsgs + R"(,"response_format":{"type":"json_schema"}})", "response_format.json_schema"},
        {"{" + kMsgs + R"(,"response_format":{"type":"xml"}})", "response_format.type"},
        {"{" + kMsgs + R"(,"guided_json":5})", "guided_json"},
        {"{" + kMsgs + R"(,"guided_choice":["a",1]})", "guided_choice"},
        {"{" + kMsgs + R"(,"structured_outputs":{"regex":""}})", "structured_outputs.regex"},
        {"{" + kMsgs + R"(,"guided_regex":"a","guided_grammar":"root ::= x"})", "guided_grammar"},
        {"{" + kMsgs + R"(,"guided_regex":"a","min_tokens":1})", "min_tokens"},
        {"{" + kMsgs + R"(,"tool_choice":"maybe"})", "tool_choice"},
        {"{" + kMsgs + R"(,"tool_choice":"required"})", "tool_choice"},
        {"{" + kMsgs +
             R"(,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}}})",
         "tool_choice"},
        {"{" + kMsgs + R"(,"tools":[{"type":"function","function":{}}]})", "tools[0].function.name"},
        {"{" + kMsgs + R"(,"chat_template_kwargs":"x"})", "chat_template_kwargs"},
        {"{" + kMsgs + R"(,"continue_final_message":true})", "continue_final_message"},
    };
    for (const auto& c : cases) {
        auto err = chat_error(c.body);
        ASSERT_TRUE(err) << c.body;
        EXPECT_EQ(err->status, 400) << c.body;
        EXPECT_EQ(err->param, c.param) << c.body << " -> " << err->message;
        EXPECT_FALSE(err->message.empty());
    }
}

TEST(ProtocolTest, CompletionPromptForms) {
    CompletionRequest r;
    ASSERT_FALSE(parse_completion_request(parse(R"({"prompt":"hello"})"), r));
    ASSERT_EQ(r.prompts.size(), 1u);
    EXPECT_EQ(r.prompts[0].text, "hello");

    r = {};
    ASSERT_FALSE(parse_completion_request(parse(R"({"prompt":["a","b"],"n":2})"), r));
    ASSERT_EQ(r.prompts.size(), 2u);

    r = {};
    ASSERT_FALSE(parse_completion_request(parse(R"({"prompt":[1,2,3],"logprobs":2,"echo":true})"), r));
    ASSERT_EQ(r.prompts.size(), 1u);
    EXPECT_TRUE(r.prompts[0].is_tokens);
    EXPECT_EQ(r.prompts[0].tokens, (std::vector<int32_t>{1, 2, 3}));
    EXPECT_TRUE(r.params.logprobs);
    EXPECT_EQ(r.params.top_logprobs, 2);
    EXPECT_TRUE(r.echo);

    r = {};
    ASSERT_FALSE(parse_completion_request(parse(R"({"prompt":[[1,2],[3]]})"), r));
    ASSERT_EQ(r.prompts.size(), 2u);
    EXPECT_EQ(r.prompts[1].tokens, (std::vector<int32_t>{3}));
}

TEST(ProtocolTest, BadCompletionFieldsNameTheField) {
    const std::vector<BadCase> cases = {
        {R"({})", "prompt"},
        {R"({"prompt":5})", "prompt"},
        {R"({"prompt":[]})", "prompt"},
        {R"({"prompt":[1,"a"]})", "prompt[1]"},
        {R"({"prompt":["a",[]]})", "prompt[1]"},
        {R"({"prompt":"x","logprobs":21})", "logprobs"},
        {R"({"prompt":"x","suffix":"y"})", "suffix"},
        {R"({"prompt":"x","echo":"yes"})", "echo"},
        {R"({"prompt":["a","b","c"],"n":50})", "n"},
    };
    for (const auto& c : cases) {
        auto err = completion_error(c.body);
        ASSERT_TRUE(err) << c.body;
        EXPECT_EQ(err->param, c.param) << c.body << " -> " << err->message;
    }
}

TEST(ProtocolTest, ErrorBodyHasTheOpenAiShape) {
    auto body = Json::parse(error_body(ApiError::bad_request("bad temperature", "temperature")));
    ASSERT_TRUE(body.ok());
    const Json* e = body->find("error");
    ASSERT_TRUE(e && e->is_object());
    EXPECT_EQ(e->find("message")->as_string(), "bad temperature");
    EXPECT_EQ(e->find("type")->as_string(), "BadRequestError");
    EXPECT_EQ(e->find("param")->as_string(), "temperature");
    EXPECT_EQ(e->find("code")->as_int(), 400);
    auto none = Json::parse(error_body(ApiError::unauthorized()));
    EXPECT_TRUE(none->find("error")->find("param")->is_null());
}

}  // namespace
}  // namespace pagoda::server::openai
