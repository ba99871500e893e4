// The XML tool-call format of Qwen3-Coder and Qwen3.5 (vLLM's `qwen3_coder` parser):
//   <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n</function>\n</tool_call>
// Streaming sends id+name when "<function=NAME>" is complete, then "{", one `"key": value`
// fragment per finished parameter (converted by the tool's JSON schema) and "}", so the arguments
// read exactly as vLLM's json.dumps of the parameter dict. A bare "<function=…" without the
// wrapper is accepted too (vLLM's back-off), and a call cut off by the end of output is closed.
#include <array>
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

struct Found {
    size_t pos = std::string::npos;
    size_t which = 0;
};

// The earliest complete tag in `text`, and how many trailing bytes could start one.
template <size_t N>
Found find_first(std::string_view text, const std::array<std::string_view, N>& tags, size_t& hold) {
    Found best;
    hold = 0;
    for (size_t i = 0; i < N; ++i) {
        if (tags[i].empty()) continue;
        const size_t p = text.find(tags[i]);
        if (p < best.pos) best = {p, i};
        hold = std::max(hold, partial_tag_suffix(text, tags[i]));
    }
    return best;
}

bool starts_with(std::string_view text, std::string_view tag) {
    return text.substr(0, tag.size()) == tag;
}
bool is_tag_prefix(std::string_view text, std::string_view tag) {
    return text.size() < tag.size() && tag.substr(0, text.size()) == text;
}

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
                if (!(after_call_ && is_blank(buf_))) out.content += buf_;
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

    void run(ToolDelta& out, bool at_end) {
        for (;;) {
            bool progressed = false;
            switch (state_) {
                case State::kText:
                    progressed = step_text(out, at_end);
                    break;
                case State::kBlockStart:
                    progressed = step_block_start(out, at_end);
                    break;
                case State::kFuncName:
                    progressed = step_func_name(out, at_end);
                    break;
                case State::kFuncBody:
                    progressed = step_func_body(out, at_end);
                    break;
                case State::kParamName:
                    progressed = step_param_name(at_end);
                    break;
                case State::kParamValue:
                    progressed = step_param_value(out, at_end);
                    break;
                case State::kAfterFunc:
                    progressed = step_after_func(at_end);
                    break;
            }
            if (!progressed) return;
        }
    }

    void consume(size_t n) { buf_.erase(0, n); }

    void begin_block(bool wrapped, std::string_view tag) {
        wrapped_ = wrapped;
        raw_ = std::string(tag);
        state_ = wrapped ? State::kBlockStart : State::kFuncName;
    }

    bool step_text(ToolDelta& out, bool at_end) {
        if (after_call_) {
            size_t p = 0;
            while (p < buf_.size() && is_json_space(buf_[p]))
                ++p;
            if (p == buf_.size()) return false;
            const std::string_view rest = std::string_view(buf_).substr(p);
            for (std::string_view tag : {kCallOpen, kFuncOpen}) {
                if (starts_with(rest, tag)) {
                    consume(p + tag.size());
                    begin_block(tag == kCallOpen, tag);
                    return true;
                }
                if (is_tag_prefix(rest, tag) && !at_end) return false;
            }
            after_call_ = false;
        }
        size_t hold = 0;
        const Found f = find_first<2>(buf_, {kCallOpen, kFuncOpen}, hold);
        if (f.pos != std::string::npos) {
            out.content.append(buf_, 0, f.pos);
            const std::string_view tag = f.which == 0 ? kCallOpen : kFuncOpen;
            consume(f.pos + tag.size());
            begin_block(f.which == 0, tag);
            return true;
        }
        if (at_end) hold = 0;
        out.content.append(buf_, 0, buf_.size() - hold);
        consume(buf_.size() - hold);
        return false;
    }

    bool step_block_start(ToolDelta& out, bool at_end) {
        size_t p = 0;
        while (p < buf_.size() && is_json_space(buf_[p]))
            ++p;
        raw_.append(buf_, 0, p);
        consume(p);
        if (buf_.empty()) return false;
        if (starts_with(buf_, kFuncOpen)) {
            raw_ += kFuncOpen;
            consume(kFuncOpen.size());
            state_ = State::kFuncName;
            return true;
        }
        if (starts_with(buf_, kCallClose)) {  // an empty block: nothing to call, nothing to say
            consume(kCallClose.size());
            state_ = State::kText;
            after_call_ = true;
            return true;
        }
        if (!at_end && (is_tag_prefix(buf_, kFuncOpen) || is_tag_prefix(buf_, kCallClose))) return false;
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
        const Found f = find_first<3>(buf_, {kParamOpen, kFuncClose, wrapped_ ? kCallClose : std::string_view()}, hold);
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
        const Found f = find_first<4>(
            buf_, {kParamClose, kParamOpen, kFuncClose, wrapped_ ? kCallClose : std::string_view()}, hold);
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
        const Found f = find_first<2>(buf_, {kCallClose, kFuncOpen}, hold);
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
