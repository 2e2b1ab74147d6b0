// The test suite's Vulkan context: Khronos validation with synchronization validation on.
// Every Vulkan test case uses VkTest; at the end of the case any validation message printed
// during it fails that case. With CI=true, no Vulkan device is a failure, never a skip.
#pragma once

#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "shared_data.hpp"
#include "vkspec/context.hpp"
#include "vkspec/ops.hpp"

namespace vkspec::test {

// The suite's context options: validation on, no pipeline cache on disk, batch tiles of powers of
// two (ContextOptions::batch_tiles: the engine cases meet every pass size from 1 to 17 rows, and
// under even tiles each is a pipeline per weight type and fold to compile; the batch-invariance
// cases run both policies, the tile sweeps force their tiles); with `storage_buffers`
// the device is presented as allowing only that many storage buffers a stage (the fallbacks of
// the fused kernels that need more).
inline ContextOptions test_context_options(uint32_t storage_buffers = 0) {
  ContextOptions o;
  o.validation = true;
  o.pipeline_cache_dir = "-";
  o.batch_tiles = BatchTiles::PowersOfTwo;
  if (storage_buffers) o.stage_storage_buffers_limit = storage_buffers;
  return o;
}

inline Context& vk_context() {
  static std::unique_ptr<Context> ctx = std::make_unique<Context>(test_context_options());
  return *ctx;
}

struct VkTest {
  Context& ctx = vk_context();
  VkTest() { ctx.take_validation_messages(); }
  ~VkTest() {
    auto msgs = ctx.take_validation_messages();
    CHECK_MESSAGE(msgs.empty(), "validation layers reported " << msgs.size() << " message(s); first: "
                                                             << (msgs.empty() ? "" : msgs[0]));
  }
};

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Compares with |got - ref| <= abs + rel * |ref|; on failure reports the max error and the first
// mismatching index, as llm.c's checks do.
inline void check_close(const std::vector<float>& got, const std::vector<float>& ref, float abs_tol, float rel_tol,
                        const std::string& what) {
  REQUIRE_MESSAGE(got.size() == ref.size(), what << ": size " << got.size() << " vs " << ref.size());
  double max_err = 0;
  long first_bad = -1;
  for (size_t i = 0; i < ref.size(); ++i) {
    double err = std::fabs(double(got[i]) - double(ref[i]));
    if (!(err <= abs_tol + rel_tol * std::fabs(ref[i]))) {
      if (first_bad < 0) first_bad = long(i);
    }
    if (err > max_err || std::isnan(err)) max_err = std::isnan(err) ? INFINITY : err;
  }
  std::ostringstream os;
  os << what << ": max error " << max_err << " (tolerance " << abs_tol << " + " << rel_tol << "*|ref|)";
  if (first_bad >= 0) os << ", first bad index " << first_bad << ": got " << got[first_bad] << " ref " << ref[first_bad];
  CHECK_MESSAGE(first_bad < 0, os.str());
}

}  // namespace vkspec::test
