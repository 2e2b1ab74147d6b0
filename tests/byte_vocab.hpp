// GPT-2's byte-level vocabulary: the printable stand-in of each of the 256 bytes (its
// bytes_to_unicode table), written out independently of src/tokenizer/unicode.cpp. Shared by
// the tokenizer tests and the tokenizer fuzzer.
#pragma once

#include <string>
#include <vector>

namespace vkspec::test {

inline std::vector<std::string> byte_vocab() {
  std::vector<std::string> v(256);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool keep = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
    const int cp = keep ? b : next++;
    std::string s;
    if (cp < 0x80) {
      s += char(cp);
    } else {
      s += char(0xc0 | (cp >> 6));
      s += char(0x80 | (cp & 0x3f));
    }
    v[b] = s;
  }
  return v;
}

}  // namespace vkspec::test
