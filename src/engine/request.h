// Request in, RequestStream out: what callers of Engine::submit see. The stream is a bounded single-producer
// (engine thread) single-consumer channel; output the consumer has not read yet is merged, so a slow reader costs one
// buffer per request, and one that falls further behind than a limit is cancelled by the engine.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "engine/sampling_params.h"

namespace pagoda::engine {

using RequestId = uint64_t;

struct Request {
    std::vector<int32_t> prompt_tokens;
    SamplingParams params;
    int32_t priority = 0;    // lower runs earlier when priority scheduling is on (vLLM's convention)
    int32_t lora_id = 0;     // 0 = base model; part of the prefix-cache salt
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
    int32_t num_top = 0;
    std::array<TokenLogprob, kMaxTopLogprobs> top{};
};

// New output of one choice since the previous read.
struct ChoiceDelta {
    std::vector<int32_t> token_ids;
    std::vector<TokenLogprobs> logprobs;               // parallel to token_ids when the request asked for logprobs
    FinishReason finish_reason = FinishReason::kNone;  // set in the read that delivers the end of this choice
    std::string finish_message;                        // why, for abort and rejected
    int32_t stop_token_id = -1;                        // the EOS or stop id that ended it, if any
};

struct StreamChunk {
    std::vector<ChoiceDelta> choices;  // one per choice (n), most of them empty in a given read
    // SamplingParams::prompt_logprobs: entry i (counting over all reads) is prompt token i+1 given tokens 0..i; the
    // first prompt token has none. `logprob` is the actual token's, `top` the most likely ones.
    std::vector<TokenLogprobs> prompt_logprobs;
    Usage usage;        // cumulative
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

    // Engine side. push_token returns the number of tokens the consumer has not read yet.
    int32_t push_token(int32_t choice, int32_t token, const TokenLogprobs* logprobs, const Usage& usage);
    void push_prompt_logprobs(std::span<const TokenLogprobs> logprobs);
    void finish(int32_t choice, FinishReason reason, std::string message, int32_t stop_token_id, const Usage& usage);
    void notify();

  private:
    bool take_locked(StreamChunk& out);

    const RequestId id_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::vector<ChoiceDelta> pending_;
    std::vector<TokenLogprobs> pending_prompt_;
    Usage usage_;
    int32_t pending_tokens_ = 0;
    int32_t unfinished_ = 0;
    bool has_new_ = false;
    bool delivered_done_ = false;
    std::function<void()> notify_;
};

}  // namespace pagoda::engine
