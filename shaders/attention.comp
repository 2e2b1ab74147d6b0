#version 450
// Tree-masked attention with GQA and online softmax (DESIGN.md §2).
//
// N query rows (tree nodes, or a chain of prompt tokens) attend to the committed cache slots
// [0, t) and to the tree nodes' own cache rows at slots t + j for the ancestors j of the row
// (bit j of mask row i; j == i included). q(N, H, D) → o(N, H, D); K/V caches (cap, Hkv, D).
//
// Keys are visited in *logical position* order: positions 0..t-1 are slots 0..t-1, position
// t + e is the row's ancestor at depth e (the e-th set mask bit, since parents come first).
// With a sliding window W, a row at position p sees positions p - W + 1 .. p only.
// Chunks of WG positions are reduced in a fixed order, so a node's output is bit-identical to
// the output one-token decoding computes at the same position: speculative decoding stays exact.
//
// One workgroup per (row, head). Per chunk: each lane scores one key, the workgroup takes the
// chunk max and sum, then lanes (over d) accumulate p_j * v_j in key order.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint DMAX = 256;      // max head width
layout(constant_id = 2) const uint MAX_DEPTH = 64;  // max tree depth + 1 (chain rows: see CAUSAL)
#include "reduce.glsl"

#include "pair.glsl"
layout(set = 0, binding = 0, std430) readonly buffer Q { float qin[]; } PAIRED(Q_);
#define qin PAIR_AT(Q_).qin
#ifdef KV_F16
// f16 cache: value pairs packed in u32 words (packHalf2x16, low half = even value).
layout(set = 0, binding = 1, std430) readonly buffer KC { uint kc[]; } PAIRED(KC_);
#define kc PAIR_AT(KC_).kc
layout(set = 0, binding = 2, std430) readonly buffer VC { uint vc[]; } PAIRED(VC_);
#define vc PAIR_AT(VC_).vc
float k_at(uint e) { return unpackHalf2x16(kc[e >> 1])[e & 1u]; }
float v_at(uint e) { return unpackHalf2x16(vc[e >> 1])[e & 1u]; }
#else
layout(set = 0, binding = 1, std430) readonly buffer KC { float kc[]; } PAIRED(KC_);
#define kc PAIR_AT(KC_).kc
layout(set = 0, binding = 2, std430) readonly buffer VC { float vc[]; } PAIRED(VC_);
#define vc PAIR_AT(VC_).vc
float k_at(uint e) { return kc[e]; }
float v_at(uint e) { return vc[e]; }
#endif
layout(set = 0, binding = 3, std430) readonly buffer M { uint mask[]; } PAIRED(M_);  // (N, mask_words)
#define mask PAIR_AT(M_).mask
layout(set = 0, binding = 4, std430) writeonly buffer O { float o[]; } PAIRED(O_);
#define o PAIR_AT(O_).o
#define DYN_BINDING 5
#include "dyn.glsl"
layout(push_constant) uniform Push {
  uint N, H, Hkv, D;
  uint t;            // committed cache length
  uint q_offset, q_stride, o_offset, o_stride;
  uint mask_offset;  // first u32 of the mask
  uint mask_words;   // u32 words per mask row
  uint causal;       // 1: rows are a chain (row i's ancestors are rows 0..i); mask unused
  float scale;       // 1/sqrt(D)
  uint t_slot;       // t is dynamic: t + state[t_slot] (dyn.glsl)
  uint k_base, v_base;  // the layer's first K / V value in its buffer
  uint window;          // sliding window: a row sees the last `window` positions up to its own; 0 = all
  uint q_row, q_row_slot;  // row i's q is q row q_row + i (dynamic: a head's ingest attends for one row)
} pc;
uint t_ctx;  // the committed length this dispatch sees: dyn(pc.t, pc.t_slot)

shared float qs[DMAX];
shared float ps[WG];
shared uint anc[MAX_DEPTH];
shared uint n_anc;

void main() {
  t_ctx = dyn(pc.t, pc.t_slot);
  const uint i = gl_WorkGroupID.x, h = gl_WorkGroupID.y, lid = gl_LocalInvocationID.x;
  const uint hk = h / (pc.H / pc.Hkv);
  const uint row_stride = pc.Hkv * pc.D;

  const uint q0 = pc.q_offset + (dyn(pc.q_row, pc.q_row_slot) + i) * pc.q_stride + h * pc.D;
  for (uint d = lid; d < pc.D; d += WG) qs[d] = qin[q0 + d];
  if (lid == 0 && pc.causal == 0) {
    uint n = 0;
    for (uint w = 0; w < pc.mask_words; ++w) {
      uint bits = mask[pc.mask_offset + i * pc.mask_words + w];
      while (bits != 0u && n < MAX_DEPTH) {
        const int b = findLSB(bits);
        anc[n++] = w * 32 + uint(b);
        bits &= bits - 1u;
      }
    }
    n_anc = n;
  }
  barrier();
  const uint n_tree = pc.causal != 0 ? i + 1 : n_anc;
  const uint n_keys = t_ctx + n_tree;
  // The row's own position is n_keys - 1; a sliding window starts the walk at the first key it
  // sees, so chunks (and their reduction order) are still fixed by the row's position alone.
  const uint first = pc.window != 0 && n_keys > pc.window ? n_keys - pc.window : 0;

  float m = -1.0 / 0.0, l = 0.0;
  // Each lane owns output dims d = lid, lid + WG, ... (at most DMAX / WG of them).
  const uint DPL = (DMAX + WG - 1) / WG;
  float acc[(DMAX + WG - 1) / WG];
  for (uint r = 0; r < DPL; ++r) acc[r] = 0.0;

  for (uint base = first; base < n_keys; base += WG) {
    const uint pos = base + lid;
    float s = -1.0 / 0.0;
    if (pos < n_keys) {
      const uint slot = pos < t_ctx ? pos : t_ctx + (pc.causal != 0 ? pos - t_ctx : anc[pos - t_ctx]);
      const uint ko = pc.k_base + slot * row_stride + hk * pc.D;
      float dotv = 0.0;
      for (uint d = 0; d < pc.D; ++d) dotv += qs[d] * k_at(ko + d);
      s = dotv * pc.scale;
    }
    const float m_new = max(m, wg_max(s));
    const float p = pos < n_keys ? exp(s - m_new) : 0.0;
    const float corr = exp(m - m_new);  // 0 on the first chunk (m = -inf)
    l = l * corr + wg_sum(p);
    ps[lid] = p;
    barrier();
    const uint cnt = min(WG, n_keys - base);
    for (uint r = 0; r < DPL; ++r) {
      const uint d = lid + r * WG;
      if (d >= pc.D) break;
      float a = acc[r] * corr;
      for (uint j = 0; j < cnt; ++j) {
        const uint pj = base + j;
        const uint slot = pj < t_ctx ? pj : t_ctx + (pc.causal != 0 ? pj - t_ctx : anc[pj - t_ctx]);
        a += ps[j] * v_at(pc.v_base + slot * row_stride + hk * pc.D + d);
      }
      acc[r] = a;
    }
    m = m_new;
    barrier();
  }
  const float inv = 1.0 / l;
  for (uint r = 0; r < DPL; ++r) {
    const uint d = lid + r * WG;
    if (d < pc.D) o[pc.o_offset + i * pc.o_stride + h * pc.D + d] = acc[r] * inv;
  }
}
