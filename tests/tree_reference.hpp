// CPU references and helpers shared by the tree-kernel tests (test_tree.cpp, and the hostile-
// score tests in test_tree_order.cpp): host trees, upload/download, and the plain references for
// EAGLE-2 selection, mask/positions/retrieve, acceptance, merge and merge-trie.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tree_order.hpp"
#include "vk_fixture.hpp"
#include "vkspec/tree.hpp"

namespace vkspec::test {


inline constexpr uint32_t kWorkgroups[] = {32, 64};

inline KernelConfig wg_cfg(uint32_t wg) {
  KernelConfig c;
  c.workgroup_size = wg;
  return c;
}

// A tree or pool on the host, struct of arrays as on the device.
struct HostTree {
  std::vector<uint32_t> token;
  std::vector<int> parent;
  std::vector<uint32_t> depth;
  std::vector<float> score;
  std::vector<uint32_t> head;
  size_t size() const { return token.size(); }
  void push(uint32_t tok, int par, uint32_t dep, float sc, uint32_t hd) {
    token.push_back(tok);
    parent.push_back(par);
    depth.push_back(dep);
    score.push_back(sc);
    head.push_back(hd);
  }
};

inline void upload_tree(DeviceTree& d, const HostTree& h) {
  d.token.upload(h.token);
  d.parent.upload(h.parent);
  d.depth.upload(h.depth);
  d.score.upload(h.score);
  d.head.upload(h.head);
}

inline HostTree download_tree(const DeviceTree& d, size_t n) {
  HostTree h;
  h.token = d.token.read<uint32_t>(n);
  h.parent = d.parent.read<int>(n);
  h.depth = d.depth.read<uint32_t>(n);
  h.score = d.score.read<float>(n);
  h.head = d.head.read<uint32_t>(n);
  return h;
}

inline void check_same(const HostTree& got, const HostTree& ref, const std::string& what) {
  REQUIRE(got.size() == ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    INFO(what << " node " << i);
    CHECK(got.token[i] == ref.token[i]);
    CHECK(got.parent[i] == ref.parent[i]);
    CHECK(got.depth[i] == ref.depth[i]);
    CHECK(same_float(got.score[i], ref.score[i]));  // same additions in the same order: bit-exact
    CHECK(got.head[i] == ref.head[i]);
  }
}

// Ranking order of the whole module: score descending, then lower index, NaN last
// (tree_order.hpp, the kernels' order.glsl).
inline auto by_score(const std::vector<float>& s) {
  return [&s](uint32_t a, uint32_t b) { return ranks_before(s[a], a, s[b], b); };
}

// ---- CPU references -------------------------------------------------------------------------

// draft_expand: appends F*k children at base + f*k + j, returns the next frontier.
inline std::vector<uint32_t> expand_ref(HostTree& pool, uint32_t base, const std::vector<uint32_t>& frontier,
                                 const std::vector<uint32_t>& ids, const std::vector<float>& logp, uint32_t off,
                                 uint32_t stride, uint32_t k, uint32_t head_id, uint32_t next_F) {
  const uint32_t F = uint32_t(frontier.size());
  REQUIRE(pool.size() == base);
  for (uint32_t f = 0; f < F; ++f)
    for (uint32_t j = 0; j < k; ++j) {
      const uint32_t p = frontier[f], o = off + f * stride + j;
      pool.push(ids[o], int(p), pool.depth[p] + 1, pool.score[p] + logp[o], head_id);
    }
  std::vector<uint32_t> cand(F * k);
  std::iota(cand.begin(), cand.end(), base);
  std::stable_sort(cand.begin(), cand.end(), by_score(pool.score));
  cand.resize(next_F);
  return cand;
}

// draft_select: best B of 1..count-1, renumbered by increasing pool index. Scores that are not
// monotone along paths (`hostile`) may keep a node without its parent: it hangs under the root.
inline HostTree select_ref(const HostTree& pool, uint32_t count, uint32_t B, bool hostile = false) {
  std::vector<uint32_t> idx(count - 1);
  std::iota(idx.begin(), idx.end(), 1u);
  std::stable_sort(idx.begin(), idx.end(), by_score(pool.score));
  idx.resize(B);
  std::sort(idx.begin(), idx.end());
  std::vector<int> remap(count, -1);
  remap[0] = 0;
  HostTree t;
  t.push(pool.token[0], -1, 0, pool.score[0], pool.head[0]);
  for (uint32_t i : idx) {
    remap[i] = int(t.size());
    if (!hostile) REQUIRE(remap[pool.parent[i]] >= 0);  // the kept set is a tree
    t.push(pool.token[i], std::max(0, remap[pool.parent[i]]), pool.depth[i], pool.score[i], pool.head[i]);
  }
  return t;
}

struct Meta {
  std::vector<uint32_t> depth;
  std::vector<uint32_t> mask;  // (n, words)
  std::vector<int> pos;
  std::vector<int> retrieve;  // (leaves, W)
  uint32_t leaves = 0;
};

inline Meta meta_ref(const std::vector<int>& parent, uint32_t t, uint32_t words, uint32_t W) {
  const size_t n = parent.size();
  Meta m;
  m.depth.assign(n, 0);
  m.mask.assign(n * words, 0);
  std::vector<bool> has_child(n, false);
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) {
      m.depth[i] = m.depth[parent[i]] + 1;
      has_child[parent[i]] = true;
    }
    for (int j = int(i); j >= 0; j = parent[j]) m.mask[i * words + j / 32] |= 1u << (j % 32);
    m.pos.push_back(int(t + m.depth[i]));
  }
  for (size_t i = 0; i < n; ++i) {
    if (has_child[i]) continue;
    std::vector<int> row(W, -1);
    for (int j = int(i); j >= 0; j = parent[j]) row[m.depth[j]] = j;
    m.retrieve.insert(m.retrieve.end(), row.begin(), row.end());
    ++m.leaves;
  }
  return m;
}

// Greedy acceptance over retrieve rows: longest, ties to the lower row.
struct Accept {
  uint32_t a = 0, row = 0, next_root = 0, best_head = 0;
  std::vector<uint32_t> path;
};
inline Accept accept_ref(const HostTree& t, const Meta& m, uint32_t W, const std::vector<uint32_t>& argmax) {
  Accept r;
  int best = -1;
  for (uint32_t row = 0; row < m.leaves; ++row) {
    const int* R = &m.retrieve[row * W];
    uint32_t e = 0;
    while (e + 1 < W && R[e + 1] >= 0 && t.token[R[e + 1]] == argmax[R[e]]) ++e;
    if (int(e) > best) {
      best = int(e);
      r.row = row;
    }
  }
  r.a = uint32_t(best);
  const int* R = &m.retrieve[r.row * W];
  for (uint32_t e = 0; e <= r.a; ++e) r.path.push_back(uint32_t(R[e]));
  r.next_root = argmax[r.path.back()];
  r.best_head = r.a ? t.head[r.path.back()] : 0;
  return r;
}

// A random draft-like tree: parents first, depth <= max_depth, child score < parent score.
inline HostTree random_tree(uint32_t n, uint32_t max_depth, uint32_t head_id, std::mt19937& rng) {
  HostTree t;
  t.push(rng() % 1000, -1, 0, 0.0f, 0);
  std::uniform_real_distribution<float> lp(-3.0f, -0.01f);
  while (t.size() < n) {
    const uint32_t p = rng() % t.size();
    if (t.depth[p] >= max_depth) continue;
    t.push(rng() % 1000, int(p), t.depth[p] + 1, t.score[p] + lp(rng), head_id);
  }
  return t;
}

inline void run_meta(Context& ctx, DeviceTree& d, uint32_t n, uint32_t t, KernelConfig cfg) {
  Sequence seq(ctx);
  seq.begin();
  tree_meta(seq, d, n, t, cfg);
  seq.run();
}

inline void check_meta(const DeviceTree& d, const std::vector<int>& parent, uint32_t t, const std::string& what) {
  const uint32_t n = uint32_t(parent.size()), W = d.max_depth + 1;
  Meta ref = meta_ref(parent, t, d.mask_words, W);
  INFO(what);
  CHECK(d.depth.read<uint32_t>(n) == ref.depth);
  CHECK(d.mask.read<uint32_t>(size_t(n) * d.mask_words) == ref.mask);
  CHECK(d.pos.read<int>(n) == ref.pos);
  const uint32_t leaves = d.info.read<uint32_t>(16)[kInfoLeaves];
  REQUIRE(leaves == ref.leaves);
  CHECK(d.retrieve.read<int>(size_t(leaves) * W) == ref.retrieve);
}

// ---- merge (seed 000 §4.1) ----------------------------------------------------------------

inline HostTree merge_ref(const HostTree& a, uint32_t n1, const HostTree& b, uint32_t n2) {
  HostTree m;
  for (uint32_t i = 0; i <= n1; ++i) m.push(a.token[i], a.parent[i], a.depth[i], a.score[i], a.head[i]);
  for (uint32_t i = 1; i <= n2; ++i)
    m.push(b.token[i], b.parent[i] == 0 ? 0 : int(n1) + b.parent[i], b.depth[i], b.score[i], b.head[i]);
  return m;
}

// Plain reference: token paths as map keys; the first node (pool 1, then pool 2 without its root)
// with a path is its canonical node; folded score = max, head bits = 1 | 2.
inline HostTree trie_ref(const HostTree& p1, const HostTree& p2, uint32_t n_out, uint32_t* distinct, bool hostile = false) {
  struct Node {
    uint32_t token, depth, head;
    float score;
    std::vector<uint32_t> path;
  };
  std::vector<Node> all;
  auto add_pool = [&](const HostTree& p, uint32_t h, uint32_t first) {
    for (uint32_t i = first; i < p.size(); ++i) {
      std::vector<uint32_t> path;
      for (int j = int(i); j > 0; j = p.parent[j]) path.insert(path.begin(), p.token[j]);
      all.push_back({p.token[i], p.depth[i], h, p.score[i], path});
    }
  };
  add_pool(p1, 1, 0);
  add_pool(p2, 2, 1);
  std::map<std::vector<uint32_t>, uint32_t> first;  // path → canonical combined index
  std::vector<uint32_t> canon_nodes;
  for (uint32_t u = 0; u < all.size(); ++u) {
    auto [it, fresh] = first.emplace(all[u].path, u);
    if (fresh) {
      canon_nodes.push_back(u);
    } else {
      Node& c = all[it->second];
      c.score = order_max(c.score, all[u].score);
      c.head |= all[u].head;
    }
  }
  std::vector<float> s(all.size());
  for (uint32_t u = 0; u < all.size(); ++u) s[u] = all[u].score;
  std::vector<uint32_t> cand(canon_nodes.begin() + 1, canon_nodes.end());
  *distinct = uint32_t(cand.size());
  std::stable_sort(cand.begin(), cand.end(), by_score(s));
  if (cand.size() > n_out - 1) cand.resize(n_out - 1);
  std::sort(cand.begin(), cand.end());
  HostTree t;
  t.push(p1.token[0], -1, 0, p1.score[0], 0);
  std::map<std::vector<uint32_t>, int> out_index{{{}, 0}};
  for (uint32_t u : cand) {
    std::vector<uint32_t> pp(all[u].path.begin(), all[u].path.end() - 1);
    if (!hostile) REQUIRE(out_index.count(pp));  // the kept set is a tree
    const int par = out_index.count(pp) ? out_index[pp] : 0;  // hostile scores: under the root
    out_index[all[u].path] = int(t.size());
    t.push(all[u].token, par, all[u].depth, all[u].score, all[u].head);
  }
  while (t.size() < n_out) t.push(p1.token[0], 0, 1, -INFINITY, 0);
  return t;
}

// Two random pools for merge-trie: tokens from `alphabet` symbols, so the heads agree often, and
// the same root token.
inline std::pair<HostTree, HostTree> overlapping_pools(uint32_t c1, uint32_t c2, uint32_t alphabet, std::mt19937& rng) {
  HostTree p1 = random_tree(c1, 8, 1, rng), p2 = random_tree(c2, 8, 2, rng);
  for (auto& x : p1.token) x %= alphabet;
  for (auto& x : p2.token) x %= alphabet;
  p2.token[0] = p1.token[0];
  return {std::move(p1), std::move(p2)};
}

// ---- hostile scores: NaN and ±Inf (a broken head or verifier) ------------------------------


// `finite`, or often NaN, +inf, -inf or -0: the values whose float comparisons do not order.
inline float hostile(std::mt19937& rng, float finite) {
  switch (rng() % 8) {
    case 0: return kNaN;
    case 1: return kInf;
    case 2: return -kInf;
    case 3: return -0.0f;
    default: return finite;
  }
}

inline void check_well_formed(const HostTree& t, uint32_t n, const std::string& what) {
  INFO(what);
  REQUIRE(t.size() == n);
  CHECK(t.parent[0] == -1);
  for (uint32_t i = 1; i < n; ++i) CHECK((t.parent[i] >= 0 && t.parent[i] < int(i)));
}

}  // namespace vkspec::test
