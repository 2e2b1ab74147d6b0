#version 450
// out[t] = argmax_v x(t, v) (argmax_row.glsl; a non-finite row's flag is dropped: these ids feed
// no output list). One workgroup per row.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
#include "reduce.glsl"
layout(set = 0, binding = 0, std430) readonly buffer X { float xin[]; };
layout(set = 0, binding = 1, std430) writeonly buffer O { uint o[]; };
#define DYN_BINDING 2
#include "dyn.glsl"
#include "argmax_row.glsl"
layout(push_constant) uniform Push { uint V, x_offset, x_stride, o_offset, o_slot; } pc;
void main() {
  const uint row = gl_WorkGroupID.x;
  const uint r = argmax_row(pc.x_offset + row * pc.x_stride, pc.V);
  if (gl_LocalInvocationID.x == 0) o[dyn(pc.o_offset, pc.o_slot) + row] = r & ~kTokenNonFinite;
}
