// The responses kept for previous_response_id and GET /v1/responses/{id}: in memory only (a restart forgets them,
// as vLLM's store does), bounded by a count and by bytes, the least recently used dropped first. Any thread; one
// mutex, taken once or twice per request, never per token.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "common/json.h"

namespace pagoda::server::openai {

struct StoredResponse {
    Json response;      // the response object as it was answered
    Json conversation;  // chat messages up to and including this response's output, without instructions
};

class ResponseStore {
  public:
    ResponseStore(size_t max_entries, size_t max_bytes) : max_entries_(max_entries), max_bytes_(max_bytes) {}

    // Keeps `entry` under `id` (replacing one there); drops the least recently used while over a bound. An entry
    // larger than max_bytes alone is not kept.
    void put(const std::string& id, std::shared_ptr<const StoredResponse> entry);
    // Null when unknown (never stored, deleted or dropped); a hit counts as a use.
    std::shared_ptr<const StoredResponse> get(const std::string& id);
    bool erase(const std::string& id);
    size_t size() const;

  private:
    struct Slot {
        std::string id;
        std::shared_ptr<const StoredResponse> entry;
        size_t bytes = 0;
    };
    void drop(std::list<Slot>::iterator it);

    const size_t max_entries_, max_bytes_;
    mutable std::mutex mu_;
    std::list<Slot> lru_;  // most recently used first
    std::unordered_map<std::string, std::list<Slot>::iterator> by_id_;
    size_t bytes_ = 0;
};

}  // namespace pagoda::server::openai
