// Hostile input to the speculative engine (issue "Hostile input"): tree options past what the
// kernels hold are refused by name; the extreme options that are accepted run clean and stay
// lossless; NaN / Inf weights in a head never crash and never change the tokens `ar` emits; NaN /
// Inf in the verifier's logits end the generation, naming the position, in every strategy alike.
#include <algorithm>
#include <cstring>
#include <functional>
#include <string>

#include "spec_fixtures.hpp"
#include "vk_fixture.hpp"
#include "vkspec/engine.hpp"
#include "vkspec/gguf.hpp"
#include "vkspec/gguf_writer.hpp"
#include "vkspec/vkspec.h"

using namespace vkspec;
using namespace vkspec::test;

namespace {

const Strategy kSpec[] = {Strategy::Single1, Strategy::Single2, Strategy::Route, Strategy::Merge,
                          Strategy::MergeTrie};

EngineOptions tree_opts(Strategy s, uint32_t depth, uint32_t topk, uint32_t budget) {
  EngineOptions o;
  o.strategy = s;
  o.depth = depth, o.topk = topk, o.budget = budget;
  return o;
}

// The Engine's error for these options ("" if it accepts them).
std::string refusal(Context& ctx, SpecRig& rig, const EngineOptions& o) {
  try {
    Engine e(ctx, *rig.model, rig.head1.get(), rig.head2.get(), o);
  } catch (const Error& err) {
    return err.what();
  }
  return "";
}

std::vector<std::vector<uint32_t>> some_prompts(int n, uint32_t V, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<uint32_t>> out;
  for (int i = 0; i < n; ++i) {
    std::vector<uint32_t> p(1 + rng() % 8);
    for (auto& x : p) x = rng() % V;
    out.push_back(p);
  }
  return out;
}

// Every listed strategy with these options emits exactly ar's tokens on every prompt.
void check_equals_ar(Context& ctx, SpecRig& rig, const std::vector<std::vector<uint32_t>>& ps,
                     const std::vector<std::vector<uint32_t>>& want, EngineOptions o,
                     std::initializer_list<Strategy> strategies, uint32_t n_new, const std::string& what) {
  for (Strategy s : strategies) {
    o.strategy = s;
    Engine e(ctx, *rig.model, rig.head1.get(), rig.head2.get(), o);
    for (size_t i = 0; i < ps.size(); ++i) {
      GenerateStats st = e.generate(ps[i], n_new);
      size_t same = 0;
      while (same < want[i].size() && same < st.tokens.size() && st.tokens[same] == want[i][same]) ++same;
      CHECK_MESSAGE(st.tokens == want[i], what << " " << strategy_name(s) << " prompt " << i
                                               << ": first divergence from ar at token " << same);
    }
  }
}

std::vector<std::vector<uint32_t>> ar_tokens(Context& ctx, SpecRig& rig, const std::vector<std::vector<uint32_t>>& ps,
                                             uint32_t n_new) {
  Engine ar(ctx, *rig.model, nullptr, nullptr, EngineOptions{});
  std::vector<std::vector<uint32_t>> want;
  for (auto& p : ps) want.push_back(ar.generate(p, n_new).tokens);
  return want;
}

}  // namespace

TEST_CASE("engine: the accepted tree options are derived from the kernels' limits") {
  // Pool 1 + K + (D-1)K^2 <= kTreeMaxNodes; depth + 1 <= kTreeMaxPath; verified tree <= kTreeMaxNodes.
  CHECK(draft_pool_nodes(4, 4) == 1 + 4 + 3 * 16);
  CHECK(draft_pool_nodes(kTopkMax, 4294967295u) > kTreeMaxNodes);  // no wrap
  CHECK(max_draft_depth(1) == kTreeMaxPath - 1);
  CHECK(max_draft_depth(kTopkMax) == 1);
  CHECK(max_draft_topk(1, 96) == kTopkMax);
  CHECK(max_draft_topk(1, 20) == 20);  // never past the vocabulary
  CHECK(max_draft_topk(4, 96) == 12);  // 1 + 12 + 3*144 = 445; 13 gives 521
  CHECK(max_draft_budget(Strategy::Merge, 8, 5) == (kTreeMaxNodes - 1) / 2);
  CHECK(max_draft_budget(Strategy::Single1, 4, 4) == draft_pool_nodes(4, 4) - 1);
  // A budget as a ceiling: a top-k 1 chain of depth 4 holds 4; a budget that fits stays; with no
  // tree that fits (top-k 0) the budget is kept for the engine to refuse by name.
  CHECK(budget_within(Strategy::Single1, 1, 4, 8) == 4);
  CHECK(budget_within(Strategy::MergeTrie, 1, 4, 3) == 3);
  // A default budget (8) lowered to what the tree draws, never to 0.
  CHECK(default_draft_budget(1, 4, 8) == 4);
  CHECK(default_draft_budget(4, 4, 8) == 8);
  CHECK(default_draft_budget(1, 0, 8) == 1);  // depth 0 draws no candidate: 1, refused later by name
  CHECK(default_draft_budget(4, 4, 0) == 1);
  // The default context's slack bound covers merge's verified tree (1 + 2B) and every draft level.
  CHECK(max_step_slack(8, 4, 4) == 1 + 2 * 8 + 4 * 4 + 2);
  CHECK(max_step_slack(4294967295u, 4294967295u, 32) > 4294967295u);  // no wrap
  CHECK(budget_within(Strategy::Merge, 4, 4, 8) == 8);
  CHECK(budget_within(Strategy::Route, 0, 4, 8) == 8);
  for (uint32_t K = 1; K <= kTopkMax; ++K)
    for (uint32_t D = 1; D < kTreeMaxPath; ++D) {
      const bool fits = draft_pool_nodes(K, D) <= kTreeMaxNodes;
      CHECK(fits == (D <= max_draft_depth(K)));
      CHECK(fits == (K <= max_draft_topk(D, 1000)));
    }
}

TEST_CASE_FIXTURE(VkTest, "engine: tree options past the kernels' limits are refused by name, with the range") {
  SpecRig rig(ctx, "hostile_opts", {});
  struct Case {
    Strategy s;
    uint32_t depth, topk, budget;
    const char* says;
  };
  const Case cases[] = {
      // the reproductions: pools of 3105, 785 and 521 nodes for 512-node kernels
      {Strategy::Merge, 4, 32, 8, "candidate pool of 3105 nodes"},
      {Strategy::MergeTrie, 4, 16, 8, "candidate pool of 785 nodes"},
      {Strategy::Merge, 4, 13, 8, "with --depth 4 use --topk <= 12"},
      {Strategy::Single1, 2, 23, 8, "with --topk 23 use --depth <= 1"},
      {Strategy::Merge, 4, 33, 8, "--topk must be in 1..32"},
      {Strategy::Merge, 4, 0, 8, "--topk must be in 1..32"},
      {Strategy::Merge, 33, 1, 8, ""},  // accepted: depth 33..63 is fine with top-k 1
      {Strategy::Merge, 64, 1, 8, "--depth must be in 1..63"},
      {Strategy::Merge, 4294967295u, 4, 8, "--depth must be in 1..63"},  // D + 1 wraps to 0
      {Strategy::Merge, 0, 4, 8, "--depth must be in 1..63"},
      {Strategy::Merge, 4, 4, 53, "--budget 53 must be in 1..52"},
      {Strategy::Merge, 5, 8, 256, "use --budget <= 255"},     // 513 verified nodes
      {Strategy::Route, 5, 8, 64, "exceeds the verifier's 64 rows"},  // fits the kernels, not this model
  };
  for (const Case& c : cases) {
    const std::string err = refusal(ctx, rig, tree_opts(c.s, c.depth, c.topk, c.budget));
    INFO(strategy_name(c.s) << " depth " << c.depth << " topk " << c.topk << " budget " << c.budget << ": " << err);
    if (*c.says == 0) CHECK(err.empty());
    else CHECK(err.find(c.says) != std::string::npos);
  }
  // ar drafts nothing: its tree options are not used, whatever they are.
  CHECK(refusal(ctx, rig, tree_opts(Strategy::AR, 4294967295u, 4294967295u, 4294967295u)).empty());
  {
    Engine ar(ctx, *rig.model, nullptr, nullptr, tree_opts(Strategy::AR, 4000000000u, 99, 0));
    CHECK(ar.generate({1, 2, 3}, 4).tokens.size() == 4);
  }
  // Top-k above the vocabulary (the kernel would return no candidate): a clear error.
  RigOptions small;
  small.V = 20;
  SpecRig tiny(ctx, "hostile_opts_v20", small);
  const std::string err = refusal(ctx, tiny, tree_opts(Strategy::Merge, 1, 24, 8));
  INFO(err);
  CHECK(err.find("--topk 24 exceeds the vocabulary of 20 tokens") != std::string::npos);
  CHECK(refusal(ctx, tiny, tree_opts(Strategy::Merge, 1, 20, 20)).empty());
}

TEST_CASE_FIXTURE(VkTest, "engine: the extreme accepted tree options run clean and emit ar's tokens") {
  // Oracle-like heads (long accepted paths, so deep commits happen) on a model that takes the
  // largest verified tree the kernels hold (2 * 255 + 1 = 511 rows).
  RigOptions ro;
  ro.mix = 0.05f, ro.noise1 = 0.25f, ro.noise2 = 0.5f;
  ro.context = 1024, ro.rows = 512;
  SpecRig rig(ctx, "hostile_extreme", ro);
  const auto ps = some_prompts(1, uint32_t(rig.cfg.V), 5);  // one prompt: each step is a big tree
  const uint32_t n_new = 32;
  const auto want = ar_tokens(ctx, rig, ps, n_new);
  const uint32_t Dmax = max_draft_depth(1), Kmax = max_draft_topk(1, uint32_t(rig.cfg.V));
  REQUIRE(Dmax == 63);
  REQUIRE(Kmax == 32);
  // depth = max with top-k 1 (params past the old 4096-word host layout, 64-row commits)
  check_equals_ar(ctx, rig, ps, want, tree_opts(Strategy::Merge, Dmax, 1, Dmax), {Strategy::Merge, Strategy::MergeTrie},
                  n_new, "depth max");
  // top-k = max (the top-k stride, depth 1)
  check_equals_ar(ctx, rig, ps, want, tree_opts(Strategy::Merge, 1, Kmax, Kmax), {Strategy::Merge, Strategy::MergeTrie},
                  n_new, "topk max");
  // the largest budget: 511 verified nodes, pools of 265 (merge-trie ranks 529 candidates)
  const uint32_t Bmax = max_draft_budget(Strategy::Merge, 8, 5);
  REQUIRE(Bmax == 255);
  check_equals_ar(ctx, rig, ps, want, tree_opts(Strategy::Merge, 5, 8, Bmax), {Strategy::Merge, Strategy::MergeTrie},
                  n_new, "budget max");
  // the largest pool: 1 + 12 + 3*144 = 445 candidates per head
  check_equals_ar(ctx, rig, ps, want, tree_opts(Strategy::Merge, 4, 12, 64), {Strategy::Merge, Strategy::MergeTrie},
                  n_new, "pool max");
}

TEST_CASE_FIXTURE(VkTest, "engine: NaN weights in a head never crash and every strategy still emits ar's tokens") {
  // Head 1 is broken (all its logits NaN): its drafts rank by index, its scores are NaN, route
  // never picks it, and the verifier decides every token as ever.
  RigOptions ro;
  ro.mix = 0.05f, ro.noise2 = 0.25f, ro.nan_head1 = true;
  SpecRig rig(ctx, "hostile_nan_head", ro);
  const auto ps = some_prompts(3, uint32_t(rig.cfg.V), 7);
  const uint32_t n_new = 40;
  const auto want = ar_tokens(ctx, rig, ps, n_new);
  check_equals_ar(ctx, rig, ps, want, tree_opts(Strategy::Merge, 4, 3, 6),
                  {Strategy::Single1, Strategy::Single2, Strategy::Route, Strategy::Merge, Strategy::MergeTrie}, n_new,
                  "NaN head 1");
  EngineOptions o = tree_opts(Strategy::Route, 4, 3, 6);
  Engine e(ctx, *rig.model, rig.head1.get(), rig.head2.get(), o);
  GenerateStats st = e.generate(ps[0], n_new);
  CHECK(st.head_wins[1] == 0);  // μ_1 is NaN: head 2 wins every step
  CHECK(st.tau > 1.5);          // and its drafts are accepted
}

// Generates until the engine refuses; the tokens that came before, and the refusal's text.
std::pair<std::vector<uint32_t>, std::string> tokens_until_error(Engine& e, const std::vector<uint32_t>& prompt,
                                                                 uint32_t n_new) {
  std::vector<uint32_t> got;
  try {
    e.generate(prompt, n_new, [&](const uint32_t* t, size_t n) { got.insert(got.end(), t, t + n); });
  } catch (const NonFiniteLogits& err) {
    return {got, err.what()};
  }
  return {got, ""};
}

TEST_CASE_FIXTURE(VkTest, "engine: NaN and ±Inf verifier logits end every strategy's generation before its first token, naming the position") {
  // output.weight rows of NaN and ±inf (check_finite off, so the kernels see them): every row of
  // logits holds NaN, so no token may be emitted, greedy or sampled, by any strategy.
  RigOptions ro;
  ro.mix = 0.05f, ro.noise1 = 0.25f, ro.noise2 = 0.5f, ro.poison_output = true;
  SpecRig rig(ctx, "hostile_nan_logits", ro);
  const auto ps = some_prompts(2, uint32_t(rig.cfg.V), 9);
  for (float temp : {0.0f, 0.8f})
    for (Strategy s : {Strategy::AR, Strategy::Single1, Strategy::Route, Strategy::Merge, Strategy::MergeTrie}) {
      EngineOptions o = tree_opts(s, 4, 3, 6);
      o.sampling.temperature = temp;
      const bool ar = s == Strategy::AR;
      Engine e(ctx, *rig.model, ar ? nullptr : rig.head1.get(), ar ? nullptr : rig.head2.get(), o);
      for (const auto& p : ps) {
        const auto [got, err] = tokens_until_error(e, p, 20);
        INFO(std::string(strategy_name(s)) << " temp " << temp);
        CHECK(got.empty());
        CHECK(err.find("the logits computed at position " + std::to_string(p.size() - 1) + " are not finite") !=
              std::string::npos);
      }
    }
}

TEST_CASE_FIXTURE(VkTest, "engine: a token whose embedding is NaN ends the generation where it is first an input, every strategy as ar") {
  // A clean file (tied output) gives ar's tokens; the same weights with token X's embedding row NaN
  // (output untied, clean) compute the same logits until X is an input. So every strategy must
  // emit the clean tokens up to and including the first X, then refuse naming X's position: X is
  // mid-generation, so the tree strategies meet the bad row inside a verified tree, where the
  // acceptance must stop at it.
  RigOptions ro;
  ro.mix = 3.0f, ro.noise1 = 0.25f, ro.noise2 = 0.5f;
  const auto ps = some_prompts(3, uint32_t(ro.V), 13);
  const uint32_t n_new = 40;
  std::vector<std::vector<uint32_t>> clean;
  {
    SpecRig rig(ctx, "hostile_clean_embedding", ro);
    clean = ar_tokens(ctx, rig, ps, n_new);
  }
  // X: a token first emitted at index >= 3 of a prompt's clean output (prompt `pi`, index `at`), in no prompt.
  int x = -1;
  size_t pi = 0, at = 0;
  for (size_t i = 0; i < ps.size() && x < 0; ++i)
    for (size_t k = 3; k < clean[i].size() && x < 0; ++k) {
      const uint32_t c = clean[i][k];
      bool seen = std::find(clean[i].begin(), clean[i].begin() + k, c) != clean[i].begin() + k;
      for (const auto& p : ps) seen = seen || std::find(p.begin(), p.end(), c) != p.end();
      if (!seen) x = int(c), pi = i, at = k;
    }
  REQUIRE_MESSAGE(x >= 0, "no clean output has a fresh token past index 3");
  ro.nan_embedding = x;
  SpecRig rig(ctx, "hostile_nan_embedding", ro);
  size_t faulted = 0;
  const Strategy all[] = {Strategy::AR, Strategy::Single1, Strategy::Single2, Strategy::Route, Strategy::Merge,
                          Strategy::MergeTrie};
  for (Strategy s : all) {
    const bool ar = s == Strategy::AR;
    Engine e(ctx, *rig.model, ar ? nullptr : rig.head1.get(), ar ? nullptr : rig.head2.get(), tree_opts(s, 4, 3, 6));
    for (size_t i = 0; i < ps.size(); ++i) {
      const auto [got, err] = tokens_until_error(e, ps[i], n_new);
      // The clean tokens up to the first X (included); the refusal names X's position.
      const auto first = std::find(clean[i].begin(), clean[i].end(), uint32_t(x));
      INFO(std::string(strategy_name(s)) << " prompt " << i << " X " << x);
      if (first == clean[i].end()) {
        CHECK(got == clean[i]);
        CHECK(err.empty());
        continue;
      }
      const size_t k = size_t(first - clean[i].begin());
      CHECK(got == std::vector<uint32_t>(clean[i].begin(), first + 1));
      CHECK(err.find("position " + std::to_string(ps[i].size() + k) + " are not finite") != std::string::npos);
      faulted += i == pi && k == at && got.size() == k + 1;
    }
  }
  CHECK(faulted == std::size(all));  // prompt pi met X where its clean output has it, in every strategy
}

// A C API runtime on vkspec's own device with validation on, no pipeline cache file.
static vkspec_runtime* validated_runtime() {
  vkspec_runtime_desc rd;
  vkspec_runtime_desc_init(&rd);
  rd.validation = 1;
  rd.pipeline_cache_dir = "-";
  vkspec_runtime* rt = nullptr;
  REQUIRE(vkspec_runtime_create(&rd, &rt) == VKSPEC_OK);
  return rt;
}

// The C API's side of it: the demo verifier with output_norm all 3e38 (finite, loads) computes
// logits that are not finite at the prompt's last row, so nothing is emitted: vkspec_generate
// and, in a frame loop, vkspec_poll return VKSPEC_ERROR_MODEL, and the error names the position.
TEST_CASE("C API: logits that are not finite end the generation with VKSPEC_ERROR_MODEL naming the position") {
  const std::string demo = std::string(VKSPEC_SOURCE_DIR) + "/models/verifier.gguf";
  std::vector<uint8_t> bytes;
  uint64_t at = 0, n = 0;
  {
    const GgufFile f = GgufFile::open(demo);
    const GgufTensor& t = f.require_tensor("output_norm.weight");
    REQUIRE(t.type == GgmlType::F32);
    at = f.data_offset() + t.offset, n = t.n_elements;
    bytes.assign(f.data(t).data() - at, f.data(t).data() - at + f.file_size());
  }
  for (uint64_t i = 0; i < n; ++i) {
    const float big = 3e38f;
    std::memcpy(bytes.data() + at + 4 * i, &big, 4);
  }
  test::TempFile file("capi_overflow.gguf");
  file.write(bytes);
  vkspec_runtime* rt = validated_runtime();
  vkspec_model_desc md;
  vkspec_model_desc_init(&md);
  md.path = file.path.c_str();
  vkspec_model* m = nullptr;
  REQUIRE_MESSAGE(vkspec_model_load(rt, &md, &m) == VKSPEC_OK, vkspec_last_error(rt));
  vkspec_context* c = nullptr;
  REQUIRE(vkspec_context_create(m, nullptr, &c) == VKSPEC_OK);
  vkspec_generation_params gp;
  vkspec_generation_params_init(&gp);
  const uint32_t prompt[] = {1, 72, 101, 108};
  gp.prompt_ids = prompt, gp.prompt_count = 4, gp.max_tokens = 8;
  uint32_t calls = 0;
  CHECK(vkspec_generate(c, &gp, [](const uint32_t*, uint32_t, void* u) { ++*static_cast<uint32_t*>(u); }, nullptr,
                        &calls) == VKSPEC_ERROR_MODEL);
  CHECK(calls == 0);
  CHECK(std::string(vkspec_last_error(c)).find("position 3 are not finite") != std::string::npos);
  // The frame loop: start, submit, poll until the poll reports it.
  REQUIRE(vkspec_generation_start(c, &gp) == VKSPEC_OK);
  vkspec_status st = VKSPEC_OK;
  vkspec_poll_result r{};
  for (int i = 0; i < 100 && st == VKSPEC_OK; ++i) {
    vkspec_wait(c);
    st = vkspec_poll(c, &r);
    if (st == VKSPEC_OK) CHECK(r.count == 0);
    if (st == VKSPEC_OK && !r.done) vkspec_step_submit(c, 1);
  }
  CHECK(st == VKSPEC_ERROR_MODEL);
  CHECK(std::string(vkspec_last_error(c)).find("position 3 are not finite") != std::string::npos);
  CHECK(vkspec_step_submit(c, 1) == VKSPEC_DONE);
  vkspec_context_destroy(c);
  vkspec_model_destroy(m);
  vkspec_runtime_destroy(rt);
}

// The demo verifier rewritten with `edit` applied to its metadata (tensors as they are).
static void write_demo_with(const std::string& path, const std::function<void(GgufWriter&)>& edit) {
  const GgufFile f = GgufFile::open(std::string(VKSPEC_SOURCE_DIR) + "/models/verifier.gguf");
  GgufWriter w;
  for (const auto& [k, v] : f.metadata()) w.add_value(std::string(k), v);
  edit(w);
  for (const GgufTensor& t : f.tensors()) {
    const uint8_t* d = f.data(t).data();
    w.add_tensor(std::string(t.name), t.dims, t.type, std::vector<uint8_t>(d, d + t.n_bytes));
  }
  w.write(path);
}

// What a load notices and goes on without is the application's to read: an optional token id
// past the vocabulary (ignored, as llama.cpp does), a tokenizer the keys do not make (the model
// loads without it: ids work, text is refused with the reason), a context above the trained one.
TEST_CASE("C API: vkspec_model_warnings names what the load went on without") {
  vkspec_runtime* rt = validated_runtime();
  const uint32_t V = uint32_t(
      GgufFile::open(std::string(VKSPEC_SOURCE_DIR) + "/models/verifier.gguf").get_array("tokenizer.ggml.tokens", GgufType::STRING).count);
  const auto load = [&](const std::string& path, uint32_t context, vkspec_model** m) {
    vkspec_model_desc md;
    vkspec_model_desc_init(&md);
    md.path = path.c_str();
    md.context_tokens = context;
    return vkspec_model_load(rt, &md, m);
  };
  {  // The demo as it is: nothing to say.
    vkspec_model* m = nullptr;
    REQUIRE(load(std::string(VKSPEC_SOURCE_DIR) + "/models/verifier.gguf", 0, &m) == VKSPEC_OK);
    CHECK(std::string(vkspec_model_warnings(m)).empty());
    // A context one past the trained one: accepted, and said.
    const uint32_t trained = vkspec_model_trained_context(m);
    vkspec_model_destroy(m);
    REQUIRE(trained > 0);
    REQUIRE(load(std::string(VKSPEC_SOURCE_DIR) + "/models/verifier.gguf", trained + 1, &m) == VKSPEC_OK);
    CHECK(std::string(vkspec_model_warnings(m)) ==
          "vkspec_model_desc.context_tokens " + std::to_string(trained + 1) + " exceeds the model's trained context of " +
              std::to_string(trained) + " tokens; output past it is unreliable\n");
    vkspec_model_destroy(m);
  }
  // The demo with metadata key `key` set to V (one past the vocabulary), loaded: its warnings.
  const auto load_with_v = [&](const std::string& key, vkspec_model** m) {
    TempFile file("capi_" + key + ".gguf");
    write_demo_with(file.path, [&](GgufWriter& w) { w.add_u32(key, V); });
    REQUIRE_MESSAGE(load(file.path, 0, m) == VKSPEC_OK, vkspec_last_error(rt));
    return std::string(vkspec_model_warnings(*m));
  };
  {  // A padding id one past the vocabulary: ignored, the tokenizer kept.
    vkspec_model* m = nullptr;
    const std::string w = load_with_v("tokenizer.ggml.padding_token_id", &m);
    CHECK(w.find("'tokenizer.ggml.padding_token_id': token id " + std::to_string(V) + " is out of range") != std::string::npos);
    CHECK(std::count(w.begin(), w.end(), '\n') == 1);
    uint32_t ids[64], n = 0;
    CHECK(vkspec_tokenize(m, "Hello", ids, 64, &n) == VKSPEC_OK);
    CHECK(n > 0);
    vkspec_model_destroy(m);
  }
  {  // A bos id past the vocabulary: no tokenizer, said at load and at every use of text.
    vkspec_model* m = nullptr;
    const std::string w = load_with_v("tokenizer.ggml.bos_token_id", &m);
    CHECK(w.find("'tokenizer.ggml.bos_token_id': token id " + std::to_string(V) + " is out of range") != std::string::npos);
    CHECK(w.find("prompt_text unavailable, give prompt_ids\n") != std::string::npos);
    uint32_t ids[64], n = 0;
    CHECK(vkspec_tokenize(m, "Hello", ids, 64, &n) == VKSPEC_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(vkspec_last_error(m)).find("its tokenizer could not be loaded") != std::string::npos);
    vkspec_context* c = nullptr;
    REQUIRE(vkspec_context_create(m, nullptr, &c) == VKSPEC_OK);
    vkspec_generation_params gp;
    vkspec_generation_params_init(&gp);
    gp.prompt_text = "Hello";
    CHECK(vkspec_generation_start(c, &gp) == VKSPEC_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(vkspec_last_error(c)).find("bos_token_id") != std::string::npos);
    const uint32_t prompt[] = {1, 72, 101, 108};
    gp.prompt_text = nullptr, gp.prompt_ids = prompt, gp.prompt_count = 4, gp.max_tokens = 4;
    CHECK(vkspec_generate(c, &gp, nullptr, nullptr, nullptr) == VKSPEC_OK);
    vkspec_context_destroy(c);
    vkspec_model_destroy(m);
  }
  CHECK(vkspec_model_warnings(nullptr) == std::string());
  const uint32_t messages = vkspec_runtime_validation_messages(rt);
  CHECK_MESSAGE(messages == 0, vkspec_last_error(rt));
  vkspec_runtime_destroy(rt);
}
