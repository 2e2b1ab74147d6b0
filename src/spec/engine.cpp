// The speculative loop, one command buffer and one host wait per step:
//   draft() both heads → route() / merge() → tree_meta → verify() → accept() → commit().
// The host learns only the accepted length (to place the next step's pushes) and the tokens to
// stream; every per-node decision is made on the GPU.
#include "vkspec/engine.hpp"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cstring>

#include "ops/common.hpp"

namespace vkspec {

const char* strategy_name(Strategy s) {
  switch (s) {
    case Strategy::AR: return "ar";
    case Strategy::Single1: return "single1";
    case Strategy::Single2: return "single2";
    case Strategy::Route: return "route";
    case Strategy::Merge: return "merge";
    case Strategy::MergeTrie: return "merge-trie";
  }
  return "?";
}

Strategy parse_strategy(const std::string& s) {
  for (Strategy x : {Strategy::AR, Strategy::Single1, Strategy::Single2, Strategy::Route, Strategy::Merge,
                     Strategy::MergeTrie})
    if (s == strategy_name(x)) return x;
  throw Error("unknown strategy '" + s + "' (choose ar, single1, single2, route, merge, merge-trie)");
}

// Per-head drafting state: the head, its candidate pool, its selected tree, per-level scratch.
struct Engine::HeadState {
  EagleHead* head = nullptr;
  uint32_t t_head = 0;    // head KV length committed (positions whose pair was ingested)
  uint32_t root_row = 0;  // row of head->hidden()/logits() holding the root's output
  std::unique_ptr<DeviceTree> pool, tree;
  Buffer frontier, ids, logp, tok, feat, mask;
  uint32_t pool_count = 0;
};

namespace {
struct GatherPush {
  uint32_t K, level, base, frontier_offset, root_row, C, h_stride, feat_stride, words;
};
struct PutPush {
  uint32_t slot;
};

int32_t* params_ptr(Buffer& b) { return static_cast<int32_t*>(b.mapped()); }

// params_ layout (i32 position ids): [0, kIngestRows) prompt chunks and head ingest rows (a
// prompt is at most kIngestRows tokens, an ingest a+1 <= D+1 rows); then draft level l = 1..D-1
// at draft_pos_offset(l): the K positions of that level's frontier.
constexpr uint32_t kIngestRows = 2048;
uint32_t draft_pos_offset(uint32_t level, uint32_t K) { return kIngestRows + (level - 1) * K; }
uint64_t params_words(uint32_t D, uint32_t K) { return kIngestRows + uint64_t(D > 1 ? D - 1 : 0) * K; }

// seq_tokens[count[0]] = info[kInfoNextRoot]: the accepted (or sampled) next root goes into the
// sequence on the GPU, so the next step needs nothing from the host.
void put_next_root(Sequence& seq, const Buffer& info, const Buffer& count, Buffer& seq_tokens) {
  PutPush pp{kInfoNextRoot};
  const Pipeline& put = seq.context().pipelines().get(make_pipeline_desc(
      "put_token", std::vector<VkDescriptorType>(3, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER), sizeof(PutPush),
      ops::WorkgroupSpec{1}));
  seq.dispatch(put, {in(info), in(count), out(seq_tokens)}, pp, 1, 1, 1, "put_token");
}
}  // namespace

uint64_t draft_pool_nodes(uint32_t K, uint32_t D) {
  return D == 0 ? 1 : 1 + uint64_t(K) + uint64_t(D - 1) * K * K;
}

uint32_t max_draft_depth(uint32_t K) {
  uint32_t best = 0;
  for (uint32_t D = 1; D < kTreeMaxPath && draft_pool_nodes(K, D) <= kTreeMaxNodes; ++D) best = D;
  return best;
}

uint32_t max_draft_topk(uint32_t D, uint32_t V) {
  uint32_t best = 0;
  for (uint32_t K = 1; K <= std::min(kTopkMax, V) && draft_pool_nodes(K, D) <= kTreeMaxNodes; ++K) best = K;
  return best;
}

uint32_t max_draft_budget(Strategy s, uint32_t K, uint32_t D) {
  const uint64_t pool = draft_pool_nodes(K, D);
  if (s == Strategy::AR || pool > kTreeMaxNodes) return 0;
  const uint32_t heads = s == Strategy::Merge || s == Strategy::MergeTrie ? 2 : 1;
  return uint32_t(std::min<uint64_t>(pool - 1, (kTreeMaxNodes - 1) / heads));
}

// Every limit a tree option meets, in the order a user fixes them: top-k, depth, their product
// (the candidate pool), then the budget. Ranges are derived from vkspec/tree_limits.h, the
// numbers the kernels size their shared arrays with, and compared without wrapping.
void check_draft_options(uint32_t K, uint32_t D, uint32_t B, uint32_t V) {
  const auto str = [](uint64_t x) { return std::to_string(x); };
  if (K < 1 || K > kTopkMax)
    throw Error("--topk must be in 1.." + str(kTopkMax) + " (the top-k kernel's limit), got " + str(K));
  if (K > V)
    throw Error("--topk " + str(K) + " exceeds the vocabulary of " + str(V) +
                " tokens (a node has at most that many distinct children): use --topk <= " + str(V));
  if (D < 1 || D > kTreeMaxPath - 1)
    throw Error("--depth must be in 1.." + str(kTreeMaxPath - 1) + " (a root-to-leaf path of depth + 1 nodes is what "
                "the attention and commit kernels hold: at most " + str(kTreeMaxPath) + "), got " + str(D));
  const uint64_t pool = draft_pool_nodes(K, D);
  if (pool > kTreeMaxNodes) {
    std::string fix = "lower --depth or --topk";
    if (max_draft_depth(K) >= 1) fix = "with --topk " + str(K) + " use --depth <= " + str(max_draft_depth(K));
    if (max_draft_topk(D, V) >= 1) fix += ", with --depth " + str(D) + " use --topk <= " + str(max_draft_topk(D, V));
    throw Error("--depth " + str(D) + " with --topk " + str(K) + " drafts a candidate pool of " + str(pool) +
                " nodes per head (1 + K + (D-1)*K^2), more than the " + str(kTreeMaxNodes) +
                " the tree kernels rank in one workgroup: " + fix);
  }
  if (B < 1 || B > pool - 1)
    throw Error("--budget " + str(B) + " must be in 1.." + str(pool - 1) + " (the candidates depth " + str(D) +
                " and top-k " + str(K) + " produce)");
}

void Engine::check_tree_options(const EagleHead* h1, const EagleHead* h2) const {
  const uint32_t K = opts_.topk, D = opts_.depth, B = opts_.budget;
  const auto str = [](uint64_t x) { return std::to_string(x); };
  check_draft_options(K, D, B, uint32_t(model_.config().V));
  const uint32_t maxB = max_draft_budget(opts_.strategy, K, D);
  if (B > maxB)
    throw Error("--budget " + str(B) + " gives " + strategy_name(opts_.strategy) + " a verified tree of " +
                str(verify_nodes()) + " nodes, more than the " + str(kTreeMaxNodes) +
                " the tree kernels hold: use --budget <= " + str(maxB));
  if (verify_nodes() > model_.max_rows())
    throw Error("a verified tree of " + str(verify_nodes()) + " nodes exceeds the verifier's " +
                str(model_.max_rows()) + " rows per pass");
  for (const EagleHead* h : {h1, h2})
    if (h && h->max_rows() < K)
      throw Error("--topk " + str(K) + " exceeds the draft head's " + str(h->max_rows()) + " rows per pass");
}

Engine::Engine(Context& ctx, LlamaModel& model, EagleHead* h1, EagleHead* h2, const EngineOptions& opts)
    : ctx_(ctx), model_(model), opts_(opts) {
  const Strategy s = opts.strategy;
  const bool need1 = s == Strategy::Single1 || s == Strategy::Route || s == Strategy::Merge || s == Strategy::MergeTrie;
  const bool need2 = s == Strategy::Single2 || s == Strategy::Route || s == Strategy::Merge || s == Strategy::MergeTrie;
  if ((need1 && !h1) || (need2 && !h2))
    throw Error(std::string("strategy ") + strategy_name(s) + " needs " + (need1 && need2 ? "two draft heads" : "a draft head") +
                " (--heads H1,H2)");
  const SamplingOptions& so = opts.sampling;
  if (!(so.temperature >= 0) || !(so.top_p > 0 && so.top_p <= 1) || !(so.min_p >= 0 && so.min_p <= 1) ||
      !(so.repeat_penalty > 0) || so.repeat_window > kSampleMaxWindow)
    throw Error("sampling options out of range: need --temp >= 0, 0 < --top-p <= 1, 0 <= --min-p <= 1, "
                "--repeat-penalty > 0, --repeat-window <= " + std::to_string(kSampleMaxWindow));
  const uint32_t K = opts.topk, D = opts.depth, B = opts.budget;
  if (s != Strategy::AR) {
    check_tree_options(h1, h2);  // before anything is allocated
    const uint32_t pool_cap = uint32_t(draft_pool_nodes(K, D));  // <= kTreeMaxNodes, checked
    for (auto [h, id] : {std::pair{h1, 1u}, std::pair{h2, 2u}}) {
      if (!h || (id == 1 && !need1) || (id == 2 && !need2)) {
        heads_.push_back(nullptr);
        continue;
      }
      auto hs = std::make_unique<HeadState>();
      hs->head = h;
      hs->pool = std::make_unique<DeviceTree>(ctx, pool_cap, D);
      hs->tree = std::make_unique<DeviceTree>(ctx, B + 1, D);
      hs->pool_count = pool_cap;
      hs->frontier = Buffer(ctx, (D + 1) * K * 4);
      hs->ids = Buffer(ctx, K * kTopkMax * 4);
      hs->logp = Buffer(ctx, K * kTopkMax * 4);
      hs->tok = Buffer(ctx, K * 4);
      hs->feat = Buffer(ctx, uint64_t(K) * pad4(uint32_t(model.config().C)) * 4);
      const uint32_t words = ((D - 1) * K + 31) / 32 + 1;
      hs->mask = Buffer(ctx, uint64_t(std::max(1u, D - 1)) * K * words * 4);
      heads_.push_back(std::move(hs));
    }
    vtree_ = std::make_unique<DeviceTree>(ctx, verify_nodes(), D);
  }
  seq_tokens_ = Buffer(ctx, uint64_t(model.capacity() + 64) * 4);
  count_ = Buffer(ctx, 16, MemoryKind::Host);
  readback_ = Buffer(ctx, 64 + (kAttentionMaxDepth + 2) * 4, MemoryKind::Host);
  params_ = Buffer(ctx, params_words(draft_depth(), opts.topk) * 4, MemoryKind::Host);
  zero_ = Buffer(ctx, 64);
  zero_.upload(std::vector<uint32_t>(16, 0));
  vargmax_ = Buffer(ctx, uint64_t(model.max_rows()) * 4);
  accepted_ = Buffer(ctx, (kAttentionMaxDepth + 1) * 4);
  feat_ = Buffer(ctx, uint64_t(kAttentionMaxDepth + 1) * pad4(uint32_t(model.config().C)) * 4);
  if (sampling()) {
    probs_ = Buffer(ctx, uint64_t(verify_nodes()) * uint32_t(model.config().V) * 4);
    root_tree_ = std::make_unique<DeviceTree>(ctx, 1, 1);
    root_tree_->parent.upload(std::vector<int32_t>{-1});
    root_tree_->token.upload(std::vector<uint32_t>{0});
    root_tree_->head.upload(std::vector<uint32_t>{0});
  }
}

// Samples y[t_last + 1] from G(logits_row) on the GPU: a root-only tree through the rejection
// kernel is a plain inverse-CDF draw, keyed by step t_last like a speculative step at t_last.
void Engine::record_sample_next(Sequence& seq, Mat logits_row, uint32_t t_last) {
  const uint32_t V = uint32_t(model_.config().V);
  sample_probs(seq, logits_row, Mat{&probs_, 0, V}, 1, V, opts_.sampling, seq_tokens_, t_last, *root_tree_);
  AcceptSampleArgs aa;
  aa.n = 1, aa.V = V, aa.probs = Mat{&probs_, 0, V}, aa.seed = opts_.sampling.seed, aa.step = t_last;
  aa.accepted = &accepted_;
  accept_sample(seq, *root_tree_, aa);
  *static_cast<uint32_t*>(count_.mapped()) = t_last + 1;
  put_next_root(seq, root_tree_->info, count_, seq_tokens_);
}

Engine::~Engine() = default;

uint32_t Engine::verify_nodes() const {
  const uint32_t B = opts_.budget;
  switch (opts_.strategy) {
    case Strategy::AR: return 1;
    case Strategy::Single1:
    case Strategy::Single2:
    case Strategy::Route: return 1 + B;
    case Strategy::Merge:
    case Strategy::MergeTrie: return 1 + 2 * B;
  }
  return 1;
}

// Head positions: the pair (f_j, y[j+1]) sits at head position j (EAGLE). Ingest rows j = t_from
// .. t_from+n-1 take features f_j and tokens y[j+1] (the last one being the root).
void Engine::record_ingest(Sequence& seq, HeadState& hs, Mat features, uint32_t t_from, uint32_t n) {
  int32_t* p = params_ptr(params_);
  assert(n <= kIngestRows);
  for (uint32_t r = 0; r < n; ++r) p[r] = int32_t(t_from + r);
  EagleHead::ForwardArgs a;
  a.N = n, a.t = t_from, a.kv_slot = t_from;
  a.tokens = &seq_tokens_, a.tok_offset = t_from + 1;
  a.features = features;
  a.pos = &params_, a.pos_offset = 0;
  a.logits_from = n - 1;
  hs.head->forward(seq, a);
  hs.t_head = t_from + n;
  hs.root_row = n - 1;
}

// EAGLE-2 drafting (seed 001 §3, DESIGN §2): depth 1 = top-k children of the root; each further
// depth expands the k best frontier nodes by their top-k, all k·k scored by cumulative log-prob,
// the best k become the next frontier; finally the best B of all candidates form the tree.
void Engine::record_draft(Sequence& seq, HeadState& hs, uint32_t head_id) {
  EagleHead& head = *hs.head;
  const uint32_t K = opts_.topk, D = opts_.depth, C = uint32_t(model_.config().C), V = uint32_t(model_.config().V);
  const uint32_t t = hs.t_head, words = ((D - 1) * K + 31) / 32 + 1;
  pool_init(seq, *hs.pool, seq_tokens_, t);
  topk(seq, head.logits().row(hs.root_row), 1, V, K, hs.ids, hs.logp, 0, kTopkMax);
  draft_expand(seq, *hs.pool, 1, zero_, 0, 1, hs.ids, hs.logp, 0, kTopkMax, K, head_id, hs.frontier, 0, K);
  int32_t* p = params_ptr(params_);
  uint32_t base = 1;  // pool index of the first candidate of the current level
  for (uint32_t l = 1; l < D; ++l) {
    // Run the level-l frontier through the head: tokens, parents' h and mask rows first.
    GatherPush gp{K, l, base, (l - 1) * K, hs.root_row, C, head.hidden().stride, pad4(C), words};
    const Pipeline& gpipe = ops::simple_pipeline(ctx_, "draft_gather", 6, sizeof(GatherPush), {});
    seq.dispatch(gpipe, {in(hs.pool->token), in(hs.frontier), in(*head.hidden().buf), out(hs.tok), out(hs.feat), out(hs.mask)},
                 gp, K, 1, 1, "draft_gather");
    const uint32_t po = draft_pos_offset(l, K);
    for (uint32_t f = 0; f < K; ++f) p[po + f] = int32_t(t + l - 1);  // head position of a depth-l node
    EagleHead::ForwardArgs a;
    a.N = K, a.t = t, a.kv_slot = t + (l - 1) * K;
    a.tokens = &hs.tok, a.tok_offset = 0;
    a.features = Mat{&hs.feat, 0, pad4(C)};
    a.pos = &params_, a.pos_offset = po;
    a.mask = &hs.mask, a.mask_offset = (l - 1) * K * words, a.mask_words = words;
    head.forward(seq, a);
    topk(seq, head.logits(), K, V, K, hs.ids, hs.logp, 0, kTopkMax);
    const uint32_t next_base = l == 1 ? 1 + K : base + K * K;
    draft_expand(seq, *hs.pool, next_base, hs.frontier, (l - 1) * K, K, hs.ids, hs.logp, 0, kTopkMax, K, head_id,
                 hs.frontier, l * K, K);
    base = next_base;
  }
  draft_select(seq, *hs.pool, hs.pool_count, opts_.budget, *hs.tree);
}

void Engine::prefill(Sequence& seq, const std::vector<uint32_t>& prompt) {
  uint32_t R = model_.max_rows();  // prefill chunk: what both the verifier and the heads take per pass
  for (auto& hs : heads_)
    if (hs) R = std::min(R, hs->head->max_rows());
  const uint32_t P = uint32_t(prompt.size());
  int32_t* p = params_ptr(params_);
  for (uint32_t i = 0; i < P; ++i) p[i % kIngestRows] = int32_t(i);  // check_fits: P <= kIngestRows
  for (uint32_t c0 = 0; c0 < P; c0 += R) {
    const uint32_t n = std::min(R, P - c0);
    LlamaModel::ForwardArgs a;
    a.N = n, a.t = c0, a.tokens = &seq_tokens_, a.tok_offset = c0;
    a.pos = &params_, a.pos_offset = c0 % kIngestRows;
    a.logits_from = n - 1;
    model_.forward(seq, a);
    if (c0 + n == P) {
      if (sampling())
        record_sample_next(seq, model_.logits().row(n - 1), P - 1);
      else
        argmax(seq, model_.logits().row(n - 1), seq_tokens_, P, 1, uint32_t(model_.config().V));
    }
    // Head ingest of this chunk's pairs (f_j, y[j+1]); the last pair's token is the root just
    // written by argmax (ordered by the recorder's hazard barriers).
    for (auto& hs : heads_)
      if (hs) {
        // Positions of the chunk are already in params at c0 % kIngestRows.. — same values the head needs.
        EagleHead::ForwardArgs h;
        h.N = n, h.t = c0, h.kv_slot = c0, h.tokens = &seq_tokens_, h.tok_offset = c0 + 1;
        h.features = model_.hidden();
        h.pos = &params_, h.pos_offset = c0 % kIngestRows;
        h.logits_from = n - 1;
        hs->head->forward(seq, h);
        hs->t_head = c0 + n;
        hs->root_row = n - 1;
      }
  }
}

void Engine::check_fits(const std::vector<uint32_t>& prompt, uint32_t n_new) const {
  const uint32_t P = uint32_t(prompt.size()), V = uint32_t(model_.config().V);
  if (P == 0) throw Error("the prompt is empty: give at least one token");
  for (uint32_t id : prompt)
    if (id >= V) throw Error("prompt token id " + std::to_string(id) + " is outside the vocabulary (size " + std::to_string(V) + ")");
  // Cache slots a step may write past the committed tokens: the verified tree, the draft levels.
  const uint64_t slack = verify_nodes() + uint64_t(draft_depth()) * (draft_depth() ? opts_.topk : 0) + 2;
  if (uint64_t(P) + n_new + slack > model_.capacity())
    throw Error("prompt of " + std::to_string(P) + " tokens + " + std::to_string(n_new) +
                " new tokens does not fit the context of " + std::to_string(model_.capacity()) +
                " tokens (raise --ctx or lower -n)");
  for (auto& hs : heads_)
    if (hs && uint64_t(P) + n_new + slack > hs->head->capacity())
      throw Error("prompt + new tokens do not fit the draft head's context; raise --ctx");
  if (P > kIngestRows)
    throw Error("prompts longer than " + std::to_string(kIngestRows) + " tokens are not supported yet");
}

GenerateStats Engine::generate(const std::vector<uint32_t>& prompt, uint32_t n_new,
                               const std::function<void(const uint32_t*, size_t)>& on_tokens) {
  using clock = std::chrono::steady_clock;
  check_fits(prompt, n_new);
  const uint32_t P = uint32_t(prompt.size()), V = uint32_t(model_.config().V);
  GenerateStats st;
  st.accept_hist.assign(draft_depth() + 2, 0);
  if (n_new == 0) return st;  // nothing asked for: not even the prefill's token
  const uint64_t waits0 = ctx_.host_waits();
  seq_tokens_.upload(prompt);
  Sequence seq(ctx_, opts_.time_kernels ? 4096 : 0);
  auto t0 = clock::now();
  seq.begin();
  prefill(seq, prompt);
  seq.run();
  t_ = P;
  st.prefill_seconds = std::chrono::duration<double>(clock::now() - t0).count();
  auto t1 = clock::now();
  uint32_t root = seq_tokens_.read<uint32_t>(1, size_t(P) * 4)[0];
  st.tokens.push_back(root);
  if (on_tokens) on_tokens(&root, 1);
  const uint64_t waits1 = ctx_.host_waits();
  uint32_t dispatches = 0;

  ingest_n_ = 0;  // prefill already ingested the prompt
  const uint32_t window = draft_depth() + 2;  // tokens a step can commit, read back each step
  while (st.tokens.size() < n_new) {
    seq.begin();
    uint32_t a = 0;
    if (ingest_n_)
      for (auto& hs : heads_)
        if (hs) record_ingest(seq, *hs, Mat{&feat_, 0, pad4(uint32_t(model_.config().C))}, ingest_from_, ingest_n_);
    if (opts_.strategy == Strategy::AR) {
      // One token: the root runs through the verifier, its argmax is the next root.
      int32_t* p = params_ptr(params_);
      p[0] = int32_t(t_);
      LlamaModel::ForwardArgs fa;
      fa.N = 1, fa.t = t_, fa.tokens = &seq_tokens_, fa.tok_offset = t_, fa.pos = &params_;
      model_.forward(seq, fa);
      if (sampling())
        record_sample_next(seq, model_.logits(), t_);
      else
        argmax(seq, model_.logits(), seq_tokens_, t_ + 1, 1, V);
      seq.copy(seq_tokens_, uint64_t(t_ + 1) * 4, readback_, 64, 4);
      seq.run();
      if (opts_.time_kernels)
        for (auto& x : seq.timings()) {
          st.verify_ms += x.us * 1e-3;
          st.kernel_ms[x.label] += x.us * 1e-3;
        }
    } else {
      // draft(): both heads into the same command buffer.
      for (uint32_t h = 0; h < 2; ++h)
        if (heads_[h]) record_draft(seq, *heads_[h], h + 1);
      const uint32_t n_draft = seq.dispatch_count();
      // route() / merge() (seed 001 §5, seed 000 §4).
      const uint32_t B = opts_.budget;
      DeviceTree* vt = vtree_.get();
      switch (opts_.strategy) {
        case Strategy::Single1: merge_trees(seq, *heads_[0]->tree, B, *heads_[0]->tree, 0, *vt); break;
        case Strategy::Single2: merge_trees(seq, *heads_[1]->tree, B, *heads_[1]->tree, 0, *vt); break;
        case Strategy::Route: route_trees(seq, *heads_[0]->tree, B, *heads_[1]->tree, B, *vt); break;
        case Strategy::Merge: merge_trees(seq, *heads_[0]->tree, B, *heads_[1]->tree, B, *vt); break;
        case Strategy::MergeTrie:
          merge_trie(seq, *heads_[0]->pool, heads_[0]->pool_count, *heads_[1]->pool, heads_[1]->pool_count,
                     verify_nodes(), *vt);
          break;
        case Strategy::AR: break;
      }
      const uint32_t N = verify_nodes();
      tree_meta(seq, *vt, N, t_);
      // verify(): one verifier pass over the whole tree with the ancestor mask.
      LlamaModel::ForwardArgs fa;
      fa.N = N, fa.t = t_, fa.tokens = &vt->token, fa.pos = &vt->pos;
      fa.mask = &vt->mask, fa.mask_words = vt->mask_words;
      model_.forward(seq, fa);
      if (sampling())  // p = G(logits) per node (include/vkspec/sample.hpp)
        sample_probs(seq, model_.logits(), Mat{&probs_, 0, V}, N, V, opts_.sampling, seq_tokens_, t_, *vt);
      else
        argmax(seq, model_.logits(), vargmax_, 0, N, V);
      const uint32_t n_verify = seq.dispatch_count();
      if (sampling()) {
        // accept(), sampling (DESIGN §3, seed 000/001 §6.2): tree rejection sampling from the
        // root; the same outputs as accept_greedy, so commit below is shared.
        AcceptSampleArgs aa;
        aa.n = N, aa.V = V, aa.probs = Mat{&probs_, 0, V}, aa.seed = opts_.sampling.seed, aa.step = t_;
        aa.accepted = &accepted_;
        accept_sample(seq, *vt, aa);
      } else {
        // accept(): longest match over all root-to-leaf rows (seed 000 §6.1), ties to the lower row.
        accept_greedy(seq, *vt, vargmax_, accepted_);
      }
      // commit(): accepted KV rows into place, their features for both heads, tokens appended.
      for (int l = 0; l < model_.config().L; ++l) {
        commit_rows(seq, *vt, accepted_, t_, model_.k_cache(l), model_.kv_row_floats());
        commit_rows(seq, *vt, accepted_, t_, model_.v_cache(l), model_.kv_row_floats());
      }
      gather_rows(seq, *vt, accepted_, model_.hidden(), Mat{&feat_, 0, pad4(uint32_t(model_.config().C))},
                  uint32_t(model_.config().C));
      *static_cast<uint32_t*>(count_.mapped()) = t_;
      append_tokens(seq, *vt, accepted_, seq_tokens_, count_);
      put_next_root(seq, vt->info, count_, seq_tokens_);
      // Everything the host needs after the step lands in one host-visible buffer: no extra waits.
      seq.copy(vt->info, 0, readback_, 0, 64);
      seq.copy(seq_tokens_, uint64_t(t_ + 1) * 4, readback_, 64, uint64_t(window) * 4);
      seq.run();
      if (opts_.time_kernels) {
        auto tm = seq.timings();
        for (uint32_t i = 0; i < tm.size(); ++i) {
          (i < n_draft ? st.draft_ms : i < n_verify ? st.verify_ms : st.commit_ms) += tm[i].us * 1e-3;
          st.kernel_ms[tm[i].label] += tm[i].us * 1e-3;
        }
      }
      const uint32_t* info = static_cast<const uint32_t*>(readback_.mapped());
      a = info[kInfoAccepted];
      ++st.head_wins[opts_.strategy == Strategy::Route ? info[kInfoChosen] & 3 : info[kInfoBestHead] & 3];
      st.nodes_per_step = N;
    }
    dispatches = seq.dispatch_count();
    ++st.steps;
    ++st.accept_hist[std::min<size_t>(a, st.accept_hist.size() - 1)];
    // Committed this step: y[t+1 .. t+a+1] (accepted drafts, then the next root).
    const uint32_t* rb = static_cast<const uint32_t*>(readback_.mapped());
    std::vector<uint32_t> fresh(rb + 16, rb + 16 + a + 1);
    const uint32_t t_old = t_;
    t_ += a + 1;
    // The heads ingest the pairs (f_j, y[j+1]) for j = t_old .. t_old+a at the start of the next
    // step's command buffer, so a step stays one submit and one wait.
    ingest_from_ = t_old;
    ingest_n_ = a + 1;
    const size_t room = n_new - st.tokens.size();
    const size_t take = std::min<size_t>(room, fresh.size());
    st.tokens.insert(st.tokens.end(), fresh.begin(), fresh.begin() + take);
    if (on_tokens && take) on_tokens(fresh.data(), take);
  }
  st.seconds = std::chrono::duration<double>(clock::now() - t1).count();
  st.tau = st.steps ? double(st.tokens.size() - 1) / st.steps : 0;
  st.tokens_per_s = st.seconds > 0 ? double(st.tokens.size() - 1) / st.seconds : 0;
  st.host_waits_per_step = st.steps ? double(ctx_.host_waits() - waits1) / st.steps : 0;
  st.dispatches_per_step = dispatches;
  if (st.steps && opts_.time_kernels) {
    st.draft_ms /= st.steps;
    st.verify_ms /= st.steps;
    st.commit_ms /= st.steps;
    for (auto& [k, v] : st.kernel_ms) v /= st.steps;
  }
  (void)waits0;
  return st;
}

}  // namespace vkspec
