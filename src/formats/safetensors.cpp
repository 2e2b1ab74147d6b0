#include "vkspec/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <nlohmann/json.hpp>

#include "vkspec/dtype.hpp"
#include "vkspec/error.hpp"
#include "byte_ranges.hpp"
#include "json_excerpt.hpp"
#include "regular_file.hpp"

namespace vkspec {

uint64_t dtype_bytes(const std::string& d) {
  if (d == "F32") return 4;
  if (d == "F16" || d == "BF16") return 2;
  if (d == "I64") return 8;
  if (d == "BOOL") return 1;
  return 0;
}

std::string shape_str(const std::vector<uint64_t>& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
  return o + "]";
}

std::vector<float> SafeTensor::to_f32() const {
  const uint64_t n = bytes / dtype_bytes(dtype);
  std::vector<float> out(static_cast<size_t>(n));
  for (uint64_t i = 0; i < n; ++i) {
    if (dtype == "F32") {
      std::memcpy(&out[i], data + 4 * i, 4);
    } else if (dtype == "I64") {
      int64_t v;
      std::memcpy(&v, data + 8 * i, 8);
      out[i] = float(v);
    } else if (dtype == "BOOL") {
      out[i] = data[i] ? 1.0f : 0.0f;
    } else {
      uint16_t h;
      std::memcpy(&h, data + 2 * i, 2);
      out[i] = dtype == "F16" ? f16_to_f32(h) : bf16_to_f32(h);
    }
  }
  return out;
}

const SafeTensor& find_tensor(const std::map<std::string, SafeTensor>& tensors, const std::string& file,
                              const std::string& name, const std::vector<uint64_t>& shape) {
  auto it = tensors.find(name);
  if (it == tensors.end()) throw Error(file + ": missing tensor " + name);
  if (it->second.shape != shape)
    throw Error(file + ": tensor " + name + " has shape " + shape_str(it->second.shape) + ", expected " +
                shape_str(shape));
  return it->second;
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile f;
  f.path_ = path;
  const int fd = open_regular_file(path, "safetensors file", &f.size_);
  if (f.size_ < 8) {
    ::close(fd);
    f.fail("file of " + std::to_string(f.size_) + " bytes is too short for a safetensors header");
  }
  void* m = mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED) f.fail(std::string("mmap failed: ") + std::strerror(errno));
  f.map_ = m;
  f.base_ = static_cast<const uint8_t*>(m);
  f.parse();
  return f;
}

SafetensorsFile SafetensorsFile::from_bytes(std::string name, std::vector<uint8_t> bytes) {
  SafetensorsFile f;
  f.path_ = std::move(name);
  f.owned_ = std::move(bytes);
  f.base_ = f.owned_.data();
  f.size_ = f.owned_.size();
  if (f.size_ < 8) f.fail("file of " + std::to_string(f.size_) + " bytes is too short for a safetensors header");
  f.parse();
  return f;
}

void SafetensorsFile::fail(const std::string& msg) const { throw Error(path_ + ": " + msg); }

namespace {

// A JSON value that must be a non-negative integer: floats such as 192.5 (or 192.0) and negative
// numbers are refused, not converted.
bool non_negative_integer(const nlohmann::json& v, uint64_t& out) {
  if (v.is_number_unsigned()) {
    out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    out = uint64_t(v.get<int64_t>());
    return true;
  }
  return false;
}

}  // namespace

void SafetensorsFile::parse() {
  uint64_t hlen;
  std::memcpy(&hlen, base_, 8);
  // The format caps the header at 100 MB; a larger claim is a corrupt length.
  constexpr uint64_t kMaxHeader = 100'000'000;
  if (hlen > size_ - 8) fail("header length " + std::to_string(hlen) + " runs past the end of the file");
  if (hlen > kMaxHeader) fail("header length " + std::to_string(hlen) + " exceeds the format's 100 MB limit");
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(std::string_view(reinterpret_cast<const char*>(base_ + 8), size_t(hlen)));
  } catch (const nlohmann::json::exception& e) {
    fail(std::string("header is not valid JSON: ") + e.what());
  }
  if (!h.is_object()) fail(std::string("header: expected a JSON object, found ") + h.type_name());
  const uint64_t data0 = 8 + hlen, data_size = size_ - data0;
  std::vector<ByteRange> ranges;  // the tensors' bytes, checked for overlap below
  for (auto item = h.cbegin(); item != h.cend(); ++item) {
    // Named references, not a structured binding: the lambda below captures them.
    const std::string& name = item.key();
    const nlohmann::json& v = item.value();
    if (name == "__metadata__") {
      if (!v.is_object()) fail(std::string("'__metadata__': expected an object, found ") + v.type_name());
      continue;
    }
    const std::string tn = "tensor '" + name + "'";
    if (!v.is_object())
      fail(tn + ": expected an object with dtype, shape and data_offsets, found " + v.type_name());
    auto field = [&](const char* key, bool (nlohmann::json::*is)() const noexcept, const char* type) -> const nlohmann::json& {
      auto it = v.find(key);
      if (it == v.end()) fail(tn + ": key '" + key + "' is missing (expected " + type + ")");
      if (!((*it).*is)()) fail(tn + ": key '" + key + "': expected " + type + ", found " + it->type_name());
      return *it;
    };
    SafeTensor t;
    t.dtype = field("dtype", &nlohmann::json::is_string, "a string").get<std::string>();
    const nlohmann::json& shape = field("shape", &nlohmann::json::is_array, "an array of non-negative integers");
    const nlohmann::json& offsets = field("data_offsets", &nlohmann::json::is_array, "an array [begin, end]");
    // Floats, and the I64 / BOOL of an EAGLE-3 head's d2t / t2d (the head checks who holds which).
    const uint64_t esize = dtype_bytes(t.dtype);
    if (esize == 0) fail(tn + ": unsupported dtype " + t.dtype + " (expected F32, F16, BF16, I64 or BOOL)");
    for (size_t i = 0; i < shape.size(); ++i) {
      uint64_t d;
      if (!non_negative_integer(shape[i], d))
        fail(tn + ": key 'shape': element " + std::to_string(i) + " is " + json_excerpt(shape[i]) +
             ", expected a non-negative integer");
      t.shape.push_back(d);
    }
    if (offsets.size() != 2) fail(tn + ": key 'data_offsets': expected 2 entries [begin, end], found " +
                                  std::to_string(offsets.size()));
    uint64_t off[2];
    for (int i = 0; i < 2; ++i)
      if (!non_negative_integer(offsets[i], off[i]))
        fail(tn + ": key 'data_offsets': entry " + std::to_string(i) + " is " + json_excerpt(offsets[i]) +
             ", expected a non-negative integer");
    if (off[0] > off[1] || off[1] > data_size)
      fail(tn + ": data_offsets [" + std::to_string(off[0]) + ", " + std::to_string(off[1]) + "] outside the " +
           std::to_string(data_size) + "-byte data section");
    // Elements times the dtype size, overflow-checked: [2^62, 4] of F32 would wrap to 0 bytes.
    uint64_t bytes = esize;
    for (uint64_t d : t.shape) {
      if (d != 0 && bytes > UINT64_MAX / d) fail(tn + ": shape " + shape_str(t.shape) + " of " + t.dtype + " overflows 64 bits");
      bytes *= d;
    }
    if (bytes != off[1] - off[0])
      fail(tn + ": " + std::to_string(off[1] - off[0]) + " bytes but shape " + shape_str(t.shape) + " of " + t.dtype +
           " needs " + std::to_string(bytes));
    t.data = base_ + data0 + off[0];
    t.bytes = bytes;
    auto placed = tensors_.emplace(name, std::move(t)).first;
    ranges.push_back({off[0], off[1], placed->first});
  }
  // The format lays tensors out one after another (its reference reader refuses an overlap too).
  if (const auto o = first_overlap(std::move(ranges))) {
    const auto& [a, b] = *o;
    fail("tensors '" + std::string(a.name) + "' (data_offsets [" + std::to_string(a.begin) + ", " + std::to_string(a.end) +
         "]) and '" + std::string(b.name) + "' ([" + std::to_string(b.begin) + ", " + std::to_string(b.end) +
         "]) overlap in the data section");
  }
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& o) noexcept
    : path_(std::move(o.path_)),
      map_(o.map_),
      owned_(std::move(o.owned_)),  // a moved vector keeps its buffer: tensor pointers stay valid
      base_(o.base_),
      size_(o.size_),
      tensors_(std::move(o.tensors_)) {
  o.map_ = nullptr;
  o.base_ = nullptr;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) munmap(map_, size_);
}

const SafeTensor& SafetensorsFile::get(const std::string& name, const std::vector<uint64_t>& shape) const {
  return find_tensor(tensors_, path_, name, shape);
}

}  // namespace vkspec
