// GGUF reader (versions 2 and 3): the file is mmap'd and nothing is copied — strings, arrays and
// tensor data are views into the mapping, which lives as long as the GgufFile.
//
// Layout (all little-endian):
//   "GGUF" u32 version u64 n_tensors u64 n_kv
//   n_kv   x { string key, u32 type, value }
//   n_tensors x { string name, u32 n_dims, u64 dims[n_dims] (innermost first), u32 ggml_type, u64 offset }
//   zero padding to general.alignment (default 32), then the data section; offsets are relative
//   to it and multiples of the alignment.
// Every count read from the file is bounded before anything is allocated, by the bytes that remain
// after what earlier counts promised and by a fixed budget for the parsed tables, so a lying file
// fails with a message instead of a giant allocation.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "vkspec/error.hpp"

namespace vkspec {

enum class GgufType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
const char* gguf_type_name(GgufType t);
size_t gguf_scalar_size(GgufType t);  // 0 for STRING/ARRAY/unknown

// Tensor element types we load (ggml's numbering). Block layouts: dtype.hpp, quants.hpp.
enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8,
  Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, IQ4_XS = 23, BF16 = 30,
};
const char* ggml_type_name(GgmlType t);
bool ggml_type_supported(uint32_t t);
uint64_t ggml_block_elems(GgmlType t);  // elements per block (1 for plain floats)
uint64_t ggml_block_bytes(GgmlType t);  // bytes per block

// One metadata value. Scalars are widened into u64/i64/f64; arrays of numbers keep a view of
// their raw little-endian elements (unaligned: read through the accessors).
struct GgufValue {
  GgufType type = GgufType::U8;
  uint64_t u = 0;  // unsigned ints and bool
  int64_t i = 0;   // signed ints
  double f = 0;    // f32 / f64
  std::string_view str;

  // Arrays only.
  GgufType elem_type = GgufType::U8;
  uint64_t count = 0;
  const uint8_t* raw = nullptr;             // numeric/bool elements, count * scalar size bytes
  std::vector<std::string_view> strings;    // elem_type == STRING
  std::vector<GgufValue> arrays;            // elem_type == ARRAY (nested; rare)

  bool is_int() const;                 // any integer scalar type
  bool is_float() const { return type == GgufType::F32 || type == GgufType::F64; }
  // Numeric array element i converted (the caller checked elem_type is numeric).
  int64_t elem_i64(uint64_t idx) const;
  double elem_f64(uint64_t idx) const;
};

struct GgufTensor {
  std::string_view name;
  std::vector<uint64_t> dims;  // innermost first: dims[0] is the row length (ggml's ne0)
  GgmlType type = GgmlType::F32;
  uint64_t offset = 0;  // from the start of the data section
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // into the mapping
  std::string shape_str() const;  // "[64, 512]"
};

class GgufFile {
 public:
  // Maps and parses the file; throws vkspec::Error naming the file and the field on any defect.
  static GgufFile open(const std::string& path);
  // Parses bytes already in memory (`name` stands for the path in messages). The fuzzers use
  // it: a heap buffer lets AddressSanitizer see any read past the end, which a page-rounded
  // mapping would hide.
  static GgufFile from_bytes(std::string name, std::vector<uint8_t> bytes);

  GgufFile(GgufFile&& o) noexcept;
  GgufFile& operator=(GgufFile&& o) noexcept;
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;
  ~GgufFile();

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // file offset of the data section
  uint64_t file_size() const { return size_; }

  // Metadata in file order.
  const std::vector<std::pair<std::string_view, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(std::string_view key) const;  // nullptr if absent
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed getters: throw naming file, key and the expected type if the key is absent or has
  // another type. Integer getters accept any integer type whose value fits.
  uint32_t get_u32(std::string_view key) const;
  uint32_t get_u32(std::string_view key, uint32_t fallback) const;
  int64_t get_i64(std::string_view key) const;
  float get_f32(std::string_view key) const;
  float get_f32(std::string_view key, float fallback) const;
  bool get_bool(std::string_view key, bool fallback) const;
  std::string_view get_string(std::string_view key) const;
  std::string_view get_string(std::string_view key, std::string_view fallback) const;
  // The array under key, checking the element type (ARRAY with elem_type; any integer type is
  // accepted when expect is an integer type and the caller reads elements via elem_i64).
  const GgufValue& get_array(std::string_view key, GgufType expect) const;

  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* tensor(std::string_view name) const;  // nullptr if absent
  const GgufTensor& require_tensor(std::string_view name) const;
  std::span<const uint8_t> data(const GgufTensor& t) const { return {t.data, size_t(t.n_bytes)}; }

  // "<file>: <msg>" as a vkspec::Error (for callers that validate on top of the reader).
  [[noreturn]] void fail(const std::string& msg) const;

 private:
  GgufFile() = default;
  void parse();

  std::string path_;
  const uint8_t* base_ = nullptr;  // mmap'd or owned bytes (nullptr when empty)
  bool mapped_ = false;            // base_ is a mapping to unmap
  std::vector<uint8_t> owned_;     // from_bytes
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string_view, GgufValue>> kv_;
  std::unordered_map<std::string_view, size_t> kv_index_;
  std::vector<GgufTensor> tensors_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
};

// Dequantize a whole tensor to f32 (any supported type). Output size = t.n_elements.
std::vector<float> dequantize_tensor(const GgufTensor& t);

}  // namespace vkspec
