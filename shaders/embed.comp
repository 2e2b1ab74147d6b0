#version 450
#extension GL_EXT_control_flow_attributes : enable
// out(T, C) = table[tokens[t]] — embedding gather from a weight matrix (V, C) in any weight type.
// One workgroup per row; each invocation decodes whole 32-value blocks.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
#include "weights.glsl"
#include "pair.glsl"
layout(set = 0, binding = 2, std430) readonly buffer Tok { uint tokens[]; } PAIRED(Tok_);
#define tokens PAIR_AT(Tok_).tokens
layout(set = 0, binding = 3, std430) writeonly buffer O { float o[]; } PAIRED(O_);
#define o PAIR_AT(O_).o
#define DYN_BINDING 4
#include "dyn.glsl"
layout(push_constant) uniform Push { uint T, C, row_begin, rows, tok_offset, o_offset, o_stride, tok_slot; } pc;
void main() {
  const uint t = gl_WorkGroupID.x;
  // A table split into row chunks is gathered by one dispatch per chunk; each writes the rows
  // whose token falls in its range. Ids outside the vocabulary are rejected on the host, and
  // this range test also keeps a bad id from ever reading outside the table.
  const uint id = tokens[dyn(pc.tok_offset, pc.tok_slot) + t];
  if (id < pc.row_begin || id - pc.row_begin >= pc.rows) return;
  const uint tok = id - pc.row_begin;
  const uint kb = (pc.C + 31) / 32;
  for (uint blk = gl_LocalInvocationID.x; blk < kb; blk += WG) {
    vec4 v[8];
    load_block(tok, blk, kb, pc.rows, v);
    for (uint i = 0; i < 32; ++i) {
      const uint c = blk * 32 + i;
      if (c < pc.C) o[pc.o_offset + t * pc.o_stride + c] = v[i / 4][i % 4];
    }
  }
}
