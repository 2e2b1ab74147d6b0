// The one ranking order of every kernel that ranks scores or logits (argmax, topk, sample_*,
// tree_expand / select / trie / route): value descending, then lower index first, where
//   +inf > finite > -inf > NaN,   -0 == +0,   all NaNs equal.
// It is a total order on (value, index), so ranks computed by counting "how many rank before
// me" are always a permutation, whatever NaN or Inf a broken head or verifier produces; a NaN
// never wins unless every candidate is NaN. Comparisons on floats cannot give that (every
// comparison with NaN is false), so ranking goes through integer keys. NaN is recognised from
// its bits, not isnan(), so no fast-math assumption of a compiler can remove the test.
// tests/ mirror it (order_key in tests/tree_order.hpp).
#ifndef VKSPEC_ORDER_GLSL
#define VKSPEC_ORDER_GLSL

// key(a) > key(b) iff a ranks before b (ties: equal keys, decided by index).
uint order_key(float x) {
  uint b = floatBitsToUint(x);
  const uint mag = b & 0x7fffffffu;
  if (mag > 0x7f800000u) return 0u;  // NaN: below everything
  if (mag == 0u) b = 0u;             // -0 ranks as +0
  return (b & 0x80000000u) != 0u ? ~b : (b | 0x80000000u);  // -inf -> 0x007fffff > 0
}

bool is_nan_bits(float x) { return (floatBitsToUint(x) & 0x7fffffffu) > 0x7f800000u; }
// NaN or ±inf, from the bits likewise.
bool is_nonfinite_bits(float x) { return (floatBitsToUint(x) & 0x7f800000u) == 0x7f800000u; }

// (a, ia) ranks strictly before (b, ib).
bool ranks_before(float a, uint ia, float b, uint ib) {
  const uint ka = order_key(a), kb = order_key(b);
  return ka > kb || (ka == kb && ia < ib);
}

// The larger of a and b in the order (NaN only if both are NaN); a on equal keys.
float order_max(float a, float b) { return order_key(b) > order_key(a) ? b : a; }

#endif
