// End-to-end: every strategy emits exactly the `ar` tokens (DESIGN.md §1), on a random model with
// random heads (low acceptance) and on a model whose heads agree often (long accepted paths,
// multi-token commits); the KV cache after speculative steps equals the one `ar` builds.
#include <cstring>
#include <fstream>

#include "spec_fixtures.hpp"
#include "vk_fixture.hpp"
#include "vkspec/autotune.hpp"
#include "vkspec/engine.hpp"

using namespace vkspec;
using namespace vkspec::test;

namespace {

// The rigs of this file: a 2-layer V96 verifier, heads by mode and noise (spec_fixtures.hpp).
struct Rig : SpecRig {
  Rig(Context& ctx, const std::string& name, float mix, int mode1, int mode2, float noise1, float noise2,
      KvType kv_type = KvType::F16, uint32_t kv_streams_per_buffer = 0)
      : SpecRig(ctx, name,
                {.mix = mix, .mode1 = mode1, .mode2 = mode2, .noise1 = noise1, .noise2 = noise2, .kv_type = kv_type,
                 .kv_streams_per_buffer = kv_streams_per_buffer}) {}
};

}  // namespace

TEST_CASE_FIXTURE(VkTest, "lossless: every strategy equals ar on a random model with random heads") {
  Rig rig(ctx, "spec_random", 1.0f, 0, 0, 0, 0);
  // Small trees: with random heads nearly every step commits one token, so this case is
  // dominated by step count; the tree shape does not change what losslessness means.
  check_lossless(ctx, *rig.model, rig.head1.get(), rig.head2.get(), "random", 1.0, 3, 2, 4);
}

TEST_CASE_FIXTURE(VkTest, "lossless: every strategy equals ar when heads agree often (long accepted paths)") {
  // Oracle-like heads with different noise: long paths get accepted, multi-token commits happen,
  // and the two heads disagree sometimes so route and merge have a choice to make.
  Rig rig(ctx, "spec_oracle", 0.05f, 2, 2, 0.25f, 0.5f);
  check_lossless(ctx, *rig.model, rig.head1.get(), rig.head2.get(), "oracle", 2.0, 4, 3, 6);
}

TEST_CASE("drafted_depth: no level deeper than the verified tree can hold is drafted") {
  CHECK(drafted_depth(Strategy::AR, 5, 8) == 0);
  for (Strategy s : {Strategy::Single1, Strategy::Single2, Strategy::Route, Strategy::Merge}) {
    CHECK(drafted_depth(s, 5, 4) == 4);  // B candidates hold a chain of at most B
    CHECK(drafted_depth(s, 5, 8) == 5);
    CHECK(drafted_depth(s, 3, 3) == 3);
    CHECK(drafted_depth(s, 9, 1) == 1);
  }
  CHECK(drafted_depth(Strategy::MergeTrie, 9, 4) == 8);  // 2B kept nodes
  CHECK(drafted_depth(Strategy::MergeTrie, 5, 2) == 4);
  CHECK(drafted_depth(Strategy::MergeTrie, 5, 4) == 5);
  CHECK(drafted_depth(Strategy::Single1, 63, 0xffffffffu) == 63);  // no wrap
  CHECK(drafted_depth(Strategy::MergeTrie, 63, 0x80000000u) == 63);
}

TEST_CASE_FIXTURE(VkTest, "drafted depth: --depth past what the budget can verify runs as the depth that can, token for token") {
  // Oracle-like heads accept long paths, so full-length chains are verified: depth 8 at budget 3
  // must give exactly depth 3's steps (6 for merge-trie), with fewer dispatches than a depth that is
  // drafted in full would need.
  Rig rig(ctx, "spec_oracle", 0.05f, 2, 2, 0.25f, 0.5f);
  const std::vector<std::vector<uint32_t>> ps = random_prompts(4, uint32_t(rig.model->config().V));
  EngineOptions ao;
  Engine ar(ctx, *rig.model, nullptr, nullptr, ao);
  for (Strategy s : {Strategy::Single1, Strategy::Route, Strategy::Merge, Strategy::MergeTrie}) {
    CAPTURE(strategy_name(s));
    EngineOptions deep, fit;
    deep.strategy = fit.strategy = s;
    deep.topk = fit.topk = 2, deep.budget = fit.budget = 3;
    deep.depth = 8;
    fit.depth = s == Strategy::MergeTrie ? 6 : 3;
    Engine a(ctx, *rig.model, rig.head1.get(), rig.head2.get(), deep), b(ctx, *rig.model, rig.head1.get(), rig.head2.get(), fit);
    CHECK(a.dispatches_per_step() == b.dispatches_per_step());
    uint32_t full = 0;  // steps that accepted a chain as deep as the budget allows
    for (const auto& p : ps) {
      const GenerateStats x = a.generate(p, 48), y = b.generate(p, 48);
      CHECK(x.tokens == ar.generate(p, 48).tokens);
      CHECK(x.tokens == y.tokens);
      CHECK(x.accept_hist == y.accept_hist);
      REQUIRE(x.accept_hist.size() == fit.depth + 1);
      // Each step gives its accepted path and one token more; the prefill gives one. -n 48 cuts
      // the last step's path where it lands inside it: the histogram counts what was emitted.
      uint64_t given = 1;
      for (size_t i = 0; i < x.accept_hist.size(); ++i) given += (i + 1) * uint64_t(x.accept_hist[i]);
      CHECK(given == x.tokens.size());
      full += x.accept_hist[std::min<uint32_t>(fit.depth, s == Strategy::MergeTrie ? 6 : 3)];
    }
    if (s != Strategy::MergeTrie) CHECK(full > 0);  // the deepest drafted level was used
  }
  EngineOptions deeper;  // a depth that is drafted in full costs more dispatches
  deeper.strategy = Strategy::Single1, deeper.topk = 2, deeper.budget = 8, deeper.depth = 8;
  EngineOptions capped = deeper;
  capped.budget = 3;
  Engine c(ctx, *rig.model, rig.head1.get(), nullptr, deeper), d(ctx, *rig.model, rig.head1.get(), nullptr, capped);
  CHECK(d.dispatches_per_step() < c.dispatches_per_step());
}

TEST_CASE_FIXTURE(VkTest, "draft_select runs only where the combiner verifies a selection that is not the pool") {
  // Top-k 1 over B levels drafts just B candidates: the best B of them are the pool itself, so
  // the drafter records no draft_select (nor does merge-trie, which folds the pools). Same tokens.
  Rig rig(ctx, "spec_oracle", 0.05f, 2, 2, 0.25f, 0.5f);
  const std::vector<std::vector<uint32_t>> ps = random_prompts(2, uint32_t(rig.model->config().V));
  Engine ar(ctx, *rig.model, nullptr, nullptr, EngineOptions{});
  std::vector<std::vector<uint32_t>> want;  // ar's tokens, once per prompt for every case
  for (const auto& p : ps) want.push_back(ar.generate(p, 24).tokens);
  struct Case {
    Strategy s;
    uint32_t topk;
    bool selects;
  };
  for (const Case c : {Case{Strategy::Single1, 1, false}, Case{Strategy::Single1, 2, true}, Case{Strategy::Merge, 1, false},
                       Case{Strategy::Route, 2, true}, Case{Strategy::MergeTrie, 2, false}}) {
    CAPTURE(strategy_name(c.s));
    CAPTURE(c.topk);
    EngineOptions o;
    o.strategy = c.s, o.topk = c.topk, o.budget = 3, o.depth = 3, o.time_kernels = true;
    Engine e(ctx, *rig.model, rig.head1.get(), rig.head2.get(), o);
    for (size_t i = 0; i < ps.size(); ++i) {
      const GenerateStats st = e.generate(ps[i], 24);
      CHECK(st.tokens == want[i]);
      CHECK(st.kernel_dispatches.count("draft_select") == (c.selects ? 1u : 0u));
    }
  }
}

TEST_CASE_FIXTURE(VkTest, "lossless: every strategy equals ar under a sliding window far shorter than the text") {
  // A window of 6 positions: tree rows drop committed keys and, deeper than 6, their own oldest
  // ancestors; accepted paths are committed and later rows see them slide out.
  RigOptions o{.mix = 0.05f, .noise1 = 0.25f, .noise2 = 0.5f, .window = 6};
  SpecRig rig(ctx, "spec_window", o);
  REQUIRE(rig.model->config().sliding_window == 6);
  // Three prompts of 96 tokens, 16 windows each (six took 112 s of a cold suite, 2026-12-04).
  check_lossless(ctx, *rig.model, rig.head1.get(), rig.head2.get(), "window", 1.0, 8, 2, 12, 3, 96);
}

TEST_CASE_FIXTURE(VkTest, "lossless: every strategy equals ar with a head whose projections carry biases beside one without") {
  // Head 1 has attention_bias and mlp_bias (its o matmul and its SwiGLU then run unfolded), head 2
  // none: the paired draft levels zip two lists that differ in their dispatches.
  RigOptions o{.mix = 0.05f, .noise1 = 0.25f, .noise2 = 0.5f, .head1_biases = true};
  SpecRig rig(ctx, "spec_biases", o);
  REQUIRE(rig.head1->weights()->config().attention_bias);
  REQUIRE(rig.head1->weights()->config().mlp_bias);
  check_lossless(ctx, *rig.model, rig.head1.get(), rig.head2.get(), "biases", 1.5, 4, 3, 6, 6, 64);
}

TEST_CASE_FIXTURE(VkTest, "KV commit: the verifier cache after speculative steps equals the one ar builds") {
  // Both cache types and three layouts of the 2L = 4 streams: all in one buffer (one commit
  // dispatch for the model), 3 + 1 streams in two buffers, one buffer per stream.
  struct Layout {
    KvType type;
    uint32_t per_buffer;
    size_t buffers;
  };
  std::vector<uint32_t> ar_f16;
  for (const Layout lay : {Layout{KvType::F16, 0, 1}, Layout{KvType::F32, 1, 4}, Layout{KvType::F16, 1, 4},
                           Layout{KvType::F16, 3, 2}}) {
    CAPTURE(kv_type_name(lay.type));
    CAPTURE(lay.per_buffer);
    Rig rig(ctx, "spec_kv", 0.3f, 2, 2, 0.02f, 0.05f, lay.type, lay.per_buffer);
    REQUIRE(rig.cfg.L == 2);
    CHECK(rig.model->kv_buffers().size() == lay.buffers);
    CHECK(rig.model->kv_bytes() >= 2ull * rig.cfg.L * rig.model->capacity() * rig.model->kv_row_floats() *
                                       kv_value_bytes(lay.type));
    const std::vector<uint32_t> prompt = {5, 17, 3, 44};
    EngineOptions ao;
    Engine ar(ctx, *rig.model, nullptr, nullptr, ao);
    const std::vector<uint32_t> toks = ar.generate(prompt, 40).tokens;
    // The layout changes where rows live, never what is computed: ar's tokens are the same.
    if (lay.type == KvType::F16 && lay.per_buffer == 0) ar_f16 = toks;
    if (lay.type == KvType::F16 && lay.per_buffer != 0) CHECK(toks == ar_f16);
    const uint32_t rows = 4 + 38;  // positions certainly committed by both runs
    std::vector<std::vector<float>> ref;
    for (int l = 0; l < rig.cfg.L; ++l) {
      ref.push_back(rig.model->read_cache(l, false, rows));
      ref.push_back(rig.model->read_cache(l, true, rows));
    }
    EngineOptions o;
    o.strategy = Strategy::Merge;
    o.depth = 4, o.topk = 3, o.budget = 6;
    Engine e(ctx, *rig.model, rig.head1.get(), rig.head2.get(), o);
    GenerateStats st = e.generate(prompt, 40);
    CHECK(st.tau > 1.5);  // multi-token commits happened
    CHECK(st.tokens == toks);
    for (int l = 0; l < rig.cfg.L; ++l) {
      auto k = rig.model->read_cache(l, false, rows);
      auto v = rig.model->read_cache(l, true, rows);
      CHECK_MESSAGE(std::memcmp(k.data(), ref[2 * l].data(), k.size() * 4) == 0, "K cache of layer " << l << " differs");
      CHECK_MESSAGE(std::memcmp(v.data(), ref[2 * l + 1].data(), v.size() * 4) == 0, "V cache of layer " << l << " differs");
    }
  }
}

TEST_CASE_FIXTURE(VkTest, "lossless: every strategy equals ar on the bundled trained model and heads") {
  // Real trained heads (models/README.md): tau ~3-5, so most steps commit several tokens and
  // route/merge pick between heads that really differ. Prompts are the held-out benchmark lines:
  // four of them here (eight took 222 s of a cold suite, 2-vCPU VM, 2026-12-04); soak runs every
  // strategy on this rig against ar over all of them for 1,000 tokens each.
  DemoRig demo(ctx);
  const std::vector<std::vector<uint32_t>> ps(demo.prompts.begin(), demo.prompts.begin() + std::min<size_t>(4, demo.prompts.size()));
  REQUIRE(ps.size() == 4);
  // tau > 2.5 for every strategy: the trained heads really are exercised.
  check_lossless_on(ctx, demo.model, &demo.head1, &demo.head2, ps, "demo", 2.5, 2.5, 5, 4, 12);
}

TEST_CASE_FIXTURE(VkTest, "shared weights: two generation states on one copy of the demo's weights, interleaved, each equals ar") {
  // What the C API's contexts do (DESIGN.md §7a): each state owns its KV caches and scratch, the
  // weights are on the device once.
  DemoRig demo(ctx);
  const ModelOptions mo = DemoRig::rows(64);
  const uint64_t before = ctx.allocated_bytes();
  LlamaModel model2(demo.model.weights(), mo);
  EagleHead h1(demo.head1.weights(), model2, model2.capacity(), 64), h2(demo.head2.weights(), model2, model2.capacity(), 64);
  const uint64_t grown = ctx.allocated_bytes() - before;
  const StateBytes v = llama_state_bytes(model2.config(), mo);
  const StateBytes hb = head_state_bytes(h1.config(), model2.capacity(), 64, model2.kv_type());
  MESSAGE("second state: " << grown << " bytes; weights " << model2.weight_bytes() + h1.weight_bytes() + h2.weight_bytes());
  CHECK(grown == v.kv + v.scratch + 2 * (hb.kv + hb.scratch));
  CHECK(grown == model2.kv_bytes() + model2.scratch_bytes() + h1.kv_bytes() + h1.scratch_bytes() + h2.kv_bytes() +
                     h2.scratch_bytes());
  CHECK(model2.weights() == demo.model.weights());
  CHECK(h1.weights() == demo.head1.weights());

  const std::vector<uint32_t>& p1 = demo.prompts.at(0), &p2 = demo.prompts.at(1);
  Engine ar(ctx, demo.model, nullptr, nullptr, EngineOptions{});
  const std::vector<uint32_t> want1 = ar.generate(p1, 60).tokens, want2 = ar.generate(p2, 60).tokens;
  REQUIRE(want1 != want2);
  EngineOptions o1, o2;
  o1.strategy = Strategy::MergeTrie, o2.strategy = Strategy::Route;
  o1.depth = o2.depth = 4, o1.topk = o2.topk = 4, o1.budget = o2.budget = 8;
  Engine a(ctx, demo.model, &demo.head1, &demo.head2, o1), b(ctx, model2, &h1, &h2, o2);
  a.begin(p1, 60);
  b.begin(p2, 60);
  std::vector<uint32_t> got1, got2;
  for (bool done1 = false, done2 = false; !done1 || !done2;) {
    // Both submissions in flight on the queue at once, then each state's results.
    if (!done1) a.submit(1);
    if (!done2) b.submit(2);
    a.wait(), b.wait();
    Engine::Progress pa = a.poll(), pb = b.poll();
    got1.insert(got1.end(), pa.tokens.begin(), pa.tokens.end());
    got2.insert(got2.end(), pb.tokens.begin(), pb.tokens.end());
    done1 = pa.done, done2 = pb.done;
  }
  CHECK(got1 == want1);
  CHECK(got2 == want2);

  // The weights outlive the model that loaded them while another state holds them.
  auto first = std::make_unique<LlamaModel>(ctx, demo.file, mo);
  LlamaModel later(first->weights(), mo);
  const uint64_t held = ctx.allocated_bytes();
  first.reset();
  CHECK(ctx.allocated_bytes() == held - v.kv - v.scratch);  // only the first state's buffers went
  Engine e(ctx, later, nullptr, nullptr, EngineOptions{});
  CHECK(e.generate(p1, 60).tokens == want1);
}

TEST_CASE("pick_trial: a speculative candidate is chosen only when it beat ar by the margin") {
  auto trial = [](Strategy s, uint32_t b, double tps, const char* skipped = "") {
    AutoTrial t;
    t.strategy = s, t.budget = b, t.tokens_per_s = tps, t.skipped = skipped;
    return t;
  };
  const std::vector<AutoTrial> close = {trial(Strategy::AR, 0, 400), trial(Strategy::Single1, 4, 440),
                                        trial(Strategy::Merge, 8, 300)};
  CHECK(pick_trial(close) == 0);         // 1.10x: within the noise, ar
  CHECK(pick_trial(close, 1.05) == 1);   // a smaller margin takes it
  const std::vector<AutoTrial> clear = {trial(Strategy::AR, 0, 400), trial(Strategy::Single1, 4, 470),
                                        trial(Strategy::Merge, 8, 620), trial(Strategy::Route, 8, 900, "refused")};
  CHECK(pick_trial(clear) == 2);         // the fastest that ran; a skipped trial never wins
  CHECK(pick_trial({trial(Strategy::AR, 0, 400)}) == 0);
  // A trial too short to time (-n 0): every rate 0, and ar stays.
  CHECK(pick_trial({trial(Strategy::AR, 0, 0), trial(Strategy::Single1, 8, 0)}) == 0);
  CHECK(pick_trial({trial(Strategy::AR, 0, 100), trial(Strategy::Merge, 8, 0, "refused")}) == 0);
  CHECK_THROWS_WITH_AS(pick_trial({trial(Strategy::Merge, 8, 500)}), doctest::Contains("ar must be the first"), Error);
}


TEST_CASE("a start with no tokens asked builds the prefill's pipelines (the C API's warm-up) and submits nothing") {
  // Its own context, so that no other test has built these pipelines already.
  ContextOptions co;
  co.pipeline_cache_dir = "-";
  Context own(co);
  Rig rig(own, "warm_start", 0.05f, 2, 2, 0.25f, 0.5f);
  EngineOptions o;
  o.strategy = Strategy::Merge, o.topk = 2, o.budget = 3;
  Engine e(own, *rig.model, rig.head1.get(), rig.head2.get(), o);
  const std::vector<uint32_t> prompt = random_prompts(1, uint32_t(rig.model->config().V))[0];
  const size_t before = own.pipelines().size();
  e.begin(prompt, 0);
  CHECK(e.done());
  CHECK(e.poll().tokens.empty());
  const size_t warm = own.pipelines().size();
  CHECK(warm > before);  // the prefill's passes: built, not run
  EngineOptions ao;
  Engine ar(own, *rig.model, nullptr, nullptr, ao);
  const std::vector<uint32_t> want = ar.generate(prompt, 12).tokens;
  const size_t with_ar = own.pipelines().size();
  CHECK(e.generate(prompt, 12).tokens == want);
  CHECK(own.pipelines().size() == with_ar);  // the real start found the prefill's pipelines built
  CHECK(own.take_validation_messages().empty());
}
