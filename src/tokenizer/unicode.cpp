#include "tokenizer/unicode.hpp"

#include <algorithm>
#include <array>

namespace vkspec::unicode {

namespace {

struct CodeRange {
  uint32_t first, last;
};
#include "tokenizer/unicode_tables.inc"

template <size_t N>
bool in_ranges(const CodeRange (&r)[N], uint32_t cp) {
  // Binary search for the last range starting at or before cp.
  auto it = std::upper_bound(std::begin(r), std::end(r), cp, [](uint32_t c, const CodeRange& x) { return c < x.first; });
  return it != std::begin(r) && cp <= (it - 1)->last;
}

// Both directions of the byte mapping, built once (a constant table, not mutable state).
struct ByteMap {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 512> from_cp{};  // images are < 256 + 68
  ByteMap() {
    from_cp.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
      to_cp[b] = printable ? uint32_t(b) : next++;
      from_cp[to_cp[b]] = int16_t(b);
    }
  }
};
const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

}  // namespace

std::vector<Char> decode(std::string_view s) {
  std::vector<Char> out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const uint32_t n = uint32_t(s.size());
  for (uint32_t i = 0; i < n;) {
    const uint8_t b = p[i];
    const int len = utf8_len(b);
    uint32_t cp = 0xfffd;
    bool ok = len == 1 ? b < 0x80 : i + uint32_t(len) <= n;
    if (ok && len > 1) {
      cp = b & (0x7f >> len);
      for (int k = 1; k < len; ++k) {
        if ((p[i + k] & 0xc0) != 0x80) ok = false;
        cp = (cp << 6) | (p[i + k] & 0x3f);
      }
      // Reject overlong forms, surrogates and values past U+10FFFF.
      static const uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
      if (ok && (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))) ok = false;
    } else if (ok) {
      cp = b;
    }
    if (!ok) {
      out.push_back({0xfffd, i, 1});
      ++i;
      continue;
    }
    out.push_back({cp, i, uint32_t(len)});
    i += uint32_t(len);
  }
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xc0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += char(0xe0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3f));
    out += char(0x80 | (cp & 0x3f));
  } else {
    out += char(0xf0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3f));
    out += char(0x80 | ((cp >> 6) & 0x3f));
    out += char(0x80 | (cp & 0x3f));
  }
}

bool is_letter(uint32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  return in_ranges(kLetterRanges, cp);
}

bool is_number(uint32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return in_ranges(kNumberRanges, cp);
}

bool is_whitespace(uint32_t cp) {
  switch (cp) {
    case 0x09: case 0x0a: case 0x0b: case 0x0c: case 0x0d: case 0x20: case 0x85: case 0xa0:
    case 0x1680: case 0x2028: case 0x2029: case 0x202f: case 0x205f: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200a;
  }
}

uint32_t byte_to_cp(uint8_t b) { return byte_map().to_cp[b]; }

int cp_to_byte(uint32_t cp) { return cp < 512 ? byte_map().from_cp[cp] : -1; }

}  // namespace vkspec::unicode
