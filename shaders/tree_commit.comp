#version 450
// commit_rows (DESIGN.md §4): cache rows t + accepted[e] → t + e for e = 0..a (commit.glsl,
// overlap-safe; max_depth + 1 <= kTreeMaxPath rows).
// Rows are moved as u32 words, so an f32 and an f16 cache (pairs packed in words) are alike.
// Workgroup row y moves stream y of the buffer — stream s is the row_words-wide rows from word
// s * stream_words on (every layer's K and V of a model in one buffer: one dispatch for all).
// With `cols` > 0 the rows after the streams also gather the accepted rows' features, and with
// `norm` RMS-normalize them on the way (rms_row.glsl, as rmsnorm.comp, so the same
// bits at the same workgroup size): a verifier whose LM head folds the final norm then writes no
// normalized hidden rows of its own, one dispatch fewer a step.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
#include "vkspec/tree_limits.h"
const uint MAXROWS = kTreeMaxPath;
layout(set = 0, binding = 0, std430) readonly buffer Info { uint info[]; };
layout(set = 0, binding = 1, std430) readonly buffer Acc { uint accepted[]; };
layout(set = 0, binding = 2, std430) buffer Cache { uint cache[]; };
#define DYN_BINDING 3
#include "dyn.glsl"
// The folded gather_rows (tree_gather.comp): workgroup rows past the streams, one per possible e.
layout(set = 0, binding = 4, std430) readonly buffer Src { float src[]; };
layout(set = 0, binding = 5, std430) writeonly buffer Dst { float dst[]; };
layout(set = 0, binding = 6, std430) readonly buffer NormW { float norm_w[]; };  // with `norm`: (cols)
layout(push_constant) uniform Push {
  uint t, row_words, t_slot, stream_words;
  uint streams, cols, s_offset, s_stride, d_offset, d_stride;
  uint norm;
  float eps;
  uint slice;  // columns a workgroup moves (a multiple of WG): workgroup x takes [x·slice, x·slice + slice)
} pc;
#include "reduce.glsl"
#include "rms_row.glsl"
#include "commit.glsl"
void main() {
  // Workgroup (x, y) moves columns [x·slice, x·slice + slice) of stream or gathered row y, its
  // lanes striding over them: a narrow grid (on CPU rasterizers every workgroup is a job, and
  // most of a grid of one column per lane would idle), with a lane's loop still bounded (drivers
  // with a loop budget, ops/tree.cpp).
  const uint c0 = gl_WorkGroupID.x * pc.slice, c1 = c0 + pc.slice;
  if (gl_WorkGroupID.y >= pc.streams) {  // dst row e = src row accepted[e], rows past a idle
    const uint e = gl_WorkGroupID.y - pc.streams;
    // Both conditions are the workgroup's own, so the reduction's barriers are uniform.
    if (e > info[kInfoAccepted]) return;
    if (pc.norm == 0) {
      gather_copy(e, c0, c1);
      return;
    }
    if (gl_WorkGroupID.x != 0) return;  // the first workgroup of the row walks all of it
    gather_norm(e);
    return;
  }
  commit_stream(gl_WorkGroupID.y, dyn(pc.t, pc.t_slot), min(info[kInfoAccepted] + 1, MAXROWS), c0, c1);
}
