// Internals shared by the tool-call parsers (not part of the public interface).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "chat/output/tool_parser.h"

namespace pagoda::chat {

// "call_" + 24 hex digits, from a splitmix64 stream (seeded for tests, random otherwise).
class CallIdGenerator {
  public:
    explicit CallIdGenerator(uint64_t seed);
    std::string next();

  private:
    uint64_t state_;
};

std::unique_ptr<ToolParser> make_hermes_parser(const ToolParserOptions& options);
std::unique_ptr<ToolParser> make_qwen3_coder_parser(const ToolParserOptions& options);

// The JSON value a qwen3_coder parameter's text becomes, by the type the tool's schema gives it
// (vLLM's Qwen3CoderToolParser._convert_param_value). `tools` may be null.
Json convert_xml_parameter(const Json* tools, std::string_view function, std::string_view param,
                           std::string_view value);

}  // namespace pagoda::chat
