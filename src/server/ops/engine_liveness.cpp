// EngineLiveness (see engine_liveness.h).
#include "server/ops/engine_liveness.h"

namespace pagoda::server::ops {

EngineLiveness::EngineLiveness(std::function<void()> probe, std::chrono::milliseconds period)
    : probe_(std::move(probe)), period_(period), last_answer_(std::chrono::steady_clock::now()) {
    thread_ = std::thread([this] { run(); });
}

EngineLiveness::~EngineLiveness() {
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
    }
    cv_.notify_one();
    thread_.join();
}

double EngineLiveness::seconds_silent() const {
    std::lock_guard lock(mu_);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - last_answer_).count();
}

void EngineLiveness::run() {
    std::unique_lock lock(mu_);
    while (!stopping_) {
        lock.unlock();
        probe_();  // blocks while the engine is inside a step; forever if it is wedged
        lock.lock();
        last_answer_ = std::chrono::steady_clock::now();
        cv_.wait_for(lock, period_, [&] { return stopping_; });
    }
}

}  // namespace pagoda::server::ops
