#version 450
#extension GL_EXT_control_flow_attributes : enable
// y(B, N) [+]= x(B, K) · W(N, K)^T [+ bias(N)] — "rows per invocation" variant.
//
// Each invocation owns R whole output rows and walks all of K itself: no cross-lane reduction,
// no barriers, and every lane reads the same x elements (uniform loads, which CPU rasterizers
// broadcast cheaply). This suits devices where barriers and storage-buffer gathers are
// expensive (DeviceCaps::Quirks::matmul_rows_per_invocation); GPUs use matmul.comp's split-K.
// A row's sum runs block by block in a fixed order whatever B is, so results are batch-invariant.
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint R = 4;   // rows per invocation
layout(constant_id = 2) const uint BT = 8;  // activation rows per workgroup (gl_WorkGroupID.y tiles B)

#include "weights.glsl"

#ifdef X_TEXEL
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
  const uint row0 = gl_GlobalInvocationID.x * R;
  if (row0 >= pc.N) return;
  const uint b0 = gl_WorkGroupID.y * BT;
  const uint kb = (pc.K + 31) / 32;
  const uint full = pc.K / 32;  // blocks with no padding

  float acc[R * BT];
  for (uint i = 0; i < R * BT; ++i) acc[i] = 0.0;

  for (uint blk = 0; blk < kb; ++blk) {
    // x of this block for every live batch row; masked past K (padding may hold NaN).
    const bool tail = blk >= full;
    for (uint r = 0; r < R; ++r) {
      const uint row = min(row0 + r, pc.N - 1);  // clamped, not skipped: uniform control flow
      vec4 w[8];
      load_block(row, blk, kb, pc.N, w);
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
  for (uint r = 0; r < R; ++r) {
    const uint row = row0 + r;
    if (row >= pc.N) break;
    const uint out_row = pc.row_offset + row;
    for (uint b = 0; b < BT; ++b) {
      if (b0 + b >= pc.B) break;
      float v = acc[r * BT + b];
      if (pc.has_bias != 0) v += bias[out_row];
      const uint yi = pc.y_offset + (b0 + b) * pc.y_stride + out_row;
      yout[yi] = pc.accumulate != 0 ? yout[yi] + v : v;
    }
  }
}
