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
      // size == shape x dtype (the I64 / BOOL of EAGLE-3's d2t / t2d are accepted too)
      const size_t esize = t.dtype == "F32" ? 4 : t.dtype == "I64" ? 8 : t.dtype == "BOOL" ? 1 : 2;
      if (v.size() * esize != t.bytes) __builtin_trap();
    }
  } catch (const Error&) {
  }
  return 0;
}
