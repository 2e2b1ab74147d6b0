#version 450
// Inputs of one draft level (DESIGN.md §2, EAGLE-2 expansion): for each of the K frontier nodes
// of level l, its token, its parent's head output h (the feature the head continues from; row f
// of feat from feat_offset on) and its attention mask row over the head's draft slots.
//   level 1: every node's parent is the root, whose h is row `root_row` of `h_prev`.
//   level l >= 2: frontier[f] is a pool index base + r*K + j, whose parent ran as row r of the
//   previous level, so parent_row = (frontier[f] - base) / K.
// Mask row (l, f) = mask row (l-1, parent_row) | bit((l-1)*K + f): slot t + (l-1)*K + f is where
// the node's own K/V go when its level runs.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
#include "pair.glsl"
layout(set = 0, binding = 0, std430) readonly buffer PoolTok { uint pool_token[]; } PAIRED(PoolTok_);
#define pool_token PAIR_AT(PoolTok_).pool_token
layout(set = 0, binding = 1, std430) readonly buffer Frontier { uint frontier[]; } PAIRED(Frontier_);
#define frontier PAIR_AT(Frontier_).frontier
layout(set = 0, binding = 2, std430) readonly buffer HPrev { float h_prev[]; } PAIRED(HPrev_);
#define h_prev PAIR_AT(HPrev_).h_prev
layout(set = 0, binding = 3, std430) writeonly buffer Tok { uint tok[]; } PAIRED(Tok_);
#define tok PAIR_AT(Tok_).tok
layout(set = 0, binding = 4, std430) writeonly buffer Feat { float feat[]; } PAIRED(Feat_);
#define feat PAIR_AT(Feat_).feat
layout(set = 0, binding = 5, std430) buffer Mask { uint mask[]; } PAIRED(Mask_);  // (levels*K, words)
#define mask PAIR_AT(Mask_).mask
layout(push_constant) uniform Push {
  uint K, level, base, frontier_offset, root_row, C, h_stride, feat_offset, feat_stride, words;
} pc;
void main() {
  const uint f = gl_WorkGroupID.x, lid = gl_LocalInvocationID.x;
  const uint node = frontier[pc.frontier_offset + f];
  const uint prow = pc.level == 1 ? pc.root_row : (node - pc.base) / pc.K;
  for (uint c = lid; c < pc.C; c += WG) feat[pc.feat_offset + f * pc.feat_stride + c] = h_prev[prow * pc.h_stride + c];
  const uint row = (pc.level - 1) * pc.K + f;
  for (uint w = lid; w < pc.words; w += WG) {
    uint bits = pc.level == 1 ? 0u : mask[((pc.level - 2) * pc.K + prow) * pc.words + w];
    if (w == row / 32) bits |= 1u << (row % 32);
    mask[row * pc.words + w] = bits;
  }
  if (lid == 0) tok[f] = pool_token[node];
}
