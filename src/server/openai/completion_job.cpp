// CompletionJob: reading the engine's output, detokenizing, stop strings, reasoning/tool-call parsing, SSE writes,
// metrics, and the end of a request (see completion_job.h).
#include "server/openai/completion_job.h"

#include <algorithm>

#include "common/log.h"
#include "common/utf8.h"
#include "server/openai/service_context.h"

namespace pagoda::server::openai {

namespace {

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

// The finished_reason label of request_success_total for an API finish_reason (vLLM counts the engine's reason:
// a call is a "stop", a stop string too).
metrics::FinishedReason finished_reason_label(std::string_view finish) {
    if (finish == "length") return metrics::FinishedReason::kLength;
    if (finish == "abort") return metrics::FinishedReason::kAbort;
    return metrics::FinishedReason::kStop;
}

}  // namespace

std::shared_ptr<CompletionJob> CompletionJob::create(ServiceContext& ctx, bool chat, const TextOptions& text,
                                                     const engine::SamplingParams& params, const std::string& model,
                                                     const Exchange& x) {
    auto job = std::make_shared<CompletionJob>();
    job->arrival = engine::clock_seconds();
    job->chat = chat;
    job->stream = text.stream;
    job->text = text;
    job->logprobs = params.logprobs;
    job->top_logprobs = params.top_logprobs;
    job->min_tokens = params.min_tokens;
    job->prompt_logprobs = params.prompt_logprobs.has_value();
    job->n = params.n;
    job->max_tokens = params.max_tokens.value_or(0);
    job->served = x.model;
    job->max_model_len = x.model->max_model_len.load();
    job->id = random_id(chat ? "chatcmpl-" : "cmpl-");
    job->model = model.empty() ? x.model->served_model_names.front() : model;
    job->created = unix_seconds();
    job->responder = x.responder;
    job->headers = x.headers;
    job->generator = &x.model->generator;
    job->tokenizer = &x.model->tokenizer;
    job->metrics = &ctx.metrics;
    job->tenant = x.tenant;
    job->notes = x.request.notes;
    if (job->notes) job->notes->model = job->model;
    job->max_unsent_bytes = ctx.config.max_unsent_bytes;
    if (job->stream)
        job->sse.emplace(chat ? SseChunks::Kind::kChat : SseChunks::Kind::kCompletion, job->id, job->created,
                         job->model);
    return job;
}

// Wires the submitted streams to the job: a closed connection cancels them, engine output pumps the job.
void CompletionJob::start() {
    const size_t k = streams.size();
    prompt_tokens.assign(k, 0);
    cached_tokens.assign(k, 0);
    stream_done.assign(k, false);
    first_token_seen.assign(k, false);
    prompt_lps.resize(k);
    std::weak_ptr<CompletionJob> weak = shared_from_this();
    responder->on_close([weak] {
        if (auto j = weak.lock()) j->cancel_all();
    });
    for (auto& s : streams)
        s->set_notifier([self = shared_from_this()] { self->notify(); });
    notify();  // output that arrived before the notifiers were set
}

void CompletionJob::notify() {
    if (scheduled.exchange(true)) return;  // a pump is already queued; it will read this output too
    responder->post([self = shared_from_this()] { self->pump(); });
}

void CompletionJob::cancel_all() {
    for (size_t s = 0; s < streams.size(); ++s)
        if (!stream_done[s]) generator->cancel(streams[s]->id());
}

UsageCounts CompletionJob::usage() const {
    UsageCounts u;
    for (int64_t p : prompt_tokens)
        u.prompt_tokens += p;
    for (int64_t c : cached_tokens)
        u.cached_tokens += c;
    for (const Choice& c : choices)
        u.completion_tokens += c.tokens;
    return u;
}

void CompletionJob::start_stream_if_needed() {
    if (started || !stream) return;
    started = true;
    responder->start_stream(200, "text/event-stream", headers);
    if (sink) {
        std::string events;
        sink->stream_begin(events);
        responder->write(std::move(events));
    }
}

void CompletionJob::pump() {
    scheduled.store(false);
    if (finalized) return;
    if (responder->closed()) {
        note_abort("cancelled: the client closed the connection");
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
                if (notes && notes->ttft_s < 0.0) notes->ttft_s = chunk.times.first_token - arrival;
                metrics->add_prompt_tokens(chunk.usage.prompt_tokens);
            }
            for (size_t c = 0; c < chunk.choices.size() && !finalized; ++c)
                process(s, c, chunk.choices[c]);
            if (chunk.done) {
                stream_done[s] = true;
                observe_request_end(s, chunk.times);
                break;
            }
        }
    }
    if (finalized) return;
    if (stream && responder->pending_bytes() > max_unsent_bytes) {
        note_abort("disconnected: the client reads too slowly (" + std::to_string(responder->pending_bytes()) +
                   " bytes unsent)");
        cancel_all();
        finalize_stream_abort();
        return;
    }
    if (std::all_of(stream_done.begin(), stream_done.end(), [](bool b) { return b; })) finalize();
}

void CompletionJob::process(size_t s, size_t c, engine::ChoiceDelta& d) {
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
    if (tenant) tenant->charge_generated(static_cast<int64_t>(num_tokens));
    for (double t : d.token_times) {
        if (ch.last_token_time > 0.0) metrics->observe_inter_token_latency(t - ch.last_token_time);
        if (ch.timed_tokens++ == 0) ch.first_token_time = t;
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
    if (ch.done) count_finished(s, ch, finished_reason_label(ch.finish));
    if (d.finish_reason == engine::FinishReason::kAbort)
        note_abort(d.finish_message.empty() ? "aborted by the engine" : "aborted by the engine: " + d.finish_message);
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

void CompletionJob::emit(Choice& ch, int index, const std::string& lp_json, bool flush_prefix) {
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
    if (sink) {
        std::string events;
        sink->stream_delta(chat_delta, ch.done ? ch.finish : "", events);
        if (!events.empty()) responder->write(std::move(events));
        return;
    }
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
        ch.text_chars += static_cast<int64_t>(utf8_length(t));
        if (!t.empty() || ch.done || !lp_json.empty())
            responder->write(sse->completion_text(index, t, ch.done ? ch.finish : "", lp_json, per_chunk_usage));
    }
}

void CompletionJob::reject(const std::string& message) {
    cancel_all();
    const ApiError e = ApiError::unavailable(message.empty() ? "the server is busy; try again later" : message);
    if (!started) {
        finalized = true;
        send_error(responder, e, headers);
    } else {
        write_stream_error(e);
        if (!sink) responder->write(std::string(SseChunks::done()));
        finalized = true;
        responder->finish();
    }
    release();
}

void CompletionJob::finalize_stream_abort() {
    finalized = true;
    log_request_event(headers, id + " " + abort_reason);
    for (size_t i = 0; i < choices.size(); ++i)
        if (!choices[i].done) count_finished(i / static_cast<size_t>(n), choices[i], metrics::FinishedReason::kAbort);
    responder->finish();
    release();
}

// vLLM's per-request metrics, for one choice (one of vLLM's child requests). As vLLM's server, which fills in
// max_tokens when the client gave none, a request without one counts the context its prompt left.
void CompletionJob::count_finished(size_t s, const Choice& ch, metrics::FinishedReason reason) {
    metrics::FinishedChoice f;
    f.reason = reason;
    f.prompt_tokens = prompt_tokens[s];
    f.generation_tokens = ch.tokens;
    f.max_tokens = max_tokens > 0 ? max_tokens : std::max<int64_t>(0, max_model_len - prompt_tokens[s]);
    if (ch.timed_tokens >= 2)
        f.time_per_output_token = (ch.last_token_time - ch.first_token_time) / static_cast<double>(ch.timed_tokens - 1);
    metrics->observe_finished(f);
}

void CompletionJob::observe_request_end(size_t s, const engine::RequestTimes& t) {
    metrics::RequestLatencies l;
    l.e2e = engine::clock_seconds() - arrival;
    if (t.scheduled > 0.0) l.queue = t.scheduled - t.arrival;
    if (t.first_token > 0.0) {
        l.prefill = t.first_token - t.scheduled;
        l.decode = t.last_token - t.first_token;
    }
    int64_t max_generated = 0;
    for (int c = 0; c < n; ++c)
        max_generated = std::max(max_generated, choices[s * static_cast<size_t>(n) + static_cast<size_t>(c)].tokens);
    metrics->observe_request(l, n, max_generated);
}

// A forced tool_choice (required or named) whose output holds no complete call: the grammar keeps the output in the
// call format, so this is a call cut off by max_tokens (or a format no grammar is built for); the request fails
// rather than come back as an answer without the call the client asked for.
ApiError CompletionJob::missing_tool_call_error() const {
    return ApiError{
        422,
        "tool_choice " +
            (tool_policy.function_name.empty() ? std::string("'required'") : "'" + tool_policy.function_name + "'") +
            ": the model's output holds no valid call" +
            (tool_policy.function_name.empty() ? "" : " to that function") +
            " (was it cut off by max_tokens?); raise max_tokens, or use tool_choice 'auto'",
        "UnprocessableEntityError", "tool_choice"};
}

void CompletionJob::finalize() {
    finalized = true;
    // Before the answer is finished, so that the line is out when the client (or a test) sees the end.
    if (!abort_reason.empty()) log_request_event(headers, id + " " + abort_reason);
    const UsageCounts u = usage();
    if (stream) {
        start_stream_if_needed();
        if (chat && tool_policy.forced) {
            for (const Choice& ch : choices) {
                if (ch.tool_filter && ch.tool_filter->kept() > 0) continue;
                const ApiError e = missing_tool_call_error();
                log_request_event(headers, id + " " + std::to_string(e.status) + " (in the stream) " + e.message);
                write_stream_error(e);
                break;
            }
        }
        if (sink) {
            std::string events;
            sink->stream_end(u, events);
            responder->write(std::move(events));
            responder->finish();
            release();
            return;
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
    send_json(responder, 200,
              sink ? sink->response_body(parsed.at(0), choices.at(0).finish, u) : response_body(parsed, u), headers);
    release();
}

void CompletionJob::write_stream_error(const ApiError& e) {
    if (!sink) {
        responder->write(SseChunks::error_event(error_body(e)));
        return;
    }
    std::string events;
    sink->stream_error(e, events);
    responder->write(std::move(events));
}

// The first reason wins: a disconnect makes the engine abort too, and the disconnect is what happened.
void CompletionJob::note_abort(std::string reason) {
    if (abort_reason.empty()) abort_reason = std::move(reason);
}

// Breaks the stream -> notifier -> job cycle once nothing more will be read; the usage goes to the access log.
void CompletionJob::release() {
    if (notes) {
        const UsageCounts u = usage();
        notes->prompt_tokens = u.prompt_tokens;
        notes->completion_tokens = u.completion_tokens;
    }
    for (auto& s : streams)
        s->set_notifier(nullptr);
}

}  // namespace pagoda::server::openai
