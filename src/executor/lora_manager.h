// LoraManager: the LoraRegistry of one served model. Adapters are read (model::Model::read_lora, on the calling
// thread, so a slow disk never stalls the engine) and kept in host memory up to --max-cpu-loras, least recently used
// dropped first. One that was dropped is read again when a request names it (find, on the request's thread), and the
// request's hold keeps that copy until the request ends, so the engine thread finds it in memory when the request is
// scheduled: a cold adapter costs the steps of the other requests nothing but its copy to the device. The model's
// adapter table (model/lora_table.h) holds up to --max-loras of them on the device. Any thread, except weights(): the
// engine's.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/lora_registry.h"
#include "model/model.h"

namespace pagoda::executor {

class LoraManager final : public engine::LoraRegistry {
  public:
    // `model` must have LoRA enabled and outlive the manager. `reserved_names`: names an adapter may not take (the
    // served model names).
    LoraManager(const model::Model& model, int32_t max_cpu_loras, std::vector<std::string> reserved_names);

    // The adapter's id and a hold on it and on its weights in host memory (read again here if they were dropped).
    std::optional<Ref> find(std::string_view name) override;
    std::vector<engine::LoraInfo> list() override;
    Status load(const std::string& name, const std::string& path) override;
    Status unload(const std::string& name) override;
    std::string name_of(int32_t id) override;
    int32_t max_loras() const override { return max_loras_; }

    // The engine thread (the adapter table's fetch): the weights of adapter `id`, read again if they were dropped.
    Result<std::shared_ptr<const model::LoraAdapter>> weights(int32_t id);
    // The directory adapter `id` was loaded from (also after an unload, while requests hold it): what node 0 tells
    // the other nodes of a multi-node group to read.
    Result<std::string> path_of(int32_t id);

  private:
    struct Entry {
        std::string name, path;
        int32_t id = 0;
        std::shared_ptr<const model::LoraAdapter> weights;  // null once dropped from host memory
        std::weak_ptr<const model::LoraAdapter> held;       // the copy requests' holds keep, when dropped meanwhile
        uint64_t last_used = 0;
    };
    std::shared_ptr<Entry> find_locked(std::string_view name) const;
    // The entry's weights in host memory, read again from its directory if they were dropped (outside mu_).
    Result<std::shared_ptr<const model::LoraAdapter>> host_weights(const std::shared_ptr<Entry>& entry);
    // Drops the host weights of the least recently used entries beyond max_cpu_loras_ (keeping `keep`). Holds mu_.
    void trim_locked(const Entry* keep);

    const model::Model& model_;
    const int32_t max_cpu_loras_;
    const int32_t max_loras_;
    const std::vector<std::string> reserved_names_;
    std::mutex mu_;
    std::vector<std::shared_ptr<Entry>> served_;     // in load order
    std::map<int32_t, std::weak_ptr<Entry>> by_id_;  // also unloaded entries that requests still hold
    int32_t next_id_ = 1;
    uint64_t clock_ = 0;
};

// The adapters of a node other than node 0 of a multi-node group: node 0 names each one (id, directory) before the
// first step that uses it (NodeMessage::kLoraAdapter); this node reads it from the same directory (the nodes share
// the model's storage, as they load the same model) and checks it against its own model's projections (rank 0's: each
// rank cuts what it reads). Up to `max_cpu` stay in host memory, the least recently used dropped first and read again
// from their directory when a step needs them (an adapter's id is never reused, so a name stays valid). Any thread:
// the worker adds, the ranks' threads fetch.
class NodeLoraCache {
  public:
    NodeLoraCache(const model::Model& model, int32_t max_cpu);
    // Reads and checks adapter `id` now, so that a bad one is node 0's error before its step is sent.
    Status add(int32_t id, const std::string& path);
    // The adapter table's fetch.
    Result<std::shared_ptr<const model::LoraAdapter>> weights(int32_t id);

  private:
    struct Entry {
        std::string path;
        std::shared_ptr<const model::LoraAdapter> weights;  // null once dropped
        uint64_t last_used = 0;
    };
    void trim_locked(int32_t keep);

    const model::Model& model_;
    const int32_t max_cpu_;
    std::mutex mu_;
    std::map<int32_t, Entry> entries_;
    uint64_t clock_ = 0;
};

}  // namespace pagoda::executor
