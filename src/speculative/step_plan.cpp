// The step, in the order the seeds describe it: draft → combine → verify → accept → commit.
#include "speculative/step_plan.hpp"

namespace vkspec::speculative {

void Verifier::commit(Sequence& seq, const DeviceTree& tree, const Buffer& accepted, Dyn t, const RowGather* gather) {
  // Every layer's K and V: one dispatch per cache buffer (one for the whole model when they fit).
  for (const Buffer& b : m_.kv_buffers()) {
    commit_rows(seq, tree, accepted, t, b, m_.kv_row_words(), streams_in(b), m_.kv_stream_words(), gather);
    gather = nullptr;
  }
}

uint32_t Verifier::streams_in(const Buffer& b) const { return uint32_t(b.size() / (uint64_t(m_.kv_stream_words()) * 4)); }

StepPlan::StepPlan(Context& ctx, Verifier& verifier, std::vector<Drafter*> drafters, const Combiner* combiner,
                   const PlanShape& shape, StepBuffers& buffers)
    : verifier_(verifier),
      drafters_(std::move(drafters)),
      combiner_(combiner),
      shape_(shape),
      b_(buffers),
      seq_(ctx, shape.timed ? 4096 : 0, /*replayable=*/true) {
  n_verify_nodes_ = combiner_ ? combiner_->verify_nodes(shape.B) : 1;
  const uint32_t V = verifier.vocab();
  vtree_ = DeviceTree(ctx, n_verify_nodes_, combiner_ ? shape.D : 1);
  if (!combiner_) {  // ar's tree is the root alone: what sampling draws through
    vtree_.parent.upload(std::vector<int32_t>{-1});
    vtree_.token.upload(std::vector<uint32_t>{0});
    vtree_.head.upload(std::vector<uint32_t>{0});
  }
  vargmax_ = Buffer(ctx, uint64_t(n_verify_nodes_) * 4);
  accepted_ = Buffer(ctx, (kTreeMaxPath + 1) * 4);
  arrivals_ = Buffer(ctx, 16);  // argmax_accept_greedy's counter: zero between dispatches
  arrivals_.upload(std::vector<uint32_t>(4, 0));
  if (shape.sampling) probs_ = Buffer(ctx, uint64_t(n_verify_nodes_) * V * 4);
  seq_.begin();
  seq_.gate(b_.state);
  if (combiner_)
    record_tree();
  else
    record_ar();
  seq_.end();
}

// `ar`: the root through the verifier, y[t+1] = argmax (or a draw from G), one token per step.
void StepPlan::record_ar() {
  const uint32_t V = verifier_.vocab();
  LlamaModel::ForwardArgs fa;
  fa.N = 1, fa.t = b_.t(), fa.tokens = &b_.seq_tokens, fa.tok_offset = b_.t();
  fa.hidden = false;  // no head drafts from it
  verifier_.forward(seq_, fa);
  if (shape_.sampling) {
    const Mat probs{&probs_, 0, V};
    // The sampler's values from the step state (set with each prompt): one recording serves them all.
    sample_probs(seq_, verifier_.logits(), probs, 1, V, shape_.sampler, b_.seq_tokens, b_.t(), vtree_, {},
                 SamplerValues::FromState);
    AcceptSampleArgs aa;
    aa.n = 1, aa.V = V, aa.probs = probs, aa.step = b_.t(), aa.seed_from = SamplerValues::FromState, aa.accepted = &accepted_;
    accept_sample(seq_, vtree_, aa);
    put_token(seq_, vtree_.info, kInfoNextRoot, b_.seq_tokens, b_.t() + 1);
  }
  end_draft_ = 0;
  end_verify_ = seq_.dispatch_count();
  // Greedy: y[t+1] = argmax, taken by step_advance itself.
  const StepArgmax am{verifier_.logits(), V};
  step_advance(seq_, b_.state, nullptr, nullptr, b_.seq_tokens, b_.out_list, /*count_step=*/true, kDynFixed,
               shape_.sampling ? nullptr : &am);
}

std::optional<KvCommit> Verifier::commit_args(const RowGather* gather) const {
  if (m_.kv_buffers().size() != 1) return std::nullopt;
  const Buffer& b = m_.kv_buffers()[0];
  return KvCommit{&b, m_.kv_row_words(), streams_in(b), m_.kv_stream_words(), gather};
}

void StepPlan::record_tree() {
  const uint32_t V = verifier_.vocab(), N = n_verify_nodes_;
  // draft(): every drafter ingests what the last step accepted and drafts from the root y[t].
  record_drafters(seq_, drafters_, shape_.pair, shape_.pack, [&](Drafter& d) { d.record_step(seq_, b_); });
  end_draft_ = seq_.dispatch_count();
  // combine(): route (seed 001 §5), merge (seed 000 §4), merge-trie, or one head's tree.
  // With tree_meta's inputs, and where it fits the verifier's embedding gather (MetaEmbed).
  const MetaEmbed embed{&verifier_.embedding(), verifier_.token_input()};
  const bool embedded = meta_embeds(verifier_.embedding(), N);
  combiner_->record(seq_, drafters_, shape_.B, vtree_, b_.t(), b_.seq_tokens, embedded ? &embed : nullptr);
  // verify(): one verifier pass over the whole tree with the ancestor mask.
  LlamaModel::ForwardArgs fa;
  fa.N = N, fa.t = b_.t(), fa.tokens = &vtree_.token, fa.pos = &vtree_.pos, fa.embedded = embedded;
  fa.mask = &vtree_.mask, fa.mask_words = vtree_.mask_words;
  fa.defer_hidden_norm = true;  // only the accepted rows are features: commit's gather normalizes them
  verifier_.forward(seq_, fa);
  const Mat probs{&probs_, 0, V};
  const RowGather features = verifier_.feature_gather(seq_.context(), b_.features());
  bool committed = false;
  if (shape_.sampling) {  // p = G(logits) per node (include/vkspec/sample.hpp)
    sample_probs(seq_, verifier_.logits(), probs, N, V, shape_.sampler, b_.seq_tokens, b_.t(), vtree_, {},
                 SamplerValues::FromState);
  } else {
    // The verifier's argmax per node and accept(), greedy, in one dispatch: the longest match over
    // all root-to-leaf rows (seed 000 §6.1), ties to the lower row. The same dispatch advances
    // the step (step_advance's work): the commit below then finds the old t at prev_t.
    // With the commit below too, where it is small (ops: kFoldCommitMaxWords).
    const StepAdvanceArgs adv{&b_.state, &b_.seq_tokens, &b_.out_list, combiner_->win_slot()};
    const std::optional<KvCommit> kc = verifier_.commit_args(&features);
    committed = argmax_accept_greedy(seq_, verifier_.logits(), N, V, vtree_, vargmax_, accepted_, arrivals_, &adv,
                                     kc ? &*kc : nullptr);
  }
  end_verify_ = seq_.dispatch_count();
  if (shape_.sampling) {
    // accept(), sampling (DESIGN §3, seed 000/001 §6.2): tree rejection sampling from the root;
    // the same outputs as accept_greedy, so the commit below is shared.
    AcceptSampleArgs aa;
    aa.n = N, aa.V = V, aa.probs = probs, aa.step = b_.t(), aa.seed_from = SamplerValues::FromState, aa.accepted = &accepted_;
    accept_sample(seq_, vtree_, aa);
  }
  // commit(): accepted KV rows into place, their features for the drafters' next ingest; then
  // (sampling) step_advance appends the tokens and the next root after them and moves t to
  // t + a + 1. Greedy steps advanced in the acceptance: the step's t is prev_t by now.
  const Dyn t = shape_.sampling ? b_.t() : b_.prev_t();
  if (!committed) verifier_.commit(seq_, vtree_, accepted_, t, &features);
  if (verifier_.tap_width())  // EAGLE-3 heads ingest the accepted rows' taps instead
    gather_rows(seq_, vtree_, accepted_, verifier_.taps(), b_.tap_features(), verifier_.tap_width());
  if (shape_.sampling)
    step_advance(seq_, b_.state, &vtree_, &accepted_, b_.seq_tokens, b_.out_list, /*count_step=*/true,
                 combiner_->win_slot());
}

StepPlan::Timing StepPlan::timing() const {
  Timing tm;
  tm.kernels = seq_.timings();
  // Timestamp 0 is the gate; dispatch i (0-based, gate included) is kernels[i].
  for (uint32_t i = 0; i < tm.kernels.size(); ++i) {
    const uint32_t d = i;  // the gate counts as a dispatch
    const int phase = d < end_draft_ ? 0 : d < end_verify_ ? 1 : 2;
    (phase == 0 ? tm.draft_ms : phase == 1 ? tm.verify_ms : tm.commit_ms) += tm.kernels[i].us * 1e-3;
    tm.phases.push_back(phase == 0 ? "draft" : phase == 1 ? "verify" : "commit");
  }
  return tm;
}

}  // namespace vkspec::speculative
