// The arg-max of one row of logits, xin[xo .. xo + V), in the ranking order of order.glsl: ties to
// the lower index, NaN last (it wins only when the whole row is NaN, and then index 0 does).
// Shared by argmax.comp and tree_argmax_accept.comp; needs reduce.glsl and the name xin.
#ifndef VKSPEC_ARGMAX_ROW_GLSL
#define VKSPEC_ARGMAX_ROW_GLSL
uint argmax_row(uint xo, uint V) {
  const uint lid = gl_LocalInvocationID.x;
  float best = 0.0;
  uint bi = 0xffffffffu;  // no candidate yet (an invocation past V keeps it)
  for (uint i = lid; i < V; i += WG) {
    const float v = xin[xo + i];
    // i ascends, so among equal keys the first one seen stays
    if (bi == 0xffffffffu || order_key(v) > order_key(best)) { best = v; bi = i; }
  }
  float m;
  return wg_argmax(best, bi, m);
}
#endif
