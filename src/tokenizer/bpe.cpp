// Byte-level BPE: loading checks and the merge loop.
#include "tokenizer/bpe.h"

#include <algorithm>
#include <queue>
#include <unordered_map>

#include "common/utf8.h"
#include "tokenizer/unicode.h"

namespace pagoda::tokenizer_internal {
namespace {

struct ByteTables {
    char32_t to_char[256];
    std::unordered_map<char32_t, unsigned char> to_byte;
    ByteTables() {
        // Printable Latin-1 bytes keep their code point; the rest go to U+0100 upwards in byte order.
        int next = 0;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            to_char[b] = printable ? char32_t(b) : char32_t(0x100 + next++);
            to_byte[to_char[b]] = static_cast<unsigned char>(b);
        }
    }
};

const ByteTables& byte_tables() {
    static const ByteTables tables;
    return tables;
}

}  // namespace

char32_t byte_to_char(unsigned char b) {
    return byte_tables().to_char[b];
}

std::string byte_level_decode(std::string_view token) {
    const ByteTables& t = byte_tables();
    std::string out;
    size_t pos = 0;
    while (pos < token.size()) {
        const char32_t c = utf8_decode(token, pos);
        auto it = t.to_byte.find(c);
        if (it == t.to_byte.end()) return std::string(token);
        out.push_back(static_cast<char>(it->second));
    }
    return out;
}

std::string byte_level_encode(std::string_view bytes) {
    std::string out;
    for (char b : bytes)
        utf8_append(out, byte_to_char(static_cast<unsigned char>(b)));
    return out;
}

void BpeModel::insert_merge(uint64_t key, MergeValue value) {
    size_t i = hash(key) & mask_;
    while (keys_[i] != kEmpty && keys_[i] != key)
        i = (i + 1) & mask_;
    keys_[i] = key;  // a repeated merge takes the later rank, as HF's map collection does
    values_[i] = value;
}

Result<BpeModel> BpeModel::build(const std::vector<std::pair<std::string, int32_t>>& vocab,
                                 const std::vector<std::pair<std::string, std::string>>& merges, bool ignore_merges) {
    BpeModel m;
    m.ignore_merges_ = ignore_merges;
    std::unordered_map<std::string_view, int32_t> ids;
    ids.reserve(vocab.size() * 2);
    for (const auto& [token, id] : vocab)
        ids[token] = id;

    for (int b = 0; b < 256; ++b) {
        std::string s;
        utf8_append(s, byte_to_char(static_cast<unsigned char>(b)));
        auto it = ids.find(s);
        m.byte_ids_[b] = it == ids.end() ? -1 : it->second;
    }

    size_t capacity = 16;
    while (capacity < merges.size() * 2)
        capacity <<= 1;
    m.keys_.assign(capacity, kEmpty);
    m.values_.assign(capacity, MergeValue{0, 0});
    m.mask_ = capacity - 1;
    std::string joined;
    for (size_t rank = 0; rank < merges.size(); ++rank) {
        const auto& [a, b] = merges[rank];
        auto ia = ids.find(a), ib = ids.find(b);
        if (ia == ids.end() || ib == ids.end())
            return Status::error("merge " + std::to_string(rank) + " (\"" + a + " " + b +
                                 "\") uses a token that is not in the vocabulary");
        joined = a;
        joined += b;
        auto ij = ids.find(joined);
        if (ij == ids.end())
            return Status::error("merge " + std::to_string(rank) + " (\"" + a + " " + b + "\") makes \"" + joined +
                                 "\", which is not in the vocabulary");
        const uint64_t key = (uint64_t(uint32_t(ia->second)) << 32) | uint32_t(ib->second);
        m.insert_merge(key, MergeValue{static_cast<int32_t>(rank), ij->second});
    }
    if (ignore_merges) {
        for (const auto& [token, id] : vocab)
            m.whole_words_.emplace_back(byte_level_decode(token), id);
        std::sort(m.whole_words_.begin(), m.whole_words_.end());
    }
    return m;
}

namespace {

struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    bool removed;
};

struct QueueEntry {
    int32_t rank;
    int32_t pos;
    int32_t new_id;
    // std::priority_queue pops the greatest: make lowest rank, then leftmost position, the greatest.
    bool operator<(const QueueEntry& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

struct WordScratch {
    std::vector<Symbol> symbols;
    std::vector<QueueEntry> heap;
};

}  // namespace

void BpeModel::encode_word(std::string_view bytes, std::vector<int32_t>& out) const {
    if (ignore_merges_) {
        auto it = std::lower_bound(whole_words_.begin(), whole_words_.end(), bytes,
                                   [](const auto& e, std::string_view k) { return std::string_view(e.first) < k; });
        if (it != whole_words_.end() && it->first == bytes) {
            out.push_back(it->second);
            return;
        }
    }
    thread_local WordScratch scratch;
    auto& syms = scratch.symbols;
    auto& heap = scratch.heap;
    syms.clear();
    heap.clear();
    for (char ch : bytes) {
        const int32_t id = byte_ids_[static_cast<unsigned char>(ch)];
        if (id < 0) continue;
        const auto i = static_cast<int32_t>(syms.size());
        syms.push_back(Symbol{id, i - 1, i + 1, false});
    }
    if (syms.empty()) return;
    syms.back().next = -1;
    const auto n = static_cast<int32_t>(syms.size());
    for (int32_t i = 0; i + 1 < n; ++i)
        if (const MergeValue* mv = find_merge(syms[i].id, syms[i + 1].id)) heap.push_back({mv->rank, i, mv->new_id});
    std::make_heap(heap.begin(), heap.end());

    // HF's Word::merge_all: stale entries are recognised by the pair no longer producing new_id.
    while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end());
        const QueueEntry top = heap.back();
        heap.pop_back();
        Symbol& cur = syms[top.pos];
        if (cur.removed || cur.next < 0) continue;
        Symbol& right = syms[cur.next];
        const MergeValue* mv = find_merge(cur.id, right.id);
        if (mv == nullptr || mv->new_id != top.new_id) continue;
        cur.id = top.new_id;
        right.removed = true;
        cur.next = right.next;
        if (cur.next >= 0) syms[cur.next].prev = top.pos;
        if (cur.prev >= 0) {
            if (const MergeValue* p = find_merge(syms[cur.prev].id, cur.id)) {
                heap.push_back({p->rank, cur.prev, p->new_id});
                std::push_heap(heap.begin(), heap.end());
            }
        }
        if (cur.next >= 0) {
            if (const MergeValue* p = find_merge(cur.id, syms[cur.next].id)) {
                heap.push_back({p->rank, top.pos, p->new_id});
                std::push_heap(heap.begin(), heap.end());
            }
        }
    }
    for (int32_t i = 0; i >= 0; i = syms[i].next)
        out.push_back(syms[i].id);
}

}  // namespace pagoda::tokenizer_internal
