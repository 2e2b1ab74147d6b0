// libFuzzer: a safetensors file (8-byte header length, JSON header, data) parsed from memory,
// then every tensor converted to f32 as the head loader does.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "vkspec/error.hpp"
#include "vkspec/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vkspec;
  try {
    const SafetensorsFile f = SafetensorsFile::from_bytes("fuzz.safetensors", std::vector<uint8_t>(data, data + size));
    for (const auto& [name, t] : f.tensors()) {
      const std::vector<float> v = t.to_f32();
      if (v.size() * dtype_bytes(t.dtype) != t.bytes) __builtin_trap();  // size == shape x dtype
    }
  } catch (const Error&) {
  }
  return 0;
}
