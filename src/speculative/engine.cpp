// The engine: builds the strategy's parts and its StepPlan once, then generate() prefills and
// resubmits the plan, S steps per submission, reading the output list once per submission.
#include "vkspec/engine.hpp"

#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <chrono>
#include <cstring>

#include "ops/common.hpp"
#include "vkspec/pair_pack.hpp"
#include "speculative/step_plan.hpp"

namespace vkspec {

using namespace speculative;

struct Engine::Parts {
  // Declared first, so destroyed last: the pack, then the heads whose states it holds, outlive the
  // drafters and the plan that use them.
  std::unique_ptr<PairPack> pack;  // PlanShape::pack
  std::unique_ptr<EagleHead> pack_heads[2];  // with a pack: the two heads over the same weights, their states in it
  std::string pack_refused;  // why a pack asked for was not made (GenerateStats::pair_pack_refused)
  StepBuffers buffers;
  std::unique_ptr<Verifier> verifier;
  std::vector<std::unique_ptr<Drafter>> drafter_store;
  std::vector<Drafter*> plan_drafters;  // drafter_store's, in order
  std::unique_ptr<Combiner> combiner;
  std::unique_ptr<StepPlan> plan;
  bool pair = false;  // PlanShape::pair
  DeviceTree root_tree;  // a root-only tree: what the prefill's first token is sampled through
  Buffer probs;          // (1, V) G's output for that draw
  Buffer path;           // its accepted path (the root alone)
  struct Run;
  std::unique_ptr<Run> run;  // the generation in progress (begin / submit / poll)
};

// The non-blocking generation's state. With a timeline (set_timeline), every submission signals
// it to ++*counter.
struct Engine::Parts::Run {
  VkSemaphore timeline = VK_NULL_HANDLE;
  uint64_t* counter = nullptr;
  std::unique_ptr<Sequence> prefill;
  uint32_t n_new = 0, seen = 0;
  bool begun = false, finished = false, cancelled = false;
  uint32_t fault = 0;  // the output list's kOutFault once finished: 1 + a non-finite row's position
  uint64_t next() { return counter ? ++*counter : 0; }
};

void Engine::check_tree_options(const EagleHead* h1, const EagleHead* h2) const {
  const uint32_t K = opts_.topk, D = opts_.depth, B = opts_.budget;
  const auto str = [](uint64_t x) { return std::to_string(x); };
  const OptionNames& n = *opts_.names;
  check_draft_options(K, D, B, uint32_t(model_.config().V), n);
  const uint32_t maxB = max_draft_budget(opts_.strategy, K, D);
  if (B > maxB)
    throw Error(std::string(n.budget) + " " + str(B) + " gives " + strategy_name(opts_.strategy) + " a verified tree of " +
                str(verify_nodes()) + " nodes, more than the " + str(kTreeMaxNodes) +
                " the tree kernels hold: use " + n.budget + " <= " + str(maxB));
  if (verify_nodes() > model_.max_rows())
    throw Error("a verified tree of " + str(verify_nodes()) + " nodes exceeds the verifier's " +
                str(model_.max_rows()) + " rows per pass");
  for (const EagleHead* h : {h1, h2})
    if (h && h->eagle3() && K > uint32_t(h->config().draft_V))
      throw Error(std::string(n.topk) + " " + str(K) + " exceeds the draft vocabulary of " + str(h->config().draft_V) +
                  " ids of EAGLE-3 head " + h->path());
  for (const EagleHead* h : {h1, h2})
    if (h && h->max_rows() < std::max(K, D + 1))
      throw Error(std::string(n.topk) + " " + str(K) + " and " + n.depth + " " + str(D) + " need " + str(std::max(K, D + 1)) +
                  " rows per draft-head pass (a level's top-k, or the depth + 1 rows a step ingests); the head has " +
                  str(h->max_rows()));
}

namespace {
// Whether two heads record the same draft ops, so that their dispatches pair and a pack is
// read: the same kind (an EAGLE-1 and an EAGLE-3 head's lists differ from the first op) and the
// same layer shape. Heads that do not run paired get no pack, which would only cost their
// weight bytes and a state each once more. (A role one head lacks, such as an EAGLE-3 head's own
// embedding, is left out of the pack by PairPack itself.)
bool heads_alike(const EagleHead& a, const EagleHead& b) {
  const HeadConfig &x = a.config(), &y = b.config();
  return x.eagle3 == y.eagle3 && x.C == y.C && x.H == y.H && x.Hkv == y.Hkv && x.D == y.D && x.F == y.F &&
         x.V == y.V && x.draft_V == y.draft_V;
}
}  // namespace

// The sampling options, submission length and stop ids, each by name (the constructor, retune).
// The temperature and the penalty divide logits, so each must have a finite float inverse: 1e-45
// (1/T overflows) and 1e39 (inf as a float) sampled noise before.
void Engine::check_values(const EngineOptions& opts, uint32_t vocab) {
  const SamplingOptions& so = opts.sampling;
  auto invertible = [](float v) { return v > 0 && std::isfinite(v) && std::isfinite(1.0f / v); };
  auto out_of_range = [](const char* opt, float v, const std::string& need) {
    char got[32];
    std::snprintf(got, sizeof got, "%g", double(v));
    return Error(std::string(opt) + " " + got + " is out of range: " + need);
  };
  const OptionNames& n = *opts.names;
  if (!(so.temperature == 0 || invertible(so.temperature)))
    throw out_of_range(n.temp, so.temperature, "0 (greedy) or a positive number whose inverse is finite (about 1.2e-38 .. 3.4e38)");
  if (!(so.top_p > 0 && so.top_p <= 1)) throw out_of_range(n.top_p, so.top_p, "0 < top-p <= 1");
  if (!(so.min_p >= 0 && so.min_p <= 1)) throw out_of_range(n.min_p, so.min_p, "0 <= min-p <= 1");
  if (!invertible(so.repeat_penalty))
    throw out_of_range(n.repeat_penalty, so.repeat_penalty, "a positive number whose inverse is finite (about 1.2e-38 .. 3.4e38)");
  if (so.repeat_window > kSampleMaxWindow)
    throw Error(std::string(n.repeat_window) + " " + std::to_string(so.repeat_window) + " is out of range: at most " + std::to_string(kSampleMaxWindow));
  if (opts.steps_per_submit < 1 || opts.steps_per_submit > 64)
    throw Error("--steps-per-submit must be in 1..64, got " + std::to_string(opts.steps_per_submit));
  if (opts.stop_tokens.size() > kOutMaxStop)
    throw Error("at most " + std::to_string(kOutMaxStop) + " stop tokens, got " + std::to_string(opts.stop_tokens.size()));
  for (uint32_t id : opts.stop_tokens)
    if (id >= vocab)
      throw Error("stop token " + std::to_string(id) + " is outside the vocabulary (size " +
                  std::to_string(vocab) + ")");
}

// What the recorded step holds of the options: all of them but the sampler's values and the stop
// ids, which go in with each prompt (record_prefill, begin).
bool Engine::records_same_step(const EngineOptions& o) const {
  const EngineOptions& a = opts_;
  const SamplingOptions &x = a.sampling, &y = o.sampling;
  return a.strategy == o.strategy && a.depth == o.depth && a.topk == o.topk && a.budget == o.budget &&
         a.time_kernels == o.time_kernels && a.force_sampling_path == o.force_sampling_path &&
         a.steps_per_submit == o.steps_per_submit && a.pair_heads == o.pair_heads && a.pack_pairs == o.pack_pairs &&
         x.active() == y.active() && (x.temperature > 0) == (y.temperature > 0) && x.top_k == y.top_k &&
         x.repeat_window == y.repeat_window;
}

void Engine::retune(const EngineOptions& o) {
  if (!records_same_step(o)) throw Error("Engine::retune: these options record another step; build another Engine");
  check_values(o, uint32_t(model_.config().V));
  std::vector<uint32_t> stop = o.stop_tokens;  // the one step that can throw (memory), before any change
  opts_.sampling = o.sampling;
  opts_.stop_tokens = std::move(stop);
  opts_.names = o.names;
}

Engine::Engine(Context& ctx, LlamaModel& model, EagleHead* h1, EagleHead* h2, const EngineOptions& opts)
    : ctx_(ctx), model_(model), opts_(opts), parts_(std::make_unique<Parts>()) {
  const Strategy s = opts.strategy;
  auto combiner = make_combiner(s);
  // Which heads draft: single2 uses head 2 alone; route / merge / merge-trie both, in order.
  std::vector<EagleHead*> heads;
  if (s == Strategy::Single1 || (combiner && combiner->drafters() == 2)) heads.push_back(h1);
  if (s == Strategy::Single2 || (combiner && combiner->drafters() == 2)) heads.push_back(h2);
  if (s == Strategy::Single2 && !h2 && h1)  // one head given: single2 drafts with the second
    throw Error(std::string("strategy single2 drafts with the second of two heads (") + opts.names->heads + "), and one head was given; "
                "single1 drafts with it");
  for (EagleHead* h : heads)
    if (!h)
      throw Error(std::string("strategy ") + strategy_name(s) + " needs " +
                  (heads.size() == 2 ? "two draft heads" : "a draft head") + " (" + opts.names->heads + ")");
  check_values(opts, uint32_t(model.config().V));
  // Before anything is allocated; only the heads that draft (single1 with an EAGLE-3 second head
  // of a 2-id draft vocabulary was refused a top-k that head never runs).
  if (s != Strategy::AR) check_tree_options(heads[0], heads.size() > 1 ? heads[1] : nullptr);

  Parts& p = *parts_;
  const uint32_t C = uint32_t(model.config().C), V = uint32_t(model.config().V);
  StepBuffers& b = p.buffers;
  b.state = Buffer(ctx, kStateWords * 4);
  // The output list holds at most the context's tokens (check_fits refuses more).
  b.out_list = Buffer(ctx, (kOutTokens + uint64_t(model.capacity())) * 4, MemoryKind::Host);
  b.seq_tokens = Buffer(ctx, uint64_t(model.capacity() + 64) * 4);
  b.seq_tokens.upload(std::vector<uint32_t>(model.capacity() + 64, 0));  // rows past t read valid ids
  b.feat_stride = pad4(C);
  b.feat = Buffer(ctx, uint64_t(kTreeMaxPath) * b.feat_stride * 4);
  b.feat.upload(std::vector<float>(size_t(kTreeMaxPath) * b.feat_stride, 0.0f));  // finite before first use
  // EAGLE-3 heads read the verifier's residual stream at their tap points, which the verifier
  // then exports from every forward, and the commit gathers for the accepted path.
  for (EagleHead* h : heads)
    if (h->eagle3()) model.enable_taps(h->tap_points());
  if (model.tap_width()) {
    b.taps_stride = pad4(model.tap_width());
    b.taps = Buffer(ctx, uint64_t(kTreeMaxPath) * b.taps_stride * 4);
    b.taps.upload(std::vector<float>(size_t(kTreeMaxPath) * b.taps_stride, 0.0f));
  }
  p.verifier = std::make_unique<Verifier>(model);
  p.combiner = std::move(combiner);
  p.pair = opts.pair_heads && heads.size() == 2 && heads[0] != heads[1];
  // Where weights and states are read through texel views, a paired dispatch would fetch each
  // texel from both heads' views (pair_pack.hpp): pack the two heads' weights, and make the heads
  // the drafters use anew over the same weights with their states in the pack, so it fetches one.
  if (p.pair && opts.pack_pairs && ctx.caps().quirks.weights_via_texel_buffer && heads_alike(*heads[0], *heads[1])) {
    const auto wa = heads[0]->weights()->device_weights(), wb = heads[1]->weights()->device_weights();
    uint64_t state = 0;
    for (EagleHead* h : heads) {
      const StateBytes sb = head_state_bytes(h->config(), h->capacity(), h->max_rows(), h->kv_type());
      state = std::max(state, sb.kv + sb.scratch);
    }
    // Each placed buffer may start at its alignment: room for that per buffer (a dozen a state).
    state += 16 * PairPack::kMaxPlacedAlignment;
    try {
      p.pack = std::make_unique<PairPack>(ctx, wa, wb, state, [&](int side) {
        const EagleHead& h = *heads[size_t(side)];
        p.pack_heads[side] = std::make_unique<EagleHead>(h.weights(), model, h.capacity(), h.max_rows());
      });
      heads = {p.pack_heads[0].get(), p.pack_heads[1].get()};
    } catch (const Error& e) {
      // The pack only saves fetches: without it the paired dispatches read both heads' own
      // buffers and compute the same. Run so, and say why.
      p.pack_heads[0].reset(), p.pack_heads[1].reset(), p.pack.reset();
      p.pack_refused = e.what();
    }
  }
  std::vector<Drafter*> drafters;
  for (size_t i = 0; i < heads.size(); ++i) {
    DraftShape ds{opts.topk, draft_depth(), opts.budget, uint32_t(i + 1), p.combiner->reads_trees()};
    if (s == Strategy::Single2) ds.head_id = 2;
    p.drafter_store.push_back(make_eagle_drafter(ctx, *heads[i], *p.verifier, ds));
    drafters.push_back(p.drafter_store.back().get());
    p.plan_drafters.push_back(drafters.back());
  }
  if (sampling()) {
    p.probs = Buffer(ctx, uint64_t(V) * 4);
    p.path = Buffer(ctx, 16);
    p.root_tree = DeviceTree(ctx, 1, 1);
    p.root_tree.parent.upload(std::vector<int32_t>{-1});
    p.root_tree.token.upload(std::vector<uint32_t>{0});
    p.root_tree.head.upload(std::vector<uint32_t>{0});
  }
  PlanShape shape{opts.topk, draft_depth(), opts.budget, sampling(), opts.sampling, opts.time_kernels, p.pair,
                  p.pack.get()};
  p.plan = std::make_unique<StepPlan>(ctx, *p.verifier, drafters, p.combiner.get(), shape, b);
  p.run = std::make_unique<Parts::Run>();
}

Engine::~Engine() {
  if (parts_ && parts_->run) wait();  // nothing in flight may outlive the buffers it uses
}

uint32_t Engine::verify_nodes() const {
  return opts_.strategy == Strategy::AR ? 1 : make_combiner(opts_.strategy)->verify_nodes(opts_.budget);
}

uint32_t Engine::dispatches_per_step() const { return parts_->plan->dispatches(); }

// The prompt in passes (prefill_passes: sizes from a fixed set, the last pass ending at P) through
// the verifier and the drafters, then y[P] = argmax (taken by step_advance) or a draw from G, and
// the step state for the first step: t = P, prev_t = P-1, a = 0, feat row 0 = f_{P-1}.
// The drafters take pairs (f_j, y[j+1]) at head positions j of each pass's rows. The last pass's
// last pair, j = P-1, reads y[P] before it exists (a valid id: seq_tokens never holds another) and
// writes head slot P-1, which the first step's ingest writes again with the real pair before any
// row reads it; so the drafters run the verifier's row count, from the same fixed set.
void Engine::record_prefill(Sequence& seq, const std::vector<uint32_t>& prompt) {
  Parts& p = *parts_;
  StepBuffers& b = p.buffers;
  const uint32_t P = uint32_t(prompt.size()), V = uint32_t(model_.config().V);
  uint32_t R = model_.max_rows();  // rows a pass: what both the verifier and the drafters take
  for (auto& d : p.drafter_store) R = std::min(R, d->max_rows());
  uint32_t state[kStateWords] = {P - 1, P - 1, 0, 0};
  const auto sampler = sampler_state_words(opts_.sampling);  // the recorded step reads them here
  std::copy(sampler.begin(), sampler.end(), state + kStateSampling);
  seq.update(b.state, 0, state, sizeof(state));
  uint32_t last_row = 0;  // P-1's row in the last pass
  for (const RowPass& pass : prefill_passes(P, R)) {
    LlamaModel::ForwardArgs a;
    a.N = pass.rows, a.t = pass.first, a.tokens = &b.seq_tokens, a.tok_offset = pass.first;
    a.logits_from = pass.rows - 1;
    a.hidden = !p.drafter_store.empty();
    p.verifier->forward(seq, a);
    record_drafters(seq, p.plan_drafters, p.pair, p.pack.get(),
                    [&](Drafter& d) { d.record_prefill(seq, b, model_.hidden(), model_.taps(), pass.first, pass.rows); });
    last_row = pass.rows - 1;
  }
  const Mat last = model_.logits().row(last_row);
  if (sampling()) {
    sample_probs(seq, last, Mat{&p.probs, 0, V}, 1, V, opts_.sampling, b.seq_tokens, P - 1, p.root_tree);
    AcceptSampleArgs aa;
    aa.n = 1, aa.V = V, aa.probs = Mat{&p.probs, 0, V}, aa.seed = opts_.sampling.seed, aa.step = P - 1;
    aa.accepted = &p.path;
    accept_sample(seq, p.root_tree, aa);
    put_token(seq, p.root_tree.info, kInfoNextRoot, b.seq_tokens, P);
  }
  if (!p.drafter_store.empty()) copy_rows(seq, model_.hidden(), last_row, b.features(), 1, uint32_t(model_.config().C));
  if (!p.drafter_store.empty() && b.taps_stride)
    copy_rows(seq, model_.taps(), last_row, b.tap_features(), 1, model_.tap_width());
  // Greedy: y[P] = y[t+1] (t = P - 1) = argmax, taken by step_advance itself.
  const StepArgmax am{last, V};
  step_advance(seq, b.state, nullptr, nullptr, b.seq_tokens, b.out_list, /*count_step=*/false, kDynFixed,
               sampling() ? nullptr : &am);
}

void Engine::check_fits(const std::vector<uint32_t>& prompt, uint32_t n_new) const {
  const uint32_t P = uint32_t(prompt.size()), V = uint32_t(model_.config().V);
  if (P == 0) throw Error("the prompt is empty: give at least one token");
  for (uint32_t id : prompt)
    if (id >= V) throw Error("prompt token id " + std::to_string(id) + " is outside the vocabulary (size " + std::to_string(V) + ")");
  // Cache slots a step may write past the committed tokens: the verified tree, the draft levels.
  // ar needs none: the prompt's pass emits token P, and the step emitting token P + k writes the
  // cache row of P + k - 1, so n tokens write rows up to P + n - 2 (a done step writes nothing).
  // P + n <= the context, as llama.cpp counts it.
  const uint64_t slack = opts_.strategy == Strategy::AR
                             ? 0
                             : verify_nodes() + uint64_t(draft_depth()) * (draft_depth() ? opts_.topk : 0) + 2;
  if (uint64_t(P) + n_new + slack > model_.capacity())
    throw Error("prompt of " + std::to_string(P) + " tokens + " + std::to_string(n_new) + " new tokens" +
                (slack ? " + " + std::to_string(slack) + " cache slots a step writes past them (" +
                             (draft_depth() ? "its verified tree and draft levels, " : "") + "the last step's)"
                       : std::string()) +
                " does not fit the context of " + std::to_string(model_.capacity()) + " tokens (raise " +
                opts_.names->ctx + " or lower " + opts_.names->n_new + ")");
  for (auto& d : parts_->drafter_store)
    if (uint64_t(P) + n_new + slack > d->capacity())
      throw Error(std::string("prompt + new tokens do not fit the draft head's context; raise ") + opts_.names->ctx);
}

namespace {
double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}
}  // namespace

void Engine::begin(const std::vector<uint32_t>& prompt, uint32_t n_new) {
  check_fits(prompt, n_new);
  wait();  // a previous generation's work in flight (the caller normally polled it to the end)
  Parts& p = *parts_;
  Parts::Run& r = *p.run;
  StepBuffers& b = p.buffers;
  r.begun = true, r.cancelled = false, r.finished = n_new == 0, r.n_new = n_new, r.seen = 0, r.fault = 0;
  if (n_new == 0) {
    // Nothing asked for, not even the prefill's token. The prefill is recorded all the same and
    // dropped unsubmitted: the pipelines this prompt's passes use are built now, so a warm-up
    // start (vkspec_generation_start with max_tokens 0) leaves the first real one less to build.
    Sequence warm(ctx_);
    warm.begin();
    record_prefill(warm, prompt);
    warm.end();
    return;
  }
  // The output list's header: cleared, the limit and the stop tokens.
  uint32_t* out = static_cast<uint32_t*>(b.out_list.mapped());
  std::memset(out, 0, kOutTokens * 4);
  out[kOutLimit] = n_new;
  out[kOutStopCount] = uint32_t(opts_.stop_tokens.size());
  std::copy(opts_.stop_tokens.begin(), opts_.stop_tokens.end(), out + kOutStop);
  r.prefill = std::make_unique<Sequence>(ctx_);
  Sequence& seq = *r.prefill;
  seq.begin();
  // The prompt goes in with the prefill's commands (no blocking upload before it).
  for (size_t i = 0; i < prompt.size(); i += 16384) {
    const size_t n = std::min<size_t>(16384, prompt.size() - i);
    seq.update(b.seq_tokens, i * 4, prompt.data() + i, n * 4);
  }
  record_prefill(seq, prompt);
  seq.end();
  seq.submit(1, r.timeline, r.next());
}

bool Engine::submit(uint32_t steps) {
  Parts& p = *parts_;
  Parts::Run& r = *p.run;
  if (!r.begun) throw Error("Engine::submit before begin()");
  if (steps < 1 || steps > 1024) throw Error("steps per submission must be in 1..1024, got " + std::to_string(steps));
  if (r.finished || r.cancelled) return false;
  if ((r.prefill && !r.prefill->ready()) || !p.plan->ready()) return false;
  p.plan->submit(steps, r.timeline, r.next());
  return true;
}

Engine::Progress Engine::poll() {
  Parts& p = *parts_;
  Parts::Run& r = *p.run;
  Progress pr;
  if ((r.prefill && !r.prefill->ready()) || !p.plan->ready()) {
    pr.in_flight = true;
    pr.done = r.cancelled;
    return pr;
  }
  if (r.begun && !r.cancelled && !r.finished) {
    const uint32_t* out = static_cast<const uint32_t*>(p.buffers.out_list.mapped());
    const uint32_t n = std::min(out[kOutCount], r.n_new);
    if (n > r.seen) pr.tokens.assign(out + kOutTokens + r.seen, out + kOutTokens + n);
    r.seen = std::max(r.seen, n);
    r.finished = out[kOutDone] != 0;
    if (r.finished) r.fault = out[kOutFault];
  }
  // The generation ended at a row of NaN or inf logits: the tokens before it come first, then
  // this poll and every later one report it.
  if (r.fault && !r.cancelled && pr.tokens.empty())
    throw_nonfinite_logits(r.fault - 1, "after " + std::to_string(r.seen) + " generated tokens",
                           model_.kv_type() == KvType::F16);
  pr.done = !r.begun || r.cancelled || (r.finished && !r.fault);
  return pr;
}

void Engine::wait() {
  Parts& p = *parts_;
  if (p.run->prefill) p.run->prefill->wait();
  p.plan->wait();
}

void Engine::cancel() { parts_->run->cancelled = true; }
bool Engine::done() {
  Parts& p = *parts_;
  const Parts::Run& r = *p.run;
  if (!r.begun || r.cancelled || r.finished) return true;
  if ((r.prefill && !r.prefill->ready()) || !p.plan->ready()) return false;
  return static_cast<const uint32_t*>(p.buffers.out_list.mapped())[kOutDone] != 0;
}
void Engine::set_timeline(VkSemaphore timeline, uint64_t* counter) {
  wait();  // no submission in flight signals the previous one
  parts_->run->timeline = timeline;
  parts_->run->counter = timeline ? counter : nullptr;
}
VkFence Engine::fence() const {
  const Parts& p = *parts_;
  if (p.run->prefill && p.run->prefill->pending()) return p.run->prefill->fence();
  return p.plan->pending() ? p.plan->fence() : VK_NULL_HANDLE;
}

GenerateStats Engine::generate(const std::vector<uint32_t>& prompt, uint32_t n_new,
                               const std::function<void(const uint32_t*, size_t)>& on_tokens) {
  using clock = std::chrono::steady_clock;
  check_fits(prompt, n_new);
  Parts& p = *parts_;
  GenerateStats st;
  st.accept_hist.assign(draft_depth() + 1, 0);  // a = 0 .. the deepest drafted level
  if (n_new == 0) return st;  // nothing asked for: not even the prefill's token
  const auto t0 = clock::now();
  begin(prompt, n_new);
  wait();
  st.prefill_seconds = std::chrono::duration<double>(clock::now() - t0).count();
  const auto emit = [&] {
    const Progress pr = poll();
    st.tokens.insert(st.tokens.end(), pr.tokens.begin(), pr.tokens.end());
    if (on_tokens && !pr.tokens.empty()) on_tokens(pr.tokens.data(), pr.tokens.size());
  };
  emit();

  const auto t1 = clock::now();
  const uint64_t waits1 = ctx_.host_waits();
  const double cpu1 = thread_cpu_us();
  const uint32_t S = opts_.steps_per_submit;
  uint32_t submits = 0;
  StepPlan::Timing timing;
  while (!done()) {
    submit(S);
    wait();
    ++submits;
    emit();
    // The first submission of a plan pays the driver's one-time costs (lavapipe compiles a
    // pipeline at its first dispatch: one step can take seconds), so where later ones exist it
    // is left out of the per-step times.
    if (opts_.time_kernels && submits == 2) {
      timing = {};
      st.kernel_ms.clear();
      st.kernel_timeline.clear();
    }
    if (opts_.time_kernels) {
      const StepPlan::Timing tm = p.plan->timing();
      timing.draft_ms += tm.draft_ms, timing.verify_ms += tm.verify_ms, timing.commit_ms += tm.commit_ms;
      std::map<std::string, uint32_t> count;
      for (const auto& k : tm.kernels) st.kernel_ms[k.label] += k.us * 1e-3, ++count[k.label];
      st.kernel_dispatches = std::move(count);  // the same plan every step: the last one's count
      st.kernel_timeline.resize(tm.kernels.size());
      for (size_t i = 0; i < tm.kernels.size(); ++i)
        st.kernel_timeline[i].label = tm.kernels[i].label, st.kernel_timeline[i].phase = tm.phases[i],
        st.kernel_timeline[i].us += tm.kernels[i].us;
    }
  }
  if (p.run->fault) poll();  // throws NonFiniteLogits: the tokens before the row were all emitted
  const uint32_t* out = static_cast<const uint32_t*>(p.buffers.out_list.mapped());
  const double cpu_us = thread_cpu_us() - cpu1;
  st.seconds = std::chrono::duration<double>(clock::now() - t1).count();
  st.steps = out[kOutSteps];
  for (uint32_t a = 0; a < kOutHistWords; ++a)
    st.accept_hist[std::min<size_t>(a, st.accept_hist.size() - 1)] += out[kOutHist + a];
  for (uint32_t w = 0; w < 4; ++w) st.head_wins[w] = out[kOutWins + w];
  st.stopped = !st.tokens.empty() && std::find(opts_.stop_tokens.begin(), opts_.stop_tokens.end(), st.tokens.back()) !=
                                         opts_.stop_tokens.end();
  const double generated = double(st.tokens.size() - 1);
  st.tau = st.steps ? generated / st.steps : 0;
  st.tokens_per_s = st.seconds > 0 ? generated / st.seconds : 0;
  const double waits = double(ctx_.host_waits() - waits1);
  st.host_waits_per_step = st.steps ? waits / st.steps : 0;
  st.host_waits_per_token = generated > 0 ? waits / generated : 0;
  st.host_cpu_us_per_step = st.steps ? cpu_us / st.steps : 0;
  st.dispatches_per_step = p.plan->dispatches();
  st.paired_per_step = p.plan->paired();
  st.single_fetch_per_step = p.plan->single_fetch();
  st.pair_pack_bytes = p.pack ? p.pack->bytes() : 0;
  st.pair_pack_refused = p.pack_refused;
  st.nodes_per_step = p.plan->verify_nodes();
  if (submits && opts_.time_kernels) {  // the last step of each submission is the one timed
    st.timed_submissions = submits > 1 ? submits - 1 : 1;
    const double timed = st.timed_submissions;
    st.draft_ms = timing.draft_ms / timed;
    st.verify_ms = timing.verify_ms / timed;
    st.commit_ms = timing.commit_ms / timed;
    for (auto& [k, v] : st.kernel_ms) v /= timed;
    for (auto& d : st.kernel_timeline) d.us /= timed;
  }
  return st;
}

}  // namespace vkspec
