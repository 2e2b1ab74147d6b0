// The combiners: how the drafters' trees become the one tree the verifier checks.
#include <algorithm>

#include "speculative/parts.hpp"

namespace vkspec::speculative {
namespace {

// One drafter's best-B tree, verified as drafted (EAGLE-2).
class Single final : public Combiner {
 public:
  uint32_t drafters() const override { return 1; }
  uint32_t verify_nodes(uint32_t B) const override { return 1 + B; }
  uint32_t max_budget(uint32_t pool) const override { return std::min(pool - 1, kTreeMaxNodes - 1); }
  void record(Sequence& seq, std::span<Drafter* const> d, uint32_t B, DeviceTree& out, Dyn t,
              const Buffer& root, const MetaEmbed* embed) const override {
    merge_trees_meta(seq, d[0]->tree(), B, d[0]->tree(), 0, out, t, {}, &root, embed);  // a copy: the second tree adds nothing
  }
};

// Seed 001 §5: each tree scored by the mean confidence exp(score) of its B nodes; only the better
// one is verified (ties to head 1).
// Route across head kinds: an EAGLE-3 head's logits are -inf outside its draft vocabulary (its
// lm_head is expanded to the verifier's vocabulary at load), so its scores are log-probabilities of
// a distribution over the same verifier vocabulary as an EAGLE-1/2 head's, and both trees' μ are
// compared as they are. What that does to routing a mixed pair is measured (models/README.md).
class Route final : public Combiner {
 public:
  uint32_t drafters() const override { return 2; }
  uint32_t verify_nodes(uint32_t B) const override { return 1 + B; }
  uint32_t max_budget(uint32_t pool) const override { return std::min(pool - 1, kTreeMaxNodes - 1); }
  uint32_t win_slot() const override { return kInfoChosen; }
  void record(Sequence& seq, std::span<Drafter* const> d, uint32_t B, DeviceTree& out, Dyn t,
              const Buffer& root, const MetaEmbed* embed) const override {
    route_trees_meta(seq, d[0]->tree(), B, d[1]->tree(), B, out, t, {}, &root, embed);
  }
};

// Seed 000 §4.1: both trees share the root; tree 2's nodes are appended after tree 1's with their
// parents remapped, and one pass verifies all 1 + 2B nodes.
class Merge final : public Combiner {
 public:
  uint32_t drafters() const override { return 2; }
  uint32_t verify_nodes(uint32_t B) const override { return 1 + 2 * B; }
  uint32_t max_budget(uint32_t pool) const override { return std::min(pool - 1, (kTreeMaxNodes - 1) / 2); }
  void record(Sequence& seq, std::span<Drafter* const> d, uint32_t B, DeviceTree& out, Dyn t,
              const Buffer& root, const MetaEmbed* embed) const override {
    merge_trees_meta(seq, d[0]->tree(), B, d[1]->tree(), B, out, t, {}, &root, embed);  // seed 000 §4.1-4.3 in one dispatch
  }
};

// Our extension (DESIGN.md §9): both candidate pools folded by token path, the best 2B distinct
// nodes verified — no node is verified twice when the heads agree.
class MergeTrie final : public Combiner {
 public:
  uint32_t drafters() const override { return 2; }
  uint32_t verify_nodes(uint32_t B) const override { return 1 + 2 * B; }
  uint32_t max_budget(uint32_t pool) const override { return std::min(pool - 1, (kTreeMaxNodes - 1) / 2); }
  bool reads_trees() const override { return false; }  // the pools: no draft_select a step
  void record(Sequence& seq, std::span<Drafter* const> d, uint32_t B, DeviceTree& out, Dyn t,
              const Buffer& root, const MetaEmbed* embed) const override {
    merge_trie(seq, d[0]->pool(), d[0]->pool_count(), d[1]->pool(), d[1]->pool_count(), verify_nodes(B), out, {}, &root,
               t);  // the root's token and the padding leaves' from root[t]
    tree_meta(seq, out, verify_nodes(B), t, {}, nullptr, embed);
  }
};

}  // namespace

std::unique_ptr<Combiner> make_combiner(Strategy s) {
  switch (s) {
    case Strategy::Single1:
    case Strategy::Single2: return std::make_unique<Single>();
    case Strategy::Route: return std::make_unique<Route>();
    case Strategy::Merge: return std::make_unique<Merge>();
    case Strategy::MergeTrie: return std::make_unique<MergeTrie>();
    case Strategy::AR: break;
  }
  return nullptr;  // ar: the plan without drafters
}

}  // namespace vkspec::speculative
