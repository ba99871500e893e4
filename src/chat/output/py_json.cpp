// Python-compatible JSON serialisation (see py_json.h): the common writer with json.dumps' separators and floats.
#include "chat/output/py_json.h"

#include "common/json.h"

namespace pagoda::chat {

void py_json_dump_to(std::string& out, const Json& value) {
    JsonFormat python;
    python.item_separator = ", ";
    python.key_separator = ": ";
    python.python_floats = true;
    json_dump_to(out, value, python);
}

std::string py_json_dump(const Json& value) {
    std::string out;
    py_json_dump_to(out, value);
    return out;
}

}  // namespace pagoda::chat
