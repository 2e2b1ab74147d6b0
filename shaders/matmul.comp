#version 450
#extension GL_EXT_control_flow_attributes : enable
// y(B, N) [+]= x(B, K) · W(N, K)^T [+ bias(N)]
//
// One workgroup computes ROWS output rows for up to BMAX activation rows (gl_WorkGroupID.y picks
// which BMAX-slice of the batch). Its invocations split K by 32-value blocks, so weight reads are
// contiguous across lanes; partial sums are reduced in a fixed order (subgroup add, then shared
// memory across subgroups, or shared memory alone), so a row's result does not depend on B or on
// how many rows share the dispatch: the kernel is batch-invariant, which keeps speculative
// decoding bit-exact against one-token decoding.
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ROWS = 4;          // output rows per workgroup
layout(constant_id = 2) const uint BMAX = 1;          // activation rows per workgroup
layout(constant_id = 3) const bool USE_SUBGROUP = false;  // subgroupAdd for the first reduction level
layout(constant_id = 4) const uint SLOTS = 64;  // == workgroup size: shared slots for the reduction

#include "weights.glsl"

#include "pair.glsl"
layout(set = 0, binding = 2, std430) readonly buffer X { vec4 x4[]; } PAIRED(X_);   // (B, x_stride/4)
#define x4 PAIR_AT(X_).x4
layout(set = 0, binding = 3, std430) buffer Y { float yout[]; } PAIRED(Y_);             // (B, y_stride)
#define yout PAIR_AT(Y_).yout
layout(set = 0, binding = 4, std430) readonly buffer Bias { float bias[]; } PAIRED(Bias_);  // (N_total)
#define bias PAIR_AT(Bias_).bias

layout(push_constant) uniform Push {
  uint K;           // columns (inner dimension)
  uint N;           // rows of this weight chunk
  uint row_offset;  // first output row of this chunk
  uint B;           // activation rows
  uint x_stride;    // floats between activation rows (multiple of 4)
  uint x_offset;    // first float of x (multiple of 4)
  uint y_stride;
  uint y_offset;
  uint accumulate;  // 1: y += result (fused residual add)
  uint has_bias;
} pc;

const uint MAXR = 8, MAXB = 16;  // register tile limits; ROWS <= MAXR, BMAX <= MAXB (host asserts)
shared float partial[SLOTS * ROWS * BMAX];  // [slot][r][b]

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint wg = gl_WorkGroupSize.x;
  const uint row0 = gl_WorkGroupID.x * ROWS;
  const uint b0 = gl_WorkGroupID.y * BMAX;
  const uint kb = (pc.K + 31) / 32;

  precise float acc[MAXR * MAXB];
  for (uint i = 0; i < ROWS * BMAX; ++i) acc[i] = 0.0;

  for (uint blk = lid; blk < kb; blk += wg) {
    const uint k0 = blk * 32;
    for (uint r = 0; r < ROWS; ++r) {
      const uint row = row0 + r;
      if (row >= pc.N) break;
      vec4 w[8];
      load_block(row, blk, kb, pc.N, w);
      for (uint b = 0; b < BMAX; ++b) {
        const uint bb = b0 + b;
        if (bb >= pc.B) break;
        const uint xb = (pc.x_offset + bb * pc.x_stride + k0) / 4;
        precise float s = 0.0;
        if (k0 + 32 <= pc.K) {
          for (uint i = 0; i < 8; ++i) s += dot(w[i], x4[xb + i]);
        } else {
          // Last, partial block: padded weights are zero but x past K may hold anything (NaN).
          for (uint i = 0; i < 8; ++i) {
            const uint k = k0 + 4 * i;
            if (k >= pc.K) break;
            vec4 xv = x4[xb + i];
            bvec4 live = lessThan(uvec4(k, k + 1, k + 2, k + 3), uvec4(pc.K));
            s += dot(w[i], mix(vec4(0.0), xv, live));
          }
        }
        acc[r * BMAX + b] += s;
      }
    }
  }

  // Reduce across the workgroup in a fixed order. Only the nb live batch columns are reduced, so
  // one pipeline (fixed BMAX) serves every batch size without paying for empty columns.
  const uint nb = min(BMAX, pc.B - b0);
  const uint E = ROWS * BMAX;
  uint slots;
  if (USE_SUBGROUP) {
    for (uint i = 0; i < ROWS * BMAX; ++i) acc[i] = subgroupAdd(acc[i]);
    if (subgroupElect())
      for (uint i = 0; i < ROWS * BMAX; ++i) partial[gl_SubgroupID * E + i] = acc[i];
    slots = gl_NumSubgroups;
  } else {
    for (uint i = 0; i < ROWS * BMAX; ++i) partial[lid * E + i] = acc[i];
    slots = wg;
  }
  barrier();
  // Pairwise tree over slots (slots need not be a power of two).
  uint n = slots;
  while (n > 1) {
    const uint half_n = (n + 1) / 2;
    for (uint i = lid; i < (n - half_n) * ROWS * nb; i += wg) {
      const uint slot = i / (ROWS * nb), e = i % (ROWS * nb);
      const uint off = (e / nb) * BMAX + e % nb;
      partial[slot * E + off] += partial[(slot + half_n) * E + off];
    }
    n = half_n;
    barrier();
  }
  for (uint i = lid; i < ROWS * nb; i += wg) {
    const uint r = i / nb, b = i % nb;
    const uint row = row0 + r, bb = b0 + b;
    if (row >= pc.N) continue;
    float v = partial[r * BMAX + b];
    const uint out_row = pc.row_offset + row;
    if (pc.has_bias != 0) v += bias[out_row];
    const uint yi = pc.y_offset + bb * pc.y_stride + out_row;
    yout[yi] = pc.accumulate != 0 ? yout[yi] + v : v;
  }
}
