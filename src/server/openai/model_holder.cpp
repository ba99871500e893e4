// ModelHolder: the served model behind one lock, and the requests parked while a switch cannot overlap.
#include "server/openai/model_holder.h"

#include <malloc.h>

#include <chrono>
#include <thread>
#include <utility>

namespace pagoda::server::openai {

std::shared_ptr<const ServedModel> ModelHolder::current() const {
    std::lock_guard lock(mu_);
    return current_;
}

std::shared_ptr<ServedModel> ModelHolder::install(std::shared_ptr<ServedModel> model, bool resume) {
    model->loaded_at =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    std::shared_ptr<ServedModel> old;
    {
        std::lock_guard lock(mu_);
        old = std::exchange(current_, std::move(model));
    }
    if (resume) this->resume();
    return old;
}

void ModelHolder::pause() {
    std::lock_guard lock(mu_);
    paused_ = true;
}

void ModelHolder::resume() {
    std::vector<std::function<void()>> parked;
    {
        std::lock_guard lock(mu_);
        paused_ = false;
        parked.swap(parked_);
    }
    for (auto& fn : parked)
        fn();
}

bool ModelHolder::paused() const {
    std::lock_guard lock(mu_);
    return paused_;
}

void ModelHolder::run_when_serving(std::function<void()> fn) {
    {
        std::lock_guard lock(mu_);
        if (paused_) {
            parked_.push_back(std::move(fn));
            ++parked_total_;
            return;
        }
    }
    fn();
}

size_t ModelHolder::parked() const {
    std::lock_guard lock(mu_);
    return parked_.size();
}

uint64_t ModelHolder::parked_total() const {
    std::lock_guard lock(mu_);
    return parked_total_;
}

double retire_when_drained(std::shared_ptr<ServedModel> model) {
    const auto start = std::chrono::steady_clock::now();
    // The holder no longer hands it out, so the count only falls; a request holds it until its answer is sent.
    while (model.use_count() > 1)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    model.reset();
    // Give the freed model's memory back to the system: what its threads freed (each reload brings new engine threads,
    // with --async-scheduling a worker too, which take glibc arenas of their own) stays cached in those arenas
    // otherwise. It returns part of it, not all (docs/benchmarks.md, the async soaks).
    malloc_trim(0);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace pagoda::server::openai
