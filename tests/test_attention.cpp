// Tree-masked attention, every kernel and specialization (attention.comp with several workgroup
// sizes; attention_sg.comp with K/V through texel views and through storage buffers, default and
// one head per workgroup): equals a double-precision CPU reference within tolerance, and is
// bit-exact against the two ways decoding can meet the same row — the node's root-to-leaf path
// run alone as a causal chain, and one-token decoding (a 1-row causal pass at the node's
// position). GQA and plain heads, odd D, D = 256, t = 0, deep trees, padded strides and offsets.
// Also the K/V stores (kv_write, rope_kv_write, the qkv matmul's folded store) and f16 caches.
// The folded o-projection's cases are in test_attention_fold.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "vkspec/dtype.hpp"
#include "vkspec/model.hpp"
#include "vkspec/step_state.h"
#include "vkspec/tree_limits.h"

#include "attention_harness.hpp"

using namespace vkspec;
using namespace vkspec::test;
using namespace vkspec::test::attn;

namespace {
// Two K/V caches that started as the same junk words: every word equal, and at least min_written
// of them no longer junk.
void check_same_cache_words(const Buffer& a, const Buffer& b, const std::vector<uint32_t>& junk, size_t min_written,
                            const std::string& what) {
  const auto wa = a.read<uint32_t>(junk.size()), wb = b.read<uint32_t>(junk.size());
  size_t bad = 0, written = 0;
  for (size_t i = 0; i < junk.size(); ++i) bad += wa[i] != wb[i], written += wb[i] != junk[i];
  CHECK_MESSAGE(bad == 0, what << ": " << bad << " cache words differ");
  CHECK_MESSAGE(written >= min_written, what << ": only " << written << " cache words written");
}
}  // namespace

TEST_CASE_FIXTURE(VkTest, "tree attention equals a reference, each path run causally, and one-token decoding") {
  struct Case {
    uint32_t N, t, H, Hkv, D, wg;
    bool deep;
    Layout layout;
  };
  const Case cases[] = {
      {1, 0, 2, 2, 8, 32, false, {}},
      {5, 3, 4, 2, 16, 64, false, {}},
      {23, 37, 8, 4, 64, 64, false, {}},
      {37, 70, 6, 1, 23, 32, false, {}},
      {64, 129, 4, 4, 32, 128, false, {}},
      {9, 200, 8, 2, 128, 64, false, {}},
      {40, 11, 6, 3, 32, 64, true, {5, 3, 2, 1, 3}},  // the demo model's shape, depth > subgroup
      {7, 1, 6, 2, 23, 32, true, {1, 1, 3, 5, 1}},    // odd D, GQA group of 3
      {3, 5, 6, 2, 256, 64, false, {}},               // the widest head the kernels take
      {2, 0, 1, 1, 4, 32, false, {0, 4, 0, 4, 0}},
  };
  for (const auto& c : cases) {
    const uint32_t cap = c.t + c.N + 64, row = c.Hkv * c.D, words = (c.N + 31) / 32, HD = c.H * c.D;
    Tree tree = random_tree(c.N, c.N * 7 + c.t, c.deep);
    auto kc = random_floats(size_t(cap) * row, c.t + 1), vc = random_floats(size_t(cap) * row, c.t + 2);
    auto q = random_floats(size_t(c.N) * HD, c.t + 3, -2, 2);
    auto mask = tree.mask_bits(words);
    Buffer kb(ctx, kc.size() * 4), vb(ctx, vc.size() * 4);
    kb.upload(kc);
    vb.upload(vc);

    // Oracle 1: double-precision reference over committed slots + ancestors.
    const std::vector<float> ref = tree_attend_ref(tree, q, kc, vc, c.N, c.t, c.H, c.Hkv, c.D);

    for (const auto& v : variants(c.wg, c.H, c.Hkv, c.D)) {
      const std::string what = std::string(v.name) + " N=" + std::to_string(c.N) + " t=" + std::to_string(c.t) +
                               " H=" + std::to_string(c.H) + " Hkv=" + std::to_string(c.Hkv) +
                               " D=" + std::to_string(c.D);
      CAPTURE(what);
      auto tree_out = run_attention(ctx, v.cfg, c.N, c.t, c.H, c.Hkv, c.D, q, kb, vb, mask, words, c.layout);
      // f32 accumulation over up to ~330 keys of |values| <= 1 (scores to ~|q|·sqrt(D)).
      check_close(tree_out, ref, 2e-5f, 1e-4f, what);

      // Oracles 2 and 3: each sampled node's path as a chain, and the node alone.
      check_paths_exact(ctx, v.cfg, tree, c.t, c.H, c.Hkv, c.D, q, kc, vc, tree_out, c.layout, 0, c.N / 7);
    }
  }
}

TEST_CASE_FIXTURE(VkTest, "sliding-window attention sees the last W positions: reference, path run causally, one-token decoding") {
  // A window narrower than the committed keys, narrower than a deep tree's depth (a node then
  // drops its own oldest ancestors), of one position (a row sees only itself), and wider than
  // everything (full attention, bit for bit).
  struct Case {
    uint32_t N, t, H, Hkv, D, wg, window;
    bool deep;
  };
  const Case cases[] = {
      {9, 40, 4, 2, 16, 32, 13, false}, {40, 11, 6, 3, 32, 64, 7, true}, {23, 70, 8, 4, 64, 64, 1, false},
      {12, 5, 2, 1, 23, 32, 20, true},  {17, 3, 4, 4, 8, 32, 200, true},
  };
  for (const auto& c : cases) {
    const uint32_t cap = c.t + c.N + 8, row = c.Hkv * c.D, words = (c.N + 31) / 32, HD = c.H * c.D;
    const Tree tree = random_tree(c.N, c.N * 3 + c.window, c.deep);
    auto kc = random_floats(size_t(cap) * row, c.t + 11), vc = random_floats(size_t(cap) * row, c.t + 12);
    auto q = random_floats(size_t(c.N) * HD, c.t + 13, -2, 2);
    const auto mask = tree.mask_bits(words);
    Buffer kb(ctx, kc.size() * 4), vb(ctx, vc.size() * 4);
    kb.upload(kc);
    vb.upload(vc);
    const std::vector<float> ref = tree_attend_ref(tree, q, kc, vc, c.N, c.t, c.H, c.Hkv, c.D, c.window);
    for (const auto& v : variants(c.wg, c.H, c.Hkv, c.D)) {
      const std::string what = std::string(v.name) + " N=" + std::to_string(c.N) + " t=" + std::to_string(c.t) +
                               " D=" + std::to_string(c.D) + " window=" + std::to_string(c.window);
      CAPTURE(what);
      auto out = run_attention(ctx, v.cfg, c.N, c.t, c.H, c.Hkv, c.D, q, kb, vb, mask, words, {}, {}, nullptr, c.window);
      check_close(out, ref, 2e-5f, 1e-4f, what);
      if (c.window >= c.t + c.N) {  // covers every key: the unwindowed pass exactly
        auto full = run_attention(ctx, v.cfg, c.N, c.t, c.H, c.Hkv, c.D, q, kb, vb, mask, words, {});
        CHECK(std::memcmp(full.data(), out.data(), out.size() * 4) == 0);
      }
      // Exactness as without a window: each node's path as a chain, and the node alone.
      check_paths_exact(ctx, v.cfg, tree, c.t, c.H, c.Hkv, c.D, q, kc, vc, out, {}, c.window, c.N / 5);
    }
  }
}

TEST_CASE_FIXTURE(VkTest, "attention at the longest context each kernel allows equals the reference") {
  // Where the driver ends a shader's loops after a budget (DeviceCaps::Quirks::
  // loop_iteration_limit), attention_max_keys is the bound the model refuses a longer --ctx by:
  // at that bound every kernel must still be right. At D = 128 the subgroup kernel's per-key
  // loops once ran unrolled only on some variants, and lavapipe returned wrong rows from 9000
  // keys up. Elsewhere (no budget) 70,000 keys stand in for "long". The D = 16 pass has 5 rows,
  // so the subgroup kernel takes them 4 to a workgroup (the last workgroup 1): the budget must
  // hold for the most rows a workgroup takes (ops/attention.cpp: max_query_rows).
  struct Case {
    uint32_t N, H, Hkv, D;
  };
  for (const Case c : {Case{3, 2, 1, 128}, Case{5, 1, 1, 16}}) {
    const uint32_t words = 1, row = c.Hkv * c.D, HD = c.H * c.D;
    const Tree tree = random_tree(c.N, 5, true);
    const auto mask = tree.mask_bits(words);
    for (const auto& v : variants(64, c.H, c.Hkv, c.D)) {
      const uint32_t max_keys = attention_max_keys(ctx, c.D, words, v.cfg);
      // D = 128 rows are 16x longer than D = 16 ones: keep each cache under ~100 MB.
      const uint32_t t = std::min(max_keys, c.D > 64 ? 100000u : 600000u) - c.N;
      const std::string what = std::string(v.name) + " D=" + std::to_string(c.D) + " t=" + std::to_string(t) +
                               " (bound " + std::to_string(max_keys) + " keys)";
      CAPTURE(what);
      const uint32_t cap = t + c.N;
      auto kc = random_floats(size_t(cap) * row, t + 1), vc = random_floats(size_t(cap) * row, t + 2);
      auto q = random_floats(size_t(c.N) * HD, t + 3, -2, 2);
      Buffer kb(ctx, kc.size() * 4), vb(ctx, vc.size() * 4);
      kb.upload(kc);
      vb.upload(vc);
      auto got = run_attention(ctx, v.cfg, c.N, t, c.H, c.Hkv, c.D, q, kb, vb, mask, words, {});
      // Scores spread over many keys: the weights are tiny and the sum long, so a looser relative bound.
      check_close(got, tree_attend_ref(tree, q, kc, vc, c.N, t, c.H, c.Hkv, c.D), 2e-5f, 1e-3f, what);
    }
  }
}

TEST_CASE_FIXTURE(VkTest, "subgroup attention at every subgroup size the device can pin") {
  // The chunk width is the subgroup size S; exactness and accuracy must hold for each S. Without
  // subgroup size control only the default size runs (covered above).
  const auto& caps = ctx.caps();
  if (!caps.subgroup_arithmetic || !caps.subgroup_shuffle || !caps.subgroup_size_control) {
    MESSAGE("NOT RUN: device '" << caps.name << "' lacks "
                                << (!caps.subgroup_arithmetic ? "subgroup arithmetic"
                                    : !caps.subgroup_shuffle  ? "subgroup shuffles"
                                                              : "subgroup size control")
                                << ", so no subgroup size can be pinned");
    return;
  }
  const uint32_t N = 11, t = 45, H = 6, Hkv = 3, D = 32, row = Hkv * D, HD = H * D, cap = t + N + 8;
  Tree tree = random_tree(N, 99, true);
  auto kc = random_floats(size_t(cap) * row, 11), vc = random_floats(size_t(cap) * row, 12);
  auto q = random_floats(size_t(N) * HD, 13, -2, 2);
  auto mask = tree.mask_bits(1);
  Buffer kb(ctx, kc.size() * 4), vb(ctx, vc.size() * 4);
  kb.upload(kc);
  vb.upload(vc);
  std::vector<float> ref;
  for (uint32_t i = 0; i < N; ++i) {
    std::vector<uint32_t> slots;
    for (uint32_t s = 0; s < t; ++s) slots.push_back(s);
    for (int j : tree.path_to(int(i))) slots.push_back(t + uint32_t(j));
    auto o = attend_ref(&q[size_t(i) * HD], kc, vc, slots, H, Hkv, D);
    ref.insert(ref.end(), o.begin(), o.end());
  }
  for (uint32_t S = caps.min_subgroup_size; S <= caps.max_subgroup_size; S *= 2) {
    if (S > caps.max_workgroup_invocations) break;
    KernelConfig cfg;
    cfg.use_subgroup = 1;
    cfg.required_subgroup_size = S;
    const std::string what = "subgroup kernel S=" + std::to_string(S);
    auto out = run_attention(ctx, cfg, N, t, H, Hkv, D, q, kb, vb, mask, 1, {});
    check_close(out, ref, 2e-5f, 1e-4f, what);
    // The deepest node against one-token decoding of its path.
    const uint32_t i = N - 1;
    auto path = tree.path_to(int(i));
    const uint32_t P = uint32_t(path.size());
    auto kc2 = kc, vc2 = vc;
    for (uint32_t e = 0; e < P; ++e) {
      std::memcpy(&kc2[(t + e) * row], &kc[(t + path[e]) * row], row * 4);
      std::memcpy(&vc2[(t + e) * row], &vc[(t + path[e]) * row], row * 4);
    }
    Buffer k2(ctx, kc2.size() * 4), v2(ctx, vc2.size() * 4);
    k2.upload(kc2);
    v2.upload(vc2);
    std::vector<float> q1(&q[size_t(i) * HD], &q[size_t(i + 1) * HD]);
    auto one = run_attention(ctx, cfg, 1, t + P - 1, H, Hkv, D, q1, k2, v2, {}, 0, {});
    CHECK_MESSAGE(std::memcmp(one.data(), &out[size_t(i) * HD], HD * 4) == 0,
                  what << ": node " << i << " differs from one-token decoding");
  }
}

TEST_CASE_FIXTURE(VkTest, "kv_write into an f16 cache at a layer's offset equals the CPU rounding, nothing else written") {
  const uint32_t N = 5, kv = 66, stride = 300, k_col = 11, v_col = 11 + kv + 3, cap = 40, slot = 23;
  // Four streams of one buffer, as a model lays out two layers: K into stream 1, V into stream 3.
  const uint32_t sw = uint32_t(kv_stream_words(cap, kv / 2));
  auto src = random_floats(size_t(N) * stride, 7, -3, 3);
  src[k_col] = 1.0f + 1.0f / 2048;            // a tie: rounds to even (1.0)
  src[k_col + 1] = 1.0f + 3.0f / 2048;        // a tie: rounds to even (1 + 2/1024)
  src[v_col] = 70000.0f;                      // past the largest half: inf
  src[stride + v_col + 1] = 1e-6f;            // a subnormal half
  Buffer sb(ctx, src.size() * 4), cb(ctx, size_t(4) * sw * 4);
  sb.upload(src);
  const std::vector<uint32_t> junk(size_t(4) * sw, 0xdeadbeefu);
  cb.upload(junk);
  KvLayer layer{&cb, &cb, 2 * sw, 2 * 3 * sw, KvType::F16};
  Sequence seq(ctx);
  seq.begin();
  kv_write(seq, Mat{&sb, 0, stride}, k_col, v_col, N, kv, layer, slot);
  seq.run();
  auto want = junk;
  for (uint32_t r = 0; r < N; ++r) {
    const auto k = pack_f16(std::vector<float>(&src[r * stride + k_col], &src[r * stride + k_col + kv]));
    const auto v = pack_f16(std::vector<float>(&src[r * stride + v_col], &src[r * stride + v_col + kv]));
    std::copy(k.begin(), k.end(), want.begin() + sw + size_t(slot + r) * (kv / 2));
    std::copy(v.begin(), v.end(), want.begin() + 3 * sw + size_t(slot + r) * (kv / 2));
  }
  const auto got = cb.read<uint32_t>(want.size());
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) bad += got[i] != want[i];
  CHECK_MESSAGE(bad == 0, bad << " words differ from the CPU's f16 rounding (or were written outside the rows)");
  CHECK((got[sw + slot * (kv / 2)] & 0xffff) == 0x3c00u);             // 1 + 2^-11 → 1.0
  CHECK((got[3 * sw + slot * (kv / 2)] & 0xffff) == 0x7c00u);         // 70000 → inf
  CHECK(decode_kv({got[sw + slot * (kv / 2)]}, KvType::F16)[1] == 1.0f + 2.0f / 1024);
}

// The forward's fused pass against the two kernels it replaces (each tested against the CPU above
// and in test_kernels.cpp): rope over the q and k heads in place, then kv_write. The same float
// operations in the same order, so the q rows and the cache words must be bit-identical; x's key
// columns keep the projection's values, and nothing outside the cache rows is written.
TEST_CASE_FIXTURE(VkTest, "rope_kv_write equals rope then kv_write bit for bit, f32 and f16 caches, both pair orders") {
  struct Case {
    uint32_t N, H, Hkv, D, n_rot;
    bool table;
  };
  const Case cases[] = {{1, 4, 2, 16, 16, false}, {7, 6, 2, 64, 64, true}, {5, 3, 3, 8, 4, true},
                        {17, 8, 1, 128, 128, false}, {3, 2, 2, 6, 6, true}, {2, 1, 1, 2, 2, false}};
  uint32_t seed = 1;
  for (const Case& c : cases)
    for (KvType kt : {KvType::F32, KvType::F16})
      for (RopeMode mode : {RopeMode::Pairs, RopeMode::Halves})
        for (bool factors : {false, true}) {
          ++seed;
          const uint32_t HD = c.H * c.D, kv = c.Hkv * c.D, stride = HD + 2 * kv + 5, x_off = 3;
          const uint32_t k_col = HD, v_col = HD + kv, cap = 40, t0 = 11, pos_off = 2;
          const std::string what = "N " + std::to_string(c.N) + " H " + std::to_string(c.H) + "/" +
                                   std::to_string(c.Hkv) + " D " + std::to_string(c.D) + " n_rot " +
                                   std::to_string(c.n_rot) + (kt == KvType::F16 ? " f16" : " f32") +
                                   (mode == RopeMode::Pairs ? " pairs" : " halves") + (factors ? " factors" : "");
          auto x = random_floats(x_off + size_t(c.N) * stride, seed, -4, 4);
          std::vector<int32_t> table(pos_off + c.N);
          for (size_t i = 0; i < table.size(); ++i) table[i] = int32_t((i * 37 + seed) % 700);
          const auto fac = random_floats(c.n_rot / 2, seed + 7, 1.0f, 8.0f);
          // The step state holds t (a dynamic scalar for both the positions and the slot).
          std::vector<uint32_t> st(kStateWords, 0);
          st[kStateT] = t0;
          // The layer's K and V at value offsets k_base / v_base of one buffer, the rest junk.
          const uint32_t vals = kt == KvType::F16 ? 2 : 1, words = cap * kv / vals;
          const uint32_t k_base = 4 * vals, v_base = k_base + words * vals + 2 * vals;
          const std::vector<uint32_t> junk(v_base / vals + words + 8, 0xdeadbeefu);
          Buffer xa(ctx, x.size() * 4), xb(ctx, x.size() * 4), tb(ctx, table.size() * 4), fb(ctx, fac.size() * 4),
              sb(ctx, st.size() * 4), ca(ctx, junk.size() * 4), cb(ctx, junk.size() * 4);
          xa.upload(x), xb.upload(x), tb.upload(table), fb.upload(fac), sb.upload(st), ca.upload(junk), cb.upload(junk);
          const RopeArgs ra{5000.0f + float(seed), mode, factors ? 0.5f : 1.0f, factors ? &fb : nullptr};
          const RopePositions pos = c.table ? RopePositions{&tb, pos_off, Dyn(sb, kStateT), 1}
                                            : RopePositions::run(Dyn(sb, kStateT, 1), 1);
          const Dyn slot(sb, kStateT, 2);
          Sequence seq(ctx);
          seq.begin();
          rope(seq, Mat{&xa, x_off, stride}, pos, c.N, c.H + c.Hkv, c.D, c.n_rot, ra);
          kv_write(seq, Mat{&xa, x_off, stride}, k_col, v_col, c.N, kv, KvLayer{&ca, &ca, k_base, v_base, kt}, slot);
          rope_kv_write(seq, Mat{&xb, x_off, stride}, pos, c.N, c.H, c.D, c.n_rot, ra, k_col, v_col, kv,
                        KvLayer{&cb, &cb, k_base, v_base, kt}, slot);
          seq.run();
          const auto ga = xa.read<float>(x.size()), gb = xb.read<float>(x.size());
          size_t bad_q = 0, bad_rest = 0;
          for (size_t i = 0; i < x.size(); ++i) {
            const bool q = i >= x_off && (i - x_off) % stride < HD;
            const float want = q ? ga[i] : x[i];  // fused: K columns and everything else unchanged
            bad_q += q && std::memcmp(&gb[i], &want, 4) != 0;
            bad_rest += !q && std::memcmp(&gb[i], &want, 4) != 0;
          }
          CHECK_MESSAGE(bad_q == 0, what << ": " << bad_q << " q values differ from rope's");
          CHECK_MESSAGE(bad_rest == 0, what << ": " << bad_rest << " values outside q changed");
          check_same_cache_words(ca, cb, junk, size_t(c.N) * 2 * kv / vals - 2, what + " (against rope + kv_write)");
        }
}

// The qkv matmul with RoPE and the K/V store in its epilogue (matmul_lanes.comp, ROPE_KV) against
// the plain matmul followed by rope_kv_write: every row's dot product runs in the same order and
// the rotation is rope.glsl's, so y and both caches must be bit-identical. On a device whose
// kernel cannot fold (no CPU-like lanes kernel) the test says so and compares the fallback.
TEST_CASE_FIXTURE(VkTest, "qkv matmul with RoPE and the K/V store folded in equals matmul then rope_kv_write, bit for bit") {
  struct Case {
    uint32_t B, H, Hkv, D;
    WeightType wt;
    bool bias, norm, table;
    // v's rows in another type, a chunk of their own (as a Q4_K_M file's q6_K attn_v beside q4_K
    // q and k): q6_K beside a 256-value type, q4_0 beside a 32-value one. One dispatch a chunk.
    bool split_v = false;
  };
  const Case cases[] = {{1, 4, 2, 16, WeightType::F16, false, true, false},  {7, 6, 3, 32, WeightType::Q8_0, true, true, true},
                        {17, 8, 1, 64, WeightType::F16, true, false, true},  {5, 2, 2, 128, WeightType::Q4_K, false, true, false},
                        {3, 6, 2, 32, WeightType::F32, true, true, true},    {9, 3, 3, 8, WeightType::Q4_0, false, false, false},
                        {32, 4, 2, 32, WeightType::Q8_0, false, true, false},  // 32: two 16-row tiles (ops/matmul.cpp)
                        {5, 4, 2, 32, WeightType::Q4_K, true, true, true, true}, {18, 3, 1, 16, WeightType::Q8_0, false, false, false, true}};
  const bool lanes = ctx.caps().quirks.single_subgroup_kernels && ctx.caps().subgroup_shuffle;
  if (!lanes) MESSAGE("device '" << ctx.caps().name << "' has no lanes kernel with shuffles: the unfolded path is compared");
  uint32_t seed = 100;
  // Each case meets both cache types and both pair orders, in two of the four combinations
  // (alternating between cases, so every combination runs with several shapes): the fold's
  // cache store and its rotation do not depend on each other, and all four for every case
  // took 224 s of a cold suite (48 pipelines, 2-vCPU VM, 2026-12-04).
  for (const Case& c : cases)
    for (int combo : {0, 1}) {
      const bool odd = (&c - cases) % 2 == 1;
      const KvType kt = (combo == 0) != odd ? KvType::F32 : KvType::F16;
      const RopeMode mode = combo == 0 ? RopeMode::Pairs : RopeMode::Halves;
      ++seed;
      const bool scaled = seed % 2 == 0;  // every other case with Llama 3 frequency factors and linear scaling
      const uint32_t HD = c.H * c.D, kv = c.Hkv * c.D, N = HD + 2 * kv, ys = N + 3, y_off = 5;
      const uint32_t K = weight_type_block(c.wt) == 256 ? 256 : weight_type_block(c.wt) == 32 ? 96 : 72, cap = 48, t0 = 9, pos_off = 1;
      const std::string what = std::string(weight_type_name(c.wt)) + " B " + std::to_string(c.B) + " H " +
                               std::to_string(c.H) + "/" + std::to_string(c.Hkv) + " D " + std::to_string(c.D) +
                               (kt == KvType::F16 ? " f16" : " f32") + (mode == RopeMode::Pairs ? " pairs" : " halves") +
                               (scaled ? " scaled" : "") + (c.split_v ? " split v" : "");
      DeviceWeight W;
      if (c.split_v) {
        const WeightType vt = weight_type_block(c.wt) == 256 ? WeightType::Q6_K : WeightType::Q4_0;
        const auto qk = make_weight(c.wt, HD + kv, K, seed), v = make_weight(vt, kv, K, seed + 5);
        std::vector<DeviceWeight> parts;
        parts.push_back(upload_weight(ctx, c.wt, HD + kv, K, qk.data()));
        parts.push_back(upload_weight(ctx, vt, kv, K, v.data()));
        W = stack_weights(std::move(parts));
      } else {
        const auto raw = make_weight(c.wt, N, K, seed);
        W = upload_weight(ctx, c.wt, N, K, raw.data());
      }
      const auto x = random_floats(size_t(c.B) * K, seed + 1, -2, 2);
      const auto bias = random_floats(N, seed + 2), g = random_floats(K, seed + 3, 0.5f, 1.5f);
      std::vector<int32_t> table(pos_off + c.B);
      for (size_t i = 0; i < table.size(); ++i) table[i] = int32_t((i * 29 + seed) % 500);
      std::vector<uint32_t> st(kStateWords, 0);
      st[kStateT] = t0;
      const uint32_t vals = kt == KvType::F16 ? 2 : 1, words = cap * kv / vals;
      const uint32_t k_base = 2 * vals, v_base = k_base + words * vals + 4 * vals;
      const std::vector<uint32_t> junk(v_base / vals + words + 8, 0xdeadbeefu);
      const std::vector<float> yjunk(y_off + size_t(c.B) * ys, -7.0f);
      Buffer xb(ctx, x.size() * 4), bb(ctx, bias.size() * 4), gb(ctx, g.size() * 4), tb(ctx, table.size() * 4),
          sb(ctx, st.size() * 4), ya(ctx, yjunk.size() * 4), yb(ctx, yjunk.size() * 4), ca(ctx, junk.size() * 4),
          cb(ctx, junk.size() * 4), scratch(ctx, x.size() * 4);
      xb.upload(x), bb.upload(bias), gb.upload(g), tb.upload(table), sb.upload(st), ca.upload(junk), cb.upload(junk);
      ya.upload(yjunk), yb.upload(yjunk);
      // The frequency factors (read by both kernels where scaled).
      const auto fac = random_floats(c.D / 2, seed + 4, 0.25f, 4.0f);
      Buffer fb(ctx, fac.size() * 4);
      fb.upload(fac);
      const RopeArgs ra{1000.0f + float(seed), mode, scaled ? 0.25f : 1.0f, scaled ? &fb : nullptr};
      const RopePositions pos = c.table ? RopePositions{&tb, pos_off, Dyn(sb, kStateT), 1}
                                        : RopePositions::run(Dyn(sb, kStateT, 1), 1);
      const Dyn slot(sb, kStateT, 2);
      MatmulArgs ma;
      if (c.bias) ma.bias = &bb;
      if (c.norm) ma.norm = &gb, ma.norm_eps = 1e-5f, ma.norm_scratch = Mat{&scratch, 0, K};
      Sequence seq(ctx);
      seq.begin();
      matmul(seq, W, Mat{&xb, 0, K}, Mat{&ya, y_off, ys}, c.B, ma);
      rope_kv_write(seq, Mat{&ya, y_off, ys}, pos, c.B, c.H, c.D, c.D, ra, HD, HD + kv, kv,
                    KvLayer{&ca, &ca, k_base, v_base, kt}, slot);
      const uint32_t before = seq.dispatch_count();
      const RopeKvFold rk{.pos = pos, .H = c.H, .D = c.D, .n_rot = c.D, .rope = ra, .k_col = HD, .v_col = HD + kv,
                          .kv = kv, .cache = KvLayer{&cb, &cb, k_base, v_base, kt}, .slot = slot};
      MatmulArgs mb = ma;
      mb.rope_kv = &rk;
      mb.cfg.row_groups = 1 + seed % 3;  // lanes walking 1-3 groups of pairs: the same bits
      matmul(seq, W, Mat{&xb, 0, K}, Mat{&yb, y_off, ys}, c.B, mb);
      const uint32_t folded = seq.dispatch_count() - before;
      seq.run();
      if (lanes)
        CHECK_MESSAGE(folded == W.chunks.size(), what << ": " << folded << " dispatches for " << W.chunks.size()
                                                       << " chunks, not folded into the matmul");
      const auto y1 = ya.read<float>(yjunk.size()), y2 = yb.read<float>(yjunk.size());
      size_t bad_y = 0;
      for (size_t i = 0; i < y1.size(); ++i) bad_y += std::memcmp(&y1[i], &y2[i], 4) != 0;
      CHECK_MESSAGE(bad_y == 0, what << ": " << bad_y << " values of y differ");
      check_same_cache_words(ca, cb, junk, size_t(c.B) * 2 * kv / vals - 2, what);
    }
}

TEST_CASE_FIXTURE(VkTest, "attention over an f16 cache at a layer's offset equals the reference over f16-rounded K/V") {
  struct Case {
    uint32_t N, t, H, Hkv, D;
  };
  // D = 32, 64: texel views possible (D % 8 == 0); D = 6: the last vec4 half past D; D = 12: no texel.
  const Case cases[] = {{5, 3, 4, 2, 32}, {23, 70, 8, 4, 64}, {7, 1, 6, 2, 6}, {9, 40, 4, 4, 12}, {3, 130, 2, 1, 128}};
  for (const auto& c : cases) {
    const uint32_t cap = c.t + c.N + 16, row = c.Hkv * c.D, words = (c.N + 31) / 32, HD = c.H * c.D;
    // K of the layer in stream 1 and V in stream 2 of one buffer (values = 2 per word).
    const uint32_t sw = uint32_t(kv_stream_words(cap, row / 2));
    Tree tree = random_tree(c.N, c.N * 5 + c.t, true);
    const auto kc = round_f16(random_floats(size_t(cap) * row, c.t + 4, -2, 2));
    const auto vc = round_f16(random_floats(size_t(cap) * row, c.t + 5));
    auto q = random_floats(size_t(c.N) * HD, c.t + 6, -2, 2);
    auto mask = tree.mask_bits(words);
    std::vector<uint32_t> buf(size_t(3) * sw, 0x7e007e00u);  // NaN halves: a stray read shows
    const auto kw = pack_f16(kc), vw = pack_f16(vc);
    std::copy(kw.begin(), kw.end(), buf.begin() + sw);
    std::copy(vw.begin(), vw.end(), buf.begin() + 2 * sw);
    Buffer cb(ctx, buf.size() * 4);
    cb.upload(buf);
    const KvLayer layer{&cb, &cb, 2 * sw, 4 * sw, KvType::F16};

    const std::vector<float> ref = tree_attend_ref(tree, q, kc, vc, c.N, c.t, c.H, c.Hkv, c.D);
    for (const auto& v : variants(64, c.H, c.Hkv, c.D)) {
      const std::string what = std::string(v.name) + " f16 N=" + std::to_string(c.N) + " t=" + std::to_string(c.t) +
                               " D=" + std::to_string(c.D);
      CAPTURE(what);
      auto out = run_attention(ctx, v.cfg, c.N, c.t, c.H, c.Hkv, c.D, q, cb, cb, mask, words, {}, layer);
      check_close(out, ref, 2e-5f, 1e-4f, what);
      // The deepest node against one-token decoding of its path laid out at t.. (what commit does).
      const uint32_t i = c.N - 1;
      const auto path = tree.path_to(int(i));
      const uint32_t P = uint32_t(path.size());
      auto buf2 = buf;
      for (uint32_t e = 0; e < P; ++e)
        for (uint32_t s : {sw, 2 * sw})
          std::copy_n(buf.begin() + s + size_t(c.t + path[e]) * (row / 2), row / 2,
                      buf2.begin() + s + size_t(c.t + e) * (row / 2));
      Buffer cb2(ctx, buf2.size() * 4);
      cb2.upload(buf2);
      std::vector<float> q1(&q[size_t(i) * HD], &q[size_t(i + 1) * HD]);
      auto one = run_attention(ctx, v.cfg, 1, c.t + P - 1, c.H, c.Hkv, c.D, q1, cb2, cb2, {}, 0, {}, layer);
      CHECK_MESSAGE(std::memcmp(one.data(), &out[size_t(i) * HD], HD * 4) == 0,
                    what << ": node " << i << " differs from one-token decoding");
    }
  }
}
