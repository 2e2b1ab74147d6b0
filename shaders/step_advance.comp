#version 450
// The last dispatch of a step (advance.glsl): moves the step state on and emits the step's
// tokens to the host-visible output list, so the host reads tokens once per submission. In ar
// mode with argmax_V != 0, y[t+1] is the arg-max of the logits row xin[x_offset ..]
// (argmax_row.glsl), taken here by the whole workgroup — one dispatch fewer per `ar` token.
// (Greedy tree steps advance in tree_argmax_accept.comp's ADVANCE variant instead.)
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 1;  // 1, or the argmax's row-reduction workgroup
#include "vkspec/step_state.h"
#include "vkspec/tree_limits.h"
layout(set = 0, binding = 0, std430) buffer State { uint state[]; };
layout(set = 0, binding = 1, std430) readonly buffer Info { uint info[]; };
layout(set = 0, binding = 2, std430) buffer Seq { uint seq_tokens[]; };
layout(set = 0, binding = 3, std430) buffer Out { uint out_list[]; };
layout(set = 0, binding = 4, std430) readonly buffer Acc { uint accepted[]; };  // tree mode
layout(set = 0, binding = 5, std430) readonly buffer Tok { uint token[]; };     // tree mode: the tree's
layout(set = 0, binding = 6, std430) readonly buffer X { float xin[]; };        // ar mode with argmax_V
#include "reduce.glsl"
#include "argmax_row.glsl"
#include "advance.glsl"
layout(push_constant) uniform Push { uint tree_mode, count_step, win_slot, argmax_V, x_offset; } pc;
void main() {
  uint am = 0;
  if (pc.argmax_V != 0) am = argmax_row(pc.x_offset, pc.argmax_V);  // every invocation: it has barriers
  if (gl_LocalInvocationID.x == 0) advance_step(pc.tree_mode != 0, pc.argmax_V != 0, am, pc.count_step != 0, pc.win_slot);
}
