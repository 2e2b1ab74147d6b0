// Byte-level BPE (tokenizer.ggml.model = "gpt2"): pre-tokenize, map each piece's bytes to
// printable code points, then merge adjacent symbols by merge rank (lowest first, leftmost on
// ties) until no ranked pair is left.
#include <queue>

#include "tokenizer/pretokenize.hpp"
#include "tokenizer/tokenizer_impl.hpp"
#include "tokenizer/unicode.hpp"

namespace vkspec {

namespace {

struct Symbol {
  int prev, next;
  uint32_t id;  // token id of the symbol's text (kNone if the text is no token)
  bool alive;
};

struct Pair {
  uint32_t rank;
  int left, right;
  uint32_t left_id, right_id;  // ids when queued: a mismatch later means the entry is stale
};

struct PairOrder {  // min-heap on (rank, left)
  bool operator()(const Pair& a, const Pair& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

uint64_t pair_key(uint32_t a, uint32_t b) { return (uint64_t(a) << 32) | b; }

}  // namespace

void Tokenizer::Impl::encode_bpe(std::string_view text, std::vector<uint32_t>& out) const {
  std::vector<Symbol> sym;
  std::string mapped;
  for (const auto& [off, len] : pretokenize(pre, text)) {
    const std::string_view word = text.substr(off, len);
    if (ignore_merges) {
      mapped.clear();
      for (char ch : word) unicode::append_utf8(mapped, unicode::byte_to_cp(uint8_t(ch)));
      if (uint32_t id = find(mapped); id != kNone) {
        out.push_back(id);
        continue;
      }
    }
    // One symbol per byte: each byte's mapped code point is a token in byte-level vocabs.
    sym.clear();
    for (size_t i = 0; i < word.size(); ++i) {
      const uint32_t id = byte_token[uint8_t(word[i])];
      // A byte no token stands for (it never merges) with no <unk> to stand in: refused, never
      // dropped from the prompt without a word.
      if (id == kNone && unk < 0) throw_unencodable_byte(uint8_t(word[i]));
      sym.push_back({int(i) - 1, i + 1 < word.size() ? int(i) + 1 : -1, id, true});
    }

    std::priority_queue<Pair, std::vector<Pair>, PairOrder> queue;
    auto try_pair = [&](int l, int r) {
      if (l < 0 || r < 0 || sym[l].id == kNone || sym[r].id == kNone) return;
      auto it = merges.find(pair_key(sym[l].id, sym[r].id));
      if (it != merges.end()) queue.push({it->second.rank, l, r, sym[l].id, sym[r].id});
    };
    for (size_t i = 1; i < sym.size(); ++i) try_pair(int(i) - 1, int(i));

    while (!queue.empty()) {
      const Pair p = queue.top();
      queue.pop();
      Symbol& l = sym[p.left];
      Symbol& r = sym[p.right];
      if (!l.alive || !r.alive || l.next != p.right || l.id != p.left_id || r.id != p.right_id) continue;
      l.id = merges.at(pair_key(l.id, r.id)).result;
      r.alive = false;
      l.next = r.next;
      if (r.next >= 0) sym[r.next].prev = p.left;
      try_pair(l.prev, p.left);
      try_pair(p.left, l.next);
    }

    for (int i = sym.empty() ? -1 : 0; i >= 0; i = sym[i].next) {
      if (sym[i].id != kNone)
        out.push_back(sym[i].id);
      else if (unk >= 0)
        out.push_back(uint32_t(unk));
    }
  }
}

}  // namespace vkspec
