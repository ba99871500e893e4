// Fuzzes OpenAI request validation: any body must give a request or an ApiError with status 400, never a crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/check.h"
#include "common/json.h"
#include "server/openai/protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace pagoda;
    auto body = Json::parse(std::string_view(reinterpret_cast<const char*>(data), size));
    if (!body.ok()) return 0;
    server::openai::ChatRequest chat;
    if (auto err = server::openai::parse_chat_request(*body, chat)) PAGODA_CHECK(err->status == 400);
    server::openai::CompletionRequest completion;
    if (auto err = server::openai::parse_completion_request(*body, completion)) PAGODA_CHECK(err->status == 400);
    return 0;
}
