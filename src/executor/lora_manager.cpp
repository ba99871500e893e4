#include "executor/lora_manager.h"

#include <algorithm>

#include "common/check.h"
#include "common/log.h"

namespace pagoda::executor {

LoraManager::LoraManager(const model::Model& model, int32_t max_cpu_loras, std::vector<std::string> reserved_names)
    : model_(model),
      max_cpu_loras_(max_cpu_loras),
      max_loras_(model.lora() != nullptr ? model.lora()->max_loras() : 0),
      reserved_names_(std::move(reserved_names)) {
    PAGODA_CHECK_MSG(model.lora() != nullptr, "LoraManager needs a model with LoRA enabled");
}

std::shared_ptr<LoraManager::Entry> LoraManager::find_locked(std::string_view name) const {
    for (const auto& e : served_)
        if (e->name == name) return e;
    return nullptr;
}

std::optional<engine::LoraRegistry::Ref> LoraManager::find(std::string_view name) {
    std::shared_ptr<Entry> entry;
    {
        std::lock_guard lock(mu_);
        entry = find_locked(name);
        if (!entry) return std::nullopt;
    }
    // Null when the files can no longer be read: the request then fails when it is scheduled, saying why.
    auto weights = host_weights(entry);
    struct Hold {
        std::shared_ptr<Entry> entry;
        std::shared_ptr<const model::LoraAdapter> weights;
    };
    return Ref{entry->id, std::make_shared<Hold>(Hold{entry, weights.ok() ? *weights : nullptr})};
}

Result<std::shared_ptr<const model::LoraAdapter>> LoraManager::host_weights(const std::shared_ptr<Entry>& entry) {
    {
        std::lock_guard lock(mu_);
        entry->last_used = ++clock_;
        if (entry->weights) return entry->weights;
        if (auto held = entry->held.lock()) {  // dropped, but a request's hold still has it
            entry->weights = held;
            trim_locked(entry.get());
            return held;
        }
    }
    // Dropped from host memory: read again (the files were checked when it was loaded).
    auto weights = model_.read_lora(entry->path);
    if (!weights.ok()) return weights.status().with_context("LoRA adapter '" + entry->name + "' read again");
    std::lock_guard lock(mu_);
    if (!entry->weights) entry->weights = *weights;  // another thread may have read it meanwhile
    entry->held = entry->weights;
    trim_locked(entry.get());
    return entry->weights;
}

std::vector<engine::LoraInfo> LoraManager::list() {
    std::lock_guard lock(mu_);
    std::vector<engine::LoraInfo> out;
    for (const auto& e : served_)
        out.push_back({e->name, e->path, e->id});
    return out;
}

Status LoraManager::load(const std::string& name, const std::string& path) {
    if (name.empty()) return Status::error("lora_name must not be empty");
    if (path.empty()) return Status::error("lora_path must not be empty");
    if (std::find(reserved_names_.begin(), reserved_names_.end(), name) != reserved_names_.end())
        return Status::error("'" + name + "' is the base model's name; an adapter needs another");
    {
        std::lock_guard lock(mu_);
        if (find_locked(name)) return Status::error("The lora adapter '" + name + "' has already been loaded.");
    }
    auto weights = model_.read_lora(path);  // outside the lock: reads the files
    if (!weights.ok()) return weights.status();
    std::lock_guard lock(mu_);
    if (find_locked(name))  // another thread may have taken the name meanwhile
        return Status::error("The lora adapter '" + name + "' has already been loaded.");
    auto entry = std::make_shared<Entry>();
    entry->name = name, entry->path = path, entry->id = next_id_++;
    entry->weights = std::move(weights).value();
    entry->held = entry->weights;
    entry->last_used = ++clock_;
    served_.push_back(entry);
    by_id_[entry->id] = entry;
    trim_locked(entry.get());
    PAGODA_LOG_INFO("LoRA adapter '" + name + "' loaded from " + path + " (id " + std::to_string(entry->id) +
                    ", rank " + std::to_string(entry->weights->rank) + ", " + std::to_string(entry->weights->bytes()) +
                    " bytes)");
    return ok_status();
}

Status LoraManager::unload(const std::string& name) {
    std::lock_guard lock(mu_);
    auto it = std::find_if(served_.begin(), served_.end(), [&](const auto& e) { return e->name == name; });
    if (it == served_.end()) return Status::error("The lora adapter '" + name + "' cannot be found.");
    served_.erase(it);  // requests in flight hold the entry; by_id_ finds it until they end
    for (auto i = by_id_.begin(); i != by_id_.end();)
        i = i->second.expired() ? by_id_.erase(i) : std::next(i);
    PAGODA_LOG_INFO("LoRA adapter '" + name + "' unloaded");
    return ok_status();
}

std::string LoraManager::name_of(int32_t id) {
    std::lock_guard lock(mu_);
    auto it = by_id_.find(id);
    if (it == by_id_.end()) return {};
    const auto entry = it->second.lock();
    return entry ? entry->name : std::string();
}

Result<std::shared_ptr<const model::LoraAdapter>> LoraManager::weights(int32_t id) {
    std::shared_ptr<Entry> entry;
    {
        std::lock_guard lock(mu_);
        auto it = by_id_.find(id);
        if (it != by_id_.end()) entry = it->second.lock();
        if (!entry) return Status::error("LoRA adapter id " + std::to_string(id) + " is no longer loaded");
    }
    // In memory for every request that came through find(); read here only for a request without a hold.
    return host_weights(entry);
}

void LoraManager::trim_locked(const Entry* keep) {
    while (true) {
        int32_t held = 0;
        Entry* oldest = nullptr;
        for (const auto& [id, weak] : by_id_) {
            const auto e = weak.lock();
            if (!e || !e->weights) continue;
            ++held;
            if (e.get() != keep && (oldest == nullptr || e->last_used < oldest->last_used)) oldest = e.get();
        }
        if (held <= max_cpu_loras_ || oldest == nullptr) return;
        oldest->weights.reset();  // an adapter resident on the device keeps its own reference
    }
}

Result<std::string> LoraManager::path_of(int32_t id) {
    std::lock_guard lock(mu_);
    auto it = by_id_.find(id);
    const std::shared_ptr<Entry> entry = it != by_id_.end() ? it->second.lock() : nullptr;
    if (!entry) return Status::error("LoRA adapter id " + std::to_string(id) + " is no longer loaded");
    return entry->path;
}

NodeLoraCache::NodeLoraCache(const model::Model& model, int32_t max_cpu) : model_(model), max_cpu_(max_cpu) {
    PAGODA_CHECK_MSG(model.lora() != nullptr, "NodeLoraCache needs a model with LoRA enabled");
}

Status NodeLoraCache::add(int32_t id, const std::string& path) {
    auto weights = model_.read_lora(path);
    if (!weights.ok()) return weights.status().with_context("LoRA adapter " + std::to_string(id) + " at " + path);
    std::lock_guard lock(mu_);
    Entry& e = entries_[id];
    e.path = path;
    e.weights = std::move(weights).value();
    e.last_used = ++clock_;
    trim_locked(id);
    return ok_status();
}

Result<std::shared_ptr<const model::LoraAdapter>> NodeLoraCache::weights(int32_t id) {
    std::string path;
    {
        std::lock_guard lock(mu_);
        auto it = entries_.find(id);
        if (it == entries_.end())
            return Status::error("LoRA adapter id " + std::to_string(id) + " was not named by node 0 before its step");
        it->second.last_used = ++clock_;
        if (it->second.weights) return it->second.weights;
        path = it->second.path;
    }
    // Dropped from host memory: read again (it was checked when node 0 named it).
    auto weights = model_.read_lora(path);
    if (!weights.ok()) return weights.status().with_context("LoRA adapter " + std::to_string(id) + " read again");
    std::lock_guard lock(mu_);
    Entry& e = entries_[id];
    if (!e.weights) e.weights = *weights;
    trim_locked(id);
    return e.weights;
}

void NodeLoraCache::trim_locked(int32_t keep) {
    for (;;) {
        int32_t held = 0;
        Entry* oldest = nullptr;
        for (auto& [id, e] : entries_) {
            if (!e.weights) continue;
            ++held;
            if (id != keep && (oldest == nullptr || e.last_used < oldest->last_used)) oldest = &e;
        }
        if (held <= max_cpu_ || oldest == nullptr) return;
        oldest->weights.reset();  // an adapter resident on the device keeps its own reference
    }
}

}  // namespace pagoda::executor
