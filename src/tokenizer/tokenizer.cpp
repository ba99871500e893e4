// Encoding (added tokens, NFC, pre-tokenizer, BPE with a per-thread word cache) and decoding.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <atomic>
#include <unordered_map>

#include "common/utf8.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8_lossy.h"

namespace pagoda {

using namespace tokenizer_internal;

namespace tokenizer_internal {

void AddedTokenMatcher::build(const std::vector<size_t>& which, const std::vector<std::string>& patterns) {
    patterns_.clear();
    token_index_.clear();
    by_first_byte_.assign(256, {});
    for (size_t k = 0; k < which.size(); ++k) {
        if (patterns[k].empty()) continue;
        const auto idx = static_cast<uint32_t>(patterns_.size());
        patterns_.push_back(patterns[k]);
        token_index_.push_back(which[k]);
        const auto b = static_cast<unsigned char>(patterns[k][0]);
        by_first_byte_[b].push_back(idx);
        first_byte_[b] = true;
    }
    for (auto& list : by_first_byte_)
        std::stable_sort(list.begin(), list.end(),
                         [&](uint32_t a, uint32_t b) { return patterns_[a].size() > patterns_[b].size(); });
}

bool AddedTokenMatcher::find(std::string_view s, size_t from, size_t& start, size_t& end, size_t& token_index) const {
    if (patterns_.empty()) return false;
    for (size_t p = from; p < s.size(); ++p) {
        const auto b = static_cast<unsigned char>(s[p]);
        if (!first_byte_[b]) continue;
        for (uint32_t idx : by_first_byte_[b]) {
            const std::string& pat = patterns_[idx];
            if (s.size() - p >= pat.size() && s.compare(p, pat.size(), pat) == 0) {
                start = p;
                end = p + pat.size();
                token_index = token_index_[idx];
                return true;
            }
        }
    }
    return false;
}

namespace {

std::atomic<uint64_t> g_next_serial{1};

}  // namespace

Result<std::shared_ptr<const TokenizerImpl>> build_tokenizer(TokenizerSpec spec) {
    auto impl = std::make_shared<TokenizerImpl>();
    PAGODA_ASSIGN_OR_RETURN(impl->pattern, recognize_split_pattern(spec.split_regex));
    PAGODA_ASSIGN_OR_RETURN(impl->bpe, BpeModel::build(spec.vocab, spec.merges, spec.ignore_merges));
    impl->nfc = spec.nfc;
    impl->added = std::move(spec.added);
    impl->template_prefix = std::move(spec.template_prefix);
    impl->template_suffix = std::move(spec.template_suffix);
    {
        // HF gives an added token whose text is already a model token that token's id (the file's id
        // for it stays unassigned).
        std::unordered_map<std::string_view, int32_t> vocab_ids;
        for (const auto& [tok, id] : spec.vocab)
            vocab_ids.emplace(tok, id);
        for (AddedToken& t : impl->added) {
            // HF keeps a normalized token's text in normalized form; decoding shows it so.
            if (t.normalized && impl->nfc && utf8_is_valid(t.content)) {
                std::string n;
                append_nfc(t.content, n);
                t.content = std::move(n);
            }
            if (auto it = vocab_ids.find(t.content); it != vocab_ids.end()) t.id = it->second;
        }
    }
    impl->serial = g_next_serial.fetch_add(1);

    std::vector<size_t> raw, normalized;
    std::vector<std::string> raw_patterns, normalized_patterns;
    for (size_t i = 0; i < impl->added.size(); ++i) {
        const AddedToken& t = impl->added[i];
        if (!utf8_is_valid(t.content))
            return Status::error("added token " + std::to_string(t.id) + " is not valid UTF-8");
        if (t.normalized) {
            normalized.push_back(i);
            normalized_patterns.push_back(t.content);
        } else {
            raw.push_back(i);
            raw_patterns.push_back(t.content);
        }
    }
    impl->raw_matcher.build(raw, raw_patterns);
    impl->normalized_matcher.build(normalized, normalized_patterns);

    int32_t max_id = -1;
    for (const auto& [tok, id] : spec.vocab) {
        if (id < 0) return Status::error("vocabulary token \"" + tok + "\" has a negative id");
        max_id = std::max(max_id, id);
    }
    for (const AddedToken& t : impl->added) {
        if (t.id < 0) return Status::error("added token \"" + t.content + "\" has a negative id");
        max_id = std::max(max_id, t.id);
    }
    // Ids index dense tables: refuse a file whose ids would make them absurdly large.
    constexpr int32_t kMaxTokenId = (1 << 24) - 1;
    if (max_id > kMaxTokenId)
        return Status::error("token id " + std::to_string(max_id) + " is too large (at most " +
                             std::to_string(kMaxTokenId) + ")");
    const auto n = static_cast<size_t>(max_id + 1);
    std::vector<std::string> bytes(n);
    impl->id_flags.assign(n, 0);
    for (const auto& [tok, id] : spec.vocab) {
        bytes[static_cast<size_t>(id)] = byte_level_decode(tok);
        impl->id_flags[static_cast<size_t>(id)] = TokenizerImpl::kValid;
        impl->token_ids[tok] = id;
    }
    // Added tokens win over the model for the same id, as HF's id_to_token asks them first.
    for (const AddedToken& t : impl->added) {
        bytes[static_cast<size_t>(t.id)] = byte_level_decode(t.content);
        impl->id_flags[static_cast<size_t>(t.id)] =
            TokenizerImpl::kValid | (t.special ? TokenizerImpl::kSpecial : uint8_t{0});
        impl->token_ids[t.content] = t.id;
    }
    impl->id_offset.resize(n + 1);
    for (size_t i = 0; i < n; ++i) {
        impl->id_offset[i] = static_cast<uint32_t>(impl->id_bytes.size());
        impl->id_bytes += bytes[i];
    }
    impl->id_offset[n] = static_cast<uint32_t>(impl->id_bytes.size());
    return std::shared_ptr<const TokenizerImpl>(std::move(impl));
}

}  // namespace tokenizer_internal

namespace {

// Words seen recently on this thread, per tokenizer. Pieces repeat a lot in text, and the cache
// turns most of them into one hash lookup. Bounded: cleared when full.
struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

struct WordCache {
    static constexpr size_t kMaxEntries = 1 << 16;
    static constexpr size_t kMaxWordBytes = 64;
    uint64_t serial = 0;
    std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> map;
};

struct EncodeScratch {
    std::string clean;       // input after UTF-8 repair
    std::string normalized;  // a segment after NFC
    WordCache cache;
};

EncodeScratch& scratch_for(const TokenizerImpl& impl) {
    thread_local EncodeScratch scratch;
    if (scratch.cache.serial != impl.serial) {
        scratch.cache.map.clear();
        scratch.cache.serial = impl.serial;
    }
    return scratch;
}

void encode_words(const TokenizerImpl& impl, std::string_view text, std::vector<int32_t>& out, WordCache& cache) {
    size_t pos = 0;
    while (pos < text.size()) {
        const size_t end = match_piece(impl.pattern, text, pos);
        const std::string_view word = text.substr(pos, end - pos);
        pos = end;
        if (word.size() > WordCache::kMaxWordBytes) {
            impl.bpe.encode_word(word, out);
            continue;
        }
        auto it = cache.map.find(word);
        if (it != cache.map.end()) {
            out.insert(out.end(), it->second.begin(), it->second.end());
            continue;
        }
        const size_t before = out.size();
        impl.bpe.encode_word(word, out);
        if (cache.map.size() >= WordCache::kMaxEntries) cache.map.clear();
        cache.map.emplace(std::string(word),
                          std::vector<int32_t>(out.begin() + static_cast<ptrdiff_t>(before), out.end()));
    }
}

size_t trailing_space_start(std::string_view s) {
    // Start of the \s* run at the end of s (Rust regex \s*$, leftmost).
    size_t pos = 0, start = 0;
    bool in_run = false;
    while (pos < s.size()) {
        int len;
        const char32_t c = decode_utf8_at(s, pos, len);
        const bool space = is_rust_regex_space(c);
        if (space && !in_run) start = pos;
        in_run = space;
        pos += static_cast<size_t>(len);
    }
    return in_run ? start : s.size();
}

size_t leading_space_end(std::string_view s) {
    size_t pos = 0;
    while (pos < s.size()) {
        int len;
        if (!is_rust_regex_space(decode_utf8_at(s, pos, len))) break;
        pos += static_cast<size_t>(len);
    }
    return pos;
}

bool ends_with_word(std::string_view s) {
    if (s.empty()) return false;
    size_t pos = s.size() - 1;
    while (pos > 0 && (static_cast<unsigned char>(s[pos]) & 0xC0) == 0x80)
        --pos;
    int len;
    return is_rust_regex_word(decode_utf8_at(s, pos, len));
}

bool starts_with_word(std::string_view s) {
    if (s.empty()) return false;
    int len;
    return is_rust_regex_word(decode_utf8_at(s, 0, len));
}

// HF's AddedVocabulary::find_matches: splits `s` into text and added-token segments, honouring
// single_word, lstrip and rstrip; `on_text` and `on_token` receive them in order.
template <typename OnText, typename OnToken>
void split_added(const TokenizerImpl& impl, const AddedTokenMatcher& matcher, std::string_view s, bool parse_special,
                 OnText&& on_text, OnToken&& on_token) {
    size_t start_offset = 0, from = 0, mstart = 0, mend = 0, index = 0;
    while (matcher.find(s, from, mstart, mend, index)) {
        from = mend;
        const AddedToken& tok = impl.added[index];
        if (!parse_special && tok.special) continue;
        if (tok.single_word) {
            const bool start_space = mstart == 0 || !ends_with_word(s.substr(0, mstart));
            const bool stop_space = mend == s.size() || !starts_with_word(s.substr(mend));
            if (!start_space || !stop_space) continue;
        }
        size_t start = mstart, stop = mend;
        if (tok.lstrip) start = std::max(trailing_space_start(s.substr(0, start)), start_offset);
        if (tok.rstrip) stop += leading_space_end(s.substr(stop));
        if (start_offset < start) on_text(s.substr(start_offset, start - start_offset));
        on_token(tok.id);
        start_offset = stop;
    }
    if (start_offset < s.size()) on_text(s.substr(start_offset));
}

}  // namespace

void Tokenizer::encode(std::string_view text, std::vector<int32_t>& out, bool parse_special) const {
    const TokenizerImpl& impl = *impl_;
    EncodeScratch& scratch = scratch_for(impl);
    if (!utf8_is_valid(text)) {
        scratch.clean.clear();
        append_utf8_lossy(text, scratch.clean);
        text = scratch.clean;
    }
    auto on_normalized_text = [&](std::string_view segment) { encode_words(impl, segment, out, scratch.cache); };
    auto on_token = [&](int32_t id) { out.push_back(id); };
    auto on_raw_text = [&](std::string_view segment) {
        if (impl.nfc && !is_nfc_quick(segment)) {
            // `segment` may point into scratch.clean; normalize into a local when nested calls could reuse it.
            std::string normalized;
            append_nfc(segment, normalized);
            if (impl.normalized_matcher.empty())
                encode_words(impl, normalized, out, scratch.cache);
            else
                split_added(impl, impl.normalized_matcher, normalized, parse_special, on_normalized_text, on_token);
            return;
        }
        if (impl.normalized_matcher.empty())
            encode_words(impl, segment, out, scratch.cache);
        else
            split_added(impl, impl.normalized_matcher, segment, parse_special, on_normalized_text, on_token);
    };
    split_added(impl, impl.raw_matcher, text, parse_special, on_raw_text, on_token);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special) const {
    std::vector<int32_t> out;
    encode(text, out, parse_special);
    return out;
}

Result<std::string> Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
    const TokenizerImpl& impl = *impl_;
    std::string bytes;
    for (const int32_t id : ids) {
        if (!is_valid_id(id))
            return Status::error("token id " + std::to_string(id) + " is out of range (the vocabulary has ids 0.." +
                                 std::to_string(vocab_size() - 1) + ")");
        if (skip_special_tokens && (impl.id_flags[static_cast<size_t>(id)] & TokenizerImpl::kSpecial)) continue;
        bytes += token_bytes(id);
    }
    std::string out;
    out.reserve(bytes.size());
    append_utf8_lossy(bytes, out);
    return out;
}

int32_t Tokenizer::vocab_size() const {
    return static_cast<int32_t>(impl_->id_flags.size());
}

bool Tokenizer::is_valid_id(int32_t id) const {
    return id >= 0 && id < vocab_size() && (impl_->id_flags[static_cast<size_t>(id)] & TokenizerImpl::kValid);
}

bool Tokenizer::is_special(int32_t id) const {
    return is_valid_id(id) && (impl_->id_flags[static_cast<size_t>(id)] & TokenizerImpl::kSpecial);
}

std::span<const int32_t> Tokenizer::special_prefix() const {
    return impl_->template_prefix;
}

std::span<const int32_t> Tokenizer::special_suffix() const {
    return impl_->template_suffix;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
    auto it = impl_->token_ids.find(std::string(token));
    if (it == impl_->token_ids.end()) return std::nullopt;
    return it->second;
}

std::string_view Tokenizer::token_bytes(int32_t id) const {
    if (!is_valid_id(id)) return {};
    const auto i = static_cast<size_t>(id);
    return std::string_view(impl_->id_bytes).substr(impl_->id_offset[i], impl_->id_offset[i + 1] - impl_->id_offset[i]);
}

Tokenizer::Tokenizer(std::shared_ptr<const TokenizerImpl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_(skip_special_tokens) {}

Status IncrementalDecoder::push(int32_t id, std::string& out) {
    if (!tokenizer_.is_valid_id(id))
        return Status::error("token id " + std::to_string(id) + " is out of range (the vocabulary has ids 0.." +
                             std::to_string(tokenizer_.vocab_size() - 1) + ")");
    if (skip_special_ && tokenizer_.is_special(id)) return ok_status();
    // Decide only what the bytes so far make final; an unfinished sequence (at most 3 bytes) waits.
    buffer_.append(tokenizer_.token_bytes(id));
    const size_t held = append_utf8_lossy_prefix(buffer_, out);
    buffer_.erase(0, buffer_.size() - held);
    return ok_status();
}

void IncrementalDecoder::finish(std::string& out) {
    append_utf8_lossy(buffer_, out);
    buffer_.clear();
}

}  // namespace pagoda
