// Tokenizer behaviour on a tiny hand-built vocabulary; expectations are HF tokenizers 0.23.3's
// output on the same tokenizer.json (tiny_tokenizer.h).
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/json.h"
#include "tiny_tokenizer.h"

namespace pagoda {
namespace {

using Ids = std::vector<int32_t>;

Tokenizer tiny() {
    auto t = Tokenizer::from_tokenizer_json(test::tiny_tokenizer_files().tokenizer_json);
    EXPECT_TRUE(t.ok()) << t.message();
    return std::move(t).value();
}

TEST(Tokenizer, MergesByRankAndLeftmostFirst) {
    const Tokenizer t = tiny();
    EXPECT_EQ(t.encode("hello world"), (Ids{259, 264}));
    EXPECT_EQ(t.encode("aaaaa"), (Ids{265, 265, 97}));  // overlapping pairs: leftmost first
    EXPECT_EQ(t.encode("HELLO'S 'll"), (Ids{72, 69, 76, 76, 79, 39, 83, 32, 39, 256}));
    EXPECT_EQ(t.encode(""), Ids{});
}

TEST(Tokenizer, AddedTokensAndParseSpecial) {
    const Tokenizer t = tiny();
    EXPECT_EQ(t.encode("hi<|end|>there<x>"), (Ids{104, 105, 266, 116, 257, 114, 101, 267}));
    // HF's encode_special_tokens=True: special tokens become text, non-special added ones still match.
    EXPECT_EQ(t.encode("hi<|end|>there<x>", /*parse_special=*/false),
              (Ids{104, 105, 60, 124, 101, 110, 100, 124, 62, 116, 257, 114, 101, 267}));
    EXPECT_TRUE(t.is_special(266));
    EXPECT_FALSE(t.is_special(267));
    EXPECT_EQ(t.token_to_id("<|end|>"), 266);
    EXPECT_EQ(t.token_to_id("\xC4\xA0world"), 264);
    EXPECT_EQ(t.token_to_id("nope"), std::nullopt);
}

TEST(Tokenizer, NfcBeforeBpe) {
    const Tokenizer t = tiny();
    EXPECT_EQ(t.encode("e\xCC\x81"), (Ids{195, 169}));  // e + U+0301 composes to U+00E9
    EXPECT_EQ(t.encode("\xC3\xA9"), (Ids{195, 169}));
}

TEST(Tokenizer, InvalidUtf8BecomesReplacementCharacter) {
    const Tokenizer t = tiny();
    EXPECT_EQ(t.encode("\xC3("), (Ids{239, 191, 189, 40}));  // HF on "\uFFFD("
    EXPECT_EQ(t.encode("\xEF\xBF\xBD("), (Ids{239, 191, 189, 40}));
}

TEST(Tokenizer, Decode) {
    const Tokenizer t = tiny();
    const Ids ids{259, 266, 264};
    EXPECT_EQ(t.decode(ids, false).value(), "hello<|end|> world");
    EXPECT_EQ(t.decode(ids, true).value(), "hello world");
    EXPECT_EQ(t.decode(Ids{0xC3, 0x41}).value(),
              "\xEF\xBF\xBD"
              "A");
}

TEST(Tokenizer, DecodeRejectsOutOfRangeIds) {
    const Tokenizer t = tiny();
    EXPECT_EQ(t.vocab_size(), 268);
    auto r = t.decode(Ids{1, 268});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.message().find("268"), std::string::npos) << r.message();
    EXPECT_FALSE(t.decode(Ids{-1}).ok());
}

TEST(IncrementalDecoder, HoldsSplitSequencesAndMatchesDecode) {
    const Tokenizer t = tiny();
    IncrementalDecoder d(t);
    std::string out;
    ASSERT_TRUE(d.push(259, out).ok());
    EXPECT_EQ(out, "hello");
    ASSERT_TRUE(d.push(0xF0, out).ok());  // first byte of U+1F600
    ASSERT_TRUE(d.push(0x9F, out).ok());
    ASSERT_TRUE(d.push(0x98, out).ok());
    EXPECT_EQ(out, "hello");  // nothing final yet
    ASSERT_TRUE(d.push(0x80, out).ok());
    EXPECT_EQ(out, "hello\xF0\x9F\x98\x80");
    ASSERT_TRUE(d.push(0xE2, out).ok());
    ASSERT_TRUE(d.push(0x41, out).ok());  // breaks the sequence: U+FFFD then "A"
    EXPECT_EQ(out,
              "hello\xF0\x9F\x98\x80\xEF\xBF\xBD"
              "A");
    ASSERT_TRUE(d.push(0xC3, out).ok());
    EXPECT_FALSE(d.push(9999, out).ok());
    d.finish(out);  // an unfinished sequence at the end is U+FFFD, as decode gives
    const Ids all{259, 0xF0, 0x9F, 0x98, 0x80, 0xE2, 0x41, 0xC3};
    EXPECT_EQ(out, t.decode(all).value());
}

TEST(IncrementalDecoder, SkipsSpecialTokens) {
    const Tokenizer t = tiny();
    IncrementalDecoder d(t, /*skip_special_tokens=*/true);
    std::string out;
    for (int32_t id : {259, 266, 264, 267})
        ASSERT_TRUE(d.push(id, out).ok());
    d.finish(out);
    EXPECT_EQ(out, "hello world<x>");
}

TEST(TokenizerLoading, VocabAndMergesGiveTheSameIds) {
    const auto f = test::tiny_tokenizer_files();
    auto a = Tokenizer::from_vocab_and_merges(f.vocab_json, f.merges_txt, f.config_json);
    ASSERT_TRUE(a.ok()) << a.message();
    const Tokenizer b = tiny();
    for (const char* s : {"hello world", "aaaaa", "hi<|end|>there<x>", "e\xCC\x81 x\n\n  y"})
        EXPECT_EQ(a->encode(s), b.encode(s)) << s;
}

TEST(TokenizerLoading, LoadsFromADirectory) {
    const auto dir = std::filesystem::temp_directory_path() / ("pagoda_tok_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const auto f = test::tiny_tokenizer_files();
    std::ofstream(dir / "vocab.json") << f.vocab_json;
    std::ofstream(dir / "merges.txt") << f.merges_txt;
    auto from_files = Tokenizer::load_from_dir(dir.string());
    ASSERT_TRUE(from_files.ok()) << from_files.message();
    EXPECT_EQ(from_files->encode("hello world"), (Ids{259, 264}));
    std::ofstream(dir / "tokenizer.json") << f.tokenizer_json;
    auto from_json = Tokenizer::load_from_dir(dir.string());
    ASSERT_TRUE(from_json.ok()) << from_json.message();
    EXPECT_EQ(from_json->encode("hi<|end|>"), (Ids{104, 105, 266}));
    std::filesystem::remove_all(dir);
}

TEST(TokenizerLoading, ErrorsSayWhatIsWrong) {
    auto missing = Tokenizer::load_from_dir("/nonexistent/dir");
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.message().find("/nonexistent/dir"), std::string::npos);

    auto unknown = Tokenizer::from_tokenizer_json(test::tiny_tokenizer_files("\\w+|\\s+").tokenizer_json);
    ASSERT_FALSE(unknown.ok());
    EXPECT_NE(unknown.message().find("unsupported pre-tokenizer regex"), std::string::npos) << unknown.message();

    auto broken = Tokenizer::from_tokenizer_json("{\"model\": ");
    ASSERT_FALSE(broken.ok());
    EXPECT_NE(broken.message().find("tokenizer.json"), std::string::npos);

    auto f = test::tiny_tokenizer_files();
    auto bad_merge = Tokenizer::from_vocab_and_merges(f.vocab_json, f.merges_txt + "q zz\n", "");
    ASSERT_FALSE(bad_merge.ok());
    EXPECT_NE(bad_merge.message().find("not in the vocabulary"), std::string::npos) << bad_merge.message();
}

// tokenizer.json's TemplateProcessing (Qwen3-Embedding appends <|endoftext|> with one, inside a Sequence after
// ByteLevel): the ids around one sequence, which HF adds with add_special_tokens and encode() leaves to the caller.
TEST(TokenizerLoading, TemplateProcessingGivesTheSpecialTokensAroundASequence) {
    const std::string plain_json = test::tiny_tokenizer_files().tokenizer_json;
    auto plain = Tokenizer::from_tokenizer_json(plain_json);
    ASSERT_TRUE(plain.ok()) << plain.message();
    EXPECT_TRUE(plain->special_prefix().empty());
    EXPECT_TRUE(plain->special_suffix().empty());

    auto with_template = [&](const std::string& processor) {
        auto doc = Json::parse(plain_json);
        EXPECT_TRUE(doc.ok());
        auto p = Json::parse(processor);
        EXPECT_TRUE(p.ok()) << processor;
        doc->set("post_processor", std::move(p).value());
        return Tokenizer::from_tokenizer_json(doc->dump());
    };
    const std::string specials =
        R"("special_tokens": {"<s>": {"id": "<s>", "ids": [7]}, "</s>": {"id": "</s>", "ids": [8, 9]}})";
    auto t = with_template(R"({"type": "Sequence", "processors": [{"type": "ByteLevel"}, {"type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<s>"}}, {"Sequence": {"id": "A"}}, {"SpecialToken": {"id": "</s>"}}],)" +
                           specials + "}]}");
    ASSERT_TRUE(t.ok()) << t.message();
    EXPECT_EQ(std::vector<int32_t>(t->special_prefix().begin(), t->special_prefix().end()), std::vector<int32_t>{7});
    EXPECT_EQ(std::vector<int32_t>(t->special_suffix().begin(), t->special_suffix().end()),
              (std::vector<int32_t>{8, 9}));
    EXPECT_EQ(t->encode("hello"), plain->encode("hello"));  // encode() itself adds nothing

    auto unknown = with_template(R"({"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A"}},
        {"SpecialToken": {"id": "<eos>"}}], )" +
                                 specials + "}");
    ASSERT_FALSE(unknown.ok());
    EXPECT_NE(unknown.message().find("<eos>"), std::string::npos) << unknown.message();
    auto other = with_template(R"({"type": "BertProcessing"})");
    ASSERT_FALSE(other.ok());
    EXPECT_NE(other.message().find("BertProcessing"), std::string::npos) << other.message();
}

}  // namespace
}  // namespace pagoda

namespace pagoda {
namespace {

// One tokenizer shared by several threads (as the HTTP threads share it) gives each the same ids as
// a single thread does; the per-thread caches must not leak between threads.
TEST(Tokenizer, ConcurrentEncodesAgree) {
    const Tokenizer t = tiny();
    const std::vector<std::string> texts = {"hello world", "aaaaa aaa", "hi<|end|>there<x>", "e\xCC\x81 \xC3(",
                                            "  hello\n\n world  "};
    std::vector<Ids> want;
    for (const auto& s : texts)
        want.push_back(t.encode(s));
    std::vector<std::thread> threads;
    std::atomic<int> mismatches{0};
    for (int k = 0; k < 4; ++k) {
        threads.emplace_back([&, k] {
            for (int round = 0; round < 500; ++round) {
                const size_t i = static_cast<size_t>(round + k) % texts.size();
                if (t.encode(texts[i]) != want[i]) ++mismatches;
            }
        });
    }
    for (auto& th : threads)
        th.join();
    EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace pagoda
