// Class table lookup (two-stage, built once from the generated ranges) and ICU-backed NFC.
#include "tokenizer/unicode.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/uniset.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/check.h"

namespace pagoda::tokenizer_internal {
namespace {

#include "tokenizer/unicode_classes.inc"

constexpr uint32_t kMaxCodepoint = 0x110000;
constexpr int kBlockBits = 8;

// Stage one maps cp >> 8 to a 256-entry block of classes; identical blocks are shared.
struct ClassTable {
    std::vector<uint16_t> stage1;
    std::vector<uint8_t> blocks;

    ClassTable() {
        std::vector<uint8_t> flat(kMaxCodepoint, 0);
        auto mark = [&](const auto& ranges, uint8_t bit) {
            for (const CodepointRange& r : ranges)
                for (uint32_t c = r.lo; c <= r.hi && c < kMaxCodepoint; ++c)
                    flat[c] |= bit;
        };
        mark(kLetterRanges, kClassLetter);
        mark(kNumberRanges, kClassNumber);
        mark(kMarkRanges, kClassMark);
        mark(kSpaceRanges, kClassSpace);
        constexpr uint32_t kBlock = 1u << kBlockBits;
        stage1.resize(kMaxCodepoint >> kBlockBits);
        std::unordered_map<std::string, size_t> seen;
        for (uint32_t b = 0; b < stage1.size(); ++b) {
            const uint8_t* src = flat.data() + b * kBlock;
            std::string key(reinterpret_cast<const char*>(src), kBlock);
            auto [it, inserted] = seen.emplace(std::move(key), blocks.size() / kBlock);
            if (inserted) blocks.insert(blocks.end(), src, src + kBlock);
            PAGODA_CHECK(it->second < 65536);
            stage1[b] = static_cast<uint16_t>(it->second);
        }
    }
};

const ClassTable& class_table() {
    static const ClassTable table;
    return table;
}

// HF's NFC comes from the unicode-normalization-alignments crate, whose data is Unicode 9.0: later
// combining marks have class 0 there and later decompositions do not exist. ICU's filtered
// normalizer leaves code points outside the set untouched and treats them as boundaries, which is
// exactly how an unknown starter behaves.
struct Nfc9 {
    std::unique_ptr<icu::UnicodeSet> set;
    std::unique_ptr<icu::FilteredNormalizer2> normalizer;

    Nfc9() {
        UErrorCode status = U_ZERO_ERROR;
        const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
        PAGODA_CHECK_MSG(U_SUCCESS(status), "ICU NFC data unavailable");
        set = std::make_unique<icu::UnicodeSet>(icu::UnicodeString(u"[:Age=9.0:]"), status);
        PAGODA_CHECK_MSG(U_SUCCESS(status), "ICU age set");
        set->freeze();
        normalizer = std::make_unique<icu::FilteredNormalizer2>(*nfc, *set);
    }
};

const Nfc9& nfc9() {
    static const Nfc9 nfc;
    return nfc;
}

}  // namespace

namespace detail {

const uint8_t kAsciiClass[128] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 8, 8, 8, 8, 8, 0, 0,  // \t \n \v \f \r
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  //
    8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  // space
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0,  // digits
    0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,  // A-O
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0,  // P-Z
    0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,  // a-o
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0,  // p-z
};

uint8_t non_ascii_class(char32_t cp) {
    if (cp >= kMaxCodepoint) return 0;
    const ClassTable& t = class_table();
    return t.blocks[(size_t(t.stage1[cp >> kBlockBits]) << kBlockBits) | (cp & ((1u << kBlockBits) - 1))];
}

}  // namespace detail

bool is_rust_regex_space(char32_t cp) {
    return u_isUWhiteSpace(static_cast<UChar32>(cp));
}

bool is_rust_regex_word(char32_t cp) {
    const auto c = static_cast<UChar32>(cp);
    return u_hasBinaryProperty(c, UCHAR_ALPHABETIC) || u_hasBinaryProperty(c, UCHAR_JOIN_CONTROL) ||
           (U_GET_GC_MASK(c) & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) != 0;
}

bool is_nfc_quick(std::string_view s) {
    bool ascii = true;
    for (char ch : s)
        ascii &= static_cast<unsigned char>(ch) < 0x80;
    if (ascii) return true;
    UErrorCode status = U_ZERO_ERROR;
    const bool yes =
        nfc9().normalizer->isNormalizedUTF8(icu::StringPiece(s.data(), static_cast<int32_t>(s.size())), status);
    return U_SUCCESS(status) && yes;
}

void append_nfc(std::string_view s, std::string& out) {
    UErrorCode status = U_ZERO_ERROR;
    icu::StringByteSink<std::string> sink(&out);
    nfc9().normalizer->normalizeUTF8(0, icu::StringPiece(s.data(), static_cast<int32_t>(s.size())), sink, nullptr,
                                     status);
    PAGODA_CHECK_MSG(U_SUCCESS(status), "ICU NFC failed on valid UTF-8");
}

}  // namespace pagoda::tokenizer_internal
