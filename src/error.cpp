#include "vkspec/error.hpp"

#include <sstream>
#include <string>

namespace vkspec {

namespace {

// Length of the valid UTF-8 character at s[i] (2..4 bytes, lead byte >= 0x80), or 0 if the bytes
// there are not one (a stray continuation byte, an overlong form, a surrogate, a cut character).
size_t utf8_char_at(const std::string& s, size_t i) {
  const auto at = [&](size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  const unsigned b = at(0);
  size_t n = 0;
  unsigned lo = 0x80, hi = 0xbf;  // the second byte's range
  if (b >= 0xc2 && b <= 0xdf) n = 2;
  else if (b >= 0xe0 && b <= 0xef) n = 3, lo = b == 0xe0 ? 0xa0 : 0x80, hi = b == 0xed ? 0x9f : 0xbf;
  else if (b >= 0xf0 && b <= 0xf4) n = 4, lo = b == 0xf0 ? 0x90 : 0x80, hi = b == 0xf4 ? 0x8f : 0xbf;
  else return 0;
  if (at(1) < lo || at(1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (at(k) < 0x80 || at(k) > 0xbf) return 0;
  return n;
}

void append_printable(std::string& out, const std::string& s, size_t from, size_t to) {
  static const char* hex = "0123456789abcdef";
  for (size_t i = from; i < to;) {
    const auto b = static_cast<unsigned char>(s[i]);
    const size_t n = b >= 0x80 ? utf8_char_at(s, i) : 1;
    if (n > 1 && i + n <= to) {
      out.append(s, i, n);
      i += n;
    } else if ((b < 0x20 && b != '\n' && b != '\t') || b >= 0x7f) {
      out += "\\x";
      out += hex[b >> 4];
      out += hex[b & 15];
      ++i;
    } else {
      out += char(b);
      ++i;
    }
  }
}

}  // namespace

std::string printable_message(const std::string& s) {
  // A value quoted from a file may be megabytes long: the middle of such a message is left out.
  constexpr size_t kMax = 4096, kHead = 3072, kTail = 512;
  std::string out;
  if (s.size() <= kMax) {
    append_printable(out, s, 0, s.size());
    return out;
  }
  size_t head = kHead, tail = s.size() - kTail;
  while (head > 0 && (static_cast<unsigned char>(s[head]) & 0xc0) == 0x80) --head;  // not inside a character
  while (tail < s.size() && (static_cast<unsigned char>(s[tail]) & 0xc0) == 0x80) ++tail;
  append_printable(out, s, 0, head);
  out += " [... " + std::to_string(tail - head) + " bytes left out ...] ";
  append_printable(out, s, tail, s.size());
  return out;
}

const char* vk_result_name(VkResult r) {
  switch (r) {
#define CASE(x) \
  case x:       \
    return #x;
    CASE(VK_SUCCESS)
    CASE(VK_NOT_READY)
    CASE(VK_TIMEOUT)
    CASE(VK_INCOMPLETE)
    CASE(VK_ERROR_OUT_OF_HOST_MEMORY)
    CASE(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    CASE(VK_ERROR_INITIALIZATION_FAILED)
    CASE(VK_ERROR_DEVICE_LOST)
    CASE(VK_ERROR_MEMORY_MAP_FAILED)
    CASE(VK_ERROR_LAYER_NOT_PRESENT)
    CASE(VK_ERROR_EXTENSION_NOT_PRESENT)
    CASE(VK_ERROR_FEATURE_NOT_PRESENT)
    CASE(VK_ERROR_INCOMPATIBLE_DRIVER)
    CASE(VK_ERROR_TOO_MANY_OBJECTS)
    CASE(VK_ERROR_FORMAT_NOT_SUPPORTED)
    CASE(VK_ERROR_FRAGMENTED_POOL)
    CASE(VK_ERROR_OUT_OF_POOL_MEMORY)
    CASE(VK_ERROR_INVALID_SHADER_NV)
#undef CASE
    default:
      return "VK_ERROR_(unknown)";
  }
}

void throw_vk_error(VkResult r, const char* call, const char* file, int line) {
  std::ostringstream os;
  os << call << " failed with " << vk_result_name(r) << " (" << static_cast<int>(r) << ") at " << file << ":"
     << line;
  throw VulkanError(os.str(), r);
}

void throw_nonfinite_logits(uint64_t position, const std::string& detail, bool f16_cache) {
  throw NonFiniteLogits("the logits computed at position " + std::to_string(position) + " are not finite" +
                        (detail.empty() ? "" : " (" + detail + ")") +
                        ": the model's weights overflow float arithmetic (a damaged or crafted file" +
                        (f16_cache ? "; with an f16 KV cache a cached value past 65504 does too" : "") + ")");
}

}  // namespace vkspec
