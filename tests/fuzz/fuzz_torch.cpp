// libFuzzer: a pytorch_model.bin (torch.save zip archive) read from memory, then every tensor
// converted to f32 as the head loader does.
//
// First byte odd: the rest is the archive as is. Even: the rest is [u8 k][k x u32 LE sizes, each
// taken mod 64 KiB][pickle],
// and the harness zips archive/data.pkl with storages archive/data/0 .. k-1 of those sizes (with
// correct CRCs). Mutating a whole archive mostly breaks its CRC, so without the second form the
// pickle interpreter behind it would hardly be reached. Seeds: tests/fuzz/make_seeds.py.
#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "vkspec/error.hpp"
#include "vkspec/torch_file.hpp"

namespace {

void le(std::vector<uint8_t>& b, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b.push_back(uint8_t(v >> (8 * i)));
}

// A stored zip (local headers, central directory, end record) as torch.save writes one.
std::vector<uint8_t> zip_stored(const std::vector<std::pair<std::string, std::vector<uint8_t>>>& entries) {
  std::vector<uint8_t> out, dir;
  for (const auto& [name, data] : entries) {
    const uint32_t crc = uint32_t(crc32(0, data.data(), uInt(data.size())));
    const uint32_t offset = uint32_t(out.size());
    for (std::vector<uint8_t>* b : {&out, &dir}) {
      const bool central = b == &dir;
      le(*b, central ? 0x02014b50 : 0x04034b50, 4);
      if (central) le(*b, 20, 2);  // version made by
      le(*b, 20, 2);               // version needed
      le(*b, 0, 2), le(*b, 0, 2), le(*b, 0, 2), le(*b, 0x21, 2);  // flags, stored, time, date
      le(*b, crc, 4), le(*b, data.size(), 4), le(*b, data.size(), 4), le(*b, name.size(), 2), le(*b, 0, 2);
      if (central) le(*b, 0, 2), le(*b, 0, 2), le(*b, 0, 2), le(*b, 0, 4), le(*b, offset, 4);
      b->insert(b->end(), name.begin(), name.end());
      if (!central) b->insert(b->end(), data.begin(), data.end());
    }
  }
  const uint32_t dir_at = uint32_t(out.size());
  out.insert(out.end(), dir.begin(), dir.end());
  le(out, 0x06054b50, 4), le(out, 0, 2), le(out, 0, 2), le(out, entries.size(), 2), le(out, entries.size(), 2);
  le(out, dir.size(), 4), le(out, dir_at, 4), le(out, 0, 2);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vkspec;
  if (size == 0) return 0;
  std::vector<uint8_t> archive;
  if (data[0] & 1) {
    archive.assign(data + 1, data + size);
  } else {
    size_t p = 1;
    const size_t k = p < size ? data[p++] % 8 : 0;
    std::vector<std::pair<std::string, std::vector<uint8_t>>> entries{{"archive/data.pkl", {}}};
    for (size_t i = 0; i < k && p + 4 <= size; ++i, p += 4) {
      const uint32_t n = uint32_t(data[p]) | uint32_t(data[p + 1]) << 8;  // the upper two bytes are ignored
      entries.emplace_back("archive/data/" + std::to_string(i), std::vector<uint8_t>(n, 0x3c));
    }
    entries[0].second.assign(data + std::min(p, size), data + size);
    archive = zip_stored(entries);
  }
  try {
    const TorchFile f = TorchFile::from_bytes("fuzz.bin", std::move(archive));
    for (const auto& [name, t] : f.tensors()) {
      const std::vector<float> v = t.to_f32();
      if (v.size() * dtype_bytes(t.dtype) != t.bytes) __builtin_trap();  // size == shape x dtype
    }
  } catch (const Error&) {
  }
  return 0;
}
