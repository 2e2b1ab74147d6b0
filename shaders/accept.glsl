// The body of tree_accept.comp, shared with tree_argmax_accept.comp (DESIGN.md §3, seed 000 §4.4):
// for every retrieve row, the accepted length is the longest e with token[R[j]] == argmax[R[j-1]]
// for all 1 <= j <= e. The answer is the longest over ALL rows, ties to the lower row: siblings
// may carry the same token (a merged tree has duplicates under the root), so following the first
// matching child could stop short. One workgroup.
// Needs reduce.glsl and the names token, head, retrieve, info, argmax, accepted and pc.W (max_depth + 1).
#ifndef VKSPEC_ACCEPT_GLSL
#define VKSPEC_ACCEPT_GLSL
void accept_greedy_tree() {
  const uint lid = gl_LocalInvocationID.x, L = info[kInfoLeaves];
  // Key = length in the high half, (0xffff - row) in the low half: max key = longest, lower row.
  uint key = 0;
  for (uint r = lid; r < L; r += WG) {
    uint e = 0;
    while (e + 1 < pc.W) {
      const int node = retrieve[r * pc.W + e + 1];
      if (node < 0 || token[uint(node)] != argmax[uint(retrieve[r * pc.W + e])]) break;
      ++e;
    }
    key = max(key, (e << 16) | (0xffffu - r));
  }
  const uint best = wg_max_u(key);
  const uint a = best >> 16, row = 0xffffu - (best & 0xffffu);
  for (uint e = lid; e <= a; e += WG) accepted[e] = uint(retrieve[row * pc.W + e]);
  if (lid == 0) {
    const uint last = uint(retrieve[row * pc.W + a]);
    info[kInfoAccepted] = a;
    info[kInfoBestRow] = row;
    info[kInfoNextRoot] = argmax[last];
    info[kInfoBestHead] = a == 0 ? 0u : head[last];
  }
}
#endif
