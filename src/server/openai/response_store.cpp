// ResponseStore (see response_store.h).
#include "server/openai/response_store.h"

namespace pagoda::server::openai {

void ResponseStore::put(const std::string& id, std::shared_ptr<const StoredResponse> entry) {
    // Serialised sizes, measured once here, outside the lock: a chain of responses repeats its history in each.
    const size_t bytes = entry->response.dump().size() + entry->conversation.dump().size() + id.size();
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = by_id_.find(id); it != by_id_.end()) drop(it->second);
    if (max_entries_ == 0 || bytes > max_bytes_) return;
    lru_.push_front(Slot{id, std::move(entry), bytes});
    by_id_[id] = lru_.begin();
    bytes_ += bytes;
    while (lru_.size() > max_entries_ || bytes_ > max_bytes_)
        drop(std::prev(lru_.end()));
}

std::shared_ptr<const StoredResponse> ResponseStore::get(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_id_.find(id);
    if (it == by_id_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->entry;
}

bool ResponseStore::erase(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_id_.find(id);
    if (it == by_id_.end()) return false;
    drop(it->second);
    return true;
}

size_t ResponseStore::size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return lru_.size();
}

void ResponseStore::drop(std::list<Slot>::iterator it) {
    bytes_ -= it->bytes;
    by_id_.erase(it->id);
    lru_.erase(it);
}

}  // namespace pagoda::server::openai
