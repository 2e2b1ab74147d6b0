#version 450
// y(T, C) = x(T, C) * rsqrt(mean(x^2) + eps) * w(C). One workgroup per row.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
#include "reduce.glsl"

layout(set = 0, binding = 0, std430) readonly buffer X { float x[]; };
layout(set = 0, binding = 1, std430) readonly buffer W { float w[]; };
layout(set = 0, binding = 2, std430) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Push {
  uint C, x_offset, x_stride, y_offset, y_stride;
  float eps;
} pc;

void main() {
  const uint row = gl_WorkGroupID.x, lid = gl_LocalInvocationID.x;
  const uint xo = pc.x_offset + row * pc.x_stride, yo = pc.y_offset + row * pc.y_stride;
  float ss = 0.0;
  for (uint i = lid; i < pc.C; i += WG) ss += x[xo + i] * x[xo + i];
  const float scale = inversesqrt(wg_sum(ss) / float(pc.C) + pc.eps);
  for (uint i = lid; i < pc.C; i += WG) y[yo + i] = x[xo + i] * scale * w[i];
}
