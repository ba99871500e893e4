// Incremental stop-string matching (see stop_strings.h).
#include "chat/output/stop_strings.h"

#include <algorithm>

#include "chat/output/text_scan.h"

namespace pagoda::chat {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops, bool include_stop_str_in_output)
    : include_(include_stop_str_in_output) {
    for (size_t i = 0; i < stops.size(); ++i) {
        if (stops[i].empty()) continue;
        stops_.push_back(std::move(stops[i]));
        original_index_.push_back(static_cast<int>(i));
    }
}

const std::string& StopStringMatcher::matched_string() const {
    static const std::string kNone;
    if (matched_ < 0) return kNone;
    for (size_t i = 0; i < stops_.size(); ++i) {
        if (original_index_[i] == matched_) return stops_[i];
    }
    return kNone;
}

bool StopStringMatcher::feed(std::string_view chunk, std::string& out, bool may_stop) {
    if (stopped_) return true;
    if (stops_.empty()) {
        out.append(chunk);
        return false;
    }
    // Everything before pending_ was already ruled out (or could not stop), so a match must end
    // inside the new chunk.
    const size_t old = pending_.size();
    pending_.append(chunk);
    const std::string_view text = pending_;
    size_t best_end = std::string_view::npos;
    size_t best = 0;
    for (size_t i = 0; i < stops_.size() && may_stop; ++i) {
        const std::string& s = stops_[i];
        const size_t from = old + 1 > s.size() ? old + 1 - s.size() : 0;
        const size_t p = text.find(s, from);
        if (p == std::string_view::npos) continue;
        if (p + s.size() < best_end) {
            best_end = p + s.size();
            best = i;
        }
    }
    if (best_end != std::string_view::npos) {
        stopped_ = true;
        matched_ = original_index_[best];
        const size_t cut = include_ ? best_end : best_end - stops_[best].size();
        if (cut > sent_) out.append(text.substr(sent_, cut - sent_));
        pending_.clear();
        sent_ = 0;
        return true;
    }
    // Only a tail that is a prefix of some stop string can take part in a later match.
    size_t hold = 0;
    for (const std::string& s : stops_)
        hold = std::max(hold, partial_tag_suffix(text, s));
    // Without the stop string in the output that tail must wait; with it, it is sent either way.
    const size_t send_end = include_ ? text.size() : text.size() - hold;
    if (send_end > sent_) out.append(text.substr(sent_, send_end - sent_));
    pending_.erase(0, pending_.size() - hold);
    sent_ = include_ ? hold : 0;
    return false;
}

void StopStringMatcher::finish(std::string& out) {
    if (!stopped_ && pending_.size() > sent_) out.append(pending_, sent_, std::string::npos);
    pending_.clear();
    sent_ = 0;
}

}  // namespace pagoda::chat
