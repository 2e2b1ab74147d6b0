// UTF-8 validation for text that leaves the runtime (JSON, the C API, a terminal): generated
// byte tokens may form anything, including bytes that are no character at all.
#include <cstdint>

#include "vkspec/tokenizer.hpp"

namespace vkspec {

namespace {
// Length of the valid UTF-8 character at the start of s (1..4), or 0 when it is not one; then
// *consumed is the length of its longest valid prefix (at least 1), the "maximal subpart" that
// Unicode §3.9 replaces with one U+FFFD.
size_t valid_char(std::string_view s, size_t* consumed) {
  const uint8_t b0 = uint8_t(s[0]);
  *consumed = 1;
  if (b0 < 0x80) return 1;
  size_t len;
  uint8_t lo = 0x80, hi = 0xbf;  // the allowed range of the second byte
  if (b0 >= 0xc2 && b0 <= 0xdf) {
    len = 2;
  } else if (b0 >= 0xe0 && b0 <= 0xef) {
    len = 3;
    if (b0 == 0xe0) lo = 0xa0;  // no overlong forms
    if (b0 == 0xed) hi = 0x9f;  // no surrogates
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    len = 4;
    if (b0 == 0xf0) lo = 0x90;  // no overlong forms
    if (b0 == 0xf4) hi = 0x8f;  // nothing past U+10FFFF
  } else {
    return 0;  // a continuation byte, C0/C1 (overlong) or F5..FF
  }
  for (size_t k = 1; k < len; ++k) {
    if (k >= s.size()) return 0;
    const uint8_t b = uint8_t(s[k]);
    if (k == 1 ? (b < lo || b > hi) : (b & 0xc0) != 0x80) return 0;
    *consumed = k + 1;
  }
  return len;
}
}  // namespace

std::string utf8_sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t consumed = 0;
    const size_t n = valid_char(s.substr(i), &consumed);
    if (n) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xef\xbf\xbd";
      i += consumed;
    }
  }
  return out;
}

}  // namespace vkspec
