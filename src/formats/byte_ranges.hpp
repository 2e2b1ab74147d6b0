// The tensors of a model file as byte ranges of its data section, for the one check both tensor
// formats need: no two tensors may share bytes (one weight would alias another).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace vkspec {

struct ByteRange {
  uint64_t begin = 0, end = 0;  // [begin, end)
  std::string_view name;
};

// The first two ranges (by start) that share a byte; empty ranges share none.
inline std::optional<std::pair<ByteRange, ByteRange>> first_overlap(std::vector<ByteRange> r) {
  std::erase_if(r, [](const ByteRange& x) { return x.begin == x.end; });
  std::sort(r.begin(), r.end(), [](const ByteRange& a, const ByteRange& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < r.size(); ++i)
    if (r[i].begin < r[i - 1].end) return std::pair{r[i - 1], r[i]};
  return std::nullopt;
}

}  // namespace vkspec
