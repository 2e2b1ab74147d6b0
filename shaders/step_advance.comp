#version 450
// The last dispatch of a step: moves the step state on and emits the step's tokens to the
// host-visible output list (vkspec/step_state.h), so the host reads tokens once per submission.
//   tree mode: the accepted path's tokens y[t .. t+a] = token[accepted[0 .. a]] (a =
//              info[kInfoAccepted]; accepted[0] is the root, y[t] itself) and the next root
//              y[t+a+1] = info[kInfoNextRoot] are written here, and the state advances by a + 1;
//   ar mode:   y[t+1] is already written (by argmax or a draw), or with argmax_V != 0 it is the
//              arg-max of the logits row xin[x_offset ..] (argmax_row.glsl), taken here by the
//              whole workgroup — one dispatch fewer per `ar` token; the state advances by one.
// Tokens are emitted in order until the limit or a stop token (included); then the state is done.
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
layout(push_constant) uniform Push { uint tree_mode, count_step, win_slot, argmax_V, x_offset; } pc;
void main() {
  uint am = 0;
  if (pc.argmax_V != 0) am = argmax_row(pc.x_offset, pc.argmax_V);  // every invocation: it has barriers
  if (gl_LocalInvocationID.x != 0 || state[kStateDone] != 0) return;
  const uint t_old = state[kStateT];
  uint a = 0, t_new = t_old + 1;
  if (pc.tree_mode != 0) {
    a = info[kInfoAccepted];
    t_new = t_old + a + 1;
    for (uint e = 0; e <= a; ++e) seq_tokens[t_old + e] = token[accepted[e]];
    seq_tokens[t_new] = info[kInfoNextRoot];
  } else if (pc.argmax_V != 0) {
    seq_tokens[t_new] = am;
  }
  uint n = out_list[kOutCount];
  const uint limit = out_list[kOutLimit], n_stop = min(out_list[kOutStopCount], kOutMaxStop);
  bool done = n >= limit;
  for (uint p = t_old + 1; p <= t_new && !done; ++p) {
    const uint tok = seq_tokens[p];
    out_list[kOutTokens + n] = tok;
    ++n;
    for (uint s = 0; s < n_stop; ++s) done = done || tok == out_list[kOutStop + s];
    done = done || n >= limit;
  }
  out_list[kOutCount] = n;
  if (pc.count_step != 0) {
    out_list[kOutSteps] += 1;
    out_list[kOutHist + min(a, kOutHistWords - 1)] += 1;
    if (pc.win_slot != kDynFixed) out_list[kOutWins + (info[pc.win_slot] & 3u)] += 1;
  }
  state[kStateT] = t_new;
  state[kStatePrevT] = t_old;
  state[kStateAccepted] = a;
  if (done) {
    state[kStateDone] = 1;
    out_list[kOutDone] = 1;
  }
}
