// PoolingJob: the prompt-only engine requests of one /v1/embeddings, /v1/score or /v1/rerank request in flight (one
// vector each: engine::PoolingTask). As a CompletionJob, it is pumped on its connection's strand whenever the
// generator has output for it, so its state needs no lock; once every vector is in, the endpoint's `Finish` builds
// the answer. A closed connection cancels the requests; an aborted or rejected one answers an error.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/request.h"
#include "server/openai/router.h"

namespace pagoda::server::openai {

struct PooledOutputs {
    std::vector<std::vector<float>> vectors;  // one per request, in submission order
    int64_t prompt_tokens = 0;                // over all requests
};

class PoolingJob : public std::enable_shared_from_this<PoolingJob> {
  public:
    // Answers on the exchange it is given (the job's own copy).
    using Finish = std::function<void(const Exchange& x, PooledOutputs& outputs)>;

    // Charges the tenant for the prompts, submits `requests` (a refused one answers 400 and cancels the others) and
    // answers on `x` once every vector is in. Errors are answered on `x`.
    static void start(Exchange x, std::vector<engine::Request> requests, Finish finish);

    PoolingJob(Exchange x, Finish finish);
    // Any thread: output is waiting; queues one pump on the strand.
    void notify();

  private:
    void pump();
    void read(size_t s);
    void answer_error(const ApiError& e);
    void cancel_all();
    void release();

    Exchange x_;
    Finish finish_;
    std::vector<std::shared_ptr<engine::RequestStream>> streams_;
    std::vector<bool> done_;
    PooledOutputs outputs_;
    size_t remaining_ = 0;
    std::atomic<bool> scheduled_{false};
    bool answered_ = false;
    std::optional<ApiError> error_;  // the first failed request's
    engine::StreamChunk chunk_;      // reused between reads
};

}  // namespace pagoda::server::openai
