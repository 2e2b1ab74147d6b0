#version 450
// gather_rows: dst row e = src row accepted[e] for e = 0..a (workgroup y = e; rows past a idle).
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
#include "vkspec/tree_limits.h"
layout(set = 0, binding = 0, std430) readonly buffer Info { uint info[]; };
layout(set = 0, binding = 1, std430) readonly buffer Acc { uint accepted[]; };
layout(set = 0, binding = 2, std430) readonly buffer Src { float src[]; };
layout(set = 0, binding = 3, std430) writeonly buffer Dst { float dst[]; };
layout(push_constant) uniform Push { uint cols, s_offset, s_stride, d_offset, d_stride; } pc;
void main() {
  const uint c = gl_GlobalInvocationID.x, e = gl_WorkGroupID.y;
  if (c >= pc.cols || e > info[kInfoAccepted]) return;
  dst[pc.d_offset + e * pc.d_stride + c] = src[pc.s_offset + accepted[e] * pc.s_stride + c];
}
