#include "tokenizer/pretokenize.hpp"

#include "tokenizer/unicode.hpp"

namespace vkspec {

namespace {

using unicode::Char;

enum Cls : uint8_t { kEnd, kLetter, kNumber, kSpace, kOther };

struct Text {
  std::vector<Char> c;
  std::vector<uint8_t> cls;  // per char
  explicit Text(std::string_view s) : c(unicode::decode(s)) {
    cls.reserve(c.size());
    for (const Char& x : c)
      cls.push_back(unicode::is_whitespace(x.cp) ? kSpace
                    : unicode::is_letter(x.cp)   ? kLetter
                    : unicode::is_number(x.cp)   ? kNumber
                                                 : kOther);
  }
  size_t n() const { return c.size(); }
  uint8_t at(size_t i) const { return i < c.size() ? cls[i] : uint8_t(kEnd); }
  uint32_t cp(size_t i) const { return i < c.size() ? c[i].cp : 0xffffffffu; }
  size_t run(size_t i, uint8_t k) const {  // end of the run of class k starting at i
    while (at(i) == k) ++i;
    return i;
  }
  bool newline(size_t i) const { return cp(i) == '\r' || cp(i) == '\n'; }
};

uint32_t lower_ascii(uint32_t cp) { return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp; }

// 's 't 're 've 'm 'll 'd at i: returns the end, or i if none.
size_t contraction(const Text& t, size_t i, bool any_case) {
  if (t.cp(i) != '\'') return i;
  auto c = [&](size_t k) { return any_case ? lower_ascii(t.cp(k)) : t.cp(k); };
  const uint32_t a = c(i + 1), b = c(i + 2);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
  return i;
}

// \s+(?!\S) then \s+ : a whitespace run, leaving its last character for the next piece when a
// non-space follows (so " word" keeps its space), unless the run is that single character.
size_t whitespace_tail(const Text& t, size_t i) {
  const size_t j = t.run(i, kSpace);
  if (j == t.n() || j - i == 1) return j;
  return j - 1;
}

// With `digits`, every digit is a piece of its own and GPT-2's regex then runs within the text
// between digits (llama.cpp's "\p{N}" split ahead of it), where a digit ends the text: a space
// never joins the number after it, and a whitespace run before a digit stays whole.
size_t match_gpt2(const Text& t, size_t i, bool digits) {
  if (digits && t.at(i) == kNumber) return i + 1;
  if (size_t j = contraction(t, i, false); j != i) return j;
  const size_t s = t.cp(i) == ' ' ? i + 1 : i;  // " ?" is the ASCII space only
  for (uint8_t k : {kLetter, kNumber, kOther})
    if (t.at(s) == k && !(digits && k == kNumber)) return t.run(s, k);
  if (digits && t.at(i) == kSpace) {
    const size_t j = t.run(i, kSpace);
    if (t.at(j) == kNumber) return j;
  }
  return whitespace_tail(t, i);  // at(i) is whitespace here
}

size_t match_llama3(const Text& t, size_t i, size_t max_digits) {
  if (size_t j = contraction(t, i, true); j != i) return j;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (t.at(i) == kLetter) return t.run(i, kLetter);
  if (t.at(i) != kNumber && !t.newline(i) && t.at(i + 1) == kLetter) return t.run(i + 1, kLetter);
  // \p{N}{1,max}
  if (t.at(i) == kNumber) {
    size_t j = i;
    while (j - i < max_digits && t.at(j) == kNumber) ++j;
    return j;
  }
  // " ?[^\s\p{L}\p{N}]+[\r\n]*"
  const size_t s = t.cp(i) == ' ' ? i + 1 : i;
  if (t.at(s) == kOther) {
    size_t j = t.run(s, kOther);
    while (t.newline(j)) ++j;
    return j;
  }
  // \s*[\r\n]+ : up to and including the last newline of the whitespace run.
  const size_t j = t.run(i, kSpace);
  for (size_t k = j; k > i; --k)
    if (t.newline(k - 1)) return k;
  return whitespace_tail(t, i);
}

}  // namespace

std::vector<std::pair<size_t, size_t>> pretokenize(Tokenizer::Pre pre, std::string_view text) {
  std::vector<std::pair<size_t, size_t>> out;
  const Text t(text);
  for (size_t i = 0; i < t.n();) {
    size_t j;
    switch (pre) {
      case Tokenizer::Pre::Llama3: j = match_llama3(t, i, 3); break;
      case Tokenizer::Pre::Qwen2: j = match_llama3(t, i, 1); break;
      case Tokenizer::Pre::Gpt2Digits: j = match_gpt2(t, i, true); break;
      default: j = match_gpt2(t, i, false); break;
    }
    if (j <= i) j = i + 1;  // cannot happen (every class is matched); never loop forever
    const size_t end = j < t.n() ? t.c[j].off : text.size();
    out.emplace_back(t.c[i].off, end - t.c[i].off);
    i = j;
  }
  return out;
}

}  // namespace vkspec
