#version 450
// out[t] = argmax_v x(t, v), ties to the lower index. One workgroup per row.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
#include "reduce.glsl"
layout(set = 0, binding = 0, std430) readonly buffer X { float x[]; };
layout(set = 0, binding = 1, std430) writeonly buffer O { uint o[]; };
layout(push_constant) uniform Push { uint V, x_offset, x_stride, o_offset; } pc;
void main() {
  const uint row = gl_WorkGroupID.x, lid = gl_LocalInvocationID.x;
  const uint xo = pc.x_offset + row * pc.x_stride;
  float best = -1.0 / 0.0;
  uint bi = 0xffffffffu;
  for (uint i = lid; i < pc.V; i += WG) {
    const float v = x[xo + i];
    if (v > best || bi == 0xffffffffu) { best = v; bi = i; }  // strided scan: first max wins
  }
  float m;
  const uint r = wg_argmax(best, bi, m);
  if (lid == 0) o[pc.o_offset + row] = r;
}
