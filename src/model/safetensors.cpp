#include "vkspec/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "vkspec/dtype.hpp"
#include "vkspec/error.hpp"

namespace vkspec {

namespace {
uint64_t dtype_size(const std::string& d) {
  if (d == "F32") return 4;
  if (d == "F16" || d == "BF16") return 2;
  return 0;
}
std::string shape_str(const std::vector<uint64_t>& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
  return o + "]";
}
}  // namespace

std::vector<float> SafeTensor::to_f32() const {
  const uint64_t n = bytes / dtype_size(dtype);
  std::vector<float> out(n);
  for (uint64_t i = 0; i < n; ++i) {
    if (dtype == "F32") {
      std::memcpy(&out[i], data + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, data + 2 * i, 2);
      out[i] = dtype == "F16" ? f16_to_f32(h) : bf16_to_f32(h);
    }
  }
  return out;
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile f;
  f.path_ = path;
  auto fail = [&](const std::string& m) { throw Error(path + ": " + m); };
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) fail(std::string("cannot open: ") + std::strerror(errno));
  struct stat st;
  fstat(fd, &st);
  f.size_ = uint64_t(st.st_size);
  if (f.size_ < 8) {
    ::close(fd);
    fail("file of " + std::to_string(f.size_) + " bytes is too short for a safetensors header");
  }
  f.map_ = mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (f.map_ == MAP_FAILED) {
    f.map_ = nullptr;
    fail("mmap failed");
  }
  const auto* base = static_cast<const uint8_t*>(f.map_);
  uint64_t hlen;
  std::memcpy(&hlen, base, 8);
  if (hlen > f.size_ - 8) fail("header length " + std::to_string(hlen) + " runs past the end of the file");
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(std::string(reinterpret_cast<const char*>(base + 8), hlen));
  } catch (const std::exception& e) {
    fail(std::string("header is not valid JSON: ") + e.what());
  }
  if (!h.is_object()) fail("header is not a JSON object");
  const uint64_t data0 = 8 + hlen, data_size = f.size_ - data0;
  for (auto& [name, v] : h.items()) {
    if (name == "__metadata__") continue;
    SafeTensor t;
    try {
      t.dtype = v.at("dtype").get<std::string>();
      t.shape = v.at("shape").get<std::vector<uint64_t>>();
      auto off = v.at("data_offsets").get<std::vector<uint64_t>>();
      if (off.size() != 2) fail("tensor " + name + ": data_offsets must have 2 entries");
      if (dtype_size(t.dtype) == 0) fail("tensor " + name + ": unsupported dtype " + t.dtype + " (expected F32, F16 or BF16)");
      if (off[0] > off[1] || off[1] > data_size)
        fail("tensor " + name + ": data_offsets [" + std::to_string(off[0]) + ", " + std::to_string(off[1]) +
             "] outside the " + std::to_string(data_size) + "-byte data section");
      uint64_t n = 1;
      for (uint64_t d : t.shape) {
        if (d && n > UINT64_MAX / d) fail("tensor " + name + ": shape overflows");
        n *= d;
      }
      if (n * dtype_size(t.dtype) != off[1] - off[0])
        fail("tensor " + name + ": " + std::to_string(off[1] - off[0]) + " bytes but shape " + shape_str(t.shape) +
             " of " + t.dtype + " needs " + std::to_string(n * dtype_size(t.dtype)));
      t.data = base + data0 + off[0];
      t.bytes = off[1] - off[0];
    } catch (const nlohmann::json::exception& e) {
      fail("tensor " + name + ": malformed header entry (" + e.what() + ")");
    }
    f.tensors_.emplace(name, std::move(t));
  }
  return f;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& o) noexcept
    : path_(std::move(o.path_)), map_(o.map_), size_(o.size_), tensors_(std::move(o.tensors_)) {
  o.map_ = nullptr;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) munmap(map_, size_);
}

const SafeTensor& SafetensorsFile::get(const std::string& name, const std::vector<uint64_t>& shape) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw Error(path_ + ": missing tensor " + name);
  if (it->second.shape != shape)
    throw Error(path_ + ": tensor " + name + " has shape " + shape_str(it->second.shape) + ", expected " +
                shape_str(shape));
  return it->second;
}

}  // namespace vkspec
