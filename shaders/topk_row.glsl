// The body of topk.comp, shared with tree_topk_expand.comp: the top-k (k <= kTopkMax, k <= V) of
// one row of logits with log-softmax scores, in the ranking order of order.glsl (value desc,
// index asc, NaN last). k rounds of a workgroup arg-max, each restricted to entries ranked
// strictly after the previous pick: no per-element state, deterministic.
// log-softmax: m = the first pick's value (the maximum in the order), lse = m + log sum exp(x - m)
// over the non-NaN entries: a NaN logit has probability 0 and does not poison the others' scores
// (its own logp is NaN, which ranks last in every tree kernel).
// Needs reduce.glsl and the names xin (logits), ids and logp; invocation 0 writes the row.
#ifndef VKSPEC_TOPK_ROW_GLSL
#define VKSPEC_TOPK_ROW_GLSL

// The best entry of row xo ranked strictly after (prev_v, prev_i), or the best of all when `first`.
uint topk_pick(uint xo, uint V, bool first, float prev_v, uint prev_i, out float bv) {
  const uint lid = gl_LocalInvocationID.x;
  float best = 0.0;
  uint bi = 0xffffffffu;
  for (uint i = lid; i < V; i += WG) {
    const float v = xin[xo + i];
    const bool after = first || ranks_before(prev_v, prev_i, v, i);
    if (after && (bi == 0xffffffffu || order_key(v) > order_key(best))) { best = v; bi = i; }
  }
  return wg_argmax(best, bi, bv);
}

// Logits xin[xo .. xo + V) -> ids[oo .. oo + k), logp[oo .. oo + k).
void topk_row(uint xo, uint oo, uint V, uint k) {
  const uint lid = gl_LocalInvocationID.x;
  float v;
  uint w = topk_pick(xo, V, true, 0.0, 0u, v);
  const float m = v;
  float s = 0.0;
  for (uint i = lid; i < V; i += WG) {
    const float y = xin[xo + i];
    if (!is_nan_bits(y)) s += exp(y - m);
  }
  const float lse = m + log(wg_sum(s));
  for (uint r = 0; r < k; ++r) {
    if (r > 0) {
      float nv;
      w = topk_pick(xo, V, false, v, w, nv);
      v = nv;
    }
    if (lid == 0) {
      ids[oo + r] = w;
      logp[oo + r] = v - lse;
    }
  }
}
#endif
