#version 450
// K and V rows of a qkv projection into the caches: cache row (slot + r) takes columns
// [k_col, k_col + kv) (K) and [v_col, v_col + kv) (V) of src row r. The slot is a dynamic scalar
// (dyn.glsl), so a step recorded once writes wherever the committed length has reached.
// KV_F16: the cache holds f16 pairs packed in u32 words (packHalf2x16, even kv); one invocation
// per word. Otherwise one invocation per f32 value. k_base / v_base: the layer's first value.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
layout(set = 0, binding = 0, std430) readonly buffer Src { float src[]; };
#ifdef KV_F16
layout(set = 0, binding = 1, std430) writeonly buffer KC { uint kc[]; };
layout(set = 0, binding = 2, std430) writeonly buffer VC { uint vc[]; };
#else
layout(set = 0, binding = 1, std430) writeonly buffer KC { float kc[]; };
layout(set = 0, binding = 2, std430) writeonly buffer VC { float vc[]; };
#endif
#define DYN_BINDING 3
#include "dyn.glsl"
layout(push_constant) uniform Push { uint kv, src_offset, src_stride, k_col, v_col, slot, slot_slot, k_base, v_base; } pc;
void main() {
  const uint c = gl_GlobalInvocationID.x, r = gl_WorkGroupID.y;
  const uint s = pc.src_offset + r * pc.src_stride, row = dyn(pc.slot, pc.slot_slot) + r;
#ifdef KV_F16
  const uint words = pc.kv / 2;
  if (c >= words) return;
  const uint d = row * words + c, x = 2 * c;
  kc[pc.k_base / 2 + d] = packHalf2x16(vec2(src[s + pc.k_col + x], src[s + pc.k_col + x + 1]));
  vc[pc.v_base / 2 + d] = packHalf2x16(vec2(src[s + pc.v_col + x], src[s + pc.v_col + x + 1]));
#else
  if (c >= pc.kv) return;
  const uint d = row * pc.kv + c;
  kc[pc.k_base + d] = src[s + pc.k_col + c];
  vc[pc.v_base + d] = src[s + pc.v_col + c];
#endif
}
