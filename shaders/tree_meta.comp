#version 450
#extension GL_EXT_control_flow_attributes : enable
// tree_meta (DESIGN.md §2, seed 000 §4.2–4.3): from the parent pointers of n nodes, in one
// workgroup: depth, the ancestor bit mask, positions t + depth, and the retrieve matrix (one row
// per leaf in increasing leaf index, root first, -1 padded). Walks are bounded by max_depth, the
// host's promise (the attention kernel supports at most kAttentionMaxDepth levels).
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
#include "vkspec/tree_limits.h"
const uint NMAX = kTreeMaxNodes;  // n <= NMAX (host asserts)
const uint MAXW = NMAX / 32;
#if defined(MERGE) || defined(ROUTE)
// merge_trees' parent pointers first (tree_merge.comp, seed 000 §4.1), from the two trees' at
// bindings 7 and 8 (n1 = the first tree's nodes, the root excluded; the second's are the rest):
// written out and kept in shared memory for the walks below. One dispatch for both steps.
// ROUTE: route_trees instead (tree_route.comp, seed 001 §5): μ of each tree's n1 nodes (the same
// route_mu.glsl at the same workgroup size, so the same bits and choice), then the chosen tree's parents,
// tokens, scores and heads, at bindings 7-8 and 11-18.
layout(set = 0, binding = 0, std430) writeonly buffer Par { int parent_out[]; };
layout(set = 0, binding = 7, std430) readonly buffer P1 { int parent1[]; };
layout(set = 0, binding = 8, std430) readonly buffer P2 { int parent2[]; };
shared int merged[NMAX];
int parent_of(int j) { return merged[j]; }
#else
layout(set = 0, binding = 0, std430) readonly buffer Par { int parent[]; };
int parent_of(int j) { return parent[j]; }
#endif
layout(set = 0, binding = 1, std430) writeonly buffer Dep { uint depth[]; };
layout(set = 0, binding = 2, std430) writeonly buffer Mask { uint mask[]; };  // (cap, words)
layout(set = 0, binding = 3, std430) writeonly buffer Pos { int pos[]; };
layout(set = 0, binding = 4, std430) writeonly buffer Ret { int retrieve[]; };  // (cap, max_depth+1)
layout(set = 0, binding = 5, std430) buffer Info { uint info[]; };
#define DYN_BINDING 6
#include "dyn.glsl"
// With `root`: token[0] = root_token[t], the root y[t] the step verifies from, written here so
// the drafters' pools need no dispatch of their own to hold it (their root's token is never read).
#if defined(MERGE) || defined(ROUTE)
#define ROOT_BINDING 9
#else
#define ROOT_BINDING 7
#endif
layout(set = 0, binding = ROOT_BINDING, std430) readonly buffer RootTok { uint root_token[]; };
#ifdef EMBED
layout(set = 0, binding = ROOT_BINDING + 1, std430) coherent buffer Tok { uint token[]; };  // read back below
#else
layout(set = 0, binding = ROOT_BINDING + 1, std430) writeonly buffer Tok { uint token[]; };
#endif
// EMBED: e_rows, C: the embedding table's rows and width; x_offset, x_stride: where node i's row goes.
layout(push_constant) uniform Push { uint n, t, max_depth, words, t_slot, n1, root, e_rows, C, x_offset, x_stride; } pc;
#ifdef EMBED
// EMBED (a variant per weight type, as embed.comp's): the verifier's input rows x(n, C) =
// table[token[i]] gathered here once every node's token is in place — embed.comp's values (the
// same load_block), one dispatch fewer a step. The table follows the kernel's other bindings
// (weights.glsl, texel or storage as it is laid out), then x.
#if defined(ROUTE)
#define W_BINDING 19
#elif defined(MERGE)
#define W_BINDING 11
#else
#define W_BINDING 9
#endif
#include "pair.glsl"
#include "weights.glsl"
layout(set = 0, binding = W_BINDING + 2, std430) writeonly buffer X { float x_out[]; };
#endif
#ifdef ROUTE
layout(set = 0, binding = 11, std430) readonly buffer S1 { float score1[]; };
layout(set = 0, binding = 12, std430) readonly buffer S2 { float score2[]; };
layout(set = 0, binding = 13, std430) readonly buffer T1 { uint token1[]; };
layout(set = 0, binding = 14, std430) readonly buffer T2 { uint token2[]; };
layout(set = 0, binding = 15, std430) readonly buffer H1 { uint head1[]; };
layout(set = 0, binding = 16, std430) readonly buffer H2 { uint head2[]; };
layout(set = 0, binding = 17, std430) writeonly buffer OS { float o_score[]; };
layout(set = 0, binding = 18, std430) writeonly buffer OH { uint o_head[]; };
#include "reduce.glsl"
#ifdef ROUTE
#include "route_mu.glsl"
#endif
#endif
shared uint has_child[NMAX];
shared uint node_depth[NMAX];
void main() {
  const uint lid = gl_LocalInvocationID.x, n = pc.n, W = pc.max_depth + 1;
#ifdef MERGE
  for (uint i = lid; i < n; i += WG) {
    int p = i <= pc.n1 ? parent1[i] : parent2[i - pc.n1];
    if (i > pc.n1 && p != 0) p += int(pc.n1);  // φ: the second tree's nodes follow the first's
    merged[i] = p;
    parent_out[i] = p;
  }
  if (lid == 0) info[kInfoNodes] = n;
  barrier();
#elif defined(ROUTE)
  float mu1, mu2;
  const bool first = route_first(pc.n1, mu1, mu2);
  for (uint i = lid; i < n; i += WG) {
    const int p = first ? parent1[i] : parent2[i];
    merged[i] = p;
    parent_out[i] = p;
    token[i] = first ? token1[i] : token2[i];
    o_score[i] = first ? score1[i] : score2[i];
    o_head[i] = first ? head1[i] : head2[i];
  }
  if (lid == 0) {
    info[kInfoNodes] = n;
    info[kInfoChosen] = first ? 1u : 2u;
    info[kInfoMu1] = floatBitsToUint(mu1);
    info[kInfoMu2] = floatBitsToUint(mu2);
  }
  barrier();
#endif
  for (uint i = lid; i < n; i += WG) has_child[i] = 0;
  barrier();
  for (uint i = lid; i < n; i += WG) {
    uint m[MAXW];
    for (uint w = 0; w < pc.words; ++w) m[w] = 0;
    uint d = 0;
    int j = int(i);
    while (true) {
      m[uint(j) / 32] |= 1u << (uint(j) % 32);
      const int p = parent_of(j);
      if (p < 0 || d == pc.max_depth + 1) break;  // bound: a deeper node is a caller error
      j = p;
      ++d;
    }
    for (uint w = 0; w < pc.words; ++w) mask[i * pc.words + w] = m[w];
    depth[i] = d;
    node_depth[i] = d;
    pos[i] = int(dyn(pc.t, pc.t_slot) + d);
    if (i > 0) has_child[uint(parent_of(int(i)))] = 1;  // same value from every child: benign
  }
  barrier();
  for (uint i = lid; i < n; i += WG) {
    if (has_child[i] != 0) continue;
    uint row = 0;
    for (uint j = 0; j < i; ++j) row += 1u - has_child[j];
    const uint d = min(node_depth[i], pc.max_depth);
    for (uint c = d + 1; c < W; ++c) retrieve[row * W + c] = -1;
    int j = int(i);
    for (int c = int(d); c >= 0; --c) {
      retrieve[row * W + uint(c)] = j;
      j = parent_of(j);
    }
  }
  if (lid == 0) {
    if (pc.root != 0) token[0] = root_token[dyn(pc.t, pc.t_slot)];
    uint leaves = 0;
    for (uint j = 0; j < n; ++j) leaves += 1u - has_child[j];
    info[kInfoLeaves] = leaves;
  }
#ifdef EMBED
  // Tokens 1..n-1 were in place before the dispatch (spliced, or written by ROUTE above), the
  // root's is written just above: this workgroup's writes, visible after the barrier.
  memoryBarrierBuffer();
  barrier();
  const uint kb = (pc.C + 31) / 32;
  for (uint e = lid; e < n * kb; e += WG) {
    const uint i = e / kb, blk = e % kb, id = token[i];
    if (id >= pc.e_rows) continue;  // as embed.comp: an id past the table never reads outside it
    vec4 v[8];
    load_block(id, blk, kb, pc.e_rows, v);
    for (uint c = 0; c < 32; ++c) {
      const uint k = blk * 32 + c;
      if (k < pc.C) x_out[pc.x_offset + i * pc.x_stride + k] = v[c / 4][c % 4];
    }
  }
#endif
}
