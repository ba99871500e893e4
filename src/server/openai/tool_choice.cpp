// ToolCallFilter and apply_tool_choice: one decision rule (keep_call) for streamed and whole calls.
#include "server/openai/tool_choice.h"

namespace pagoda::server::openai {

namespace {

constexpr int kUndecided = -2;
constexpr int kDropped = -1;

bool keep_call(const ToolChoicePolicy& policy, const std::string& name, int kept_so_far) {
    if (!policy.function_name.empty() && name != policy.function_name) return false;
    return policy.parallel || kept_so_far == 0;
}

}  // namespace

void ToolCallFilter::apply(std::vector<chat::ToolCallDelta>& deltas) {
    size_t out = 0;
    for (size_t i = 0; i < deltas.size(); ++i) {
        chat::ToolCallDelta& d = deltas[i];
        if (d.index < 0) continue;
        const size_t at = static_cast<size_t>(d.index);
        if (at >= client_index_.size()) client_index_.resize(at + 1, kUndecided);
        if (client_index_[at] == kUndecided) {
            // The first delta of a call names it (tool_parser.h): decide once, for all its fragments.
            client_index_[at] = keep_call(*policy_, d.name, kept_) ? kept_++ : kDropped;
        }
        if (client_index_[at] < 0) continue;
        d.index = client_index_[at];
        if (out != i) deltas[out] = std::move(d);
        ++out;
    }
    deltas.resize(out);
}

void apply_tool_choice(const ToolChoicePolicy& policy, std::vector<chat::ToolCall>& calls) {
    std::vector<chat::ToolCall> kept;
    for (chat::ToolCall& c : calls)
        if (keep_call(policy, c.name, static_cast<int>(kept.size()))) kept.push_back(std::move(c));
    calls = std::move(kept);
}

}  // namespace pagoda::server::openai
