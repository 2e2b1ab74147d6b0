// The parts a speculative step is assembled from (DESIGN.md §5): the verifier, drafters and a
// combiner, each recording its share of the step into a Sequence. StepPlan (step_plan.hpp) puts
// them in the order draft → combine → verify → accept → commit, once per plan.
//
// Everything a part records reads the step's changing values (t, the last accepted length) from
// the step state on the GPU (vkspec/step_state.h) through Dyn scalars, never from push constants,
// so one recording serves every step.
#pragma once

#include <memory>
#include <optional>
#include <span>

#include "vkspec/eagle_head.hpp"
#include "vkspec/engine.hpp"
#include "vkspec/model.hpp"
#include "vkspec/tree.hpp"

namespace vkspec::speculative {

// Buffers every part of a step shares.
struct StepBuffers {
  Buffer state;       // kStateWords u32 (vkspec/step_state.h), device-local
  Buffer out_list;    // kOutTokens + limit u32, host-visible: what the host reads per submission
  Buffer seq_tokens;  // y[0 .. capacity): the prompt, then every committed token
  Buffer feat;        // (kTreeMaxPath, C) the accepted path's verifier features, for the next ingest
  uint32_t feat_stride = 0;
  Buffer taps;        // (kTreeMaxPath, 3C) the accepted path's verifier tap rows (EAGLE-3 heads only)
  uint32_t taps_stride = 0;
  Dyn t() const { return Dyn(state, kStateT); }            // committed length; y[t] is the root
  Dyn prev_t() const { return Dyn(state, kStatePrevT); }   // t before the last step
  Dyn accepted() const { return Dyn(state, kStateAccepted); }
  Mat features() const { return {&feat, 0, feat_stride}; }
  Mat tap_features() const { return {&taps, 0, taps_stride}; }
};

// The target model: a forward over a chain or a tree, and the KV commit of an accepted path.
class Verifier {
 public:
  explicit Verifier(LlamaModel& m) : m_(m) {}
  uint32_t vocab() const { return uint32_t(m_.config().V); }
  uint32_t width() const { return uint32_t(m_.config().C); }
  uint32_t capacity() const { return m_.capacity(); }
  uint32_t max_rows() const { return m_.max_rows(); }
  void forward(Sequence& seq, const LlamaModel::ForwardArgs& a) { m_.forward(seq, a); }
  Mat logits() const { return m_.logits(); }
  Mat hidden() const { return m_.hidden(); }
  const DeviceWeight& embedding() const { return m_.embedding(); }
  Mat token_input() const { return m_.token_input(); }  // where a forward's rows' embeddings go
  RowGather feature_gather(const Context& ctx, Mat dst) const { return m_.feature_gather(ctx, dst); }
  Mat taps() const { return m_.taps(); }  // EAGLE-3 tap rows, when a head enabled them
  uint32_t tap_width() const { return m_.tap_width(); }
  // K/V rows of the accepted path (tree.info, accepted) move to slots t + e, every layer.
  // With `gather`, the first commit dispatch also gathers the accepted rows (the heads' features).
  void commit(Sequence& seq, const DeviceTree& tree, const Buffer& accepted, Dyn t, const RowGather* gather = nullptr);
  // The same commit as one KvCommit, for argmax_accept_greedy to fold in: where the cache is one
  // buffer (else nullopt).
  std::optional<KvCommit> commit_args(const RowGather* gather) const;
  uint32_t streams_in(const Buffer& kv) const;  // the K/V streams one of the model's cache buffers holds
  LlamaModel& model() { return m_; }

 private:
  LlamaModel& m_;
};

// The draft options a drafter works with.
struct DraftShape {
  uint32_t K = 4, D = 4, B = 8;  // top-k, depth, nodes kept
  uint32_t head_id = 1;          // recorded in each node's `head` (1 or 2)
  bool select = true;            // the combiner reads tree() (Combiner::reads_trees)
};

// Given the accepted features, records its draft tree (DESIGN.md §5). A drafter keeps its own KV
// cache: it ingests the pairs (f_j, y[j+1]) the verifier commits.
class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual uint32_t max_rows() const = 0;
  virtual uint32_t capacity() const = 0;
  // Prompt pairs j = t0 .. t0+n-1 (the verifier's hidden rows 0..n-1 of that chunk, and its tap
  // rows when an EAGLE-3 head enabled them).
  virtual void record_prefill(Sequence& seq, const StepBuffers& b, Mat hidden, Mat taps, uint32_t t0, uint32_t n) = 0;
  // The step's drafting: ingest the last step's accepted pairs, then draft from the root y[t].
  virtual void record_step(Sequence& seq, const StepBuffers& b) = 0;
  // After record_step: the candidate pool and the best-B tree it selected (DraftShape::select).
  virtual const DeviceTree& pool() const = 0;
  virtual uint32_t pool_count() const = 0;
  virtual const DeviceTree& tree() const = 0;
};

// Records fn(d) for each drafter. Two drafters over distinct heads (`pair`) record as one pair
// section (Sequence::begin_pair): each dispatch of one that matches the other's runs once for both.
// `pack` (optional): the two heads' weights packed for such a section (PairPack).
template <class F>
void record_drafters(Sequence& seq, std::span<Drafter* const> drafters, bool pair, const PairPack* pack, F&& fn) {
  if (!pair || drafters.size() != 2) {
    for (Drafter* d : drafters) fn(*d);
    return;
  }
  seq.begin_pair(pack);
  fn(*drafters[0]);
  seq.next_pair();
  fn(*drafters[1]);
  seq.end_pair();
}

// EAGLE-1/2 or EAGLE-3 head (seed 001 §3, DESIGN.md §2): top-k expansion level by level, best B kept.
std::unique_ptr<Drafter> make_eagle_drafter(Context& ctx, EagleHead& head, const Verifier& v, const DraftShape& s);

// Turns the drafters' trees into the verified tree.
class Combiner {
 public:
  virtual ~Combiner() = default;
  virtual uint32_t drafters() const = 0;                      // how many it combines
  virtual uint32_t verify_nodes(uint32_t B) const = 0;        // nodes of the verified tree, root included
  virtual uint32_t max_budget(uint32_t pool_nodes) const = 0; // largest B whose tree the kernels hold
  virtual uint32_t win_slot() const { return kInfoBestHead; } // tree info slot naming the winning head
  virtual bool reads_trees() const { return true; }           // Drafter::tree(); else their pools alone
  // Writes the verified tree and its verification inputs (tree_meta at t) into `out`, its root's
  // token from root[t] (the drafters' pools leave theirs unwritten); with `embed`, the verifier's
  // input rows too, in the same dispatch (MetaEmbed).
  virtual void record(Sequence& seq, std::span<Drafter* const> d, uint32_t B, DeviceTree& out, Dyn t,
                      const Buffer& root, const MetaEmbed* embed) const = 0;
};

// single1 / single2 (one drafter's tree), route (seed 001), merge (seed 000), merge-trie (ours).
std::unique_ptr<Combiner> make_combiner(Strategy s);

}  // namespace vkspec::speculative
