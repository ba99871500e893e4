// Fuzzes OpenAI request validation (chat, completions, responses): any body must give a request or an ApiError with
// status 400, never a crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/check.h"
#include "common/json.h"
#include "server/openai/protocol.h"
#include "server/openai/responses_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace pagoda;
    auto body = Json::parse(std::string_view(reinterpret_cast<const char*>(data), size));
    if (!body.ok()) return 0;
    server::openai::ChatRequest chat;
    if (auto err = server::openai::parse_chat_request(*body, chat)) PAGODA_CHECK(err->status == 400);
    server::openai::CompletionRequest completion;
    if (auto err = server::openai::parse_completion_request(*body, completion)) PAGODA_CHECK(err->status == 400);
    server::openai::ResponsesRequest responses;
    if (auto err = server::openai::parse_responses_request(*body, responses)) {
        PAGODA_CHECK(err->status == 400);
        return 0;
    }
    // Its input again as the stored history of a previous response: the path previous_response_id takes.
    Json no_history = Json::array();
    for (const Json* history : {&no_history, &responses.input_messages}) {
        server::openai::ChatRequest from_responses;
        if (auto err = server::openai::to_chat_request(responses, *history, from_responses))
            PAGODA_CHECK(err->status == 400);
    }
    return 0;
}
