#version 450
// route_trees, decision (seed 001 §5, route_mu.glsl): μ_h = mean over the n retained non-root
// nodes of exp(score); verify head 1 if μ_1 >= μ_2 (NaN loses, ties → head 1).
// COPY (a variant, where the device allows its 16 storage buffers): the chosen tree's n + 1 nodes
// are copied to the output tree in the same dispatch, which tree_pick.comp otherwise does array
// by array.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
layout(set = 0, binding = 0, std430) readonly buffer S1 { float score1[]; };
layout(set = 0, binding = 1, std430) readonly buffer S2 { float score2[]; };
layout(set = 0, binding = 2, std430) writeonly buffer OInfo { uint o_info[]; };
#ifdef COPY
layout(set = 0, binding = 3, std430) readonly buffer T1 { uint token1[]; };
layout(set = 0, binding = 4, std430) readonly buffer P1 { uint parent1[]; };
layout(set = 0, binding = 5, std430) readonly buffer D1 { uint depth1[]; };
layout(set = 0, binding = 6, std430) readonly buffer H1 { uint head1[]; };
layout(set = 0, binding = 7, std430) readonly buffer T2 { uint token2[]; };
layout(set = 0, binding = 8, std430) readonly buffer P2 { uint parent2[]; };
layout(set = 0, binding = 9, std430) readonly buffer D2 { uint depth2[]; };
layout(set = 0, binding = 10, std430) readonly buffer H2 { uint head2[]; };
layout(set = 0, binding = 11, std430) writeonly buffer OT { uint o_token[]; };
layout(set = 0, binding = 12, std430) writeonly buffer OP { uint o_parent[]; };
layout(set = 0, binding = 13, std430) writeonly buffer OD { uint o_depth[]; };
layout(set = 0, binding = 14, std430) writeonly buffer OS { float o_score[]; };
layout(set = 0, binding = 15, std430) writeonly buffer OH { uint o_head[]; };
#endif
layout(push_constant) uniform Push { uint n; } pc;
#include "reduce.glsl"
#include "route_mu.glsl"
#include "vkspec/tree_limits.h"
void main() {
  const uint lid = gl_LocalInvocationID.x;
  float mu1, mu2;
  const bool first = route_first(pc.n, mu1, mu2);
#ifdef COPY
  for (uint i = lid; i <= pc.n; i += WG) {
    o_token[i] = first ? token1[i] : token2[i];
    o_parent[i] = first ? parent1[i] : parent2[i];
    o_depth[i] = first ? depth1[i] : depth2[i];
    o_score[i] = first ? score1[i] : score2[i];
    o_head[i] = first ? head1[i] : head2[i];
  }
#endif
  if (lid == 0) {
    o_info[kInfoNodes] = pc.n + 1;
    o_info[kInfoChosen] = first ? 1u : 2u;
    o_info[kInfoMu1] = floatBitsToUint(mu1);
    o_info[kInfoMu2] = floatBitsToUint(mu2);
  }
}
