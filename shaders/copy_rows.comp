#version 450
// dst row r = src row (row0 + r), `cols` floats, r < gl_NumWorkGroups.y; row0 is a dynamic scalar
// (dyn.glsl): e.g. the draft root's row of a head's ingest, which depends on the last step.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
#include "pair.glsl"
layout(set = 0, binding = 0, std430) readonly buffer Src { float src[]; } PAIRED(Src_);
#define src PAIR_AT(Src_).src
layout(set = 0, binding = 1, std430) writeonly buffer Dst { float dst[]; } PAIRED(Dst_);
#define dst PAIR_AT(Dst_).dst
#define DYN_BINDING 2
#include "dyn.glsl"
layout(push_constant) uniform Push { uint cols, src_offset, src_stride, dst_offset, dst_stride, row0, row0_slot; } pc;
void main() {
  const uint c = gl_GlobalInvocationID.x, r = gl_WorkGroupID.y;
  if (c >= pc.cols) return;
  dst[pc.dst_offset + r * pc.dst_stride + c] = src[pc.src_offset + (dyn(pc.row0, pc.row0_slot) + r) * pc.src_stride + c];
}
