// The option ranges the tree kernels accept (vkspec/tree_limits.h), checked before anything is
// allocated, with messages that name the option and the range that would fit.
#include <algorithm>
#include <string>

#include "vkspec/engine.hpp"

namespace vkspec {

const char* strategy_name(Strategy s) {
  switch (s) {
    case Strategy::AR: return "ar";
    case Strategy::Single1: return "single1";
    case Strategy::Single2: return "single2";
    case Strategy::Route: return "route";
    case Strategy::Merge: return "merge";
    case Strategy::MergeTrie: return "merge-trie";
  }
  return "?";
}

Strategy parse_strategy(const std::string& s) {
  for (Strategy x : {Strategy::AR, Strategy::Single1, Strategy::Single2, Strategy::Route, Strategy::Merge,
                     Strategy::MergeTrie})
    if (s == strategy_name(x)) return x;
  throw Error("unknown strategy '" + s + "' (choose ar, single1, single2, route, merge, merge-trie)");
}

uint64_t draft_pool_nodes(uint32_t K, uint32_t D) {
  return D == 0 ? 1 : 1 + uint64_t(K) + uint64_t(D - 1) * K * K;
}

uint32_t default_draft_budget(uint32_t K, uint32_t D, uint32_t ceiling) {
  return uint32_t(std::clamp<uint64_t>(draft_pool_nodes(K, D) - 1, 1, std::max(ceiling, 1u)));
}

uint64_t max_step_slack(uint32_t B, uint32_t D, uint32_t K) { return 3 + 2 * uint64_t(B) + uint64_t(D) * K; }

uint32_t max_draft_depth(uint32_t K) {
  uint32_t best = 0;
  for (uint32_t D = 1; D < kTreeMaxPath && draft_pool_nodes(K, D) <= kTreeMaxNodes; ++D) best = D;
  return best;
}

uint32_t max_draft_topk(uint32_t D, uint32_t V) {
  uint32_t best = 0;
  for (uint32_t K = 1; K <= std::min(kTopkMax, V) && draft_pool_nodes(K, D) <= kTreeMaxNodes; ++K) best = K;
  return best;
}

uint32_t max_draft_budget(Strategy s, uint32_t K, uint32_t D) {
  const uint64_t pool = draft_pool_nodes(K, D);
  if (s == Strategy::AR || pool > kTreeMaxNodes) return 0;
  const uint32_t heads = s == Strategy::Merge || s == Strategy::MergeTrie ? 2 : 1;
  return uint32_t(std::min<uint64_t>(pool - 1, (kTreeMaxNodes - 1) / heads));
}

uint32_t budget_within(Strategy s, uint32_t K, uint32_t D, uint32_t budget) {
  const uint32_t most = max_draft_budget(s, K, D);
  return most ? std::min(budget, most) : budget;
}

uint32_t drafted_depth(Strategy s, uint32_t D, uint32_t B) {
  if (s == Strategy::AR) return 0;
  const uint64_t deepest = s == Strategy::MergeTrie ? 2 * uint64_t(B) : B;
  return uint32_t(std::min<uint64_t>(D, std::max<uint64_t>(deepest, 1)));
}

// Every limit a tree option meets, in the order a user fixes them: top-k, depth, their product
// (the candidate pool), then the budget. Ranges are derived from vkspec/tree_limits.h, the
// numbers the kernels size their shared arrays with, and compared without wrapping.
void check_draft_options(uint32_t K, uint32_t D, uint32_t B, uint32_t V, const OptionNames& n) {
  const auto str = [](uint64_t x) { return std::to_string(x); };
  const std::string topk = n.topk, depth = n.depth, budget = n.budget;
  if (K < 1 || K > kTopkMax)
    throw Error(topk + " must be in 1.." + str(kTopkMax) + " (the top-k kernel's limit), got " + str(K));
  if (K > V)
    throw Error(topk + " " + str(K) + " exceeds the vocabulary of " + str(V) +
                " tokens (a node has at most that many distinct children): use " + topk + " <= " + str(V));
  if (D < 1 || D > kTreeMaxPath - 1)
    throw Error(depth + " must be in 1.." + str(kTreeMaxPath - 1) + " (a root-to-leaf path of depth + 1 nodes is what "
                "the attention and commit kernels hold: at most " + str(kTreeMaxPath) + "), got " + str(D));
  const uint64_t pool = draft_pool_nodes(K, D);
  if (pool > kTreeMaxNodes) {
    std::string fix = "lower " + depth + " or " + topk;
    if (max_draft_depth(K) >= 1) fix = "with " + topk + " " + str(K) + " use " + depth + " <= " + str(max_draft_depth(K));
    if (max_draft_topk(D, V) >= 1) fix += ", with " + depth + " " + str(D) + " use " + topk + " <= " + str(max_draft_topk(D, V));
    throw Error(depth + " " + str(D) + " with " + topk + " " + str(K) + " drafts a candidate pool of " + str(pool) +
                " nodes per head (1 + K + (D-1)*K^2), more than the " + str(kTreeMaxNodes) +
                " the tree kernels rank in one workgroup: " + fix);
  }
  if (B < 1 || B > pool - 1)
    throw Error(budget + " " + str(B) + " must be in 1.." + str(pool - 1) + " (the candidates depth " + str(D) +
                " and top-k " + str(K) + " produce)");
}

}  // namespace vkspec
