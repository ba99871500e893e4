// The Responses API request (POST /v1/responses) as the openai SDK's client.responses.create() and the openai-agents
// SDK send it, turned into a chat request: input items become chat messages, flat function tools become chat tools,
// reasoning.effort becomes the template's enable_thinking. What runs is then the chat path (start_chat); what the
// response object echoes is kept here. Errors name the field as the client wrote it ("input[2].call_id").
#pragma once

#include <optional>
#include <string>

#include "common/json.h"
#include "server/openai/protocol.h"

namespace pagoda::server::openai {

struct ResponsesRequest {
    Json input_messages;  // this request's input as chat messages (no instructions): kept for previous_response_id
    std::string previous_response_id;
    bool store = true;
    bool stream = false;
    // The chat request's fields other than the messages (tools, tool_choice, sampling, chat_template_kwargs, ...),
    // as a chat completions body; to_chat_request adds the messages.
    Json chat_body;
    // Echoed in the response object: the request's own values (null when absent), in OpenAI's shapes.
    Json instructions, metadata, user, tools, tool_choice, reasoning, max_output_tokens, temperature, top_p;
    bool parallel_tool_calls = true;
};

std::optional<ApiError> parse_responses_request(const Json& body, ResponsesRequest& out);

// The chat request that runs `r`: its instructions, then `history` (the conversation stored with the previous
// response, chat messages; an empty array without one), then its input. A leading run of system messages becomes
// one (Qwen3.5's template refuses a system message after the first).
std::optional<ApiError> to_chat_request(const ResponsesRequest& r, const Json& history, ChatRequest& out);

}  // namespace pagoda::server::openai
