#version 450
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
// Two folds save a dispatch and a round trip through memory each:
// - NORM: the RMSNorm that feeds this matmul. y = (W · (x ⊙ g)) · rsqrt(mean(x²) + eps): every lane
//   already fetches all of x, so it sums x² on the way and scales its outputs at the end.
// - GLU: W is gate rows then up rows (2F); a lane owns R/2 gate rows and the matching up rows
//   and writes y(B, F) = silu(gate) · up.
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint R = 2;   // rows per invocation
layout(constant_id = 2) const uint BT = 4;  // activation rows per workgroup (gl_WorkGroupID.y tiles B)
layout(constant_id = 3) const bool NORM = false;
layout(constant_id = 4) const bool GLU = false;
layout(constant_id = 5) const uint XS = 0;   // > 0: the subgroup size, and x is fetched once per subgroup
layout(constant_id = 6) const uint XT = 1;   // with XS: texels of x each lane fetches per piece, ceil(2·BT / XS)
const uint XSD = XS + (XS == 0 ? 1 : 0);  // a divisor even where the shuffle is off

#include "weights.glsl"

#include "pair.glsl"
layout(set = 0, binding = 2) uniform usamplerBuffer PAIRED(x_tex_);
vec4 load_x(uint i) { return uintBitsToFloat(TEXEL_FETCH(x_tex, int(i))); }
layout(set = 0, binding = 3, std430) buffer Y { float yout[]; } PAIRED(Y_);
#define yout PAIR_AT(Y_).yout
layout(set = 0, binding = 4, std430) readonly buffer Bias { float bias[]; } PAIRED(Bias_);
#define bias PAIR_AT(Bias_).bias
layout(set = 0, binding = 5) uniform usamplerBuffer PAIRED(g_tex_);  // NORM: the norm's weight (K,)
vec4 load_g(uint i) { return uintBitsToFloat(TEXEL_FETCH(g_tex, int(i))); }

layout(push_constant) uniform Push {
  uint K, N, row_offset, B, x_stride, x_offset, y_stride, y_offset, accumulate, has_bias;
  float eps;
} pc;

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

#if defined(WT_F16) || defined(WT_F32) || defined(WT_Q8_0)
#define PIECES 1
// Values 8p .. 8p+7 of a 32-value block (unscaled).
void load_piece(uint row, uint block, uint kb, uint p, out vec4 lo, out vec4 hi) {
  const uint t0 = (row * kb + block) * TEXELS_PER_BLOCK;
#if defined(WT_F32)
  lo = uintBitsToFloat(load_w(t0 + 2 * p));
  hi = uintBitsToFloat(load_w(t0 + 2 * p + 1));
#elif defined(WT_F16)
  const uvec4 t = load_w(t0 + p);
  lo = vec4(unpackHalf2x16(t.x), unpackHalf2x16(t.y));
  hi = vec4(unpackHalf2x16(t.z), unpackHalf2x16(t.w));
#else
  const uvec4 t = load_w(t0 + p / 2);
  const uint u = (p & 1u) != 0 ? t.z : t.x, v = (p & 1u) != 0 ? t.w : t.y;
  lo = vec4(ivec4(int(u << 24), int(u << 16), int(u << 8), int(u)) >> 24);
  hi = vec4(ivec4(int(v << 24), int(v << 16), int(v << 8), int(v)) >> 24);
#endif
}
#endif

void main() {
  const uint b0 = gl_WorkGroupID.y * BT;
  const uint kb = (pc.K + 31) / 32, full = pc.K / 32;
  // Output rows: R of them, or with GLU R/2 gate rows and the up rows F further on.
  const uint HALF = GLU ? R / 2 : R, n_out = GLU ? pc.N / 2 : pc.N;
  const uint row0 = gl_GlobalInvocationID.x * HALF;
  uint rows[R];
  for (uint r = 0; r < R; ++r)  // clamped, not skipped: uniform control flow
    rows[r] = r < HALF ? min(row0 + r, n_out - 1) : n_out + min(row0 + r - HALF, n_out - 1);
  float ss[BT];
  for (uint b = 0; b < BT; ++b) ss[b] = 0.0;
  uint xrow[BT];
  for (uint b = 0; b < BT; ++b) xrow[b] = (pc.x_offset + min(b0 + b, pc.B - 1) * pc.x_stride) / 4;

  // XS: a piece of x for the tile is 2·BT texels; lane l fetches texels l, l + XS, ... of them
  // (duplicates past the end) and every lane takes each texel from its owner by a shuffle, so
  // the per-lane gathers a texel fetch costs on a CPU happen once per subgroup, not per lane.
  const uint lane = XS > 0 ? gl_SubgroupInvocationID : 0;
  uint xsrc[XT];
  for (uint j = 0; j < XT; ++j) {
    const uint i = min(lane + XS * j, 2 * BT - 1);
    xsrc[j] = xrow[i / 2] + (i & 1u);
  }

  float acc[R * BT];
  for (uint i = 0; i < R * BT; ++i) acc[i] = 0.0;

  for (uint blk = 0; blk < kb; ++blk) {
    const bool tail = blk >= full;  // padding past K may hold anything, NaN included
#ifdef PIECES
    float part[R * BT];
    for (uint i = 0; i < R * BT; ++i) part[i] = 0.0;
    for (uint p = 0; p < 4; ++p) {
      vec4 wl[R], wh[R];
      for (uint r = 0; r < R; ++r) load_piece(rows[r], blk, kb, p, wl[r], wh[r]);
      vec4 xp[XT], gp = vec4(1.0);
      if (XS > 0) {
        for (uint j = 0; j < XT; ++j) xp[j] = load_x(xsrc[j] + blk * 8 + 2 * p);
        if (NORM) gp = load_g(blk * 8 + 2 * p + (lane & 1u));
      }
      for (uint b = 0; b < BT; ++b) {
        vec4 xl, xh;
        if (XS > 0) {
          xl = subgroupShuffle(xp[(2 * b) / XSD], (2 * b) % XSD);
          xh = subgroupShuffle(xp[(2 * b + 1) / XSD], (2 * b + 1) % XSD);
          finish_x8(blk, p, tail, subgroupShuffle(gp, 0), subgroupShuffle(gp, 1), ss[b], xl, xh);
        } else {
          load_x8(xrow[b], blk, p, tail, ss[b], xl, xh);
        }
        for (uint r = 0; r < R; ++r) part[r * BT + b] += dot(wl[r], xl) + dot(wh[r], xh);
      }
    }
#if defined(WT_Q8_0)
    for (uint r = 0; r < R; ++r) {
      const float sc = load_scale(rows[r] * kb + blk);
      for (uint b = 0; b < BT; ++b) acc[r * BT + b] += part[r * BT + b] * sc;
    }
#else
    for (uint i = 0; i < R * BT; ++i) acc[i] += part[i];
#endif
#else
    for (uint r = 0; r < R; ++r) {
      vec4 w[8];
      float sc;
      load_block_unscaled(rows[r], blk, kb, w, sc);
      for (uint b = 0; b < BT; ++b) {
        float s = 0.0, unused = 0.0;
        for (uint p = 0; p < 4; ++p) {
          vec4 xl, xh;
          if (r == 0) load_x8(xrow[b], blk, p, tail, ss[b], xl, xh);  // x² summed once
          else load_x8(xrow[b], blk, p, tail, unused, xl, xh);
          s += dot(w[2 * p], xl) + dot(w[2 * p + 1], xh);
        }
        acc[r * BT + b] += s * sc;
      }
    }
#endif
  }
  for (uint b = 0; b < BT; ++b) {
    const float scale = NORM ? inversesqrt(ss[b] / float(pc.K) + pc.eps) : 1.0;
    for (uint r = 0; r < R; ++r) acc[r * BT + b] *= scale;
  }
  for (uint r = 0; r < HALF; ++r)
    for (uint b = 0; b < BT; ++b) {
      const uint row = row0 + r, bb = b0 + b;
      if (row < n_out && bb < pc.B) {
        const uint out_row = pc.row_offset + row;
        float o = acc[r * BT + b];
        if (GLU) o = o / (1.0 + exp(-o)) * acc[(r + HALF) * BT + b];
        if (pc.has_bias != 0) o += bias[out_row];
        const uint yi = pc.y_offset + bb * pc.y_stride + out_row;
        yout[yi] = pc.accumulate != 0 ? yout[yi] + o : o;
      }
    }
}
