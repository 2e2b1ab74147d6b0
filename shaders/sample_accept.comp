#version 450
#extension GL_EXT_control_flow_attributes : require
// sample_accept: tree rejection sampling (DESIGN.md §3, seed 000 §6.2, seed 001 §6.2), one
// workgroup per independent trial (the engine runs one; tests run thousands over one tree).
//
// Exactness, for drafts fixed before the step's random numbers are drawn: trying distinct tokens
// x1, x2, ... in turn, accepting x_j with probability p(x_j) / (1 - p(x_1) - ... - p(x_{j-1}))
// and, if all fail, drawing from p with the tried tokens removed, emits x with probability
// exactly p(x) (induction on the tries). So duplicates must not be tried twice: a token already
// rejected at this level has p = 0 and is skipped. Nodes with the same token path (a merged
// tree repeats tokens under the root) share one context, so after accepting x the walk continues
// from all of them at once; p comes from the lowest-index one.
//
// A node whose logits row held NaN or ±inf (nonfinite[], from sample_probs) ends the walk there
// and its draw is flagged kTokenNonFinite: nothing is taken from a broken verifier's row.
//
// Invocation 0 walks (the walk is sequential: a try depends on the previous outcome); the final
// draw from what is left is a workgroup-wide inverse CDF in index order.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
#include "philox.glsl"
#include "vkspec/tree_limits.h"
#include "vkspec/step_state.h"
layout(set = 0, binding = 0, std430) readonly buffer Tok { uint token[]; };
layout(set = 0, binding = 1, std430) readonly buffer Par { int parent[]; };
layout(set = 0, binding = 2, std430) readonly buffer Head { uint head[]; };
layout(set = 0, binding = 3, std430) readonly buffer P { float p[]; };       // (n, V)
layout(set = 0, binding = 4, std430) writeonly buffer Info { uint info[]; }; // (trials, 16)
layout(set = 0, binding = 5, std430) writeonly buffer Acc { uint accepted[]; };  // (trials, A)
layout(set = 0, binding = 6, std430) readonly buffer Bad { uint nonfinite[]; };   // (n): from sample_probs
#define DYN_BINDING 7
#include "dyn.glsl"
layout(push_constant) uniform Push {
  uint n, V, p_offset, p_stride, A, step, seed_lo, seed_hi, step_slot;
  uint seed_slot;  // kDynFixed: seed_lo, seed_hi; else the step state's words seed_slot, seed_slot + 1
} pc;

const uint NMAX = kTreeMaxNodes;  // n <= NMAX (host asserts)
shared uint level[NMAX];     // level[j] = e + 1 while node j is on the accepted path at depth e
shared uint rejected[NMAX];  // tokens rejected at the current level
shared uint n_rej, rep, depth_e, last_try;
shared float partial[WG];
shared uint last_mass[WG];  // per chunk: the last token with mass left, 0xffffffff if none

// During the walk `rejected` grows one token at a time: a plain scan (the walk is short).
bool is_rejected_walk(uint v) {
  for (uint k = 0; k < n_rej; ++k)
    if (rejected[k] == v) return true;
  return false;
}

// Over the vocabulary, `rejected` is sorted and searched without a loop pass (an unrolled
// bisection). Some drivers end a shader's loops after a fixed budget of passes
// (DeviceCaps::Quirks::loop_iteration_limit); a scan per token made V * n_rej passes, past the
// budget for a 152k vocabulary, and the draw came out wrong.
bool is_rejected(uint v) {
  if (n_rej == 0) return false;
  uint base = 0, len = n_rej;
  [[unroll]] for (uint s = 0; s < 10; ++s) {  // 2^10 > NMAX >= n_rej
    const uint h = len / 2;
    if (rejected[base + h] <= v) base += h;
    len -= h;
  }
  return rejected[base] == v;
}

void main() {
  const uint step = dyn(pc.step, pc.step_slot);
  const uint b = gl_WorkGroupID.x, lid = gl_LocalInvocationID.x;
  uvec2 seed = uvec2(pc.seed_lo, pc.seed_hi);
  if (pc.seed_slot != kDynFixed) seed = uvec2(dyn_state[pc.seed_slot], dyn_state[pc.seed_slot + 1]);
  for (uint j = lid; j < pc.n; j += WG) level[j] = 0;
  barrier();
  if (lid == 0) {
    level[0] = 1;
    uint e = 0, r = 0;
    accepted[b * pc.A] = 0;
    for (;;) {
      const uint po = pc.p_offset + r * pc.p_stride;
      float gone = 0.0;  // mass of the tokens rejected at this level
      n_rej = 0;
      if (nonfinite[r] != 0u) break;  // no child may be accepted from a non-finite row
      int hit = -1;
      for (uint j = r + 1; j < pc.n; ++j) {
        if (level[uint(parent[j])] != e + 1) continue;
        const uint x = token[j];
        if (x >= pc.V || is_rejected_walk(x)) continue;  // p(x) = 0 now: rejected, no draw needed
        const float px = p[po + x];
        const float u = philox_uniform(seed, step + e, j, b);
        // accept with probability p(x) / (1 - gone), without dividing
        if (u * (1.0 - gone) < px) { hit = int(j); break; }
        rejected[n_rej++] = x;
        last_try = x;
        gone += px;
      }
      if (hit < 0) break;  // depth < A: a tree of max_depth has no child below depth A - 1
      const uint x = token[hit];
      for (uint j = uint(hit); j < pc.n; ++j)
        if (level[uint(parent[j])] == e + 1 && token[j] == x) level[j] = e + 2;
      ++e;
      r = uint(hit);
      accepted[b * pc.A + e] = r;
    }
    rep = r;
    depth_e = e;
    // Sort the rejected tokens for is_rejected's bisection (insertion sort: n_rej is at most the
    // children of one node, a few dozen).
    for (uint k = 1; k < n_rej; ++k) {
      const uint v = rejected[k];
      uint j = k;
      for (; j > 0 && rejected[j - 1] > v; --j) rejected[j] = rejected[j - 1];
      rejected[j] = v;
    }
  }
  barrier();
  // The next root: inverse CDF over p(rep) with the rejected tokens removed, in index order.
  // Each invocation sums one contiguous chunk, invocation 0 walks the chunk sums then its chunk.
  const uint po = pc.p_offset + rep * pc.p_stride;
  const uint chunk = (pc.V + WG - 1) / WG;
  const uint lo = min(lid * chunk, pc.V), hi = min(lo + chunk, pc.V);
  float s = 0.0;
  uint lm = 0xffffffffu;
  for (uint i = lo; i < hi; ++i) {
    const float q = p[po + i];
    if (q > 0.0 && !is_rejected(i)) {  // (adding a zero would change nothing)
      s += q;
      lm = i;
    }
  }
  partial[lid] = s;
  last_mass[lid] = lm;
  barrier();
  if (lid == 0) {
    const uint e = depth_e;
    float total = 0.0;
    for (uint k = 0; k < WG; ++k) total += partial[k];
    const float target = philox_uniform(seed, step + e, 0u, b) * total;
    uint next = 0xffffffffu, last_pos = 0xffffffffu;
    float acc = 0.0;
    for (uint k = 0; k < WG && next == 0xffffffffu; ++k) {
      if (partial[k] > 0.0 && target < acc + partial[k]) {
        const uint klo = min(k * chunk, pc.V), khi = min(klo + chunk, pc.V);
        for (uint i = klo; i < khi; ++i) {
          const float q = is_rejected(i) ? 0.0 : p[po + i];
          if (q > 0.0) {
            last_pos = i;
            acc += q;
            if (target < acc) { next = i; break; }
          }
        }
      } else {
        acc += partial[k];
        if (last_mass[k] != 0xffffffffu) last_pos = last_mass[k];  // for the rounding guard
      }
    }
    // Rounding guards (probability ~2^-24 or less): target at the very top of the mass -> the
    // last token with mass; no mass left at all -> the last rejected token.
    if (next == 0xffffffffu) next = last_pos != 0xffffffffu ? last_pos : (n_rej > 0 ? last_try : 0u);
    uint hd = 0;
    if (e > 0)
      for (uint j = rep; j < pc.n; ++j)
        if (level[j] == e + 1) hd |= head[j];
    // The walk stopped at a row whose logits were not finite: its draw is no token (advance.glsl).
    if (nonfinite[rep] != 0u) next |= kTokenNonFinite;
    const uint io = b * kTreeInfoWords;
    info[io + kInfoAccepted] = e;
    info[io + kInfoBestRow] = 0;  // not tracked (the path is in `accepted`)
    info[io + kInfoNextRoot] = next;
    info[io + kInfoBestHead] = hd;
  }
}
