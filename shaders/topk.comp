#version 450
// Top-k (k <= 32) of each row of logits x(T, V), with log-softmax scores:
//   ids(T, k), logp(T, k) sorted by value descending, ties to the lower index.
// k rounds of a workgroup arg-max, each restricted to entries ranked strictly after the
// previous pick in (value desc, index asc) order — no per-element state, deterministic.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
#include "reduce.glsl"
layout(set = 0, binding = 0, std430) readonly buffer X { float x[]; };
layout(set = 0, binding = 1, std430) writeonly buffer Ids { uint ids[]; };
layout(set = 0, binding = 2, std430) writeonly buffer Lp { float logp[]; };
layout(push_constant) uniform Push { uint V, k, x_offset, x_stride, o_offset, o_stride; } pc;
void main() {
  const uint row = gl_WorkGroupID.x, lid = gl_LocalInvocationID.x;
  const uint xo = pc.x_offset + row * pc.x_stride;
  float m = -1.0 / 0.0;
  for (uint i = lid; i < pc.V; i += WG) m = max(m, x[xo + i]);
  m = wg_max(m);
  float s = 0.0;
  for (uint i = lid; i < pc.V; i += WG) s += exp(x[xo + i] - m);
  const float lse = m + log(wg_sum(s));
  float prev_v = 1.0 / 0.0;
  uint prev_i = 0;
  bool first = true;
  for (uint r = 0; r < pc.k; ++r) {
    float best = -1.0 / 0.0;
    uint bi = 0xffffffffu;
    for (uint i = lid; i < pc.V; i += WG) {
      const float v = x[xo + i];
      const bool after = first || v < prev_v || (v == prev_v && i > prev_i);
      if (after && (bi == 0xffffffffu || v > best)) { best = v; bi = i; }
    }
    float bv;
    const uint w = wg_argmax(bi == 0xffffffffu ? -1.0 / 0.0 : best, bi, bv);
    if (lid == 0) {
      ids[pc.o_offset + row * pc.o_stride + r] = w;
      logp[pc.o_offset + row * pc.o_stride + r] = bv - lse;
    }
    prev_v = bv;
    prev_i = w;
    first = false;
  }
}
