// The pickle inside a torch.save archive (`<prefix>/data.pkl`), read by an interpreter that knows
// only what a state dict needs and never calls anything (torch_pickle.cpp lists the opcodes and
// globals it accepts). Used by TorchFile (include/vkspec/torch_file.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace vkspec::torch_pickle {

// One storage a tensor refers to: the archive entry `<prefix>/data/<key>`, holding `numel`
// elements of `dtype` ("F32", "F16", "BF16", "I64" or "BOOL": SafeTensor's names).
struct Storage {
  std::string key;
  std::string dtype;
  uint64_t numel = 0;
};

// A tensor as torch._utils._rebuild_tensor_v2 describes it: a strided view into a storage, already
// checked to lie inside that storage's `numel` elements.
struct TensorView {
  size_t storage = 0;                   // index into StateDict::storages
  uint64_t offset = 0;                  // in elements
  std::vector<uint64_t> shape, stride;  // outermost first; strides in elements
};

struct StateDict {
  std::vector<Storage> storages;                            // one per distinct key
  std::vector<std::pair<std::string, TensorView>> tensors;  // in the file's order
};

// A state dict's pickle is about 100 bytes per tensor (a 70B model's is ~100 KB); a larger one is
// not a state dict, and the interpreter's memory grows with the pickle's size.
constexpr uint64_t kMaxPickleBytes = uint64_t(64) << 20;

// Interprets `size` bytes of pickle. Throws vkspec::Error starting with `where` (e.g.
// "FILE: data.pkl") and the byte offset of the opcode, naming every refused opcode or global.
StateDict parse_state_dict(const uint8_t* data, size_t size, const std::string& where);

}  // namespace vkspec::torch_pickle
