// Stop strings over streamed text: finds a stop string even when it spans chunks, and holds back
// only the tail that could still grow into one, so a stop string never reaches the client
// (unless include_stop_str_in_output asks for it).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pagoda::chat {

class StopStringMatcher {
  public:
    // Empty strings in `stops` are ignored.
    explicit StopStringMatcher(std::vector<std::string> stops, bool include_stop_str_in_output = false);

    // Appends to `out` the text that can be sent now; true when a stop string completed (the
    // text is then cut at its start, or after it with include_stop_str_in_output). Once stopped,
    // later calls append nothing. The stop is the one that completes first in the text; among
    // several completing at the same byte, the first in `stops` order. With `may_stop` false no
    // stop string can complete in `chunk` (vLLM looks for them only once min_tokens tokens were
    // generated), but its tail may still begin one that a later chunk completes.
    bool feed(std::string_view chunk, std::string& out, bool may_stop = true);
    // End of generation without a stop: appends the held-back tail.
    void finish(std::string& out);

    bool stopped() const { return stopped_; }
    // Index into the constructor's `stops` of the matched string, or -1 (vLLM's stop_reason).
    int matched_index() const { return matched_; }
    const std::string& matched_string() const;
    bool empty() const { return stops_.empty(); }

  private:
    std::vector<std::string> stops_;
    std::vector<int> original_index_;
    bool include_;
    bool stopped_ = false;
    int matched_ = -1;
    std::string pending_;  // the tail that may begin a stop string (a proper prefix of one)
    size_t sent_ = 0;      // leading bytes of pending_ already sent (include_stop_str_in_output)
};

}  // namespace pagoda::chat
