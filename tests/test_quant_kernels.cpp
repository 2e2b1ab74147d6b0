// The block types that stay in their GGUF layout on the device (q4_0, q5_0, q5_1, q3_K, q4_K,
// q5_K, q6_K, iq4_xs): the matmul against the CPU dequantization (quants.hpp) on random blocks,
// every kernel variant and weight path, odd row counts and batch sizes; batch invariance; and a
// stack of tensors of different types as one weight.
#include <random>

#include "matmul_reference.hpp"
#include "vk_fixture.hpp"

using namespace vkspec;
using namespace vkspec::test;

namespace {
struct Shape {
  uint32_t N, K, B;
};
// Rows and batch sizes odd and off the tiles; K several blocks (also 17 super-blocks: more than
// a subgroup's lanes, fewer than two rounds).
constexpr Shape kShapes32[] = {{1, 32, 1}, {23, 64, 2}, {37, 2080, 1}, {13, 288, 17}, {67, 96, 3}};
constexpr Shape kShapes256[] = {{1, 256, 1}, {23, 512, 2}, {37, 256 * 17, 1}, {13, 768, 17}, {67, 256, 3}};
const Shape (&shapes_for(WeightType t))[5] { return weight_type_block(t) == 256 ? kShapes256 : kShapes32; }
}  // namespace

TEST_CASE_FIXTURE(VkTest, "matmul matches the CPU reference for every file block type, path and tile") {
  const std::vector<KernelConfig> cfgs = matmul_configs(ctx);
  int i = 0;
  for (auto t : kFileBlockTypes)
    for (auto path : {WeightPath::Texel, WeightPath::Storage})
      for (const Shape& s : shapes_for(t)) {
        CAPTURE(weight_type_name(t));
        // One forced configuration a shape (each is a pipeline the driver compiles), stepping
        // through the list so variants, workgroups, rows and tiles change from draw to draw.
        const KernelConfig& c = cfgs[(i++ * 7) % cfgs.size()];
        run_matmul_case(ctx, t, path, s.N, s.K, s.B, c, i % 3 == 1, i % 4 == 2);
      }
}

// What the engine runs: the configuration the device picks by itself, for every weight type and
// path on the shapes above (the 4-wide suite keeps this case and leaves out the forced sweeps).
TEST_CASE_FIXTURE(VkTest, "matmul at the device's own configuration matches the CPU reference for every weight type") {
  std::vector<WeightType> types = {WeightType::F32, WeightType::F16, WeightType::Q8_0};
  types.insert(types.end(), std::begin(kFileBlockTypes), std::end(kFileBlockTypes));
  for (auto t : types)
    for (auto path : {WeightPath::Texel, WeightPath::Storage}) {
      CAPTURE(weight_type_name(t));
      int i = 0;
      for (const Shape& s : shapes_for(t)) {
        run_matmul_case(ctx, t, path, s.N, s.K, s.B, {}, i % 2 == 1, i % 3 == 2);
        ++i;
      }
    }
}

TEST_CASE_FIXTURE(VkTest, "matmul over file block types is batch-invariant: bit-identical whatever B") {
  // Every type at the device's own configuration (-1) and at two of the four forced variants,
  // in turn (each variant meets half the types); test_kernels.cpp runs every variant for f16 and
  // q8_0. Every variant for every type took 171 s of a cold suite (78 pipelines, 2026-12-04).
  size_t ti = 0;
  for (auto t : kFileBlockTypes) {
    const int va = int(ti % 4), vb = int((ti + 2) % 4);
    ++ti;
    for (int variant : {-1, va, vb})
      for (auto path : {WeightPath::Texel, WeightPath::Storage}) {
        if (variant == 2 && !ctx.caps().subgroup_arithmetic) continue;
        const uint32_t N = 45, K = weight_type_block(t) == 256 ? 512 : 320;
        auto raw = make_weight(t, N, K, 3);
        check_batch_invariant(ctx, upload_weight(ctx, t, N, K, raw.data(), path), variant, weight_type_name(t));
      }
  }
}

TEST_CASE_FIXTURE(VkTest, "a stack of weights of different types is one matmul over all its rows") {
  // A Q4_K_M file's q | k | v rows: q4_K, q4_K, q6_K (and q5_0 / q8_0 / f16 fallbacks elsewhere).
  const uint32_t K = 256;
  const std::vector<std::pair<WeightType, uint32_t>> parts = {
      {WeightType::Q4_K, 19}, {WeightType::Q6_K, 7}, {WeightType::F16, 5}, {WeightType::Q8_0, 3}, {WeightType::Q5_0, 11}};
  for (auto path : {WeightPath::Texel, WeightPath::Storage}) {
    std::vector<DeviceWeight> ws;
    std::vector<float> w;
    for (auto [t, n] : parts) {
      auto raw = make_weight(t, n, K, n * 7 + uint32_t(t));
      auto d = dequantize(t, raw, n, K);
      w.insert(w.end(), d.begin(), d.end());
      ws.push_back(upload_weight(ctx, t, n, K, raw.data(), path));
    }
    const DeviceWeight W = stack_weights(std::move(ws));
    CHECK(W.N == 45);
    CHECK(W.chunks.size() == parts.size());
    for (int variant : {-1, 0, 1, 2, 3}) {
      if (variant == 2 && !ctx.caps().subgroup_arithmetic) continue;
      KernelConfig c;
      c.matmul_rows = variant;
      for (uint32_t B : {1u, 5u})
        check_matmul(ctx, WeightType::Q4_K, W, w, B, c, B == 5, true);
    }
  }
}

TEST_CASE_FIXTURE(VkTest, "block weights whose rows are not whole blocks are refused") {
  std::vector<uint8_t> raw(4096);
  CHECK_THROWS_WITH_AS(upload_weight(ctx, WeightType::Q4_K, 2, 128, raw.data()),
                       doctest::Contains("multiple of 256"), Error);
  CHECK_THROWS_WITH_AS(upload_weight(ctx, WeightType::Q5_0, 2, 48, raw.data()),
                       doctest::Contains("multiple of 32"), Error);
}

// q4_0, q5_0 and q5_1 rows of whole 8-block groups that the texel path keeps row-major (longer
// than 1024 bytes) are read group by group by the lanes kernel (matmul_lanes.comp's
// group_block_dot); shorter or partial-group rows block by block. Both against the reference, at
// batch tiles and rows per lane that change its unrolling, and batch-invariant.
TEST_CASE_FIXTURE(VkTest, "32-value block types: whole 8-block groups and the rest match the reference") {
  struct Shape {
    uint32_t N, K, B;
  };
  // 2048 and 2304: 8 and 9 groups a row (grouped for all three); 256: one group in a short,
  // interleaved row; 2080: 65 blocks, no whole number of groups.
  const Shape shapes[] = {{37, 2048, 1}, {11, 2304, 3}, {19, 256, 2}, {5, 2080, 17}, {70, 2048, 9}};
  for (auto t : {WeightType::Q4_0, WeightType::Q5_0, WeightType::Q5_1})
    for (auto s : shapes) {
      CAPTURE(weight_type_name(t));
      CAPTURE(s.K);
      run_matmul_case(ctx, t, WeightPath::Texel, s.N, s.K, s.B, {}, false, s.B == 3);
      // 1 row a lane with x through shuffles, 4 with per-lane fetches (each pair a pipeline).
      for (auto [rows, shuffle] : {std::pair{1u, -1}, std::pair{4u, 0}}) {
        KernelConfig c;
        c.matmul_rows = 3, c.rows_per_workgroup = rows, c.batch_tile = s.B > 4 ? 4 : s.B, c.x_shuffle = shuffle;
        run_matmul_case(ctx, t, WeightPath::Texel, s.N, s.K, s.B, c, rows == 4, false);
      }
    }
  for (auto t : {WeightType::Q4_0, WeightType::Q5_0, WeightType::Q5_1}) {
    auto raw = make_weight(t, 45, 2048, 5);
    check_batch_invariant(ctx, upload_weight(ctx, t, 45, 2048, raw.data(), WeightPath::Texel), -1, weight_type_name(t));
  }
}
