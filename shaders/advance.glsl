// The step's last act (step_advance.comp; with greedy acceptance, the last workgroup of
// tree_argmax_accept.comp's ADVANCE variant): moves the step state on and emits the step's tokens
// to the host-visible output list (vkspec/step_state.h).
//   tree mode: y[t .. t+a] = token[accepted[0 .. a]] (a = info[kInfoAccepted]; accepted[0] is the
//              root, y[t] itself) and the next root y[t+a+1] = info[kInfoNextRoot]; t += a + 1;
//   ar mode:   y[t+1] is already written, or (has_am) it is `am`; t += 1.
// A last token flagged kTokenNonFinite ends the generation before it (kOutFault).
// Tokens are emitted in order until the limit or a stop token (included); then the state is done.
// kStatePrevT keeps the old t, so what runs after it in the step (the KV commit) reads that.
// One invocation. Needs the buffers state, info, seq_tokens, out_list, accepted and token, and
// step_state.h / tree_limits.h.
#ifndef VKSPEC_ADVANCE_GLSL
#define VKSPEC_ADVANCE_GLSL
void advance_step(bool tree_mode, bool has_am, uint am, bool count_step, uint win_slot) {
  if (state[kStateDone] != 0) return;
  const uint t_old = state[kStateT];
  uint a = 0, t_new = t_old + 1;
  uint next = has_am ? am : seq_tokens[t_new];  // ar: the argmax, or the draw put_token wrote
  if (tree_mode) {
    a = info[kInfoAccepted];
    t_new = t_old + a + 1;
    for (uint e = 0; e <= a; ++e) seq_tokens[t_old + e] = token[accepted[e]];
    next = info[kInfoNextRoot];
  }
  // The last token came from a logits row with NaN or ±inf (kTokenNonFinite): it is not emitted,
  // the generation ends before it, and the output list names the row's position, t_new - 1. The
  // sequence keeps a valid id there (the flag cleared) for whatever reads it before the gate.
  const bool fault = (next & kTokenNonFinite) != 0u;
  seq_tokens[t_new] = next & ~kTokenNonFinite;
  const uint n0 = out_list[kOutCount];
  uint n = n0;
  const uint limit = out_list[kOutLimit], n_stop = min(out_list[kOutStopCount], kOutMaxStop);
  bool done = n >= limit;
  for (uint p = t_old + 1; p <= t_new && !done; ++p) {
    if (fault && p == t_new) {
      out_list[kOutFault] = t_new;  // 1 + (t_new - 1)
      done = true;
      break;
    }
    const uint tok = seq_tokens[p];
    out_list[kOutTokens + n] = tok;
    ++n;
    for (uint s = 0; s < n_stop; ++s) done = done || tok == out_list[kOutStop + s];
    done = done || n >= limit;
  }
  out_list[kOutCount] = n;
  if (count_step) {
    out_list[kOutSteps] += 1;
    // The step's accepted length as far as it was emitted: a limit or a stop token inside the path
    // cuts it, so that (a + 1) summed over the steps is the tokens they gave (τ).
    const uint kept = n > n0 ? min(a, n - n0 - 1) : a;
    out_list[kOutHist + min(kept, kOutHistWords - 1)] += 1;
    if (win_slot != kDynFixed) out_list[kOutWins + (info[win_slot] & 3u)] += 1;
  }
  state[kStateT] = t_new;
  state[kStatePrevT] = t_old;
  state[kStateAccepted] = a;
  if (done) {
    state[kStateDone] = 1;
    out_list[kOutDone] = 1;
  }
}
#endif
