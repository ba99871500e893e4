// OpenAI-compatible request parsing and validation: JSON bodies of /v1/chat/completions and /v1/completions become
// typed requests (engine SamplingParams plus the text-level options the server applies), or an ApiError that names
// the offending field, as OpenAI and vLLM answer ({"error": {"message", "type", "param", "code"}}).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "engine/sampling_params.h"

namespace pagoda::server::openai {

struct ApiError {
    int status = 400;
    std::string message;
    std::string type = "BadRequestError";
    std::string param;  // the offending field ("messages[1].content"); empty = null

    static ApiError bad_request(std::string message, std::string param = {});
    static ApiError not_found(std::string message, std::string param = {});
    static ApiError unauthorized();
    static ApiError unavailable(std::string message);
};

// {"error": {"message", "type", "param", "code"}} with code = the HTTP status (as vLLM writes it).
std::string error_body(const ApiError& error);

// What the server does with the generated text (the engine works on token ids only).
struct TextOptions {
    std::vector<std::string> stop;
    bool include_stop_str_in_output = false;
    bool skip_special_tokens = true;
    bool stream = false;
    bool include_usage = false;           // stream_options.include_usage
    bool continuous_usage_stats = false;  // stream_options.continuous_usage_stats (vLLM)
};

// Structured output a request asks for (structured_output.h parses it and compiles its grammar).
struct StructuredOutputRequest {
    enum class Kind { kJsonSchema, kJsonObject, kRegex, kChoice, kGrammar };
    Kind kind = Kind::kJsonObject;
    Json schema;                       // kJsonSchema
    std::string text;                  // kRegex, kGrammar
    std::vector<std::string> choices;  // kChoice
    std::string param;                 // the request field it came from (for errors)
};

struct ChatRequest {
    std::string model;                 // empty: the first served name
    Json messages;                     // validated; text-part lists flattened to strings
    Json tools;                        // null or the validated array
    std::string tool_choice = "auto";  // none | auto | required | function (then tool_choice_name)
    std::string tool_choice_name;
    bool parallel_tool_calls = true;
    bool add_generation_prompt = true;
    bool continue_final_message = false;
    bool add_special_tokens = false;
    bool echo = false;  // prepend the last message's content (vLLM)
    bool include_reasoning = true;
    Json chat_template_kwargs;  // null or an object
    std::optional<std::string> chat_template;
    engine::SamplingParams params;
    int32_t priority = 0;
    std::string cache_salt;
    TextOptions text;
    std::optional<StructuredOutputRequest> structured;
};

struct Prompt {
    std::string text;             // when !is_tokens
    std::vector<int32_t> tokens;  // when is_tokens
    bool is_tokens = false;
};

struct CompletionRequest {
    std::string model;
    std::vector<Prompt> prompts;  // a string, a list of strings, a list of ids, or a list of lists of ids
    bool echo = false;
    bool add_special_tokens = true;
    engine::SamplingParams params;  // logprobs/top_logprobs from the integer `logprobs` field
    int32_t priority = 0;
    std::string cache_salt;
    TextOptions text;
    std::optional<StructuredOutputRequest> structured;
};

// Parse and validate a request body. Unknown fields are ignored (as vLLM does); null means absent.
std::optional<ApiError> parse_chat_request(const Json& body, ChatRequest& out);
std::optional<ApiError> parse_completion_request(const Json& body, CompletionRequest& out);

}  // namespace pagoda::server::openai
