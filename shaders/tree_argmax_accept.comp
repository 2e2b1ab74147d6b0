#version 450
// The verifier's arg-max of every tree node (argmax_row.glsl), one workgroup per node, and
// accept_greedy (accept.glsl) over them, run by whichever workgroup finishes its node last (the
// pattern of tree_topk_expand.comp: each node's arg-max is made visible, then counted in
// `arrivals`; the workgroup that counts N accepts and sets the counter back to 0). The same bits
// as argmax then accept_greedy.
// ADVANCE (a variant, where the device allows 11 storage buffers a stage): that workgroup then
// also advances the step (advance.glsl, step_advance.comp's tree mode), so a greedy step's KV
// commit, which runs after it, reads the old t from kStatePrevT. One dispatch fewer a step.
// COMMIT (with ADVANCE, where the host finds the commit small: ops/tree.cpp): that workgroup then
// also does commit_rows' work for the old t (commit.glsl, the same moves and, at the same workgroup
// size, the same bits), every stream and gathered row in turn. One dispatch fewer again.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
#include "reduce.glsl"
#include "vkspec/tree_limits.h"
layout(set = 0, binding = 0, std430) readonly buffer X { float xin[]; };
layout(set = 0, binding = 1, std430) readonly buffer Tok { uint token[]; };
layout(set = 0, binding = 2, std430) readonly buffer Head { uint head[]; };
layout(set = 0, binding = 3, std430) readonly buffer Ret { int retrieve[]; };  // (L, W)
layout(set = 0, binding = 4, std430) buffer Info { uint info[]; };
layout(set = 0, binding = 5, std430) coherent buffer Arg { uint argmax[]; };   // (N)
#ifdef ADVANCE
layout(set = 0, binding = 6, std430) coherent buffer Acc { uint accepted[]; };
#else
layout(set = 0, binding = 6, std430) writeonly buffer Acc { uint accepted[]; };
#endif
layout(set = 0, binding = 7, std430) coherent buffer Arrivals { uint arrivals; };
#ifdef ADVANCE
#include "vkspec/step_state.h"
layout(set = 0, binding = 8, std430) buffer State { uint state[]; };
layout(set = 0, binding = 9, std430) buffer Seq { uint seq_tokens[]; };
layout(set = 0, binding = 10, std430) buffer Out { uint out_list[]; };
#endif
#ifdef COMMIT
const uint MAXROWS = kTreeMaxPath;
layout(set = 0, binding = 11, std430) buffer Cache { uint cache[]; };
layout(set = 0, binding = 12, std430) readonly buffer Src { float src[]; };
layout(set = 0, binding = 13, std430) writeonly buffer Dst { float dst[]; };
layout(set = 0, binding = 14, std430) readonly buffer NormW { float norm_w[]; };
#endif
layout(push_constant) uniform Push {
  uint W, N, V, x_offset, x_stride, win_slot;
#ifdef COMMIT
  // commit_rows' (tree_commit.comp), t aside: the old t is the state's.
  uint row_words, stream_words, streams, cols, s_offset, s_stride, d_offset, d_stride, norm;
  float eps;
#endif
} pc;
#include "argmax_row.glsl"
#include "accept.glsl"
#ifdef ADVANCE
#include "advance.glsl"
#endif
#ifdef COMMIT
#include "rms_row.glsl"
#include "commit.glsl"
shared uint commit_t, commit_rows_n;
#endif

shared bool last;

void main() {
  const uint row = gl_WorkGroupID.x, lid = gl_LocalInvocationID.x;
  const uint r = argmax_row(pc.x_offset + row * pc.x_stride, pc.V);
  if (lid == 0) {
    argmax[row] = r;
    memoryBarrierBuffer();  // the node's arg-max visible before it is counted
    last = atomicAdd(arrivals, 1u) == pc.N - 1u;
  }
  barrier();
  if (!last) return;
  memoryBarrierBuffer();
  accept_greedy_tree();
#ifdef ADVANCE
  memoryBarrierBuffer();  // accepted[] from every invocation, info from the first
  barrier();
  if (lid == 0) advance_step(true, false, 0u, true, pc.win_slot);
#endif
#ifdef COMMIT
  if (lid == 0) commit_t = state[kStatePrevT], commit_rows_n = min(info[kInfoAccepted] + 1, MAXROWS);
  barrier();
  const uint rows = commit_rows_n;
  for (uint y = 0; y < pc.streams; ++y) commit_stream(y, commit_t, rows, 0, pc.row_words);
  for (uint e = 0; e < rows && pc.cols != 0; ++e)
    if (pc.norm != 0)
      gather_norm(e);
    else
      gather_copy(e, 0, pc.cols);
#endif
  if (lid == 0) arrivals = 0u;
}
