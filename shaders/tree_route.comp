#version 450
// route_trees, decision (seed 001 §5): μ_h = mean over the n retained non-root nodes of
// exp(score); verify head 1 if μ_1 >= μ_2. Sums in a fixed order (reduce.glsl), so the choice is
// the same on every device for the same scores.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
layout(set = 0, binding = 0, std430) readonly buffer S1 { float score1[]; };
layout(set = 0, binding = 1, std430) readonly buffer S2 { float score2[]; };
layout(set = 0, binding = 2, std430) writeonly buffer OInfo { uint o_info[]; };
layout(push_constant) uniform Push { uint n; } pc;
#include "reduce.glsl"
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
    o_info[0] = pc.n + 1;                // kInfoNodes
    o_info[2] = mu1 >= mu2 ? 1u : 2u;    // kInfoChosen, ties → head 1
    o_info[3] = floatBitsToUint(mu1);    // kInfoMu1
    o_info[4] = floatBitsToUint(mu2);    // kInfoMu2
  }
}
