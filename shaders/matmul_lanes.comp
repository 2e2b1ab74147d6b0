#version 450
#extension GL_EXT_control_flow_attributes : enable
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_shuffle : enable
// y(B, N) [+]= x(B, K) · W(N, K)^T [+ bias(N)] — lanes across output rows, for CPU-like devices.
//
// Each invocation owns R output rows and walks all of K in order, BT activation rows at a time.
// Everything a lane keeps is sized for a CPU rasterizer, where every per-lane value is one SIMD
// register: R·BT accumulators, one 8-value piece of R weight rows, one piece of x. No subgroup
// reduction, no shared memory, no divergent loop: every lane walks the same k, so the x fetches
// are uniform; with XS each x texel is fetched by one lane and shuffled to the rest (below). Weights and x are read through texel views (a storage load on these devices is a
// bounds-checked per-lane loop). A row's sum runs piece by piece in one order whatever B or the
// tile is, so results are batch-invariant.
//
// Three folds save a dispatch and a round trip through memory each:
// - NORM: the RMSNorm that feeds this matmul. y = (W · (x ⊙ g)) · rsqrt(mean(x²) + eps): every lane
//   already fetches all of x, so it sums x² on the way and scales its outputs at the end.
// - GLU: W is gate rows then up rows (2F); a lane owns R/2 gate rows and the matching up rows
//   and writes y(B, F) = act(gate) · up (act.glsl: SiLU, or GELU by ACT).
// - ROPE_KV (a variant): W is a layer's q|k|v rows (heads of width D = n_rot). A lane owns R/2
//   RoPE pairs (both rows of each), so it turns q and k in registers: q is written rotated, k
//   and v as projected, and the rotated k and the v go into cache row slot + b — what
//   rope_kv_write (rope_kv.comp) does after a plain matmul, bit for bit. A weight of several
//   chunks (a file may store v in another type than q and k) runs one dispatch a chunk, each
//   chunk whole heads (row_offset a multiple of D).
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint R = 2;   // rows per invocation
layout(constant_id = 2) const uint BT = 4;  // activation rows per workgroup (gl_WorkGroupID.y tiles B)
layout(constant_id = 3) const bool NORM = false;
layout(constant_id = 4) const bool GLU = false;
layout(constant_id = 5) const uint XS = 0;   // > 0: the subgroup size, and x is fetched once per subgroup
layout(constant_id = 6) const uint XT = 1;   // with XS: texels of x each lane fetches per piece, ceil(2·BT / XS)
layout(constant_id = 7) const uint ACT = 0;  // GLU: the gate's activation (act.glsl)
// K % 32 != 0: the last 32-value block runs past K, and x there is masked to zero. A constant
// because lavapipe (Mesa 22.3) runs an `if` body under a lane mask whatever the condition, so a
// runtime test would pay the masking on every block (K % 32 == 0, single-threaded, batch 8:
// 4096² f16 9.0 → 7.8 ms, q8_0 9.5 → 7.8 ms; 768x288 q8_0 190 → 144 µs).
layout(constant_id = 8) const bool TAIL = true;
// q4_0, q5_0, q5_1 rows read in groups of 8 blocks (below); a constant for the same reason: a
// loop inside a false `if` still runs one pass under an empty mask, here 8 blocks of every short
// row (32000x512 at batch 1, single-threaded: q5_0 5.17 → 3.96 ms, q4_0 4.31 → 3.40 ms).
layout(constant_id = 9) const bool GROUPS = true;
// GLU: 0, or the weight's rows are stored in pair blocks of GLU_PAIRS (ops/matmul.cpp:
// upload_glu_weight): GLU_PAIRS gate rows, then their up rows (the last block shorter), so that one
// row tile of the texel layout holds a workgroup's gate rows and their up rows, fetched as one
// stream. Gate rows then up rows split each tile between two workgroups, each reading every other
// half of it (single-threaded lavapipe, the 512-wide model's f16 2816x512 gate|up: ~520 → ~300 µs).
layout(constant_id = 10) const uint GLU_PAIRS = 0;
// Row groups: a workgroup walks RG consecutive groups of WG·R rows, one after the other, so that
// a short row's work is not one task of the driver's pool for every 16 rows (ops/matmul.cpp:
// lanes_row_groups). Each row's sum is the same whatever RG.
layout(constant_id = 11) const uint RG = 1;
// A bias to add, and y += rather than y = : constants, not push values. lavapipe (Mesa 22.3) runs
// an `if` body under a lane mask whatever its condition and loads a storage word lane by lane,
// so a runtime test paid a per-lane gather of the bias and of y for every output at every batch
// row; at K = 192 those epilogue loads were a fifth of the kernel (single-threaded, f16 at
// batch 3: 1024x192 241 -> ~200 µs, 384x192 95 -> ~81 µs; ops/matmul.cpp).
layout(constant_id = 12) const bool HAS_BIAS = false;
layout(constant_id = 13) const bool ACCUMULATE = false;
#include "act.glsl"
const uint XSD = XS + (XS == 0 ? 1 : 0);  // a divisor even where the shuffle is off
// Array sizes named once: each spelling of a specialization-constant expression is its own type.
const uint XV = 8 * BT;  // a block of x for the tile: 8 texels per activation row
const uint RB = R * BT;  // accumulators
const uint XH = 2 * BT;  // q6_K: the tile's sums of x per 16 values
// Byte i of a word in place (2^(8i)·n) and the factor that takes 2^(8i) off a sum of such products.
const uvec4 BYTE_MASK = uvec4(0xffu, 0xff00u, 0xff0000u, 0xff000000u);
const vec4 BYTE_UNSCALE = vec4(1.0, 1.0 / 256.0, 1.0 / 65536.0, 1.0 / 16777216.0);
const uint XB = XS >= 8 ? (8 * BT + XSD - 1) / XSD : 1;  // x texels a lane fetches per 32-value block (tile_x_block)
uint xsrc_block[XB];

#include "weights.glsl"

#include "pair.glsl"
TEXEL_BINDING(2, x_tex)
vec4 load_x(uint i) { return uintBitsToFloat(TEXEL_FETCH(x_tex, int(i))); }
layout(set = 0, binding = 3, std430) buffer Y { float yout[]; } PAIRED(Y_);
#define yout PAIR_AT(Y_).yout
layout(set = 0, binding = 4, std430) readonly buffer Bias { float bias[]; } PAIRED(Bias_);
#define bias PAIR_AT(Bias_).bias
TEXEL_BINDING(5, g_tex)  // NORM: the norm's weight (K,)
vec4 load_g(uint i) { return uintBitsToFloat(TEXEL_FETCH(g_tex, int(i))); }

layout(push_constant) uniform Push {
  uint K, N, row_offset, B, x_stride, x_offset, y_stride, y_offset;
  float eps;
#ifdef ROPE_KV
  // RoPE as rope.glsl reads it, then the cache: q rows [0, hd), k rows [hd, hd + kv), v rows
  // [hd + kv, hd + 2kv); cache row slot + b (a dynamic scalar); k_base / v_base in values.
  uint n_rot;
  float theta, freq_scale;
  uint pos_offset, first, first_slot, step;
  uint hd, kv, slot, slot_slot, k_base, v_base;
#endif
} pc;

#ifdef ROPE_KV
layout(constant_id = 14) const bool KV_F16 = true;  // cache words: f16 pairs, else f32 bits
// RoPE's pairing (0: adjacent, 1: NEOX halves), a position table, Llama 3 frequency factors:
// constants for the reason HAS_BIAS is one (each was a per-lane load or store under a branch
// every lane ran, at every pair and batch row).
layout(constant_id = 15) const uint MODE = 0;
layout(constant_id = 16) const bool HAS_TABLE = false;
layout(constant_id = 17) const bool HAS_FACTORS = false;
#define ROPE_TABLE HAS_TABLE
#define ROPE_FACTORS HAS_FACTORS
layout(set = 0, binding = 6, std430) readonly buffer Pos { int pos[]; } PAIRED(Pos_);
#define pos PAIR_AT(Pos_).pos
layout(set = 0, binding = 7, std430) readonly buffer Factors { float factors[]; } PAIRED(Factors_);
#define factors PAIR_AT(Factors_).factors
layout(set = 0, binding = 8, std430) writeonly buffer KC { uint kc[]; } PAIRED(KC_);
#define kc PAIR_AT(KC_).kc
layout(set = 0, binding = 9, std430) writeonly buffer VC { uint vc[]; } PAIRED(VC_);
#define vc PAIR_AT(VC_).vc
#define DYN_BINDING 10
#include "dyn.glsl"
#define ROPE_REGISTERS
#include "rope.glsl"
#endif

// x(bb, 8p .. 8p+8) of block blk, zero past K (padding may hold anything, NaN included), and
// with NORM its sum of squares added to ss and the norm's weight applied.
void finish_x8(uint blk, uint p, bool tail, vec4 gl, vec4 gh, inout float ss, inout vec4 lo, inout vec4 hi) {
  if (tail) {
    const uint k = blk * 32 + 8 * p;
    const bvec4 ml = lessThan(uvec4(k, k + 1, k + 2, k + 3), uvec4(pc.K)), mh = lessThan(uvec4(k + 4, k + 5, k + 6, k + 7), uvec4(pc.K));
    lo = mix(vec4(0.0), lo, ml);
    hi = mix(vec4(0.0), hi, mh);
    gl = mix(vec4(0.0), gl, ml);
    gh = mix(vec4(0.0), gh, mh);
  }
  if (NORM) {
    ss += dot(lo, lo) + dot(hi, hi);
    lo *= gl;
    hi *= gh;
  }
}

void load_x8(uint base, uint blk, uint p, bool tail, inout float ss, out vec4 lo, out vec4 hi) {
  lo = load_x(base + blk * 8 + 2 * p);
  hi = load_x(base + blk * 8 + 2 * p + 1);
  vec4 gl = vec4(1.0), gh = vec4(1.0);
  if (NORM) {
    gl = load_g(blk * 8 + 2 * p);
    gh = load_g(blk * 8 + 2 * p + 1);
  }
  finish_x8(blk, p, tail, gl, gh, ss, lo, hi);
}

#if defined(WT_F16) || defined(WT_F32)
#define PIECES  // f16 / f32: one 8-value piece of a row per step
// Values 8p .. 8p+7 of a 32-value block.
void load_piece(uint row, uint block, uint kb, uint p, out vec4 lo, out vec4 hi) {
  const uint tpr = kb * TEXELS_PER_BLOCK, t0 = block * TEXELS_PER_BLOCK;
#if defined(WT_F32)
  lo = uintBitsToFloat(load_w(w_index(row, t0 + 2 * p, tpr, pc.N)));
  hi = uintBitsToFloat(load_w(w_index(row, t0 + 2 * p + 1, tpr, pc.N)));
#else
  const uvec4 t = load_w(w_index(row, t0 + p, tpr, pc.N));
  lo = vec4(unpackHalf2x16(t.x), unpackHalf2x16(t.y));
  hi = vec4(unpackHalf2x16(t.z), unpackHalf2x16(t.w));
#endif
}
#endif

#if defined(WT_Q8_0)
// Eight int8 quants (two words) as values.
void q8_piece(uint u, uint v, out vec4 lo, out vec4 hi) {
  // Sign-extend each byte: shift it to the top, then arithmetic-shift down.
  lo = vec4(ivec4(int(u << 24), int(u << 16), int(u << 8), int(u)) >> 24);
  hi = vec4(ivec4(int(v << 24), int(v << 16), int(v << 8), int(v)) >> 24);
}
#endif

// s += the 8-value piece's dot product, one multiply-add per value in a fixed order. (fma() pins
// the order; it is not one instruction everywhere: lavapipe 22.3 emits a multiply and an add,
// no fused instruction, as the JIT code profiled with perf shows.)
float fma_piece(vec4 wl, vec4 wh, vec4 xl, vec4 xh, float s) {
  [[unroll]] for (uint c = 0; c < 4; ++c) s = fma(wl[c], xl[c], s);
  [[unroll]] for (uint c = 0; c < 4; ++c) s = fma(wh[c], xh[c], s);
  return s;
}

// The tile's x for values 8p .. 8p+7 of block blk: xl[b], xh[b] per activation row b. With XS
// a piece of x for the tile is 2·BT texels; lane l fetches texels l, l + XS, ... of them
// (duplicates past the end, xsrc) and every lane takes each texel from its owner by a shuffle, so
// the per-lane gathers a texel fetch costs on a CPU happen once per subgroup, not per lane.
void tile_x(uint blk, uint p, bool tail, uint xsrc[XT], uint xrow[BT], inout float ss[BT], out vec4 xl[BT], out vec4 xh[BT]) {
  vec4 xp[XT], gp = vec4(1.0);
  if (XS > 0) {
    [[unroll]] for (uint j = 0; j < XT; ++j) xp[j] = load_x(xsrc[j] + blk * 8 + 2 * p);
    if (NORM) gp = load_g(blk * 8 + 2 * p + (gl_SubgroupInvocationID & 1u));
  }
  [[unroll]] for (uint b = 0; b < BT; ++b) {
    if (XS > 0) {
      xl[b] = subgroupShuffle(xp[(2 * b) / XSD], (2 * b) % XSD);
      xh[b] = subgroupShuffle(xp[(2 * b + 1) / XSD], (2 * b + 1) % XSD);
      finish_x8(blk, p, tail, subgroupShuffle(gp, 0), subgroupShuffle(gp, 1), ss[b], xl[b], xh[b]);
    } else {
      load_x8(xrow[b], blk, p, tail, ss[b], xl[b], xh[b]);
    }
  }
}

#if defined(WT_Q4_K) || defined(WT_Q5_K)
#define RAW_CHUNKS  // 32-byte chunks of 256-value blocks (main)
#elif !defined(PIECES) && !defined(WT_Q8_0) && !defined(RAW_SUPER)
#define RAW_BLOCKS  // q4_0, q5_0, q5_1: one 32-value block at a time
#endif
#if defined(RAW_BLOCKS)
const bool XSUM = true;  // raw32_dot takes the offset (q4_0, q5_0) or the min (q5_1) off Σx
#elif defined(RAW_SUPER) || defined(RAW_CHUNKS)
const bool XSUM = RAW_MIN;  // the tile's Σx of each 32-value block (tile_x_prep, tile_x_block)
#endif

// acc(r, b) += the dot of file-block sub-block s of every row's words (RAW_SUPER) or of block
// blk (RAW_BLOCKS) with the tile's x of that block, xv(b, 8 texels). Values are n·d − m
// (quants.glsl), so a row costs d·Σn·x − m·Σx: Σx is the rows' common part.
#if defined(RAW_SUPER) || defined(RAW_BLOCKS) || defined(RAW_CHUNKS)
#if defined(RAW_SUPER)
void raw_dot(vec4 n[8], float d, float m, vec4 xv[XV], float xsum[BT], uint r, inout float acc[RB]) {
  [[unroll]] for (uint b = 0; b < BT; ++b) {
    // Four running sums (one per vector component) by multiply-adds, then added in pairs: four
    // independent chains where dot() makes one.
    vec4 a = vec4(0.0);
    [[unroll]] for (uint i = 0; i < 8; ++i) a = fma(n[i], xv[8 * b + i], a);
    const float s = (a.x + a.y) + (a.z + a.w);
    acc[r * BT + b] += RAW_MIN ? s * d - m * xsum[b] : s * d;
  }
}
#endif


// With a subgroup of 8 or more, the tile's x of block blk is spread over the lanes at once
// (xsrc_block): at batch 1 one fetch per lane instead of one per piece. Each lane readies its own
// texel — the tail mask, its squares for the norm, the norm's weight, its sum — in xp, and with
// XSUM xsum(b) is the sum of row b's 32 values; x_texel then takes texel e (8·b + i) from its
// lane. The same operations on the same values as readying every texel in every lane after the
// shuffle (finish_x8), so the same bits, once a subgroup.
void tile_x_prep(uint blk, bool tail, inout float ss[BT], out vec4 xp[XB], out float xsum[BT]) {
  const uint t8 = gl_SubgroupInvocationID & 7u;  // the lane's texel of its row (XS is a multiple of 8)
  vec4 g = NORM ? load_g(blk * 8 + t8) : vec4(1.0);
  const uint k = blk * 32 + 4 * t8;
  const bvec4 in_k = lessThan(uvec4(k, k + 1, k + 2, k + 3), uvec4(pc.K));
  if (tail) g = mix(vec4(0.0), g, in_k);
  float sq[XB], sx[XB];
  [[unroll]] for (uint j = 0; j < XB; ++j) {
    xp[j] = load_x(xsrc_block[j] + blk * 8);
    if (tail) xp[j] = mix(vec4(0.0), xp[j], in_k);
    sq[j] = NORM ? dot(xp[j], xp[j]) : 0.0;
    if (NORM) xp[j] *= g;
    sx[j] = XSUM ? dot(xp[j], vec4(1.0)) : 0.0;
  }
  [[unroll]] for (uint b = 0; b < BT; ++b) {
    xsum[b] = 0.0;
    [[unroll]] for (uint i = 0; i < 8; ++i) {
      const uint e = 8 * b + i;
      if (NORM && i % 2 == 1)
        ss[b] += subgroupShuffle(sq[(e - 1) / XSD], (e - 1) % XSD) + subgroupShuffle(sq[e / XSD], e % XSD);
      if (XSUM) xsum[b] += subgroupShuffle(sx[e / XSD], e % XSD);
    }
  }
}

vec4 x_texel(vec4 xp[XB], uint e) { return subgroupShuffle(xp[e / XSD], e % XSD); }

// The tile's x of block blk, every piece (xv(b, 8 texels)), and with XSUM the sum of each
// row's 32 values: through tile_x_prep with a subgroup of 8 or more, else piece by piece.
void tile_x_block(uint blk, bool tail, uint xsrc[XT], uint xrow[BT], inout float ss[BT], out vec4 xv[XV], out float xsum[BT]) {
  if (XS >= 8) {
    vec4 xp[XB];
    tile_x_prep(blk, tail, ss, xp, xsum);
    [[unroll]] for (uint e = 0; e < XV; ++e) xv[e] = x_texel(xp, e);
  } else {
    [[unroll]] for (uint p = 0; p < 4; ++p) {
      vec4 xl[BT], xh[BT];
      tile_x(blk, p, tail, xsrc, xrow, ss, xl, xh);
      [[unroll]] for (uint b = 0; b < BT; ++b) {
        xv[8 * b + 2 * p] = xl[b];
        xv[8 * b + 2 * p + 1] = xh[b];
      }
    }
    [[unroll]] for (uint b = 0; b < BT; ++b) {
      xsum[b] = 0.0;
      if (XSUM)
        [[unroll]] for (uint i = 0; i < 8; ++i) xsum[b] += dot(xv[8 * b + i], vec4(1.0));
    }
  }
}
#endif

#if defined(WT_Q6_K)
// q6_K, sub-block s of a block's words w (h = s / 4, j = s % 4), 16 values (one int8 scale) a
// group. The six bits of word i's four values are assembled in a word at once, each value then
// taken in place as 2^(8i)·q (one mask, one conversion; the sum's component i is scaled back by
// 2^(-8i), exact), and the offset 32 comes off the group's sum: d·sc·(Σ q·x − 32·Σx).
vec4 q6_values(uint w[RAW_WORDS], uint h, uint j, uint i) {
  const uint ql = w[16 * h + 8 * (j % 2) + i], qh = w[32 + 8 * h + i];
  const uint q = (((j / 2) != 0 ? ql >> 4 : ql) & 0x0f0f0f0fu) | (((qh >> (2 * j)) & 0x03030303u) << 4);
  return vec4(ivec4(uvec4(q) & BYTE_MASK));
}

// The group's contribution from a = Σ (values in place)·x and its Σx.
float q6_group(uint w[RAW_WORDS], uint h, uint j, uint g, vec4 a, float xsum16) {
  const float d = unpackHalf2x16(w[52]).x;
  const uint sc2 = w[48 + 2 * h + j / 2] >> (16 * (j % 2));
  const int sc = g != 0 ? int(sc2 << 16) >> 24 : int(sc2 << 24) >> 24;
  a *= BYTE_UNSCALE;
  const float sq = (a.x + a.y) + (a.z + a.w);
  return d * (float(sc) * (sq - 32.0 * xsum16));
}

// (x0 + x1) + (x2 + x3) of a group's four texels, as one number.
float sum16(vec4 x0, vec4 x1, vec4 x2, vec4 x3) {
  const vec4 t = (x0 + x1) + (x2 + x3);
  return (t.x + t.y) + (t.z + t.w);
}

// acc(r, b) += sub-block s of row r's words against the tile's x, xv(b, 8 texels): row by row,
// one group's sum live at a time (with many batch rows, fewer live registers win).
void q6_dot(uint w[R][RAW_WORDS], uint s, vec4 xv[XV], inout float acc[RB]) {
  const uint h = s / 4, j = s % 4;
  [[unroll]] for (uint r = 0; r < R; ++r)
    [[unroll]] for (uint b = 0; b < BT; ++b)
      [[unroll]] for (uint g = 0; g < 2; ++g) {
        vec4 a = vec4(0.0);
        [[unroll]] for (uint k = 0; k < 4; ++k) a = fma(q6_values(w[r], h, j, 4 * g + k), xv[8 * b + 4 * g + k], a);
        const uint e = 8 * b + 4 * g;
        acc[r * BT + b] += q6_group(w[r], h, j, g, a, sum16(xv[e], xv[e + 1], xv[e + 2], xv[e + 3]));
      }
}

// The same at batch 1 with x from tile_x_prep: texel by texel, each taken from its lane where
// every row's fused multiply-adds use it (as chunk_dot; 4096² single-threaded: 3.09 → 2.95 ms).
void q6_dot_texels(uint w[R][RAW_WORDS], uint s, vec4 xp[XB], inout float acc[RB]) {
  const uint h = s / 4, j = s % 4;
  vec4 a[2 * R], x[8];
  [[unroll]] for (uint k = 0; k < 2 * R; ++k) a[k] = vec4(0.0);
  [[unroll]] for (uint i = 0; i < 8; ++i) {
    x[i] = x_texel(xp, i);
    [[unroll]] for (uint r = 0; r < R; ++r) a[2 * r + i / 4] = fma(q6_values(w[r], h, j, i), x[i], a[2 * r + i / 4]);
  }
  [[unroll]] for (uint r = 0; r < R; ++r)
    [[unroll]] for (uint g = 0; g < 2; ++g)
      acc[r] += q6_group(w[r], h, j, g, a[2 * r + g], sum16(x[4 * g], x[4 * g + 1], x[4 * g + 2], x[4 * g + 3]));
}
#endif

#if defined(RAW_BLOCKS)
// Four 4-bit quants to bit 4 of each byte of a word: bits j .. j+3 of x, bit i to bit 8i + 4 (the
// multiply places copies of the 4 bits 7 apart, which never overlap, so nothing carries).
uint fifth_bits(uint x, uint j) { return ((((x >> j) & 0xfu) * 0x204081u) & 0x01010101u) << 4; }

// acc(r, b) += a 32-value block's dot with the tile's x (xv, xsum) from its words (decode32_words'
// hd and q). As chunk_dot's q4_K: byte i of a word of quants is taken in place, as 2^(8i)·n (one
// mask, one conversion), and component i of the running sum scaled back by 2^(-8i), exact; then
// d·(Σn·x − offset·Σx), or for q5_1 (values n·d + m) d·Σn·x + m·Σx. decode32_words' values
// (each nibble shifted out, its fifth bit added, the offset taken off, then converted) cost
// about twice the operations. Single-threaded lavapipe at batch 1, 512x1408 (short rows, block
// by block): q5_0 178 → 159-167 µs, q4_0 147 → 136-141; 4096² (8-block groups): q5_0 3.70 → 3.25-3.46
// ms, q5_1 2.87 → 2.44. One loss: q4_0 in 8-block groups at batch 4, 2048², 1.59 → 1.70 ms.
void raw32_dot(uint hd, uint q[5], vec4 xv[XV], float xsum[BT], uint r, inout float acc[RB]) {
  const vec2 dm = unpackHalf2x16(hd);
  vec4 n[8];  // values 4i .. 4i+3 in place (n[i]), and 16 + 4i .. 16 + 4i + 3 (n[4 + i])
  [[unroll]] for (uint i = 0; i < 4; ++i) {
#if defined(WT_Q4_0)
    const uint lo = q[i] & 0x0f0f0f0fu, hi = (q[i] >> 4) & 0x0f0f0f0fu;
#else  // q[0] the fifth bits, the nibbles after it
    const uint lo = (q[1 + i] & 0x0f0f0f0fu) | fifth_bits(q[0], 4 * i);
    const uint hi = ((q[1 + i] >> 4) & 0x0f0f0f0fu) | fifth_bits(q[0], 16 + 4 * i);
#endif
    n[i] = vec4(ivec4(uvec4(lo) & BYTE_MASK));
    n[4 + i] = vec4(ivec4(uvec4(hi) & BYTE_MASK));
  }
  [[unroll]] for (uint b = 0; b < BT; ++b) {
    vec4 a = vec4(0.0);
    [[unroll]] for (uint i = 0; i < 8; ++i) a = fma(n[i], xv[8 * b + i], a);
    const vec4 u = a * BYTE_UNSCALE;
    const float s = (u.x + u.y) + (u.z + u.w);
#if defined(WT_Q5_1)
    acc[r * BT + b] += s * dm.x + dm.y * xsum[b];
#else
    acc[r * BT + b] += dm.x * (s - (RAW_BYTES == 18 ? 8.0 : 16.0) * xsum[b]);
#endif
  }
}

// q4_0, q5_0, q5_1 rows of whole groups of 8 blocks, stored row-major (long rows on the texel
// path, quants.glsl's raw_block): a group is GT texels from a texel boundary (8 blocks of 18, 22
// or 24 bytes: 144, 176, 192 bytes), so block j's bytes sit at constant offsets in it. Block by
// block, each row fetches only the texels that block reaches past the previous one's, the shared
// texel carried over: 9 / 11 / 12 fetches a group and row, not 3–4 a block (a texel fetch is a
// per-lane call on CPU rasterizers), and the words come out of registers by constant selects.
const uint GT = RAW_BYTES / 2;

// The word at byte o (even) of the texels t[0..) that start at byte 16·t0.
uint group_word(uvec4 t[3], uint t0, uint o) {
  const uint i = o / 4 - 4 * t0, k = i + 1;
  const uint lo = t[i / 4][i % 4];
  return o % 4 == 0 ? lo : (lo >> 16) | (t[k / 4][k % 4] << 16);
}

// acc(r, b) += block j of every row's group (its first texel at gbase[r]) against the tile's x of
// that block (xv, xsum). carry[r]: row r's texel where block j - 1 ended.
void group_block_dot(uint gbase[R], uint j, vec4 xv[XV], float xsum[BT], inout uvec4 carry[R], inout float acc[RB]) {
  const uint o = j * RAW_BYTES, a = o / 16, e = (o + RAW_BYTES - 1) / 16;
  const bool carried = j > 0 && ((o - 1) / 16) == a;  // block j - 1's last texel is our first
  [[unroll]] for (uint r = 0; r < R; ++r) {
    uvec4 t[3];
    [[unroll]] for (uint k = 0; k < 3; ++k)
      if (a + k <= e) t[k] = k == 0 && carried ? carry[r] : load_w(gbase[r] + a + k);
    carry[r] = t[e - a];
    const uint h = RAW_MIN ? 4 : 2;  // bytes before the words: d (q5_1: d and m)
    const uint q[5] = uint[5](group_word(t, a, o + h), group_word(t, a, o + h + 4), group_word(t, a, o + h + 8),
                              group_word(t, a, o + h + 12), RAW_BYTES > 18 ? group_word(t, a, o + h + 16) : 0u);
    raw32_dot(group_word(t, a, o), q, xv, xsum, r, acc);
  }
}
#endif

#if defined(RAW_CHUNKS)
// q4_K / q5_K: 32-byte quant chunks (sub-blocks 2c and 2c + 1, two texels of each row) of 256-value
// blocks whose header texel (and q5_K's two texels of fifth bits) is fetched once a block: 9 (11)
// fetches per 256 values, and no block's words held whole (36 or 44 a row would spill). Each value
// is one mask, one conversion and one fused multiply-add: byte i of a word is taken in place, as
// 2^(8i)·n, and component i of the running sum is scaled back by 2^(-8i) — exact, powers of two, so
// the sum is the one a shift per value would give, bit for bit. Then d·Σn·x − m·Σx per sub-block.
// (4096² on lavapipe at batch 1, whole blocks → chunks: q4_K 2.12 → 1.24 ms on 2 threads, q5_K
// 4.0–5.7 → 3.1–3.4 ms on one.)
#if defined(WT_Q5_K)
const uint QS = 3;  // texels before the quants: header, 32 bytes of fifth bits
#else
const uint QS = 1;
#endif

void chunk_header(uint rows[R], uint nsb, uint sb, out uvec4 h[R], out uvec4 qh[R][2]) {
  [[unroll]] for (uint r = 0; r < R; ++r) {
    h[r] = load_w(raw_texel(rows[r], sb, 0, nsb, pc.N));
#if defined(WT_Q5_K)
    qh[r][0] = load_w(raw_texel(rows[r], sb, 1, nsb, pc.N));
    qh[r][1] = load_w(raw_texel(rows[r], sb, 2, nsb, pc.N));
#else
    qh[r][0] = qh[r][1] = uvec4(0);
#endif
  }
}

void chunk_dot(uint rows[R], uint nsb, uint sb, uint c, uvec4 h[R], uvec4 qh[R][2], uint xsrc[XT], uint xrow[BT],
               inout float ss[BT], inout float acc[RB]) {
  uvec4 t[R][2];
  [[unroll]] for (uint r = 0; r < R; ++r) {
    t[r][0] = load_w(raw_texel(rows[r], sb, QS + 2 * c, nsb, pc.N));
    t[r][1] = load_w(raw_texel(rows[r], sb, QS + 1 + 2 * c, nsb, pc.N));
  }
  [[unroll]] for (uint g = 0; g < 2; ++g) {
    // Texel by texel, each taken from its lane (or xv) where it is used: a block's 8·BT texels
    // are never all live at once (single-threaded lavapipe, 4096² at batch 1: 2.20 → 2.14 ms).
    vec4 xv[XV], xp[XB];
    float xsum[BT];
    if (XS >= 8)
      tile_x_prep(sb * 8 + 2 * c + g, false, ss, xp, xsum);
    else
      tile_x_block(sb * 8 + 2 * c + g, false, xsrc, xrow, ss, xv, xsum);
    vec4 a[RB];
    [[unroll]] for (uint j = 0; j < RB; ++j) a[j] = vec4(0.0);
    [[unroll]] for (uint i = 0; i < 8; ++i) {
      vec4 x[BT];
      [[unroll]] for (uint b = 0; b < BT; ++b) x[b] = XS >= 8 ? x_texel(xp, 8 * b + i) : xv[8 * b + i];
      [[unroll]] for (uint r = 0; r < R; ++r) {
        const uint w = t[r][i / 4][i % 4];
        uint n = (g != 0 ? w >> 4 : w) & 0x0f0f0f0fu;
#if defined(WT_Q5_K)
        n |= ((qh[r][i / 4][i % 4] >> (2 * c + g)) & 0x01010101u) << 4;
#endif
        const vec4 nf = vec4(ivec4(uvec4(n) & BYTE_MASK));
        [[unroll]] for (uint b = 0; b < BT; ++b) a[r * BT + b] = fma(nf, x[b], a[r * BT + b]);
      }
    }
    [[unroll]] for (uint r = 0; r < R; ++r) {
      float sc, mn;
      k4_scale_min(h[r], 2 * c + g, sc, mn);
      const vec2 dd = unpackHalf2x16(h[r].x);
      precise float dl = dd.x * sc;
      precise float ml = dd.y * mn;
      [[unroll]] for (uint b = 0; b < BT; ++b) {
        const vec4 u = a[r * BT + b] * BYTE_UNSCALE;
        const float s = (u.x + u.y) + (u.z + u.w);
        acc[r * BT + b] += s * dl - ml * xsum[b];
      }
    }
  }
}
#endif

// The rows (RoPE pairs) of row group `wgx`: what a workgroup of the grid did before row groups.
void row_group(uint wgx) {
  const uint b0 = gl_WorkGroupID.y * BT;
  const uint kb = (pc.K + 31) / 32, full = pc.K / 32;
  // Output rows: R of them, or with GLU R/2 gate rows and the up rows F further on.
  const uint HALF = GLU ? R / 2 : R, n_out = GLU ? pc.N / 2 : pc.N;
  // A workgroup owns HALF · WG consecutive rows, lane-major: lane l's r-th row is r · WG + l, so
  // the lanes' fetches of one piece of their r-th rows are neighbours in the interleaved layout.
  const uint WG = gl_WorkGroupSize.x;
  const uint row0 = wgx * WG * HALF + gl_LocalInvocationID.x;
  uint rows[R];
#ifdef ROPE_KV
  // RoPE pairs instead, lane-major the same way: the lane's k-th pair is g = k · WG + l of the
  // workgroup's WG · R/2; its rows are rows[k] and rows[k + R/2] (mode 0: 2i, 2i + 1 of a head;
  // mode 1: i, i + D/2).
  const uint P = R / 2, half_rot = pc.n_rot / 2, npairs = pc.N / 2;
  const uint g0 = wgx * WG * P + gl_LocalInvocationID.x;
  [[unroll]] for (uint k = 0; k < P; ++k) {
    const uint g = min(g0 + k * WG, npairs - 1), i = g % half_rot;
    rows[k] = (g / half_rot) * pc.n_rot + (MODE == 0 ? 2 * i : i);
    rows[k + P] = rows[k] + (MODE == 0 ? 1 : half_rot);
  }
#else
  [[unroll]] for (uint r = 0; r < R; ++r) {  // clamped, not skipped: uniform control flow
    const uint g = min(row0 + (r < HALF ? r : r - HALF) * WG, n_out - 1);  // the output row
    if (!GLU || GLU_PAIRS == 0) {
      rows[r] = r < HALF ? g : n_out + g;
    } else {  // gate row g and its up row in g's pair block
      const uint blk = g / GLU_PAIRS;
      rows[r] = 2 * GLU_PAIRS * blk + g % GLU_PAIRS + (r < HALF ? 0 : min(GLU_PAIRS, n_out - GLU_PAIRS * blk));
    }
  }
#endif
  float ss[BT];
  [[unroll]] for (uint b = 0; b < BT; ++b) ss[b] = 0.0;
  uint xrow[BT];
  [[unroll]] for (uint b = 0; b < BT; ++b) xrow[b] = (pc.x_offset + min(b0 + b, pc.B - 1) * pc.x_stride) / 4;

  const uint lane = XS > 0 ? gl_SubgroupInvocationID : 0;
  uint xsrc[XT];  // the x texels this lane fetches for the subgroup (tile_x)
  [[unroll]] for (uint j = 0; j < XT; ++j) {
    const uint i = min(lane + XS * j, 2 * BT - 1);
    xsrc[j] = xrow[i / 2] + (i & 1u);
  }
  [[unroll]] for (uint j = 0; j < XB; ++j) {
    const uint e = min(lane + XS * j, 8 * BT - 1);
    xsrc_block[j] = xrow[e / 8] + e % 8;
  }

  float acc[RB];
  [[unroll]] for (uint i = 0; i < R * BT; ++i) acc[i] = 0.0;

#if defined(RAW_CHUNKS)
  // Blocks' four 32-byte quant chunks in order. At batch 1 a block's header (chunk_header) is
  // fetched once for its chunks, which are unrolled, so each sub-block's scale and min unpack by
  // constant shifts (4096² q4_K, single-threaded lavapipe: 2.33 → 2.25 ms); with more batch rows
  // the unrolled body spills (batch 16: 23.2 → 29.1 ms), so one flat loop walks them there,
  // fetching the header with every chunk: under `if (c == 0)` lavapipe ran the fetch masked
  // anyway, and the mask cost more (1408x512, batch 2: 168 → 159 µs; a loop over the block's
  // chunks inside a block loop: 187 µs).
  const uint nsb = kb / 8;
  uvec4 h[R], qh[R][2];
  if (BT == 1) {
    for (uint sb = 0; sb < nsb; ++sb) {
      chunk_header(rows, nsb, sb, h, qh);
      [[unroll]] for (uint c = 0; c < 4; ++c) chunk_dot(rows, nsb, sb, c, h, qh, xsrc, xrow, ss, acc);
    }
  } else {
    for (uint q = 0; q < nsb * 4; ++q) {
      const uint sb = q / 4, c = q % 4;
      chunk_header(rows, nsb, sb, h, qh);
      chunk_dot(rows, nsb, sb, c, h, qh, xsrc, xrow, ss, acc);
    }
  }
#elif defined(RAW_SUPER)
  // Block by block (K is a multiple of 256 here, so there is no tail): every row's block as
  // words first, its 8 sub-blocks then decoded from registers against the tile's x.
  const uint nsb = kb / RAW_SUBS;
  for (uint sb = 0; sb < nsb; ++sb) {
    uint w[R][RAW_WORDS];
    [[unroll]] for (uint r = 0; r < R; ++r) raw_block_words(rows[r], sb, nsb, pc.N, w[r]);
    [[unroll]] for (uint s = 0; s < RAW_SUBS; ++s) {
      vec4 xv[XV], xp[XB];
      float xsum[BT];
#if defined(WT_Q6_K)
      if (BT == 1 && XS >= 8) {
        tile_x_prep(sb * RAW_SUBS + s, false, ss, xp, xsum);
        q6_dot_texels(w, s, xp, acc);
      } else {
        tile_x_block(sb * RAW_SUBS + s, false, xsrc, xrow, ss, xv, xsum);
        q6_dot(w, s, xv, acc);
      }
#else
      tile_x_block(sb * RAW_SUBS + s, false, xsrc, xrow, ss, xv, xsum);
      [[unroll]] for (uint r = 0; r < R; ++r) {
        vec4 n[8];
        float d, m;
        decode_words(w[r], s, n, d, m);
        raw_dot(n, d, m, xv, xsum, r, acc);
      }
#endif
    }
  }
#elif defined(PIECES)
  // One flat loop over K's 8-value pieces. Written as a block loop around a loop over the
  // block's 4 pieces, the inner loop's masks and carried state cost lavapipe a third of the
  // time (4096² f16 at batch 1: 4.6 → 3.5 ms); unrolled, it multiplied the compile time by 5.
  for (uint q = 0; q < kb * 4; ++q) {
    const uint blk = q / 4, p = q % 4;
    const bool tail = TAIL && blk >= full;  // padding past K may hold anything, NaN included
    vec4 wl[R], wh[R];
    [[unroll]] for (uint r = 0; r < R; ++r) load_piece(rows[r], blk, kb, p, wl[r], wh[r]);
    vec4 xl[BT], xh[BT];
    tile_x(blk, p, tail, xsrc, xrow, ss, xl, xh);
    [[unroll]] for (uint b = 0; b < BT; ++b)
      [[unroll]] for (uint r = 0; r < R; ++r) acc[r * BT + b] = fma_piece(wl[r], wh[r], xl[b], xh[b], acc[r * BT + b]);
  }
#elif defined(WT_Q8_0)
  // A flat loop over half blocks (one texel, 16 quants, of each row per step), each half's sum
  // scaled by the block's scale. With few activation rows the two halves are written out in a
  // loop over blocks, which fetches each scale once instead of twice (4096² at batch 1,
  // single-threaded lavapipe: 2.90 → 2.49 ms); with 8 rows that loop's larger body was ~5% slower.
  const uint tpr = kb * TEXELS_PER_BLOCK, HALVES = BT <= 4 ? 2 : 1;  // half blocks per pass
  for (uint q = 0; q < kb * 2; q += HALVES) {
    const uint blk = q / 2;
    const bool tail = TAIL && blk >= full;
    float sc[R];
    [[unroll]] for (uint r = 0; r < R; ++r) sc[r] = load_scale(w_index(rows[r], blk, kb, pc.N));
    [[unroll]] for (uint j = 0; j < HALVES; ++j) {
      const uint half_blk = (q + j) % 2;
      uvec4 t[R];
      [[unroll]] for (uint r = 0; r < R; ++r) t[r] = load_w(w_index(rows[r], blk * TEXELS_PER_BLOCK + half_blk, tpr, pc.N));
      float part[RB];
      [[unroll]] for (uint i = 0; i < R * BT; ++i) part[i] = 0.0;
      [[unroll]] for (uint h = 0; h < 2; ++h) {
        vec4 xl[BT], xh[BT];
        tile_x(blk, 2 * half_blk + h, tail, xsrc, xrow, ss, xl, xh);
        [[unroll]] for (uint r = 0; r < R; ++r) {
          vec4 wl, wh;
          q8_piece(h != 0 ? t[r].z : t[r].x, h != 0 ? t[r].w : t[r].y, wl, wh);
          [[unroll]] for (uint b = 0; b < BT; ++b) part[r * BT + b] = fma_piece(wl, wh, xl[b], xh[b], part[r * BT + b]);
        }
      }
      [[unroll]] for (uint r = 0; r < R; ++r)
        [[unroll]] for (uint b = 0; b < BT; ++b) acc[r * BT + b] += part[r * BT + b] * sc[r];
    }
  }
#else
  // RAW_BLOCKS. Rows of whole groups that are row-major (GROUPS: the host checks both per
  // matrix): group by group (group_block_dot).
  if (GROUPS) {
    uint gbase[R];  // the row's first texel (its bytes are a multiple of a group's: 16-byte aligned)
    [[unroll]] for (uint r = 0; r < R; ++r) gbase[r] = rows[r] * (kb * RAW_BYTES / 16);
    for (uint g = 0; g < kb / 8; ++g) {
      uvec4 carry[R];
      [[unroll]] for (uint j = 0; j < 8; ++j) {
        vec4 xv[XV];
        float xsum[BT];
        tile_x_block(8 * g + j, false, xsrc, xrow, ss, xv, xsum);
        group_block_dot(gbase, j, xv, xsum, carry, acc);
      }
      [[unroll]] for (uint r = 0; r < R; ++r) gbase[r] += GT;
    }
  } else
  for (uint blk = 0; blk < kb; ++blk) {
    const bool tail = TAIL && blk >= full;  // padding past K may hold anything, NaN included
    // 32-value file blocks: the tile's x once for all R rows, each row's block decoded in turn.
    vec4 xv[XV];
    float xsum[BT];
    tile_x_block(blk, tail, xsrc, xrow, ss, xv, xsum);
    [[unroll]] for (uint r = 0; r < R; ++r) {
      uint hd, q[5];
      raw32_words(rows[r], blk, kb, pc.N, hd, q);
      raw32_dot(hd, q, xv, xsum, r, acc);
    }
  }
#endif
  [[unroll]] for (uint b = 0; b < BT; ++b) {
    const float scale = NORM ? inversesqrt(ss[b] / float(pc.K) + pc.eps) : 1.0;
    [[unroll]] for (uint r = 0; r < R; ++r) acc[r * BT + b] *= scale;
  }
#ifdef ROPE_KV
  [[unroll]] for (uint k = 0; k < P; ++k) {
    const uint ra = pc.row_offset + rows[k], rb = pc.row_offset + rows[k + P];  // in the whole q|k|v
    // The pair's bias, loaded once for every batch row (a storage load is a per-lane loop here).
    const float bias_a = HAS_BIAS ? bias[ra] : 0.0, bias_c = HAS_BIAS ? bias[rb] : 0.0;
    [[unroll]] for (uint b = 0; b < BT; ++b) {
      const uint g = g0 + k * WG, bb = b0 + b;
      const bool live = g < npairs && bb < pc.B;
      float a = acc[k * BT + b], c = acc[(k + P) * BT + b];
      if (HAS_BIAS) a += bias_a, c += bias_c;
      // q and k turn; k is cached turned but left in y as projected (as rope_kv_write does).
      const bool q = ra < pc.hd, v = ra >= pc.hd + pc.kv;
      const vec2 t = v ? vec2(a, c) : rope_turn(a, c, (g % half_rot), rope_position(min(bb, pc.B - 1)));
      // The cache values of this pair, and (f16, mode 1) the neighbouring lane's: its values
      // follow ours in the cache row. Shuffled by every lane, outside any branch.
      const float na = subgroupShuffleXor(t.x, 1u), nc = subgroupShuffleXor(t.y, 1u);
      if (live) {
        const uint ya = pc.y_offset + bb * pc.y_stride;
        yout[ya + ra] = q ? t.x : a;
        yout[ya + rb] = q ? t.y : c;
      }
      if (!live || q) continue;  // the last subgroup operation of the iteration is behind us
      const uint cache_row = dyn(pc.slot, pc.slot_slot) + bb;
      const uint ea = ra - pc.hd - (v ? pc.kv : 0), eb = rb - pc.hd - (v ? pc.kv : 0);  // values in the K / V row
      if (KV_F16) {
        const uint base = (v ? pc.v_base : pc.k_base) / 2 + cache_row * (pc.kv / 2);
        if (MODE == 0) {  // the pair is one word
          const uint w = packHalf2x16(t);
          if (v) vc[base + ea / 2] = w; else kc[base + ea / 2] = w;
        } else if ((ea & 1u) == 0) {  // an even lane writes its words with the odd neighbour's
          const uint wa = packHalf2x16(vec2(t.x, na)), wb = packHalf2x16(vec2(t.y, nc));
          if (v) vc[base + ea / 2] = wa, vc[base + eb / 2] = wb;
          else kc[base + ea / 2] = wa, kc[base + eb / 2] = wb;
        }
      } else {
        const uint base = (v ? pc.v_base : pc.k_base) + cache_row * pc.kv;
        if (v) vc[base + ea] = floatBitsToUint(t.x), vc[base + eb] = floatBitsToUint(t.y);
        else kc[base + ea] = floatBitsToUint(t.x), kc[base + eb] = floatBitsToUint(t.y);
      }
    }
  }
  return;
#endif
  [[unroll]] for (uint r = 0; r < HALF; ++r) {
    const uint row = row0 + r * WG, out_row = pc.row_offset + row;
    // The row's bias, loaded once for every batch row (a row past n_out reads a neighbour's, unused).
    const float bias_r = HAS_BIAS ? bias[pc.row_offset + min(row, n_out - 1)] : 0.0;
    [[unroll]] for (uint b = 0; b < BT; ++b) {
      const uint bb = b0 + b;
      if (row < n_out && bb < pc.B) {
        float o = acc[r * BT + b];
        if (GLU) o = glu_act(o) * acc[(r + HALF) * BT + b];
        if (HAS_BIAS) o += bias_r;
        const uint yi = pc.y_offset + bb * pc.y_stride + out_row;
        yout[yi] = ACCUMULATE ? yout[yi] + o : o;
      }
    }
  }
}

void main() {
  for (uint g = 0; g < RG; ++g) row_group(gl_WorkGroupID.x * RG + g);
}
