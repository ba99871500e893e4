// A tiny byte-level BPE tokenizer.json for unit tests: the 256 byte tokens (id = byte value), ten
// merges, and two added tokens. Expected ids in the tests come from HF tokenizers 0.23.3 run on this
// same file (see the comment at each expectation).
#pragma once

#include <string>

#include "tokenizer/bpe.h"
#include "tokenizer/pretokenizer.h"

namespace pagoda::test {

inline std::string json_quote(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out + "\"";
}

struct TinyFiles {
    std::string vocab_json, merges_txt, config_json, tokenizer_json;
};

inline TinyFiles tiny_tokenizer_files(const std::string& split_regex = std::string(tokenizer_internal::kQwen2Pattern)) {
    const std::pair<const char*, const char*> merges[] = {
        {"l", "l"}, {"h", "e"},          {"he", "ll"},         {"hell", "o"},         {"\xC4\xA0", "w"},
        {"o", "r"}, {"\xC4\xA0w", "or"}, {"\xC4\xA0wor", "l"}, {"\xC4\xA0worl", "d"}, {"a", "a"},
    };
    std::string vocab = "{", merge_list = "[", merges_txt = "#version: 0.2\n";
    int id = 0;
    for (int b = 0; b < 256; ++b, ++id) {
        const std::string tok = tokenizer_internal::byte_level_encode(std::string(1, static_cast<char>(b)));
        vocab += (b ? "," : "") + json_quote(tok) + ":" + std::to_string(id);
    }
    for (const auto& [a, b] : merges) {
        vocab += "," + json_quote(std::string(a) + b) + ":" + std::to_string(id++);
        merge_list += std::string(merge_list.size() > 1 ? "," : "") + "[" + json_quote(a) + "," + json_quote(b) + "]";
        merges_txt += std::string(a) + " " + b + "\n";
    }
    vocab += "}";
    merge_list += "]";
    const std::string added =
        R"([{"id":266,"content":"<|end|>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true},)"
        R"({"id":267,"content":"<x>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":false}])";
    TinyFiles f;
    f.vocab_json = vocab;
    f.merges_txt = merges_txt;
    f.config_json =
        R"({"added_tokens_decoder":{"266":{"content":"<|end|>","lstrip":false,"normalized":false,"rstrip":false,"single_word":false,"special":true},)"
        R"("267":{"content":"<x>","lstrip":false,"normalized":false,"rstrip":false,"single_word":false,"special":false}}})";
    f.tokenizer_json =
        R"({"version":"1.0","added_tokens":)" + added + R"(,"normalizer":{"type":"NFC"},)" +
        R"("pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":)" +
        json_quote(split_regex) + R"(},"behavior":"Isolated","invert":false},)" +
        R"({"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":false}]},)" +
        R"("post_processor":{"type":"ByteLevel"},"decoder":{"type":"ByteLevel"},)" +
        R"("model":{"type":"BPE","dropout":null,"unk_token":null,"continuing_subword_prefix":"","end_of_word_suffix":"",)" +
        R"("fuse_unk":false,"byte_fallback":false,"ignore_merges":false,"vocab":)" + vocab + R"(,"merges":)" +
        merge_list + "}}";
    return f;
}

}  // namespace pagoda::test
