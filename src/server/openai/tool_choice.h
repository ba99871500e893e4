// What a chat request's tool_choice and parallel_tool_calls mean for the calls the model's output holds. A forced
// choice ("required" or a named function) is generated under the grammar of the call format (tool_call_grammar.h);
// the calls are still filtered here (a named choice keeps that function's calls), and an output without a complete
// call (cut off by max_tokens) is reported as an error instead of being passed off as an answer.
#pragma once

#include <string>
#include <vector>

#include "chat/output/tool_parser.h"

namespace pagoda::server::openai {

struct ToolChoicePolicy {
    bool forced = false;        // "required" or a named function: the answer must hold a call
    std::string function_name;  // named choice: calls to other functions are dropped
    bool parallel = true;       // parallel_tool_calls: false keeps the first kept call only
};

// Streaming: maps the parser's call indices to the indices the client sees, dropping calls the policy rejects
// (and every later fragment of them). One filter per choice.
class ToolCallFilter {
  public:
    explicit ToolCallFilter(const ToolChoicePolicy* policy) : policy_(policy) {}
    // Rewrites `deltas` in place: kept deltas get their client index, dropped ones are removed.
    void apply(std::vector<chat::ToolCallDelta>& deltas);
    int kept() const { return kept_; }

  private:
    const ToolChoicePolicy* policy_;
    std::vector<int> client_index_;  // parser index -> client index, or dropped / not seen yet
    int kept_ = 0;
};

// Non-streaming: the same policy over whole calls.
void apply_tool_choice(const ToolChoicePolicy& policy, std::vector<chat::ToolCall>& calls);

}  // namespace pagoda::server::openai
