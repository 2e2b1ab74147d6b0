// The arg-max of one row of logits, xin[xo .. xo + V), in the ranking order of order.glsl: ties to
// the lower index, NaN last (it wins only when the whole row is NaN, and then index 0 does).
// A row with any NaN or ±inf entry (a verifier whose arithmetic overflowed) comes back with
// kTokenNonFinite (step_state.h) set on the index: such a row has no arg-max a caller may emit.
// Whole-workgroup (barriers); shared by argmax.comp, step_advance.comp and tree_argmax_accept.comp;
// needs reduce.glsl and the name xin.
#ifndef VKSPEC_ARGMAX_ROW_GLSL
#define VKSPEC_ARGMAX_ROW_GLSL
#include "vkspec/step_state.h"
shared uint argmax_row_nonfinite;
uint argmax_row(uint xo, uint V) {
  const uint lid = gl_LocalInvocationID.x;
  barrier();  // a previous call's readers are done with the flag
  if (lid == 0) argmax_row_nonfinite = 0u;
  barrier();
  float best = 0.0;
  uint bi = 0xffffffffu;  // no candidate yet (an invocation past V keeps it)
  bool bad = false;
  for (uint i = lid; i < V; i += WG) {
    const float v = xin[xo + i];
    bad = bad || is_nonfinite_bits(v);
    // i ascends, so among equal keys the first one seen stays
    if (bi == 0xffffffffu || order_key(v) > order_key(best)) { best = v; bi = i; }
  }
  if (bad) atomicOr(argmax_row_nonfinite, 1u);
  float m;
  const uint r = wg_argmax(best, bi, m);  // (its barriers make the flag visible)
  return argmax_row_nonfinite != 0u ? r | kTokenNonFinite : r;
}
#endif
