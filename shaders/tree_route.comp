#version 450
// route_trees, decision (seed 001 §5): μ_h = mean over the n retained non-root nodes of
// exp(score); verify head 1 if μ_1 >= μ_2 in the order of order.glsl (a NaN μ — a head that
// produced NaN scores — loses to any number; two NaNs tie, and ties go to head 1). Sums in a
// fixed order (reduce.glsl), so the choice is the same on every device for the same scores.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
layout(set = 0, binding = 0, std430) readonly buffer S1 { float score1[]; };
layout(set = 0, binding = 1, std430) readonly buffer S2 { float score2[]; };
layout(set = 0, binding = 2, std430) writeonly buffer OInfo { uint o_info[]; };
layout(push_constant) uniform Push { uint n; } pc;
#include "reduce.glsl"
#include "vkspec/tree_limits.h"
void main() {
  const uint lid = gl_LocalInvocationID.x;
  float a = 0.0, b = 0.0;
  for (uint i = 1 + lid; i <= pc.n; i += WG) {
    a += exp(score1[i]);
    b += exp(score2[i]);
  }
  const float mu1 = wg_sum(a) / float(pc.n);
  const float mu2 = wg_sum(b) / float(pc.n);
  if (lid == 0) {
    o_info[kInfoNodes] = pc.n + 1;
    o_info[kInfoChosen] = order_key(mu1) >= order_key(mu2) ? 1u : 2u;  // ties → head 1
    o_info[kInfoMu1] = floatBitsToUint(mu1);
    o_info[kInfoMu2] = floatBitsToUint(mu2);
  }
}
