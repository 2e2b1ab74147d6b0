#version 450
// Top-k (k <= kTopkMax, k <= V) of each row of logits x(T, V), with log-softmax scores:
//   ids(T, k), logp(T, k) in the ranking order of order.glsl (value desc, index asc, NaN last).
// k rounds of a workgroup arg-max, each restricted to entries ranked strictly after the
// previous pick — no per-element state, deterministic.
// log-softmax: m = the first pick's value (the maximum in the order), lse = m + log sum exp(x - m)
// over the non-NaN entries: a NaN logit has probability 0 and does not poison the others' scores
// (its own logp is NaN, which ranks last in every tree kernel).
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
#include "reduce.glsl"
#include "pair.glsl"
layout(set = 0, binding = 0, std430) readonly buffer X { float xin[]; } PAIRED(X_);
#define xin PAIR_AT(X_).xin
layout(set = 0, binding = 1, std430) writeonly buffer Ids { uint ids[]; } PAIRED(Ids_);
#define ids PAIR_AT(Ids_).ids
layout(set = 0, binding = 2, std430) writeonly buffer Lp { float logp[]; } PAIRED(Lp_);
#define logp PAIR_AT(Lp_).logp
layout(push_constant) uniform Push { uint V, k, x_offset, x_stride, o_offset, o_stride; } pc;

// The best entry ranked strictly after (prev_v, prev_i), or the best of all when `first`.
uint pick(uint xo, bool first, float prev_v, uint prev_i, out float bv) {
  const uint lid = gl_LocalInvocationID.x;
  float best = 0.0;
  uint bi = 0xffffffffu;
  for (uint i = lid; i < pc.V; i += WG) {
    const float v = xin[xo + i];
    const bool after = first || ranks_before(prev_v, prev_i, v, i);
    if (after && (bi == 0xffffffffu || order_key(v) > order_key(best))) { best = v; bi = i; }
  }
  return wg_argmax(best, bi, bv);
}

void main() {
  const uint row = gl_WorkGroupID.x, lid = gl_LocalInvocationID.x;
  const uint xo = pc.x_offset + row * pc.x_stride, oo = pc.o_offset + row * pc.o_stride;
  float v;
  uint w = pick(xo, true, 0.0, 0u, v);
  const float m = v;
  float s = 0.0;
  for (uint i = lid; i < pc.V; i += WG) {
    const float y = xin[xo + i];
    if (!is_nan_bits(y)) s += exp(y - m);
  }
  const float lse = m + log(wg_sum(s));
  for (uint r = 0; r < pc.k; ++r) {
    if (r > 0) {
      float nv;
      w = pick(xo, false, v, w, nv);
      v = nv;
    }
    if (lid == 0) {
      ids[oo + r] = w;
      logp[oo + r] = v - lse;
    }
  }
}
