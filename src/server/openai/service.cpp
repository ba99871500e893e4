// OpenAiService: routing, auth, CORS, the simple endpoints, and Job — one completion request in flight, pumped on
// its connection's strand whenever the generator has new tokens for it.
#include "server/openai/service.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <random>

#include "chat/output/output_parser.h"
#include "chat/output/reasoning_parser.h"
#include "chat/output/stop_strings.h"
#include "common/log.h"
#include "common/utf8.h"
#include "server/openai/protocol.h"
#include "server/openai/sse.h"
#include "server/openai/tool_choice.h"

namespace pagoda::server::openai {

namespace {

int64_t unix_seconds() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::string random_id(std::string_view prefix) {
    static std::mutex mu;
    static std::mt19937_64 rng(std::random_device{}());
    uint64_t a, b;
    {
        std::lock_guard<std::mutex> lock(mu);
        a = rng();
        b = rng();
    }
    char buf[40];
    std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(a),
                  static_cast<unsigned long long>(b));
    return std::string(prefix) + buf;
}

// Text that is always valid UTF-8 (token pieces may split a character): invalid bytes become U+FFFD.
std::string lossy_utf8(std::string_view s) {
    if (utf8_is_valid(s)) return std::string(s);
    std::string out;
    size_t pos = 0;
    while (pos < s.size())
        utf8_append(out, utf8_decode(s, pos));
    return out;
}

void send_json(const std::shared_ptr<http::Responder>& r, int status, std::string body, http::Headers headers) {
    r->send(http::Response{status, std::move(headers), std::move(body), "application/json"});
}

void send_error(const std::shared_ptr<http::Responder>& r, const ApiError& e, http::Headers headers) {
    send_json(r, e.status, error_body(e), std::move(headers));
}

const char* finish_reason_name(engine::FinishReason reason) {
    switch (reason) {
        case engine::FinishReason::kStop:
            return "stop";
        case engine::FinishReason::kLength:
            return "length";
        case engine::FinishReason::kAbort:
            return "abort";
        case engine::FinishReason::kRejected:
            return "abort";
        case engine::FinishReason::kNone:
            return "";
    }
    return "";
}

bool contains(const std::vector<std::string>& list, std::string_view s) {
    return std::find(list.begin(), list.end(), s) != list.end();
}

// The finished_reason label of request_success_total for an API finish_reason (vLLM counts the engine's reason:
// a call is a "stop", a stop string too).
metrics::FinishedReason finished_reason_label(std::string_view finish) {
    if (finish == "length") return metrics::FinishedReason::kLength;
    if (finish == "abort") return metrics::FinishedReason::kAbort;
    return metrics::FinishedReason::kStop;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Job: one /v1/chat/completions or /v1/completions request in flight. All methods except notify() run on the
// connection's strand (via Responder::post), so no lock is needed for its state.
struct OpenAiService::Job : std::enable_shared_from_this<OpenAiService::Job> {
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
        double last_token_time = 0.0;               // of the previous token (inter-token latency)
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
    TextOptions text;
    bool logprobs = false;
    int32_t top_logprobs = 0;
    int32_t min_tokens = 0;        // stop strings count only after this many tokens of a choice
    bool prompt_logprobs = false;  // vLLM's prompt_logprobs: a "prompt_logprobs" list in the response
    bool echo_logprobs = false;    // completions with echo and logprobs: the lists cover the prompt too
    int32_t n = 1;
    std::string id, model;
    int64_t created = 0;
    std::shared_ptr<http::Responder> responder;
    http::Headers headers;
    Generator* generator = nullptr;
    const Tokenizer* tokenizer = nullptr;
    metrics::ServingMetrics* metrics = nullptr;
    double arrival = 0.0;  // engine::clock_seconds() when the HTTP request was handed over
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
    engine::StreamChunk chunk;  // reused between reads
    std::string delta_text, out_text;
    chat::ChatDelta chat_delta;

    void start();  // after the streams were submitted

    void notify() {
        if (scheduled.exchange(true)) return;  // a pump is already queued; it will read this output too
        responder->post([self = shared_from_this()] { self->pump(); });
    }

    void cancel_all() {
        for (size_t s = 0; s < streams.size(); ++s)
            if (!stream_done[s]) generator->cancel(streams[s]->id());
    }

    UsageCounts usage() const {
        UsageCounts u;
        for (int64_t p : prompt_tokens)
            u.prompt_tokens += p;
        for (int64_t c : cached_tokens)
            u.cached_tokens += c;
        for (const Choice& c : choices)
            u.completion_tokens += c.tokens;
        return u;
    }

    void start_stream_if_needed() {
        if (started || !stream) return;
        started = true;
        responder->start_stream(200, "text/event-stream", headers);
    }

    void pump() {
        scheduled.store(false);
        if (finalized) return;
        if (responder->closed()) {
            cancel_all();
            // Keep reading until the generator confirms the cancel, so its stream is released.
        }
        for (size_t s = 0; s < streams.size(); ++s) {
            if (stream_done[s]) continue;
            while (!finalized && streams[s]->try_read(chunk)) {
                prompt_tokens[s] = chunk.usage.prompt_tokens;
                cached_tokens[s] = chunk.usage.cached_tokens;
                prompt_lps[s].insert(prompt_lps[s].end(), chunk.prompt_logprobs.begin(), chunk.prompt_logprobs.end());
                if (!first_token_seen[s] && chunk.times.first_token > 0.0) {
                    first_token_seen[s] = true;  // the prompt was processed
                    metrics->observe_time_to_first_token(chunk.times.first_token - arrival);
                    metrics->add_prompt_tokens(chunk.usage.prompt_tokens);
                }
                for (size_t c = 0; c < chunk.choices.size() && !finalized; ++c)
                    process(s, c, chunk.choices[c]);
                if (chunk.done) {
                    stream_done[s] = true;
                    observe_request_end(chunk.times);
                    break;
                }
            }
        }
        if (finalized) return;
        if (stream && responder->pending_bytes() > max_unsent_bytes) {
            PAGODA_LOG_WARNING("request " + id + ": the client reads too slowly; disconnecting it");
            cancel_all();
            finalize_stream_abort();
            return;
        }
        if (std::all_of(stream_done.begin(), stream_done.end(), [](bool b) { return b; })) finalize();
    }

    void process(size_t s, size_t c, engine::ChoiceDelta& d) {
        Choice& ch = choices[s * static_cast<size_t>(n) + c];
        const int index = static_cast<int>(s * static_cast<size_t>(n) + c);
        if (d.finish_reason == engine::FinishReason::kRejected) return reject(d.finish_message);
        if (ch.done) return;  // stopped by a stop string: the rest is discarded
        out_text.clear();
        const size_t num_tokens = d.token_ids.size();
        auto decode = [&](size_t begin, size_t end) {
            delta_text.clear();
            for (size_t i = begin; i < end; ++i) {
                const int32_t tok = d.token_ids[i];
                // A stop token id ends the text without being part of it (vLLM), unless asked for.
                const bool is_final_stop =
                    i + 1 == num_tokens && d.stop_token_id == tok && d.finish_reason == engine::FinishReason::kStop;
                if (is_final_stop && !text.include_stop_str_in_output) continue;
                if (tokenizer->is_valid_id(tok)) (void)ch.decoder->push(tok, delta_text);
            }
        };
        // As vLLM: stop strings count only in the text of tokens after the first min_tokens.
        const size_t unchecked =
            static_cast<size_t>(std::clamp<int64_t>(min_tokens - ch.tokens, 0, static_cast<int64_t>(num_tokens)));
        decode(0, unchecked);
        (void)ch.stop->feed(delta_text, out_text, /*may_stop=*/false);
        decode(unchecked, num_tokens);
        ch.tokens += static_cast<int64_t>(num_tokens);
        metrics->add_generation_tokens(static_cast<int64_t>(num_tokens));
        for (double t : d.token_times) {
            if (ch.last_token_time > 0.0) metrics->observe_inter_token_latency(t - ch.last_token_time);
            ch.last_token_time = t;
        }
        const bool ending = d.finish_reason != engine::FinishReason::kNone;
        if (ending) ch.decoder->finish(delta_text);
        bool stopped = ch.stop->feed(delta_text, out_text);
        if (ending && !stopped) ch.stop->finish(out_text);
        if (stopped) {
            ch.done = true;
            ch.finish = "stop";
        } else if (ending) {
            ch.done = true;
            ch.finish = finish_reason_name(d.finish_reason);
        }
        if (ch.done) metrics->count_finished(finished_reason_label(ch.finish));
        // Completions that echo with logprobs hold the echo back until the prompt's logprobs are all here: they
        // arrive before (or with) the first token.
        const bool flush_prefix = !ch.prefix.empty() && (!echo_logprobs || num_tokens > 0 || ch.done);
        std::string lp_json;
        if (logprobs && (!d.logprobs.empty() || (flush_prefix && echo_logprobs)))
            lp_json = logprobs_for(d, ch, flush_prefix && echo_logprobs ? &s : nullptr);
        emit(ch, index, lp_json, flush_prefix);
        if (stopped) {
            // Cancel the engine request once none of its choices needs more tokens.
            bool all = true;
            for (int k = 0; k < n; ++k)
                all = all && choices[s * static_cast<size_t>(n) + static_cast<size_t>(k)].done;
            if (all) generator->cancel(streams[s]->id());
        }
    }

    // Completions echo with logprobs: the prompt's entries of the legacy lists (the first token has none).
    void append_prompt_logprobs(size_t s, Json& tokens, Json& token_lps, Json& tops) const {
        const std::vector<int32_t>& ids = prompt_ids[s];
        for (size_t i = 0; i < ids.size(); ++i) {
            tokens.push_back(Json(lossy_utf8(tokenizer->token_bytes(ids[i]))));
            if (i == 0 || i > prompt_lps[s].size()) {
                token_lps.push_back(Json());
                tops.push_back(Json());
                continue;
            }
            const engine::TokenLogprobs& lp = prompt_lps[s][i - 1];
            token_lps.push_back(Json(static_cast<double>(lp.logprob)));
            Json top = Json::object();
            for (int32_t k = 0; k < lp.num_top; ++k)
                top.set(lossy_utf8(tokenizer->token_bytes(lp.top[k].token)),
                        Json(static_cast<double>(lp.top[k].logprob)));
            // As vLLM: the prompt's own token is listed with the most likely ones.
            top.set(lossy_utf8(tokenizer->token_bytes(ids[i])), Json(static_cast<double>(lp.logprob)));
            tops.push_back(std::move(top));
        }
    }

    // vLLM's prompt_logprobs: [null, {"<id>": {logprob, rank, decoded_token}, ...}, ...], the prompt's token first.
    Json prompt_logprobs_json(size_t s) const {
        Json out = Json::array();
        const std::vector<int32_t>& ids = prompt_ids[s];
        auto entry = [&](int32_t token, float logprob, int32_t rank) {
            Json e = Json::object();
            e.set("logprob", Json(static_cast<double>(logprob)));
            e.set("rank", rank > 0 ? Json(rank) : Json());
            e.set("decoded_token", Json(lossy_utf8(tokenizer->token_bytes(token))));
            return e;
        };
        for (size_t i = 0; i < ids.size() && i <= prompt_lps[s].size(); ++i) {
            if (i == 0) {
                out.push_back(Json());
                continue;
            }
            const engine::TokenLogprobs& lp = prompt_lps[s][i - 1];
            Json pos = Json::object();
            pos.set(std::to_string(ids[i]), entry(ids[i], lp.logprob, lp.rank));
            for (int32_t k = 0; k < lp.num_top; ++k)
                if (lp.top[k].token != ids[i])
                    pos.set(std::to_string(lp.top[k].token), entry(lp.top[k].token, lp.top[k].logprob, k + 1));
            out.push_back(std::move(pos));
        }
        return out;
    }

    // One chat logprobs entry: {token, logprob, bytes} (OpenAI's TopLogprob; a content entry adds top_logprobs).
    Json chat_logprob(int32_t token, float logprob) const {
        const std::string_view raw = tokenizer->token_bytes(token);
        Json entry = Json::object();
        entry.set("token", Json(lossy_utf8(raw)));
        entry.set("logprob", Json(static_cast<double>(logprob)));
        Json bytes = Json::array();
        for (unsigned char b : raw)
            bytes.push_back(Json(static_cast<int>(b)));
        entry.set("bytes", std::move(bytes));
        return entry;
    }

    // Chat: {"content":[{token, logprob, bytes, top_logprobs}]}; completions: the legacy parallel lists, led by the
    // prompt's entries when `prompt_of` names a stream (echo).
    std::string logprobs_for(const engine::ChoiceDelta& d, Choice& ch, const size_t* prompt_of = nullptr) {
        Json content = Json::array();
        Json tokens = Json::array(), token_lps = Json::array(), tops = Json::array();
        if (prompt_of && stream) append_prompt_logprobs(*prompt_of, tokens, token_lps, tops);
        for (size_t i = 0; i < d.logprobs.size() && i < d.token_ids.size(); ++i) {
            const auto& lp = d.logprobs[i];
            const std::string tok = lossy_utf8(tokenizer->token_bytes(d.token_ids[i]));
            if (chat) {
                Json entry = chat_logprob(d.token_ids[i], lp.logprob);
                Json top = Json::array();
                for (int32_t k = 0; k < std::min(lp.num_top, top_logprobs); ++k)
                    top.push_back(chat_logprob(lp.top[k].token, lp.top[k].logprob));
                entry.set("top_logprobs", std::move(top));
                if (!stream) ch.logprobs_content.push_back(entry);
                content.push_back(std::move(entry));
            } else {
                Json top = Json::object();
                for (int32_t k = 0; k < std::min(lp.num_top, top_logprobs); ++k)
                    top.set(lossy_utf8(tokenizer->token_bytes(lp.top[k].token)),
                            Json(static_cast<double>(lp.top[k].logprob)));
                // As OpenAI and vLLM: the sampled token is always listed (up to logprobs + 1 entries).
                top.set(tok, Json(static_cast<double>(lp.logprob)));
                tokens.push_back(Json(tok));
                token_lps.push_back(Json(static_cast<double>(lp.logprob)));
                tops.push_back(top);
                if (!stream) {
                    ch.lp_tokens.push_back(Json(tok));
                    ch.lp_token_logprobs.push_back(Json(static_cast<double>(lp.logprob)));
                    ch.lp_top.push_back(std::move(top));
                }
            }
        }
        if (!stream) return {};
        Json out = Json::object();
        if (chat) {
            out.set("content", std::move(content));
        } else {
            out.set("tokens", std::move(tokens));
            out.set("token_logprobs", std::move(token_lps));
            out.set("top_logprobs", std::move(tops));
        }
        return out.dump();
    }

    void emit(Choice& ch, int index, const std::string& lp_json, bool flush_prefix) {
        if (!stream) {
            // Chat output is parsed whole at the end (parse_chat_output), not pieced together from deltas.
            ch.text += out_text;
            return;
        }
        chat_delta.clear();
        if (chat) {
            if (ch.parser) {
                ch.parser->feed(out_text, chat_delta);
                if (ch.done) ch.parser->finish(chat_delta);
                ch.tool_filter->apply(chat_delta.tool_calls);
                if (ch.done && ch.finish == "stop" && ch.tool_filter->kept() > 0) ch.finish = "tool_calls";
            } else {
                chat_delta.content = out_text;
            }
            if (!ch.prefix.empty()) {  // echo: the last message's content comes first
                chat_delta.content.insert(0, ch.prefix);
                ch.prefix.clear();
            }
        }
        start_stream_if_needed();
        const UsageCounts u = usage();
        const UsageCounts* per_chunk_usage = text.continuous_usage_stats ? &u : nullptr;
        if (chat) {
            if (ch.first) {
                // The role comes first, in a chunk of its own as OpenAI sends it.
                responder->write(sse->chat_delta(index, true, "", "", {}, "", {}, per_chunk_usage));
                ch.first = false;
            }
            if (!chat_delta.empty() || ch.done || !lp_json.empty()) {
                responder->write(sse->chat_delta(index, false, chat_delta.reasoning, chat_delta.content,
                                                 chat_delta.tool_calls, ch.done ? ch.finish : "", lp_json,
                                                 per_chunk_usage));
            }
        } else {
            std::string t;
            if (flush_prefix) {
                t = std::move(ch.prefix);
                ch.prefix.clear();
            }
            t += out_text;
            if (!t.empty() || ch.done || !lp_json.empty())
                responder->write(sse->completion_text(index, t, ch.done ? ch.finish : "", lp_json, per_chunk_usage));
        }
    }

    void reject(const std::string& message) {
        cancel_all();
        const ApiError e = ApiError::unavailable(message.empty() ? "the server is busy; try again later" : message);
        if (!started) {
            finalized = true;
            send_error(responder, e, headers);
        } else {
            responder->write(SseChunks::error_event(error_body(e)));
            responder->write(std::string(SseChunks::done()));
            finalized = true;
            responder->finish();
        }
        release();
    }

    void finalize_stream_abort() {
        finalized = true;
        for (Choice& ch : choices)
            if (!ch.done) metrics->count_finished(metrics::FinishedReason::kAbort);
        responder->finish();
        release();
    }

    void observe_request_end(const engine::RequestTimes& t) {
        metrics::RequestLatencies l;
        l.e2e = engine::clock_seconds() - arrival;
        if (t.scheduled > 0.0) l.queue = t.scheduled - t.arrival;
        if (t.first_token > 0.0) {
            l.prefill = t.first_token - t.scheduled;
            l.decode = t.last_token - t.first_token;
        }
        metrics->observe_request(l);
    }

    // A forced tool_choice (required or named) whose output holds no call: nothing enforced the format, so the
    // request fails rather than come back as an answer without the call the client asked for.
    ApiError missing_tool_call_error() const {
        return ApiError{422,
                        "tool_choice " +
                            (tool_policy.function_name.empty() ? std::string("'required'")
                                                               : "'" + tool_policy.function_name + "'") +
                            ": the model's output holds no valid call" +
                            (tool_policy.function_name.empty() ? "" : " to that function") +
                            " (pagoda has no guided decoding yet, so the format is asked of the model, not forced); "
                            "retry, or use tool_choice 'auto'",
                        "UnprocessableEntityError", "tool_choice"};
    }

    void finalize() {
        finalized = true;
        const UsageCounts u = usage();
        if (stream) {
            start_stream_if_needed();
            if (chat && tool_policy.forced) {
                for (const Choice& ch : choices) {
                    if (ch.tool_filter && ch.tool_filter->kept() > 0) continue;
                    responder->write(SseChunks::error_event(error_body(missing_tool_call_error())));
                    break;
                }
            }
            if (text.include_usage) responder->write(sse->usage_chunk(u));
            responder->write(std::string(SseChunks::done()));
            responder->finish();
            release();
            return;
        }
        std::vector<chat::ParsedChatOutput> parsed;
        if (chat) {
            for (Choice& ch : choices) {
                parsed.push_back(chat::parse_chat_output(ch.text, parser_options));
                apply_tool_choice(tool_policy, parsed.back().tool_calls);
                if (tool_policy.forced && parsed.back().tool_calls.empty()) {
                    send_error(responder, missing_tool_call_error(), headers);
                    release();
                    return;
                }
            }
        }
        std::string body;
        body.reserve(512);
        body += "{\"id\":";
        json_escape_to(body, id);
        body += chat ? ",\"object\":\"chat.completion\"" : ",\"object\":\"text_completion\"";
        body += ",\"created\":" + std::to_string(created) + ",\"model\":";
        json_escape_to(body, model);
        body += ",\"choices\":[";
        for (size_t i = 0; i < choices.size(); ++i) {
            Choice& ch = choices[i];
            if (i) body += ',';
            body += "{\"index\":" + std::to_string(i);
            if (chat) {
                chat::ParsedChatOutput& out = parsed[i];
                const std::string content = ch.prefix + out.content;
                if (ch.finish == "stop" && !out.tool_calls.empty()) ch.finish = "tool_calls";
                Json message = Json::object();
                message.set("role", Json("assistant"));
                message.set("content", content.empty() && !out.tool_calls.empty() ? Json() : Json(content));
                if (!out.reasoning.empty()) {
                    message.set("reasoning_content", Json(out.reasoning));
                    message.set("reasoning", Json(out.reasoning));
                }
                Json calls = Json::array();
                for (const auto& call : out.tool_calls) {
                    Json fn = Json::object();
                    fn.set("name", Json(call.name));
                    fn.set("arguments", Json(call.arguments));
                    Json tc = Json::object();
                    tc.set("id", Json(call.id));
                    tc.set("type", Json("function"));
                    tc.set("function", std::move(fn));
                    calls.push_back(std::move(tc));
                }
                message.set("tool_calls", std::move(calls));
                body += ",\"message\":" + message.dump();
                body += ",\"logprobs\":";
                if (logprobs) {
                    Json lp = Json::object();
                    lp.set("content", std::move(ch.logprobs_content));
                    body += lp.dump();
                } else {
                    body += "null";
                }
            } else {
                const size_t s = i / static_cast<size_t>(n);
                body += ",\"text\":";
                json_escape_to(body, ch.prefix + ch.text);
                body += ",\"logprobs\":";
                if (logprobs) {
                    Json tokens = Json::array(), token_lps = Json::array(), tops = Json::array();
                    if (echo_logprobs) append_prompt_logprobs(s, tokens, token_lps, tops);
                    for (Json& v : ch.lp_tokens.as_array())
                        tokens.push_back(std::move(v));
                    for (Json& v : ch.lp_token_logprobs.as_array())
                        token_lps.push_back(std::move(v));
                    for (Json& v : ch.lp_top.as_array())
                        tops.push_back(std::move(v));
                    Json lp = Json::object();
                    lp.set("tokens", std::move(tokens));
                    lp.set("token_logprobs", std::move(token_lps));
                    lp.set("top_logprobs", std::move(tops));
                    body += lp.dump();
                } else {
                    body += "null";
                }
                if (prompt_logprobs) body += ",\"prompt_logprobs\":" + prompt_logprobs_json(s).dump();
            }
            body += ",\"finish_reason\":";
            json_escape_to(body, ch.finish.empty() ? "stop" : ch.finish);
            body += '}';
        }
        body += ']';
        if (chat && prompt_logprobs) body += ",\"prompt_logprobs\":" + prompt_logprobs_json(0).dump();
        body += ",\"usage\":";
        append_usage_json(body, u);
        body += '}';
        send_json(responder, 200, std::move(body), headers);
        release();
    }

    // Breaks the stream -> notifier -> job cycle once nothing more will be read.
    void release() {
        for (auto& s : streams)
            s->set_notifier(nullptr);
    }
};

// ---------------------------------------------------------------------------------------------------------------

OpenAiService::OpenAiService(ServiceConfig config, Tokenizer tokenizer, std::unique_ptr<chat::ChatTemplate> tmpl,
                             Generator& generator)
    : config_(std::move(config)),
      tokenizer_(std::move(tokenizer)),
      chat_template_(std::move(tmpl)),
      generator_(generator),
      max_model_len_(config_.max_model_len),
      created_(unix_seconds()) {
    if (config_.served_model_names.empty()) config_.served_model_names.push_back("model");
}

OpenAiService::~OpenAiService() = default;

void OpenAiService::handle(http::Request req, std::shared_ptr<http::Responder> r) {
    http::Headers extra;
    if (const auto* rid = http::find_header(req.headers, "x-request-id")) extra.emplace_back("X-Request-Id", *rid);

    // CORS: answer allowed origins; a preflight needs no API key.
    const std::string* origin = http::find_header(req.headers, "origin");
    const bool any_origin = contains(config_.allowed_origins, "*");
    if (origin && (any_origin || contains(config_.allowed_origins, *origin))) {
        extra.emplace_back("Access-Control-Allow-Origin",
                           any_origin && !config_.allow_credentials ? std::string("*") : *origin);
        if (!any_origin || config_.allow_credentials) extra.emplace_back("Vary", "Origin");
        if (config_.allow_credentials) extra.emplace_back("Access-Control-Allow-Credentials", "true");
        if (req.method == "OPTIONS" && http::find_header(req.headers, "access-control-request-method")) {
            auto join = [](const std::vector<std::string>& v) {
                std::string s;
                for (const auto& x : v)
                    s += (s.empty() ? "" : ", ") + x;
                return s;
            };
            const bool any_method = contains(config_.allowed_methods, "*");
            extra.emplace_back("Access-Control-Allow-Methods", any_method
                                                                   ? "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT"
                                                                   : join(config_.allowed_methods));
            const std::string* req_headers = http::find_header(req.headers, "access-control-request-headers");
            if (contains(config_.allowed_headers, "*")) {
                if (req_headers) extra.emplace_back("Access-Control-Allow-Headers", *req_headers);
            } else {
                extra.emplace_back("Access-Control-Allow-Headers", join(config_.allowed_headers));
            }
            extra.emplace_back("Access-Control-Max-Age", "600");
            r->send(http::Response{200, std::move(extra), "OK", "text/plain"});
            return;
        }
    }

    // API keys guard /v1 (as vLLM: health, metrics and tokenize stay open for probes).
    if (!config_.api_keys.empty() && req.path.rfind("/v1", 0) == 0 && req.method != "OPTIONS") {
        const std::string* auth = http::find_header(req.headers, "authorization");
        bool ok = false;
        if (auth && auth->size() > 7 && (auth->compare(0, 7, "Bearer ") == 0 || auth->compare(0, 7, "bearer ") == 0))
            ok = contains(config_.api_keys, std::string_view(*auth).substr(7));
        if (!ok) {
            extra.emplace_back("WWW-Authenticate", "Bearer");
            return send_error(r, ApiError::unauthorized(), std::move(extra));
        }
    }

    const std::string& p = req.path;
    auto method_is = [&](std::string_view m) {
        if (req.method == m || (m == "GET" && req.method == "HEAD")) return true;
        extra.emplace_back("Allow", std::string(m));
        send_error(r, ApiError{405, "method " + req.method + " is not allowed on " + p, "MethodNotAllowed", ""},
                   std::move(extra));
        return false;
    };
    // Shutting down: nothing new starts (a load balancer retries elsewhere); /metrics stays up for the last scrape.
    if (draining_.load() && p != "/metrics") {
        return send_error(r, ApiError::unavailable("the server is shutting down"), std::move(extra));
    }
    if ((p == "/v1/chat/completions" || p == "/v1/completions") && !ready_.load()) {
        return send_error(r, ApiError::unavailable("the model is still loading; retry when /health answers 200"),
                          std::move(extra));
    }
    if (p == "/v1/chat/completions") {
        if (method_is("POST")) handle_chat(req, std::move(r), std::move(extra));
    } else if (p == "/v1/completions") {
        if (method_is("POST")) handle_completion(req, std::move(r), std::move(extra));
    } else if (p == "/v1/models") {
        if (method_is("GET")) handle_models(std::move(r), std::move(extra));
    } else if (p == "/health" || p == "/ping") {
        if (p == "/ping" && req.method == "POST") req.method = "GET";  // SageMaker pings with either
        if (!method_is("GET")) return;
        if (ready_.load()) {
            r->send(http::Response{200, std::move(extra), "", ""});
        } else {
            send_error(r, ApiError::unavailable("the model is loading"), std::move(extra));
        }
    } else if (p == "/version") {
        if (!method_is("GET")) return;
        Json v = Json::object();
        v.set("version", Json(config_.version));
        send_json(r, 200, v.dump(), std::move(extra));
    } else if (p == "/metrics") {
        if (method_is("GET")) handle_metrics(std::move(r), std::move(extra));
    } else if (p == "/tokenize") {
        if (method_is("POST")) handle_tokenize(req, std::move(r), std::move(extra));
    } else if (p == "/detokenize") {
        if (method_is("POST")) handle_detokenize(req, std::move(r), std::move(extra));
    } else {
        send_error(r, ApiError::not_found("no route for " + req.method + " " + p), std::move(extra));
    }
}

void OpenAiService::handle_models(std::shared_ptr<http::Responder> r, http::Headers extra) {
    Json data = Json::array();
    for (const auto& name : config_.served_model_names) {
        Json m = Json::object();
        m.set("id", Json(name));
        m.set("object", Json("model"));
        m.set("created", Json(created_));
        m.set("owned_by", Json("pagoda"));
        m.set("root", Json(config_.model_root.empty() ? name : config_.model_root));
        m.set("parent", Json());
        m.set("max_model_len", Json(max_model_len_.load()));
        m.set("permission", Json::array());
        data.push_back(std::move(m));
    }
    Json body = Json::object();
    body.set("object", Json("list"));
    body.set("data", std::move(data));
    send_json(r, 200, body.dump(), std::move(extra));
}

void OpenAiService::handle_metrics(std::shared_ptr<http::Responder> r, http::Headers extra) {
    std::string text = metrics_.render(generator_.stats(), config_.metrics_prefix, config_.served_model_names.front());
    r->send(http::Response{200, std::move(extra), std::move(text), "text/plain; version=0.0.4; charset=utf-8"});
}

namespace {

// Parses the body as a JSON object, or answers 400.
std::optional<Json> parse_body(const http::Request& req, const std::shared_ptr<http::Responder>& r,
                               const http::Headers& extra) {
    auto body = Json::parse(req.body);
    if (!body.ok()) {
        send_error(r, ApiError::bad_request("the request body is not valid JSON: " + body.message()), extra);
        return std::nullopt;
    }
    if (!body->is_object()) {
        send_error(r, ApiError::bad_request("the request body must be a JSON object"), extra);
        return std::nullopt;
    }
    return std::move(body).value();
}

}  // namespace

std::shared_ptr<OpenAiService::Job> OpenAiService::new_job(bool chat, const TextOptions& text,
                                                           const engine::SamplingParams& params,
                                                           const std::string& model, std::shared_ptr<http::Responder> r,
                                                           http::Headers headers) {
    auto job = std::make_shared<Job>();
    job->arrival = engine::clock_seconds();
    job->chat = chat;
    job->stream = text.stream;
    job->text = text;
    job->logprobs = params.logprobs;
    job->top_logprobs = params.top_logprobs;
    job->min_tokens = params.min_tokens;
    job->prompt_logprobs = params.prompt_logprobs.has_value();
    job->n = params.n;
    job->id = random_id(chat ? "chatcmpl-" : "cmpl-");
    job->model = model.empty() ? config_.served_model_names.front() : model;
    job->created = unix_seconds();
    job->responder = std::move(r);
    job->headers = std::move(headers);
    job->generator = &generator_;
    job->tokenizer = &tokenizer_;
    job->metrics = &metrics_;
    job->max_unsent_bytes = config_.max_unsent_bytes;
    if (job->stream)
        job->sse.emplace(chat ? SseChunks::Kind::kChat : SseChunks::Kind::kCompletion, job->id, job->created,
                         job->model);
    return job;
}

// Wires the submitted streams to the job: a closed connection cancels them, engine output pumps the job.
void OpenAiService::Job::start() {
    const size_t k = streams.size();
    prompt_tokens.assign(k, 0);
    cached_tokens.assign(k, 0);
    stream_done.assign(k, false);
    first_token_seen.assign(k, false);
    prompt_lps.resize(k);
    std::weak_ptr<Job> weak = shared_from_this();
    responder->on_close([weak] {
        if (auto j = weak.lock()) j->cancel_all();
    });
    for (auto& s : streams)
        s->set_notifier([self = shared_from_this()] { self->notify(); });
    notify();  // output that arrived before the notifiers were set
}

void OpenAiService::handle_chat(const http::Request& req, std::shared_ptr<http::Responder> r, http::Headers extra) {
    auto body = parse_body(req, r, extra);
    if (!body) return;
    ChatRequest cr;
    if (auto err = parse_chat_request(*body, cr)) return send_error(r, *err, std::move(extra));
    if (!cr.model.empty() && !contains(config_.served_model_names, cr.model)) {
        return send_error(r, ApiError::not_found("The model `" + cr.model + "` does not exist.", "model"),
                          std::move(extra));
    }
    if (cr.tools.is_array() && cr.tool_choice == "auto" && (!config_.enable_auto_tool_choice || !config_.tool_parser)) {
        return send_error(r,
                          ApiError::bad_request("\"auto\" tool choice requires --enable-auto-tool-choice and "
                                                "--tool-call-parser to be set",
                                                "tool_choice"),
                          std::move(extra));
    }

    // Template kwargs: the server's defaults, overridden by the request's.
    Json kwargs =
        config_.default_chat_template_kwargs.is_object() ? config_.default_chat_template_kwargs : Json::object();
    if (cr.chat_template_kwargs.is_object())
        for (const auto& [k, v] : cr.chat_template_kwargs.as_object())
            kwargs.set(k, v);
    if (cr.continue_final_message) kwargs.set("continue_final_message", Json(true));

    std::unique_ptr<chat::ChatTemplate> request_template;
    const chat::ChatTemplate* tmpl = chat_template_.get();
    if (cr.chat_template) {
        auto t = chat::ChatTemplate::from_string(*cr.chat_template, config_.tokenizer_config);
        if (!t.ok())
            return send_error(r, ApiError::bad_request("chat_template: " + t.message(), "chat_template"), extra);
        request_template = std::make_unique<chat::ChatTemplate>(std::move(t).value());
        tmpl = request_template.get();
    }
    if (!tmpl) {
        return send_error(r,
                          ApiError::bad_request("this model has no chat template; pass 'chat_template' or use "
                                                "/v1/completions",
                                                "messages"),
                          std::move(extra));
    }

    // tool_choice: "none" renders no tools and parses none; "auto" uses the server's parser; "required" and a named
    // function render the tools (a named choice: that one only) and parse with the server's parser, or the one the
    // template's call format implies (vLLM needs no --tool-call-parser for them either).
    auto job = new_job(true, cr.text, cr.params, cr.model, r, extra);
    std::optional<chat::ToolParserKind> tool_parser;
    if (cr.tools.is_array() && cr.tool_choice != "none") {
        job->tools = cr.tools;
        if (cr.tool_choice == "auto") {
            tool_parser = config_.tool_parser;
        } else {
            job->tool_policy.forced = true;
            tool_parser = config_.tool_parser ? *config_.tool_parser : chat::detect_tool_parser(tmpl->source(true));
            if (cr.tool_choice == "function") {
                job->tool_policy.function_name = cr.tool_choice_name;
                Json only = Json::array();
                for (const Json& t : cr.tools.as_array())
                    if (t.find("function")->find("name")->as_string() == cr.tool_choice_name) only.push_back(t);
                job->tools = std::move(only);
            }
        }
    }
    job->tool_policy.parallel = cr.parallel_tool_calls;

    auto prompt = tmpl->render(cr.messages, job->tools, cr.add_generation_prompt, kwargs);
    if (!prompt.ok()) {
        return send_error(r,
                          ApiError::bad_request("rendering the chat template failed: " + prompt.message(), "messages"),
                          std::move(extra));
    }
    std::string prompt_text = std::move(prompt).value();
    if (cr.continue_final_message) {
        // The template closes the last message; continuing it means cutting the prompt right after its content.
        const Json* content = cr.messages.as_array().back().find("content");
        if (content && content->is_string() && !content->as_string().empty()) {
            const size_t at = prompt_text.rfind(content->as_string());
            if (at != std::string::npos) prompt_text.resize(at + content->as_string().size());
        }
    }

    engine::Request request;
    request.prompt_tokens = tokenizer_.encode(prompt_text, /*parse_special=*/true);
    request.params = cr.params;
    request.priority = cr.priority;
    request.cache_salt = cr.cache_salt;

    chat::OutputParserOptions& parser_options = job->parser_options;
    if (config_.reasoning_parser && cr.include_reasoning) {
        chat::ReasoningOptions ro;
        const Json* thinking = kwargs.find("enable_thinking");
        ro.thinking_enabled =
            !(thinking && thinking->is_bool() && !thinking->as_bool()) && !chat::prompt_closes_reasoning(prompt_text);
        parser_options.reasoning = ro;
    }
    parser_options.tool_parser = tool_parser;
    parser_options.tool_options.tools = job->tools.is_null() ? nullptr : &job->tools;  // outlives the parsers
    std::string echo;
    if (cr.echo) {
        const Json* content = cr.messages.as_array().back().find("content");
        if (content && content->is_string()) echo = content->as_string();
    }
    job->choices.resize(static_cast<size_t>(job->n));
    for (auto& ch : job->choices) {
        ch.decoder.emplace(tokenizer_, cr.text.skip_special_tokens);
        ch.stop.emplace(cr.text.stop, cr.text.include_stop_str_in_output);
        if (job->stream && (parser_options.reasoning || parser_options.tool_parser)) {
            ch.parser.emplace(parser_options);
            ch.tool_filter.emplace(&job->tool_policy);
        }
        ch.prefix = echo;
    }
    job->prompt_ids.push_back(request.prompt_tokens);
    auto submitted = generator_.submit(std::move(request));
    if (!submitted.ok()) return send_error(r, ApiError::bad_request(submitted.message()), job->headers);
    job->streams.push_back(std::move(submitted).value());
    job->start();
}

void OpenAiService::handle_completion(const http::Request& req, std::shared_ptr<http::Responder> r,
                                      http::Headers extra) {
    auto body = parse_body(req, r, extra);
    if (!body) return;
    CompletionRequest cr;
    if (auto err = parse_completion_request(*body, cr)) return send_error(r, *err, std::move(extra));
    if (!cr.model.empty() && !contains(config_.served_model_names, cr.model)) {
        return send_error(r, ApiError::not_found("The model `" + cr.model + "` does not exist.", "model"),
                          std::move(extra));
    }
    // echo + logprobs: the prompt's tokens get logprobs too (vLLM asks the engine for prompt logprobs).
    const bool echo_logprobs = cr.echo && cr.params.logprobs;
    if (echo_logprobs && !cr.params.prompt_logprobs) cr.params.prompt_logprobs = cr.params.top_logprobs;
    auto job = new_job(false, cr.text, cr.params, cr.model, r, std::move(extra));
    job->echo_logprobs = echo_logprobs;
    job->prompt_logprobs = body->find("prompt_logprobs") && !body->find("prompt_logprobs")->is_null();

    std::vector<engine::Request> requests;
    std::vector<std::string> echoes;
    for (size_t i = 0; i < cr.prompts.size(); ++i) {
        const Prompt& p = cr.prompts[i];
        engine::Request request;
        if (p.is_tokens) {
            for (int32_t t : p.tokens) {
                if (!tokenizer_.is_valid_id(t)) {
                    return send_error(
                        r,
                        ApiError::bad_request("prompt token id " + std::to_string(t) + " is outside the vocabulary",
                                              "prompt"),
                        job->headers);
                }
            }
            request.prompt_tokens = p.tokens;
        } else {
            request.prompt_tokens = tokenizer_.encode(p.text, /*parse_special=*/true);
        }
        if (request.prompt_tokens.empty()) {
            return send_error(r, ApiError::bad_request("the prompt is empty", "prompt"), job->headers);
        }
        std::string echo;
        if (cr.echo) {
            if (p.is_tokens) {
                auto text = tokenizer_.decode(p.tokens, cr.text.skip_special_tokens);
                if (text.ok()) echo = std::move(text).value();
            } else {
                echo = p.text;
            }
        }
        echoes.push_back(std::move(echo));
        request.params = cr.params;
        request.priority = cr.priority;
        request.cache_salt = cr.cache_salt;
        job->prompt_ids.push_back(request.prompt_tokens);
        requests.push_back(std::move(request));
    }
    job->choices.resize(requests.size() * static_cast<size_t>(job->n));
    for (size_t i = 0; i < job->choices.size(); ++i) {
        auto& ch = job->choices[i];
        ch.decoder.emplace(tokenizer_, cr.text.skip_special_tokens);
        ch.stop.emplace(cr.text.stop, cr.text.include_stop_str_in_output);
        ch.prefix = echoes[i / static_cast<size_t>(job->n)];
    }
    for (auto& request : requests) {
        auto submitted = generator_.submit(std::move(request));
        if (!submitted.ok()) {
            for (auto& s : job->streams)
                generator_.cancel(s->id());
            return send_error(r, ApiError::bad_request(submitted.message(), "prompt"), job->headers);
        }
        job->streams.push_back(std::move(submitted).value());
    }
    job->start();
}

void OpenAiService::handle_tokenize(const http::Request& req, std::shared_ptr<http::Responder> r, http::Headers extra) {
    auto body = parse_body(req, r, extra);
    if (!body) return;
    std::string text;
    const Json* prompt = body->find("prompt");
    const Json* messages = body->find("messages");
    if (prompt && prompt->is_string()) {
        text = prompt->as_string();
    } else if (messages) {
        ChatRequest cr;
        if (auto err = parse_chat_request(*body, cr)) return send_error(r, *err, std::move(extra));
        if (!chat_template_) return send_error(r, ApiError::bad_request("this model has no chat template"), extra);
        auto rendered =
            chat_template_->render(cr.messages, cr.tools, cr.add_generation_prompt, cr.chat_template_kwargs);
        if (!rendered.ok()) return send_error(r, ApiError::bad_request(rendered.message(), "messages"), extra);
        text = std::move(rendered).value();
    } else {
        return send_error(r, ApiError::bad_request("give 'prompt' (a string) or 'messages'", "prompt"), extra);
    }
    const std::vector<int32_t> ids = tokenizer_.encode(text, true);
    Json tokens = Json::array();
    for (int32_t id : ids)
        tokens.push_back(Json(id));
    Json out = Json::object();
    out.set("count", Json(static_cast<int64_t>(ids.size())));
    out.set("max_model_len", Json(max_model_len_.load()));
    out.set("tokens", std::move(tokens));
    const Json* strs = body->find("return_token_strs");
    if (strs && strs->is_bool() && strs->as_bool()) {
        Json s = Json::array();
        for (int32_t id : ids)
            s.push_back(Json(lossy_utf8(tokenizer_.token_bytes(id))));
        out.set("token_strs", std::move(s));
    } else {
        out.set("token_strs", Json());
    }
    send_json(r, 200, out.dump(), std::move(extra));
}

void OpenAiService::handle_detokenize(const http::Request& req, std::shared_ptr<http::Responder> r,
                                      http::Headers extra) {
    auto body = parse_body(req, r, extra);
    if (!body) return;
    const Json* tokens = body->find("tokens");
    if (!tokens || !tokens->is_array()) {
        return send_error(r, ApiError::bad_request("'tokens' must be an array of token ids", "tokens"), extra);
    }
    std::vector<int32_t> ids;
    for (size_t i = 0; i < tokens->as_array().size(); ++i) {
        const Json& t = tokens->as_array()[i];
        if (!t.is_int() || t.as_int() < 0 || t.as_int() > INT32_MAX ||
            !tokenizer_.is_valid_id(static_cast<int32_t>(t.as_int()))) {
            return send_error(
                r,
                ApiError::bad_request("'tokens[" + std::to_string(i) + "]' is not a token id of this model",
                                      "tokens[" + std::to_string(i) + "]"),
                extra);
        }
        ids.push_back(static_cast<int32_t>(t.as_int()));
    }
    auto text = tokenizer_.decode(ids);
    if (!text.ok()) return send_error(r, ApiError::bad_request(text.message(), "tokens"), extra);
    Json out = Json::object();
    out.set("prompt", Json(std::move(text).value()));
    send_json(r, 200, out.dump(), std::move(extra));
}

}  // namespace pagoda::server::openai
