#include "vkspec/error.hpp"

#include <sstream>

namespace vkspec {

std::string printable_message(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    const auto b = static_cast<unsigned char>(ch);
    if ((b < 0x20 && ch != '\n' && ch != '\t') || b == 0x7f) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[b >> 4];
      out += hex[b & 15];
    } else {
      out += ch;
    }
  }
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
