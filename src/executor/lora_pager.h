// LoraPager: brings LoRA adapters into the model's adapter table beside the steps, so that a request for an adapter
// that is not on the device does not stop the other sequences while the adapter comes in. The scheduler asks ready(id)
// before it admits a request whose adapter the running sequences do not use (engine::ModelRunner::lora_ready); false
// starts the paging and the request waits while the others step on: the pager's thread fetches the adapter and
// stages it (this rank's cuts and, on a GPU, its slot's image in bf16 in page-locked memory: the work that stalled
// every sequence when the step that needed the adapter did it); before a later step the runner's prepare() places it
// in a slot that no running sequence and no request that asked lately uses (on a GPU its copy runs on a second stream,
// behind the steps queued so far, beside the next ones); once it has arrived ready(id) says true and the request runs.
// A step that needs an adapter that is not resident still installs it itself (LoraTable::make_resident: when nothing
// else ran, the scheduler did not ask), so what a step computes never depends on the paging, only when it runs. ready()
// and in_use() on the engine thread, prepare() on the thread that runs the steps.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "common/status.h"
#include "model/lora_table.h"
#include "tensor/buffer.h"

namespace pagoda::executor {

class LoraPager {
  public:
    // `table` must outlive the pager; `fetch` is called on the pager's thread.
    LoraPager(model::LoraTable& table, model::LoraFetch fetch);
    ~LoraPager();
    LoraPager(const LoraPager&) = delete;
    LoraPager& operator=(const LoraPager&) = delete;

    // Whether adapter `id` is resident; if so it stays resident until the steps scheduled after this call have run
    // (those of this and the next in_use()). If not, it is paged in from now on, and once there it stays while its
    // request keeps asking (an adapter asked for since the last in_use() but one is not evicted for another). True also
    // when paging it failed: the step that needs it then installs it itself, or says why it cannot. False while a step
    // installs an adapter itself (it may evict any other). On the thread that runs the steps (a synchronous engine) a
    // copy that has landed counts at once; from another thread (steps on a worker, or a tensor-parallel rank's own
    // thread) from the next prepare() on.
    bool ready(int32_t id);
    // The running sequences' adapters once a step is scheduled: kept resident until two more steps have been scheduled.
    void in_use(std::span<const int32_t> ids);

    // Before the step whose adapters are `ids` (distinct, non-zero; empty for a step without adapters) runs: makes
    // the adapters whose copies have arrived resident, places the staged ones, then makes the step's own adapters
    // resident (waiting for one the pager's thread is staging, else installing it now).
    Status prepare(std::span<const int32_t> ids);

    // How many adapters were placed by paging, and how many a step had to install itself; any thread.
    int64_t paged_in() const;
    int64_t installed_by_steps() const;

  private:
    enum class Stage { kQueued, kStaging, kStaged, kPlaced, kFailed };
    struct Job {
        Stage stage = Stage::kQueued;
        model::LoraTable::Staged staged;
        int image = -1;  // its slot image in images_ (a device backend)
    };
    static constexpr int kImages = 2;  // adapters staged at once on a device backend (each slot_bytes() pinned)

    void work();
    // An image no job holds, or -1. Holds mu_.
    int free_image() const;
    // Forgets the jobs whose adapters arrived in the table (their images free again). Holds mu_.
    void retire_arrived();

    model::LoraTable& table_;
    const model::LoraFetch fetch_;
    const bool device_;  // the table's slots are device memory: staging writes an image

    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<int32_t> queue_;          // ids to stage, in order asked
    std::map<int32_t, Job> jobs_;        // adapters being paged in
    std::vector<int32_t> resident_;      // the table's resident adapters as of the last prepare() or settling ready()
    std::map<int32_t, uint64_t> asked_;  // adapter -> the in_use() round ready() was last asked about it in
    uint64_t round_ = 0;                 // in_use() calls so far
    bool installing_ = false;            // prepare() lets make_resident install an adapter (and evict another)
    // The thread of the last prepare(): ready() there may settle the table, because every step path that touches the
    // table (make_resident, the forward's map_tokens, graph replay) runs after its own prepare() on that thread and
    // none calls ready() on the way. A path that touched the table without prepare() first would race with it.
    std::thread::id step_thread_;
    std::vector<int32_t> in_use_[2];    // the last two steps' adapters, newest first
    std::vector<Buffer> images_;        // kImages on a device backend
    std::vector<int32_t> image_owner_;  // the job id using each image, 0: free
    int64_t paged_in_ = 0, installed_by_steps_ = 0;
    bool disabled_ = false;  // no images could be had: every step installs its adapters itself
    bool stopping_ = false;
    std::thread worker_;
};

}  // namespace pagoda::executor
