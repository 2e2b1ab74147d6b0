#version 450
#extension GL_EXT_control_flow_attributes : enable
// The step from one draft level to the next in one dispatch: topk (topk_row.glsl) of the F
// frontier rows' logits, one workgroup per row, then, in whichever workgroup finishes its row
// last, draft_expand (expand.glsl) over them and, when `gather` is set, the inputs of the next
// level from the new frontier (gather.glsl). Each workgroup publishes its row (ids, logp) and then counts itself in
// `arrivals`; the one that counts F reads every row and expands, then sets the counter back to 0
// for the next dispatch. The result is the same bits as topk then draft_expand: which workgroup
// expands changes nothing it reads.
//
// Cross-workgroup visibility inside one dispatch: the rows and the counter are `coherent`, each
// writer orders its row before its increment by memoryBarrierBuffer(), and the last workgroup
// orders its reads after the increment it observed by another (GLSL 4.50 §4.10, §8.17; the
// single-pass reduction pattern). No workgroup ever waits for another, so no forward-progress
// guarantee between workgroups is needed.
//
// EMBED (a variant per weight type, like embed.comp's): the gather also writes each next-level
// node's token embedding (the table at bindings 16/17, weights.glsl) into row f of the head's
// input from e_offset on, through feat's binding — embed.comp's values, one dispatch fewer a level.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
#include "reduce.glsl"
#include "vkspec/tree_limits.h"
#include "pair.glsl"
layout(set = 0, binding = 0, std430) readonly buffer X { float xin[]; } PAIRED(X_);
#define xin PAIR_AT(X_).xin
layout(set = 0, binding = 1, std430) coherent buffer Tok { uint token[]; } PAIRED(Tok_);
#define token PAIR_AT(Tok_).token
layout(set = 0, binding = 2, std430) buffer Par { int parent[]; } PAIRED(Par_);
#define parent PAIR_AT(Par_).parent
layout(set = 0, binding = 3, std430) buffer Dep { uint depth[]; } PAIRED(Dep_);
#define depth PAIR_AT(Dep_).depth
layout(set = 0, binding = 4, std430) buffer Sco { float score[]; } PAIRED(Sco_);
#define score PAIR_AT(Sco_).score
layout(set = 0, binding = 5, std430) buffer Head { uint head[]; } PAIRED(Head_);
#define head PAIR_AT(Head_).head
layout(set = 0, binding = 6, std430) readonly buffer Frontier { uint frontier[]; } PAIRED(Frontier_);
#define frontier PAIR_AT(Frontier_).frontier
layout(set = 0, binding = 7, std430) coherent buffer Ids { uint ids[]; } PAIRED(Ids_);
#define ids PAIR_AT(Ids_).ids
layout(set = 0, binding = 8, std430) coherent buffer Logp { float logp[]; } PAIRED(Logp_);
#define logp PAIR_AT(Logp_).logp
layout(set = 0, binding = 9, std430) coherent buffer Next { uint next_frontier[]; } PAIRED(Next_);
#define next_frontier PAIR_AT(Next_).next_frontier
layout(set = 0, binding = 10, std430) readonly buffer HeadId { uint head_id[]; } PAIRED(HeadId_);
#define head_id PAIR_AT(HeadId_).head_id
layout(set = 0, binding = 11, std430) coherent buffer Arrivals { uint arrivals; } PAIRED(Arrivals_);
#define arrivals PAIR_AT(Arrivals_).arrivals
// gather.glsl's: the next level's frontier is the one expand writes; the parents' h, the level's
// tokens, features and mask rows.
#define pool_token token
#define gfrontier next_frontier
layout(set = 0, binding = 12, std430) readonly buffer HPrev { float h_prev[]; } PAIRED(HPrev_);
#define h_prev PAIR_AT(HPrev_).h_prev
layout(set = 0, binding = 13, std430) writeonly buffer GTok { uint tok[]; } PAIRED(GTok_);
#define tok PAIR_AT(GTok_).tok
layout(set = 0, binding = 14, std430) writeonly buffer Feat { float feat[]; } PAIRED(Feat_);
#define feat PAIR_AT(Feat_).feat
layout(set = 0, binding = 15, std430) buffer Mask { uint mask[]; } PAIRED(Mask_);  // (levels*K, words)
#define mask PAIR_AT(Mask_).mask
#ifdef EMBED
#define W_BINDING 16
#include "weights.glsl"
#endif
#include "gather.glsl"
layout(push_constant) uniform Push {
  uint base, frontier_offset, F, topk_offset, topk_stride, k, next_offset, next_F;  // expand.glsl's
  uint V, x_offset, x_stride, gather;
  GatherArgs g;
  uint embed, e_rows, e_offset;  // EMBED: the table's rows; where row f's C values go in feat
} pc;
#include "topk_row.glsl"
#include "expand.glsl"

shared bool last;

void main() {
  const uint row = gl_WorkGroupID.x, lid = gl_LocalInvocationID.x;
  topk_row(pc.x_offset + row * pc.x_stride, pc.topk_offset + row * pc.topk_stride, pc.V, pc.k);
  memoryBarrierBuffer();  // invocation 0 wrote the row: visible before it is counted
  if (lid == 0) last = atomicAdd(arrivals, 1u) == pc.F - 1u;
  barrier();
  if (!last) return;
  memoryBarrierBuffer();
  expand_frontier();
  if (lid == 0) arrivals = 0u;
  if (pc.gather == 0u) return;
  memoryBarrierBuffer();  // the new nodes' tokens and the next frontier, for every invocation
  barrier();
  for (uint f = 0; f < pc.g.K; ++f) gather_node(f, pc.g);
#ifdef EMBED
  // The tokens just gathered are the new nodes' pool tokens (read back from the pool, not from
  // tok, which this workgroup wrote without a barrier). Ids are < V = the table's rows; the
  // range test keeps any other from reading outside it, as in embed.comp.
  if (pc.embed == 0u) return;
  const uint kb = (pc.g.C + 31) / 32;
  for (uint f = 0; f < pc.g.K; ++f) {
    const uint id = token[next_frontier[pc.g.frontier_offset + f]];
    if (id >= pc.e_rows) continue;
    for (uint blk = lid; blk < kb; blk += WG) {
      vec4 v[8];
      load_block(id, blk, kb, pc.e_rows, v);
      for (uint i = 0; i < 32; ++i) {
        const uint c = blk * 32 + i;
        if (c < pc.g.C) feat[pc.e_offset + f * pc.g.feat_stride + c] = v[i / 4][i % 4];
      }
    }
  }
#endif
}
