// PoolingJob: submit, collect one vector per request on the connection's strand, answer once.
#include "server/openai/pooling_job.h"

#include "server/openai/service_context.h"

namespace pagoda::server::openai {

PoolingJob::PoolingJob(Exchange x, Finish finish) : x_(std::move(x)), finish_(std::move(finish)) {}

void PoolingJob::start(Exchange x, std::vector<engine::Request> requests, Finish finish) {
    int64_t prompt_tokens = 0;
    for (const engine::Request& r : requests)
        prompt_tokens += static_cast<int64_t>(r.prompt_tokens.size());
    if (auto err = admit_prompt_tokens(x, prompt_tokens)) return send_error(x, *err);
    auto job = std::make_shared<PoolingJob>(std::move(x), std::move(finish));
    for (engine::Request& r : requests) {
        auto submitted = job->x_.model->generator.submit(std::move(r));
        if (!submitted.ok()) {
            job->cancel_all();
            return send_error(job->x_, ApiError::bad_request(submitted.message(), "input"));
        }
        job->streams_.push_back(std::move(submitted).value());
    }
    job->remaining_ = job->streams_.size();
    job->done_.assign(job->streams_.size(), false);
    job->outputs_.vectors.resize(job->streams_.size());
    std::weak_ptr<PoolingJob> weak = job;
    job->x_.responder->on_close([weak] {
        if (auto j = weak.lock()) j->cancel_all();
    });
    for (auto& s : job->streams_)
        s->set_notifier([job] { job->notify(); });
    job->notify();  // output that arrived before the notifiers were set
}

void PoolingJob::notify() {
    if (scheduled_.exchange(true)) return;  // a pump is already queued; it will read this output too
    x_.responder->post([self = shared_from_this()] { self->pump(); });
}

void PoolingJob::cancel_all() {
    for (size_t s = 0; s < streams_.size(); ++s)
        if (s >= done_.size() || !done_[s]) x_.model->generator.cancel(streams_[s]->id());
}

// Drains stream `s`: its vector, its end, or why it ended without one.
void PoolingJob::read(size_t s) {
    while (!done_[s] && streams_[s]->try_read(chunk_)) {
        if (!chunk_.pooled.empty()) outputs_.vectors[s] = std::move(chunk_.pooled);
        const engine::ChoiceDelta& d = chunk_.choices.at(0);
        if (d.finish_reason == engine::FinishReason::kRejected && !error_)
            error_ = ApiError::unavailable(d.finish_message.empty() ? "the server is busy; try again later"
                                                                    : d.finish_message);
        else if (d.finish_reason == engine::FinishReason::kAbort && !error_)
            error_ = ApiError{500, "the request was aborted: " + d.finish_message, "InternalServerError", ""};
        if (chunk_.done) {
            done_[s] = true;
            --remaining_;
            outputs_.prompt_tokens += chunk_.usage.prompt_tokens;
        }
    }
}

void PoolingJob::pump() {
    scheduled_.store(false);
    if (answered_) return;
    if (x_.responder->closed()) cancel_all();  // keep reading until the generator confirms, so streams are released
    for (size_t s = 0; s < streams_.size(); ++s)
        read(s);
    if (error_ && !x_.responder->closed()) return answer_error(*error_);
    if (remaining_ > 0) return;
    answered_ = true;
    release();
    if (x_.responder->closed()) return;
    for (size_t s = 0; s < streams_.size(); ++s)
        if (outputs_.vectors[s].empty())
            return send_error(
                x_, ApiError{500, "input " + std::to_string(s) + " produced no vector", "InternalServerError", ""});
    finish_(x_, outputs_);
}

void PoolingJob::answer_error(const ApiError& e) {
    answered_ = true;
    cancel_all();
    release();
    send_error(x_, e);
}

// Breaks the stream -> notifier -> job cycle once nothing more will be read.
void PoolingJob::release() {
    for (auto& s : streams_)
        s->set_notifier(nullptr);
}

}  // namespace pagoda::server::openai
