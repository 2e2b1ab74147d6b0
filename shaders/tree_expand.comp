#version 450
// draft_expand: the frontier's children appended and ranked, the best next_F kept (expand.glsl).
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
#include "order.glsl"
#include "vkspec/tree_limits.h"
#include "pair.glsl"
layout(set = 0, binding = 0, std430) buffer Tok { uint token[]; } PAIRED(Tok_);
#define token PAIR_AT(Tok_).token
layout(set = 0, binding = 1, std430) buffer Par { int parent[]; } PAIRED(Par_);
#define parent PAIR_AT(Par_).parent
layout(set = 0, binding = 2, std430) buffer Dep { uint depth[]; } PAIRED(Dep_);
#define depth PAIR_AT(Dep_).depth
layout(set = 0, binding = 3, std430) buffer Sco { float score[]; } PAIRED(Sco_);
#define score PAIR_AT(Sco_).score
layout(set = 0, binding = 4, std430) buffer Head { uint head[]; } PAIRED(Head_);
#define head PAIR_AT(Head_).head
layout(set = 0, binding = 5, std430) readonly buffer Frontier { uint frontier[]; } PAIRED(Frontier_);
#define frontier PAIR_AT(Frontier_).frontier
layout(set = 0, binding = 6, std430) readonly buffer Ids { uint ids[]; } PAIRED(Ids_);
#define ids PAIR_AT(Ids_).ids
layout(set = 0, binding = 7, std430) readonly buffer Logp { float logp[]; } PAIRED(Logp_);
#define logp PAIR_AT(Logp_).logp
layout(set = 0, binding = 8, std430) writeonly buffer Next { uint next_frontier[]; } PAIRED(Next_);
#define next_frontier PAIR_AT(Next_).next_frontier
layout(set = 0, binding = 9, std430) readonly buffer HeadId { uint head_id[]; } PAIRED(HeadId_);  // [0]: the drafting head
#define head_id PAIR_AT(HeadId_).head_id
layout(push_constant) uniform Push {
  uint base, frontier_offset, F, topk_offset, topk_stride, k, next_offset, next_F;
} pc;
#include "expand.glsl"

void main() { expand_frontier(); }
