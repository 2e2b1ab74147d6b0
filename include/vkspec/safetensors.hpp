// safetensors reader (mmap): 8-byte little-endian header length, JSON header, raw tensor data.
// SafeTensor is also what the pytorch_model.bin reader (torch_file.hpp) produces.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace vkspec {

struct SafeTensor {
  std::string dtype;            // "F32", "F16", "BF16"; from pytorch_model.bin also "I64", "BOOL"
  std::vector<uint64_t> shape;  // outermost first (torch order)
  const uint8_t* data = nullptr;  // contiguous, row-major, little-endian
  uint64_t bytes = 0;
  std::vector<float> to_f32() const;  // I64 and BOOL become their (rounded) value
};

// Bytes per element of a SafeTensor dtype; 0 for a name no reader produces.
uint64_t dtype_bytes(const std::string& dtype);
// "[2, 3]": shapes as the readers' messages print them.
std::string shape_str(const std::vector<uint64_t>& shape);
// tensors[name] if it has exactly `shape`; otherwise throws naming `file`, the tensor and both
// shapes. The readers' get() is this.
const SafeTensor& find_tensor(const std::map<std::string, SafeTensor>& tensors, const std::string& file,
                              const std::string& name, const std::vector<uint64_t>& shape);

class SafetensorsFile {
 public:
  // Throws vkspec::Error naming the file and the field on any defect (bad header, offsets past
  // the end, size that disagrees with dtype × shape, unsupported dtype).
  // Shapes and offsets must be non-negative integers, offsets inside the data section, and
  // shape x dtype size (overflow-checked) equal to the byte range.
  static SafetensorsFile open(const std::string& path);
  // The same from bytes in memory (`name` stands for the path in messages); for the fuzzers.
  static SafetensorsFile from_bytes(std::string name, std::vector<uint8_t> bytes);
  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) = delete;
  ~SafetensorsFile();
  const SafeTensor& get(const std::string& name, const std::vector<uint64_t>& shape) const;
  const std::string& path() const { return path_; }
  const std::map<std::string, SafeTensor>& tensors() const { return tensors_; }

 private:
  SafetensorsFile() = default;
  void parse();
  [[noreturn]] void fail(const std::string& msg) const;
  std::string path_;
  void* map_ = nullptr;         // open(): the mapping
  std::vector<uint8_t> owned_;  // from_bytes()
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  std::map<std::string, SafeTensor> tensors_;
};

}  // namespace vkspec
