// LoraRegistry: the adapters a server offers by name (vLLM's --lora-modules and /v1/load_lora_adapter), as the HTTP
// layer sees them. Each adapter gets an id that requests carry (Request::lora_id) and that is never reused, so the
// prefix cache of an adapter loaded again under the same name starts afresh. The implementation (executor's
// LoraManager) reads the adapter files; nothing here knows about models. Any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace pagoda::engine {

struct LoraInfo {
    std::string name, path;
    int32_t id = 0;
};

class LoraRegistry {
  public:
    virtual ~LoraRegistry() = default;

    // What a request for adapter `name` carries: its id, and a hold that keeps the adapter loadable until the
    // request ends (Request::lora_hold), even if it is unloaded meanwhile.
    struct Ref {
        int32_t id = 0;
        std::shared_ptr<const void> hold;
    };
    virtual std::optional<Ref> find(std::string_view name) = 0;
    // The adapters served now, in load order.
    virtual std::vector<LoraInfo> list() = 0;
    // Reads and checks the adapter in `path` and serves it as `name`; an error says what is wrong (the name is
    // taken, the files are bad or do not fit the model).
    virtual Status load(const std::string& name, const std::string& path) = 0;
    // Stops serving `name`; requests in flight keep it until they end. An error when no adapter has that name.
    virtual Status unload(const std::string& name) = 0;
    // The name of an adapter id (also of one unloaded while its requests run); "" when unknown.
    virtual std::string name_of(int32_t id) = 0;
    virtual int32_t max_loras() const = 0;
};

}  // namespace pagoda::engine
