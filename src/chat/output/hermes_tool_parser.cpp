// The `hermes` tool-call format of Qwen2.5/Qwen3: <tool_call>\n{"name": N, "arguments": {...}}\n</tool_call>.
// Streaming follows a strict lexical path ({"name": "...", "arguments": VALUE}) so the name is
// sent as soon as it is complete and the arguments are forwarded byte for byte as the model
// writes them (they are already JSON). Anything off that path before the name was sent is
// buffered to the end tag and judged whole: a valid JSON call is sent re-serialised as vLLM does
// (json.dumps), anything else goes out as content.
#include <algorithm>
#include <string>

#include "chat/output/py_json.h"
#include "chat/output/text_scan.h"
#include "chat/output/tool_parser_impl.h"
#include "common/json.h"

namespace pagoda::chat {
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
constexpr size_t kMaxNameBytes = 1024;

// A call body (between the tags) vLLM would accept: a JSON object with "name" and "arguments".
const Json* valid_call(const Result<Json>& parsed) {
    if (!parsed.ok() || !parsed->is_object()) return nullptr;
    const Json* name = parsed->find("name");
    if (name == nullptr || !name->is_string() || name->as_string().empty()) return nullptr;
    if (parsed->find("arguments") == nullptr) return nullptr;
    return &parsed.value();
}

class HermesToolParser final : public ToolParser {
  public:
    explicit HermesToolParser(const ToolParserOptions& options) : ids_(options.id_seed) {}

    void feed(std::string_view chunk, ToolDelta& out) override {
        if (state_ == State::kText) {
            text_.append(chunk);
        } else {
            body_.append(chunk);
        }
        run(out, false);
    }

    void finish(ToolDelta& out) override {
        run(out, true);
        switch (state_) {
            case State::kText:
                flush_text(text_, after_call_, out.content);
                break;
            case State::kPreName:
            case State::kBuffered:
                judge_buffered(out, /*closed=*/false);
                break;
            case State::kPreArgs:
            case State::kArgs:
            case State::kTrailing:
                close_streamed(out, body_);
                break;
        }
        state_ = State::kText;
    }

    int calls_started() const override { return calls_; }
    int malformed_calls() const override { return malformed_; }

  private:
    enum class State { kText, kPreName, kPreArgs, kArgs, kBuffered, kTrailing };
    // Steps of the strict prefix {"name": "…", "arguments": before the value.
    static constexpr std::string_view kNameKey = "\"name\"";
    static constexpr std::string_view kArgsKey = "\"arguments\"";

    // Runs steps until one makes no progress (it waits for more text).
    void run(ToolDelta& out, bool at_end) {
        while (step(out, at_end)) {
        }
    }

    bool step(ToolDelta& out, bool at_end) {
        switch (state_) {
            case State::kText:
                return step_text(out, at_end);
            case State::kPreName:
                return step_pre_name(out, at_end);
            case State::kPreArgs:
                return step_pre_args(at_end);
            case State::kArgs:
                return step_args(out, at_end);
            case State::kTrailing:
                return step_trailing(out);
            case State::kBuffered:
                return step_buffered(out);
        }
        return false;
    }

    // Plain text up to a "<tool_call>" (text_scan.h).
    bool step_text(ToolDelta& out, bool at_end) {
        static constexpr std::string_view kOpens[] = {kOpen};
        if (!take_text_until_call(text_, kOpens, at_end, after_call_, out.content)) return false;
        start_call(std::move(text_));  // what follows the tag
        return true;
    }

    void start_call(std::string rest) {
        body_ = std::move(rest);
        text_.clear();
        pos_ = 0;
        step_ = 0;
        name_start_ = 0;
        args_start_ = args_sent_ = 0;
        state_ = State::kPreName;
    }

    // Skips whitespace; false when the body ran out.
    bool skip_space() {
        pos_ = skip_json_space(body_, pos_);
        return pos_ < body_.size();
    }

    // Matches `lit` at pos_: 1 matched (consumed), 0 need more bytes, -1 mismatch.
    int expect(std::string_view lit) {
        const TagMatch m = match_at(body_, pos_, lit);
        if (m == TagMatch::kFull) {
            pos_ += lit.size();
            return 1;
        }
        return m == TagMatch::kPartial ? 0 : -1;
    }

    bool step_pre_name(ToolDelta& out, bool at_end) {
        // step_: 0 '{', 1 "name", 2 ':', 3 opening quote, 4 inside the name string.
        while (step_ < 4) {
            if (!skip_space()) return false;
            static constexpr std::string_view kSteps[] = {"{", kNameKey, ":", "\""};
            const int r = expect(kSteps[step_]);
            if (r < 0 || (r == 0 && at_end)) return to_buffered();
            if (r == 0) return false;
            if (step_ == 3) name_start_ = pos_ - 1;
            ++step_;
        }
        bool escaped = false;
        for (; pos_ < body_.size(); ++pos_) {
            const char c = body_[pos_];
            if (pos_ - name_start_ > kMaxNameBytes || c == '\n' || c == '<') return to_buffered();
            if (escaped) {
                escaped = false;
            } else if (c == '\\') {
                escaped = true;
            } else if (c == '"') {
                break;
            }
        }
        if (pos_ >= body_.size()) {
            // Restart the string scan next time from its opening quote (escapes need context).
            pos_ = name_start_ + 1;
            return at_end ? to_buffered() : false;
        }
        ++pos_;
        auto name = Json::parse(std::string_view(body_).substr(name_start_, pos_ - name_start_));
        if (!name.ok() || !name->is_string() || name->as_string().empty()) return to_buffered();
        out.tool_calls.push_back({calls_, ids_.next(), name->as_string(), ""});
        ++calls_;
        state_ = State::kPreArgs;
        step_ = 0;
        return true;
    }

    bool step_pre_args(bool at_end) {
        // step_: 0 ',', 1 "arguments", 2 ':', then the value starts.
        while (step_ < 3) {
            if (!skip_space()) return false;
            static constexpr std::string_view kSteps[] = {",", kArgsKey, ":"};
            const int r = expect(kSteps[step_]);
            if (r < 0 || (r == 0 && at_end)) {
                state_ = State::kTrailing;  // no streamable arguments; judged at the end tag
                return true;
            }
            if (r == 0) return false;
            ++step_;
        }
        if (!skip_space()) return false;
        args_start_ = args_sent_ = pos_;
        depth_ = 0;
        in_string_ = escaped_ = false;
        state_ = State::kArgs;
        return true;
    }

    // Scans the arguments value lexically (strings, nesting) and forwards its bytes. The end tag
    // ends the call anywhere, even inside a string, as vLLM's regex does.
    bool step_args(ToolDelta& out, bool at_end) {
        const char first = body_[args_start_];
        const bool container = first == '{' || first == '[';
        const bool string_value = first == '"';
        bool done = false;
        bool cut = false;  // the end tag arrived before the value was complete
        while (pos_ < body_.size()) {
            const char c = body_[pos_];
            if (c == '<') {
                const TagMatch m = match_at(body_, pos_, kClose);
                if (m == TagMatch::kFull) {
                    cut = true;
                    break;
                }
                if (m == TagMatch::kPartial && !at_end) break;
            }
            if (!container && !string_value && pos_ > args_start_ &&
                (is_json_space(c) || c == ',' || c == '}' || c == ']')) {
                done = true;  // end of a number/true/false/null
                break;
            }
            ++pos_;
            if (in_string_) {
                if (escaped_) {
                    escaped_ = false;
                } else if (c == '\\') {
                    escaped_ = true;
                } else if (c == '"') {
                    in_string_ = false;
                    if (string_value) {
                        done = true;
                        break;
                    }
                }
            } else if (c == '"') {
                in_string_ = true;
            } else if (c == '{' || c == '[') {
                ++depth_;
            } else if (c == '}' || c == ']') {
                if (--depth_ == 0 && container) {
                    done = true;
                    break;
                }
            }
        }
        if (pos_ > args_sent_) {
            out.tool_calls.push_back({calls_ - 1, "", "", body_.substr(args_sent_, pos_ - args_sent_)});
            args_sent_ = pos_;
        }
        if (done || cut) {
            state_ = State::kTrailing;
            return true;
        }
        return false;
    }

    // After the arguments: everything up to the end tag is skipped; the call is judged whole.
    bool step_trailing(ToolDelta& out) {
        const size_t close = body_.find(kClose, pos_);
        if (close == std::string::npos) {
            pos_ = std::max(resume_search_at(body_.size(), kClose), args_sent_);
            return false;
        }
        const std::string rest = body_.substr(close + kClose.size());
        close_streamed(out, std::string_view(body_).substr(0, close));
        text_ = rest;
        return true;
    }

    void close_streamed(ToolDelta& out, std::string_view body) {
        if (args_sent_ == args_start_) out.tool_calls.push_back({calls_ - 1, "", "", "{}"});  // none sent
        if (valid_call(Json::parse(body)) == nullptr) ++malformed_;
        state_ = State::kText;
        after_call_ = true;
        body_.clear();
    }

    bool to_buffered() {
        state_ = State::kBuffered;
        pos_ = 0;
        return true;
    }

    bool step_buffered(ToolDelta& out) {
        const size_t close = body_.find(kClose, pos_);
        if (close == std::string::npos) {
            pos_ = resume_search_at(body_.size(), kClose);
            return false;
        }
        const std::string rest = body_.substr(close + kClose.size());
        body_.resize(close);
        judge_buffered(out, /*closed=*/true);
        text_ = rest;
        return true;
    }

    // A call that left the strict path: sent whole if it is valid JSON, else given back as text.
    void judge_buffered(ToolDelta& out, bool closed) {
        auto parsed = Json::parse(body_);
        if (const Json* call = valid_call(parsed)) {
            out.tool_calls.push_back({calls_, ids_.next(), call->find("name")->as_string(), ""});
            out.tool_calls.push_back({calls_, "", "", py_json_dump(*call->find("arguments"))});
            ++calls_;
            after_call_ = true;
        } else {
            ++malformed_;
            out.content += kOpen;
            out.content += body_;
            if (closed) out.content += kClose;
            after_call_ = false;
        }
        body_.clear();
        state_ = State::kText;
    }

    CallIdGenerator ids_;
    State state_ = State::kText;
    std::string text_;  // unsent plain text (kText)
    std::string body_;  // bytes after "<tool_call>" of the current call
    size_t pos_ = 0;    // scan position in body_
    int step_ = 0;
    size_t name_start_ = 0;
    size_t args_start_ = 0;
    size_t args_sent_ = 0;  // 0 until the arguments value started
    int depth_ = 0;
    bool in_string_ = false;
    bool escaped_ = false;
    bool after_call_ = false;
    int calls_ = 0;
    int malformed_ = 0;
};

}  // namespace

std::unique_ptr<ToolParser> make_hermes_parser(const ToolParserOptions& options) {
    return std::make_unique<HermesToolParser>(options);
}

}  // namespace pagoda::chat
