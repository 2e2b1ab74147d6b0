#version 450
// y(T, V) = softmax(x(T, V) * inv_temp) per row. One workgroup per row.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
#include "reduce.glsl"
layout(set = 0, binding = 0, std430) readonly buffer X { float x[]; };
layout(set = 0, binding = 1, std430) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Push { uint V, x_offset, x_stride, y_offset, y_stride; float inv_temp; } pc;
void main() {
  const uint row = gl_WorkGroupID.x, lid = gl_LocalInvocationID.x;
  const uint xo = pc.x_offset + row * pc.x_stride, yo = pc.y_offset + row * pc.y_stride;
  float m = -1.0 / 0.0;
  for (uint i = lid; i < pc.V; i += WG) m = max(m, x[xo + i] * pc.inv_temp);
  m = wg_max(m);
  float s = 0.0;
  for (uint i = lid; i < pc.V; i += WG) s += exp(x[xo + i] * pc.inv_temp - m);
  const float inv = 1.0 / wg_sum(s);
  for (uint i = lid; i < pc.V; i += WG) y[yo + i] = exp(x[xo + i] * pc.inv_temp - m) * inv;
}
