// Request in, RequestStream out: what callers of Engine::submit see. The stream is a bounded single-producer
// (engine thread) single-consumer channel; output the consumer has not read yet is merged, so a slow reader costs one
// buffer per request, and one that falls further behind than a limit is cancelled by the engine.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "engine/sampling_params.h"

namespace pagoda::engine {

using RequestId = uint64_t;

// Seconds on the steady clock: the time base of RequestTimes and ChoiceDelta::token_times (metrics take
// differences of these; they mean nothing across processes).
inline double clock_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// What a prompt-only request (embeddings, scores) returns instead of generating: the prompt runs (prefill, chunked
// and batched with generation as any prompt), nothing is sampled, and the request ends with one vector of its last
// prompt position in StreamChunk::pooled.
enum class PoolingTask {
    kNone,         // generate
    kLastHidden,   // the final-norm hidden state of the last prompt token (last-token pooling: Qwen3-Embedding)
    kTokenLogits,  // the logits of Request::pooling_token_ids at the last prompt token (Qwen3-Reranker's yes/no)
};

struct Request {
    std::vector<int32_t> prompt_tokens;
    PoolingTask pooling = PoolingTask::kNone;  // not kNone: n = 1, no sampling; params other than n are unused
    std::vector<int32_t> pooling_token_ids;    // kTokenLogits: whose logits, in this order
    SamplingParams params;
    int32_t priority = 0;  // lower runs earlier when priority scheduling is on (vLLM's convention)
    int32_t lora_id = 0;   // 0 = base model; part of the prefix-cache salt
    // Keeps the adapter of lora_id loadable until the engine drops the request (an unloaded adapter stays until its
    // requests in flight end); whoever resolved the adapter's name sets it. The engine only holds it.
    std::shared_ptr<const void> lora_hold;
    std::string cache_salt;  // optional per-tenant prefix-cache isolation
};

enum class FinishReason { kNone, kStop, kLength, kAbort, kRejected };
const char* to_string(FinishReason reason);

struct Usage {
    int32_t prompt_tokens = 0;
    int32_t completion_tokens = 0;  // over all choices
    int32_t cached_tokens = 0;      // prompt tokens served from the prefix cache (first admission of each choice)
};

struct TokenLogprobs {
    float logprob = 0.0f;
    int32_t rank = 0;  // 1-based rank of the token among all by raw logit (prompt logprobs); 0 = not computed
    int32_t num_top = 0;
    std::array<TokenLogprob, kMaxTopLogprobs> top{};
};

// New output of one choice since the previous read.
struct ChoiceDelta {
    std::vector<int32_t> token_ids;
    std::vector<TokenLogprobs> logprobs;               // parallel to token_ids when the request asked for logprobs
    std::vector<double> token_times;                   // parallel to token_ids: clock_seconds() when each was made
    FinishReason finish_reason = FinishReason::kNone;  // set in the read that delivers the end of this choice
    std::string finish_message;                        // why, for abort and rejected
    int32_t stop_token_id = -1;                        // the EOS or stop id that ended it, if any
};

// When a request reached the milestones that latency metrics measure (clock_seconds(); 0 = not yet). As vLLM's
// request stats: queue time = scheduled - arrival, prefill = first_token - scheduled, decode = last_token -
// first_token.
struct RequestTimes {
    double arrival = 0.0;      // the stream was created (Engine::submit)
    double scheduled = 0.0;    // first put into a step
    double first_token = 0.0;  // first output token of any choice
    double last_token = 0.0;   // latest output token of any choice
};

struct StreamChunk {
    std::vector<ChoiceDelta> choices;  // one per choice (n), most of them empty in a given read
    // SamplingParams::prompt_logprobs: entry i (counting over all reads) is prompt token i+1 given tokens 0..i; the
    // first prompt token has none. `logprob` is the actual token's, `top` the most likely ones.
    std::vector<TokenLogprobs> prompt_logprobs;
    Usage usage;         // cumulative
    RequestTimes times;  // cumulative
    // A pooling request's vector (Request::pooling), in the read that delivers its end; empty otherwise.
    std::vector<float> pooled;
    bool done = false;  // every choice has finished; nothing more will come
};

class RequestStream {
  public:
    RequestStream(RequestId id, int32_t n);
    RequestId id() const { return id_; }

    // Blocks until there is new output; false when the stream ended and everything was read.
    bool read(StreamChunk& out);
    // As read() without waiting; false when there is nothing new.
    bool try_read(StreamChunk& out);
    // Called on the engine thread after new output was queued (an async server wakes its writer here). Set it
    // before the first output can arrive, i.e. right after submit and before the engine runs, or accept a miss.
    void set_notifier(std::function<void()> notify);

    // Engine side. `time` is clock_seconds() of the step. push_token returns the number of tokens the consumer has
    // not read yet.
    void mark_scheduled(double time);
    int32_t push_token(int32_t choice, int32_t token, const TokenLogprobs* logprobs, const Usage& usage, double time);
    void push_prompt_logprobs(std::span<const TokenLogprobs> logprobs);
    void push_pooled(std::span<const float> values);
    void finish(int32_t choice, FinishReason reason, std::string message, int32_t stop_token_id, const Usage& usage);
    void notify();

  private:
    bool take_locked(StreamChunk& out);

    const RequestId id_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::vector<ChoiceDelta> pending_;
    std::vector<TokenLogprobs> pending_prompt_;
    std::vector<float> pending_pooled_;
    Usage usage_;
    RequestTimes times_;
    int32_t pending_tokens_ = 0;
    int32_t unfinished_ = 0;
    bool has_new_ = false;
    bool delivered_done_ = false;
    std::function<void()> notify_;
};

}  // namespace pagoda::engine
