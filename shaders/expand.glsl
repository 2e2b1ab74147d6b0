// The body of tree_expand.comp, shared with tree_topk_expand.comp (DESIGN.md §2, EAGLE-2): one
// workgroup appends the F*k children of the frontier at pool indices base + f*k + j, then ranks
// them by (score desc, pool index asc) — the order of order.glsl, so NaN scores rank last and
// the ranks are a permutation — and writes the best next_F, in rank order, as the next frontier:
// every slot 0..next_F-1 is written exactly once. Ranking by counting keeps the order
// deterministic whatever the workgroup or subgroup size.
// Needs order.glsl, the names token, parent, depth, score, head, frontier, ids, logp,
// next_frontier, head_id, and pc.{base, frontier_offset, F, topk_offset, topk_stride, k,
// next_offset, next_F}.
#ifndef VKSPEC_EXPAND_GLSL
#define VKSPEC_EXPAND_GLSL

shared uint key[kTreeMaxNodes];  // order_key of each new node's score; F*k <= kTreeMaxNodes (host asserts)

void expand_frontier() {
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
#endif
