#version 450
// out[t] = argmax_v x(t, v) in the ranking order of order.glsl: ties to the lower index, NaN
// last (it wins only when the whole row is NaN, and then index 0 does). One workgroup per row.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
#include "reduce.glsl"
layout(set = 0, binding = 0, std430) readonly buffer X { float x[]; };
layout(set = 0, binding = 1, std430) writeonly buffer O { uint o[]; };
#define DYN_BINDING 2
#include "dyn.glsl"
layout(push_constant) uniform Push { uint V, x_offset, x_stride, o_offset, o_slot; } pc;
void main() {
  const uint row = gl_WorkGroupID.x, lid = gl_LocalInvocationID.x;
  const uint xo = pc.x_offset + row * pc.x_stride;
  float best = 0.0;
  uint bi = 0xffffffffu;  // no candidate yet (an invocation past V keeps it)
  for (uint i = lid; i < pc.V; i += WG) {
    const float v = x[xo + i];
    // i ascends, so among equal keys the first one seen stays
    if (bi == 0xffffffffu || order_key(v) > order_key(best)) { best = v; bi = i; }
  }
  float m;
  const uint r = wg_argmax(best, bi, m);
  if (lid == 0) o[dyn(pc.o_offset, pc.o_slot) + row] = r;
}
