// Errors that explain: every failure names the call or the file/field and what was expected.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include <volk.h>

namespace vkspec {

// A message as it may be printed: control bytes other than newline and tab (a NUL, which would
// end what() early, or a terminal escape sequence, quoted from a file's metadata) and bytes that
// are no UTF-8 character as \xNN; past 4 KiB (a megabyte string quoted from a file), the middle
// is left out, and the message says how many bytes.
std::string printable_message(const std::string& s);

// Everything vkspec throws. The message is meant for the user: it names the problem.
struct Error : std::runtime_error {
  explicit Error(const std::string& what) : std::runtime_error(printable_message(what)) {}
  explicit Error(const char* what) : Error(std::string(what)) {}
};

// Finite weights whose arithmetic left float's range (a damaged or crafted file): the logits
// computed at some position hold NaN or inf, so no token or score can come from them. The C
// API's VKSPEC_ERROR_MODEL. `detail` (may be empty) says which entry; `f16_cache`: the KV cache
// stores f16, whose range ends at 65504, which the message then mentions.
struct NonFiniteLogits : Error {
  using Error::Error;
};
[[noreturn]] void throw_nonfinite_logits(uint64_t position, const std::string& detail, bool f16_cache);

// A Vulkan call failed (the C API's VKSPEC_ERROR_VULKAN, or VKSPEC_ERROR_OUT_OF_MEMORY).
struct VulkanError : Error {
  VulkanError(const std::string& what, VkResult r) : Error(what), result(r) {}
  VkResult result;
};

const char* vk_result_name(VkResult r);

[[noreturn]] void throw_vk_error(VkResult r, const char* call, const char* file, int line);

inline void check_vk(VkResult r, const char* call, const char* file, int line) {
  if (r != VK_SUCCESS) throw_vk_error(r, call, file, line);
}

}  // namespace vkspec

// Setup-time Vulkan calls: a failure throws vkspec::Error with the call, file, line and VkResult.
#define VKSPEC_VK(call) ::vkspec::check_vk((call), #call, __FILE__, __LINE__)
