// A compiled Jinja template (our own interpreter, Jinja2 semantics as transformers configures them:
// trim_blocks, lstrip_blocks, loop controls, tojson/raise_exception/strftime_now/namespace).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace pagoda {
class Json;
}

namespace pagoda::jinja {

// Hostile templates hit these and fail with a clean error naming the template line.
struct Limits {
    int max_nesting_depth = 64;          // parser nesting (statements and expressions)
    int max_macro_depth = 64;            // nested macro calls
    int64_t max_steps = 1'000'000;       // loop iterations + macro calls per render
    size_t max_output_bytes = 16 << 20;  // rendered text, and any one string built while rendering
    size_t max_container_items = 1 << 22;
};

class Template {
  public:
    // Parse errors read "line:column: message".
    static Result<Template> parse(std::string_view source, const Limits& limits = {});

    // `context` is a JSON object whose members become template variables. Errors read "line N: message";
    // a template's raise_exception(msg) gives exactly `msg`.
    Result<std::string> render(const Json& context) const;

    Template(Template&&) noexcept;
    Template& operator=(Template&&) noexcept;
    ~Template();

  private:
    struct Impl;
    explicit Template(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace pagoda::jinja
