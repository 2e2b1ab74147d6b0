#version 450
// out(T, F) = act(gate(T, F)) * up(T, F): SwiGLU, or GeGLU with ACT (act.glsl)
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint ACT = 0;
#include "act.glsl"
layout(set = 0, binding = 0, std430) readonly buffer G { float g[]; };
layout(set = 0, binding = 1, std430) readonly buffer U { float u[]; };
layout(set = 0, binding = 2, std430) writeonly buffer O { float o[]; };
layout(push_constant) uniform Push { uint T, F, g_offset, g_stride, u_offset, u_stride, o_offset, o_stride; } pc;
void main() {
  const uint idx = gl_GlobalInvocationID.x;
  if (idx >= pc.T * pc.F) return;
  const uint t = idx / pc.F, f = idx % pc.F;
  o[pc.o_offset + t * pc.o_stride + f] = glu_act(g[pc.g_offset + t * pc.g_stride + f]) * u[pc.u_offset + t * pc.u_stride + f];
}
