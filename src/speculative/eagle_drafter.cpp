// EAGLE drafting with a draft head of either kind (EAGLE-3: its tap rows in, its own vocabulary out) (seed 001 §3, DESIGN.md §2): depth 1 = the top-k children
// of the root; each further depth expands the k best frontier nodes by their top-k, all k·k scored
// by cumulative log-prob, the best k become the next frontier; finally the best B of all
// candidates form the tree.
#include <algorithm>
#include <cassert>

#include "ops/common.hpp"
#include "speculative/parts.hpp"

namespace vkspec::speculative {
namespace {

class EagleDrafter final : public Drafter {
 public:
  EagleDrafter(Context& ctx, EagleHead& head, const Verifier& v, const DraftShape& s)
      : ctx_(ctx), head_(head), s_(s), C_(uint32_t(head.config().C)), V_(v.vocab()) {
    const uint32_t K = s.K, D = s.D;
    pool_count_ = uint32_t(draft_pool_nodes(K, D));  // <= kTreeMaxNodes: checked by the engine
    pool_ = DeviceTree(ctx, pool_count_, D);
    // draft_select keeps the best B of the pool's count - 1 candidates, renumbered in pool order.
    // Where there are just B (top-k 1 drafting B levels), it keeps all, and every node keeps its
    // index and parent: the pool is the tree, and the step has no dispatch for it.
    select_ = s.select && pool_count_ > s.B + 1;
    if (select_) tree_ = DeviceTree(ctx, s.B + 1, D);
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
    arrivals_ = Buffer(ctx, 16);  // draft_topk_expand's counter: zero between dispatches
    arrivals_.upload(std::vector<uint32_t>(4, 0));
    // The root, node 0, as pool_init writes it, once: its fields never change, and its token
    // (y[t], new every step) is never read from the pool — the combiner's tree_meta writes the
    // verified tree's root token itself. One dispatch fewer a step.
    pool_.token.upload(std::vector<uint32_t>{0});
    pool_.parent.upload(std::vector<int32_t>{-1});
    pool_.depth.upload(std::vector<uint32_t>{0});
    pool_.score.upload(std::vector<float>{0.0f});
    pool_.head.upload(std::vector<uint32_t>{0});
  }

  uint32_t max_rows() const override { return head_.max_rows(); }
  uint32_t capacity() const override { return head_.capacity(); }
  const DeviceTree& pool() const override { return pool_; }
  uint32_t pool_count() const override { return pool_count_; }
  const DeviceTree& tree() const override {
    assert(s_.select);  // merge-trie reads the pools alone
    return select_ ? tree_ : pool_;
  }

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
    // Pair (f_{t-1}, y[t]) at row a = accepted, head position prev_t + a = t - 1: the root's own
    // draft logits (t - 1 as a wrapping u32 sum: the state's t is at least 1).
    a.root = true, a.root_row = b.accepted(), a.root_t = b.t() + 0xffffffffu;
    head_.forward(seq, a);
  }

  // Each draft_topk_expand ranks a level's rows, expands the frontier and (but the last) gathers
  // the next level's inputs: tokens, the parents' h and mask rows. The parents' h goes straight
  // into the head's feature input where it has one (EAGLE-1/2).
  void draft(Sequence& seq, const StepBuffers& b) {
    const uint32_t K = s_.K, D = s_.D, root = head_.root_slot();
    const Mat feat = head_.feature_input().buf ? head_.feature_input() : Mat{&feat_, 0, pad4(C_)};
    // EAGLE-1/2: each level's token embeddings are gathered with its other inputs (one dispatch
    // fewer a level) where the table fits the kernel on this device.
    const bool fold_embed = !head_.eagle3() && feat.buf == head_.token_input().buf &&
                            draft_gather_embeds(ctx_, head_.token_embedding());
    const auto gather = [&](uint32_t l) {
      return DraftGather{.level = l, .root_row = root, .h = head_.hidden(), .C = C_, .tokens = &tok_, .feat = feat,
                         .mask = &mask_, .words = words_,
                         .embed = fold_embed ? &head_.token_embedding() : nullptr, .emb = head_.token_input()};
    };
    const DraftGather g1 = gather(1);
    draft_topk_expand(seq, head_.logits().row(root), V_, pool_, 1, zero_, 0, 1, ids_, logp_, 0, kTopkMax, K, head_id_,
                      frontier_, 0, K, arrivals_, D > 1 ? &g1 : nullptr);
    uint32_t base = 1;  // pool index of the first candidate of the current level
    for (uint32_t l = 1; l < D; ++l) {
      EagleHead::ForwardArgs a;
      a.N = K, a.t = b.t(), a.kv_slot = b.t() + (l - 1) * K;
      a.tokens = &tok_, a.tok_offset = 0;
      a.features = feat;
      a.pos_first = b.t() + (l - 1), a.pos_step = 0;  // every depth-l node sits at head position t + l - 1
      a.mask = &mask_, a.mask_offset = (l - 1) * K * words_, a.mask_words = words_;
      a.embedded = fold_embed;
      head_.forward(seq, a);
      const uint32_t next_base = l == 1 ? 1 + K : base + K * K;
      const DraftGather g = gather(l + 1);
      draft_topk_expand(seq, head_.logits(), V_, pool_, next_base, frontier_, (l - 1) * K, K, ids_, logp_, 0, kTopkMax, K,
                        head_id_, frontier_, l * K, K, arrivals_, l + 1 < D ? &g : nullptr);
      base = next_base;
    }
    if (select_) draft_select(seq, pool_, pool_count_, s_.B, tree_);
  }

  Context& ctx_;
  EagleHead& head_;
  DraftShape s_;
  uint32_t C_, V_, words_ = 0, pool_count_ = 0;
  bool select_ = true;  // draft_select runs: the combiner reads tree() and it is not the pool
  DeviceTree pool_, tree_;
  Buffer frontier_, ids_, logp_, tok_, feat_, mask_, zero_, head_id_, arrivals_;
};

}  // namespace

std::unique_ptr<Drafter> make_eagle_drafter(Context& ctx, EagleHead& head, const Verifier& v, const DraftShape& s) {
  return std::make_unique<EagleDrafter>(ctx, head, v, s);
}

}  // namespace vkspec::speculative
