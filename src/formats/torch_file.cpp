#include "vkspec/torch_file.hpp"

#include <zip.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "regular_file.hpp"
#include "torch_pickle.hpp"
#include "vkspec/error.hpp"

namespace vkspec {

namespace {

// One libzip archive, read-only, closed (never written) on destruction. Every entry it hands out
// is first checked against the archive's size, so no claim in a header sizes an allocation.
class ZipArchive {
 public:
  // `src` is consumed (libzip owns it once the archive opens; it is freed here if that fails).
  // `first_byte`: the file's, to tell the pre-1.6 format (a bare pickle, 0x80 PROTO) apart.
  ZipArchive(zip_source_t* src, uint64_t archive_bytes, int first_byte, const std::string& path)
      : path_(path), archive_bytes_(archive_bytes) {
    zip_error_t err;
    zip_error_init(&err);
    // ZIP_CHECKCONS: libzip compares every local header with the central directory, so an entry
    // cannot claim one size in one and another in the other.
    za_ = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &err);
    if (!za_) {
      zip_source_free(src);
      const std::string why = zip_error_strerror(&err);
      zip_error_fini(&err);
      if (first_byte == 0x80)
        throw Error(path + ": a torch.save file from before PyTorch 1.6 (the legacy pickle format), which is not "
                           "supported: re-save it with a newer torch.save");
      throw Error(path + ": not a torch.save zip archive (libzip: " + why + ")");
    }
    zip_error_fini(&err);
  }
  ~ZipArchive() { zip_discard(za_); }
  ZipArchive(const ZipArchive&) = delete;
  ZipArchive& operator=(const ZipArchive&) = delete;

  int64_t entries() const { return zip_get_num_entries(za_, 0); }
  std::string name(int64_t i) const {
    const char* n = zip_get_name(za_, zip_uint64_t(i), ZIP_FL_ENC_RAW);
    return n ? n : "";
  }
  int64_t find(const std::string& name) const { return zip_name_locate(za_, name.c_str(), ZIP_FL_ENC_RAW); }

  // The entry's uncompressed size; only stored entries are accepted: torch.save never compresses
  // (storages are aligned for mmap), and a stored entry cannot be larger than the archive.
  uint64_t size(int64_t i, const std::string& what) const {
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(za_, zip_uint64_t(i), 0, &st) != 0) fail(what, zip_strerror(za_));
    const zip_uint64_t need = ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD;
    if ((st.valid & need) != need) fail(what, "the zip directory lacks its size or compression method");
    if (st.comp_method != ZIP_CM_STORE)
      fail(what, "compressed with zip method " + std::to_string(st.comp_method) +
                     "; torch.save stores entries uncompressed (re-save the file with torch.save)");
    if (st.size != st.comp_size || st.size > archive_bytes_)
      fail(what, "claims " + std::to_string(st.size) + " bytes (" + std::to_string(st.comp_size) + " stored) in a " +
                     std::to_string(archive_bytes_) + "-byte archive");
    return st.size;
  }
  // Exactly size(i) bytes; libzip checks the CRC as the last byte is read.
  std::vector<uint8_t> read(int64_t i, const std::string& what) const {
    std::vector<uint8_t> buf(size(i, what));
    zip_file_t* f = zip_fopen_index(za_, zip_uint64_t(i), 0);
    if (!f) fail(what, zip_strerror(za_));
    std::unique_ptr<zip_file_t, int (*)(zip_file_t*)> close(f, zip_fclose);
    uint64_t got = 0;
    while (got < buf.size()) {
      const zip_int64_t n = zip_fread(f, buf.data() + got, buf.size() - got);
      if (n < 0) fail(what, zip_file_strerror(f));
      if (n == 0) fail(what, "ends after " + std::to_string(got) + " of " + std::to_string(buf.size()) + " bytes");
      got += uint64_t(n);
    }
    uint8_t extra;
    const zip_int64_t more = zip_fread(f, &extra, 1);  // end of entry: where libzip verifies the CRC
    if (more < 0) fail(what, zip_file_strerror(f));
    if (more > 0) fail(what, "holds more bytes than its directory entry says");
    return buf;
  }

 private:
  [[noreturn]] void fail(const std::string& what, const std::string& msg) const {
    throw Error(path_ + ": " + what + ": " + msg);
  }
  zip_t* za_ = nullptr;
  std::string path_;
  uint64_t archive_bytes_;
};

bool is_contiguous(const torch_pickle::TensorView& t) {
  uint64_t expect = 1;
  for (size_t d = t.shape.size(); d-- > 0;) {
    if (t.shape[d] != 1 && t.stride[d] != expect) return false;
    expect *= t.shape[d];
  }
  return true;
}

// The view's elements in row-major order. The pickle reader has checked every index lies inside
// the storage and that there are no more elements than the storage holds.
std::vector<uint8_t> gather(const torch_pickle::TensorView& t, const uint8_t* storage, uint64_t esize, uint64_t numel) {
  std::vector<uint8_t> out(numel * esize);
  std::vector<uint64_t> idx(t.shape.size(), 0);
  for (uint64_t n = 0; n < numel; ++n) {
    uint64_t e = t.offset;
    for (size_t d = 0; d < idx.size(); ++d) e += idx[d] * t.stride[d];
    std::memcpy(out.data() + n * esize, storage + e * esize, esize);
    for (size_t d = idx.size(); d-- > 0;) {  // odometer: the last dimension turns fastest
      if (++idx[d] < t.shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

// The archive's one `<prefix>/data.pkl` (torch names the prefix after the file, or "archive").
std::string find_prefix(const ZipArchive& zip, const std::string& path) {
  std::string prefix;
  int found = 0;
  for (int64_t i = 0; i < zip.entries(); ++i) {
    const std::string n = zip.name(i);
    const size_t slash = n.find('/');
    if (slash != std::string::npos && slash > 0 && n.compare(slash, std::string::npos, "/data.pkl") == 0) {
      prefix = n.substr(0, slash);
      ++found;
    }
  }
  if (found != 1)
    throw Error(path + ": expected one <prefix>/data.pkl in the archive, found " + std::to_string(found) +
                " (not a torch.save file)");
  return prefix;
}

// Reads the state dict: the pickle, then each storage a named tensor uses, then the tensors as
// contiguous SafeTensors (pointing into a storage, or into a copy when the view is strided).
void load(const ZipArchive& zip, uint64_t archive_bytes, const std::string& path,
          std::vector<std::vector<uint8_t>>& buffers, std::map<std::string, SafeTensor>& tensors) {
  const std::string prefix = find_prefix(zip, path);
  if (const int64_t bo = zip.find(prefix + "/byteorder"); bo >= 0) {
    // Written by torch >= 2.1; older files are little-endian. Any other claim is refused.
    if (zip.size(bo, "byteorder") > 16) throw Error(path + ": byteorder entry is not 'little' or 'big'");
    const std::vector<uint8_t> b = zip.read(bo, "byteorder");
    if (std::string(b.begin(), b.end()) != "little")
      throw Error(path + ": byteorder is '" + std::string(b.begin(), b.end()) +
                  "'; only little-endian files are supported");
  }
  const std::string pkl_name = prefix + "/data.pkl";
  const int64_t pkl_index = zip.find(pkl_name);
  if (zip.size(pkl_index, pkl_name) > torch_pickle::kMaxPickleBytes)
    throw Error(path + ": " + pkl_name + " of " + std::to_string(zip.size(pkl_index, pkl_name)) +
                " bytes is larger than a state dict's pickle can be");
  const std::vector<uint8_t> pkl = zip.read(pkl_index, pkl_name);
  const torch_pickle::StateDict sd = torch_pickle::parse_state_dict(pkl.data(), pkl.size(), path + ": " + pkl_name);

  std::vector<size_t> buffer_of(sd.storages.size(), SIZE_MAX);  // storage -> index into buffers
  uint64_t copied = 0;
  for (const auto& [name, view] : sd.tensors) {
    const torch_pickle::Storage& s = sd.storages[view.storage];
    const uint64_t esize = dtype_bytes(s.dtype);
    const std::string entry = prefix + "/data/" + s.key;
    if (buffer_of[view.storage] == SIZE_MAX) {
      uint64_t want;
      if (__builtin_mul_overflow(s.numel, esize, &want))
        throw Error(path + ": storage '" + s.key + "' of " + std::to_string(s.numel) + " " + s.dtype +
                    " elements overflows 64 bits");
      const int64_t index = zip.find(entry);
      if (index < 0) throw Error(path + ": storage '" + s.key + "' has no entry " + entry + " in the archive");
      const uint64_t have = zip.size(index, entry);
      if (have != want)
        throw Error(path + ": " + entry + " holds " + std::to_string(have) + " bytes, but its storage is " +
                    std::to_string(s.numel) + " " + s.dtype + " elements (" + std::to_string(want) + " bytes)");
      buffers.push_back(zip.read(index, entry));
      buffer_of[view.storage] = buffers.size() - 1;
    }
    const uint8_t* storage = buffers[buffer_of[view.storage]].data();
    uint64_t numel = 1;
    for (uint64_t d : view.shape) numel *= d;  // <= the storage's numel (or 0): checked by the pickle reader
    SafeTensor t;
    t.dtype = s.dtype;
    t.shape = view.shape;
    t.bytes = numel * esize;
    if (numel == 0) {
      t.data = storage;
    } else if (is_contiguous(view)) {
      t.data = storage + view.offset * esize;
    } else {
      // A transposed or sliced view: copied out row-major. Copies are bounded by the archive's
      // size in total, so many views of one storage cannot multiply memory.
      copied += t.bytes;
      if (copied > archive_bytes)
        throw Error(path + ": tensor " + name + ": strided views copy more bytes than the archive holds");
      buffers.push_back(gather(view, storage, esize, numel));
      t.data = buffers.back().data();
    }
    if (!tensors.emplace(name, std::move(t)).second) throw Error(path + ": tensor " + name + " appears twice in the state dict");
  }
}

}  // namespace

TorchFile TorchFile::open(const std::string& path) {
  TorchFile f;
  f.path_ = path;
  uint64_t size = 0;
  ::close(open_regular_file(path, "PyTorch checkpoint", &size));
  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* src = zip_source_file_create(path.c_str(), 0, -1, &err);
  if (!src) {
    const std::string why = zip_error_strerror(&err);
    zip_error_fini(&err);
    throw Error(path + ": cannot open: " + why);
  }
  zip_error_fini(&err);
  std::ifstream in(path, std::ios::binary);
  const ZipArchive zip(src, size, in.get(), path);
  load(zip, size, path, f.buffers_, f.tensors_);
  return f;
}

TorchFile TorchFile::from_bytes(std::string name, std::vector<uint8_t> bytes) {
  TorchFile f;
  f.path_ = std::move(name);
  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* src = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &err);
  zip_error_fini(&err);
  if (!src) throw Error(f.path_ + ": cannot read from memory");
  const ZipArchive zip(src, bytes.size(), bytes.empty() ? -1 : bytes[0], f.path_);
  load(zip, bytes.size(), f.path_, f.buffers_, f.tensors_);
  return f;
}

}  // namespace vkspec
