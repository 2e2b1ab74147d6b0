// pytorch_model.bin reader: the zip archive torch.save writes (PyTorch >= 1.6), read with libzip.
//   <prefix>/data.pkl      the state dict, a pickle (read by an interpreter that calls nothing)
//   <prefix>/data/<key>    each storage's raw little-endian elements
//   <prefix>/version, <prefix>/byteorder ("little" if present)
// Tensors come out as SafeTensor, exactly as from a safetensors file, so a head loads the same
// from either.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "vkspec/safetensors.hpp"

namespace vkspec {

class TorchFile {
 public:
  // Throws vkspec::Error naming the file and the problem: not a zip (or the pre-1.6 format),
  // entries missing or larger than the archive can hold, a pickle that names any global or
  // opcode a state dict does not need (os.system, builtins.eval, ...), storages of another
  // dtype, views reaching outside their storage, a non-tensor value in the dict.
  static TorchFile open(const std::string& path);
  // The same from bytes in memory (`name` stands for the path in messages); for tests and fuzzers.
  static TorchFile from_bytes(std::string name, std::vector<uint8_t> bytes);
  TorchFile(TorchFile&&) noexcept = default;
  TorchFile& operator=(TorchFile&&) = delete;
  const SafeTensor& get(const std::string& name, const std::vector<uint64_t>& shape) const {
    return find_tensor(tensors_, path_, name, shape);
  }
  const std::string& path() const { return path_; }
  const std::map<std::string, SafeTensor>& tensors() const { return tensors_; }

 private:
  TorchFile() = default;
  std::string path_;
  // Storage bytes read from the archive, and contiguous copies of strided views; tensors point
  // into these (a moved vector keeps its buffer, so moving the file keeps the pointers valid).
  std::vector<std::vector<uint8_t>> buffers_;
  std::map<std::string, SafeTensor> tensors_;
};

}  // namespace vkspec
