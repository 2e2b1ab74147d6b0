// The matmul's CPU reference and one randomized GPU-vs-CPU case, shared by the kernel tests of
// the float/q8_0 weights (test_kernels.cpp) and of the block types (test_quant_kernels.cpp).
#pragma once

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "vk_fixture.hpp"
#include "vkspec/dtype.hpp"
#include "vkspec/quants.hpp"

namespace vkspec::test {

inline constexpr WeightType kAllWeightTypes[] = {
    WeightType::F32,  WeightType::F16,  WeightType::Q4_0, WeightType::Q5_0, WeightType::Q5_1,  WeightType::Q8_0,
    WeightType::Q3_K, WeightType::Q4_K, WeightType::Q5_K, WeightType::Q6_K, WeightType::IQ4_XS};
// The block types read in their GGUF layout (everything but f32, f16, q8_0).
inline constexpr WeightType kFileBlockTypes[] = {WeightType::Q4_0, WeightType::Q5_0, WeightType::Q5_1,
                                                 WeightType::Q3_K, WeightType::Q4_K, WeightType::Q5_K,
                                                 WeightType::Q6_K, WeightType::IQ4_XS};

// Weights in GGUF layout → f32 (N, K), exactly as the device decodes them.
inline std::vector<float> dequantize(WeightType t, const std::vector<uint8_t>& raw, uint32_t N, uint32_t K) {
  std::vector<float> w(size_t(N) * K);
  if (const BlockFormat* f = block_format(uint32_t(t))) {
    dequantize_blocks(*f, raw.data(), w.data(), w.size());
    return w;
  }
  for (size_t i = 0; i < w.size(); ++i) {
    if (t == WeightType::F32) {
      std::memcpy(&w[i], raw.data() + i * 4, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, raw.data() + i * 2, 2);
      w[i] = f16_to_f32(h);
    }
  }
  return w;
}

// Random weights in GGUF layout: floats in [-1, 1], q8_0 quantized from them, every other
// block type random blocks (quants.hpp: random_blocks) whose values lie in [-1, 1].
inline std::vector<uint8_t> make_weight(WeightType t, uint32_t N, uint32_t K, uint32_t seed) {
  std::vector<uint8_t> raw;
  if (t != WeightType::Q8_0)
    if (const BlockFormat* f = block_format(uint32_t(t))) {
      std::mt19937 rng(seed);
      return random_blocks(*f, size_t(N) * K / f->elems, rng);
    }
  auto f = random_floats(size_t(N) * K, seed);
  switch (t) {
    case WeightType::F32:
      raw.resize(f.size() * 4);
      std::memcpy(raw.data(), f.data(), raw.size());
      break;
    case WeightType::F16:
      raw.resize(f.size() * 2);
      for (size_t i = 0; i < f.size(); ++i) {
        uint16_t h = f32_to_f16(f[i]);
        std::memcpy(raw.data() + 2 * i, &h, 2);
      }
      break;
    default:  // q8_0
      raw.resize(f.size() / 32 * kQ8_0Bytes);
      for (size_t b = 0; b < f.size() / 32; ++b) quantize_q8_0_block(&f[b * 32], raw.data() + b * kQ8_0Bytes);
      break;
  }
  return raw;
}

// y(B, N) = x(B, K) · W(N, K)^T in double
inline std::vector<float> matmul_ref(const std::vector<float>& w, const std::vector<float>& x, uint32_t B, uint32_t N,
                                     uint32_t K, uint32_t x_stride) {
  std::vector<float> y(size_t(B) * N);
  for (uint32_t b = 0; b < B; ++b)
    for (uint32_t n = 0; n < N; ++n) {
      double s = 0;
      for (uint32_t k = 0; k < K; ++k) s += double(w[size_t(n) * K + k]) * x[size_t(b) * x_stride + k];
      y[size_t(b) * N + n] = float(s);
    }
  return y;
}

inline uint32_t round4(uint32_t k) { return (k + 3) / 4 * 4; }

// One matmul on the device against matmul_ref on the same (dequantized) weights.
inline void check_matmul(Context& ctx, WeightType t, const DeviceWeight& W, const std::vector<float>& w, uint32_t B,
                         const KernelConfig& cfg, bool accumulate, bool bias) {
  const uint32_t N = W.N, K = W.K;
  const uint32_t xs = round4(K) + 4;  // row stride with slack; the slack holds NaN on purpose
  std::vector<float> x(size_t(B) * xs, NAN);
  auto xr = random_floats(size_t(B) * K, K + B);
  for (uint32_t b = 0; b < B; ++b) std::copy_n(&xr[size_t(b) * K], K, &x[size_t(b) * xs]);
  auto ref = matmul_ref(w, x, B, N, K, xs);
  auto y0 = random_floats(size_t(B) * N, 7);
  auto bv = random_floats(N, 9);
  for (size_t i = 0; i < ref.size(); ++i) {
    if (bias) ref[i] += bv[i % N];
    if (accumulate) ref[i] += y0[i];
  }
  Buffer xb(ctx, x.size() * 4), yb(ctx, y0.size() * 4), bb(ctx, N * 4);
  xb.upload(x);
  yb.upload(y0);
  bb.upload(bv);
  Sequence seq(ctx);
  seq.begin();
  MatmulArgs args;
  args.cfg = cfg;
  args.accumulate = accumulate;
  args.bias = bias ? &bb : nullptr;
  matmul(seq, W, Mat{&xb, 0, xs}, Mat{&yb, 0, N}, B, args);
  seq.run();
  // f32 accumulation of K products vs a double reference of the same (dequantized) weights:
  // the only error is summation order, bounded well below 1e-3 * sqrt(K) for |x|,|w| <= 1.
  const float tol = 1e-4f * std::sqrt(float(K)) + 1e-5f;
  check_close(yb.read<float>(y0.size()), ref, tol, 1e-4f,
              std::string("matmul ") + weight_type_name(t) + (W.texel ? " texel" : " storage") + " N=" +
                  std::to_string(N) + " K=" + std::to_string(K) + " B=" + std::to_string(B) + " wg=" +
                  std::to_string(cfg.workgroup_size) + " sg=" + std::to_string(cfg.use_subgroup) + " rows=" +
                  std::to_string(cfg.rows_per_workgroup) + " bt=" + std::to_string(cfg.batch_tile) + " variant=" +
                  std::to_string(cfg.matmul_rows));
}

inline void run_matmul_case(Context& ctx, WeightType t, WeightPath path, uint32_t N, uint32_t K, uint32_t B,
                            const KernelConfig& cfg, bool accumulate, bool bias) {
  auto raw = make_weight(t, N, K, N * 131 + K);
  DeviceWeight W = upload_weight(ctx, t, N, K, raw.data(), path);
  check_matmul(ctx, t, W, dequantize(t, raw, N, K), B, cfg, accumulate, bias);
}

// Every matmul configuration the kernel tests sweep (variant, workgroup, subgroup reduction,
// rows per workgroup, batch tile), those the device supports.
inline std::vector<KernelConfig> matmul_configs(const Context& ctx) {
  std::vector<KernelConfig> cfgs;
  for (int variant : {0, 1, 2, 3})
    for (uint32_t wg : {32u, 64u, 48u})
      for (int sg : {0, 1})
        for (uint32_t rows : {1u, 4u, 8u})
          for (uint32_t bt : {1u, 2u, 4u, 8u}) {
            if ((sg || variant == 2) && !ctx.caps().subgroup_arithmetic) continue;
            if (variant != 0 && sg) continue;  // subgroup choice only exists for variant 0
            KernelConfig c;
            // Variant 3 alternates x through subgroup shuffles (auto) and per-lane fetches.
            if (variant == 3 && (rows + bt + wg) % 2) c.x_shuffle = 0;
            // It also walks 2 or 3 row groups an invocation (the last group's rows past N clamped),
            // or as many as the device's pool wants (0).
            if (variant == 3) c.row_groups = std::array<uint32_t, 3>{0u, 2u, 3u}[(rows + bt + wg) % 3];
            c.matmul_rows = variant;
            c.workgroup_size = wg;
            c.use_subgroup = sg;
            c.rows_per_workgroup = rows;
            c.batch_tile = bt;
            cfgs.push_back(c);
          }
  return cfgs;
}

// Rows of a batch-B matmul equal the same rows computed alone (B = 1), bit for bit.
inline void check_batch_invariant(Context& ctx, const DeviceWeight& W, int variant, const std::string& what,
                                  int x_shuffle = -1) {
  const uint32_t N = W.N, K = W.K;
  auto x = random_floats(size_t(256) * K, 11);
  Buffer xb(ctx, x.size() * 4), y1(ctx, N * 4), yB(ctx, size_t(256) * N * 4);
  xb.upload(x);
  MatmulArgs args;
  args.cfg.matmul_rows = variant;
  args.cfg.x_shuffle = x_shuffle;
  // On CPU-like devices (ops/matmul.cpp's lanes tiles): block types run 3, 5 and 9 as tiles of
  // 3 rows, the others as tiles of 2 or 4; f16 / f32 run 2..16 as one tile of B (13: a wide tile
  // whose x spreads over 4 texels a lane) and 42 as three of 14, q8_0 up to 8 rows a tile; 64
  // and 256 take tiles of 16. The variants a device picks by itself (-1) and the lanes kernel (3)
  // take them all; the other variants, whose tiles follow B less, a short list (each B is a
  // pipeline the driver compiles, the most of a cold run).
  // Under both batch-tile policies (ContextOptions::batch_tiles; the suite's context runs
  // PowersOfTwo): every B's rows equal the one-row pass, which is one tile of 1 under either.
  const std::vector<uint32_t> all = {2u, 3u, 5u, 7u, 9u, 13u, 16u, 42u, 64u, 256u}, few = {3u, 16u, 42u};
  const BatchTiles before = ctx.batch_tiles();
  for (BatchTiles policy : {BatchTiles::Even, BatchTiles::PowersOfTwo}) {
    ctx.set_batch_tiles(policy);
    for (uint32_t B : variant == -1 || variant == 3 ? all : few) {
      Sequence seq(ctx);
      seq.begin();
      matmul(seq, W, Mat{&xb, 0, K}, Mat{&yB, 0, N}, B, args);
      seq.run();
      auto all = yB.read<float>(size_t(B) * N);
      for (uint32_t row : {0u, B / 2, B - 1}) {
        seq.begin();
        matmul(seq, W, Mat{&xb, row * K, K}, Mat{&y1, 0, N}, 1, args);
        seq.run();
        auto a = y1.read<float>(N);
        CHECK_MESSAGE(std::memcmp(a.data(), &all[size_t(row) * N], N * 4) == 0,
                      what << " variant " << variant << " x_shuffle " << x_shuffle << " tiles "
                           << (policy == BatchTiles::Even ? "even" : "powers of two") << " row " << row << " of B=" << B
                           << " differs from B=1");
      }
    }
    if (variant != -1 && variant != 3) break;  // only the lanes kernel's tiles follow the policy
  }
  ctx.set_batch_tiles(before);
}

}  // namespace vkspec::test
