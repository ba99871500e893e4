// EngineGenerator (a thin adapter) and ScriptedGenerator (a test double with one worker thread).
#include "server/openai/generator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <list>
#include <mutex>
#include <thread>

#include "engine/engine.h"

namespace pagoda::server::openai {

Result<std::shared_ptr<engine::RequestStream>> EngineGenerator::submit(engine::Request request) {
    return engine_.submit(std::move(request));
}

void EngineGenerator::cancel(engine::RequestId id) {
    engine_.cancel(id);
}

engine::EngineStats EngineGenerator::stats() {
    return engine_.latest_stats();
}

void EngineGenerator::wait_for_turn() {
    (void)engine_.stats();  // answered by the engine thread between two steps
}

struct ScriptedGenerator::Impl {
    struct Active {
        std::shared_ptr<engine::RequestStream> stream;
        engine::Request request;
        int32_t max_tokens = 0;
        const std::vector<int32_t>* script = nullptr;  // options.script or one of later_scripts
        std::vector<int32_t> emitted;                  // per choice
        std::vector<bool> finished;                    // per choice
        bool cancelled = false;
    };

    Options options;
    std::mutex mu;
    std::condition_variable cv;
    std::list<Active> active;
    bool stop = false;
    std::atomic<engine::RequestId> next_id{1};
    std::thread worker;

    void run() {
        std::unique_lock<std::mutex> lock(mu);
        while (!stop) {
            cv.wait(lock, [&] { return stop || !active.empty(); });
            if (stop) break;
            for (auto it = active.begin(); it != active.end();) {
                step(*it);
                it->stream->notify();
                const bool done = std::all_of(it->finished.begin(), it->finished.end(), [](bool b) { return b; });
                it = done ? active.erase(it) : std::next(it);
            }
            if (options.token_interval_us > 0) {
                lock.unlock();
                std::this_thread::sleep_for(std::chrono::microseconds(options.token_interval_us));
                lock.lock();
            }
        }
        for (Active& a : active) {  // shutdown aborts what is left
            a.cancelled = true;
            step(a);
            a.stream->notify();
        }
    }

    // One token for every unfinished choice of `a` (called under mu).
    void step(Active& a) {
        const auto& p = a.request.params;
        a.stream->mark_scheduled(engine::clock_seconds());  // a script has no queue: "scheduled" at its first tick
        for (size_t c = 0; c < a.finished.size(); ++c) {
            if (a.finished[c]) continue;
            engine::Usage usage = usage_of(a);
            if (a.cancelled) {
                a.finished[c] = true;
                a.stream->finish(static_cast<int32_t>(c), engine::FinishReason::kAbort, "cancelled", -1, usage);
                continue;
            }
            const int32_t i = a.emitted[c];
            if (i >= a.max_tokens || i >= static_cast<int32_t>(a.script->size())) {
                a.finished[c] = true;
                // The script running out is the model "stopping"; max_tokens is "length".
                a.stream->finish(static_cast<int32_t>(c),
                                 i >= a.max_tokens ? engine::FinishReason::kLength : engine::FinishReason::kStop, "",
                                 -1, usage);
                continue;
            }
            const int32_t token = (*a.script)[static_cast<size_t>(i)];
            ++a.emitted[c];
            usage = usage_of(a);
            engine::TokenLogprobs lp;  // a scripted token is certain: log 1 = 0
            lp.num_top = std::min<int32_t>(p.top_logprobs, 1);
            lp.top[0] = engine::TokenLogprob{token, 0.0f};
            a.stream->push_token(static_cast<int32_t>(c), token, p.logprobs ? &lp : nullptr, usage,
                                 engine::clock_seconds());
            const bool is_eos = std::find(options.eos_token_ids.begin(), options.eos_token_ids.end(), token) !=
                                options.eos_token_ids.end();
            const bool is_stop =
                std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) != p.stop_token_ids.end();
            if ((is_eos && !p.ignore_eos && a.emitted[c] > p.min_tokens) || is_stop) {
                a.finished[c] = true;
                a.stream->finish(static_cast<int32_t>(c), engine::FinishReason::kStop, "", token, usage);
            }
        }
    }

    static engine::Usage usage_of(const Active& a) {
        engine::Usage u;
        u.prompt_tokens = static_cast<int32_t>(a.request.prompt_tokens.size());
        for (int32_t e : a.emitted)
            u.completion_tokens += e;
        return u;
    }
};

ScriptedGenerator::ScriptedGenerator(Options options) : impl_(std::make_unique<Impl>()) {
    impl_->options = std::move(options);
    impl_->worker = std::thread([impl = impl_.get()] { impl->run(); });
}

ScriptedGenerator::~ScriptedGenerator() {
    {
        std::lock_guard<std::mutex> lock(impl_->mu);
        impl_->stop = true;
    }
    impl_->cv.notify_all();
    impl_->worker.join();
}

Result<std::shared_ptr<engine::RequestStream>> ScriptedGenerator::submit(engine::Request request) {
    const auto prompt_len = static_cast<int32_t>(request.prompt_tokens.size());
    if (prompt_len == 0) return Status::error("the prompt is empty");
    if (request.pooling != engine::PoolingTask::kNone)
        return Status::error("the test generator runs no model: it has no embeddings or scores");
    if (prompt_len >= impl_->options.max_model_len) {
        return Status::error("the prompt has " + std::to_string(prompt_len) +
                             " tokens; this model's maximum context length is " +
                             std::to_string(impl_->options.max_model_len));
    }
    const int32_t room = impl_->options.max_model_len - prompt_len;
    if (request.params.max_tokens && *request.params.max_tokens > room) {
        return Status::error("the prompt has " + std::to_string(prompt_len) + " tokens and max_tokens is " +
                             std::to_string(*request.params.max_tokens) + "; together they exceed the maximum " +
                             "context length of " + std::to_string(impl_->options.max_model_len));
    }
    auto stream = std::make_shared<engine::RequestStream>(impl_->next_id.fetch_add(1), request.params.n);
    Impl::Active a;
    a.stream = stream;
    a.max_tokens = request.params.max_tokens.value_or(room);
    a.script = &impl_->options.script;
    const Options& o = impl_->options;
    if (!o.later_scripts.empty() && !o.turn_marker.empty()) {
        const auto& p = request.prompt_tokens;
        size_t turns = 0;
        for (auto it = p.begin();
             (it = std::search(it, p.end(), o.turn_marker.begin(), o.turn_marker.end())) != p.end(); ++it)
            ++turns;
        if (turns >= 2) a.script = &o.later_scripts[std::min(turns - 2, o.later_scripts.size() - 1)];
    }
    a.emitted.assign(static_cast<size_t>(request.params.n), 0);
    a.finished.assign(static_cast<size_t>(request.params.n), false);
    a.request = std::move(request);
    {
        std::lock_guard<std::mutex> lock(impl_->mu);
        impl_->active.push_back(std::move(a));
    }
    impl_->cv.notify_all();
    return stream;
}

engine::EngineStats ScriptedGenerator::stats() {
    std::lock_guard<std::mutex> lock(impl_->mu);
    engine::EngineStats st;
    st.num_requests = static_cast<int32_t>(impl_->active.size());
    st.num_running = st.num_requests;
    return st;
}

void ScriptedGenerator::cancel(engine::RequestId id) {
    std::lock_guard<std::mutex> lock(impl_->mu);
    for (auto& a : impl_->active)
        if (a.stream->id() == id) a.cancelled = true;
}

}  // namespace pagoda::server::openai
