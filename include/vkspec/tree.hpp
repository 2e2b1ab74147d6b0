// Draft trees on the GPU (DESIGN.md §2–4): candidate pools, best-B selection, merge / route,
// mask + positions + retrieve matrix, greedy acceptance scan, KV commit.
//
// Nothing about individual nodes is decided on the host: every function records dispatches
// into a Sequence; counts that depend on data stay in device buffers.
#pragma once

#include <cstdint>

#include "vkspec/buffer.hpp"
#include "vkspec/ops.hpp"
#include "vkspec/sequence.hpp"

namespace vkspec {

// A tree (or a candidate pool) as a struct of arrays of capacity `cap` nodes, node 0 = root,
// parent[i] < i. All arrays are separate device buffers:
//   token  u32 (cap)   parent i32 (cap, -1 for the root)   depth u32 (cap)
//   score  f32 (cap)   cumulative draft log-prob, root 0
//   head   u32 (cap)   which head drafted the node (1 or 2; 0 for the root)
//   mask   u32 (cap, mask_words)   row i: bit j set iff j is an ancestor of i or i itself
//   pos    i32 (cap)   t + depth (position ids for the verifier / head forward)
//   retrieve i32 (cap, max_depth + 1)   root-to-leaf paths, root index 0 first, -1 padded
//   info   u32 (16)    device-side counters, see TreeInfo
struct DeviceTree {
  DeviceTree() = default;
  DeviceTree(Context& ctx, uint32_t cap, uint32_t max_depth);
  uint32_t cap = 0, max_depth = 0, mask_words = 0;
  Buffer token, parent, depth, score, head, mask, pos, retrieve, info;
};

// Slots of DeviceTree::info.
enum TreeInfo : uint32_t {
  kInfoNodes = 0,     // number of nodes incl. root
  kInfoLeaves = 1,    // rows of retrieve in use
  kInfoChosen = 2,    // route: winning head (1 or 2)
  kInfoMu1 = 3,       // route: μ_1 as f32 bits
  kInfoMu2 = 4,       // route: μ_2 as f32 bits
  kInfoAccepted = 5,  // accept: a (accepted draft tokens, root excluded)
  kInfoBestRow = 6,   // accept: row of retrieve giving the accepted path
  kInfoNextRoot = 7,  // accept: next root token (verifier argmax at the last accepted node)
  kInfoBestHead = 8,  // accept: head that drafted the deepest accepted node (0 if a == 0)
};

}  // namespace vkspec
