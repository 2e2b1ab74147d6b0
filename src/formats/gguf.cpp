// GGUF reader: see include/vkspec/gguf.hpp for the layout. The parser walks a bounds-checked
// cursor over the mapping; every failure names the file, the key or tensor, and what was expected.
#include "vkspec/gguf.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <sstream>

#include "vkspec/dtype.hpp"
#include "vkspec/quants.hpp"
#include "byte_ranges.hpp"
#include "regular_file.hpp"

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
    case GgmlType::BF16: return "bf16";
    default: break;
  }
  const BlockFormat* f = block_format(uint32_t(t));
  return f ? f->name : "unknown";
}

bool ggml_type_supported(uint32_t t) { return t == 0 || t == 1 || t == 30 || block_format(t) != nullptr; }

uint64_t ggml_block_elems(GgmlType t) {
  const BlockFormat* f = block_format(uint32_t(t));
  return f ? f->elems : 1;
}

uint64_t ggml_block_bytes(GgmlType t) {
  if (const BlockFormat* f = block_format(uint32_t(t))) return f->bytes;
  return t == GgmlType::F32 ? 4 : t == GgmlType::F16 || t == GgmlType::BF16 ? 2 : 0;
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

// Memory the parsed tables may take, whatever the file claims: metadata entries, string-array
// views, nested arrays and tensor infos. A real vocabulary of 256k tokens with its merges needs
// ~10 MB; anything past this is a hostile or broken file.
constexpr uint64_t kTableBudget = 64ull << 20;
// Heap cost of one metadata entry / tensor info, with its hash-index node.
constexpr uint64_t kIndexNodeBytes = 64;

// Bytes are bounded in two ways before anything is allocated:
//  - `promised`: the minimum encoded size of every item a count has declared but the parser has
//    not reached yet. A count may only claim what is left after those promises, so sibling
//    arrays (or metadata entries and tensor infos) cannot each claim the same remaining bytes,
//    and everything declared fits in the file at once.
//  - `budget`: heap bytes the tables may still take (kTableBudget in all).
struct Cursor {
  const GgufFile& file;
  const uint8_t* base;
  uint64_t size;
  uint64_t pos = 0;
  uint64_t promised = 0;
  uint64_t budget = kTableBudget;

  uint64_t remaining() const { return size - pos; }
  // An item longer than its minimum may read into bytes promised to later items (which will
  // then be found truncated): saturate rather than wrap.
  uint64_t available() const { return promised < remaining() ? remaining() - promised : 0; }

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
  // `what()` is only built on failure: it runs once per vocabulary string otherwise.
  template <class What>
  std::string_view read_string(const What& what) {
    if (remaining() < 8) need(8, what() + " length");
    const uint64_t n = load<uint64_t>(base + pos);
    pos += 8;
    if (n > available()) {
      std::ostringstream os;
      os << what() << ": string length " << n << " runs past the end of the file (only " << available()
         << " bytes remain at offset " << pos << (promised ? " after what earlier counts promised" : "") << ")";
      file.fail(os.str());
    }
    std::string_view s(reinterpret_cast<const char*>(base + pos), size_t(n));
    pos += n;
    return s;
  }

  // A count declares `count` items of at least `min_size` bytes each, each taking `heap` bytes
  // once parsed. Checked against the unpromised bytes and the budget, then promised.
  // `what` names the count ("tensor count 7"), `unit` one item ("tensor info").
  void claim(uint64_t count, uint64_t min_size, uint64_t heap, const std::string& what, const char* unit) {
    if (count > available() / min_size) {
      std::ostringstream os;
      os << what << " is impossible: needs at least " << min_size << " bytes per " << unit << ", but only "
         << available() << " bytes remain" << (promised ? " after what earlier counts promised" : "");
      file.fail(os.str());
    }
    if (heap && count > budget / heap) {
      std::ostringstream os;
      os << what << " is refused: it would take more than the " << (kTableBudget >> 20)
         << " MiB this reader allows for the metadata and tensor tables in memory";
      file.fail(os.str());
    }
    promised += count * min_size;
    budget -= count * heap;
  }
  // The parser reached one of the promised items: its bytes are now read, not promised.
  void begin_item(uint64_t min_size) { promised -= min_size; }
};

// Smallest encoding of one element of type t (so `count * min_size <= remaining` bounds counts).
uint64_t min_encoded_size(GgufType t) {
  if (t == GgufType::STRING) return 8;           // the length
  if (t == GgufType::ARRAY) return 4 + 8;        // element type + count
  return gguf_scalar_size(t);
}

void read_array(Cursor& c, GgufValue& v, const std::string& key, int depth) {
  if (depth > 4) c.file.fail("metadata key '" + key + "': arrays nested deeper than 4 levels");
  const uint32_t et = c.read<uint32_t>("metadata key '" + key + "' array element type");
  if (et > uint32_t(GgufType::F64))
    c.file.fail("metadata key '" + key + "': unknown array element type " + std::to_string(et) +
                " (expected 0..12)");
  v.elem_type = GgufType(et);
  v.count = c.read<uint64_t>("metadata key '" + key + "' array count");
  const uint64_t min_size = min_encoded_size(v.elem_type);
  const uint64_t heap = v.elem_type == GgufType::STRING  ? sizeof(std::string_view)
                        : v.elem_type == GgufType::ARRAY ? sizeof(GgufValue)
                                                         : 0;  // numbers stay in the mapping
  c.claim(v.count, min_size, heap,
          "metadata key '" + key + "': array count " + std::to_string(v.count) + " of " + gguf_type_name(v.elem_type),
          "element");
  if (v.elem_type == GgufType::STRING) {
    v.strings.reserve(size_t(v.count));  // claimed above: within the file and the budget
    for (uint64_t i = 0; i < v.count; ++i) {
      c.begin_item(min_size);
      v.strings.push_back(
          c.read_string([&] { return "metadata key '" + key + "' element " + std::to_string(i); }));
    }
  } else if (v.elem_type == GgufType::ARRAY) {
    v.arrays.reserve(size_t(v.count));  // claimed above
    for (uint64_t i = 0; i < v.count; ++i) {
      c.begin_item(min_size);
      GgufValue& e = v.arrays.emplace_back();
      e.type = GgufType::ARRAY;
      read_array(c, e, key + "[" + std::to_string(i) + "]", depth + 1);
    }
  } else {
    c.begin_item(v.count * min_size);  // the elements are read right here
    v.raw = c.base + c.pos;
    c.pos += v.count * min_size;
  }
}

void read_value(Cursor& c, GgufType type, GgufValue& v, const std::string& key) {
  v.type = type;
  if (type == GgufType::STRING) {
    v.str = c.read_string([&] { return "metadata key '" + key + "' string value"; });
  } else if (type == GgufType::ARRAY) {
    read_array(c, v, key, 0);
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
  const int fd = open_regular_file(path, "GGUF file", &f.size_);
  if (f.size_ > 0) {
    void* p = ::mmap(nullptr, size_t(f.size_), PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      f.fail(std::string("cannot mmap GGUF file: ") + std::strerror(e));
    }
    f.base_ = static_cast<const uint8_t*>(p);
  }
  f.mapped_ = f.base_ != nullptr;
  ::close(fd);  // the mapping keeps the file alive
  f.parse();    // on throw, f's destructor unmaps
  return f;
}

GgufFile GgufFile::from_bytes(std::string name, std::vector<uint8_t> bytes) {
  GgufFile f;
  f.path_ = std::move(name);
  f.owned_ = std::move(bytes);
  f.base_ = f.owned_.empty() ? nullptr : f.owned_.data();
  f.size_ = f.owned_.size();
  f.parse();
  return f;
}

GgufFile::GgufFile(GgufFile&& o) noexcept { *this = std::move(o); }

GgufFile& GgufFile::operator=(GgufFile&& o) noexcept {
  if (this != &o) {
    if (mapped_) ::munmap(const_cast<uint8_t*>(base_), size_t(size_));
    path_ = std::move(o.path_);
    owned_ = std::move(o.owned_);  // a moved vector keeps its buffer: views into it stay valid
    mapped_ = o.mapped_;
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
    o.mapped_ = false;
  }
  return *this;
}

GgufFile::~GgufFile() {
  if (mapped_) ::munmap(const_cast<uint8_t*>(base_), size_t(size_));
}

void GgufFile::parse() {
  Cursor c{*this, base_, size_};

  // Header.
  c.need(4, "header (magic)");
  if (std::memcmp(base_, "GGUF", 4) != 0) {
    std::string found;
    for (int i = 0; i < 4; ++i) {
      const uint8_t ch = base_[i];
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", unsigned(ch));
      found += (ch >= 32 && ch < 127) ? std::string(1, char(ch)) : std::string(hex);
    }
    fail("bad magic: expected 'GGUF', found '" + found + "' (not a GGUF file)");
  }
  c.pos = 4;
  version_ = c.read<uint32_t>("header (version)");
  if (version_ != 2 && version_ != 3)
    fail("unsupported GGUF version " + std::to_string(version_) + " (expected 2 or 3)");
  const uint64_t n_tensors = c.read<uint64_t>("header (tensor count)");
  const uint64_t n_kv = c.read<uint64_t>("header (metadata count)");
  // Both counts are claimed at once by the smallest possible encodings: a kv is >= 8 (key len)
  // + 4 (type) + 1, a tensor info >= 8 (name len) + 4 (n_dims) + 8 (one dim) + 4 (type) + 8
  // (offset).
  constexpr uint64_t kMinKv = 13, kMinTensor = 32;
  c.claim(n_kv, kMinKv, sizeof(kv_[0]) + kIndexNodeBytes, "metadata count " + std::to_string(n_kv), "entry");
  c.claim(n_tensors, kMinTensor, sizeof(GgufTensor) + 4 * sizeof(uint64_t) + kIndexNodeBytes,
          "tensor count " + std::to_string(n_tensors), "tensor info");

  // Metadata.
  kv_.reserve(size_t(n_kv));
  kv_index_.reserve(size_t(n_kv));
  for (uint64_t k = 0; k < n_kv; ++k) {
    c.begin_item(kMinKv);
    const std::string_view key = c.read_string([&] { return "metadata entry " + std::to_string(k) + " key"; });
    const std::string keys(key);
    if (kv_index_.count(key)) fail("duplicate metadata key '" + keys + "'");
    const uint32_t type = c.read<uint32_t>("metadata key '" + keys + "' type");
    if (type > uint32_t(GgufType::F64))
      fail("metadata key '" + keys + "': unknown value type " + std::to_string(type) + " (expected 0..12)");
    GgufValue v;
    read_value(c, GgufType(type), v, keys);
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
  tensor_index_.reserve(size_t(n_tensors));
  for (uint64_t k = 0; k < n_tensors; ++k) {
    c.begin_item(kMinTensor);
    GgufTensor t;
    t.name = c.read_string([&] { return "tensor info " + std::to_string(k) + " name"; });
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
           " (supported: f32=0, f16=1, q4_0=2, q5_0=6, q5_1=7, q8_0=8, q3_K=11, q4_K=12, q5_K=13, q6_K=14, "
           "iq4_xs=23, bf16=30)");
    t.type = GgmlType(ty);
    const uint64_t be = ggml_block_elems(t.type);
    if (t.dims[0] % be != 0)
      fail(tn + ": row length " + std::to_string(t.dims[0]) + " is not a multiple of the " +
           ggml_type_name(t.type) + " block size " + std::to_string(be));
    // f32 data of 2^62 elements is 2^64 bytes: bound the block count before multiplying, or the
    // size wraps to a small number that passes the bounds check below.
    const uint64_t blocks = t.n_elements / be;
    if (blocks > size_ / ggml_block_bytes(t.type))
      fail(tn + " " + t.shape_str() + " " + ggml_type_name(t.type) + ": needs more bytes than the whole file has (" +
           std::to_string(size_) + ")");
    t.n_bytes = blocks * ggml_block_bytes(t.type);
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
  // llama.cpp insists on tensors one after another; we refuse only what aliases (holes stay readable).
  std::vector<ByteRange> ranges;
  for (const GgufTensor& t : tensors_) ranges.push_back({t.offset, t.offset + t.n_bytes, t.name});
  if (const auto o = first_overlap(std::move(ranges))) {
    const auto& [a, b] = *o;
    fail("tensors '" + std::string(a.name) + "' (data [" + std::to_string(a.begin) + ", +" + std::to_string(a.end - a.begin) +
         ")) and '" + std::string(b.name) + "' ([" + std::to_string(b.begin) + ", +" + std::to_string(b.end - b.begin) +
         ")) overlap in the data section");
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
  if (out.empty()) return out;  // data() may be null, and memcpy(nullptr, p, 0) is undefined
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
    default:
      dequantize_blocks(*block_format(uint32_t(t.type)), p, out.data(), out.size());  // the reader admits no other type
      break;
  }
  return out;
}

}  // namespace vkspec
