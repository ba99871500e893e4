// The Responses API's answer: the response object (non-streaming, and stored) and its server-sent events
// (response.created ... response.completed), formatted from what the chat job's parsers produce. Field names are
// the openai SDK's (openai/types/responses/): its typed parsing and its responses.stream() accumulator are the
// contract, so item ids stay the same from output_item.added to response.completed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/json.h"
#include "server/openai/completion_job.h"
#include "server/openai/response_store.h"
#include "server/openai/responses_protocol.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::server::openai {

struct ResponseContext {
    Json base;                             // the response object without its outcome (response_base)
    Json conversation;                     // history + this input, chat messages: stored with the output added
    ResponseStore* store_to = nullptr;     // null: store: false
    const Tokenizer* tokenizer = nullptr;  // counts the reasoning tokens of usage.output_tokens_details
};

// The response object's fields, echoing the request, with status "in_progress", no output and no usage yet.
Json response_base(const ResponsesRequest& r, const std::string& id, int64_t created_at, const std::string& model);

std::unique_ptr<OutputSink> make_responses_sink(ResponseContext context);

}  // namespace pagoda::server::openai
