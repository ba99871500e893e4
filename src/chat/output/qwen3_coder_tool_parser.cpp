// The XML tool-call format of Qwen3-Coder and Qwen3.5 (vLLM's `qwen3_coder` parser):
//   <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n</function>\n</tool_call>
// Streaming sends id+name when "<function=NAME>" is complete, then "{", one `"key": value`
// fragment per finished parameter (converted by the tool's JSON schema) and "}", so the arguments
// read exactly as vLLM's json.dumps of the parameter dict. A bare "<function=…" without the
// wrapper is accepted too (vLLM's back-off), and a call cut off by the end of output is closed.
#include <optional>
#include <string>

#include "chat/output/py_json.h"
#include "chat/output/text_scan.h"
#include "chat/output/tool_parser_impl.h"
#include "common/json.h"

namespace pagoda::chat {
namespace {

constexpr std::string_view kCallOpen = "<tool_call>";
constexpr std::string_view kCallClose = "</tool_call>";
constexpr std::string_view kFuncOpen = "<function=";
constexpr std::string_view kFuncClose = "</function>";
constexpr std::string_view kParamOpen = "<parameter=";
constexpr std::string_view kParamClose = "</parameter>";
constexpr size_t kMaxNameBytes = 256;

class Qwen3CoderToolParser final : public ToolParser {
  public:
    explicit Qwen3CoderToolParser(const ToolParserOptions& options) : tools_(options.tools), ids_(options.id_seed) {}

    void feed(std::string_view chunk, ToolDelta& out) override {
        buf_.append(chunk);
        run(out, false);
    }

    void finish(ToolDelta& out) override {
        run(out, true);
        switch (state_) {
            case State::kText:
                flush_text(buf_, after_call_, out.content);
                break;
            case State::kBlockStart:
                out.content += raw_ + buf_;
                break;
            case State::kParamValue:
                value_ += buf_;
                finish_param(out);
                close_function(out);
                break;
            case State::kFuncBody:
            case State::kParamName:
                close_function(out);
                break;
            case State::kFuncName:
            case State::kAfterFunc:
                break;
        }
        buf_.clear();
        state_ = State::kText;
    }

    int calls_started() const override { return calls_; }
    int malformed_calls() const override { return malformed_; }

  private:
    enum class State { kText, kBlockStart, kFuncName, kFuncBody, kParamName, kParamValue, kAfterFunc };

    // Runs steps until one makes no progress (it waits for more text).
    void run(ToolDelta& out, bool at_end) {
        while (step(out, at_end)) {
        }
    }

    bool step(ToolDelta& out, bool at_end) {
        switch (state_) {
            case State::kText:
                return step_text(out, at_end);
            case State::kBlockStart:
                return step_block_start(out, at_end);
            case State::kFuncName:
                return step_func_name(out, at_end);
            case State::kFuncBody:
                return step_func_body(out, at_end);
            case State::kParamName:
                return step_param_name(at_end);
            case State::kParamValue:
                return step_param_value(out, at_end);
            case State::kAfterFunc:
                return step_after_func(at_end);
        }
        return false;
    }

    void consume(size_t n) { buf_.erase(0, n); }

    void begin_block(bool wrapped, std::string_view tag) {
        wrapped_ = wrapped;
        raw_ = std::string(tag);
        state_ = wrapped ? State::kBlockStart : State::kFuncName;
    }

    // Plain text up to a "<tool_call>" or a bare "<function=" (text_scan.h).
    bool step_text(ToolDelta& out, bool at_end) {
        static constexpr std::string_view kOpens[] = {kCallOpen, kFuncOpen};
        const std::optional<size_t> tag = take_text_until_call(buf_, kOpens, at_end, after_call_, out.content);
        if (!tag) return false;
        begin_block(*tag == 0, kOpens[*tag]);
        return true;
    }

    bool step_block_start(ToolDelta& out, bool at_end) {
        const size_t p = skip_json_space(buf_, 0);
        raw_.append(buf_, 0, p);
        consume(p);
        if (buf_.empty()) return false;
        if (match_at(buf_, 0, kFuncOpen) == TagMatch::kFull) {
            raw_ += kFuncOpen;
            consume(kFuncOpen.size());
            state_ = State::kFuncName;
            return true;
        }
        if (match_at(buf_, 0, kCallClose) == TagMatch::kFull) {  // an empty block: nothing to call, nothing to say
            consume(kCallClose.size());
            state_ = State::kText;
            after_call_ = true;
            return true;
        }
        if (!at_end &&
            (match_at(buf_, 0, kFuncOpen) == TagMatch::kPartial || match_at(buf_, 0, kCallClose) == TagMatch::kPartial))
            return false;
        // Not this format: what we held back is ordinary text.
        out.content += raw_;
        state_ = State::kText;
        after_call_ = false;
        return true;
    }

    // Reads NAME up to '>'; false with `ok` unset while it may still come.
    static bool read_name(std::string_view buf, bool at_end, std::string& name, bool& ok) {
        ok = false;
        const size_t limit = std::min(buf.size(), kMaxNameBytes + 1);
        for (size_t i = 0; i < limit; ++i) {
            const char c = buf[i];
            if (c == '>') {
                name = std::string(buf.substr(0, i));
                ok = !name.empty();
                return true;
            }
            if (c == '\n' || c == '<') return true;
        }
        return at_end || buf.size() > kMaxNameBytes;
    }

    bool step_func_name(ToolDelta& out, bool at_end) {
        bool ok = false;
        std::string name;
        if (!read_name(buf_, at_end, name, ok)) return false;
        if (!ok) {
            // vLLM raises on a function without a usable name and returns the text as content.
            ++malformed_;
            out.content += raw_;
            state_ = State::kText;
            after_call_ = false;
            return true;
        }
        consume(name.size() + 1);
        func_name_ = name;
        params_ = 0;
        out.tool_calls.push_back({calls_, ids_.next(), name, ""});
        out.tool_calls.push_back({calls_, "", "", "{"});
        ++calls_;
        state_ = State::kFuncBody;
        return true;
    }

    bool step_func_body(ToolDelta& out, bool at_end) {
        size_t hold = 0;
        const std::string_view tags[] = {kParamOpen, kFuncClose, wrapped_ ? kCallClose : std::string_view()};
        const TagAt f = find_earliest_tag(buf_, tags, hold);
        if (f.pos == std::string::npos) {
            consume(buf_.size() - (at_end ? 0 : hold));  // stray text between parameters is ignored
            return false;
        }
        consume(f.pos);
        if (f.which == 0) {
            consume(kParamOpen.size());
            state_ = State::kParamName;
            return true;
        }
        consume(f.which == 1 ? kFuncClose.size() : kCallClose.size());
        close_function(out);
        state_ = (f.which == 1 && wrapped_) ? State::kAfterFunc : State::kText;
        after_call_ = state_ == State::kText;
        return true;
    }

    bool step_param_name(bool at_end) {
        bool ok = false;
        std::string name;
        if (!read_name(buf_, at_end, name, ok)) return false;
        if (!ok) {
            ++malformed_;  // vLLM fails the whole output on a parameter without '>'
            state_ = State::kFuncBody;
            return true;
        }
        consume(name.size() + 1);
        param_name_ = name;
        value_.clear();
        state_ = State::kParamValue;
        return true;
    }

    bool step_param_value(ToolDelta& out, bool at_end) {
        size_t hold = 0;
        const std::string_view tags[] = {kParamClose, kParamOpen, kFuncClose,
                                         wrapped_ ? kCallClose : std::string_view()};
        const TagAt f = find_earliest_tag(buf_, tags, hold);
        if (f.pos == std::string::npos) {
            if (at_end) return false;  // finish() takes the rest
            value_.append(buf_, 0, buf_.size() - hold);
            consume(buf_.size() - hold);
            return false;
        }
        value_.append(buf_, 0, f.pos);
        consume(f.pos + (f.which == 0 ? kParamClose.size() : 0));
        finish_param(out);
        state_ = State::kFuncBody;
        return true;
    }

    bool step_after_func(bool at_end) {
        size_t hold = 0;
        static constexpr std::string_view kTags[] = {kCallClose, kFuncOpen};
        const TagAt f = find_earliest_tag(buf_, kTags, hold);
        if (f.pos == std::string::npos) {
            consume(buf_.size() - (at_end ? 0 : hold));
            return false;
        }
        if (f.which == 0) {
            consume(f.pos + kCallClose.size());
            state_ = State::kText;
            after_call_ = true;
        } else {
            consume(f.pos + kFuncOpen.size());
            raw_ = std::string(kFuncOpen);
            state_ = State::kFuncName;
        }
        return true;
    }

    void finish_param(ToolDelta& out) {
        std::string_view v = value_;
        if (!v.empty() && v.front() == '\n') v.remove_prefix(1);
        if (!v.empty() && v.back() == '\n') v.remove_suffix(1);
        std::string fragment = params_ > 0 ? ", " : "";
        json_escape_to(fragment, param_name_);
        fragment += ": ";
        py_json_dump_to(fragment, convert_xml_parameter(tools_, func_name_, param_name_, v));
        out.tool_calls.push_back({calls_ - 1, "", "", std::move(fragment)});
        ++params_;
        value_.clear();
    }

    void close_function(ToolDelta& out) { out.tool_calls.push_back({calls_ - 1, "", "", "}"}); }

    const Json* tools_;
    CallIdGenerator ids_;
    State state_ = State::kText;
    std::string buf_;    // bytes not yet consumed
    std::string raw_;    // text of the current block before its name was sent (given back on failure)
    std::string value_;  // the current parameter's raw value
    std::string func_name_;
    std::string param_name_;
    bool wrapped_ = false;
    bool after_call_ = false;
    int params_ = 0;
    int calls_ = 0;
    int malformed_ = 0;
};

}  // namespace

std::unique_ptr<ToolParser> make_qwen3_coder_parser(const ToolParserOptions& options) {
    return std::make_unique<Qwen3CoderToolParser>(options);
}

}  // namespace pagoda::chat
