#version 450
// draft_select (DESIGN.md §2): keep the best B of pool nodes 1..count-1 by (score desc, index
// asc) — the order of order.glsl, NaN last, so exactly B nodes are kept whatever the scores — and
// renumber them in increasing pool index, root at 0. A parent scores >= its child and has a lower
// index, so it always ranks ahead: the kept set is a tree and its parents come first. (Scores
// from topk keep that: log-probs are <= 0 or NaN, and a NaN parent makes NaN children, which tie
// and lose on index. For scores that break it, a kept node whose parent was dropped hangs under
// the root: the output is still a well-formed tree.)
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
#include "order.glsl"
#include "vkspec/tree_limits.h"
#include "pair.glsl"
layout(set = 0, binding = 0, std430) readonly buffer PTok { uint p_token[]; } PAIRED(PTok_);
#define p_token PAIR_AT(PTok_).p_token
layout(set = 0, binding = 1, std430) readonly buffer PPar { int p_parent[]; } PAIRED(PPar_);
#define p_parent PAIR_AT(PPar_).p_parent
layout(set = 0, binding = 2, std430) readonly buffer PDep { uint p_depth[]; } PAIRED(PDep_);
#define p_depth PAIR_AT(PDep_).p_depth
layout(set = 0, binding = 3, std430) readonly buffer PSco { float p_score[]; } PAIRED(PSco_);
#define p_score PAIR_AT(PSco_).p_score
layout(set = 0, binding = 4, std430) readonly buffer PHead { uint p_head[]; } PAIRED(PHead_);
#define p_head PAIR_AT(PHead_).p_head
layout(set = 0, binding = 5, std430) writeonly buffer OTok { uint o_token[]; } PAIRED(OTok_);
#define o_token PAIR_AT(OTok_).o_token
layout(set = 0, binding = 6, std430) writeonly buffer OPar { int o_parent[]; } PAIRED(OPar_);
#define o_parent PAIR_AT(OPar_).o_parent
layout(set = 0, binding = 7, std430) writeonly buffer ODep { uint o_depth[]; } PAIRED(ODep_);
#define o_depth PAIR_AT(ODep_).o_depth
layout(set = 0, binding = 8, std430) writeonly buffer OSco { float o_score[]; } PAIRED(OSco_);
#define o_score PAIR_AT(OSco_).o_score
layout(set = 0, binding = 9, std430) writeonly buffer OHead { uint o_head[]; } PAIRED(OHead_);
#define o_head PAIR_AT(OHead_).o_head
layout(set = 0, binding = 10, std430) writeonly buffer OInfo { uint o_info[]; } PAIRED(OInfo_);
#define o_info PAIR_AT(OInfo_).o_info
layout(push_constant) uniform Push { uint count, B; } pc;
// count <= kTreeMaxNodes (host asserts)
shared uint key[kTreeMaxNodes];
shared uint kept[kTreeMaxNodes];
shared uint newidx[kTreeMaxNodes];  // 0 = dropped (the root is 0 too, and parents map through it)
void main() {
  const uint lid = gl_LocalInvocationID.x, n = pc.count;
  for (uint i = lid; i < n; i += WG) key[i] = order_key(p_score[i]);
  barrier();
  for (uint i = lid; i < n; i += WG) {
    const uint ki = key[i];
    uint rank = 0;
    for (uint j = 1; j < n; ++j) rank += (key[j] > ki || (key[j] == ki && j < i)) ? 1u : 0u;
    kept[i] = (i > 0 && rank < pc.B) ? 1u : 0u;
  }
  barrier();
  // New index = 1 + number of kept nodes before i (counting: n <= kTreeMaxNodes, no scan needed).
  for (uint i = lid; i < n; i += WG) {
    uint idx = 0;
    if (kept[i] != 0) {
      idx = 1;
      for (uint j = 1; j < i; ++j) idx += kept[j];
    }
    newidx[i] = idx;
  }
  barrier();
  for (uint i = 1 + lid; i < n; i += WG) {
    const uint o = newidx[i];
    if (o == 0) continue;
    o_token[o] = p_token[i];
    o_parent[o] = int(newidx[uint(p_parent[i])]);  // the root maps to 0
    o_depth[o] = p_depth[i];
    o_score[o] = p_score[i];
    o_head[o] = p_head[i];
  }
  if (lid == 0) {
    o_token[0] = p_token[0];
    o_parent[0] = -1;
    o_depth[0] = 0;
    o_score[0] = p_score[0];
    o_head[0] = p_head[0];
    o_info[kInfoNodes] = pc.B + 1;
  }
}
