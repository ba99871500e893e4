// The Responses API sink (see responses_output.h). Output items in OpenAI's order: reasoning, message, function
// calls. A stream opens an item when its first text arrives and closes it when another kind starts or the answer
// ends; deltas are written with string appends (one per token), items and lifecycle events as JSON trees (a few
// per response).
#include "server/openai/responses_output.h"

#include <utility>
#include <vector>

#include "server/openai/json_fields.h"
#include "server/openai/service_context.h"

namespace pagoda::server::openai {

namespace {

struct Item {
    enum class Kind { kReasoning, kMessage, kCall };
    Kind kind = Kind::kMessage;
    std::string id;
    std::string text;  // the reasoning, the message text, or the call's arguments
    std::string call_id, name;
};

bool is_space(std::string_view s) {
    return s.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

Item new_item(Item::Kind kind) {
    Item it;
    it.kind = kind;
    it.id = random_id(kind == Item::Kind::kReasoning ? "rs_" : kind == Item::Kind::kMessage ? "msg_" : "fc_");
    return it;
}

// The content part of a reasoning or message item: empty while it streams, whole when done.
Json part_json(const Item& it, bool done) {
    const Json text(done ? it.text : std::string());
    if (it.kind == Item::Kind::kReasoning) return json_object({{"type", Json("reasoning_text")}, {"text", text}});
    return json_object(
        {{"type", Json("output_text")}, {"text", text}, {"annotations", Json::array()}, {"logprobs", Json::array()}});
}

Json item_json(const Item& it, bool done, bool incomplete) {
    const Json status(done ? (incomplete ? "incomplete" : "completed") : "in_progress");
    Json content = Json::array();
    if (done && it.kind != Item::Kind::kCall) content.push_back(part_json(it, true));
    switch (it.kind) {
        case Item::Kind::kReasoning:
            // As vLLM gives it: the text as reasoning_text content, no summary (Qwen writes none).
            return json_object({{"id", Json(it.id)},
                                {"type", Json("reasoning")},
                                {"summary", Json::array()},
                                {"content", std::move(content)},
                                {"encrypted_content", Json()},
                                {"status", status}});
        case Item::Kind::kMessage:
            return json_object({{"id", Json(it.id)},
                                {"type", Json("message")},
                                {"role", Json("assistant")},
                                {"status", status},
                                {"content", std::move(content)}});
        case Item::Kind::kCall:
            return json_object({{"id", Json(it.id)},
                                {"type", Json("function_call")},
                                {"call_id", Json(it.call_id)},
                                {"name", Json(it.name)},
                                {"arguments", Json(done ? it.text : std::string())},
                                {"status", status}});
    }
    return Json();
}

class ResponsesSink final : public OutputSink {
  public:
    explicit ResponsesSink(ResponseContext c) : c_(std::move(c)) {}

    void stream_begin(std::string& out) override {
        const Json response = c_.base;
        event(out, "response.created", json_object({{"response", response}}));
        event(out, "response.in_progress", json_object({{"response", response}}));
    }

    void stream_delta(const chat::ChatDelta& delta, std::string_view finish, std::string& out) override {
        if (!delta.reasoning.empty()) text_delta(Item::Kind::kReasoning, delta.reasoning, out);
        if (!delta.content.empty()) content_delta(delta.content, out);
        for (const chat::ToolCallDelta& tc : delta.tool_calls) {
            if (!tc.id.empty()) {
                Item it = new_item(Item::Kind::kCall);
                it.call_id = tc.id;
                it.name = tc.name;
                open(std::move(it), out);
                if (call_items_.size() <= static_cast<size_t>(tc.index)) call_items_.resize(tc.index + 1, -1);
                call_items_[tc.index] = open_;
            }
            const int at = static_cast<size_t>(tc.index) < call_items_.size() ? call_items_[tc.index] : -1;
            if (at < 0 || tc.arguments.empty()) continue;
            items_[at].text += tc.arguments;
            if (at == open_) delta_event(out, "response.function_call_arguments.delta", at, false, tc.arguments);
        }
        if (!finish.empty()) {
            finish_ = std::string(finish);
            if (!has(Item::Kind::kMessage) && !has(Item::Kind::kCall)) {
                open(new_item(Item::Kind::kMessage), out);
                if (!held_space_.empty()) text_delta(Item::Kind::kMessage, std::exchange(held_space_, {}), out);
            }
            close(out);
        }
    }

    void stream_end(const UsageCounts& usage, std::string& out) override {
        if (failed_) return;  // the error event ended it
        close(out);
        const Json response = finished_object(usage);
        event(out, incomplete() ? "response.incomplete" : "response.completed", json_object({{"response", response}}));
    }

    void stream_error(const ApiError& error, std::string& out) override {
        failed_ = true;
        event(out, "error",
              json_object({{"code", Json(std::to_string(error.status))},
                           {"message", Json(error.message)},
                           {"param", error.param.empty() ? Json() : Json(error.param)}}));
        Json response = c_.base;
        response.set("status", Json("failed"));
        response.set("error", json_object({{"code", Json(error.status >= 500 ? "server_error" : "invalid_prompt")},
                                           {"message", Json(error.message)}}));
        event(out, "response.failed", json_object({{"response", std::move(response)}}));
    }

    std::string response_body(const chat::ParsedChatOutput& output, std::string_view finish,
                              const UsageCounts& usage) override {
        finish_ = std::string(finish);
        if (!output.reasoning.empty()) {
            items_.push_back(new_item(Item::Kind::kReasoning));
            items_.back().text = output.reasoning;
        }
        if (!is_space(output.content) || output.tool_calls.empty()) {
            items_.push_back(new_item(Item::Kind::kMessage));
            items_.back().text = output.content;
        }
        for (const chat::ToolCall& call : output.tool_calls) {
            items_.push_back(new_item(Item::Kind::kCall));
            items_.back().call_id = call.id;
            items_.back().name = call.name;
            items_.back().text = call.arguments;
        }
        return finished_object(usage).dump();
    }

  private:
    bool incomplete() const { return finish_ == "length"; }
    bool has(Item::Kind kind) const {
        for (const Item& it : items_)
            if (it.kind == kind) return true;
        return false;
    }

    // "event: TYPE\ndata: {"type": TYPE, "sequence_number": N, ...payload}\n\n"
    void event(std::string& out, std::string_view type, const Json& payload) {
        Json e = json_object({{"type", Json(type)}, {"sequence_number", Json(seq_++)}});
        for (const auto& [k, v] : payload.as_object())
            e.set(k, v);
        out += "event: ";
        out += type;
        out += "\ndata: ";
        out += e.dump();
        out += "\n\n";
    }

    // The per-token events, without a JSON tree.
    void delta_event(std::string& out, std::string_view type, int index, bool in_part, std::string_view delta) {
        out += "event: ";
        out += type;
        out += "\ndata: {\"type\":\"";
        out += type;
        out += "\",\"sequence_number\":";
        out += std::to_string(seq_++);
        out += ",\"item_id\":";
        json_escape_to(out, items_[index].id);
        out += ",\"output_index\":";
        out += std::to_string(index);
        if (in_part) out += ",\"content_index\":0";
        out += ",\"delta\":";
        json_escape_to(out, delta);
        if (type == "response.output_text.delta") out += ",\"logprobs\":[]";
        out += "}\n\n";
    }

    // Text between a reasoning block and a call is mostly "\n\n" (Qwen's template puts it after </think>): a message
    // item of blanks only is left out, as in the non-streamed answer, so blanks wait until text follows them.
    void content_delta(const std::string& text, std::string& out) {
        const bool streaming_message = open_ >= 0 && items_[open_].kind == Item::Kind::kMessage;
        if (!streaming_message && is_space(text)) {
            held_space_ += text;
            return;
        }
        text_delta(Item::Kind::kMessage, held_space_.empty() ? text : std::exchange(held_space_, {}) + text, out);
    }

    void text_delta(Item::Kind kind, const std::string& text, std::string& out) {
        if (open_ < 0 || items_[open_].kind != kind) open(new_item(kind), out);
        items_[open_].text += text;
        delta_event(out,
                    kind == Item::Kind::kReasoning ? "response.reasoning_text.delta" : "response.output_text.delta",
                    open_, true, text);
    }

    Json indexed(int index, std::initializer_list<std::pair<const char*, Json>> rest) const {
        Json o = json_object({{"item_id", Json(items_[index].id)}, {"output_index", Json(index)}});
        for (const auto& [k, v] : rest)
            o.set(k, v);
        return o;
    }

    void open(Item it, std::string& out) {
        close(out);
        items_.push_back(std::move(it));
        open_ = static_cast<int>(items_.size()) - 1;
        const Item& added = items_.back();
        event(out, "response.output_item.added",
              json_object({{"output_index", Json(open_)}, {"item", item_json(added, false, false)}}));
        if (added.kind != Item::Kind::kCall)
            event(out, "response.content_part.added",
                  indexed(open_, {{"content_index", Json(0)}, {"part", part_json(added, false)}}));
    }

    void close(std::string& out) {
        if (open_ < 0) return;
        const int i = open_;
        const Item& it = items_[i];
        open_ = -1;
        switch (it.kind) {
            case Item::Kind::kReasoning:
                event(out, "response.reasoning_text.done",
                      indexed(i, {{"content_index", Json(0)}, {"text", Json(it.text)}}));
                break;
            case Item::Kind::kMessage:
                event(out, "response.output_text.done",
                      indexed(i, {{"content_index", Json(0)}, {"text", Json(it.text)}, {"logprobs", Json::array()}}));
                break;
            case Item::Kind::kCall:
                event(out, "response.function_call_arguments.done",
                      indexed(i, {{"name", Json(it.name)}, {"arguments", Json(it.text)}}));
                break;
        }
        if (it.kind != Item::Kind::kCall)
            event(out, "response.content_part.done",
                  indexed(i, {{"content_index", Json(0)}, {"part", part_json(it, true)}}));
        event(out, "response.output_item.done",
              json_object({{"output_index", Json(i)}, {"item", item_json(it, true, incomplete())}}));
    }

    // The response object with its outcome; kept in the store when the request asked for it.
    Json finished_object(const UsageCounts& u) {
        Json output = Json::array();
        std::string reasoning, content;
        Json calls = Json::array();
        for (const Item& it : items_) {
            output.push_back(item_json(it, true, incomplete()));
            if (it.kind == Item::Kind::kReasoning) reasoning += it.text;
            if (it.kind == Item::Kind::kMessage) content += it.text;
            if (it.kind == Item::Kind::kCall)
                calls.push_back(
                    json_object({{"id", Json(it.call_id)},
                                 {"type", Json("function")},
                                 {"function", json_object({{"name", Json(it.name)}, {"arguments", Json(it.text)}})}}));
        }
        // Reasoning tokens are counted by tokenizing the reasoning text again: the parsers work on text, and the
        // count differs from the generated one by at most a token at each edge of the block.
        const int64_t reasoning_tokens =
            reasoning.empty() || !c_.tokenizer ? 0 : static_cast<int64_t>(c_.tokenizer->encode(reasoning).size());
        Json usage =
            json_object({{"input_tokens", Json(u.prompt_tokens)},
                         {"input_tokens_details", json_object({{"cached_tokens", Json(u.cached_tokens)}})},
                         {"output_tokens", Json(u.completion_tokens)},
                         {"output_tokens_details",
                          json_object({{"reasoning_tokens", Json(std::min(reasoning_tokens, u.completion_tokens))}})},
                         {"total_tokens", Json(u.prompt_tokens + u.completion_tokens)}});
        Json response = c_.base;
        response.set("status", Json(incomplete() ? "incomplete" : "completed"));
        if (incomplete()) response.set("incomplete_details", json_object({{"reason", Json("max_output_tokens")}}));
        response.set("output", std::move(output));
        response.set("usage", std::move(usage));
        if (c_.store_to) {
            auto stored = std::make_shared<StoredResponse>();
            stored->response = response;
            stored->conversation = std::move(c_.conversation);
            Json assistant = json_object({{"role", Json("assistant")}, {"content", Json(content)}});
            if (!reasoning.empty()) assistant.set("reasoning_content", Json(reasoning));
            if (calls.size()) assistant.set("tool_calls", std::move(calls));
            stored->conversation.push_back(std::move(assistant));
            c_.store_to->put(response.find("id")->as_string(), std::move(stored));
        }
        return response;
    }

    ResponseContext c_;
    std::vector<Item> items_;
    std::vector<int> call_items_;  // the tool filter's call index -> item
    int open_ = -1;                // the item that streams now
    int64_t seq_ = 0;
    std::string finish_;
    std::string held_space_;  // blank content not streamed yet (content_delta)
    bool failed_ = false;
};

}  // namespace

Json response_base(const ResponsesRequest& r, const std::string& id, int64_t created_at, const std::string& model) {
    Json reasoning = json_object({{"effort", Json()}, {"summary", Json()}});
    if (r.reasoning.is_object())
        if (const Json* effort = r.reasoning.find("effort")) reasoning.set("effort", *effort);
    return json_object(
        {{"id", Json(id)},
         {"object", Json("response")},
         {"created_at", Json(created_at)},
         {"status", Json("in_progress")},
         {"background", Json(false)},
         {"error", Json()},
         {"incomplete_details", Json()},
         {"instructions", r.instructions},
         {"max_output_tokens", r.max_output_tokens},
         {"max_tool_calls", Json()},
         {"metadata", r.metadata.is_object() ? r.metadata : Json::object()},
         {"model", Json(model)},
         {"output", Json::array()},
         {"parallel_tool_calls", Json(r.parallel_tool_calls)},
         {"previous_response_id", r.previous_response_id.empty() ? Json() : Json(r.previous_response_id)},
         {"reasoning", std::move(reasoning)},
         {"service_tier", Json("default")},
         {"store", Json(r.store)},
         {"temperature", r.temperature},
         {"text", json_object({{"format", json_object({{"type", Json("text")}})}})},
         {"tool_choice", r.tool_choice.is_null() ? Json("auto") : r.tool_choice},
         {"tools", r.tools.is_array() ? r.tools : Json::array()},
         {"top_p", r.top_p},
         {"truncation", Json("disabled")},
         {"usage", Json()},
         {"user", r.user}});
}

std::unique_ptr<OutputSink> make_responses_sink(ResponseContext context) {
    return std::make_unique<ResponsesSink>(std::move(context));
}

}  // namespace pagoda::server::openai
