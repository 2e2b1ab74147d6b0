// GGUF reader: see include/vkspec/gguf.hpp for the layout. The parser walks a bounds-checked
// cursor over the mapping; every failure names the file, the key or tensor, and what was expected.
#include "vkspec/gguf.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <sstream>

#include "vkspec/dtype.hpp"

namespace vkspec {

const char* gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::U8: return "u8";
    case GgufType::I8: return "i8";
    case GgufType::U16: return "u16";
    case GgufType::I16: return "i16";
    case GgufType::U32: return "u32";
    case GgufType::I32: return "i32";
    case GgufType::F32: return "f32";
    case GgufType::BOOL: return "bool";
    case GgufType::STRING: return "string";
    case GgufType::ARRAY: return "array";
    case GgufType::U64: return "u64";
    case GgufType::I64: return "i64";
    case GgufType::F64: return "f64";
  }
  return "unknown";
}

size_t gguf_scalar_size(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::BOOL: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
    case GgufType::U64: case GgufType::I64: case GgufType::F64: return 8;
    default: return 0;
  }
}

const char* ggml_type_name(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return "f32";
    case GgmlType::F16: return "f16";
    case GgmlType::Q4_0: return "q4_0";
    case GgmlType::Q8_0: return "q8_0";
    case GgmlType::BF16: return "bf16";
  }
  return "unknown";
}

bool ggml_type_supported(uint32_t t) { return t == 0 || t == 1 || t == 2 || t == 8 || t == 30; }

uint64_t ggml_block_elems(GgmlType t) {
  return (t == GgmlType::Q4_0 || t == GgmlType::Q8_0) ? 32 : 1;
}

uint64_t ggml_block_bytes(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return 4;
    case GgmlType::F16: case GgmlType::BF16: return 2;
    case GgmlType::Q4_0: return kQ4_0Bytes;
    case GgmlType::Q8_0: return kQ8_0Bytes;
  }
  return 0;
}

bool GgufValue::is_int() const {
  switch (type) {
    case GgufType::U8: case GgufType::I8: case GgufType::U16: case GgufType::I16:
    case GgufType::U32: case GgufType::I32: case GgufType::U64: case GgufType::I64: return true;
    default: return false;
  }
}

namespace {

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Widen a scalar stored at p into the value's u/i/f fields.
void decode_scalar(GgufType t, const uint8_t* p, GgufValue& v) {
  switch (t) {
    case GgufType::U8: v.u = load<uint8_t>(p); v.i = int64_t(v.u); break;
    case GgufType::I8: v.i = load<int8_t>(p); v.u = uint64_t(v.i); break;
    case GgufType::U16: v.u = load<uint16_t>(p); v.i = int64_t(v.u); break;
    case GgufType::I16: v.i = load<int16_t>(p); v.u = uint64_t(v.i); break;
    case GgufType::U32: v.u = load<uint32_t>(p); v.i = int64_t(v.u); break;
    case GgufType::I32: v.i = load<int32_t>(p); v.u = uint64_t(v.i); break;
    case GgufType::U64: v.u = load<uint64_t>(p); v.i = int64_t(v.u); break;
    case GgufType::I64: v.i = load<int64_t>(p); v.u = uint64_t(v.i); break;
    case GgufType::F32: v.f = load<float>(p); break;
    case GgufType::F64: v.f = load<double>(p); break;
    case GgufType::BOOL: v.u = load<uint8_t>(p) != 0; v.i = int64_t(v.u); break;
    default: break;
  }
}

}  // namespace

int64_t GgufValue::elem_i64(uint64_t idx) const {
  GgufValue v;
  decode_scalar(elem_type, raw + idx * gguf_scalar_size(elem_type), v);
  return v.i;
}

double GgufValue::elem_f64(uint64_t idx) const {
  GgufValue v;
  decode_scalar(elem_type, raw + idx * gguf_scalar_size(elem_type), v);
  if (elem_type == GgufType::F32 || elem_type == GgufType::F64) return v.f;
  return double(v.i);
}

std::string GgufTensor::shape_str() const {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// ---- the bounds-checked cursor ----------------------------------------------------------------

namespace {

struct Cursor {
  const GgufFile& file;
  const uint8_t* base;
  uint64_t size;
  uint64_t pos = 0;

  uint64_t remaining() const { return size - pos; }

  // `what` names the field being read so a short file says which part was cut off.
  void need(uint64_t n, const std::string& what) const {
    if (n > remaining()) {
      std::ostringstream os;
      os << "truncated " << what << ": needs " << n << " bytes at offset " << pos << ", but only "
         << remaining() << " remain (file size " << size << ")";
      file.fail(os.str());
    }
  }
  template <class T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T v = load<T>(base + pos);
    pos += sizeof(T);
    return v;
  }
  std::string_view read_string(const std::string& what) {
    const uint64_t n = read<uint64_t>(what + " length");
    if (n > remaining()) {
      std::ostringstream os;
      os << what << ": string length " << n << " runs past the end of the file (only "
         << remaining() << " bytes remain at offset " << pos << ")";
      file.fail(os.str());
    }
    std::string_view s(reinterpret_cast<const char*>(base + pos), size_t(n));
    pos += n;
    return s;
  }
};

// Smallest encoding of one element of type t (so `count * min_size <= remaining` bounds counts).
uint64_t min_encoded_size(GgufType t) {
  if (t == GgufType::STRING) return 8;           // the length
  if (t == GgufType::ARRAY) return 4 + 8;        // element type + count
  return gguf_scalar_size(t);
}

void read_value(Cursor& c, GgufType type, GgufValue& v, const std::string& key, int depth);

void read_array(Cursor& c, GgufValue& v, const std::string& key, int depth) {
  if (depth > 4) c.file.fail("metadata key '" + key + "': arrays nested deeper than 4 levels");
  const uint32_t et = c.read<uint32_t>("metadata key '" + key + "' array element type");
  if (et > uint32_t(GgufType::F64))
    c.file.fail("metadata key '" + key + "': unknown array element type " + std::to_string(et) +
                " (expected 0..12)");
  v.elem_type = GgufType(et);
  v.count = c.read<uint64_t>("metadata key '" + key + "' array count");
  const uint64_t min_size = min_encoded_size(v.elem_type);
  if (v.count > c.remaining() / min_size) {
    std::ostringstream os;
    os << "metadata key '" << key << "': array count " << v.count << " of "
       << gguf_type_name(v.elem_type) << " needs at least " << min_size
       << " bytes each, but only " << c.remaining() << " bytes remain";
    c.file.fail(os.str());
  }
  if (v.elem_type == GgufType::STRING) {
    v.strings.reserve(size_t(v.count));  // bounded: count <= remaining / 8
    for (uint64_t i = 0; i < v.count; ++i)
      v.strings.push_back(c.read_string("metadata key '" + key + "' element " + std::to_string(i)));
  } else if (v.elem_type == GgufType::ARRAY) {
    v.arrays.resize(size_t(v.count));
    for (uint64_t i = 0; i < v.count; ++i) {
      v.arrays[i].type = GgufType::ARRAY;
      read_array(c, v.arrays[i], key + "[" + std::to_string(i) + "]", depth + 1);
    }
  } else {
    v.raw = c.base + c.pos;
    c.pos += v.count * min_size;  // checked above
  }
}

void read_value(Cursor& c, GgufType type, GgufValue& v, const std::string& key, int depth) {
  v.type = type;
  if (type == GgufType::STRING) {
    v.str = c.read_string("metadata key '" + key + "' string value");
  } else if (type == GgufType::ARRAY) {
    read_array(c, v, key, depth);
  } else {
    const size_t n = gguf_scalar_size(type);
    c.need(n, "metadata key '" + key + "' " + gguf_type_name(type) + " value");
    decode_scalar(type, c.base + c.pos, v);
    c.pos += n;
  }
}

}  // namespace

// ---- open / parse ----------------------------------------------------------------------------

void GgufFile::fail(const std::string& msg) const { throw Error(path_ + ": " + msg); }

GgufFile GgufFile::open(const std::string& path) {
  GgufFile f;
  f.path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) f.fail(std::string("cannot open GGUF file: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    f.fail(std::string("cannot stat GGUF file: ") + std::strerror(e));
  }
  f.size_ = uint64_t(st.st_size);
  if (f.size_ > 0) {
    void* p = ::mmap(nullptr, size_t(f.size_), PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      f.fail(std::string("cannot mmap GGUF file: ") + std::strerror(e));
    }
    f.base_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping keeps the file alive
  f.parse();    // on throw, f's destructor unmaps
  return f;
}

GgufFile::GgufFile(GgufFile&& o) noexcept { *this = std::move(o); }

GgufFile& GgufFile::operator=(GgufFile&& o) noexcept {
  if (this != &o) {
    if (base_) ::munmap(const_cast<uint8_t*>(base_), size_t(size_));
    path_ = std::move(o.path_);
    base_ = o.base_;
    size_ = o.size_;
    version_ = o.version_;
    alignment_ = o.alignment_;
    data_offset_ = o.data_offset_;
    // string_views point into the mapping, which does not move: moving the containers is safe.
    kv_ = std::move(o.kv_);
    kv_index_ = std::move(o.kv_index_);
    tensors_ = std::move(o.tensors_);
    tensor_index_ = std::move(o.tensor_index_);
    o.base_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

GgufFile::~GgufFile() {
  if (base_) ::munmap(const_cast<uint8_t*>(base_), size_t(size_));
}

void GgufFile::parse() {
  Cursor c{*this, base_, size_};

  // Header.
  c.need(4, "header (magic)");
  if (std::memcmp(base_, "GGUF", 4) != 0) {
    std::string found;
    for (int i = 0; i < 4; ++i) {
      const char ch = char(base_[i]);
      found += (ch >= 32 && ch < 127) ? std::string(1, ch) : "\\x" + std::to_string(uint8_t(ch));
    }
    fail("bad magic: expected 'GGUF', found '" + found + "' (not a GGUF file)");
  }
  c.pos = 4;
  version_ = c.read<uint32_t>("header (version)");
  if (version_ != 2 && version_ != 3)
    fail("unsupported GGUF version " + std::to_string(version_) + " (expected 2 or 3)");
  const uint64_t n_tensors = c.read<uint64_t>("header (tensor count)");
  const uint64_t n_kv = c.read<uint64_t>("header (metadata count)");
  // Bound counts by the smallest possible encodings: a kv is >= 8 (key len) + 4 (type) + 1,
  // a tensor info >= 8 (name len) + 4 (n_dims) + 4 (type) + 8 (offset).
  if (n_kv > c.remaining() / 13)
    fail("metadata count " + std::to_string(n_kv) + " is impossible: only " +
         std::to_string(c.remaining()) + " bytes follow the header (>= 13 per entry)");
  if (n_tensors > c.remaining() / 24)
    fail("tensor count " + std::to_string(n_tensors) + " is impossible: only " +
         std::to_string(c.remaining()) + " bytes follow the header (>= 24 per tensor info)");

  // Metadata.
  kv_.reserve(size_t(n_kv));
  for (uint64_t k = 0; k < n_kv; ++k) {
    const std::string idx = "metadata entry " + std::to_string(k);
    const std::string_view key = c.read_string(idx + " key");
    const std::string keys(key);
    if (kv_index_.count(key)) fail("duplicate metadata key '" + keys + "'");
    const uint32_t type = c.read<uint32_t>("metadata key '" + keys + "' type");
    if (type > uint32_t(GgufType::F64))
      fail("metadata key '" + keys + "': unknown value type " + std::to_string(type) + " (expected 0..12)");
    GgufValue v;
    read_value(c, GgufType(type), v, keys, 0);
    kv_index_.emplace(key, kv_.size());
    kv_.emplace_back(key, std::move(v));
  }

  if (const GgufValue* a = find("general.alignment")) {
    if (a->type != GgufType::U32)
      fail(std::string("metadata key 'general.alignment': expected u32, found ") + gguf_type_name(a->type));
    if (a->u == 0 || (a->u & (a->u - 1)) != 0)
      fail("metadata key 'general.alignment': expected a nonzero power of two, found " + std::to_string(a->u));
    alignment_ = a->u;
  }

  // Tensor infos.
  tensors_.reserve(size_t(n_tensors));
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensor t;
    t.name = c.read_string("tensor info " + std::to_string(k) + " name");
    const std::string tn = "tensor '" + std::string(t.name) + "'";
    if (tensor_index_.count(t.name)) fail("duplicate tensor name '" + std::string(t.name) + "'");
    const uint32_t nd = c.read<uint32_t>(tn + " n_dims");
    if (nd < 1 || nd > 4) fail(tn + ": n_dims " + std::to_string(nd) + " (expected 1..4)");
    c.need(uint64_t(nd) * 8, tn + " dims");
    t.n_elements = 1;
    for (uint32_t d = 0; d < nd; ++d) {
      const uint64_t n = c.read<uint64_t>(tn + " dims");
      t.dims.push_back(n);
      // ggml keeps element counts in int64: the product must fit.
      if (n != 0 && t.n_elements > uint64_t(std::numeric_limits<int64_t>::max()) / n)
        fail(tn + ": dims " + t.shape_str() + " overflow: element count does not fit in int64");
      t.n_elements *= n;
    }
    const uint32_t ty = c.read<uint32_t>(tn + " type");
    if (!ggml_type_supported(ty))
      fail(tn + ": unsupported tensor type " + std::to_string(ty) +
           " (supported: f32=0, f16=1, q4_0=2, q8_0=8, bf16=30)");
    t.type = GgmlType(ty);
    const uint64_t be = ggml_block_elems(t.type);
    if (t.dims[0] % be != 0)
      fail(tn + ": row length " + std::to_string(t.dims[0]) + " is not a multiple of the " +
           ggml_type_name(t.type) + " block size " + std::to_string(be));
    t.n_bytes = t.n_elements / be * ggml_block_bytes(t.type);  // <= 2^63 / 32 * 34 <= 2^64 - 1
    t.offset = c.read<uint64_t>(tn + " offset");
    if (t.offset % alignment_ != 0)
      fail(tn + ": data offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
           std::to_string(alignment_));
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment. A file without tensors
  // (vocab-only) may end before that padding.
  data_offset_ = (c.pos + alignment_ - 1) / alignment_ * alignment_;
  if (data_offset_ > size_) {
    if (!tensors_.empty())
      fail("truncated: data section would start at offset " + std::to_string(data_offset_) +
           " but the file has " + std::to_string(size_) + " bytes");
    data_offset_ = size_;
  }
  const uint64_t data_size = size_ - data_offset_;
  for (GgufTensor& t : tensors_) {
    if (t.offset > data_size || t.n_bytes > data_size - t.offset)
      fail("tensor '" + std::string(t.name) + "' " + t.shape_str() + " " + ggml_type_name(t.type) +
           ": data [" + std::to_string(t.offset) + ", +" + std::to_string(t.n_bytes) +
           ") runs past the end of the data section (" + std::to_string(data_size) +
           " bytes): file truncated or offset wrong");
    t.data = base_ + data_offset_ + t.offset;
  }
}

// ---- lookups ---------------------------------------------------------------------------------

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const GgufTensor* GgufFile::tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensor& GgufFile::require_tensor(std::string_view name) const {
  const GgufTensor* t = tensor(name);
  if (!t) fail("missing required tensor '" + std::string(name) + "'");
  return *t;
}

namespace {
[[noreturn]] void wrong_type(const GgufFile& f, std::string_view key, const char* expected, const GgufValue* v) {
  if (!v) f.fail("missing required metadata key '" + std::string(key) + "' (expected " + expected + ")");
  f.fail("metadata key '" + std::string(key) + "': expected " + expected + ", found " + gguf_type_name(v->type));
}
}  // namespace

uint32_t GgufFile::get_u32(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v || !v->is_int()) wrong_type(*this, key, "an unsigned 32-bit integer", v);
  if (v->i < 0 || v->u > std::numeric_limits<uint32_t>::max())
    fail("metadata key '" + std::string(key) + "': value " + std::to_string(v->i) + " does not fit in u32");
  return uint32_t(v->u);
}

uint32_t GgufFile::get_u32(std::string_view key, uint32_t fallback) const {
  return has(key) ? get_u32(key) : fallback;
}

int64_t GgufFile::get_i64(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v || !v->is_int()) wrong_type(*this, key, "an integer", v);
  if (v->type == GgufType::U64 && v->u > uint64_t(std::numeric_limits<int64_t>::max()))
    fail("metadata key '" + std::string(key) + "': value does not fit in i64");
  return v->i;
}

float GgufFile::get_f32(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v || !(v->is_float() || v->is_int())) wrong_type(*this, key, "a number (f32)", v);
  return v->is_float() ? float(v->f) : float(v->i);
}

float GgufFile::get_f32(std::string_view key, float fallback) const {
  return has(key) ? get_f32(key) : fallback;
}

bool GgufFile::get_bool(std::string_view key, bool fallback) const {
  const GgufValue* v = find(key);
  if (!v) return fallback;
  if (v->type != GgufType::BOOL) wrong_type(*this, key, "bool", v);
  return v->u != 0;
}

std::string_view GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v || v->type != GgufType::STRING) wrong_type(*this, key, "string", v);
  return v->str;
}

std::string_view GgufFile::get_string(std::string_view key, std::string_view fallback) const {
  return has(key) ? get_string(key) : fallback;
}

const GgufValue& GgufFile::get_array(std::string_view key, GgufType expect) const {
  const GgufValue* v = find(key);
  const std::string what = std::string("array of ") + gguf_type_name(expect);
  if (!v || v->type != GgufType::ARRAY) wrong_type(*this, key, what.c_str(), v);
  GgufValue probe;
  probe.type = expect;
  GgufValue elem;
  elem.type = v->elem_type;
  const bool ok = v->elem_type == expect || (probe.is_int() && elem.is_int()) ||
                  (probe.is_float() && elem.is_float());
  if (!ok)
    fail("metadata key '" + std::string(key) + "': expected " + what + ", found array of " +
         gguf_type_name(v->elem_type));
  return *v;
}

// ---- dequantization --------------------------------------------------------------------------

std::vector<float> dequantize_tensor(const GgufTensor& t) {
  std::vector<float> out(size_t(t.n_elements));
  const uint8_t* p = t.data;
  switch (t.type) {
    case GgmlType::F32:
      std::memcpy(out.data(), p, out.size() * 4);
      break;
    case GgmlType::F16:
      for (size_t i = 0; i < out.size(); ++i) out[i] = f16_to_f32(load<uint16_t>(p + 2 * i));
      break;
    case GgmlType::BF16:
      for (size_t i = 0; i < out.size(); ++i) out[i] = bf16_to_f32(load<uint16_t>(p + 2 * i));
      break;
    case GgmlType::Q8_0:
      for (size_t b = 0; b < out.size() / kQ8_0Block; ++b)
        dequantize_q8_0_block(p + b * kQ8_0Bytes, out.data() + b * kQ8_0Block);
      break;
    case GgmlType::Q4_0:
      for (size_t b = 0; b < out.size() / kQ4_0Block; ++b)
        dequantize_q4_0_block(p + b * kQ4_0Bytes, out.data() + b * kQ4_0Block);
      break;
  }
  return out;
}

}  // namespace vkspec
