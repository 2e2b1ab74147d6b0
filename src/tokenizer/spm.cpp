// SentencePiece-style BPE (tokenizer.ggml.model = "llama"): start from UTF-8 characters and
// repeatedly merge the adjacent pair whose concatenation is the vocab piece with the highest
// score (ties: leftmost); characters that never became pieces fall back to <0xNN> byte tokens.
#include <queue>

#include "tokenizer/tokenizer_impl.hpp"
#include "tokenizer/unicode.hpp"

namespace vkspec {

namespace {

struct Symbol {
  int prev, next;
  uint32_t off, len;  // bytes of the escaped text; len 0 once merged into the left neighbour
};

struct Bigram {
  int left, right;
  float score;
  uint32_t len;  // combined length when queued; a mismatch later means the entry is stale
};

struct BigramOrder {  // max-heap: highest score first, then the leftmost pair
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

void Tokenizer::Impl::encode_spm(std::string_view text, std::vector<uint32_t>& out) const {
  if (text.empty()) return;
  // Spaces become U+2581 "▁" (the caller already added the leading space).
  std::string s;
  s.reserve(text.size() + text.size() / 4);
  for (char ch : text) {
    if (ch == ' ')
      s += "\xe2\x96\x81";
    else
      s += ch;
  }

  std::vector<Symbol> sym;
  sym.reserve(s.size());
  for (uint32_t i = 0; i < s.size();) {
    const uint32_t len = std::min<uint32_t>(uint32_t(unicode::utf8_len(uint8_t(s[i]))), uint32_t(s.size()) - i);
    sym.push_back({int(sym.size()) - 1, int(sym.size()) + 1, i, len});
    i += len;
  }
  sym.back().next = -1;

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto try_pair = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    const uint32_t len = sym[l].len + sym[r].len;
    const uint32_t id = find(std::string_view(s).substr(sym[l].off, len));
    if (id == kNone) return;
    queue.push({l, r, scores.empty() ? 0.0f : scores[id], len});
  };
  for (size_t i = 1; i < sym.size(); ++i) try_pair(int(i) - 1, int(i));

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = sym[b.left];
    Symbol& r = sym[b.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.len) continue;  // stale
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    try_pair(l.prev, b.left);
    try_pair(b.left, l.next);
  }

  for (int i = 0; i >= 0; i = sym[i].next) {
    const std::string_view piece = std::string_view(s).substr(sym[i].off, sym[i].len);
    const uint32_t id = find(piece);
    if (id != kNone) {
      out.push_back(id);
      continue;
    }
    // Byte fallback: every byte of the character as <0xNN>, or <unk> if the vocab has none.
    for (char ch : piece) {
      const uint32_t bt = byte_token[uint8_t(ch)];
      if (bt != kNone)
        out.push_back(bt);
      else if (unk >= 0)
        out.push_back(uint32_t(unk));
      else
        throw_unencodable_byte(uint8_t(ch));  // never dropped from the prompt without a word
    }
  }
}

}  // namespace vkspec
