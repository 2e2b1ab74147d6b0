#version 450
#extension GL_EXT_control_flow_attributes : require
// sample_probs: the decoding operator G (include/vkspec/sample.hpp), one workgroup per tree node.
//   p(N, V) = renorm(min_p(top_p(top_k(penalty(logits) / T))))
// The row of p doubles as scratch: first the penalised, tempered logits y, then the result.
// Truncation thresholds are found by radix descent on a total order of (y desc, id asc), one
// workgroup reduction per bit, so no sort and no per-element state; every sum has a fixed order
// (WG is fixed on the host), so the row is the same whatever the device or the batch.
// Non-finite logits (a broken verifier): the order is order.glsl's (NaN last); a NaN logit has
// probability 0, and when the row's maximum is +inf (or -inf) the tokens at it share the mass
// equally — see weight(). A row of only NaN is uniform. So p is always a distribution; such a
// row is also marked in `nonfinite`, and sample_accept takes no token from it.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
#include "reduce.glsl"
// Entries of a row per lane and pass of the row loops. Some drivers end a shader's loops after a
// fixed budget of passes (DeviceCaps::Quirks::loop_iteration_limit; 65535 on lavapipe), and the
// radix descents make ~100 passes over the row: at one entry a pass the budget ran out from
// V ~ 40k on and the kernel returned garbage. Unrolled, a lane still visits i = lid, lid + WG, ...
// in that order, so every sum is the one it was. The host (sample.cpp) refuses a V past the
// budget even so.
const uint VU = 32;
#include "vkspec/tree_limits.h"
layout(set = 0, binding = 0, std430) readonly buffer X { float x[]; };        // (N, V) logits
layout(set = 0, binding = 1, std430) coherent buffer P { float p[]; };        // (N, V) out
layout(set = 0, binding = 2, std430) readonly buffer Seq { uint seq_tokens[]; };  // y[0..t]
layout(set = 0, binding = 3, std430) readonly buffer Tok { uint token[]; };   // tree
layout(set = 0, binding = 4, std430) readonly buffer Par { int parent[]; };   // tree
layout(set = 0, binding = 5, std430) writeonly buffer Bad { uint nonfinite[]; };  // tree: (N)
#define DYN_BINDING 6
#include "dyn.glsl"
layout(push_constant) uniform Push {
  uint V, x_offset, x_stride, p_offset, p_stride;
  uint t, W, top_k, greedy;
  float temp, top_p, min_p, penalty;
  uint t_slot;
  // kDynFixed: the four values above; else the step state's words params_slot .. + 3
  // (vkspec/step_state.h: kStateSampling), which the host sets with each prompt.
  uint params_slot;
} pc;
float TEMP, TOP_P, MIN_P, PENALTY;  // main() sets them

const uint WMAX = 1024, DMAX = kTreeMaxPath;
shared uint win[WMAX];
shared uint n_win;

// Orderable bits of a float: the ranking key of order.glsl (NaN lowest, then -inf; -0 == +0).
uint ord(float f) { return order_key(f); }

// Weight of y against the row's maximum m (in the order): exp(y - m), except 1 at the maximum
// itself (no inf - inf when m is +-inf: the tokens at an infinite maximum share the mass) and 0
// for NaN (unless m is NaN too, i.e. the whole row is NaN: then every token weighs 1).
float weight(float y, float m) {
  if (order_key(y) == order_key(m)) return 1.0;
  if (is_nan_bits(y)) return 0.0;
  return exp(y - m);
}

// The row's first-ranked entry (value desc, id asc): its id, and its value in `best`.
uint row_argmax(uint yo, out float best) {
  const uint lid = gl_LocalInvocationID.x;
  float b = 0.0;
  uint bi = 0xffffffffu;
  for (uint i0 = lid; i0 < pc.V; i0 += VU * WG) [[unroll]] for (uint u = 0; u < VU; ++u) {
    const uint i = i0 + u * WG;
    if (i < pc.V) {
      const float y = p[yo + i];
      if (bi == 0xffffffffu || order_key(y) > order_key(b)) { b = y; bi = i; }  // i ascends
    }
  }
  return wg_argmax(b, bi, best);
}

// Radix descent for the largest key K = (kv, ki) with  sum_{i kept, key(i) >= K} w(i) >= target,
// key(i) = (ord(y_i), IMASK - i): equal values rank the lower id higher. `mode` 0: w = 1 over
// tokens kept so far; 1: w = exp(y - m) over them. Returns K; callers keep key(i) >= K.
uint IMASK, IBITS;
uvec2 KK = uvec2(0u, 0u);  // top-k threshold (0, 0 keeps everything)

bool key_ge(uint o, uint i, uvec2 K) { return o > K.x || (o == K.x && (IMASK - i) >= K.y); }

uvec2 descend(uint yo, uint mode, float m, float target) {
  const uint lid = gl_LocalInvocationID.x;
  uint kv = 0;
  for (int b = 31; b >= 0; --b) {
    const uint c = kv | (1u << b);
    float s = 0.0;
    for (uint i0 = lid; i0 < pc.V; i0 += VU * WG) [[unroll]] for (uint u = 0; u < VU; ++u) {
      const uint i = i0 + u * WG;
      if (i < pc.V) {
        const float y = p[yo + i];
        if (ord(y) >= c && key_ge(ord(y), i, KK)) s += mode == 0 ? 1.0 : weight(y, m);
      }
    }
    if (wg_sum(s) >= target) kv = c;
  }
  uint ki = 0;
  for (int b = int(IBITS) - 1; b >= 0; --b) {
    const uint c = ki | (1u << b);
    float s = 0.0;
    for (uint i0 = lid; i0 < pc.V; i0 += VU * WG) [[unroll]] for (uint u = 0; u < VU; ++u) {
      const uint i = i0 + u * WG;
      if (i < pc.V) {
        const float y = p[yo + i];
        const uint o = ord(y);
        if ((o > kv || (o == kv && (IMASK - i) >= c)) && key_ge(o, i, KK)) s += mode == 0 ? 1.0 : weight(y, m);
      }
    }
    if (wg_sum(s) >= target) ki = c;
  }
  return uvec2(kv, ki);
}

void main() {
  const uint row = gl_WorkGroupID.x, lid = gl_LocalInvocationID.x;
  const uint xo = pc.x_offset + row * pc.x_stride, yo = pc.p_offset + row * pc.p_stride;
  IBITS = 0;
  while ((1u << IBITS) < pc.V) ++IBITS;
  IMASK = IBITS == 32 ? 0xffffffffu : (1u << IBITS) - 1u;
  TEMP = pc.temp, TOP_P = pc.top_p, MIN_P = pc.min_p, PENALTY = pc.penalty;
  if (pc.params_slot != kDynFixed) {  // (a branch, not a select: no load past the state buffer)
    TEMP = uintBitsToFloat(dyn_state[pc.params_slot]);
    TOP_P = uintBitsToFloat(dyn_state[pc.params_slot + 1]);
    MIN_P = uintBitsToFloat(dyn_state[pc.params_slot + 2]);
    PENALTY = uintBitsToFloat(dyn_state[pc.params_slot + 3]);
  }

  // Penalty window: the last W tokens of y[0..t] ++ (ancestors of this node below the root, node).
  if (lid == 0) {
    uint path[DMAX];
    uint d = 0;
    for (int j = int(row); j > 0 && d < DMAX; j = parent[j]) path[d++] = token[j];  // deepest first
    const uint from_path = min(d, pc.W);
    uint n = 0;
    for (uint k = 0; k < from_path; ++k) win[n++] = path[k];
    const uint rest = pc.W - from_path;
    const uint t = dyn(pc.t, pc.t_slot);
    for (uint k = 0; k < rest && k <= t; ++k) win[n++] = seq_tokens[t - k];
    n_win = PENALTY == 1.0 ? 0u : n;
  }
  bool bad = false;
  for (uint i0 = lid; i0 < pc.V; i0 += VU * WG) [[unroll]] for (uint u = 0; u < VU; ++u) {
    const uint i = i0 + u * WG;
    if (i < pc.V) {
      const float l = x[xo + i];
      bad = bad || is_nonfinite_bits(l);
      p[yo + i] = l;
    }
  }
  // Whether the row's logits hold NaN or ±inf, for sample_accept: it emits nothing drawn from
  // such a row (the row below still gets its distribution).
  const uint row_bad = wg_max_u(bad ? 1u : 0u);
  if (lid == 0) nonfinite[row] = row_bad;
  memoryBarrierShared();
  memoryBarrierBuffer();
  barrier();
  // Each distinct window token is penalised once, by the invocation holding its first occurrence.
  for (uint k = lid; k < n_win; k += WG) {
    const uint v = win[k];
    bool first = v < pc.V;
    // (unrolled for the same budget: a window of 1024 took ~8k passes one entry at a time)
    for (uint j0 = 0; j0 < k && first; j0 += 16) [[unroll]] for (uint u = 0; u < 16; ++u) {
      if (j0 + u < k) first = first && win[j0 + u] != v;
    }
    if (first) {
      const float l = x[xo + v];
      p[yo + v] = l > 0.0 ? l / PENALTY : l * PENALTY;
    }
  }
  memoryBarrierBuffer();
  barrier();

  float m0;
  const uint w = row_argmax(yo, m0);
  if (pc.greedy != 0) {  // T == 0: one-hot at the arg-max of the penalised logits
    for (uint i0 = lid; i0 < pc.V; i0 += VU * WG) [[unroll]] for (uint u = 0; u < VU; ++u) {
      const uint i = i0 + u * WG;
      if (i < pc.V) p[yo + i] = i == w ? 1.0 : 0.0;
    }
    return;
  }

  // Shifted by the row's maximum before the division: l / T overflowed to ±inf for a temperature
  // near the float minimum (1e-38), and inf - inf made the weights NaN (near-uniform sampling);
  // (l - max) / T is at most 0, and -inf at worst: a weight of 0. An infinite or NaN maximum is
  // left unshifted (weight() gives the tokens at an infinite maximum the mass).
  const float shift = (floatBitsToUint(m0) & 0x7f800000u) == 0x7f800000u ? 0.0 : m0;  // bits: no fast-math
  for (uint i0 = lid; i0 < pc.V; i0 += VU * WG) [[unroll]] for (uint u = 0; u < VU; ++u) {
    const uint i = i0 + u * WG;
    if (i < pc.V) p[yo + i] = (p[yo + i] - shift) / TEMP;
  }
  // (each invocation reads back only the entries it wrote: no barrier needed)
  float m;
  row_argmax(yo, m);

  if (pc.top_k != 0 && pc.top_k < pc.V) KK = descend(yo, 0u, m, float(pc.top_k));
  uvec2 KP = uvec2(0u, 0u);
  if (TOP_P < 1.0) {
    float z = 0.0;
    for (uint i0 = lid; i0 < pc.V; i0 += VU * WG) [[unroll]] for (uint u = 0; u < VU; ++u) {
      const uint i = i0 + u * WG;
      if (i < pc.V) {
        const float y = p[yo + i];
        if (key_ge(ord(y), i, KK)) z += weight(y, m);
      }
    }
    KP = descend(yo, 1u, m, TOP_P * wg_sum(z));
  }
  // min-p: exp(y - m) = p / p_max; the maximum survives top-k and top-p, so order does not matter.
  float z = 0.0;
  for (uint i0 = lid; i0 < pc.V; i0 += VU * WG) [[unroll]] for (uint u = 0; u < VU; ++u) {
    const uint i = i0 + u * WG;
    if (i < pc.V) {
      const float y = p[yo + i];
      const float e = weight(y, m);
      if (key_ge(ord(y), i, KK) && key_ge(ord(y), i, KP) && e >= MIN_P) z += e;
    }
  }
  const float inv = 1.0 / wg_sum(z);
  for (uint i0 = lid; i0 < pc.V; i0 += VU * WG) [[unroll]] for (uint u = 0; u < VU; ++u) {
    const uint i = i0 + u * WG;
    if (i < pc.V) {
      const float y = p[yo + i];
      const float e = weight(y, m);
      p[yo + i] = key_ge(ord(y), i, KK) && key_ge(ord(y), i, KP) && e >= MIN_P ? e * inv : 0.0;
    }
  }
}
