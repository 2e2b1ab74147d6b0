#version 450
// merge_trees, parent pointers (seed 000 §4.1): head-1 nodes keep 1..n1, head-2 node i > 0
// becomes n1 + i, φ(0) = 0. token/depth/score/head are plain buffer copies on the host side.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
#include "vkspec/tree_limits.h"
layout(set = 0, binding = 0, std430) readonly buffer P1 { int parent1[]; };
layout(set = 0, binding = 1, std430) readonly buffer P2 { int parent2[]; };
layout(set = 0, binding = 2, std430) writeonly buffer PO { int o_parent[]; };
layout(set = 0, binding = 3, std430) writeonly buffer OInfo { uint o_info[]; };
layout(push_constant) uniform Push { uint n1, n2; } pc;
void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i == 0) o_info[kInfoNodes] = 1 + pc.n1 + pc.n2;
  if (i <= pc.n1) {
    o_parent[i] = parent1[i];
  } else if (i <= pc.n1 + pc.n2) {
    const int p = parent2[i - pc.n1];
    o_parent[i] = p == 0 ? 0 : int(pc.n1) + p;
  }
}
