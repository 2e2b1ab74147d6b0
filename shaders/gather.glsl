// The inputs of draft level l (DESIGN.md §2, EAGLE-2 expansion), written by the expanding
// workgroup of tree_topk_expand.comp: for frontier node f of level l, its token, its parent's
// head output h (the feature the head continues from; row f of feat from feat_offset on) and its
// attention mask row over the head's draft slots.
//   level 1: every node's parent is the root, whose h is row `root_row` of `h_prev`.
//   level l >= 2: frontier[f] is a pool index base + r*K + j, whose parent ran as row r of the
//   previous level, so parent_row = (frontier[f] - base) / K.
// Mask row (l, f) = mask row (l-1, parent_row) | bit((l-1)*K + f): slot t + (l-1)*K + f is where
// the node's own K/V go when its level runs.
// Needs the names pool_token, gfrontier (the level's frontier), h_prev, tok, feat, mask.
#ifndef VKSPEC_GATHER_GLSL
#define VKSPEC_GATHER_GLSL

struct GatherArgs {
  uint K, level, base, frontier_offset, root_row, C, h_offset, h_stride, feat_offset, feat_stride, words;
};

// Node f of the level, by the invocations of one workgroup.
void gather_node(uint f, GatherArgs a) {
  const uint lid = gl_LocalInvocationID.x;
  const uint node = gfrontier[a.frontier_offset + f];
  const uint prow = a.level == 1 ? a.root_row : (node - a.base) / a.K;
  for (uint c = lid; c < a.C; c += WG) feat[a.feat_offset + f * a.feat_stride + c] = h_prev[a.h_offset + prow * a.h_stride + c];
  const uint row = (a.level - 1) * a.K + f;
  for (uint w = lid; w < a.words; w += WG) {
    uint bits = a.level == 1 ? 0u : mask[((a.level - 2) * a.K + prow) * a.words + w];
    if (w == row / 32) bits |= 1u << (row % 32);
    mask[row * a.words + w] = bits;
  }
  if (lid == 0) tok[f] = pool_token[node];
}
#endif
