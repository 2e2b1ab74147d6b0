// Shared by the tree-attention tests (test_attention.cpp: the kernels, the KV stores; and
// test_attention_fold.cpp: the o-projection folded in): random trees and their masks, the
// double-precision reference, a padded/offset buffer layout like the model's, one attention pass
// with stray-write checks, and the exactness oracles (each path run causally, one-token decoding).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "matmul_reference.hpp"
#include "vk_fixture.hpp"
#include "vkspec/dtype.hpp"
#include "vkspec/model.hpp"

namespace vkspec::test::attn {
struct Tree {
  std::vector<int> parent;  // parent[0] = -1, parent[i] < i
  std::vector<uint32_t> mask_bits(uint32_t words) const {
    const size_t N = parent.size();
    std::vector<uint32_t> m(N * words, 0);
    for (size_t i = 0; i < N; ++i)
      for (int j = int(i); j >= 0; j = parent[j]) m[i * words + j / 32] |= 1u << (j % 32);
    return m;
  }
  std::vector<int> path_to(int i) const {
    std::vector<int> p;
    for (int j = i; j >= 0; j = parent[j]) p.insert(p.begin(), j);
    return p;
  }
};

// `deep`: mostly a chain (parent i-1 three times in four), so tree keys span several chunks of
// any subgroup size; otherwise uniform random parents (depth ~ ln N).
inline Tree random_tree(uint32_t N, uint32_t seed, bool deep) {
  std::mt19937 rng(seed);
  Tree t;
  t.parent.push_back(-1);
  for (uint32_t i = 1; i < N; ++i) t.parent.push_back(deep && rng() % 4 != 0 ? int(i) - 1 : int(rng() % i));
  return t;
}

// o(H, D) for one query attending to the given key slots, in double.
inline std::vector<float> attend_ref(const float* q, const std::vector<float>& kc, const std::vector<float>& vc,
                              const std::vector<uint32_t>& slots, uint32_t H, uint32_t Hkv, uint32_t D) {
  std::vector<float> o(size_t(H) * D);
  for (uint32_t h = 0; h < H; ++h) {
    const uint32_t hk = h / (H / Hkv);
    std::vector<double> s(slots.size());
    double m = -INFINITY;
    for (size_t j = 0; j < slots.size(); ++j) {
      double d = 0;
      for (uint32_t x = 0; x < D; ++x) d += double(q[h * D + x]) * kc[(size_t(slots[j]) * Hkv + hk) * D + x];
      s[j] = d / std::sqrt(double(D));
      m = std::max(m, s[j]);
    }
    double l = 0;
    for (auto& v : s) l += (v = std::exp(v - m));
    for (uint32_t x = 0; x < D; ++x) {
      double a = 0;
      for (size_t j = 0; j < slots.size(); ++j) a += s[j] * vc[(size_t(slots[j]) * Hkv + hk) * D + x];
      o[h * D + x] = float(a / l);
    }
  }
  return o;
}

// Every node of `tree` attending to the t committed slots and then to its own ancestors' slots
// (t + ancestor index), in double: o(N, H, D). With a sliding window W, a node at depth d (position
// t + d) sees only the positions t + d - W + 1 .. t + d: committed slot s is position s, its
// ancestor at depth e is position t + e.
inline std::vector<float> tree_attend_ref(const Tree& tree, const std::vector<float>& q, const std::vector<float>& kc,
                                   const std::vector<float>& vc, uint32_t N, uint32_t t, uint32_t H, uint32_t Hkv,
                                   uint32_t D, uint32_t window = 0) {
  std::vector<float> ref;
  for (uint32_t i = 0; i < N; ++i) {
    const std::vector<int> path = tree.path_to(int(i));
    const uint64_t pos = t + path.size() - 1;
    auto seen = [&](uint64_t key_pos) { return window == 0 || pos - key_pos < window; };
    std::vector<uint32_t> slots;
    for (uint32_t s = 0; s < t; ++s)
      if (seen(s)) slots.push_back(s);
    for (size_t e = 0; e < path.size(); ++e)
      if (seen(t + e)) slots.push_back(t + uint32_t(path[e]));
    auto o = attend_ref(&q[size_t(i) * H * D], kc, vc, slots, H, Hkv, D);
    ref.insert(ref.end(), o.begin(), o.end());
  }
  return ref;
}

// Where q, o and the mask live in their buffers: rows padded past H*D and offset from the
// start, as in the model (q is a column range of the fused qkv rows).
struct Layout {
  uint32_t q_offset = 0, q_pad = 0, o_offset = 0, o_pad = 0, mask_offset = 0;
};

inline constexpr float kSentinel = 12345.0f;  // o is pre-filled with it: writes outside the rows show

// Compact rows (N, W) as a buffer image: `offset` values before them and rows `stride` apart,
// as the model's strided scratch lays them out; everything else `fill`.
inline std::vector<float> pad_rows(const std::vector<float>& rows, uint32_t N, uint32_t W, uint32_t offset, uint32_t stride,
                            float fill) {
  std::vector<float> p(offset + size_t(N) * stride, fill);
  for (uint32_t i = 0; i < N; ++i) std::memcpy(&p[offset + size_t(i) * stride], &rows[size_t(i) * W], W * 4);
  return p;
}

// The compact rows back out of such an image, checking that nothing else differs from kSentinel.
inline std::vector<float> unpad_rows(const std::vector<float>& p, uint32_t N, uint32_t W, uint32_t offset, uint32_t stride,
                              const char* what) {
  std::vector<float> rows(size_t(N) * W);
  size_t stray = 0;
  for (size_t x = 0; x < p.size(); ++x) {
    if (x >= offset && (x - offset) % stride < W)
      rows[(x - offset) / stride * W + (x - offset) % stride] = p[x];
    else if (p[x] != kSentinel)
      ++stray;
  }
  CHECK_MESSAGE(stray == 0, stray << " floats written outside " << what << "'s rows");
  return rows;
}

// The o-projection folded in (AttentionArgs::wo): o is then the residual stream x(N, wo->N),
// starting at x0.
struct OFold {
  const DeviceWeight* wo;
  std::vector<float> x0;
};

// Runs one attention pass. q is compact (N, H, D); mask empty = causal. Returns compact o (with
// `fold`, x) and checks that nothing outside its rows was written.
// `kv`: the caches' type and where the layer starts in them (kv.k / kv.v are ignored: kb, vb).
// `q_row` (a causal pass of one row): q holds more rows, and the pass's row is q row q_row,
// read from a step-state buffer as a draft head's ingest reads it (AttentionArgs::q_row), with t
// a dynamic scalar too (t + 1 in the state, base -1, wrapping).
inline constexpr uint32_t kNoQRow = UINT32_MAX;
inline std::vector<float> run_attention(Context& ctx, const KernelConfig& cfg, uint32_t N, uint32_t t, uint32_t H,
                                 uint32_t Hkv, uint32_t D, const std::vector<float>& q, const Buffer& kb,
                                 const Buffer& vb, const std::vector<uint32_t>& mask, uint32_t words,
                                 const Layout& L, const KvLayer& kv = {}, const OFold* fold = nullptr,
                                 uint32_t window = 0, uint32_t q_row = kNoQRow) {
  const uint32_t HD = H * D, W = fold ? fold->wo->N : HD, qs = HD + L.q_pad, os = W + L.o_pad;
  const uint32_t q_rows = q_row == kNoQRow ? N : uint32_t(q.size() / HD);
  REQUIRE((q_row == kNoQRow || (N == 1 && mask.empty() && q_row < q_rows)));
  const std::vector<float> qp = pad_rows(q, q_rows, HD, L.q_offset, qs, -7.0f);
  const std::vector<float> op = fold ? pad_rows(fold->x0, N, W, L.o_offset, os, kSentinel)
                                     : std::vector<float>(L.o_offset + size_t(N) * os, kSentinel);
  std::vector<uint32_t> mp(L.mask_offset, 0xffffffffu);  // junk before the mask: must not be read
  mp.insert(mp.end(), mask.begin(), mask.end());
  Buffer qb(ctx, qp.size() * 4), ob(ctx, op.size() * 4), mb(ctx, std::max<size_t>(16, mp.size() * 4));
  qb.upload(qp);
  ob.upload(op);
  if (!mp.empty()) mb.upload(mp);
  AttentionArgs a;
  a.N = N, a.H = H, a.Hkv = Hkv, a.D = D, a.t = t;
  a.q = Mat{&qb, L.q_offset, qs};
  Buffer state(ctx, 16);
  if (q_row != kNoQRow) {
    state.upload(std::vector<uint32_t>{7, q_row, t + 1, 9});
    a.q_row = Dyn(state, 1), a.t = Dyn(state, 2, 0xffffffffu);
  }
  a.o = Mat{&ob, L.o_offset, os};
  a.k_cache = &kb, a.v_cache = &vb;
  a.k_base = kv.k_base, a.v_base = kv.v_base, a.kv_type = kv.type;
  a.causal = mask.empty();
  a.window = window;
  if (!a.causal) a.mask = &mb, a.mask_offset = L.mask_offset, a.mask_words = words;
  // Folded: the partial rows start as NaN (a partial read before it is written shows), the
  // counters as 0, and the counters must be back at 0 after.
  Buffer part, arrivals;
  if (fold) {
    a.wo = fold->wo;
    part = Buffer(ctx, size_t(N) * attention_o_partials(a, W, cfg) * 4), arrivals = Buffer(ctx, (N + 3) / 4 * 16);
    part.upload(std::vector<float>(part.size() / 4, NAN));
    arrivals.upload(std::vector<uint32_t>(arrivals.size() / 4, 0));
    a.o_part = &part, a.o_arrivals = &arrivals;
  }
  Sequence seq(ctx);
  seq.begin();
  attention(seq, a, cfg);
  seq.run();
  if (fold) {
    const auto counts = arrivals.read<uint32_t>(N);
    CHECK_MESSAGE(std::all_of(counts.begin(), counts.end(), [](uint32_t n) { return n == 0; }),
                  "the arrival counters are not back to 0");
  }
  return unpad_rows(ob.read<float>(op.size()), N, W, L.o_offset, os, fold ? "x" : "o");
}

// Oracles 2 and 3: lay each sampled node's path (every `every`-th node) out as a chain at slots
// t.. (what commit does with an accepted path). Running the chain causally, and running only the
// node as a 1-row causal pass at t + depth (one-token decoding), must both give the tree's output
// `tree_out` for that node bit for bit — the exactness speculative decoding relies on.
inline void check_paths_exact(Context& ctx, const KernelConfig& cfg, const Tree& tree, uint32_t t, uint32_t H, uint32_t Hkv,
                       uint32_t D, const std::vector<float>& q, const std::vector<float>& kc,
                       const std::vector<float>& vc, const std::vector<float>& tree_out, const Layout& layout,
                       uint32_t window, uint32_t every) {
  const uint32_t N = uint32_t(tree.parent.size()), row = Hkv * D, HD = H * D;
  for (uint32_t i = 0; i < N; i += std::max(1u, every)) {
    const auto path = tree.path_to(int(i));
    const uint32_t P = uint32_t(path.size());
    auto kc2 = kc, vc2 = vc;
    std::vector<float> q2;
    for (uint32_t e = 0; e < P; ++e) {
      std::memcpy(&kc2[(t + e) * row], &kc[(t + path[e]) * row], row * 4);
      std::memcpy(&vc2[(t + e) * row], &vc[(t + path[e]) * row], row * 4);
      q2.insert(q2.end(), &q[size_t(path[e]) * HD], &q[size_t(path[e] + 1) * HD]);
    }
    Buffer k2(ctx, kc2.size() * 4), v2(ctx, vc2.size() * 4);
    k2.upload(kc2);
    v2.upload(vc2);
    const float* want = &tree_out[size_t(i) * HD];
    auto chain = run_attention(ctx, cfg, P, t, H, Hkv, D, q2, k2, v2, {}, 0, layout, {}, nullptr, window);
    CHECK_MESSAGE(std::memcmp(&chain[size_t(P - 1) * HD], want, HD * 4) == 0,
                  "node " << i << " (depth " << P - 1 << ") differs from its path run causally");
    std::vector<float> q1(q2.end() - HD, q2.end());
    auto one = run_attention(ctx, cfg, 1, t + P - 1, H, Hkv, D, q1, k2, v2, {}, 0, layout, {}, nullptr, window);
    CHECK_MESSAGE(std::memcmp(one.data(), want, HD * 4) == 0,
                  "node " << i << " (depth " << P - 1 << ") differs from one-token decoding at t + depth");
    // And the chain's last row alone, picked from the chain's q rows by a dynamic row index (a
    // draft head's ingest, which attends for its root row only).
    auto picked = run_attention(ctx, cfg, 1, t + P - 1, H, Hkv, D, q2, k2, v2, {}, 0, layout, {}, nullptr, window, P - 1);
    CHECK_MESSAGE(std::memcmp(picked.data(), want, HD * 4) == 0,
                  "node " << i << " (depth " << P - 1 << ") differs when its row is picked by a dynamic q row");
  }
}

struct Variant {
  const char* name;
  KernelConfig cfg;
};

inline std::vector<Variant> variants(uint32_t wg, uint32_t H, uint32_t Hkv, uint32_t D) {
  std::vector<Variant> v;
  KernelConfig c;
  c.use_subgroup = 0;
  c.workgroup_size = wg;
  v.push_back({"workgroup kernel", c});
  const Context& ctx = vk_context();
  if (!ctx.caps().subgroup_arithmetic || !ctx.caps().subgroup_shuffle) return v;  // the subgroup kernel needs both
  c = {};
  c.use_subgroup = 1;  // K/V through texel views where the device prefers them and D % 4 == 0
  v.push_back({"subgroup kernel", c});
  c.use_subgroup = 2;
  c.x_shuffle = 0;  // and q loaded in every lane (elsewhere once per subgroup, shuffled)
  v.push_back({"subgroup kernel, storage K/V, q per lane", c});
  c.x_shuffle = -1;
  // Query rows per workgroup stay the host's choice: 4 or 2 where a pass has that many rows and
  // they fit its register budget (rows x heads per workgroup x D <= 256), else 1, and 1 for
  // one-token decoding. So the tree passes here (e.g. test_attention.cpp's N = 5, 7, 23, 40, 64)
  // run rows 4 or 2 to a workgroup, the last one short, and check_paths_exact compares each with
  // the same row decoded alone, bit for bit. A forced third size (3 rows) cost lavapipe a compile
  // of the unrolled rows per shape and tested nothing those do not; the folded kernel, whose host
  // rule keeps 1 row, forces 3 in its own test (test_attention_fold.cpp).
  if (H / Hkv > 1 && D * 2 <= 256) {  // GQA with several heads per workgroup by default: also one
    c.use_subgroup = 1;
    c.rows_per_workgroup = 1;
    v.push_back({"subgroup kernel, 1 head per workgroup", c});
  }
  return v;
}

// f32 values → f16 pairs in u32 words (low half first), as kv_write stores them.
inline std::vector<uint32_t> pack_f16(const std::vector<float>& x) {
  std::vector<uint32_t> w(x.size() / 2);
  for (size_t i = 0; i < w.size(); ++i) w[i] = f32_to_f16(x[2 * i]) | uint32_t(f32_to_f16(x[2 * i + 1])) << 16;
  return w;
}
inline std::vector<float> round_f16(std::vector<float> x) {
  for (float& v : x) v = f16_to_f32(f32_to_f16(v));
  return x;
}

}  // namespace vkspec::test::attn
