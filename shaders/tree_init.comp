#version 450
// pool_init: node 0 of a candidate pool is the root, token = root_token[root_offset].
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
#include "pair.glsl"
layout(set = 0, binding = 0, std430) readonly buffer RootTok { uint root_token[]; } PAIRED(RootTok_);
#define root_token PAIR_AT(RootTok_).root_token
layout(set = 0, binding = 1, std430) writeonly buffer Tok { uint token[]; } PAIRED(Tok_);
#define token PAIR_AT(Tok_).token
layout(set = 0, binding = 2, std430) writeonly buffer Par { int parent[]; } PAIRED(Par_);
#define parent PAIR_AT(Par_).parent
layout(set = 0, binding = 3, std430) writeonly buffer Dep { uint depth[]; } PAIRED(Dep_);
#define depth PAIR_AT(Dep_).depth
layout(set = 0, binding = 4, std430) writeonly buffer Sco { float score[]; } PAIRED(Sco_);
#define score PAIR_AT(Sco_).score
layout(set = 0, binding = 5, std430) writeonly buffer Head { uint head[]; } PAIRED(Head_);
#define head PAIR_AT(Head_).head
#define DYN_BINDING 6
#include "dyn.glsl"
layout(push_constant) uniform Push { uint root_offset, root_slot; } pc;
void main() {
  if (gl_GlobalInvocationID.x != 0) return;
  token[0] = root_token[dyn(pc.root_offset, pc.root_slot)];
  parent[0] = -1;
  depth[0] = 0;
  score[0] = 0.0;
  head[0] = 0;
}
