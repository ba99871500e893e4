// OpenAiService end to end without sockets: a recording Responder, the ScriptedGenerator test double, and a real
// Qwen3 tokenizer and chat template. The scripted output is the tokenization of a known text, so the expected
// content is that text (decode(encode(x)) == x is the tokenizer's own, separately tested, property).
#include "server/openai/service.h"

#include "server/openai/model_holder.h"
#include "server/openai/model_reload.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <deque>
#include <filesystem>
#include <future>
#include <mutex>
#include <thread>

namespace pagoda::server::openai {
namespace {

// Records what a handler answers; post() runs closures on one worker thread, like a connection strand.
class RecordingResponder final : public http::Responder {
  public:
    RecordingResponder() : worker_([this] { run(); }) {}
    ~RecordingResponder() override {
        {
            std::lock_guard<std::mutex> lock(mu_);
            stop_ = true;
        }
        cv_.notify_all();
        worker_.join();
    }
    void send(http::Response response) override {
        std::lock_guard<std::mutex> lock(mu_);
        status_ = response.status;
        headers_ = response.headers;
        body_ = response.body;
        done_ = true;
        cv_.notify_all();
    }
    void start_stream(int status, std::string, http::Headers headers) override {
        std::lock_guard<std::mutex> lock(mu_);
        status_ = status;
        headers_ = std::move(headers);
        streaming_ = true;
    }
    bool write(std::string data) override {
        std::lock_guard<std::mutex> lock(mu_);
        if (closed_) return false;
        body_ += data;
        return true;
    }
    void finish() override {
        std::lock_guard<std::mutex> lock(mu_);
        done_ = true;
        cv_.notify_all();
    }
    size_t pending_bytes() const override { return 0; }
    bool closed() const override { return closed_; }
    void on_close(std::function<void()> cb) override {
        std::lock_guard<std::mutex> lock(mu_);
        on_close_ = std::move(cb);
    }
    void post(std::function<void()> fn) override {
        std::lock_guard<std::mutex> lock(mu_);
        tasks_.push_back(std::move(fn));
        cv_.notify_all();
    }
    // Simulates the client hanging up.
    void hang_up() {
        std::function<void()> cb;
        {
            std::lock_guard<std::mutex> lock(mu_);
            closed_ = true;
            cb = std::move(on_close_);
        }
        if (cb) post(cb);
    }
    bool wait_done(int seconds = 20) {
        std::unique_lock<std::mutex> lock(mu_);
        return cv_.wait_for(lock, std::chrono::seconds(seconds), [&] { return done_; });
    }
    int status() {
        std::lock_guard<std::mutex> lock(mu_);
        return status_;
    }
    std::string body() {
        std::lock_guard<std::mutex> lock(mu_);
        return body_;
    }
    bool streaming() {
        std::lock_guard<std::mutex> lock(mu_);
        return streaming_;
    }
    const std::string* header(std::string_view name) { return http::find_header(headers_, name); }

  private:
    void run() {
        std::unique_lock<std::mutex> lock(mu_);
        while (true) {
            cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
            if (tasks_.empty()) return;
            auto fn = std::move(tasks_.front());
            tasks_.pop_front();
            lock.unlock();
            fn();
            lock.lock();
        }
    }
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::function<void()>> tasks_;
    bool stop_ = false;
    int status_ = 0;
    http::Headers headers_;
    std::string body_;
    bool streaming_ = false;
    bool done_ = false;
    std::atomic<bool> closed_{false};
    std::function<void()> on_close_;
    std::thread worker_;
};

std::string tokenizer_dir() {
    return std::string(PAGODA_SHARED_DIR) + "/qwen-tokenizers/qwen3-4b";
}

class ServiceTest : public ::testing::Test {
  protected:
    void SetUp() override {
        if (!std::filesystem::exists(tokenizer_dir() + "/vocab.json"))
            GTEST_SKIP() << "no tokenizer at " << tokenizer_dir();
        auto tok = Tokenizer::load_from_dir(tokenizer_dir());
        ASSERT_TRUE(tok.ok()) << tok.message();
        tokenizer_.emplace(std::move(tok).value());
    }

    // A service whose generator emits the tokens of `script_text` (plus `extra_ids`).
    void make_service(const std::string& script_text, ServiceConfig config = {}, std::vector<int32_t> extra_ids = {},
                      int interval_us = 0) {
        ScriptedGenerator::Options go;
        go.script = tokenizer_->encode(script_text);
        go.script.insert(go.script.end(), extra_ids.begin(), extra_ids.end());
        go.eos_token_ids = {*tokenizer_->token_to_id("<|im_end|>")};
        go.max_model_len = 4096;
        go.token_interval_us = interval_us;
        generator_ = std::make_unique<ScriptedGenerator>(go);
        auto tmpl = chat::ChatTemplate::from_model_dir(tokenizer_dir());
        ASSERT_TRUE(tmpl.ok()) << tmpl.message();
        if (config.served_model_names.empty()) config.served_model_names = {"qwen-test"};
        service_ = std::make_unique<OpenAiService>(
            config, *tokenizer_, std::make_unique<chat::ChatTemplate>(std::move(tmpl).value()), *generator_);
        service_->set_ready(true);
    }

    std::shared_ptr<RecordingResponder> call(const std::string& method, const std::string& path,
                                             const std::string& body, http::Headers headers = {}) {
        auto r = std::make_shared<RecordingResponder>();
        http::Request req;
        req.method = method;
        req.target = path;
        req.path = path;
        req.body = body;
        req.headers = std::move(headers);
        service_->handle(std::move(req), r);
        EXPECT_TRUE(r->wait_done()) << path << " " << body;
        return r;
    }

    static Json json_of(const std::string& text) {
        auto j = Json::parse(text);
        EXPECT_TRUE(j.ok()) << j.message() << ": " << text;
        return j.ok() ? *j : Json();
    }

    // The JSON events of an SSE body, and whether it ended with [DONE].
    static std::vector<Json> events(const std::string& body, bool* done) {
        std::vector<Json> out;
        *done = false;
        size_t pos = 0;
        while (pos < body.size()) {
            const size_t end = body.find("\n\n", pos);
            EXPECT_NE(end, std::string::npos) << body;
            if (end == std::string::npos) break;
            std::string ev = body.substr(pos, end - pos);
            EXPECT_EQ(ev.rfind("data: ", 0), 0u) << ev;
            if (ev == "data: [DONE]") {
                *done = true;
                EXPECT_EQ(end + 2, body.size()) << "[DONE] must be last";
            } else {
                out.push_back(json_of(ev.substr(6)));
            }
            pos = end + 2;
        }
        return out;
    }

    std::optional<Tokenizer> tokenizer_;
    std::unique_ptr<ScriptedGenerator> generator_;
    std::unique_ptr<OpenAiService> service_;
};

const std::string kChat = R"({"model":"qwen-test","messages":[{"role":"user","content":"Hello"}])";

TEST_F(ServiceTest, ChatNonStreaming) {
    const std::string text = "Hi there! 你好 🌍 How can I help?";
    make_service(text, {}, {*tokenizer_->token_to_id("<|im_end|>")});
    auto r = call("POST", "/v1/chat/completions", kChat + "}");
    ASSERT_EQ(r->status(), 200) << r->body();
    Json j = json_of(r->body());
    EXPECT_EQ(j.find("object")->as_string(), "chat.completion");
    EXPECT_EQ(j.find("model")->as_string(), "qwen-test");
    EXPECT_EQ(j.find("id")->as_string().rfind("chatcmpl-", 0), 0u);
    const Json& c = j.find("choices")->as_array().at(0);
    EXPECT_EQ(c.find("message")->find("role")->as_string(), "assistant");
    EXPECT_EQ(c.find("message")->find("content")->as_string(), text);  // EOS not in the text
    EXPECT_EQ(c.find("finish_reason")->as_string(), "stop");
    const Json* usage = j.find("usage");
    const auto prompt = tokenizer_->encode("<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n");
    EXPECT_EQ(usage->find("prompt_tokens")->as_int(), static_cast<int64_t>(prompt.size()));
    EXPECT_EQ(usage->find("completion_tokens")->as_int(), static_cast<int64_t>(tokenizer_->encode(text).size() + 1));
    EXPECT_EQ(usage->find("total_tokens")->as_int(),
              usage->find("prompt_tokens")->as_int() + usage->find("completion_tokens")->as_int());
}

TEST_F(ServiceTest, ChatStreamingWithUsage) {
    const std::string text = "One, two, three — four.";
    make_service(text);
    auto r = call("POST", "/v1/chat/completions",
                  kChat + R"(,"stream":true,"stream_options":{"include_usage":true},"max_tokens":100})");
    ASSERT_TRUE(r->streaming());
    bool done = false;
    auto evs = events(r->body(), &done);
    EXPECT_TRUE(done);
    ASSERT_GE(evs.size(), 3u);
    const Json& first = evs[0].find("choices")->as_array().at(0);
    EXPECT_EQ(first.find("delta")->find("role")->as_string(), "assistant");
    std::string content;
    std::string finish;
    for (size_t i = 0; i + 1 < evs.size(); ++i) {
        EXPECT_EQ(evs[i].find("object")->as_string(), "chat.completion.chunk");
        const Json& c = evs[i].find("choices")->as_array().at(0);
        if (const Json* s = c.find("delta")->find("content")) content += s->as_string();
        if (c.find("finish_reason")->is_string()) finish = c.find("finish_reason")->as_string();
    }
    EXPECT_EQ(content, text);
    EXPECT_EQ(finish, "stop");  // the script ran out: the model "stopped"
    const Json& last = evs.back();
    EXPECT_TRUE(last.find("choices")->as_array().empty());
    EXPECT_EQ(last.find("usage")->find("completion_tokens")->as_int(),
              static_cast<int64_t>(tokenizer_->encode(text).size()));
}

TEST_F(ServiceTest, MaxTokensGivesLength) {
    make_service("a b c d e f g h i j k l m n o p");
    auto r = call("POST", "/v1/chat/completions", kChat + R"(,"max_tokens":3})");
    Json j = json_of(r->body());
    EXPECT_EQ(j.find("choices")->as_array().at(0).find("finish_reason")->as_string(), "length");
    EXPECT_EQ(j.find("usage")->find("completion_tokens")->as_int(), 3);
    auto ids = tokenizer_->encode("a b c d e f g h i j k l m n o p");
    ids.resize(3);
    EXPECT_EQ(j.find("choices")->as_array().at(0).find("message")->find("content")->as_string(),
              *tokenizer_->decode(ids));
}

TEST_F(ServiceTest, StopStringCutsAcrossTokensInBothModes) {
    const std::string text = "The answer is 42. END of story, more text follows here";
    make_service(text);
    for (bool stream : {false, true}) {
        auto r = call("POST", "/v1/chat/completions",
                      kChat + R"(,"stop":["END of"],"stream":)" + (stream ? "true" : "false") + "}");
        std::string content, finish;
        if (stream) {
            bool done = false;
            for (const Json& e : events(r->body(), &done)) {
                const Json& c = e.find("choices")->as_array().at(0);
                if (const Json* s = c.find("delta")->find("content")) content += s->as_string();
                if (c.find("finish_reason")->is_string()) finish = c.find("finish_reason")->as_string();
            }
            EXPECT_TRUE(done);
        } else {
            Json j = json_of(r->body());
            content = j.find("choices")->as_array().at(0).find("message")->find("content")->as_string();
            finish = j.find("choices")->as_array().at(0).find("finish_reason")->as_string();
        }
        EXPECT_EQ(content, "The answer is 42. ") << "stream=" << stream;
        EXPECT_EQ(finish, "stop");
    }
    auto r = call("POST", "/v1/chat/completions", kChat + R"(,"stop":"END","include_stop_str_in_output":true})");
    EXPECT_EQ(json_of(r->body()).find("choices")->as_array().at(0).find("message")->find("content")->as_string(),
              "The answer is 42. END");
}

TEST_F(ServiceTest, SeveralChoices) {
    make_service("same words");
    auto r = call("POST", "/v1/chat/completions", kChat + R"(,"n":3})");
    Json j = json_of(r->body());
    ASSERT_EQ(j.find("choices")->as_array().size(), 3u);
    for (int i = 0; i < 3; ++i) {
        const Json& c = j.find("choices")->as_array().at(static_cast<size_t>(i));
        EXPECT_EQ(c.find("index")->as_int(), i);
        EXPECT_EQ(c.find("message")->find("content")->as_string(), "same words");
    }
}

TEST_F(ServiceTest, ReasoningIsSplitOut) {
    ServiceConfig config;
    config.reasoning_parser = true;
    make_service("<think>\nLet me think.\n</think>\n\nThe answer.", config);
    auto r = call("POST", "/v1/chat/completions", kChat + "}");
    Json j = json_of(r->body());
    const Json* m = j.find("choices")->as_array().at(0).find("message");
    ASSERT_TRUE(m->find("reasoning_content")) << r->body();
    EXPECT_EQ(m->find("reasoning_content")->as_string(), "\nLet me think.\n");
    EXPECT_EQ(m->find("content")->as_string(), "\n\nThe answer.");
}

TEST_F(ServiceTest, HermesToolCall) {
    ServiceConfig config;
    config.enable_auto_tool_choice = true;
    config.tool_parser = chat::ToolParserKind::kHermes;
    make_service("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
                 config);
    const std::string tools =
        R"(,"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}])";
    auto r = call("POST", "/v1/chat/completions", kChat + tools + "}");
    Json j = json_of(r->body());
    const Json& c = j.find("choices")->as_array().at(0);
    EXPECT_EQ(c.find("finish_reason")->as_string(), "tool_calls") << r->body();
    const Json& call0 = c.find("message")->find("tool_calls")->as_array().at(0);
    EXPECT_EQ(call0.find("function")->find("name")->as_string(), "get_weather");
    Json args = json_of(call0.find("function")->find("arguments")->as_string());
    EXPECT_EQ(args.find("city")->as_string(), "Paris");

    // Without --enable-auto-tool-choice "auto" is refused, as vLLM does.
    make_service("x");
    auto r2 = call("POST", "/v1/chat/completions", kChat + tools + "}");
    EXPECT_EQ(r2->status(), 400);
    EXPECT_EQ(json_of(r2->body()).find("error")->find("param")->as_string(), "tool_choice");
}

TEST_F(ServiceTest, ParallelToolCallsFalseKeepsOnlyTheFirstCall) {
    ServiceConfig config;
    config.enable_auto_tool_choice = true;
    config.tool_parser = chat::ToolParserKind::kHermes;
    const std::string call_a = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>";
    const std::string call_b = "<tool_call>\n{\"name\": \"g\", \"arguments\": {\"y\": 2}}\n</tool_call>";
    make_service(call_a + "\n" + call_b, config);
    const std::string tools =
        R"(,"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"g"}}])";
    for (bool parallel : {true, false}) {
        auto r = call("POST", "/v1/chat/completions",
                      kChat + tools + R"(,"parallel_tool_calls":)" + (parallel ? "true" : "false") + "}");
        Json j = json_of(r->body());
        const Json& calls = *j.find("choices")->as_array().at(0).find("message")->find("tool_calls");
        ASSERT_EQ(calls.as_array().size(), parallel ? 2u : 1u) << r->body();
        EXPECT_EQ(calls.as_array()[0].find("function")->find("name")->as_string(), "f");
    }
}

TEST_F(ServiceTest, CompletionsWithEchoTokensAndSeveralPrompts) {
    make_service(" world");
    auto r = call("POST", "/v1/completions", R"({"prompt":"Hello","echo":true,"max_tokens":5})");
    Json j = json_of(r->body());
    EXPECT_EQ(j.find("object")->as_string(), "text_completion");
    EXPECT_EQ(j.find("choices")->as_array().at(0).find("text")->as_string(), "Hello world");

    const auto ids = tokenizer_->encode("Hi");
    std::string id_list;
    for (int32_t id : ids)
        id_list += (id_list.empty() ? "" : ",") + std::to_string(id);
    r = call("POST", "/v1/completions", R"({"prompt":[[)" + id_list + R"(],"Yo"],"n":2,"stream":true})");
    bool done = false;
    std::map<int64_t, std::string> texts;
    for (const Json& e : events(r->body(), &done)) {
        for (const Json& c : e.find("choices")->as_array())
            texts[c.find("index")->as_int()] += c.find("text")->as_string();
    }
    EXPECT_TRUE(done);
    ASSERT_EQ(texts.size(), 4u);
    for (auto& [i, t] : texts)
        EXPECT_EQ(t, " world") << i;
}

TEST_F(ServiceTest, CompletionLogprobs) {
    make_service(" a b");
    auto r = call("POST", "/v1/completions", R"({"prompt":"x","logprobs":1})");
    Json j = json_of(r->body());
    const Json* lp = j.find("choices")->as_array().at(0).find("logprobs");
    ASSERT_TRUE(lp && lp->is_object()) << r->body();
    const auto ids = tokenizer_->encode(" a b");
    ASSERT_EQ(lp->find("tokens")->as_array().size(), ids.size());
    EXPECT_EQ(lp->find("tokens")->as_array().at(0).as_string(), std::string(tokenizer_->token_bytes(ids[0])));
    EXPECT_EQ(lp->find("token_logprobs")->as_array().at(0).as_double(), 0.0);  // the script is certain
}

// OpenAI (and vLLM) always list the sampled token in a completion's top_logprobs, so there may be logprobs + 1
// entries; with logprobs 0 the dict holds the sampled token alone (not nothing).
TEST_F(ServiceTest, CompletionTopLogprobsAlwaysHoldTheSampledToken) {
    make_service(" a b");
    const auto ids = tokenizer_->encode(" a b");
    for (const bool stream : {false, true}) {
        auto r = call("POST", "/v1/completions",
                      std::string(R"({"prompt":"x","logprobs":0,"stream":)") + (stream ? "true" : "false") + "}");
        std::vector<Json> tops;
        if (stream) {
            bool done = false;
            for (const Json& e : events(r->body(), &done))
                for (const Json& c : e.find("choices")->as_array())
                    if (const Json* lp = c.find("logprobs"); lp && lp->is_object())
                        for (const Json& t : lp->find("top_logprobs")->as_array())
                            tops.push_back(t);
        } else {
            const Json j = json_of(r->body());
            for (const Json& t : j.find("choices")->as_array().at(0).find("logprobs")->find("top_logprobs")->as_array())
                tops.push_back(t);
        }
        ASSERT_EQ(tops.size(), ids.size()) << r->body();
        for (size_t i = 0; i < ids.size(); ++i) {
            ASSERT_TRUE(tops[i].is_object()) << r->body();
            const Json* sampled = tops[i].find(std::string(tokenizer_->token_bytes(ids[i])));
            ASSERT_TRUE(sampled != nullptr) << "stream=" << stream << " " << r->body();
            EXPECT_EQ(sampled->as_double(), 0.0);
        }
    }
}

// OpenAI's chat TopLogprob has token, logprob and bytes, as the entry it belongs to; vLLM sends all three.
TEST_F(ServiceTest, ChatTopLogprobsCarryBytes) {
    make_service("Hi");
    const auto ids = tokenizer_->encode("Hi");
    auto r = call("POST", "/v1/chat/completions", kChat + R"(,"logprobs":true,"top_logprobs":1})");
    const Json j = json_of(r->body());
    const Json* content = j.find("choices")->as_array().at(0).find("logprobs")->find("content");
    ASSERT_TRUE(content && content->is_array()) << r->body();
    ASSERT_EQ(content->as_array().size(), ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
        const Json& top = content->as_array()[i].find("top_logprobs")->as_array().at(0);
        const Json* bytes = top.find("bytes");
        ASSERT_TRUE(bytes && bytes->is_array()) << r->body();
        std::string got;
        for (const Json& b : bytes->as_array())
            got += static_cast<char>(b.as_int());
        EXPECT_EQ(got, std::string(tokenizer_->token_bytes(ids[i])));
    }
}

// vLLM looks for stop strings only in the text of tokens after the first min_tokens, streamed or not.
TEST_F(ServiceTest, StopStringsWaitForMinTokens) {
    const std::string script = "a b c b d";
    make_service(script);
    const auto ids = tokenizer_->encode(script);
    ASSERT_EQ(ids.size(), 5u);  // "a", " b", " c", " b", " d"
    auto text_of = [&](const std::string& extra, bool stream) {
        auto r = call("POST", "/v1/completions",
                      R"({"prompt":"x","stop":" b","stream":)" + std::string(stream ? "true" : "false") + extra + "}");
        std::string text;
        if (stream) {
            bool done = false;
            for (const Json& e : events(r->body(), &done))
                for (const Json& c : e.find("choices")->as_array())
                    text += c.find("text")->as_string();
        } else {
            const Json j = json_of(r->body());
            text = j.find("choices")->as_array().at(0).find("text")->as_string();
        }
        return text;
    };
    for (const bool stream : {false, true}) {
        EXPECT_EQ(text_of("", stream), "a") << stream;
        EXPECT_EQ(text_of(R"(,"min_tokens":1)", stream), "a") << stream;      // token 2 " b" is past min_tokens
        EXPECT_EQ(text_of(R"(,"min_tokens":2)", stream), "a b c") << stream;  // the first " b" may not stop
        EXPECT_EQ(text_of(R"(,"min_tokens":4)", stream), script) << stream;
    }
}

TEST_F(ServiceTest, ErrorsAreOpenAiShaped) {
    make_service("x");
    auto r = call("POST", "/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"temperature":-1})");
    EXPECT_EQ(r->status(), 400);
    EXPECT_EQ(json_of(r->body()).find("error")->find("param")->as_string(), "temperature");
    r = call("POST", "/v1/chat/completions", "{not json");
    EXPECT_EQ(r->status(), 400);
    EXPECT_TRUE(json_of(r->body()).find("error")->find("message")->is_string());
    r = call("POST", "/v1/chat/completions", R"({"model":"nope","messages":[{"role":"user","content":"x"}]})");
    EXPECT_EQ(r->status(), 404);
    EXPECT_EQ(json_of(r->body()).find("error")->find("param")->as_string(), "model");
    r = call("POST", "/v1/completions", R"({"prompt":"x","max_tokens":5000})");
    EXPECT_EQ(r->status(), 400);  // prompt + max_tokens over max_model_len
    r = call("GET", "/v1/chat/completions", "");
    EXPECT_EQ(r->status(), 405);
    r = call("GET", "/nothing/here", "");
    EXPECT_EQ(r->status(), 404);
}

TEST_F(ServiceTest, ApiKeyAndCors) {
    ServiceConfig config;
    config.api_keys = {"sekrit"};
    make_service("x", config);
    auto r = call("GET", "/v1/models", "");
    EXPECT_EQ(r->status(), 401);
    EXPECT_EQ(json_of(r->body()).find("error")->find("code")->as_int(), 401);
    r = call("GET", "/v1/models", "", {{"Authorization", "Bearer wrong"}});
    EXPECT_EQ(r->status(), 401);
    r = call("GET", "/v1/models", "", {{"Authorization", "Bearer sekrit"}, {"Origin", "http://ui.example"}});
    EXPECT_EQ(r->status(), 200);
    ASSERT_TRUE(r->header("Access-Control-Allow-Origin"));
    EXPECT_EQ(*r->header("Access-Control-Allow-Origin"), "*");
    Json models = json_of(r->body());
    EXPECT_EQ(models.find("data")->as_array().at(0).find("id")->as_string(), "qwen-test");
    // Preflight needs no key.
    r = call("OPTIONS", "/v1/chat/completions", "",
             {{"Origin", "http://ui.example"},
              {"Access-Control-Request-Method", "POST"},
              {"Access-Control-Request-Headers", "authorization,content-type"}});
    EXPECT_EQ(r->status(), 200);
    ASSERT_TRUE(r->header("Access-Control-Allow-Headers"));
    EXPECT_EQ(*r->header("Access-Control-Allow-Headers"), "authorization,content-type");
    // Health stays open.
    r = call("GET", "/health", "");
    EXPECT_EQ(r->status(), 200);
}

TEST_F(ServiceTest, HealthTokenizeDetokenizeVersion) {
    make_service("x");
    service_->set_ready(false);
    EXPECT_EQ(call("GET", "/health", "")->status(), 503);
    service_->set_ready(true);
    EXPECT_EQ(call("GET", "/health", "")->status(), 200);
    EXPECT_EQ(call("GET", "/ping", "")->status(), 200);

    auto r = call("POST", "/tokenize", R"({"prompt":"Hello world"})");
    Json j = json_of(r->body());
    const auto ids = tokenizer_->encode("Hello world");
    ASSERT_EQ(j.find("count")->as_int(), static_cast<int64_t>(ids.size()));
    std::string list;
    for (const Json& t : j.find("tokens")->as_array())
        list += (list.empty() ? "" : ",") + std::to_string(t.as_int());
    r = call("POST", "/detokenize", R"({"tokens":[)" + list + "]}");
    EXPECT_EQ(json_of(r->body()).find("prompt")->as_string(), "Hello world");
    r = call("POST", "/detokenize", R"({"tokens":[-4]})");
    EXPECT_EQ(r->status(), 400);
    EXPECT_EQ(json_of(call("GET", "/version", "")->body()).find("version")->as_string(), PAGODA_VERSION);

    // Draining (SIGTERM): health and every new request get 503; /metrics stays up for the last scrape.
    service_->set_draining();
    EXPECT_EQ(call("GET", "/health", "")->status(), 503);
    EXPECT_EQ(call("POST", "/v1/chat/completions", kChat + "}")->status(), 503);
    EXPECT_EQ(call("POST", "/tokenize", R"({"prompt":"Hello world"})")->status(), 503);
    EXPECT_EQ(call("GET", "/metrics", "")->status(), 200);
}

// --- tool_choice, whole-output parsing, metrics -----------------------------------------------------------------

const std::string kTwoTools =
    R"(,"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}},)"
    R"({"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{}}}}])";

int64_t prompt_tokens_of(const Json& response) {
    return response.find("usage")->find("prompt_tokens")->as_int();
}

TEST_F(ServiceTest, RouteTableRefusesOnceForEveryRoute) {
    ServiceConfig config;
    config.api_keys = {"k"};
    make_service("x", config);
    const http::Headers key = {{"Authorization", "Bearer k"}};
    // A path with routes but not this method: 405 naming the methods there.
    auto r = call("DELETE", "/v1/models", "", key);
    EXPECT_EQ(r->status(), 405);
    ASSERT_TRUE(r->header("Allow"));
    EXPECT_EQ(*r->header("Allow"), "GET");
    r = call("PUT", "/ping", "");
    ASSERT_TRUE(r->header("Allow"));
    EXPECT_EQ(*r->header("Allow"), "GET, POST");
    EXPECT_EQ(call("POST", "/ping", "")->status(), 200);    // SageMaker
    EXPECT_EQ(call("HEAD", "/health", "")->status(), 200);  // a GET route answers HEAD
    // The key guards every /v1 path, routed or not; the rest stays open.
    EXPECT_EQ(call("GET", "/v1/nothing", "")->status(), 401);
    EXPECT_EQ(call("GET", "/v1/nothing", "", key)->status(), 404);
    EXPECT_EQ(call("POST", "/tokenize", R"({"prompt":"a"})")->status(), 200);
    // While the model loads, only the generating routes wait.
    service_->set_ready(false);
    EXPECT_EQ(call("POST", "/v1/completions", R"({"prompt":"a"})", key)->status(), 503);
    EXPECT_EQ(call("POST", "/v1/chat/completions", kChat + "}", key)->status(), 503);
    EXPECT_EQ(call("GET", "/v1/models", "", key)->status(), 200);
    // An X-Request-Id comes back on every answer, refusals included.
    r = call("GET", "/nothing", "", {{"X-Request-Id", "abc"}});
    ASSERT_TRUE(r->header("X-Request-Id"));
    EXPECT_EQ(*r->header("X-Request-Id"), "abc");
}

// X-Request-Id: the client's own, cut to printable ASCII and 128 bytes (it goes into a header and the logs), else a
// fresh one per request, on every answer (successes, refusals and streams).
TEST_F(ServiceTest, RequestIdIsTheClientsOrAFreshOne) {
    make_service("Hi");
    auto a = call("GET", "/nothing", "");
    auto b = call("POST", "/v1/chat/completions", kChat + "}");
    ASSERT_TRUE(a->header("X-Request-Id") && b->header("X-Request-Id"));
    EXPECT_EQ(a->header("X-Request-Id")->size(), 32u);
    EXPECT_NE(*a->header("X-Request-Id"), *b->header("X-Request-Id"));
    auto s = call("POST", "/v1/chat/completions", kChat + R"(,"stream":true})", {{"x-request-id", "trace-7"}});
    ASSERT_TRUE(s->streaming() && s->header("X-Request-Id"));
    EXPECT_EQ(*s->header("X-Request-Id"), "trace-7");
    auto c = call("GET", "/health", "",
                  {{"X-Request-Id",
                    "a b\x01"
                    "c\r\n" +
                        std::string(300, 'z')}});
    ASSERT_TRUE(c->header("X-Request-Id"));
    EXPECT_EQ(*c->header("X-Request-Id"), "abc" + std::string(125, 'z'));
    auto d = call("GET", "/health", "", {{"X-Request-Id", "\x01 \t"}});  // nothing usable: a fresh one
    ASSERT_TRUE(d->header("X-Request-Id"));
    EXPECT_EQ(d->header("X-Request-Id")->size(), 32u);
    // A 4xx answer is logged once at info level, with the id and the reason.
    testing::internal::CaptureStderr();
    call("POST", "/v1/chat/completions", R"({"messages":[]})", {{"X-Request-Id", "bad-1"}});
    const std::string log = testing::internal::GetCapturedStderr();
    EXPECT_NE(log.find("INFO request bad-1: 400 'messages' must not be empty"), std::string::npos) << log;
}

// The second turn of every tool-using agent: the assistant's call comes back with "content": null (or none), and
// the tool's answer follows. vLLM renders the null as "" and a history call whose arguments are not JSON as {}.
TEST_F(ServiceTest, ToolRoundTripWithNullAssistantContent) {
    ServiceConfig config;
    config.enable_auto_tool_choice = true;
    config.tool_parser = chat::ToolParserKind::kHermes;
    make_service("It is sunny in Paris.", config);
    const std::string call_json =
        R"({"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}})";
    for (
        const std::string& assistant : {
            R"({"role":"assistant","content":null,"tool_calls":[)" + call_json + "]}",
            R"({"role":"assistant","tool_calls":[)" + call_json + "]}",
            std::string(
                R"({"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"get_weather","arguments":"{not json"}}]})"),
        }) {
        const std::string body = R"({"model":"qwen-test","messages":[{"role":"user","content":"Weather in Paris?"},)" +
                                 assistant + R"(,{"role":"tool","tool_call_id":"call_1","content":"sunny"}])" +
                                 kTwoTools + "}";
        auto r = call("POST", "/v1/chat/completions", body);
        ASSERT_EQ(r->status(), 200) << assistant << "\n" << r->body();
        Json j = json_of(r->body());
        EXPECT_EQ(j.find("choices")->as_array().at(0).find("message")->find("content")->as_string(),
                  "It is sunny in Paris.");
    }
    // The rendered prompt holds the call and the tool's answer.
    auto t =
        call("POST", "/tokenize",
             R"({"messages":[{"role":"user","content":"Weather?"},{"role":"assistant","content":null,"tool_calls":[)" +
                 call_json + R"(]},{"role":"tool","content":"sunny"}],"return_token_strs":false})");
    ASSERT_EQ(t->status(), 200) << t->body();
}

TEST_F(ServiceTest, ToolChoiceNoneRendersAndParsesNoTools) {
    ServiceConfig config;
    config.enable_auto_tool_choice = true;
    config.tool_parser = chat::ToolParserKind::kHermes;
    const std::string text = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
    make_service(text, config);
    Json none = json_of(call("POST", "/v1/chat/completions", kChat + kTwoTools + R"(,"tool_choice":"none"})")->body());
    const Json& m = *none.find("choices")->as_array().at(0).find("message");
    EXPECT_EQ(m.find("tool_calls")->as_array().size(), 0u);
    EXPECT_EQ(m.find("content")->as_string(), text);  // not parsed: plain text
    Json auto_ = json_of(call("POST", "/v1/chat/completions", kChat + kTwoTools + "}")->body());
    Json bare = json_of(call("POST", "/v1/chat/completions", kChat + "}")->body());
    // The tools were not rendered: the prompt is the one without tools, shorter than the one with them.
    EXPECT_EQ(prompt_tokens_of(none), prompt_tokens_of(bare));
    EXPECT_GT(prompt_tokens_of(auto_), prompt_tokens_of(bare));
}

TEST_F(ServiceTest, ToolChoiceRequiredAndNamed) {
    // No --tool-call-parser: a forced choice takes the format the template teaches (hermes for Qwen3).
    const std::string weather =
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
    const std::string time = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
    make_service(time + "\n" + weather);
    const std::string named = R"(,"tool_choice":{"type":"function","function":{"name":"get_weather"}})";
    Json r = json_of(call("POST", "/v1/chat/completions", kChat + kTwoTools + named + "}")->body());
    const Json& c = r.find("choices")->as_array().at(0);
    const Json& calls = *c.find("message")->find("tool_calls");
    ASSERT_EQ(calls.as_array().size(), 1u) << r.dump();  // get_time is dropped
    EXPECT_EQ(calls.as_array()[0].find("function")->find("name")->as_string(), "get_weather");
    EXPECT_EQ(c.find("finish_reason")->as_string(), "tool_calls");
    // Only the named tool is rendered.
    Json req =
        json_of(call("POST", "/v1/chat/completions", kChat + kTwoTools + R"(,"tool_choice":"required"})")->body());
    EXPECT_LT(prompt_tokens_of(r), prompt_tokens_of(req));
    EXPECT_EQ(req.find("choices")->as_array().at(0).find("message")->find("tool_calls")->as_array().size(), 2u);

    // Streaming: the same filter on deltas.
    auto s = call("POST", "/v1/chat/completions", kChat + kTwoTools + named + R"(,"stream":true})");
    bool done = false;
    std::vector<std::string> names;
    for (const Json& ev : events(s->body(), &done)) {
        const Json* tc = ev.find("choices")->as_array().at(0).find("delta")->find("tool_calls");
        if (!tc) continue;
        for (const Json& d : tc->as_array()) {
            EXPECT_EQ(d.find("index")->as_int(), 0);
            if (const Json* fn = d.find("function"); fn && fn->find("name"))
                names.push_back(fn->find("name")->as_string());
        }
    }
    EXPECT_TRUE(done);
    EXPECT_EQ(names, std::vector<std::string>{"get_weather"});

    // Output without the call asked for: 422 (nothing forced the format), or an error event in a stream.
    make_service("I would rather not.");
    auto bad = call("POST", "/v1/chat/completions", kChat + kTwoTools + R"(,"tool_choice":"required"})");
    EXPECT_EQ(bad->status(), 422) << bad->body();
    EXPECT_EQ(json_of(bad->body()).find("error")->find("param")->as_string(), "tool_choice");
    make_service(time);
    EXPECT_EQ(call("POST", "/v1/chat/completions", kChat + kTwoTools + named + "}")->status(), 422);
    auto bad_stream = call("POST", "/v1/chat/completions", kChat + kTwoTools + named + R"(,"stream":true})");
    EXPECT_NE(bad_stream->body().find("\"code\":422"), std::string::npos) << bad_stream->body();
}

TEST_F(ServiceTest, NonStreamingChatParsesTheWholeOutput) {
    // A call cut off by max_tokens is malformed: the non-streaming answer, parsed whole as vLLM does, falls back
    // to plain content with no calls (a sum of streaming deltas would keep a half call).
    ServiceConfig config;
    config.enable_auto_tool_choice = true;
    config.tool_parser = chat::ToolParserKind::kHermes;
    const std::string text = "Checking.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par";
    make_service(text, config);
    Json r = json_of(call("POST", "/v1/chat/completions", kChat + kTwoTools + "}")->body());
    const Json& c = r.find("choices")->as_array().at(0);
    EXPECT_EQ(c.find("message")->find("tool_calls")->as_array().size(), 0u) << r.dump();
    EXPECT_EQ(c.find("message")->find("content")->as_string(), text);
    EXPECT_EQ(c.find("finish_reason")->as_string(), "stop");
}

// The value of one exposition line "name{labels} value" (the labels as written, in order).
double metric_value(const std::string& text, const std::string& series) {
    const size_t at = text.find("\n" + series + " ");
    EXPECT_NE(at, std::string::npos) << series << "\n" << text;
    if (at == std::string::npos) return -1.0;
    return std::stod(text.substr(at + series.size() + 2));
}

TEST_F(ServiceTest, MetricsCountWhatWasServed) {
    ServiceConfig config;
    config.metrics_prefix = "vllm";
    make_service("one two three four five", config, {}, /*interval_us=*/1000);
    const std::string labels = R"({engine="0",model_name="qwen-test")";
    int64_t prompt = 0, generated = 0;
    for (const std::string& extra :
         {std::string(R"(,"max_tokens":2)"), std::string(""), std::string(R"(,"stop":["three"])")}) {
        Json j = json_of(call("POST", "/v1/chat/completions", kChat + extra + "}")->body());
        prompt += prompt_tokens_of(j);
        generated += j.find("usage")->find("completion_tokens")->as_int();
    }
    auto m = call("GET", "/metrics", "");
    const std::string text = "\n" + m->body();
    EXPECT_EQ(metric_value(text, "vllm:request_success_total" + labels + R"(,finished_reason="length"})"), 1.0);
    EXPECT_EQ(metric_value(text, "vllm:request_success_total" + labels + R"(,finished_reason="stop"})"), 2.0);
    EXPECT_EQ(metric_value(text, "vllm:request_success_total" + labels + R"(,finished_reason="abort"})"), 0.0);
    EXPECT_EQ(metric_value(text, "vllm:prompt_tokens_total" + labels + "}"), static_cast<double>(prompt));
    EXPECT_EQ(metric_value(text, "vllm:generation_tokens_total" + labels + "}"), static_cast<double>(generated));
    EXPECT_EQ(metric_value(text, "vllm:time_to_first_token_seconds_count" + labels + "}"), 3.0);
    EXPECT_EQ(metric_value(text, "vllm:e2e_request_latency_seconds_count" + labels + "}"), 3.0);
    EXPECT_EQ(metric_value(text, "vllm:time_to_first_token_seconds_bucket" + labels + R"(,le="+Inf"})"), 3.0);
    // One inter-token gap per token after each request's first.
    EXPECT_EQ(metric_value(text, "vllm:inter_token_latency_seconds_count" + labels + "}"),
              static_cast<double>(generated - 3));
    EXPECT_EQ(metric_value(text, "vllm:time_per_output_token_seconds_count" + labels + "}"),
              static_cast<double>(generated - 3));
    // vLLM's per-request histograms of its Grafana dashboard: one observation per choice.
    EXPECT_EQ(metric_value(text, "vllm:request_prompt_tokens_count" + labels + "}"), 3.0);
    EXPECT_EQ(metric_value(text, "vllm:request_prompt_tokens_sum" + labels + "}"), static_cast<double>(prompt));
    EXPECT_EQ(metric_value(text, "vllm:request_generation_tokens_sum" + labels + "}"), static_cast<double>(generated));
    EXPECT_EQ(metric_value(text, "vllm:request_params_max_tokens_count" + labels + "}"), 3.0);
    EXPECT_EQ(metric_value(text, "vllm:request_params_n_count" + labels + "}"), 3.0);
    EXPECT_EQ(metric_value(text, "vllm:request_max_num_generation_tokens_sum" + labels + "}"),
              static_cast<double>(generated));
    EXPECT_EQ(metric_value(text, "vllm:request_time_per_output_token_seconds_count" + labels + "}"), 3.0);
    EXPECT_EQ(metric_value(text, "vllm:num_requests_running" + labels + "}"), 0.0);
    EXPECT_NE(text.find("# TYPE vllm:time_to_first_token_seconds histogram"), std::string::npos);
    EXPECT_NE(text.find(R"(vllm:time_to_first_token_seconds_bucket{engine="0",model_name="qwen-test",le="2560.0"})"),
              std::string::npos);
}

TEST_F(ServiceTest, ClientDisconnectCancelsTheRequest) {
    std::string long_text;
    for (int i = 0; i < 2000; ++i)
        long_text += " word";
    make_service(long_text, {}, {}, /*interval_us=*/2000);
    auto r = std::make_shared<RecordingResponder>();
    http::Request req;
    req.method = "POST";
    req.path = "/v1/chat/completions";
    req.body = kChat + R"(,"stream":true})";
    req.headers = {{"X-Request-Id", "gone-1"}};
    testing::internal::CaptureStderr();
    service_->handle(std::move(req), r);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    r->hang_up();
    // The generator aborts the request, the job finishes its stream quickly instead of after 2000 tokens.
    ASSERT_TRUE(r->wait_done(20));
    // One info line names the request and why it ended.
    const std::string log = testing::internal::GetCapturedStderr();
    EXPECT_NE(log.find("INFO request gone-1: chatcmpl-"), std::string::npos) << log;
    EXPECT_NE(log.find("the client closed the connection"), std::string::npos) << log;
    bool done = false;
    std::string body = r->body();
    auto evs = events(body, &done);
    size_t words = 0;
    for (const Json& e : evs)
        for (const Json& c : e.find("choices")->as_array())
            if (const Json* s = c.find("delta")->find("content"))
                words += static_cast<size_t>(std::count(s->as_string().begin(), s->as_string().end(), 'w'));
    EXPECT_LT(words, 2000u);
}

// --- Model hot reload (POST /v1/models/reload) over scripted generators: the loader's answers decide the status,
// the old model serves until the new one is in, requests in flight finish on the model they started on.
class ReloadTest : public ServiceTest {
  protected:
    // A model whose every request "generates" `text`, paced by `interval_us` per token.
    std::shared_ptr<ServedModel> scripted_model(const std::string& text, int interval_us = 0) {
        ScriptedGenerator::Options go;
        go.script = tokenizer_->encode(text);
        go.max_model_len = 4096;
        go.token_interval_us = interval_us;
        auto g = std::make_shared<ScriptedGenerator>(go);
        auto m = std::make_shared<ServedModel>(*tokenizer_, nullptr, *g);
        m->max_model_len.store(4096);
        m->keep_alive = g;
        return m;
    }
    // "missing" fails the check, "broken" the load; any other directory loads a model answering "Bye".
    ModelLoader loader(bool beside = true) {
        ModelLoader l;
        l.check = [](const std::string& dir, const ModelLoader::Serving&) {
            return dir == "missing" ? Status::error("missing is not a directory") : ok_status();
        };
        l.load = [this](const std::string& dir, const ModelLoader::Serving&) -> Result<std::shared_ptr<ServedModel>> {
            if (dir == "broken") return Status::error("safetensors header is truncated");
            if (load_gate) load_gate->wait();
            return scripted_model("Bye");
        };
        l.fits_beside = [beside](const std::string&) { return beside; };
        return l;
    }
    std::string completion_text(const std::string& model) {
        auto r = call("POST", "/v1/completions", R"({"model":")" + model + R"(","prompt":"a","max_tokens":8})");
        EXPECT_EQ(r->status(), 200) << r->body();
        const Json j = json_of(r->body());
        const Json* choices = j.find("choices");
        return choices ? choices->as_array().at(0).find("text")->as_string() : "";
    }
    std::shared_future<void>* load_gate = nullptr;
};

TEST_F(ReloadTest, FailedReloadsKeepTheOldModelAndSayWhy) {
    make_service("Hi");
    const std::string reload = "/v1/models/reload";
    auto r = call("POST", reload, R"({"model":"good"})");
    EXPECT_EQ(r->status(), 400);  // no loader: this server cannot reload
    EXPECT_NE(r->body().find("model reload is not available"), std::string::npos) << r->body();
    service_->set_model_loader(loader());
    EXPECT_EQ(call("POST", reload, R"({})")->status(), 400);
    EXPECT_EQ(call("POST", reload, R"({"model":"good","served_model_name":5})")->status(), 400);
    r = call("POST", reload, R"({"model":"missing"})");
    EXPECT_EQ(r->status(), 400);
    EXPECT_NE(r->body().find("missing is not a directory"), std::string::npos) << r->body();
    r = call("POST", reload, R"({"model":"broken"})");
    EXPECT_EQ(r->status(), 500);  // a genuine load failure
    EXPECT_NE(r->body().find("safetensors header is truncated; still serving"), std::string::npos) << r->body();
    EXPECT_EQ(completion_text("qwen-test"), "Hi");
    const std::string metrics = call("GET", "/metrics", "")->body();
    EXPECT_NE(metrics.find("pagoda:model_reloads_total{engine=\"0\",model_name=\"qwen-test\",result=\"failed\"} 2"),
              std::string::npos)
        << metrics;
}

TEST_F(ReloadTest, ReloadSwapsTheModelAndItsName) {
    make_service("Hi");
    service_->set_model_loader(loader());
    auto r = call("POST", "/v1/models/reload", R"({"model":"good","served_model_name":"other"})");
    ASSERT_EQ(r->status(), 200) << r->body();
    const Json answer = json_of(r->body());
    EXPECT_EQ(answer.find("model")->as_string(), "other");
    EXPECT_EQ(answer.find("path")->as_string(), "good");
    EXPECT_EQ(answer.find("strategy")->as_string(), "beside");
    EXPECT_EQ(completion_text("other"), "Bye");
    EXPECT_EQ(call("POST", "/v1/completions", R"({"model":"qwen-test","prompt":"a"})")->status(), 404);
    const Json health = json_of(call("GET", "/health", "")->body());
    EXPECT_EQ(health.find("model")->as_string(), "other");
    EXPECT_EQ(health.find("path")->as_string(), "good");
    EXPECT_EQ(health.find("loaded_at")->as_int(), answer.find("loaded_at")->as_int());
    const std::string metrics = call("GET", "/metrics", "")->body();
    EXPECT_NE(metrics.find("pagoda:model_info{engine=\"0\",model_name=\"other\",path=\"good\"}"), std::string::npos)
        << metrics;
    // Without a served name the served names stay.
    ASSERT_EQ(call("POST", "/v1/models/reload", R"({"model":"again"})")->status(), 200);
    EXPECT_EQ(completion_text("other"), "Bye");
}

// A stream in flight finishes on the model it started on; the reload answers once that model is gone. After drain,
// a request arriving during the switch waits and is answered by the new model.
TEST_F(ReloadTest, InFlightStreamsFinishAndNewRequestsWait) {
    for (const bool beside : {true, false}) {
        SCOPED_TRACE(beside ? "beside" : "after drain");
        make_service("w w w w w w w w w w w w w w w w w w w w", {}, {}, /*interval_us=*/5000);
        service_->set_model_loader(loader(beside));
        auto stream = std::make_shared<RecordingResponder>();
        http::Request req;
        req.method = "POST";
        req.path = "/v1/completions";
        req.body = R"({"prompt":"a","stream":true,"max_tokens":100})";
        service_->handle(std::move(req), stream);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        std::promise<void> open;
        std::shared_future<void> gate = open.get_future().share();
        load_gate = beside ? &gate : nullptr;
        std::shared_ptr<RecordingResponder> reload;
        std::thread t([&] { reload = call("POST", "/v1/models/reload", R"({"model":"good"})"); });
        std::string waiting_text;
        if (beside) {
            // While the new model loads, the old one serves, and a second reload is refused.
            EXPECT_EQ(completion_text(""), "w w w w w w w w");
            EXPECT_EQ(call("POST", "/v1/models/reload", R"({"model":"good"})")->status(), 409);
            open.set_value();
        } else {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            waiting_text = completion_text("");  // parked until the switch, then run on the new model
        }
        t.join();
        EXPECT_EQ(reload->status(), 200) << reload->body();
        ASSERT_TRUE(stream->wait_done());
        bool done = false;
        std::string text;
        for (const Json& e : events(stream->body(), &done))
            text += e.find("choices")->as_array().at(0).find("text")->as_string();
        EXPECT_TRUE(done);
        EXPECT_EQ(text, "w w w w w w w w w w w w w w w w w w w w");
        if (!beside) {
            EXPECT_EQ(waiting_text, "Bye");
        }
        EXPECT_EQ(completion_text(""), "Bye");
        load_gate = nullptr;
    }
}

}  // namespace
}  // namespace pagoda::server::openai
