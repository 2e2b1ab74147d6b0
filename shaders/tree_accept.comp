#version 450
// accept_greedy (DESIGN.md §3, seed 000 §4.4): for every retrieve row, the accepted length is the
// longest e with token[R[j]] == argmax[R[j-1]] for all 1 <= j <= e. The answer is the longest
// over ALL rows, ties to the lower row: siblings may carry the same token (a merged tree has
// duplicates under the root), so following the first matching child could stop short.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
#include "vkspec/tree_limits.h"
layout(set = 0, binding = 0, std430) readonly buffer Tok { uint token[]; };
layout(set = 0, binding = 1, std430) readonly buffer Head { uint head[]; };
layout(set = 0, binding = 2, std430) readonly buffer Ret { int retrieve[]; };  // (L, W)
layout(set = 0, binding = 3, std430) buffer Info { uint info[]; };
layout(set = 0, binding = 4, std430) readonly buffer Arg { uint argmax[]; };   // (N)
layout(set = 0, binding = 5, std430) writeonly buffer Acc { uint accepted[]; };
layout(push_constant) uniform Push { uint W; } pc;  // max_depth + 1
shared uint best[WG];
void main() {
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
  best[lid] = key;
  barrier();
  for (uint n = WG; n > 1;) {
    const uint h = (n + 1) / 2;
    if (lid < n - h) best[lid] = max(best[lid], best[lid + h]);
    n = h;
    barrier();
  }
  const uint a = best[0] >> 16, row = 0xffffu - (best[0] & 0xffffu);
  for (uint e = lid; e <= a; e += WG) accepted[e] = uint(retrieve[row * pc.W + e]);
  if (lid == 0) {
    const uint last = uint(retrieve[row * pc.W + a]);
    info[kInfoAccepted] = a;
    info[kInfoBestRow] = row;
    info[kInfoNextRoot] = argmax[last];
    info[kInfoBestHead] = a == 0 ? 0u : head[last];
  }
}
