#version 450
// Tree-masked attention for CPU-like devices: one subgroup per workgroup, no shared memory, no
// barrier (same contract as attention.comp; DESIGN.md §2). q(N, H, D) → o(N, H, D); K/V caches
// (cap, Hkv, D); the keys of row i are the committed slots [0, t) and the row's tree ancestors
// (mask bits, self included) at slots t + j, or with `causal` the chain rows t..t+i.
//
// Why this shape: on a CPU rasterizer a workgroup runs on one thread as SIMD lanes of the
// subgroup, so every barrier is a fiber switch per subgroup and a shared-memory reduction a
// serial walk. Here lane l owns the keys at logical positions l, l + S, l + 2S, ... and runs
// its own online softmax over them (running max, sum, and p-weighted V sum in registers: D is
// a specialization constant, so the loops unroll); the chunk loop has no cross-lane operation
// at all. The lanes are combined once at the end with subgroupMax / subgroupAdd. The HPW heads
// that share a KV head (a GQA group) run in one workgroup, and so do RQ query rows, so each K/V
// row is loaded once for all of them.
//
// Exactness (speculative decoding relies on it): position p always lands on lane p % S, each
// lane visits its keys in position order with the same op sequence, and the final fold is one
// fixed subgroup reduction. So a row's result depends only on its keys and their positions —
// never on N, on the other rows of the pass, or on tree vs chain. The host keeps S and HPW fixed
// for a model (never derived from N); RQ may follow N, since it changes which rows share a load,
// not any row's ops (the tests compare tree rows with one-token decoding bit for bit). Requires
// gl_NumSubgroups == 1 (host: workgroup size == subgroup size, pinned with required subgroup
// size when the device can).
//
// O_PROJ (a variant, ops/attention.cpp attention_folds_o): the projection of the attention
// output folded in, x += o_att · W_o^T into the residual stream o(N, C), one dispatch instead of
// two. Each workgroup keeps its heads' output in registers (every lane has all of it after the
// final subgroupAdd) and projects it through its own columns of W_o (C, H·D), whole 32-value
// blocks (the host folds only where HPW·D % 32 == 0 and D % 4 == 0), lane l taking rows
// 4l .. 4l + 3, 4(l + S) .. 4(l + S) + 3, ... It publishes that partial row in part(N, G, C4)
// (C4 = ceil(C / 4) vec4s: a storage access is a per-lane loop on CPU rasterizers, one per
// vector rather than one per float) for each of its rows and counts itself in arrivals[i0] (i0
// its first row); the rows' last workgroup adds the G partials to x in group order and sets the
// count back to 0 (tree_topk_expand.comp's single-pass pattern: no workgroup waits for another).
// Every sum runs in a fixed order, so a row's x still depends on nothing but its keys. For small
// models on CPU-like devices, where a dispatch costs more than a row's share of W_o.
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
#extension GL_KHR_shader_subgroup_shuffle : enable
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;             // S: the subgroup size
layout(constant_id = 1) const uint D = 32;  // head width (exact: loops unroll, accumulators stay in registers)
layout(constant_id = 2) const uint HPW = 1; // query heads per workgroup, a divisor of H / Hkv
// The group's q (HPW·D values every lane needs) loaded once per subgroup, lane l taking values
// l, l + S, ..., and handed to every lane by shuffles from a constant lane. A storage load is a
// per-lane loop on CPU rasterizers (lavapipe, Mesa 22.3), so loading each value in every lane
// was HPW·D such loops a workgroup, about a fifth of the kernel at the demo's shape (HPW·D = 64;
// docs/README.md, 2026-12-05). Off only in tests (the host takes this kernel only where the
// device has shuffles: the module declares them either way). Same values either way.
layout(constant_id = 3) const bool QSHUF = false;
// Query rows per workgroup (the host: 1 for one-token decoding and sliding windows). The rows
// walk their common keys (the committed slots of a tree pass) in one loop, each chunk's K and V
// loaded once for all of them, then each row its own last chunks. A row's own op sequence is the
// same whatever RQ is, so its bits are too; only the loads are shared. A row past N repeats row
// N - 1 and is not written.
layout(constant_id = 6) const uint RQ = 1;
const uint DV = (D + 3) / 4;                // vec4s per K/V/q row
const uint QL = (HPW * D + gl_WorkGroupSize.x - 1) / gl_WorkGroupSize.x;  // q values a lane loads

#include "pair.glsl"
layout(set = 0, binding = 0, std430) readonly buffer Q { float qin[]; } PAIRED(Q_);
#define qin PAIR_AT(Q_).qin
// load_k / load_v(e, c): values 4c .. 4c+3 of the K / V row beginning at value e, zero past D
// (a compile-time test once D is specialized, so full vec4s cost nothing extra).
#if defined(KV_TEXEL) && defined(KV_F16)
// f16 pairs through RGBA32UI texel views (8 values a texel; D % 8 == 0 and the bases are
// multiples of 8, so rows start on a texel): half a texel per vec4.
TEXEL_BINDING(1, k_tex)
TEXEL_BINDING(2, v_tex)
vec4 half4(uvec4 t, uint c) {
  const uvec2 w = (c & 1u) == 0u ? t.xy : t.zw;
  return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
}
vec4 load_k(uint e, uint c) { return half4(TEXEL_FETCH(k_tex, int(e / 8 + c / 2)), c); }
vec4 load_v(uint e, uint c) { return half4(TEXEL_FETCH(v_tex, int(e / 8 + c / 2)), c); }
#elif defined(KV_TEXEL)
// K/V through RGBA32UI texel views (D % 4 == 0, so rows start on a texel): on CPU rasterizers a
// texel fetch is one 16-byte gather per lane, a storage load a bounds-checked per-component loop.
TEXEL_BINDING(1, k_tex)
TEXEL_BINDING(2, v_tex)
vec4 load_k(uint e, uint c) { return uintBitsToFloat(TEXEL_FETCH(k_tex, int(e / 4 + c))); }
vec4 load_v(uint e, uint c) { return uintBitsToFloat(TEXEL_FETCH(v_tex, int(e / 4 + c))); }
#elif defined(KV_F16)
// f16 pairs in u32 words (D even, so a row starts on a word).
layout(set = 0, binding = 1, std430) readonly buffer KC { uint kc[]; } PAIRED(KC_);
#define kc PAIR_AT(KC_).kc
layout(set = 0, binding = 2, std430) readonly buffer VC { uint vc[]; } PAIRED(VC_);
#define vc PAIR_AT(VC_).vc
vec4 load_k(uint e, uint c) {
  const uint w = e / 2 + 2 * c;
  return vec4(unpackHalf2x16(kc[w]), 4 * c + 2 < D ? unpackHalf2x16(kc[w + 1]) : vec2(0.0));
}
vec4 load_v(uint e, uint c) {
  const uint w = e / 2 + 2 * c;
  return vec4(unpackHalf2x16(vc[w]), 4 * c + 2 < D ? unpackHalf2x16(vc[w + 1]) : vec2(0.0));
}
#else
layout(set = 0, binding = 1, std430) readonly buffer KC { float kc[]; } PAIRED(KC_);
#define kc PAIR_AT(KC_).kc
layout(set = 0, binding = 2, std430) readonly buffer VC { float vc[]; } PAIRED(VC_);
#define vc PAIR_AT(VC_).vc
vec4 load_k(uint e, uint c) {
  vec4 r = vec4(0.0);
  [[unroll]] for (uint x = 0; x < 4; ++x)
    if (4 * c + x < D) r[x] = kc[e + 4 * c + x];
  return r;
}
vec4 load_v(uint e, uint c) {
  vec4 r = vec4(0.0);
  [[unroll]] for (uint x = 0; x < 4; ++x)
    if (4 * c + x < D) r[x] = vc[e + 4 * c + x];
  return r;
}
#endif
layout(set = 0, binding = 3, std430) readonly buffer M { uint mask[]; } PAIRED(M_);  // (N, mask_words)
#define mask PAIR_AT(M_).mask
#ifdef O_PROJ
layout(set = 0, binding = 4, std430) buffer O { float o[]; } PAIRED(O_);  // the residual stream (N, C)
#else
layout(set = 0, binding = 4, std430) writeonly buffer O { float o[]; } PAIRED(O_);
#endif
#define o PAIR_AT(O_).o
#define DYN_BINDING 5
#include "dyn.glsl"
#ifdef O_PROJ
#define W_BINDING 6  // W_o and its q8_0 scales (weights.glsl)
#include "weights.glsl"
layout(set = 0, binding = 8, std430) coherent buffer Part { vec4 part[]; } PAIRED(Part_);  // (N, G, C4)
#define part PAIR_AT(Part_).part
layout(set = 0, binding = 9, std430) coherent buffer Arrivals { uint arrivals[]; } PAIRED(Arrivals_);  // (N,)
#define arrivals PAIR_AT(Arrivals_).arrivals
layout(constant_id = 4) const uint KB = 1;  // H·D / 32: blocks per W_o row
// The residual stream also as vec4s (the host sets it where C, o_offset and o_stride are
// multiples of 4): the last workgroup then adds to x a vector at a time.
layout(constant_id = 5) const bool O_VEC = false;
layout(set = 0, binding = 4, std430) buffer O4 { vec4 o4[]; } PAIRED(O4_);
#define o4 PAIR_AT(O4_).o4
const uint NBG = HPW * D / 32;              // blocks of one head group's columns
// The rows' output: values 4c .. 4c+3 of row r's head g at (r·HPW + g)·DV + c.
vec4 attv[RQ * HPW * DV];
shared bool last;
#endif
layout(push_constant) uniform Push {
  uint N, H, Hkv, Dp;  // Dp == D (the portable kernel reads it from here)
  uint t;              // committed cache length
  uint q_offset, q_stride, o_offset, o_stride;
  uint mask_offset;  // first u32 of the mask
  uint mask_words;   // u32 words per mask row
  uint causal;       // 1: rows are a chain (row i's keys at t.. are slots t..t+i); mask unused
  float scale;       // 1/sqrt(D)
  uint t_slot;       // t is dynamic: t + state[t_slot] (dyn.glsl)
  uint k_base, v_base;  // the layer's first K / V value in its buffer
  uint window;          // sliding window: a row sees the last `window` positions up to its own; 0 = all
  uint q_row, q_row_slot;  // row i's q is q row q_row + i (dynamic: a head's ingest attends for one row)
#ifdef O_PROJ
  uint C;  // W_o rows: the residual stream's width
  // Row i's residual is read from row i (res_q: q_row + i) of o's buffer from res_offset (o's
  // stride): o's own row with o_offset and res_q 0 (x += ...); a head's ingest row takes it from
  // the row the pass computed (DecoderLayerOutRow), which a copy_rows dispatch moved before.
  uint res_offset, res_q;
#endif
} pc;
uint t_ctx;  // the committed length this dispatch sees: dyn(pc.t, pc.t_slot)

// Cache slot of the row's tree key at depth e: its e-th set mask bit (parents come first, so
// bit order is depth order). Lanes differ in e; the loop is short (depth <= 64).
uint tree_slot(uint row, uint e) {
  const uint m0 = pc.mask_offset + row * pc.mask_words;
  for (uint w = 0; w < pc.mask_words; ++w) {
    uint bits = mask[m0 + w];
    const uint c = uint(bitCount(bits));
    if (e < c) {
      for (uint k = 0; k < e; ++k) bits &= bits - 1u;
      return t_ctx + w * 32 + uint(findLSB(bits));
    }
    e -= c;
  }
  return 0;  // not reached for e < popcount of the row
}

// The row's q, pre-scaled so a score is one dot product, and the lane's online softmax over the
// keys it owns: running max m, sum l and p-weighted V sum acc (registers: the sizes are constants).
// Row r's head g at r·HPW + g (qv, acc: times DV, plus c).
vec4 qv[RQ * HPW * DV];
float m[RQ * HPW], l[RQ * HPW];
vec4 acc[RQ * HPW * DV];

// The lane's key whose K/V row begins at value e (past the layer's base) joins the online softmax
// of rows r0 .. r1 - 1 (constants once the callers' loops unroll; an invalid lane's adds
// nothing): each K and V vec4 loaded once for those rows, then per row q·k as fused multiply-adds
// in value order, the running max, sum and p-weighted V sum — per row the same ops in the same
// order whichever rows share the loads.
void visit(uint e, bool valid, uint r0, uint r1) {
  float s[RQ * HPW];
  [[unroll]] for (uint rg = 0; rg < RQ * HPW; ++rg) s[rg] = 0.0;
  [[unroll]] for (uint c = 0; c < DV; ++c) {
    const vec4 k = load_k(pc.k_base + e, c);
    // Fused multiply-adds, one per value (dot() is a multiply and an add on CPU rasterizers).
    [[unroll]] for (uint r = 0; r < RQ; ++r)
      if (r >= r0 && r < r1)
        [[unroll]] for (uint g = 0; g < HPW; ++g)
          [[unroll]] for (uint x = 0; x < 4; ++x)
            s[r * HPW + g] = fma(qv[(r * HPW + g) * DV + c][x], k[x], s[r * HPW + g]);
  }
  float p[RQ * HPW], c_[RQ * HPW];
  [[unroll]] for (uint rg = 0; rg < RQ * HPW; ++rg) {
    if (rg >= r0 * HPW && rg < r1 * HPW) {
      const float m_new = valid ? max(m[rg], s[rg]) : m[rg];
      const float corr = valid ? exp(m[rg] - m_new) : 1.0;  // 0 on the lane's first key (m = -inf)
      p[rg] = valid ? exp(s[rg] - m_new) : 0.0;
      l[rg] = l[rg] * corr + p[rg];
      m[rg] = m_new;
      c_[rg] = corr;
    }
  }
  // acc = acc · corr + p · v: a multiply and a multiply-add per value.
  [[unroll]] for (uint c = 0; c < DV; ++c) {
    const vec4 v = load_v(pc.v_base + e, c);
    [[unroll]] for (uint rg = 0; rg < RQ * HPW; ++rg)
      if (rg >= r0 * HPW && rg < r1 * HPW) acc[rg * DV + c] = fma(acc[rg * DV + c], vec4(c_[rg]), p[rg] * v);
  }
}

// Row i's keys: how many (committed + its tree ancestors, or the chain's), where its walk starts
// (a sliding window's first key) and where its plain chunks end.
struct RowKeys {
  uint n_keys, first, plain_end;
};
RowKeys row_keys(uint i) {
  uint n_tree = i + 1;
  if (pc.causal == 0) {
    n_tree = 0;
    for (uint w = 0; w < pc.mask_words; ++w) n_tree += uint(bitCount(mask[pc.mask_offset + i * pc.mask_words + w]));
  }
  RowKeys k;
  k.n_keys = t_ctx + n_tree;
  // The row's own position is n_keys - 1; a sliding window starts the walk at the first key it
  // sees, so lane ownership (and the reduction order) is still fixed by the row's position alone.
  k.first = pc.window != 0 && k.n_keys > pc.window ? k.n_keys - pc.window : 0;
  // Chunks whose keys are all the row's and sit at their position's slot (committed keys; for a
  // chain every key) run in a loop with no tree lookup and no validity test: lavapipe runs an `if`
  // body under a lane mask whatever the condition, so the lookup would cost every chunk. Then
  // the last chunks, where lanes may be past n_keys or on tree keys. A chunk's ops are the same
  // in either loop, so the split moves no key and changes no bit.
  k.plain_end = pc.causal != 0 ? k.n_keys : min(t_ctx, k.n_keys);
  return k;
}

// Attention of rows i0 .. i0 + RQ - 1 (past N: row N - 1 again) for the HPW query heads from h0;
// lane x % S stores value x of each head.
void attend(uint i0, uint h0) {
  // One subgroup per workgroup: the local index is the subgroup lane.
  const uint lane = gl_LocalInvocationID.x, S = gl_WorkGroupSize.x;
  const uint hk = h0 / (pc.H / pc.Hkv);
  const uint kv0 = hk * D, row_stride = pc.Hkv * D;

  RowKeys keys[RQ];
  [[unroll]] for (uint r = 0; r < RQ; ++r) {
    const uint i = min(i0 + r, pc.N - 1);
    keys[r] = row_keys(i);
    // q rows in registers, pre-scaled so a score is one dot product. The group's heads are
    // consecutive in the row: value v of it (head v / D) at q0 + v.
    const uint q0 = pc.q_offset + (dyn(pc.q_row, pc.q_row_slot) + i) * pc.q_stride + h0 * D;
    float qs[QL];
    if (QSHUF)
      [[unroll]] for (uint j = 0; j < QL; ++j) qs[j] = qin[q0 + min(j * S + lane, HPW * D - 1)];
    [[unroll]] for (uint g = 0; g < HPW; ++g) {
      [[unroll]] for (uint c = 0; c < DV; ++c) {
        vec4 q4 = vec4(0.0);
        [[unroll]] for (uint x = 0; x < 4; ++x) {
          const uint v = g * D + 4 * c + x;
          if (4 * c + x < D) q4[x] = QSHUF ? subgroupShuffle(qs[v / S], v % S) : qin[q0 + v];
        }
        qv[(r * HPW + g) * DV + c] = q4 * pc.scale;
      }
    }
  }

  // Every lane runs its own online softmax over the keys it owns (positions = lane mod S). The
  // lanes are combined once at the end, so the chunk loop has no cross-lane operation at all.
  [[unroll]] for (uint rg = 0; rg < RQ * HPW; ++rg) {
    m[rg] = -1.0 / 0.0;
    l[rg] = 0.0;
    [[unroll]] for (uint c = 0; c < DV; ++c) acc[rg * DV + c] = vec4(0.0);
  }

  // With RQ > 1, the chunks every row takes plainly (the host gives RQ > 1 only without a window,
  // so every row's walk starts at key 0): K/V loaded once for all rows. Then each row its own
  // rest, all of it in the checking loop (for a tree pass that is only where its tree keys begin;
  // a chain's rows differ by at most a chunk), so the shader holds RQ + 1 copies of visit, not
  // 2 RQ + 1: lavapipe's compile time grows with them.
  uint shared_end = 0;
  if (RQ > 1) {
    shared_end = keys[0].plain_end;
    [[unroll]] for (uint r = 1; r < RQ; ++r) shared_end = min(shared_end, keys[r].plain_end);
  }
  uint common_base = 0;
  for (; common_base + S <= shared_end; common_base += S) visit((common_base + lane) * row_stride + kv0, true, 0, RQ);
  [[unroll]] for (uint r = 0; r < RQ; ++r) {
    const uint i = min(i0 + r, pc.N - 1), n_keys = keys[r].n_keys;
    uint base = RQ > 1 ? common_base : keys[r].first;
    if (RQ == 1)
      for (; base + S <= keys[r].plain_end; base += S) visit((base + lane) * row_stride + kv0, true, r, r + 1);
    for (; base < n_keys; base += S) {
      const uint pos = base + lane;
      const bool valid = pos < n_keys;
      // Committed keys and chain rows sit at their position's slot; tree keys at their ancestor's.
      uint slot = pos;
      if (pc.causal == 0 && valid && pos >= t_ctx) slot = tree_slot(i, pos - t_ctx);
      if (!valid) slot = 0;  // a harmless in-bounds row; it gets weight 0
      visit(slot * row_stride + kv0, valid, r, r + 1);
    }
  }

  // Combine the lanes: rescale each to the common max (a lane that owned no key has m = -inf,
  // weight 0), then one fixed subgroupAdd per value. Lane x % S writes value x of each head.
  [[unroll]] for (uint r = 0; r < RQ; ++r) {
#ifndef O_PROJ
    if (i0 + r >= pc.N) break;
#endif
    [[unroll]] for (uint g = 0; g < HPW; ++g) {
      const uint rg = r * HPW + g;
      const float mx = subgroupMax(m[rg]);
      const float w = exp(m[rg] - mx);
      const float inv = 1.0 / subgroupAdd(l[rg] * w);
#ifndef O_PROJ
      const uint ob = pc.o_offset + (i0 + r) * pc.o_stride + (h0 + g) * D;
#endif
      [[unroll]] for (uint c = 0; c < DV; ++c) {
        const vec4 o4v = subgroupAdd(acc[rg * DV + c] * w) * inv;
#ifdef O_PROJ
        attv[rg * DV + c] = o4v;
#else
        [[unroll]] for (uint x = 0; x < 4; ++x) {
          const uint d = 4 * c + x;
          if (d < D && d % S == lane) o[ob + d] = o4v[x];
        }
#endif
      }
    }
  }
}

#ifdef O_PROJ
// part(i, g, c) = row i's attv · W_o(c, blocks b0 .. b0 + NBG) for rows i = i0 .. i0 + RQ - 1 (below
// N) and the W_o rows c the lane owns (vec4 c4 of the row: c = 4·c4 .. 4·c4 + 3, c4 = lane mod
// S), four W_o rows a pass: independent sums the CPU can interleave, each block by block in order
// with the block's dot product scaled once. Each block is loaded once for the RQ rows.
void project(uint i0, uint g, uint b0) {
  const uint lane = gl_LocalInvocationID.x, S = gl_WorkGroupSize.x, C4 = (pc.C + 3) / 4;
  for (uint c4 = lane; c4 < C4; c4 += S) {
    vec4 sum[RQ];
    [[unroll]] for (uint r = 0; r < RQ; ++r) sum[r] = vec4(0.0);
    [[unroll]] for (uint b = 0; b < NBG; ++b)
      [[unroll]] for (uint c = 0; c < 4; ++c) {
        vec4 v[8];
        float scale;
        load_block_unscaled(min(4 * c4 + c, pc.C - 1), b0 + b, KB, pc.C, v, scale);  // past C: padding
        [[unroll]] for (uint r = 0; r < RQ; ++r) {
          float s = 0.0;
          [[unroll]] for (uint j = 0; j < 8; ++j)
            [[unroll]] for (uint x = 0; x < 4; ++x) s = fma(v[j][x], attv[r * HPW * DV + b * 8 + j][x], s);
          sum[r][c] = fma(s, scale, sum[r][c]);
        }
      }
    [[unroll]] for (uint r = 0; r < RQ; ++r)
      if (i0 + r < pc.N) part[((i0 + r) * gl_NumWorkGroups.y + g) * C4 + c4] = sum[r];
  }
}
#endif

void main() {
  t_ctx = dyn(pc.t, pc.t_slot);
  const uint i0 = gl_WorkGroupID.x * RQ;
#ifdef O_PROJ
  const uint g = gl_WorkGroupID.y, G = gl_NumWorkGroups.y;
  const uint lane = gl_LocalInvocationID.x, S = gl_WorkGroupSize.x;
  attend(i0, g * HPW);
  project(i0, g, g * NBG);
  memoryBarrierBuffer();  // the partial rows visible before they are counted
  barrier();
  // The G workgroups of rows i0 .. count in arrivals[i0]; the last adds their partials.
  if (lane == 0) last = atomicAdd(arrivals[i0], 1u) == G - 1u;
  barrier();
  if (!last) return;
  memoryBarrierBuffer();
  const uint C4 = (pc.C + 3) / 4;
  const uint res_row = pc.res_q * dyn(pc.q_row, pc.q_row_slot);
  for (uint i = i0; i < min(i0 + RQ, pc.N); ++i) {
    const uint ob = pc.o_offset + i * pc.o_stride, rb = pc.res_offset + (res_row + i) * pc.o_stride;
    for (uint c4 = lane; c4 < C4; c4 += S) {
      vec4 sum = vec4(0.0);
      for (uint gg = 0; gg < G; ++gg) sum += part[(i * G + gg) * C4 + c4];
      if (O_VEC) {
        o4[ob / 4 + c4] = o4[rb / 4 + c4] + sum;
      } else {
        [[unroll]] for (uint r = 0; r < 4; ++r)
          if (4 * c4 + r < pc.C) o[ob + 4 * c4 + r] = o[rb + 4 * c4 + r] + sum[r];
      }
    }
  }
  if (lane == 0) arrivals[i0] = 0u;
#else
  attend(i0, gl_WorkGroupID.y * HPW);
#endif
}
