// JSON text exactly as Python's json.dumps(value, ensure_ascii=False) writes it: vLLM builds
// tool-call argument strings that way, so clients see the same bytes from us as from vLLM.
#pragma once

#include <string>

namespace pagoda {
class Json;
}

namespace pagoda::chat {

// Appends `value` with ", " and ": " separators, floats as Python's repr(), NaN/Infinity as Python
// (common/json.h's writer in Python's format).
void py_json_dump_to(std::string& out, const Json& value);
std::string py_json_dump(const Json& value);

}  // namespace pagoda::chat
