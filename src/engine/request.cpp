// RequestStream: the per-request output channel.
#include "engine/request.h"

#include <utility>

#include "common/check.h"

namespace pagoda::engine {

const char* to_string(FinishReason reason) {
    switch (reason) {
        case FinishReason::kNone:
            return "none";
        case FinishReason::kStop:
            return "stop";
        case FinishReason::kLength:
            return "length";
        case FinishReason::kAbort:
            return "abort";
        case FinishReason::kRejected:
            return "rejected";
    }
    return "?";
}

RequestStream::RequestStream(RequestId id, int32_t n) : id_(id), pending_(n), unfinished_(n) {
    times_.arrival = clock_seconds();
}

bool RequestStream::take_locked(StreamChunk& out) {
    if (!has_new_) return false;
    out.choices.resize(pending_.size());
    for (size_t i = 0; i < pending_.size(); ++i) {
        ChoiceDelta& dst = out.choices[i];
        ChoiceDelta& src = pending_[i];
        // Swap buffers so both sides keep their capacity: no allocation per token once warm.
        dst.token_ids.clear();
        dst.logprobs.clear();
        dst.token_times.clear();
        std::swap(dst.token_ids, src.token_ids);
        std::swap(dst.logprobs, src.logprobs);
        std::swap(dst.token_times, src.token_times);
        dst.finish_reason = std::exchange(src.finish_reason, FinishReason::kNone);
        dst.finish_message = std::move(src.finish_message);
        src.finish_message.clear();
        dst.stop_token_id = std::exchange(src.stop_token_id, -1);
    }
    out.prompt_logprobs.clear();
    std::swap(out.prompt_logprobs, pending_prompt_);
    out.pooled.clear();
    std::swap(out.pooled, pending_pooled_);
    out.usage = usage_;
    out.times = times_;
    out.done = unfinished_ == 0;
    if (out.done) delivered_done_ = true;
    pending_tokens_ = 0;
    has_new_ = false;
    return true;
}

bool RequestStream::read(StreamChunk& out) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return has_new_ || delivered_done_; });
    return take_locked(out);
}

bool RequestStream::try_read(StreamChunk& out) {
    std::lock_guard lock(mu_);
    return take_locked(out);
}

void RequestStream::set_notifier(std::function<void()> notify) {
    std::lock_guard lock(mu_);
    notify_ = std::move(notify);
}

void RequestStream::mark_scheduled(double time) {
    std::lock_guard lock(mu_);
    if (times_.scheduled == 0.0) times_.scheduled = time;
}

int32_t RequestStream::push_token(int32_t choice, int32_t token, const TokenLogprobs* logprobs, const Usage& usage,
                                  double time) {
    std::lock_guard lock(mu_);
    ChoiceDelta& d = pending_[choice];
    d.token_ids.push_back(token);
    if (logprobs) d.logprobs.push_back(*logprobs);
    d.token_times.push_back(time);
    if (times_.first_token == 0.0) times_.first_token = time;
    times_.last_token = time;
    usage_ = usage;
    has_new_ = true;
    return ++pending_tokens_;
}

void RequestStream::push_prompt_logprobs(std::span<const TokenLogprobs> logprobs) {
    std::lock_guard lock(mu_);
    pending_prompt_.insert(pending_prompt_.end(), logprobs.begin(), logprobs.end());
    has_new_ = true;
}

void RequestStream::push_pooled(std::span<const float> values) {
    std::lock_guard lock(mu_);
    pending_pooled_.assign(values.begin(), values.end());
    has_new_ = true;
}

void RequestStream::finish(int32_t choice, FinishReason reason, std::string message, int32_t stop_token_id,
                           const Usage& usage) {
    std::lock_guard lock(mu_);
    ChoiceDelta& d = pending_[choice];
    PAGODA_CHECK(d.finish_reason == FinishReason::kNone && unfinished_ > 0);
    d.finish_reason = reason;
    d.finish_message = std::move(message);
    d.stop_token_id = stop_token_id;
    usage_ = usage;
    --unfinished_;
    has_new_ = true;
}

void RequestStream::notify() {
    std::lock_guard lock(mu_);
    cv_.notify_all();
    // Called under the lock so that set_notifier cannot race it; the notifier must not call back into the stream.
    if (notify_) notify_();
}

}  // namespace pagoda::engine
