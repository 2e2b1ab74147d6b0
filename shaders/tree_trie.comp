#version 450
// merge_trie (DESIGN.md §9, our extension; SpecInfer-style token-tree merge): both heads'
// candidate pools in one index space, u < count1 → pool 1 node u, u >= count1 → pool 2 node
// u - count1 + 1 (pool 2's root is pool 1's). Nodes with the same token path from the root fold
// into the first of them (its canonical node): score = max, head = 1 | 2 (3 = both). Then the
// best n_out - 1 canonical nodes by (score desc, index asc) are kept and written parents first.
// A folded parent scores >= its folded children and has a lower canonical index, so the kept set
// is a tree. Scores are ranked and folded in the order of order.glsl (NaN last, -0 == +0): the
// ranks are a permutation, so at most n_out - 1 nodes are kept whatever the scores.
//
// Loop trip counts are kept small on purpose: lavapipe (gallivm) counts every loop iteration of
// an invocation against one budget of 65535 and silently ends all loops once it is spent
// (DeviceCaps::Quirks::loop_iteration_limit). So no phase is (levels x nodes), folding scans
// only its own level through a depth-sorted order, and every scan over nodes reads CHUNK nodes
// per iteration (an unrolled inner loop), which is the same work in 1/CHUNK of the iterations.
// merge_trie (src/ops/tree.cpp) mirrors the resulting bound.
// Shared memory: 3 arrays of kTrieMaxNodes u32 + 66 level offsets = 12.3 KiB.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
#include "order.glsl"
#include "vkspec/tree_limits.h"
const uint MMAX = kTrieMaxNodes;
const uint CHUNK = 16;
const uint LMAX = kTreeMaxPath;  // depths are counted up to this (a cycle stops there)
layout(set = 0, binding = 0, std430) readonly buffer T1 { uint tok1[]; };
layout(set = 0, binding = 1, std430) readonly buffer P1 { int par1[]; };
layout(set = 0, binding = 2, std430) readonly buffer S1 { float sc1[]; };
layout(set = 0, binding = 3, std430) readonly buffer T2 { uint tok2[]; };
layout(set = 0, binding = 4, std430) readonly buffer P2 { int par2[]; };
layout(set = 0, binding = 5, std430) readonly buffer S2 { float sc2[]; };
layout(set = 0, binding = 6, std430) writeonly buffer OTok { uint o_token[]; };
layout(set = 0, binding = 7, std430) writeonly buffer OPar { int o_parent[]; };
layout(set = 0, binding = 8, std430) writeonly buffer ODep { uint o_depth[]; };
layout(set = 0, binding = 9, std430) writeonly buffer OSco { float o_score[]; };
layout(set = 0, binding = 10, std430) writeonly buffer OHead { uint o_head[]; };
layout(set = 0, binding = 11, std430) writeonly buffer OInfo { uint o_info[]; };
// With `root`: the root's token (and the padding leaves', below) is root_token[t], the root y[t]
// itself, not pool 1's node 0 — a step's pools leave their root token unwritten.
layout(set = 0, binding = 12, std430) readonly buffer RootTok { uint root_token[]; };
#define DYN_BINDING 13
#include "dyn.glsl"
layout(push_constant) uniform Push { uint count1, count2, n_out, root, t, t_slot; } pc;
uint root_tok() { return pc.root != 0 ? root_token[dyn(pc.t, pc.t_slot)] : tok1[0]; }

// sa[u] = keep << 31 | depth << 16 | canonical index
// sb    = while folding: sb[i] = u << 16 | canonical parent of u, i = u's place in depth order
//         (depth, then index); after folding: head bits of a canonical node u (0 = not
//         canonical) | new index << 2, at sb[u]
shared uint sa[MMAX];
shared uint sb[MMAX];
shared float ss[MMAX];  // score; the folded max at canonical nodes
shared uint level_start[LMAX + 2];  // depth order: level d is sb[level_start[d] .. level_start[d + 1])
shared uint max_depth, kept_count;

uint tok(uint u) { return u < pc.count1 ? tok1[u] : tok2[u - pc.count1 + 1]; }
float sc(uint u) { return u < pc.count1 ? sc1[u] : sc2[u - pc.count1 + 1]; }
uint from(uint u) { return u < pc.count1 ? 1u : 2u; }
int par(uint u) {
  if (u < pc.count1) return par1[u];
  const int p = par2[u - pc.count1 + 1];
  return p == 0 ? 0 : int(pc.count1) + p - 1;
}
uint canon(uint u) { return sa[u] & 0xffffu; }
uint depth_of(uint u) { return (sa[u] >> 16) & 0x7fffu; }

void main() {
  const uint lid = gl_LocalInvocationID.x, M = pc.count1 + pc.count2 - 1;
  for (uint d = lid; d < LMAX + 2; d += WG) level_start[d] = 0;
  if (lid == 0) {
    max_depth = 0;
    kept_count = 0;
  }
  barrier();
  for (uint u = lid; u < M; u += WG) {
    uint d = 0;
    for (int j = par(u); j >= 0 && d < LMAX; j = par(uint(j))) ++d;
    sa[u] = (d << 16) | (u == 0 ? 0u : 0xffffu);
    ss[u] = sc(u);
    atomicMax(max_depth, d);
    atomicAdd(level_start[d + 1], 1u);  // counts now, offsets below
  }
  barrier();
  if (lid == 0)
    for (uint d = 1; d < LMAX + 2; ++d) level_start[d] += level_start[d - 1];
  barrier();
  // Depth order, stable: a node's place is its level's start plus the nodes of its level before it.
  for (uint u = lid; u < M; u += WG) {
    const uint d = depth_of(u);
    uint before = 0;
    for (uint v0 = 0; v0 < u; v0 += CHUNK)
      [[unroll]] for (uint k = 0; k < CHUNK; ++k) {
        const uint v = v0 + k;
        if (v < u && depth_of(v) == d) ++before;
      }
    sb[level_start[d] + before] = u << 16;
  }
  barrier();
  // Canonical nodes level by level: a node folds into the first node of its level with the same
  // canonical parent and token (the parents' canonical indices are final from the level above).
  // Depth order within a level is index order, so the first match is the lowest index.
  const uint levels = max_depth;
  for (uint d = 1; d <= levels; ++d) {
    const uint s = level_start[d], e = level_start[d + 1];
    for (uint i = s + lid; i < e; i += WG) {
      const uint u = sb[i] >> 16;
      sb[i] = (u << 16) | canon(uint(par(u)));
    }
    barrier();
    for (uint i = s + lid; i < e; i += WG) {
      const uint u = sb[i] >> 16, cp = sb[i] & 0xffffu, t = tok(u);
      uint c = u;
      for (uint j0 = s; j0 < i && c == u; j0 += CHUNK)
        [[unroll]] for (uint k = 0; k < CHUNK; ++k) {
          const uint j = j0 + k;
          if (j < i && c == u) {
            const uint w = sb[j];
            if ((w & 0xffffu) == cp && tok(w >> 16) == t) c = w >> 16;
          }
        }
      sa[u] = (d << 16) | c;
    }
    barrier();
  }
  // Fold: each canonical node gathers its members' max score and head bits. Only the owner of
  // canonical u reads or writes ss[u]; the members it reads are never written.
  for (uint u = lid; u < M; u += WG) {
    if (u == 0 || canon(u) != u) {
      sb[u] = 0;
      continue;
    }
    float s = ss[u];
    uint hb = from(u);
    for (uint v0 = u + 1; v0 < M; v0 += CHUNK)
      [[unroll]] for (uint k = 0; k < CHUNK; ++k) {
        const uint v = v0 + k;
        if (v < M && canon(v) == u) {
          s = order_max(s, ss[v]);  // max() is undefined for NaN
          hb |= from(v);
        }
      }
    ss[u] = s;
    sb[u] = hb;
  }
  barrier();
  // Rank the distinct (canonical, non-root) nodes; keep the best n_out - 1.
  for (uint u = 1 + lid; u < M; u += WG) {
    if (sb[u] == 0) continue;
    const uint ku = order_key(ss[u]);
    uint rank = 0;
    for (uint v0 = 1; v0 < M; v0 += CHUNK)
      [[unroll]] for (uint k = 0; k < CHUNK; ++k) {
        const uint v = v0 + k;
        if (v < M && sb[v] != 0) {
          const uint kv = order_key(ss[v]);
          rank += (kv > ku || (kv == ku && v < u)) ? 1u : 0u;
        }
      }
    if (rank < pc.n_out - 1) {
      sa[u] |= 0x80000000u;
      atomicAdd(kept_count, 1u);
    }
  }
  barrier();
  for (uint u = 1 + lid; u < M; u += WG) {
    if ((sa[u] & 0x80000000u) == 0) continue;
    uint idx = 1;
    for (uint v0 = 1; v0 < u; v0 += CHUNK)
      [[unroll]] for (uint k = 0; k < CHUNK; ++k) {
        const uint v = v0 + k;
        if (v < u) idx += sa[v] >> 31;
      }
    sb[u] |= idx << 2;
  }
  barrier();
  for (uint u = 1 + lid; u < M; u += WG) {
    if ((sa[u] & 0x80000000u) == 0) continue;
    const uint o = sb[u] >> 2, cp = canon(uint(par(u)));
    o_token[o] = tok(u);
    o_parent[o] = cp == 0 ? 0 : int(sb[cp] >> 2);
    o_depth[o] = depth_of(u);
    o_score[o] = ss[u];
    o_head[o] = sb[u] & 3u;
  }
  // Fewer distinct candidates than slots: padding leaves under the root keep N = n_out. A match
  // on one is the verifier's own argmax, so verifying it never changes the output.
  for (uint o = 1 + kept_count + lid; o < pc.n_out; o += WG) {
    o_token[o] = root_tok();
    o_parent[o] = 0;
    o_depth[o] = 1;
    o_score[o] = uintBitsToFloat(0xff800000u);  // -inf
    o_head[o] = 0;
  }
  if (lid == 0) {
    o_token[0] = root_tok();
    o_parent[0] = -1;
    o_depth[0] = 0;
    o_score[0] = sc1[0];
    o_head[0] = 0;
    o_info[kInfoNodes] = pc.n_out;
  }
}
