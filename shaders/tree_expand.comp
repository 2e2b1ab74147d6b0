#version 450
// draft_expand (DESIGN.md §2, EAGLE-2): one workgroup appends the F*k children of the frontier
// at pool indices base + f*k + j, then ranks them by (score desc, pool index asc) — the order of
// order.glsl, so NaN scores rank last and the ranks are a permutation — and writes the best
// next_F, in rank order, as the next frontier: every slot 0..next_F-1 is written exactly once.
// Ranking by counting keeps the order deterministic whatever the workgroup or subgroup size.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
#include "order.glsl"
#include "vkspec/tree_limits.h"
#include "pair.glsl"
layout(set = 0, binding = 0, std430) buffer Tok { uint token[]; } PAIRED(Tok_);
#define token PAIR_AT(Tok_).token
layout(set = 0, binding = 1, std430) buffer Par { int parent[]; } PAIRED(Par_);
#define parent PAIR_AT(Par_).parent
layout(set = 0, binding = 2, std430) buffer Dep { uint depth[]; } PAIRED(Dep_);
#define depth PAIR_AT(Dep_).depth
layout(set = 0, binding = 3, std430) buffer Sco { float score[]; } PAIRED(Sco_);
#define score PAIR_AT(Sco_).score
layout(set = 0, binding = 4, std430) buffer Head { uint head[]; } PAIRED(Head_);
#define head PAIR_AT(Head_).head
layout(set = 0, binding = 5, std430) readonly buffer Frontier { uint frontier[]; } PAIRED(Frontier_);
#define frontier PAIR_AT(Frontier_).frontier
layout(set = 0, binding = 6, std430) readonly buffer Ids { uint ids[]; } PAIRED(Ids_);
#define ids PAIR_AT(Ids_).ids
layout(set = 0, binding = 7, std430) readonly buffer Logp { float logp[]; } PAIRED(Logp_);
#define logp PAIR_AT(Logp_).logp
layout(set = 0, binding = 8, std430) writeonly buffer Next { uint next_frontier[]; } PAIRED(Next_);
#define next_frontier PAIR_AT(Next_).next_frontier
layout(set = 0, binding = 9, std430) readonly buffer HeadId { uint head_id[]; } PAIRED(HeadId_);  // [0]: the drafting head
#define head_id PAIR_AT(HeadId_).head_id
layout(push_constant) uniform Push {
  uint base, frontier_offset, F, topk_offset, topk_stride, k, next_offset, next_F;
} pc;
shared uint key[kTreeMaxNodes];  // order_key of each new node's score; F*k <= kTreeMaxNodes (host asserts)
void main() {
  const uint lid = gl_LocalInvocationID.x, n = pc.F * pc.k;
  for (uint i = lid; i < n; i += WG) {
    const uint f = i / pc.k, j = i % pc.k;
    const uint p = frontier[pc.frontier_offset + f];
    const uint src = pc.topk_offset + f * pc.topk_stride + j;
    const float s = score[p] + logp[src];
    const uint node = pc.base + i;
    token[node] = ids[src];
    parent[node] = int(p);
    depth[node] = depth[p] + 1;
    score[node] = s;
    head[node] = head_id[0];
    key[i] = order_key(s);
  }
  barrier();
  for (uint i = lid; i < n; i += WG) {
    const uint ki = key[i];
    uint rank = 0;
    for (uint j = 0; j < n; ++j) rank += (key[j] > ki || (key[j] == ki && j < i)) ? 1u : 0u;
    if (rank < pc.next_F) next_frontier[pc.next_offset + rank] = pc.base + i;
  }
}
