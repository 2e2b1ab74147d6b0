// Attention with the o-projection folded in (AttentionArgs::wo, on devices whose subgroup kernel
// folds it): equals the reference within tolerance and is bit-exact against each node's path run
// causally and one-token decoding, like the unfolded kernels in test_attention.cpp; and W_o is
// folded only where the rules allow it (small texel weights of the folded types, loop budget).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "attention_harness.hpp"
#include "vkspec/dtype.hpp"

using namespace vkspec;
using namespace vkspec::test;
using namespace vkspec::test::attn;

namespace {
// One folded pass with q and x rows padded and offset like the model's.
std::vector<float> run_attention_o(Context& ctx, uint32_t N, uint32_t t, uint32_t H, uint32_t Hkv, uint32_t D,
                                   const std::vector<float>& q, const KvLayer& kv, const std::vector<uint32_t>& mask,
                                   uint32_t words, const DeviceWeight& wo, const std::vector<float>& x0,
                                   uint32_t q_row = kNoQRow, uint32_t query_rows = 0) {
  const OFold fold{&wo, x0};
  KernelConfig cfg;
  cfg.batch_tile = query_rows;  // query rows per workgroup: 0 the host's choice (1 where W_o is folded)
  return run_attention(ctx, cfg, N, t, H, Hkv, D, q, *kv.k, *kv.v, mask, words, {0, 3, 5, 2, 0}, kv, &fold, 0, q_row);
}
}  // namespace

TEST_CASE_FIXTURE(VkTest, "attention with the o-projection folded in equals the reference and is exact for paths and one-token decoding") {
  const DeviceCaps& caps = ctx.caps();
  if (!caps.quirks.single_subgroup_kernels || !caps.subgroup_arithmetic || !caps.subgroup_shuffle) {
    MESSAGE("not run: device '" << caps.name << "' uses the workgroup attention kernel, which never folds W_o");
    return;
  }
  struct Case {
    uint32_t N, t, H, Hkv, D, C;
    WeightType wt;
    KvType kv;
    bool deep;
  };
  const Case cases[] = {
      {1, 0, 4, 1, 8, 16, WeightType::F16, KvType::F32, false},
      {7, 5, 4, 2, 16, 40, WeightType::Q8_0, KvType::F16, false},
      {40, 11, 6, 3, 48, 288, WeightType::F16, KvType::F16, true},  // the demo model's shape
      {9, 100, 8, 2, 32, 72, WeightType::F32, KvType::F32, true},
      {5, 3, 8, 2, 24, 50, WeightType::F16, KvType::F32, false},  // 4 heads of 24 a group: 3 blocks
      {12, 40, 4, 1, 64, 96, WeightType::Q8_0, KvType::F32, true},
  };
  for (const auto& c : cases) {
    const uint32_t cap = c.t + c.N + 16, row = c.Hkv * c.D, words = (c.N + 31) / 32, HD = c.H * c.D;
    const std::string what = std::string(weight_type_name(c.wt)) + (c.kv == KvType::F16 ? " f16 cache" : " f32 cache") +
                             " N=" + std::to_string(c.N) + " t=" + std::to_string(c.t) + " H=" + std::to_string(c.H) +
                             " Hkv=" + std::to_string(c.Hkv) + " D=" + std::to_string(c.D) + " C=" + std::to_string(c.C);
    CAPTURE(what);
    const Tree tree = random_tree(c.N, c.N * 3 + c.t, c.deep);
    auto kc = random_floats(size_t(cap) * row, c.t + 7, -2, 2), vc = random_floats(size_t(cap) * row, c.t + 8);
    if (c.kv == KvType::F16) kc = round_f16(kc), vc = round_f16(vc);
    const auto q = random_floats(size_t(c.N) * HD, c.t + 9, -2, 2);
    const auto x0 = random_floats(size_t(c.N) * c.C, c.t + 10);
    const auto mask = tree.mask_bits(words);
    const auto raw = make_weight(c.wt, c.C, HD, c.C + HD);
    const auto w = dequantize(c.wt, raw, c.C, HD);
    const DeviceWeight wo = upload_weight(ctx, c.wt, c.C, HD, raw.data());
    auto upload_kv = [&](const std::vector<float>& k, const std::vector<float>& v, Buffer& kb, Buffer& vb) {
      if (c.kv == KvType::F16) {
        kb = Buffer(ctx, (k.size() / 2 + 3) * 4), vb = Buffer(ctx, (v.size() / 2 + 3) * 4);
        kb.upload(pack_f16(k)), vb.upload(pack_f16(v));
      } else {
        kb = Buffer(ctx, k.size() * 4), vb = Buffer(ctx, v.size() * 4);
        kb.upload(k), vb.upload(v);
      }
      return KvLayer{&kb, &vb, 0, 0, c.kv};
    };
    Buffer kb, vb;
    const KvLayer kv = upload_kv(kc, vc, kb, vb);
    AttentionArgs shape;
    shape.H = c.H, shape.Hkv = c.Hkv, shape.D = c.D;
    REQUIRE(attention_folds_o(ctx, shape, wo, cap));

    // x + attention · W_o^T in double, over the dequantized W_o.
    const auto att = tree_attend_ref(tree, q, kc, vc, c.N, c.t, c.H, c.Hkv, c.D);
    auto ref = matmul_ref(w, att, c.N, c.C, HD, HD);
    for (size_t e = 0; e < ref.size(); ++e) ref[e] += x0[e];
    const auto got = run_attention_o(ctx, c.N, c.t, c.H, c.Hkv, c.D, q, kv, mask, words, wo, x0);
    check_close(got, ref, 1e-4f, 1e-4f, what);
    // Three query rows a workgroup (the host folds W_o with one; the shader takes any): the same
    // bits, each W_o block and K/V row loaded once for the three, the last workgroup short. Within
    // the host's register budget only (3 rows x heads per workgroup x D <= 256).
    if (3 * attention_heads_per_workgroup(c.H, c.Hkv, c.D) * c.D <= 256) {
      const auto got3 = run_attention_o(ctx, c.N, c.t, c.H, c.Hkv, c.D, q, kv, mask, words, wo, x0, kNoQRow, 3);
      CHECK_MESSAGE(std::memcmp(got3.data(), got.data(), got.size() * 4) == 0, "3 query rows a workgroup differ from 1");
    }

    // A node's path laid out as a chain at t.. (what commit does), run causally, and the node
    // alone at t + depth must give the node's x row bit for bit.
    for (uint32_t i = 0; i < c.N; i += std::max(1u, c.N / 5)) {
      const auto path = tree.path_to(int(i));
      const uint32_t P = uint32_t(path.size());
      auto kc2 = kc, vc2 = vc;
      std::vector<float> q2, x2;
      for (uint32_t e = 0; e < P; ++e) {
        std::memcpy(&kc2[(c.t + e) * row], &kc[(c.t + path[e]) * row], row * 4);
        std::memcpy(&vc2[(c.t + e) * row], &vc[(c.t + path[e]) * row], row * 4);
        q2.insert(q2.end(), &q[size_t(path[e]) * HD], &q[size_t(path[e] + 1) * HD]);
        x2.insert(x2.end(), &x0[size_t(path[e]) * c.C], &x0[size_t(path[e] + 1) * c.C]);
      }
      Buffer kb2, vb2;
      const KvLayer kv2 = upload_kv(kc2, vc2, kb2, vb2);
      const float* want = &got[size_t(i) * c.C];
      const auto chain = run_attention_o(ctx, P, c.t, c.H, c.Hkv, c.D, q2, kv2, {}, 0, wo, x2);
      CHECK_MESSAGE(std::memcmp(&chain[size_t(P - 1) * c.C], want, c.C * 4) == 0,
                    "node " << i << " differs from its path run causally");
      const std::vector<float> q1(q2.end() - HD, q2.end()), x1(x2.end() - c.C, x2.end());
      const auto one = run_attention_o(ctx, 1, c.t + P - 1, c.H, c.Hkv, c.D, q1, kv2, {}, 0, wo, x1);
      CHECK_MESSAGE(std::memcmp(one.data(), want, c.C * 4) == 0, "node " << i << " differs from one-token decoding");
      // The chain's last row alone, its q picked from the chain's rows by a dynamic row index.
      const auto picked = run_attention_o(ctx, 1, c.t + P - 1, c.H, c.Hkv, c.D, q2, kv2, {}, 0, wo, x1, P - 1);
      CHECK_MESSAGE(std::memcmp(picked.data(), want, c.C * 4) == 0, "node " << i << " differs with a dynamic q row");
    }
  }
}

TEST_CASE_FIXTURE(VkTest, "attention folds W_o only for small texel weights of the folded types, within the loop budget") {
  AttentionArgs a;
  a.H = 6, a.Hkv = 3, a.D = 48;
  const auto f16 = make_weight(WeightType::F16, 288, 288, 1);
  const DeviceWeight small = upload_weight(ctx, WeightType::F16, 288, 288, f16.data());
  const DeviceCaps& caps = ctx.caps();
  const bool sg = caps.quirks.single_subgroup_kernels && caps.subgroup_arithmetic && caps.subgroup_shuffle;
  CHECK(attention_folds_o(ctx, a, small, 512) == (sg && small.texel));
  KernelConfig wg;
  wg.use_subgroup = 0;
  CHECK_FALSE(attention_folds_o(ctx, a, small, 512, wg));  // the workgroup kernel never folds
  const DeviceWeight storage = upload_weight(ctx, WeightType::F16, 288, 288, f16.data(), WeightPath::Storage);
  CHECK_FALSE(attention_folds_o(ctx, a, storage, 512));
  const auto q4 = make_weight(WeightType::Q4_K, 288, 256, 2);
  AttentionArgs a4 = a;
  a4.H = 4, a4.Hkv = 4, a4.D = 64;
  CHECK_FALSE(attention_folds_o(ctx, a4, upload_weight(ctx, WeightType::Q4_K, 288, 256, q4.data()), 512));
  AttentionArgs wide = a;
  wide.H = 16, wide.Hkv = 16, wide.D = 64;  // W_o 1024 x 1024: more than one workgroup should walk
  const auto big = make_weight(WeightType::F16, 1024, 1024, 3);
  CHECK_FALSE(attention_folds_o(ctx, wide, upload_weight(ctx, WeightType::F16, 1024, 1024, big.data()), 512));
  AttentionArgs mid = a;
  mid.H = 8, mid.Hkv = 8, mid.D = 64;  // W_o 512 x 512: a verify pass would read it once per row
  const auto w512 = make_weight(WeightType::F16, 512, 512, 5);
  CHECK_FALSE(attention_folds_o(ctx, mid, upload_weight(ctx, WeightType::F16, 512, 512, w512.data()), 512));
  AttentionArgs mism = a;
  mism.D = 32;  // W_o's K is not H·D
  CHECK_FALSE(attention_folds_o(ctx, mism, small, 512));
  // A head group's columns must be whole 32-value blocks of W_o, and heads whole vec4s.
  AttentionArgs odd = a;
  odd.H = 6, odd.Hkv = 2, odd.D = 23;
  const auto w138 = make_weight(WeightType::F16, 50, 138, 4);
  CHECK_FALSE(attention_folds_o(ctx, odd, upload_weight(ctx, WeightType::F16, 50, 138, w138.data()), 512));
  AttentionArgs part = a;
  part.H = 6, part.Hkv = 6, part.D = 48;  // one head a group: 48 columns, a block and a half
  CHECK_FALSE(attention_folds_o(ctx, part, small, 512));
  if (caps.quirks.loop_iteration_limit && sg && small.texel) {
    // Past the driver's loop budget the kernel would stop early: the fold is refused first.
    CHECK_FALSE(attention_folds_o(ctx, a, small, 1u << 20));
    const uint32_t unfolded = attention_max_keys(ctx, a.D, (kTreeMaxNodes + 31) / 32);
    uint32_t lo = 1, hi = unfolded;  // the fold's own bound lies below the unfolded kernel's
    while (lo + 1 < hi) {
      const uint32_t mid = lo + (hi - lo) / 2;
      (attention_folds_o(ctx, a, small, mid) ? lo : hi) = mid;
    }
    CHECK(lo < unfolded);
    CHECK(lo > 4096);
  }
}
