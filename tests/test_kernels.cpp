// Every kernel against a plain-loop CPU reference, on random data with odd sizes and every
// specialization it takes (workgroup size, subgroup reduction, tile shape, weight path).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "act_reference.hpp"
#include "matmul_reference.hpp"
#include "tree_order.hpp"
#include "vk_fixture.hpp"
#include "vkspec/tree_limits.h"
#include "vkspec/dtype.hpp"

using namespace vkspec;
using namespace vkspec::test;

TEST_CASE_FIXTURE(VkTest, "matmul matches the CPU reference for every weight type, path and tile") {
  const WeightType types[] = {WeightType::F32, WeightType::F16, WeightType::Q8_0};
  const WeightPath paths[] = {WeightPath::Texel, WeightPath::Storage};
  struct Shape {
    uint32_t N, K, B;
  };
  const Shape shapes[] = {{1, 1, 1}, {3, 3, 2}, {23, 23, 1}, {37, 37, 5}, {13, 4097, 1}, {5, 4097, 17}, {67, 96, 3}, {130, 40, 2}};
  // 67 and 130 rows: the texel path's 64-row interleaved tiles (weights.glsl), whole and partial.
  const Shape q8_shapes[] = {{1, 32, 1}, {23, 64, 2}, {37, 4096 + 32, 1}, {13, 288, 17}, {67, 96, 3}, {130, 64, 2}};
  const std::vector<KernelConfig> cfgs = matmul_configs(ctx);
  int i = 0;
  for (auto t : types)
    for (auto path : paths) {
      const auto& list = t == WeightType::Q8_0 ? std::vector<Shape>(std::begin(q8_shapes), std::end(q8_shapes))
                                               : std::vector<Shape>(std::begin(shapes), std::end(shapes));
      for (auto s : list) {
        // Sweep configurations across shapes rather than the full product, to keep the suite fast:
        // each configuration is a pipeline the driver compiles, which is most of a cold run.
        for (int j = 0; j < 2; ++j) {
          const KernelConfig& c = cfgs[(i++ * 7 + j * 5) % cfgs.size()];
          run_matmul_case(ctx, t, path, s.N, s.K, s.B, c, (i + j) % 3 == 1, (i + j) % 4 == 2);
        }
      }
    }
}

TEST_CASE_FIXTURE(VkTest, "matmul rows are batch-invariant: bit-identical whatever B") {
  // Speculative decoding verifies N tree nodes in one pass and must reproduce one-token decoding
  // exactly; the kernel computes each output row in the same order for every batch size.
  for (int variant : {-1, 0, 1, 2, 3})
    for (auto t : {WeightType::F16, WeightType::Q8_0})
      for (auto path : {WeightPath::Texel, WeightPath::Storage}) {
        if (variant == 2 && !ctx.caps().subgroup_arithmetic) continue;
        const uint32_t N = 45, K = 320;
        auto raw = make_weight(t, N, K, 3);
        const DeviceWeight W = upload_weight(ctx, t, N, K, raw.data(), path);
        check_batch_invariant(ctx, W, variant, weight_type_name(t));
        if (variant == 3) check_batch_invariant(ctx, W, variant, weight_type_name(t), 0);  // x fetched per lane
      }
}

TEST_CASE_FIXTURE(VkTest, "matmul lanes: x shared by subgroup shuffles equals per-lane fetches, bit for bit") {
  // The shuffle only moves x's bits between lanes, so the two ways of fetching x must agree
  // exactly, with the RMSNorm and GLU folds, on a tail block (odd K), at odd B and row counts.
  if (!ctx.caps().subgroup_shuffle) return;
  const float eps = 1e-5f;
  for (auto t : {WeightType::F32, WeightType::F16, WeightType::Q8_0})
    for (int fold : {0, 1, 2}) {  // plain, RMSNorm, RMSNorm + GLU
      const uint32_t K = t == WeightType::Q8_0 ? 96 : 83, N = fold == 2 ? 46 : 37, out = fold == 2 ? N / 2 : N,
                     xs = round4(K) + 4, Bmax = 37;
      CAPTURE(weight_type_name(t));
      CAPTURE(fold);
      auto raw = make_weight(t, N, K, 13);
      const DeviceWeight W = upload_weight(ctx, t, N, K, raw.data());
      std::vector<float> x(size_t(Bmax) * xs, NAN);  // the stride's slack holds NaN on purpose
      auto xr = random_floats(size_t(Bmax) * K, 17), g = random_floats(K, 19);
      for (uint32_t b = 0; b < Bmax; ++b) std::copy_n(&xr[size_t(b) * K], K, &x[size_t(b) * xs]);
      Buffer xb(ctx, x.size() * 4), gb(ctx, K * 4), scratch(ctx, size_t(Bmax) * (xs + 2 * N) * 4);
      xb.upload(x);
      gb.upload(g);
      // bt 0: the tile matmul picks (B 23: 12 rows, two texels of x a lane at subgroup 8); 8: two
      // texels a lane at subgroup 8, four at 4; 1: one row a tile.
      for (uint32_t B : {3u, 23u, 37u})
        for (uint32_t bt : {0u, 1u, 8u}) {
          std::vector<float> got[2];
          for (int shuffle : {0, 1}) {
            Buffer yb(ctx, size_t(B) * out * 4);
            Sequence seq(ctx);
            seq.begin();
            MatmulArgs a;
            a.cfg.matmul_rows = 3;
            a.cfg.batch_tile = bt;
            a.cfg.x_shuffle = shuffle;
            if (fold >= 1) a.norm = &gb, a.norm_eps = eps, a.norm_scratch = Mat{&scratch, 0, xs};
            if (fold == 2) a.glu = true, a.glu_scratch = Mat{&scratch, Bmax * xs, round4(N)};
            matmul(seq, W, Mat{&xb, 0, xs}, Mat{&yb, 0, out}, B, a);
            seq.run();
            got[shuffle] = yb.read<float>(size_t(B) * out);
          }
          CAPTURE(B);
          CAPTURE(bt);
          CHECK(std::all_of(got[1].begin(), got[1].end(), [](float v) { return std::isfinite(v); }));
          CHECK(std::memcmp(got[0].data(), got[1].data(), got[0].size() * 4) == 0);
        }
    }
}


TEST_CASE_FIXTURE(VkTest, "matmul with the RMSNorm and GLU folded in equals rmsnorm, matmul, glu_mul") {
  // The forward asks the matmul for y = W · rmsnorm(x) and, on gate|up weights, act(gate) · up.
  // The lanes kernel (variant 3) computes both inside; the others record rmsnorm and glu_mul
  // around a plain matmul. Every variant, odd K (a tail block) and odd F, rows off the tiles,
  // batch invariant, against a double CPU reference; the GELU gates on f16 weights.
  const float eps = 1e-5f;
  for (auto t : {WeightType::F16, WeightType::Q8_0, WeightType::Q4_K})
    for (int variant : {0, 1, 2, 3})
      for (int glu_case = 0; glu_case < 4; ++glu_case) {
        const bool glu = glu_case > 0;
        const GluAct act = kGluActs[glu ? glu_case - 1 : 0];
        if (variant == 2 && !ctx.caps().subgroup_arithmetic) continue;
        if (act != GluAct::Silu && t != WeightType::F16) continue;
        const uint32_t K = t == WeightType::Q4_K ? 512 : t == WeightType::Q8_0 ? 96 : 83, F = 37,
                       N = glu ? 2 * F : 29, out = glu ? F : N, xs = round4(K) + 4;
        CAPTURE(weight_type_name(t));
        CAPTURE(variant);
        CAPTURE(glu);
        CAPTURE(int(act));
        auto raw = make_weight(t, N, K, 5);
        const std::vector<float> w = dequantize(t, raw, N, K);
        const DeviceWeight W = upload_weight(ctx, t, N, K, raw.data());
        const uint32_t Bmax = 19;
        std::vector<float> x(size_t(Bmax) * xs, NAN);  // the stride's slack holds NaN on purpose
        auto xr = random_floats(size_t(Bmax) * K, 3), g = random_floats(K, 4);
        for (uint32_t b = 0; b < Bmax; ++b)
          for (uint32_t k = 0; k < K; ++k) x[size_t(b) * xs + k] = 3.0f * xr[size_t(b) * K + k];
        // CPU: rmsnorm in double, then the matmul reference, then the GLU.
        std::vector<float> xn(size_t(Bmax) * K);
        for (uint32_t b = 0; b < Bmax; ++b) {
          double ss = 0;
          for (uint32_t k = 0; k < K; ++k) ss += double(x[size_t(b) * xs + k]) * x[size_t(b) * xs + k];
          const double s = 1.0 / std::sqrt(ss / K + eps);
          for (uint32_t k = 0; k < K; ++k) xn[size_t(b) * K + k] = float(x[size_t(b) * xs + k] * s * g[k]);
        }
        auto y = matmul_ref(w, xn, Bmax, N, K, K);
        std::vector<float> ref(size_t(Bmax) * out);
        for (uint32_t b = 0; b < Bmax; ++b)
          for (uint32_t j = 0; j < out; ++j) {
            const double a = y[size_t(b) * N + j];
            ref[size_t(b) * out + j] = glu ? float(glu_act_ref(act, a) * y[size_t(b) * N + F + j]) : float(a);
          }
        Buffer xb(ctx, x.size() * 4), gb(ctx, K * 4), scratch(ctx, size_t(Bmax) * (xs + 2 * N) * 4);
        xb.upload(x);
        gb.upload(g);
        std::vector<float> first;
        for (uint32_t B : {Bmax, 1u, 6u, 16u}) {  // 16: the lanes kernel's 16-row tile (ops/matmul.cpp)
          Buffer yb(ctx, size_t(B) * out * 4);
          Sequence seq(ctx);
          seq.begin();
          MatmulArgs a;
          a.cfg.matmul_rows = variant;
          a.norm = &gb, a.norm_eps = eps, a.norm_scratch = Mat{&scratch, 0, xs};
          a.glu = glu, a.glu_act = act, a.glu_scratch = Mat{&scratch, Bmax * xs, round4(N)};
          matmul(seq, W, Mat{&xb, 0, xs}, Mat{&yb, 0, out}, B, a);
          seq.run();
          auto got = yb.read<float>(size_t(B) * out);
          if (B == Bmax) {
            check_close(got, ref, 2e-4f * std::sqrt(float(K)), 2e-4f, "folded matmul");
            first = got;
          } else {
            CHECK(std::equal(got.begin(), got.end(), first.begin()));  // batch-invariant, bit for bit
          }
        }
      }
}

TEST_CASE_FIXTURE(VkTest, "a gate|up weight in pair blocks (upload_glu_weight) gives the bits of gate rows then up rows") {
  // The forward's gate|up weights are stored so that each texel-path row tile holds gate rows and
  // their up rows (DeviceWeight::glu_pairs); each output is the same lane's same arithmetic, so the
  // folded act(gate) · up must equal that of the weight in plain order bit for bit. F off the pair
  // blocks (a short last block), every tile layout: f16 / q8_0 (64-row tiles), q4_K and q6_K
  // (16-row texel tiles, q6_K's at short and long rows), q5_0 short rows (16-row block tiles), q5_0
  // long rows (row-major, no pairs).
  const float eps = 1e-5f;
  struct Case {
    WeightType t;
    uint32_t K;
    uint32_t pairs;  // expected glu_pairs where the kernel folds the GLU on the texel path
  };
  for (const Case& c : {Case{WeightType::F16, 83, 32}, Case{WeightType::Q8_0, 96, 32}, Case{WeightType::Q4_K, 512, 8},
                        Case{WeightType::Q5_0, 512, 8}, Case{WeightType::Q6_K, 256, 8}, Case{WeightType::Q6_K, 1280, 8},
                        Case{WeightType::Q5_0, 2048, 0}})
    for (uint32_t F : {37u, 64u, 3u}) {
      CAPTURE(weight_type_name(c.t));
      CAPTURE(c.K);
      CAPTURE(F);
      const uint32_t K = c.K, xs = round4(K) + 4, Bmax = 9;
      auto raw = make_weight(c.t, 2 * F, K, F * 7 + K);
      const DeviceWeight plain = upload_weight(ctx, c.t, 2 * F, K, raw.data());
      const DeviceWeight paired = upload_glu_weight(ctx, c.t, F, K, raw.data());
      const bool folds = matmul_folds_glu(ctx) && plain.texel;
      CHECK(paired.glu_pairs == (folds ? c.pairs : 0u));
      CHECK(plain.glu_pairs == 0u);
      auto x = random_floats(size_t(Bmax) * xs, F + 1), g = random_floats(K, 4);
      Buffer xb(ctx, x.size() * 4), gb(ctx, K * 4), scratch(ctx, size_t(Bmax) * (xs + 2 * F + 4) * 4);
      xb.upload(x);
      gb.upload(g);
      for (uint32_t B : {1u, 5u, Bmax}) {
        std::vector<float> got[2];
        for (int i = 0; i < 2; ++i) {
          Buffer yb(ctx, size_t(B) * F * 4);
          Sequence seq(ctx);
          seq.begin();
          MatmulArgs a;
          a.norm = &gb, a.norm_eps = eps, a.norm_scratch = Mat{&scratch, 0, xs};
          a.glu = true, a.glu_act = GluAct::Silu, a.glu_scratch = Mat{&scratch, Bmax * xs, round4(2 * F)};
          matmul(seq, i ? paired : plain, Mat{&xb, 0, xs}, Mat{&yb, 0, F}, B, a);
          seq.run();
          got[i] = yb.read<float>(size_t(B) * F);
        }
        CAPTURE(B);
        CHECK(std::all_of(got[1].begin(), got[1].end(), [](float v) { return std::isfinite(v); }));
        CHECK(std::memcmp(got[0].data(), got[1].data(), got[0].size() * 4) == 0);
      }
      if (paired.glu_pairs) {  // rows out of order are for the folded GLU only: a plain matmul is refused
        Buffer yb(ctx, size_t(2) * F * 4);
        Sequence seq(ctx);
        seq.begin();
        CHECK_THROWS_WITH_AS(matmul(seq, paired, Mat{&xb, 0, xs}, Mat{&yb, 0, 2 * F}, 1),
                             doctest::Contains("pair blocks"), Error);
      }
    }
}

TEST_CASE("batch tiles of powers of two: passes of 1..17 rows take 5 lanes pipelines, not 16, and the same bits") {
  // ContextOptions::batch_tiles on a context of its own, so the count is of its pipelines alone.
  auto run = [](BatchTiles policy, size_t& pipelines) {
    ContextOptions o = test_context_options();
    o.batch_tiles = policy;
    Context c(o);
    const uint32_t N = 24, K = 64;
    auto raw = make_weight(WeightType::F16, N, K, 7);
    const DeviceWeight W = upload_weight(c, WeightType::F16, N, K, raw.data(), WeightPath::Texel);
    auto x = random_floats(size_t(17) * K, 3);
    Buffer xb(c, x.size() * 4), yb(c, size_t(17) * N * 4);
    xb.upload(x);
    std::vector<float> out;
    MatmulArgs a;
    a.cfg.matmul_rows = 3;
    for (uint32_t B = 1; B <= 17; ++B) {
      Sequence seq(c);
      seq.begin();
      matmul(seq, W, Mat{&xb, 0, K}, Mat{&yb, 0, N}, B, a);
      seq.run();
      auto y = yb.read<float>(size_t(B) * N);
      out.insert(out.end(), y.begin(), y.end());
    }
    pipelines = c.pipelines().size();
    CHECK(c.take_validation_messages().empty());
    return out;
  };
  size_t even = 0, pow2 = 0;
  const auto e = run(BatchTiles::Even, even), p = run(BatchTiles::PowersOfTwo, pow2);
  CHECK(even == 16);  // tiles 1..16 (17 rows: two tiles of 9)
  CHECK(pow2 == 5);   // 1, 2, 4, 8, 16 (17 rows: two tiles of 16)
  REQUIRE(e.size() == p.size());
  CHECK(std::memcmp(e.data(), p.data(), e.size() * 4) == 0);
}

TEST_CASE("matmul splits weights larger than the descriptor range") {
  // A lowered limit stands in for maxStorageBufferRange (128 MiB on lavapipe) so the test stays small.
  ContextOptions o;
  o.validation = true;
  o.pipeline_cache_dir = "-";
  o.storage_range_limit = 4096;  // bytes: a 100 x 96 f32 weight (38 KiB) becomes 10 chunks
  Context ctx(o);
  for (auto t : kAllWeightTypes)
    for (auto path : {WeightPath::Storage, WeightPath::Texel}) {
      const uint32_t N = 100, K = weight_type_block(t) == 256 ? 256 : 96, B = 3;
      auto raw = make_weight(t, N, K, 5);
      DeviceWeight W = upload_weight(ctx, t, N, K, raw.data(), path);
      CHECK(W.chunks.size() > 1);
      run_matmul_case(ctx, t, path, N, K, B, {}, false, true);
      // And the gather from a split table.
      auto w = dequantize(t, raw, N, K);
      std::vector<uint32_t> toks = {0, 99, 42, 7, 63};
      Buffer tb(ctx, toks.size() * 4), ob(ctx, toks.size() * K * 4);
      tb.upload(toks);
      Sequence seq(ctx);
      seq.begin();
      embed(seq, W, tb, 0, Mat{&ob, 0, K}, uint32_t(toks.size()));
      seq.run();
      std::vector<float> ref;
      for (auto id : toks) ref.insert(ref.end(), &w[size_t(id) * K], &w[size_t(id) * K] + K);
      check_close(ob.read<float>(ref.size()), ref, 0, 0, std::string("embed split ") + weight_type_name(t));
      // A gate|up weight that splits stays in row order (no pair blocks): the GLU then runs as a
      // plain matmul and glu_mul, against the CPU reference.
      const uint32_t F = N / 2;
      const DeviceWeight G = upload_glu_weight(ctx, t, F, K, raw.data(), path);
      CHECK(G.chunks.size() > 1);
      CHECK(G.glu_pairs == 0u);
      auto x = random_floats(size_t(B) * K, 9);
      Buffer xb(ctx, x.size() * 4), yb(ctx, size_t(B) * F * 4), gs(ctx, size_t(B) * N * 4);
      xb.upload(x);
      Sequence gseq(ctx);
      gseq.begin();
      MatmulArgs a;
      a.glu = true, a.glu_act = GluAct::Silu, a.glu_scratch = Mat{&gs, 0, N};
      matmul(gseq, G, Mat{&xb, 0, K}, Mat{&yb, 0, F}, B, a);
      gseq.run();
      const auto y = matmul_ref(w, x, B, N, K, K);
      std::vector<float> gref(size_t(B) * F);
      for (uint32_t b = 0; b < B; ++b)
        for (uint32_t j = 0; j < F; ++j)
          gref[size_t(b) * F + j] = float(glu_act_ref(GluAct::Silu, y[size_t(b) * N + j]) * y[size_t(b) * N + F + j]);
      check_close(yb.read<float>(gref.size()), gref, 2e-4f * std::sqrt(float(K)), 2e-4f,
                  std::string("glu split ") + weight_type_name(t));
    }
  CHECK(ctx.take_validation_messages().empty());
}

TEST_CASE("a weight row wider than one buffer may span is refused, naming the bound that binds") {
  // Each bound in turn the smallest: the test's storage range, then maxMemoryAllocationSize (the
  // chunk is one allocation, 64 KiB kept for the driver's rounding). A 4096-wide f16 row is 8 KiB.
  std::vector<uint8_t> raw(size_t(2) * 4096 * 2);
  for (int alloc : {0, 1}) {
    ContextOptions o;
    o.validation = true;
    o.pipeline_cache_dir = "-";
    if (alloc) o.allocation_limit = 65536 + 4096;  // 4 KiB a chunk
    else o.storage_range_limit = 4096;
    Context ctx(o);
    for (auto path : {WeightPath::Storage, WeightPath::Texel}) {
      CAPTURE(alloc);
      CHECK_THROWS_WITH_AS(upload_weight(ctx, WeightType::F16, 2, 4096, raw.data(), path),
                           doctest::Contains(alloc ? "exceeds the 4096 bytes one weight buffer may span on this device "
                                                     "(maxMemoryAllocationSize (less 64 KiB))"
                                                   : "exceeds the 4096 bytes one weight buffer may span on this device "
                                                     "(the test's storage range)"),
                           Error);
    }
    CHECK(ctx.take_validation_messages().empty());
  }
}

TEST_CASE_FIXTURE(VkTest, "embed gathers rows exactly for every weight type") {
  for (auto t : kAllWeightTypes)
    for (auto path : {WeightPath::Storage, WeightPath::Texel})
      for (uint32_t C : {32u, 96u, 23u, 37u, 256u, 768u}) {
        if (C % weight_type_block(t)) continue;
        const uint32_t V = 41;
        auto raw = make_weight(t, V, C, C);
        auto w = dequantize(t, raw, V, C);
        DeviceWeight W = upload_weight(ctx, t, V, C, raw.data(), path);
        std::vector<uint32_t> toks = {3, 40, 0, 3, 17, 29, 1};
        Buffer tb(ctx, toks.size() * 4), ob(ctx, toks.size() * (C + 3) * 4);
        tb.upload(toks);
        for (uint32_t wg : {32u, 64u}) {
          Sequence seq(ctx);
          seq.begin();
          KernelConfig cfg;
          cfg.workgroup_size = wg;
          embed(seq, W, tb, 1, Mat{&ob, 0, C + 3}, uint32_t(toks.size() - 1), cfg);
          seq.run();
          auto got = ob.read<float>((toks.size() - 1) * (C + 3));
          for (size_t r = 0; r + 1 < toks.size(); ++r)
            for (uint32_t c = 0; c < C; ++c)
              REQUIRE_MESSAGE(got[r * (C + 3) + c] == w[size_t(toks[r + 1]) * C + c],
                              "embed " << weight_type_name(t) << " row " << r << " col " << c);
        }
      }
}

TEST_CASE_FIXTURE(VkTest, "rmsnorm, glu_mul, add, rope match the CPU reference") {
  for (uint32_t C : {1u, 3u, 23u, 37u, 4097u})
    for (uint32_t wg : {0u, 4u, 32u, 64u, 96u}) {  // 0: the device's default choice
      const uint32_t T = 5, xs = C + 2;
      auto x = random_floats(size_t(T) * xs, C);
      auto w = random_floats(C, C + 1);
      std::vector<float> ref(size_t(T) * C);
      for (uint32_t t = 0; t < T; ++t) {
        double ss = 0;
        for (uint32_t c = 0; c < C; ++c) ss += double(x[t * xs + c]) * x[t * xs + c];
        double sc = 1.0 / std::sqrt(ss / C + 1e-5);
        for (uint32_t c = 0; c < C; ++c) ref[t * C + c] = float(x[t * xs + c] * sc * w[c]);
      }
      Buffer xb(ctx, x.size() * 4), wb(ctx, C * 4), yb(ctx, ref.size() * 4);
      xb.upload(x);
      wb.upload(w);
      KernelConfig cfg;
      cfg.workgroup_size = wg;
      Sequence seq(ctx);
      seq.begin();
      rmsnorm(seq, Mat{&xb, 0, xs}, wb, Mat{&yb, 0, C}, T, C, 1e-5f, cfg);
      seq.run();
      check_close(yb.read<float>(ref.size()), ref, 1e-5f, 1e-5f, "rmsnorm C=" + std::to_string(C));

      // glu_mul (each gate activation) and add on the same shapes; gates out to ±40, where
      // GELU's tanh and erf saturate
      auto g = random_floats(size_t(T) * C, 3 * C, -6, 6), u = random_floats(size_t(T) * C, 5 * C);
      if (g.size() > 2) g[0] = 40.0f, g[1] = -40.0f;
      Buffer gb(ctx, g.size() * 4), ub(ctx, u.size() * 4), ob(ctx, g.size() * 4), ab(ctx, g.size() * 4);
      gb.upload(g);
      ub.upload(u);
      for (GluAct act : kGluActs) {
        seq.begin();
        glu_mul(seq, Mat{&gb, 0, C}, Mat{&ub, 0, C}, Mat{&ob, 0, C}, T, C, act, cfg);
        seq.run();
        std::vector<float> rs(g.size());
        for (size_t i = 0; i < g.size(); ++i) rs[i] = float(glu_act_ref(act, g[i]) * u[i]);
        check_close(ob.read<float>(g.size()), rs, 1e-5f, 1e-5f, "glu_mul act " + std::to_string(int(act)) + " C=" + std::to_string(C));
      }
      seq.begin();
      add(seq, Mat{&gb, 0, C}, Mat{&ub, 0, C}, Mat{&ab, 0, C}, T, C, cfg);
      seq.run();
      std::vector<float> ra(g.size());
      for (size_t i = 0; i < g.size(); ++i) ra[i] = g[i] + u[i];
      check_close(ab.read<float>(g.size()), ra, 0, 0, "add C=" + std::to_string(C));
    }

  // rope: both pair conventions, partial rotation, positions per row from a buffer, with and
  // without frequency factors (Llama 3 rope_freqs) and linear scaling.
  for (auto mode : {RopeMode::Pairs, RopeMode::Halves})
    for (uint32_t D : {8u, 16u, 64u})
      for (uint32_t n_rot : {D, D / 2})
        for (int variant = 0; variant < 3; ++variant) {  // 0 plain, 1 factors, 2 factors + linear scale 1/4
          const uint32_t T = 7, H = 3, xs = H * D + 4;
          auto x = random_floats(size_t(T) * xs, D + n_rot);
          std::vector<int32_t> pos = {0, 5, 1, 900, 17, 3, 250, 2};
          std::vector<float> factors = random_floats(n_rot / 2, D * 7 + n_rot, 1.0f, 8.0f);
          const float scale = variant == 2 ? 0.25f : 1.0f;
          auto ref = x;
          for (uint32_t t = 0; t < T; ++t)
            for (uint32_t h = 0; h < H; ++h)
              for (uint32_t i = 0; i < n_rot / 2; ++i) {
                const size_t base = size_t(t) * xs + h * D;
                const size_t a = mode == RopeMode::Pairs ? base + 2 * i : base + i;
                const size_t b = mode == RopeMode::Pairs ? a + 1 : a + n_rot / 2;
                const double ang = double(pos[t + 1]) * std::pow(10000.0, -double(2 * i) / n_rot) /
                                   (variant ? factors[i] : 1.0) * scale;
                ref[a] = float(x[a] * std::cos(ang) - x[b] * std::sin(ang));
                ref[b] = float(x[a] * std::sin(ang) + x[b] * std::cos(ang));
              }
          Buffer xb(ctx, x.size() * 4), pb(ctx, pos.size() * 4), fb(ctx, factors.size() * 4);
          xb.upload(x);
          pb.upload(pos);
          fb.upload(factors);
          Sequence seq(ctx);
          seq.begin();
          rope(seq, Mat{&xb, 0, xs}, pb, 1, T, H, D, n_rot, {10000.0f, mode, scale, variant ? &fb : nullptr});
          seq.run();
          // Angles up to ~900 rad: f32 argument rounding dominates (900 * 6e-8 ≈ 5e-5).
          check_close(xb.read<float>(x.size()), ref, 2e-4f, 1e-4f,
                      std::string("rope ") + (mode == RopeMode::Pairs ? "pairs" : "halves") + " D=" + std::to_string(D) +
                          " n_rot=" + std::to_string(n_rot) + " variant " + std::to_string(variant));
        }
}

// Qwen3's q/k norm: every head of every row normalized in place with its own weight row, the
// rest of the row (v, padding) untouched.
TEST_CASE_FIXTURE(VkTest, "rmsnorm_heads normalizes each head in place and leaves the rest of the row") {
  for (uint32_t D : {1u, 8u, 23u, 64u, 128u})
    for (uint32_t heads : {1u, 3u, 6u})
      for (uint32_t wg : {0u, 4u, 32u}) {
        const uint32_t T = 5, xs = heads * D + 7, off = 3;
        auto x = random_floats(size_t(off) + T * xs, D * 31 + heads, -3, 3);
        auto w = random_floats(size_t(heads) * D, D + heads, 0.5f, 1.5f);
        auto ref = x;
        for (uint32_t t = 0; t < T; ++t)
          for (uint32_t h = 0; h < heads; ++h) {
            const size_t o = off + size_t(t) * xs + size_t(h) * D;
            double ss = 0;
            for (uint32_t d = 0; d < D; ++d) ss += double(x[o + d]) * x[o + d];
            const double sc = 1.0 / std::sqrt(ss / D + 1e-6);
            for (uint32_t d = 0; d < D; ++d) ref[o + d] = float(x[o + d] * sc * w[size_t(h) * D + d]);
          }
        Buffer xb(ctx, x.size() * 4), wb(ctx, w.size() * 4);
        xb.upload(x);
        wb.upload(w);
        KernelConfig cfg;
        cfg.workgroup_size = wg;
        Sequence seq(ctx);
        seq.begin();
        rmsnorm_heads(seq, Mat{&xb, off, xs}, wb, T, heads, D, 1e-6f, cfg);
        seq.run();
        check_close(xb.read<float>(x.size()), ref, 1e-5f, 1e-5f,
                    "rmsnorm_heads D=" + std::to_string(D) + " heads=" + std::to_string(heads) + " wg=" + std::to_string(wg));
      }
}

TEST_CASE_FIXTURE(VkTest, "softmax, argmax and top-k over vocabulary rows match the CPU reference") {
  // wg 0: the device's own choice (one subgroup per row on CPU-like devices where the driver's
  // loop budget allows: V = 4097 takes it, V = 32000 falls back to 64 at k = 9).
  for (uint32_t V : {1u, 3u, 23u, 37u, 4097u, 32000u, 152064u})
    for (uint32_t wg : {0u, 32u, 64u, 128u}) {
      const uint32_t T = 4, xs = V + 1;
      auto x = random_floats(size_t(T) * xs, V + wg, -8, 8);
      // Plant ties: equal maxima in row 1, so "lower index wins" is exercised.
      if (V > 10) {
        x[xs + 2] = 9.0f;
        x[xs + V - 1] = 9.0f;
        x[xs + 5] = 8.5f;
        x[xs + 7] = 8.5f;
      }
      Buffer xb(ctx, x.size() * 4), yb(ctx, size_t(T) * V * 4), ab(ctx, T * 4), ib(ctx, T * 32 * 4),
          lb(ctx, T * 32 * 4);
      xb.upload(x);
      const uint32_t k = std::min(V, 9u);
      KernelConfig cfg;
      cfg.workgroup_size = wg;
      Sequence seq(ctx);
      seq.begin();
      softmax(seq, Mat{&xb, 0, xs}, Mat{&yb, 0, V}, T, V, 1.0f / 0.7f, cfg);
      argmax(seq, Mat{&xb, 0, xs}, ab, 0, T, V, cfg);
      topk(seq, Mat{&xb, 0, xs}, T, V, k, ib, lb, 0, 32, cfg);
      seq.run();
      auto sm = yb.read<float>(size_t(T) * V);
      auto am = ab.read<uint32_t>(T);
      auto ids = ib.read<uint32_t>(T * 32);
      auto lp = lb.read<float>(T * 32);
      std::vector<float> ref_sm(size_t(T) * V);
      for (uint32_t t = 0; t < T; ++t) {
        const float* r = &x[size_t(t) * xs];
        double m = -INFINITY, s = 0, s1 = 0;
        for (uint32_t v = 0; v < V; ++v) m = std::max(m, double(r[v]));
        for (uint32_t v = 0; v < V; ++v) {
          s += std::exp((r[v] - m) / 0.7);
          s1 += std::exp(r[v] - m);
        }
        for (uint32_t v = 0; v < V; ++v) ref_sm[size_t(t) * V + v] = float(std::exp((r[v] - m) / 0.7) / s);
        std::vector<uint32_t> order(V);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return r[a] > r[b]; });
        CHECK_MESSAGE(am[t] == order[0], "argmax V=" << V << " row " << t);
        for (uint32_t j = 0; j < k; ++j) {
          CHECK_MESSAGE(ids[t * 32 + j] == order[j], "topk V=" << V << " row " << t << " rank " << j);
          const double ref_lp = r[order[j]] - m - std::log(s1);
          CHECK_MESSAGE(std::fabs(lp[t * 32 + j] - ref_lp) <= 1e-4 + 1e-5 * std::fabs(ref_lp),
                        "topk logp V=" << V << " row " << t << " rank " << j << ": " << lp[t * 32 + j] << " vs "
                                       << ref_lp);
        }
      }
      check_close(sm, ref_sm, 1e-6f, 1e-4f, "softmax V=" + std::to_string(V));
    }
}

TEST_CASE_FIXTURE(VkTest, "argmax and top-k rank NaN last and ±Inf in order, like the CPU reference") {
  // Rows a broken model produces: scattered NaN / ±Inf / -0, all NaN, all -inf, NaN with a few
  // finite values, two +inf (a tie), -inf with one NaN. The order is tree_order.hpp's.
  const uint32_t T = 6;
  uint32_t seed = 31;
  for (uint32_t V : {1u, 5u, 37u, 300u, 4097u})
    for (uint32_t wg : {0u, 32u, 64u}) {  // 0: the device's own choice
      std::mt19937 rng(seed++);
      std::uniform_real_distribution<float> u(-8.0f, 8.0f);
      std::vector<float> x(size_t(T) * V);
      for (uint32_t t = 0; t < T; ++t)
        for (uint32_t v = 0; v < V; ++v) {
          float& y = x[size_t(t) * V + v];
          const uint32_t r = rng() % 8;
          switch (t) {
            case 0: y = r == 0 ? kNaN : r == 1 ? kInf : r == 2 ? -kInf : r == 3 ? -0.0f : r == 4 ? 0.0f : u(rng); break;
            case 1: y = kNaN; break;
            case 2: y = -kInf; break;
            case 3: y = r == 0 ? u(rng) : kNaN; break;
            case 4: y = v == V / 2 || v == V - 1 ? kInf : u(rng); break;
            default: y = v == 0 ? kNaN : -kInf; break;
          }
        }
      const uint32_t k = std::min(V, kTopkMax);
      Buffer xb(ctx, x.size() * 4), ab(ctx, T * 4), ib(ctx, T * kTopkMax * 4), lb(ctx, T * kTopkMax * 4);
      xb.upload(x);
      KernelConfig cfg;
      cfg.workgroup_size = wg;
      Sequence seq(ctx);
      seq.begin();
      argmax(seq, Mat{&xb, 0, V}, ab, 0, T, V, cfg);
      topk(seq, Mat{&xb, 0, V}, T, V, k, ib, lb, 0, kTopkMax, cfg);
      seq.run();
      auto am = ab.read<uint32_t>(T);
      auto ids = ib.read<uint32_t>(T * kTopkMax);
      auto lp = lb.read<float>(T * kTopkMax);
      for (uint32_t t = 0; t < T; ++t) {
        const float* r = &x[size_t(t) * V];
        std::vector<uint32_t> order(V);
        std::iota(order.begin(), order.end(), 0u);
        std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return ranks_before(r[a], a, r[b], b); });
        INFO("V " << V << " wg " << wg << " row " << t);
        CHECK(am[t] == order[0]);
        CHECK(am[t] == order_argmax(std::span<const float>(r, V)));  // the CPU reference argmax agrees
        // log-softmax over the non-NaN entries, m = the first-ranked value (topk.comp)
        const double m = r[order[0]];
        double s = 0;
        for (uint32_t v = 0; v < V; ++v)
          if (!std::isnan(r[v])) s += std::exp(double(r[v]) - m);
        const double lse = m + std::log(s);
        for (uint32_t j = 0; j < k; ++j) {
          INFO("rank " << j);
          CHECK(ids[t * kTopkMax + j] == order[j]);
          const double want = double(r[order[j]]) - lse;
          const float got = lp[t * kTopkMax + j];
          if (std::isnan(want)) CHECK(std::isnan(got));
          else if (std::isinf(want)) CHECK(got == float(want));
          else CHECK(std::fabs(got - want) <= 1e-4 + 1e-5 * std::fabs(want));
        }
      }
    }
}

TEST_CASE_FIXTURE(VkTest, "a subgroup size outside the device's range is refused with a clear error") {
  KernelConfig cfg;
  cfg.required_subgroup_size = ctx.caps().max_subgroup_size * 4;
  Buffer b(ctx, 64);
  Sequence seq(ctx);
  seq.begin();
  CHECK_THROWS_WITH_AS(add(seq, Mat{&b, 0, 4}, Mat{&b, 0, 4}, Mat{&b, 0, 4}, 1, 4, cfg),
                       doctest::Contains("subgroup size"), Error);
  seq.end();
}

TEST_CASE("the validation harness really reports misuse") {
  // Guards the guard: if the layer were silently absent, every "validation silent" check would pass.
  Context& ctx = vk_context();
  REQUIRE(ctx.validation_enabled());
  ctx.take_validation_messages();
  VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = 0;  // VUID-VkBufferCreateInfo-size-00912: size must be greater than 0
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
  VkBuffer b = VK_NULL_HANDLE;
  if (ctx.vk().vkCreateBuffer(ctx.device(), &bi, nullptr, &b) == VK_SUCCESS && b)
    ctx.vk().vkDestroyBuffer(ctx.device(), b, nullptr);
  auto msgs = ctx.take_validation_messages();
  CHECK(!msgs.empty());
}
