// Small Unicode toolkit for the tokenizers: UTF-8 decoding that never fails, the general
// categories the pre-tokenizer regexes need, and GPT-2's byte <-> code point mapping.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vkspec::unicode {

// One decoded character: its code point and where its bytes are in the source text.
// Invalid UTF-8 decodes one byte at a time as U+FFFD so byte offsets still tile the text.
struct Char {
  uint32_t cp;
  uint32_t off;
  uint32_t len;
};
std::vector<Char> decode(std::string_view s);

void append_utf8(std::string& out, uint32_t cp);
// Byte length of the UTF-8 sequence that starts with `lead` (1 for invalid lead bytes).
inline int utf8_len(uint8_t lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xe0) == 0xc0) return 2;
  if ((lead & 0xf0) == 0xe0) return 3;
  if ((lead & 0xf8) == 0xf0) return 4;
  return 1;
}

bool is_letter(uint32_t cp);      // \p{L}
bool is_number(uint32_t cp);      // \p{N}
bool is_whitespace(uint32_t cp);  // \s: the Unicode White_Space property

// GPT-2's reversible byte -> printable code point mapping: bytes that are printable Latin-1
// map to themselves, the others to 256, 257, ... in byte order.
uint32_t byte_to_cp(uint8_t b);
int cp_to_byte(uint32_t cp);  // -1 if cp is not the image of a byte

}  // namespace vkspec::unicode
