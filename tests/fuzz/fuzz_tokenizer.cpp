// libFuzzer target for the tokenizer. Input byte 0 picks the mode:
//  even: encode the rest as text (any bytes; invalid UTF-8 is replaced by U+FFFD, the documented
//        behaviour), check every id is valid, and that decoding gives valid UTF-8 (and the text itself
//        when it is plain ASCII without '<', i.e. no added token and nothing NFC changes);
//  odd:  read the rest as int32 ids (some out of range) and check that the streaming detokenizer
//        gives exactly what decode gives, or that both refuse the same input.
// Uses the real Qwen3 vocabulary when $PAGODA_SHARED_DIR (default: ../shared beside the source tree)
// has it, else a tiny built-in vocabulary.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../unit/tokenizer/tiny_tokenizer.h"
#include "common/check.h"
#include "common/utf8.h"
#include "tokenizer/tokenizer.h"

namespace {

pagoda::Tokenizer load() {
    std::string shared;
    if (const char* env = std::getenv("PAGODA_SHARED_DIR")) {
        shared = env;
    } else {
        std::string here = __FILE__;  // <root>/tests/fuzz/fuzz_tokenizer.cpp
        shared = here.substr(0, here.rfind("/tests/fuzz/")) + "/../shared";
    }
    auto real = pagoda::Tokenizer::load_from_dir(shared + "/qwen-tokenizers/qwen3-4b");
    if (real.ok()) return std::move(real).value();
    auto tiny = pagoda::Tokenizer::from_tokenizer_json(pagoda::test::tiny_tokenizer_files().tokenizer_json);
    PAGODA_CHECK_MSG(tiny.ok(), "tiny tokenizer failed to load");
    return std::move(tiny).value();
}

const pagoda::Tokenizer& tokenizer() {
    static const pagoda::Tokenizer t = load();
    return t;
}

void fuzz_encode(std::string_view text, bool parse_special) {
    const pagoda::Tokenizer& t = tokenizer();
    const std::vector<int32_t> ids = t.encode(text, parse_special);
    for (int32_t id : ids)
        PAGODA_CHECK(t.is_valid_id(id));
    auto decoded = t.decode(ids);
    PAGODA_CHECK(decoded.ok());
    PAGODA_CHECK(pagoda::utf8_is_valid(*decoded));
    bool plain = true;
    for (char c : text)
        plain &= static_cast<unsigned char>(c) < 0x80 && c != '<';
    if (plain) PAGODA_CHECK_MSG(*decoded == text, "ASCII text did not round-trip");
}

void fuzz_decode(const uint8_t* data, size_t size) {
    const pagoda::Tokenizer& t = tokenizer();
    std::vector<int32_t> ids;
    for (size_t i = 0; i + 4 <= size; i += 4) {
        uint32_t raw;
        std::memcpy(&raw, data + i, 4);
        // Mostly valid ids, sometimes anything at all.
        const auto id = (raw & 0x80000000u) ? static_cast<int32_t>(raw)
                                            : static_cast<int32_t>(raw % static_cast<uint32_t>(t.vocab_size() + 2));
        ids.push_back(id);
    }
    const bool skip = size > 0 && (data[0] & 1);
    auto whole = t.decode(ids, skip);
    pagoda::IncrementalDecoder stream(t, skip);
    std::string streamed;
    bool ok = true;
    for (int32_t id : ids)
        ok = ok && stream.push(id, streamed).ok();
    stream.finish(streamed);
    PAGODA_CHECK(ok == whole.ok());
    if (ok) {
        PAGODA_CHECK(pagoda::utf8_is_valid(streamed));
        PAGODA_CHECK_MSG(streamed == *whole, "streamed text differs from decode");
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const uint8_t mode = data[0];
    if (mode % 2 == 0)
        fuzz_encode(std::string_view(reinterpret_cast<const char*>(data + 1), size - 1), mode & 2);
    else
        fuzz_decode(data + 1, size - 1);
    return 0;
}
