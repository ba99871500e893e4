// CompletionJob: one /v1/chat/completions or /v1/completions request in flight. The handler fills it and submits
// its engine requests; from then on it is pumped on its connection's strand (Responder::post) whenever the generator
// has output for it, so its state needs no lock. completion_job.cpp streams and counts; completion_response.cpp
// builds the logprobs and the non-streamed response body.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/output/output_parser.h"
#include "chat/output/stop_strings.h"
#include "common/json.h"
#include "engine/engine.h"
#include "server/auth/tenants.h"
#include "server/http/http_server.h"
#include "server/metrics/metrics.h"
#include "server/openai/generator.h"
#include "server/openai/model_holder.h"
#include "server/openai/protocol.h"
#include "server/openai/sse.h"
#include "server/openai/tool_choice.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::server::openai {

struct ServiceContext;
struct Exchange;

// A chat job's answer in another API's shape (the Responses API): the job still detokenizes, cuts at stop strings,
// runs the reasoning and tool-call parsers and the tool_choice policy; a sink only formats what they produce, into
// `out`. Called on the job's strand only (no lock).
class OutputSink {
  public:
    virtual ~OutputSink() = default;
    // Streaming: the events that open the stream; one parsed step (`finish` is set on the last one only); the end;
    // an error after the stream started.
    virtual void stream_begin(std::string& out) = 0;
    virtual void stream_delta(const chat::ChatDelta& delta, std::string_view finish, std::string& out) = 0;
    virtual void stream_end(const UsageCounts& usage, std::string& out) = 0;
    virtual void stream_error(const ApiError& error, std::string& out) = 0;
    // Not streaming: the body of the whole answer.
    virtual std::string response_body(const chat::ParsedChatOutput& output, std::string_view finish,
                                      const UsageCounts& usage) = 0;
};

struct CompletionJob : std::enable_shared_from_this<CompletionJob> {
    struct Choice {
        std::optional<IncrementalDecoder> decoder;
        std::optional<chat::StopStringMatcher> stop;
        std::optional<chat::ChatOutputParser> parser;
        bool first = true;                          // the next chat delta is the first (carries the role)
        bool done = false;                          // finished (by the generator or by a stop string)
        std::string finish;                         // finish_reason
        int64_t tokens = 0;                         // completion tokens counted up to the stop
        std::string prefix;                         // echo text, sent before the first output
        std::optional<ToolCallFilter> tool_filter;  // streamed chat with a tool parser
        double first_token_time = 0.0;              // of the first token (time per output token)
        double last_token_time = 0.0;               // of the previous token (inter-token latency)
        int64_t timed_tokens = 0;                   // tokens whose time was seen
        int64_t text_chars = 0;                     // completions streamed: code points of the text sent so far
        // Non-streaming accumulation: completions text, or the chat output parsed whole at the end.
        std::string text;
        Json logprobs_content = Json::array();  // chat: content entries; completions: see completion_logprobs
        Json lp_tokens = Json::array(), lp_token_logprobs = Json::array(), lp_top = Json::array();
    };

    bool chat = true;
    bool stream = false;
    Json tools;  // the tools rendered for the model (the tool parser reads parameter schemas from them)
    ToolChoicePolicy tool_policy;
    chat::OutputParserOptions parser_options;  // chat: reasoning and tool-call parsing (may do nothing)
    std::unique_ptr<OutputSink> sink;          // chat with n = 1: another API's shape; null: chat completions
    TextOptions text;
    bool logprobs = false;
    int32_t top_logprobs = 0;
    int32_t min_tokens = 0;        // stop strings count only after this many tokens of a choice
    bool prompt_logprobs = false;  // vLLM's prompt_logprobs: a "prompt_logprobs" list in the response
    bool echo_logprobs = false;    // completions with echo and logprobs: the lists cover the prompt too
    int32_t n = 1;
    int64_t max_tokens = 0;  // the request's max_tokens, 0 when unset (then the context left bounds a choice)
    int32_t max_model_len = 0;
    std::string id, model;
    int64_t created = 0;
    std::shared_ptr<http::Responder> responder;
    http::Headers headers;
    std::shared_ptr<const ServedModel> served;  // keeps the model (its engine) alive while the job lives
    Generator* generator = nullptr;             // served's
    const Tokenizer* tokenizer = nullptr;
    metrics::ServingMetrics* metrics = nullptr;
    std::shared_ptr<const auth::Tenant> tenant;  // charged for generated tokens; may be null
    std::shared_ptr<http::RequestNotes> notes;   // the access log's fields; may be null
    double arrival = 0.0;                        // engine::clock_seconds() when the HTTP request was handed over
    size_t max_unsent_bytes = 0;
    std::optional<SseChunks> sse;
    std::vector<std::shared_ptr<engine::RequestStream>> streams;
    std::vector<Choice> choices;                                 // streams.size() * n
    std::vector<int64_t> prompt_tokens, cached_tokens;           // per stream
    std::vector<bool> stream_done, first_token_seen;             // per stream
    std::vector<std::vector<int32_t>> prompt_ids;                // per stream (prompt logprobs name the tokens)
    std::vector<std::vector<engine::TokenLogprobs>> prompt_lps;  // per stream, entry i = prompt token i + 1
    std::atomic<bool> scheduled{false};
    bool started = false;  // stream headers sent
    bool finalized = false;
    std::string abort_reason;   // why the request ended early (logged once at its end); empty: it did not
    engine::StreamChunk chunk;  // reused between reads
    std::string delta_text, out_text;
    chat::ChatDelta chat_delta;

    // A job answering on `x`'s responder, with its headers, with the request's text options and parameters.
    static std::shared_ptr<CompletionJob> create(ServiceContext& ctx, bool chat, const TextOptions& text,
                                                 const engine::SamplingParams& params, const std::string& model,
                                                 const Exchange& x);

    void start();  // after the streams were submitted
    // Any thread: output is waiting; queues one pump on the strand.
    void notify();
    void cancel_all();

  private:
    UsageCounts usage() const;
    void start_stream_if_needed();
    void pump();
    void process(size_t s, size_t c, engine::ChoiceDelta& d);
    void emit(Choice& ch, int index, const std::string& lp_json, bool flush_prefix);
    void reject(const std::string& message);
    void write_stream_error(const ApiError& e);
    void finalize_stream_abort();
    void count_finished(size_t s, const Choice& ch, metrics::FinishedReason reason);
    void observe_request_end(size_t s, const engine::RequestTimes& t);
    void finalize();
    void note_abort(std::string reason);
    void release();
    ApiError missing_tool_call_error() const;

    // Logprobs (completion_response.cpp).
    void append_prompt_logprobs(size_t s, Json& tokens, Json& token_lps, Json& tops) const;
    Json prompt_logprobs_json(size_t s) const;
    Json chat_logprob(int32_t token, float logprob) const;
    std::string logprobs_for(const engine::ChoiceDelta& d, Choice& ch, const size_t* prompt_of = nullptr);
    // The non-streamed response body.
    std::string response_body(std::vector<chat::ParsedChatOutput>& parsed, const UsageCounts& u);
};

}  // namespace pagoda::server::openai
