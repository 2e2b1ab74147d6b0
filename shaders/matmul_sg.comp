#version 450
#extension GL_EXT_control_flow_attributes : enable
// y(B, N) [+]= x(B, K) · W(N, K)^T [+ bias(N)] — one subgroup per workgroup, split-K.
//
// The lanes of one subgroup walk the 32-value blocks of R rows together (lane l takes blocks
// l, l+S, ...), so each SIMD load touches consecutive memory; subgroupAdd then folds the lanes —
// no shared memory, no barrier. Loops have specialization-constant trip counts and predicated
// bodies so the compiler keeps the R x BT accumulators in registers. Every B uses the same
// pipeline and a row's order of operations never depends on B: results are batch-invariant.
// Requires gl_NumSubgroups == 1 (host: workgroup size == required subgroup size, full subgroups).
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint R = 8;   // rows per workgroup
layout(constant_id = 2) const uint BT = 4;  // activation rows per workgroup

#include "weights.glsl"

#ifdef X_TEXEL
// x through a texel view too: on CPU rasterizers a storage load is a bounds-checked per-lane,
// per-component loop, a texel fetch one gather of 16 bytes.
#include "pair.glsl"
TEXEL_BINDING(2, x_tex)
vec4 load_x(uint i) { return uintBitsToFloat(TEXEL_FETCH(x_tex, int(i))); }
#else
layout(set = 0, binding = 2, std430) readonly buffer X { vec4 x4[]; } PAIRED(X_);
#define x4 PAIR_AT(X_).x4
vec4 load_x(uint i) { return x4[i]; }
#endif
layout(set = 0, binding = 3, std430) buffer Y { float yout[]; } PAIRED(Y_);
#define yout PAIR_AT(Y_).yout
layout(set = 0, binding = 4, std430) readonly buffer Bias { float bias[]; } PAIRED(Bias_);
#define bias PAIR_AT(Bias_).bias

layout(push_constant) uniform Push {
  uint K, N, row_offset, B, x_stride, x_offset, y_stride, y_offset, accumulate, has_bias;
} pc;

void main() {
  const uint lane = gl_LocalInvocationID.x, S = gl_WorkGroupSize.x;
  const uint row0 = gl_WorkGroupID.x * R, b0 = gl_WorkGroupID.y * BT;
  const uint kb = (pc.K + 31) / 32, full = pc.K / 32;

  float acc[R * BT];
  for (uint i = 0; i < R * BT; ++i) acc[i] = 0.0;

  for (uint blk = lane; blk < kb; blk += S) {
    // x of this block for every live activation row, loaded once and reused by all R rows
    // (re-fetching it per row made x, not W, the dominant load on CPU rasterizers).
    const bool tail = blk >= full;
    vec4 xs[BT * 8];
    for (uint b = 0; b < BT; ++b) {
      const uint xb = (pc.x_offset + min(b0 + b, pc.B - 1) * pc.x_stride) / 4 + blk * 8;
      for (uint i = 0; i < 8; ++i) {
        vec4 xv = load_x(xb + i);
        if (tail) {  // padding past K may hold anything, NaN included
          const uint k = blk * 32 + 4 * i;
          xv = mix(vec4(0.0), xv, lessThan(uvec4(k, k + 1, k + 2, k + 3), uvec4(pc.K)));
        }
        xs[b * 8 + i] = xv;
      }
    }
    for (uint r = 0; r < R; ++r) {
      vec4 w[8];
      float scale;  // q8_0: applied once per block, after the dot (1 for f16/f32)
      load_block_unscaled(min(row0 + r, pc.N - 1), blk, kb, pc.N, w, scale);
      for (uint b = 0; b < BT; ++b) {
        // Same order of operations for every (R, BT): a row's result does not depend on the
        // tile the host picked for this batch size.
        float s = 0.0;
        for (uint i = 0; i < 8; ++i) s += dot(w[i], xs[b * 8 + i]);
        acc[r * BT + b] += s * scale;
      }
    }
  }
  for (uint r = 0; r < R; ++r)
    for (uint b = 0; b < BT; ++b) {
      const float v = subgroupAdd(acc[r * BT + b]);
      const uint row = row0 + r, bb = b0 + b;
      if (lane == 0 && row < pc.N && bb < pc.B) {
        const uint out_row = pc.row_offset + row;
        const float o = pc.has_bias != 0 ? v + bias[out_row] : v;
        const uint yi = pc.y_offset + bb * pc.y_stride + out_row;
        yout[yi] = pc.accumulate != 0 ? yout[yi] + o : o;
      }
    }
}
