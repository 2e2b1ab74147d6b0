// EAGLE drafting with a draft head of either kind (EAGLE-3: its tap rows in, its own vocabulary out) (seed 001 §3, DESIGN.md §2): depth 1 = the top-k children
// of the root; each further depth expands the k best frontier nodes by their top-k, all k·k scored
// by cumulative log-prob, the best k become the next frontier; finally the best B of all
// candidates form the tree.
#include <algorithm>

#include "ops/common.hpp"
#include "speculative/parts.hpp"

namespace vkspec::speculative {
namespace {

struct GatherPush {
  uint32_t K, level, base, frontier_offset, root_row, C, h_stride, feat_offset, feat_stride, words;
};

class EagleDrafter final : public Drafter {
 public:
  EagleDrafter(Context& ctx, EagleHead& head, const Verifier& v, const DraftShape& s)
      : ctx_(ctx), head_(head), s_(s), C_(uint32_t(head.config().C)), V_(v.vocab()) {
    const uint32_t K = s.K, D = s.D;
    pool_count_ = uint32_t(draft_pool_nodes(K, D));  // <= kTreeMaxNodes: checked by the engine
    pool_ = DeviceTree(ctx, pool_count_, D);
    tree_ = DeviceTree(ctx, s.B + 1, D);
    frontier_ = Buffer(ctx, (D + 1) * K * 4);
    ids_ = Buffer(ctx, K * kTopkMax * 4);
    logp_ = Buffer(ctx, K * kTopkMax * 4);
    tok_ = Buffer(ctx, K * 4);
    feat_ = Buffer(ctx, uint64_t(K) * pad4(C_) * 4);
    words_ = ((D - 1) * K + 31) / 32 + 1;
    mask_ = Buffer(ctx, uint64_t(std::max(1u, D - 1)) * K * words_ * 4);
    zero_ = Buffer(ctx, 16);  // the root's pool index (0), as a frontier of one
    zero_.upload(std::vector<uint32_t>(4, 0));
    head_id_ = Buffer(ctx, 16);  // what draft_expand records in each node's `head`
    head_id_.upload(std::vector<uint32_t>{s.head_id, 0, 0, 0});
    gather_ = &ops::simple_pipeline(ctx, "draft_gather", 6, sizeof(GatherPush), {});
  }

  uint32_t max_rows() const override { return head_.max_rows(); }
  uint32_t capacity() const override { return head_.capacity(); }
  const DeviceTree& pool() const override { return pool_; }
  uint32_t pool_count() const override { return pool_count_; }
  const DeviceTree& tree() const override { return tree_; }

  // Head positions: the pair (f_j, y[j+1]) sits at head position j (EAGLE).
  void record_prefill(Sequence& seq, const StepBuffers& b, Mat hidden, Mat taps, uint32_t t0, uint32_t n) override {
    EagleHead::ForwardArgs a;
    a.N = n, a.t = t0, a.kv_slot = t0, a.tokens = &b.seq_tokens, a.tok_offset = t0 + 1;
    a.features = head_.eagle3() ? taps : hidden, a.taps = true, a.pos_first = t0;
    a.logits_from = n;  // no logits: the step's ingest drafts from the last pair
    head_.forward(seq, a);
  }

  void record_step(Sequence& seq, const StepBuffers& b) override {
    ingest(seq, b);
    draft(seq, b);
  }

 private:
  // The last step committed pairs j = prev_t .. prev_t + a (features: the accepted path's rows).
  // Ingest always runs D + 1 rows, so one recording fits every a: rows past a write cache slots
  // from t on, which the draft below overwrites before any row can see them (its queries attend
  // to [0, t) and to their own ancestors' slots), and a row never sees a later row (causal).
  void ingest(Sequence& seq, const StepBuffers& b) {
    EagleHead::ForwardArgs a;
    a.N = s_.D + 1, a.t = b.prev_t(), a.kv_slot = b.prev_t();
    a.tokens = &b.seq_tokens, a.tok_offset = b.prev_t() + 1;
    a.features = head_.eagle3() ? b.tap_features() : b.features(), a.taps = true, a.pos_first = b.prev_t();
    a.root = true, a.root_row = b.accepted();  // pair (f_{t-1}, y[t]): the root's own draft logits
    head_.forward(seq, a);
  }

  void draft(Sequence& seq, const StepBuffers& b) {
    const uint32_t K = s_.K, D = s_.D, root = head_.root_slot();
    pool_init(seq, pool_, b.seq_tokens, b.t());
    topk(seq, head_.logits().row(root), 1, V_, K, ids_, logp_, 0, kTopkMax);
    draft_expand(seq, pool_, 1, zero_, 0, 1, ids_, logp_, 0, kTopkMax, K, head_id_, frontier_, 0, K);
    uint32_t base = 1;  // pool index of the first candidate of the current level
    for (uint32_t l = 1; l < D; ++l) {
      // The level-l frontier through the head: tokens, parents' h and mask rows first.
      // The parents' h straight into the head's feature input where it has one (EAGLE-1/2).
      const Mat feat = head_.feature_input().buf ? head_.feature_input() : Mat{&feat_, 0, pad4(C_)};
      GatherPush gp{K, l, base, (l - 1) * K, root, C_, head_.hidden().stride, feat.offset, feat.stride, words_};
      seq.dispatch(*gather_,
                   {in(pool_.token), in(frontier_), in(*head_.hidden().buf), out(tok_), feat.out(), out(mask_)}, gp,
                   K, 1, 1, "draft_gather");
      EagleHead::ForwardArgs a;
      a.N = K, a.t = b.t(), a.kv_slot = b.t() + (l - 1) * K;
      a.tokens = &tok_, a.tok_offset = 0;
      a.features = feat;
      a.pos_first = b.t() + (l - 1), a.pos_step = 0;  // every depth-l node sits at head position t + l - 1
      a.mask = &mask_, a.mask_offset = (l - 1) * K * words_, a.mask_words = words_;
      head_.forward(seq, a);
      topk(seq, head_.logits(), K, V_, K, ids_, logp_, 0, kTopkMax);
      const uint32_t next_base = l == 1 ? 1 + K : base + K * K;
      draft_expand(seq, pool_, next_base, frontier_, (l - 1) * K, K, ids_, logp_, 0, kTopkMax, K, head_id_, frontier_,
                   l * K, K);
      base = next_base;
    }
    draft_select(seq, pool_, pool_count_, s_.B, tree_);
  }

  Context& ctx_;
  EagleHead& head_;
  DraftShape s_;
  uint32_t C_, V_, words_ = 0, pool_count_ = 0;
  DeviceTree pool_, tree_;
  Buffer frontier_, ids_, logp_, tok_, feat_, mask_, zero_, head_id_;
  const Pipeline* gather_ = nullptr;
};

}  // namespace

std::unique_ptr<Drafter> make_eagle_drafter(Context& ctx, EagleHead& head, const Verifier& v, const DraftShape& s) {
  return std::make_unique<EagleDrafter>(ctx, head, v, s);
}

}  // namespace vkspec::speculative
