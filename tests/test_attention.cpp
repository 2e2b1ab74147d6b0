// Tree-masked attention: equals each root-to-leaf path run alone with causal attention (bit for
// bit), and a double-precision CPU reference within tolerance; GQA and odd sizes included.
#include <cstring>

#include "vk_fixture.hpp"

using namespace vkspec;
using namespace vkspec::test;

namespace {

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

Tree random_tree(uint32_t N, uint32_t seed) {
  std::mt19937 rng(seed);
  Tree t;
  t.parent.push_back(-1);
  for (uint32_t i = 1; i < N; ++i) t.parent.push_back(int(rng() % i));
  return t;
}

// o(H, D) for one query attending to the given key slots, in double.
std::vector<float> attend_ref(const float* q, const std::vector<float>& kc, const std::vector<float>& vc,
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

}  // namespace

TEST_CASE_FIXTURE(VkTest, "tree attention equals each root-to-leaf path run alone with causal attention") {
  struct Case {
    uint32_t N, t, H, Hkv, D, wg;
  };
  const Case cases[] = {{1, 0, 2, 2, 8, 32},   {5, 3, 4, 2, 16, 64},  {23, 37, 8, 4, 64, 64},
                        {37, 70, 6, 1, 23, 32}, {64, 129, 4, 4, 32, 128}, {9, 200, 8, 2, 128, 64}};
  for (const auto& c : cases) {
    const uint32_t cap = c.t + c.N + 64, row = c.Hkv * c.D, words = (c.N + 31) / 32;
    Tree tree = random_tree(c.N, c.N * 7 + c.t);
    auto kc = random_floats(size_t(cap) * row, c.t + 1), vc = random_floats(size_t(cap) * row, c.t + 2);
    auto q = random_floats(size_t(c.N) * c.H * c.D, c.t + 3, -2, 2);
    auto mask = tree.mask_bits(words);
    Buffer qb(ctx, q.size() * 4), kb(ctx, kc.size() * 4), vb(ctx, vc.size() * 4), mb(ctx, mask.size() * 4),
        ob(ctx, q.size() * 4);
    qb.upload(q);
    kb.upload(kc);
    vb.upload(vc);
    mb.upload(mask);
    KernelConfig cfg;
    cfg.workgroup_size = c.wg;
    Sequence seq(ctx);
    seq.begin();
    AttentionArgs a;
    a.N = c.N, a.H = c.H, a.Hkv = c.Hkv, a.D = c.D, a.t = c.t;
    a.q = Mat{&qb, 0, c.H * c.D};
    a.o = Mat{&ob, 0, c.H * c.D};
    a.k_cache = &kb, a.v_cache = &vb, a.mask = &mb, a.mask_words = words, a.causal = false;
    attention(seq, a, cfg);
    seq.run();
    auto tree_out = ob.read<float>(q.size());

    // Oracle 1: double-precision reference over committed slots + ancestors.
    std::vector<float> ref;
    for (uint32_t i = 0; i < c.N; ++i) {
      std::vector<uint32_t> slots;
      for (uint32_t s = 0; s < c.t; ++s) slots.push_back(s);
      for (int j : tree.path_to(int(i))) slots.push_back(c.t + uint32_t(j));
      auto o = attend_ref(&q[size_t(i) * c.H * c.D], kc, vc, slots, c.H, c.Hkv, c.D);
      ref.insert(ref.end(), o.begin(), o.end());
    }
    check_close(tree_out, ref, 2e-5f, 1e-4f, "tree attention N=" + std::to_string(c.N) + " t=" + std::to_string(c.t));

    // Oracle 2: every node's path laid out as a chain at slots t.. and run causally must give
    // the tree's output for that node bit for bit (the exactness speculative decoding relies on).
    for (uint32_t i = 0; i < c.N; i += std::max(1u, c.N / 7)) {
      auto path = tree.path_to(int(i));
      auto kc2 = kc, vc2 = vc;
      std::vector<float> q2;
      for (size_t e = 0; e < path.size(); ++e) {
        std::memcpy(&kc2[(c.t + e) * row], &kc[(c.t + path[e]) * row], row * 4);
        std::memcpy(&vc2[(c.t + e) * row], &vc[(c.t + path[e]) * row], row * 4);
        q2.insert(q2.end(), &q[size_t(path[e]) * c.H * c.D], &q[size_t(path[e] + 1) * c.H * c.D]);
      }
      Buffer k2(ctx, kc2.size() * 4), v2(ctx, vc2.size() * 4), q2b(ctx, q2.size() * 4), o2(ctx, q2.size() * 4);
      k2.upload(kc2);
      v2.upload(vc2);
      q2b.upload(q2);
      AttentionArgs b = a;
      b.N = uint32_t(path.size());
      b.q = Mat{&q2b, 0, c.H * c.D};
      b.o = Mat{&o2, 0, c.H * c.D};
      b.k_cache = &k2, b.v_cache = &v2, b.mask = nullptr, b.causal = true;
      seq.begin();
      attention(seq, b, cfg);
      seq.run();
      auto chain = o2.read<float>(q2.size());
      const float* last = &chain[(path.size() - 1) * c.H * c.D];
      CHECK_MESSAGE(std::memcmp(last, &tree_out[size_t(i) * c.H * c.D], size_t(c.H) * c.D * 4) == 0,
                    "node " << i << " (depth " << path.size() - 1 << ") differs from its path run causally");
    }
  }
}
