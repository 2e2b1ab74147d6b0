#version 450
// In-place rotary embedding of x(T, H, D); row t at rope_position(t) (rope.glsl).
// MODE 0: consecutive pairs (2i, 2i+1) — GGUF/llama.cpp "normal" order.
// MODE 1: halves (i, i + n_rot/2) — Hugging Face rotate_half (llama.cpp "neox") order.
// Only the first n_rot dims of each head rotate. One invocation per pair.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;

layout(set = 0, binding = 0, std430) buffer X { float x[]; };
layout(set = 0, binding = 1, std430) readonly buffer Pos { int pos[]; };
layout(set = 0, binding = 2, std430) readonly buffer Factors { float factors[]; };
#define DYN_BINDING 3
#include "dyn.glsl"
layout(push_constant) uniform Push {
  uint T, H, D, n_rot, x_offset, x_stride, pos_offset, mode;
  float theta, freq_scale;
  uint has_factors, has_table, first, first_slot, step;
} pc;
#include "rope.glsl"

void main() {
  const uint half_rot = pc.n_rot / 2;
  const uint g = gl_GlobalInvocationID.x;
  if (g >= pc.T * pc.H * half_rot) return;
  const uint i = g % half_rot, h = (g / half_rot) % pc.H, t = g / (half_rot * pc.H);
  const uint base = pc.x_offset + t * pc.x_stride + h * pc.D;
  const uint a = pc.mode == 0 ? base + 2 * i : base + i;
  const uint b = pc.mode == 0 ? a + 1 : a + half_rot;
  const vec2 cs = rope_cos_sin(i, rope_position(t));
  const float x0 = x[a], x1 = x[b];
  x[a] = x0 * cs.x - x1 * cs.y;
  x[b] = x0 * cs.y + x1 * cs.x;
}
