#include "executor/lora_pager.h"

#include <algorithm>

#include "common/log.h"

namespace pagoda::executor {

namespace {

bool contains(std::span<const int32_t> ids, int32_t id) {
    return std::find(ids.begin(), ids.end(), id) != ids.end();
}

}  // namespace

LoraPager::LoraPager(model::LoraTable& table, model::LoraFetch fetch)
    : table_(table), fetch_(std::move(fetch)), device_(table.on_device()) {
    // The slot images, page-locked so that the copy engine moves them while the host and the GPU go on; made here, on
    // the thread that set up the device (a GPU's page-locked memory belongs to the context of the thread that asks).
    for (int i = 0; device_ && i < kImages; ++i) {
        Allocator* pinned = pinned_allocator();
        auto image = Buffer::allocate(pinned ? *pinned : host_allocator(), table_.slot_bytes(), 256);
        if (!image.ok()) {
            PAGODA_LOG_WARNING("LoRA: adapters are installed by the steps that need them (no host memory for " +
                               std::to_string(kImages) + " slot images of " +
                               std::to_string(table_.slot_bytes() >> 20) + " MiB: " + image.status().message() + ")");
            images_.clear();
            disabled_ = true;
            break;
        }
        images_.push_back(std::move(image).value());
    }
    image_owner_.assign(images_.size(), 0);
    if (!images_.empty())
        PAGODA_LOG_INFO("LoRA: adapters are paged in beside the steps, through " + std::to_string(kImages) +
                        " page-locked slot images of " + std::to_string(table_.slot_bytes() >> 20) + " MiB");
    worker_ = std::thread([this] { work(); });
}

LoraPager::~LoraPager() {
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
    }
    cv_.notify_all();
    worker_.join();
    table_.settle(/*wait=*/true);  // no copy reads an image after this
}

bool LoraPager::ready(int32_t id) {
    std::lock_guard lock(mu_);
    if (disabled_) return true;
    if (installing_) return false;  // (asked again at the next schedule)
    asked_[id] = round_;
    if (std::this_thread::get_id() == step_thread_) {
        // Asked on the thread that runs the steps (a synchronous engine schedules there, between two steps): no step
        // touches the table now, so copies that arrived since the last prepare() count at once, a step sooner.
        table_.settle(/*wait=*/false);
        retire_arrived();
        resident_ = table_.resident_ids();
    }
    if (contains(resident_, id)) return true;
    const auto it = jobs_.find(id);
    if (it == jobs_.end()) {
        jobs_[id] = Job{};
        queue_.push_back(id);
        cv_.notify_all();
        return false;
    }
    if (it->second.stage == Stage::kFailed) {
        jobs_.erase(it);
        return true;
    }
    return false;
}

void LoraPager::in_use(std::span<const int32_t> ids) {
    std::lock_guard lock(mu_);
    in_use_[1] = std::move(in_use_[0]);
    in_use_[0].assign(ids.begin(), ids.end());
    ++round_;
    std::erase_if(asked_, [this](const auto& entry) { return entry.second + 1 < round_; });
}

int LoraPager::free_image() const {
    for (size_t i = 0; i < image_owner_.size(); ++i)
        if (image_owner_[i] == 0) return static_cast<int>(i);
    return -1;
}

void LoraPager::work() {
    std::unique_lock lock(mu_);
    for (;;) {
        // The next adapter, once an image is free for it (on a device: a placed adapter's copy frees its image).
        cv_.wait(lock, [this] { return stopping_ || (!queue_.empty() && (!device_ || free_image() >= 0)); });
        if (stopping_) return;
        const int32_t id = queue_.front();
        queue_.pop_front();
        const auto it = jobs_.find(id);
        if (it == jobs_.end() || it->second.stage != Stage::kQueued) continue;  // a step installed it meanwhile
        Job& job = it->second;
        job.stage = Stage::kStaging;
        Buffer* image = nullptr;
        if (device_) {
            job.image = free_image();
            image_owner_[static_cast<size_t>(job.image)] = id;
            image = &images_[static_cast<size_t>(job.image)];
        }
        lock.unlock();
        auto adapter = fetch_(id);
        // Half the cores: the engine thread and the steps' host work go on meanwhile.
        const unsigned threads = std::max(1u, std::thread::hardware_concurrency() / 2);
        auto staged = adapter.ok() ? table_.stage(id, std::move(adapter).value(), image, threads)
                                   : Result<model::LoraTable::Staged>(adapter.status());
        lock.lock();
        Job& done = jobs_.at(id);  // (only prepare() erases a job being staged, after waiting for it)
        if (staged.ok()) {
            done.staged = std::move(staged).value();
            done.stage = Stage::kStaged;
        } else {
            // The step that needs it will try again and say what went wrong.
            PAGODA_LOG_WARNING("LoRA adapter " + std::to_string(id) + " was not paged in: " + staged.message());
            done.stage = Stage::kFailed;
            if (done.image >= 0) image_owner_[static_cast<size_t>(done.image)] = 0;
            done.image = -1;
        }
        cv_.notify_all();
    }
}

void LoraPager::retire_arrived() {
    for (auto it = jobs_.begin(); it != jobs_.end();) {
        const Job& job = it->second;
        if (job.stage != Stage::kPlaced || table_.filling(it->first)) {
            ++it;
            continue;
        }
        if (job.image >= 0) image_owner_[static_cast<size_t>(job.image)] = 0;
        it = jobs_.erase(it);
    }
    cv_.notify_all();  // an image may be free for the next adapter
}

Status LoraPager::prepare(std::span<const int32_t> ids) {
    std::vector<int32_t> keep;
    {
        std::unique_lock lock(mu_);
        step_thread_ = std::this_thread::get_id();
        table_.settle(/*wait=*/false);
        retire_arrived();
        // The step's own adapters first: one the pager's thread is staging is waited for; one still queued is left to
        // the step to install (its request ran without asking: nothing else was running).
        for (int32_t id : ids) {
            auto it = jobs_.find(id);
            if (it == jobs_.end()) continue;
            if (it->second.stage == Stage::kStaging) {
                cv_.wait(lock, [&] { return jobs_.at(id).stage != Stage::kStaging; });
                it = jobs_.find(id);
            }
            if (it->second.stage == Stage::kQueued || it->second.stage == Stage::kFailed) jobs_.erase(it);
        }
        // Kept: the slots of the steps scheduled, running or about to run, and of adapters whose requests asked for
        // them lately (granted, or brought in and not yet granted: two cold adapters for one free slot would otherwise
        // take it from each other in turn).
        keep.assign(ids.begin(), ids.end());
        for (const std::vector<int32_t>& list : in_use_)
            keep.insert(keep.end(), list.begin(), list.end());
        for (const auto& [id, round] : asked_)
            keep.push_back(id);
        for (auto& [id, job] : jobs_) {
            if (job.stage != Stage::kStaged) continue;
            const bool there = table_.resident(id) || table_.filling(id);  // (a step installed it meanwhile)
            if (!table_.place(job.staged, keep)) continue;
            job.stage = Stage::kPlaced;
            paged_in_ += !there;
        }
        table_.settle(/*wait=*/false);  // (on the host a placed adapter has arrived at once)
        retire_arrived();
        resident_ = table_.resident_ids();  // (without the adapters a placement evicted)
        for (int32_t id : ids) {
            const bool installs = !table_.resident(id) && !table_.filling(id);
            installed_by_steps_ += installs;
            installing_ = installing_ || installs;
        }
    }
    // Outside the lock: installing an adapter here takes milliseconds, and the engine thread asks ready() meanwhile
    // (false until it is done: the install may evict an adapter ready() would otherwise vouch for).
    Status status = table_.make_resident(ids, fetch_, keep);
    std::lock_guard lock(mu_);
    retire_arrived();  // make_resident waited for every copy when it installed one
    resident_ = table_.resident_ids();
    installing_ = false;
    return status;
}

int64_t LoraPager::paged_in() const {
    std::lock_guard lock(mu_);
    return paged_in_;
}

int64_t LoraPager::installed_by_steps() const {
    std::lock_guard lock(mu_);
    return installed_by_steps_;
}

}  // namespace pagoda::executor
