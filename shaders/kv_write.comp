#version 450
// K and V rows of a qkv projection into the caches: cache row (slot + r) takes columns
// [k_col, k_col + kv) (K) and [v_col, v_col + kv) (V) of src row r. The slot is a dynamic scalar
// (dyn.glsl), so a step recorded once writes wherever the committed length has reached.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
layout(set = 0, binding = 0, std430) readonly buffer Src { float src[]; };
layout(set = 0, binding = 1, std430) writeonly buffer KC { float kc[]; };
layout(set = 0, binding = 2, std430) writeonly buffer VC { float vc[]; };
#define DYN_BINDING 3
#include "dyn.glsl"
layout(push_constant) uniform Push { uint kv, src_offset, src_stride, k_col, v_col, slot, slot_slot; } pc;
void main() {
  const uint c = gl_GlobalInvocationID.x, r = gl_WorkGroupID.y;
  if (c >= pc.kv) return;
  const uint s = pc.src_offset + r * pc.src_stride, d = (dyn(pc.slot, pc.slot_slot) + r) * pc.kv + c;
  kc[d] = src[s + pc.k_col + c];
  vc[d] = src[s + pc.v_col + c];
}
