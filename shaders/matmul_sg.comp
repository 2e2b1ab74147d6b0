#version 450
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
layout(set = 0, binding = 2) uniform usamplerBuffer x_tex;
vec4 load_x(uint i) { return uintBitsToFloat(texelFetch(x_tex, int(i))); }
#else
layout(set = 0, binding = 2, std430) readonly buffer X { vec4 x4[]; };
vec4 load_x(uint i) { return x4[i]; }
#endif
layout(set = 0, binding = 3, std430) buffer Y { float y[]; };
layout(set = 0, binding = 4, std430) readonly buffer Bias { float bias[]; };

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
    const bool tail = blk >= full;
    for (uint r = 0; r < R; ++r) {
      vec4 w[8];
      load_block(min(row0 + r, pc.N - 1), blk, kb, w);
      for (uint b = 0; b < BT; ++b) {
        if (b0 + b < pc.B) {
          const uint xb = (pc.x_offset + (b0 + b) * pc.x_stride) / 4 + blk * 8;
          float s = 0.0;
          for (uint i = 0; i < 8; ++i) {
            vec4 xv = load_x(xb + i);
            if (tail) {
              const uint k = blk * 32 + 4 * i;
              xv = mix(vec4(0.0), xv, lessThan(uvec4(k, k + 1, k + 2, k + 3), uvec4(pc.K)));
            }
            s += dot(w[i], xv);
          }
          acc[r * BT + b] += s;
        }
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
        y[yi] = pc.accumulate != 0 ? y[yi] + o : o;
      }
    }
}
