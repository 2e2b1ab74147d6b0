// libFuzzer: a pytorch_model.bin (torch.save zip archive) read from memory, then every tensor
// converted to f32 as the head loader does. The pickle inside is where the interpreter's refusals
// live; seeds are real torch.save files (tests/fuzz/make_seeds.py), so mutations reach it.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "vkspec/error.hpp"
#include "vkspec/torch_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vkspec;
  try {
    const TorchFile f = TorchFile::from_bytes("fuzz.bin", std::vector<uint8_t>(data, data + size));
    for (const auto& [name, t] : f.tensors()) {
      const std::vector<float> v = t.to_f32();
      if (v.size() * dtype_bytes(t.dtype) != t.bytes) __builtin_trap();  // size == shape x dtype
    }
  } catch (const Error&) {
  }
  return 0;
}
