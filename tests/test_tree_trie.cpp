// merge_trie at every workgroup size it accepts, on pools up to kTrieMaxNodes: wide and shallow,
// and deep (depth 63, the most --depth allows), where the level-by-level folding runs its scans
// once per level. Each invocation then owns M / WG nodes, the case lavapipe truncated (see
// DeviceCaps::Quirks::loop_iteration_limit).
#include <algorithm>
#include <tuple>

#include "tree_reference.hpp"

using namespace vkspec;
using namespace vkspec::test;

namespace {

// Parents mostly among the last few nodes, so depth climbs to max_depth; one in four anywhere,
// so levels also get wide. Scores fall along every path (a parent outscores its children).
HostTree deep_tree(uint32_t n, uint32_t max_depth, uint32_t head_id, std::mt19937& rng) {
  HostTree t;
  t.push(rng() % 1000, -1, 0, 0.0f, 0);
  std::uniform_real_distribution<float> lp(-3.0f, -0.01f);
  while (t.size() < n) {
    const uint32_t size = uint32_t(t.size());
    const uint32_t p = rng() % 4 == 0 ? rng() % size : size - 1 - rng() % std::min(size, 3u);
    if (t.depth[p] >= max_depth) continue;
    t.push(rng() % 1000, int(p), t.depth[p] + 1, t.score[p] + lp(rng), head_id);
  }
  return t;
}

// The first node where got and ref differ in any field, or -1: one message per run, not 5 * n.
long first_mismatch(const HostTree& got, const HostTree& ref) {
  for (size_t i = 0; i < ref.size(); ++i)
    if (got.token[i] != ref.token[i] || got.parent[i] != ref.parent[i] || got.depth[i] != ref.depth[i] ||
        !same_float(got.score[i], ref.score[i]) || got.head[i] != ref.head[i])
      return long(i);
  return -1;
}

}  // namespace

TEST_CASE_FIXTURE(VkTest, "tree: merge_trie equals the reference at workgroup sizes 32..256 on pools up to kTrieMaxNodes") {
  const DeviceCaps& caps = ctx.caps();
  const uint32_t wg_limit = std::min(caps.max_workgroup_invocations, caps.max_workgroup_size[0]);
  uint32_t seed = 1200;
  // (c1, c2, max depth, alphabet): c1 + c2 - 1 up to kTrieMaxNodes.
  for (auto [c1, c2, max_depth, alphabet] :
       {std::tuple{kTreeMaxNodes, kTreeMaxNodes, 8u, 5u}, {kTreeMaxNodes, kTreeMaxNodes, 63u, 3u},
        {700u, 300u, 40u, 2u}, {kTrieMaxNodes - 24, 25u, 63u, 4u}, {37u, 23u, 63u, 2u}}) {
    REQUIRE(c1 + c2 - 1 <= kTrieMaxNodes);
    std::mt19937 rng(seed++);
    HostTree p1 = deep_tree(c1, max_depth, 1, rng), p2 = deep_tree(c2, max_depth, 2, rng);
    for (auto& x : p1.token) x %= alphabet;
    for (auto& x : p2.token) x %= alphabet;
    p2.token[0] = p1.token[0];
    for (HostTree* p : {&p1, &p2})
      for (auto& s : p->score) s = std::floor(s * 4.0f) / 4.0f;  // frequent ties: the index tie-break
    DeviceTree d1(ctx, c1, max_depth), d2(ctx, c2, max_depth);
    upload_tree(d1, p1);
    upload_tree(d2, p2);
    for (uint32_t n_out : {17u, kTreeMaxNodes}) {
      uint32_t distinct = 0;
      const HostTree ref = trie_ref(p1, p2, n_out, &distinct);
      for (uint32_t wg : {32u, 64u, 128u, 256u}) {
        if (wg > wg_limit) continue;
        DeviceTree dout(ctx, n_out, max_depth);
        Sequence seq(ctx);
        seq.begin();
        merge_trie(seq, d1, c1, d2, c2, n_out, dout, wg_cfg(wg));
        seq.run();
        const std::string what = "wg " + std::to_string(wg) + " pools " + std::to_string(c1) + "+" +
                                 std::to_string(c2) + " depth " + std::to_string(max_depth) + " n_out " +
                                 std::to_string(n_out) + " distinct " + std::to_string(distinct);
        const long bad = first_mismatch(download_tree(dout, n_out), ref);
        CHECK_MESSAGE(bad == -1, what << ": first mismatching node " << bad);
        CHECK_MESSAGE(dout.info.read<uint32_t>(1)[0] == n_out, what);
      }
    }
  }
}
