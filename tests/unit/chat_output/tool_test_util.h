// Streams a text through a tool parser in a given chunking and gathers the result, checking the
// OpenAI delta shape on the way (id+name first, then argument fragments only).
#pragma once

#include <gtest/gtest.h>

#include "chat/output/tool_parser.h"
#include "chunking.h"

namespace pagoda::chat::testing {

struct Streamed {
    std::string content;
    std::vector<ToolCall> calls;
    int malformed = 0;
};

inline Streamed stream_tools(ToolParserKind kind, const Chunks& chunks, ToolParserOptions opt) {
    auto parser = make_tool_parser(kind, opt);
    Streamed s;
    ToolDelta d;
    std::vector<bool> seen;
    auto take = [&] {
        for (const ToolCallDelta& t : d.tool_calls) {
            EXPECT_GE(t.index, 0);
            if (static_cast<size_t>(t.index) >= seen.size()) {
                EXPECT_EQ(static_cast<size_t>(t.index), seen.size()) << "indices grow one at a time";
                seen.push_back(false);
            }
            if (!seen[static_cast<size_t>(t.index)]) {
                EXPECT_FALSE(t.id.empty()) << "first delta of a call carries the id";
                EXPECT_FALSE(t.name.empty()) << "first delta of a call carries the name";
                seen[static_cast<size_t>(t.index)] = true;
            } else {
                EXPECT_TRUE(t.id.empty());
                EXPECT_TRUE(t.name.empty());
            }
        }
        s.content += d.content;
        accumulate_tool_deltas(d.tool_calls, s.calls);
        d.clear();
    };
    for (auto c : chunks) {
        parser->feed(c, d);
        take();
    }
    parser->finish(d);
    take();
    s.malformed = parser->malformed_calls();
    EXPECT_EQ(parser->calls_started(), static_cast<int>(s.calls.size()));
    return s;
}

// All chunkings give the same streamed result (ids included: the seed is fixed); for outputs
// without malformed calls that is also the non-streaming result. Returns the non-streaming one.
inline ToolParseResult check_chunkings(ToolParserKind kind, std::string_view text, const Json* tools = nullptr) {
    ToolParserOptions opt;
    opt.tools = tools;
    opt.id_seed = 1234;
    const Streamed ref = stream_tools(kind, {text}, opt);
    for (const auto& chunks : all_chunkings(text)) {
        const Streamed s = stream_tools(kind, chunks, opt);
        EXPECT_EQ(s.content, ref.content) << "chunks: " << chunks.size();
        EXPECT_EQ(s.malformed, ref.malformed);
        EXPECT_EQ(s.calls.size(), ref.calls.size());
        if (s.calls.size() != ref.calls.size()) break;
        for (size_t i = 0; i < s.calls.size(); ++i) {
            EXPECT_EQ(s.calls[i].id, ref.calls[i].id);
            EXPECT_EQ(s.calls[i].name, ref.calls[i].name);
            EXPECT_EQ(s.calls[i].arguments, ref.calls[i].arguments) << "chunks: " << chunks.size();
        }
        if (::testing::Test::HasFailure()) break;
    }
    ToolParseResult whole = parse_tool_calls(kind, text, opt);
    if (ref.malformed == 0) {
        EXPECT_EQ(whole.content, ref.content);
        EXPECT_EQ(whole.calls.size(), ref.calls.size());
        for (size_t i = 0; i < whole.calls.size() && i < ref.calls.size(); ++i) {
            EXPECT_EQ(whole.calls[i].name, ref.calls[i].name);
            EXPECT_EQ(whole.calls[i].arguments, ref.calls[i].arguments);
            EXPECT_EQ(whole.calls[i].id.substr(0, 5), "call_");
            EXPECT_EQ(whole.calls[i].id.size(), 29u);
        }
    }
    return whole;
}

}  // namespace pagoda::chat::testing
