#include "engine/pipelined_runner.h"

#include <algorithm>

#include "common/check.h"

namespace pagoda::engine {

void ModelRunner::launch(const StepInput&) {
    PAGODA_CHECK_MSG(false, "this model runner does not launch steps ahead");
}

StepOutput ModelRunner::collect() {
    PAGODA_CHECK_MSG(false, "this model runner does not launch steps ahead");
    return {};
}

PipelinedRunner::PipelinedRunner(ModelRunner& inner)
    : inner_(inner), vocab_size_(inner.vocab_size()), sampler_(inner.vocab_size()) {
    worker_ = std::thread([this] { work(); });
}

PipelinedRunner::~PipelinedRunner() {
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
    }
    cv_.notify_all();
    worker_.join();
}

StepOutput PipelinedRunner::execute(const StepInput& input) {
    {
        std::lock_guard lock(mu_);
        PAGODA_CHECK_MSG(launched_ == collected_, "execute() with a step in flight");
    }
    launch(input);
    return collect();
}

void PipelinedRunner::launch(const StepInput& input) {
    {
        std::lock_guard lock(mu_);
        PAGODA_CHECK_MSG(launched_ - collected_ < 2, "more than two steps launched and not collected");
        queued_.push_back({input, /*follows_uncollected=*/launched_ > collected_});
        ++launched_;
    }
    cv_.notify_all();
}

StepOutput PipelinedRunner::collect() {
    std::unique_lock lock(mu_);
    PAGODA_CHECK_MSG(collected_ < launched_, "collect() with no step launched");
    cv_.wait(lock, [&] { return done_ > collected_; });
    const Result& r = results_[collected_ % 3];
    ++collected_;
    StepOutput out;
    out.status = r.status;
    if (out.status.ok()) {
        out.samples = r.samples;
        out.logits = r.logits;
        out.pooled = r.pooled;
    }
    return out;
}

void PipelinedRunner::work() {
    while (true) {
        Queued step;
        int64_t index = 0;
        {
            std::unique_lock lock(mu_);
            cv_.wait(lock, [&] { return stopping_ || !queued_.empty(); });
            if (queued_.empty()) return;  // stopping, nothing left to run
            step = std::move(queued_.front());
            queued_.pop_front();
            index = done_;
        }
        // Step index - 1 is done (steps run in order), and the engine reads at most steps index - 2 and index - 1
        // meanwhile, so results_[index % 3] is this thread's alone.
        run_step(step, index > 0 ? &results_[(index - 1) % 3] : nullptr, results_[index % 3]);
        {
            std::lock_guard lock(mu_);
            ++done_;
        }
        cv_.notify_all();
    }
}

void PipelinedRunner::run_step(const Queued& step, const Result* previous, Result& result) {
    const StepInput& input = step.input;
    result.status = ok_status();
    result.samples.clear();
    result.host_logits.clear();
    if (result.host_logits.capacity() > (size_t{64} << 20) / sizeof(float))
        std::vector<float>().swap(result.host_logits);  // a long prompt's logprobs rows: not kept for every step
    result.logits = {};
    result.pooled = {};
    if (step.follows_uncollected && previous && !previous->status.ok()) {
        // Built on a step that failed (its pending tokens were never drawn, its KV never written): not run.
        result.status = Status::error("not run: the step launched before it failed");
        return;
    }
    StepInput in = input;
    if (!input.pending_tokens.empty()) {
        token_ids_.assign(input.batch.token_ids.begin(), input.batch.token_ids.end());
        for (const PendingToken& p : input.pending_tokens) {
            PAGODA_CHECK(p.token_index >= 0 && p.token_index < static_cast<int32_t>(token_ids_.size()));
            int32_t token = 0;  // no token to give: the engine drops this row's result
            if (previous && p.sample_index >= 0 && p.sample_index < static_cast<int32_t>(previous->samples.size()))
                token = std::max(0, previous->samples[static_cast<size_t>(p.sample_index)].token);
            token_ids_[static_cast<size_t>(p.token_index)] = token;
        }
        in.batch.token_ids = token_ids_;
        in.pending_tokens = {};
    }
    const StepOutput out = inner_.execute(in);
    result.status = out.status;
    if (!out.status.ok()) return;
    result.pooled = out.pooled;
    if (!out.samples.empty() || input.sample_rows.empty()) {
        // Nothing to sample here (the wrapped runner sampled on its device, or no row samples). Its samples are
        // overwritten by its next step, which may run before the engine reads these: copied. Its other rows are
        // passed through: the engine launches nothing ahead of a step that has such rows.
        result.samples.assign(out.samples.begin(), out.samples.end());
        result.logits = out.logits;
        return;
    }
    // Host logits of every row: sample the sample rows here; the others go back as the device-sampling contract has
    // them (in order, without the sampled rows).
    const size_t rows = input.batch.logits_indices.size();
    const size_t vocab = static_cast<size_t>(vocab_size_);
    if (out.logits.size() != rows * vocab || input.sample_rows.size() != input.sampling.size()) {
        result.status = Status::error("the model runner returned logits for the wrong number of rows");
        return;
    }
    if (input.await_sampling_inputs) input.await_sampling_inputs();  // penalties' tokens, grammar masks
    is_sample_row_.assign(rows, 0);
    result.samples.resize(input.sampling.size());
    for (size_t i = 0; i < input.sampling.size(); ++i) {
        const size_t row = static_cast<size_t>(input.sample_rows[i]);
        is_sample_row_[row] = 1;
        result.samples[i] = sampler_.sample(out.logits.subspan(row * vocab, vocab), input.sampling[i]);
    }
    for (size_t row = 0; row < rows; ++row)
        if (!is_sample_row_[row])
            result.host_logits.insert(result.host_logits.end(), out.logits.begin() + row * vocab,
                                      out.logits.begin() + (row + 1) * vocab);
    result.logits = result.host_logits;
}

}  // namespace pagoda::engine
