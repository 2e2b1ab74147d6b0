#version 450
// Top-k of each row of logits x(T, V) with log-softmax scores: ids(T, k), logp(T, k)
// (topk_row.glsl). One workgroup per row.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
#include "reduce.glsl"
#include "pair.glsl"
layout(set = 0, binding = 0, std430) readonly buffer X { float xin[]; } PAIRED(X_);
#define xin PAIR_AT(X_).xin
layout(set = 0, binding = 1, std430) writeonly buffer Ids { uint ids[]; } PAIRED(Ids_);
#define ids PAIR_AT(Ids_).ids
layout(set = 0, binding = 2, std430) writeonly buffer Lp { float logp[]; } PAIRED(Lp_);
#define logp PAIR_AT(Lp_).logp
layout(push_constant) uniform Push { uint V, k, x_offset, x_stride, o_offset, o_stride; } pc;
#include "topk_row.glsl"

void main() {
  const uint row = gl_WorkGroupID.x;
  topk_row(pc.x_offset + row * pc.x_stride, pc.o_offset + row * pc.o_stride, pc.V, pc.k);
}
