#version 450
// In-place rotary embedding of x(T, H, D); row t at rope_position(t) (rope.glsl).
// Pairs as rope_pair orders them (pc.mode). Only the first n_rot dims of each head rotate. One invocation per pair.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;

#include "pair.glsl"
layout(set = 0, binding = 0, std430) buffer X { float xin[]; } PAIRED(X_);
#define xin PAIR_AT(X_).xin
layout(set = 0, binding = 1, std430) readonly buffer Pos { int pos[]; } PAIRED(Pos_);
#define pos PAIR_AT(Pos_).pos
layout(set = 0, binding = 2, std430) readonly buffer Factors { float factors[]; } PAIRED(Factors_);
#define factors PAIR_AT(Factors_).factors
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
  const uvec2 ab = rope_pair(base, i);
  const vec2 v = rope_rotate(base, i, rope_position(t));
  xin[ab.x] = v.x;
  xin[ab.y] = v.y;
}
