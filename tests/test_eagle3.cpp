// EAGLE-3 draft heads built with PyTorch in the published layout (tests/eagle3_fixtures.py):
// the head forward against PyTorch's, pytorch_model.bin and model.safetensors giving identical
// drafts, every strategy equal to `ar` with EAGLE-3 heads and with mixed EAGLE-1 + EAGLE-3 pairs,
// and malformed configs and heads refused with the key or tensor and the numbers.
#include <cmath>
#include <filesystem>
#include <fstream>

#include "eagle3_test_util.hpp"
#include "spec_fixtures.hpp"
#include "vk_fixture.hpp"
#include "vkspec/engine.hpp"

using namespace vkspec;
using namespace vkspec::test;
namespace fs = std::filesystem;

namespace {

// A 4-layer V96 verifier whose next token mostly follows the current one (mix 0.05), an oracle
// EAGLE-1 head (e1/, spec_fixtures.hpp) and the fixture script's EAGLE-3 heads, written once per
// run. Empty dir: torch is missing (NOT RUN).
struct E3Files {
  TempDir dir{"eagle3"};
  LlamaConfig cfg;
  bool ok = false;
  E3Files() {
    cfg = write_verifier(dir.path + "/verifier.gguf", 42, 0.05f, 96, 64, 4);
    fs::create_directories(dir.path + "/e1");
    write_head(dir.path + "/e1", cfg, dir.path + "/verifier.gguf", 101, 2, 0.25f);
    ok = eagle3_fixtures(dir.path);
  }
  std::string operator()(const std::string& name) const { return dir.path + "/" + name; }
};

const E3Files* files() {
  static E3Files f;
  return f.ok ? &f : nullptr;
}

struct E3Rig {
  GgufFile file;
  LlamaModel model;
  E3Rig(Context& ctx, const E3Files& f, KvType kv = KvType::F16)
      : file(GgufFile::open(f("verifier.gguf"))), model(ctx, file, options(kv)) {}
  static ModelOptions options(KvType kv) {
    ModelOptions mo;
    mo.context = 256, mo.max_rows = 64, mo.kv_type = kv;
    return mo;
  }
  std::unique_ptr<EagleHead> head(Context& ctx, const std::string& path) {
    return std::make_unique<EagleHead>(ctx, path, model, 256, 64);
  }
};

std::vector<float> rows(const Mat& m, uint32_t r0, uint32_t n, uint32_t cols) {
  std::vector<float> out;
  for (uint32_t r = r0; r < r0 + n; ++r) {
    auto v = m.buf->read<float>(cols, size_t(m.offset + r * m.stride) * 4);
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// A config.json edited by `edit`, beside a copy of the e3_bin weights, in `dir`.
void edited_head(const E3Files& f, const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
  fs::create_directories(dir);
  fs::copy_file(f("e3_bin/pytorch_model.bin"), dir + "/pytorch_model.bin", fs::copy_options::overwrite_existing);
  nlohmann::json j = nlohmann::json::parse(std::ifstream(f("e3_bin/config.json")));
  edit(j);
  std::ofstream(dir + "/config.json") << j.dump();
}

}  // namespace

TEST_CASE_FIXTURE(VkTest, "EAGLE-3 head forward equals its PyTorch forward (tap rows through fc, then fed-back rows)") {
  const E3Files* f = files();
  if (!f) return;
  // e3_bias: attention_bias and mlp_bias, random biases on q, k, v, o, gate, up and down.
  for (const auto& [dir, ref_file] : {std::pair{"e3_ids", "ref.json"}, std::pair{"e3_bias", "ref_bias.json"}}) {
    const std::string head_dir = dir;
    CAPTURE(head_dir);
    const nlohmann::json ref = nlohmann::json::parse(std::ifstream((*f)(ref_file)));
    const auto toks = ref["tokens"].get<std::vector<uint32_t>>();
    const auto taps = ref["taps"].get<std::vector<float>>(), fed = ref["fed"].get<std::vector<float>>();
    const auto h_ref = ref["h"].get<std::vector<float>>(), dl_ref = ref["draft_logits"].get<std::vector<float>>();
    const auto ids = ref["draft_ids"].get<std::vector<uint32_t>>();
    const uint32_t C = 64, V = 96, Vd = uint32_t(ids.size()), N1 = uint32_t(taps.size() / (3 * C)),
                   N2 = uint32_t(fed.size() / C);
    REQUIRE(N1 + N2 == toks.size());
    // f32 cache: PyTorch keeps K and V in f32.
    E3Rig rig(ctx, *f, KvType::F32);
    auto head = rig.head(ctx, (*f)(dir));
    CHECK(head->eagle3());
    // eagle_aux_hidden_state_layer_ids [1, 1, 0]: outputs of layers 1, 1, 0 = inputs of 2, 2, 1.
    CHECK(head->tap_points() == std::vector<uint32_t>{2, 2, 1});
    Buffer tb(ctx, toks.size() * 4), xb(ctx, taps.size() * 4), fb(ctx, fed.size() * 4);
    tb.upload(toks), xb.upload(taps), fb.upload(fed);
    std::vector<float> h_got, l_got;
    for (int part = 0; part < 2; ++part) {  // the second call attends to the first one's cache
      Sequence seq(ctx);
      seq.begin();
      EagleHead::ForwardArgs a;
      a.N = part ? N2 : N1, a.t = part ? N1 : 0, a.kv_slot = a.t, a.tokens = &tb, a.tok_offset = a.t;
      a.features = part ? Mat{&fb, 0, C} : Mat{&xb, 0, 3 * C}, a.taps = part == 0, a.pos_first = a.t;
      head->forward(seq, a);
      seq.run();
      auto h = rows(head->hidden(), 0, a.N, C), l = rows(head->logits(), 0, a.N, V);
      h_got.insert(h_got.end(), h.begin(), h.end());
      l_got.insert(l_got.end(), l.begin(), l.end());
    }
    check_close(h_got, h_ref, 1e-4f, 1e-4f, "EAGLE-3 pre-norm output h");
    // Draft id i's logit sits at verifier id i + d2t[i]; every other id is -inf.
    std::vector<float> mapped;
    size_t not_inf = 0;
    for (uint32_t r = 0; r < N1 + N2; ++r) {
      std::vector<bool> drafted(V, false);
      for (uint32_t i = 0; i < Vd; ++i) mapped.push_back(l_got[r * V + ids[i]]), drafted[ids[i]] = true;
      for (uint32_t v = 0; v < V; ++v) not_inf += !drafted[v] && !(std::isinf(l_got[r * V + v]) && l_got[r * V + v] < 0);
    }
    check_close(mapped, dl_ref, 1e-3f, 1e-4f, "EAGLE-3 draft logits");
    CHECK(not_inf == 0);
  }
}

TEST_CASE_FIXTURE(VkTest, "EAGLE-3: pytorch_model.bin and model.safetensors of one head give identical drafts") {
  const E3Files* f = files();
  if (!f) return;
  E3Rig rig(ctx, *f);
  auto hb = rig.head(ctx, (*f)("e3_bin")), hs = rig.head(ctx, (*f)("e3_st"));
  CHECK(hb->path().ends_with("pytorch_model.bin"));
  CHECK(hs->path().ends_with("model.safetensors"));
  // The same forward through both: bit-identical logits.
  const uint32_t N = 9, C = 64;
  std::vector<uint32_t> toks;
  for (uint32_t i = 0; i < N; ++i) toks.push_back((i * 37 + 5) % 96);
  auto taps = random_floats(size_t(N) * 3 * C, 17);
  Buffer tb(ctx, N * 4), xb(ctx, taps.size() * 4);
  tb.upload(toks), xb.upload(taps);
  std::vector<std::vector<float>> got;
  for (EagleHead* h : {hb.get(), hs.get()}) {
    Sequence seq(ctx);
    seq.begin();
    EagleHead::ForwardArgs a;
    a.N = N, a.t = 0, a.kv_slot = 0, a.tokens = &tb, a.features = Mat{&xb, 0, 3 * C}, a.taps = true, a.pos_first = 0;
    h->forward(seq, a);
    seq.run();
    got.push_back(rows(h->logits(), 0, N, 96));
  }
  CHECK(std::memcmp(got[0].data(), got[1].data(), got[0].size() * 4) == 0);
  // And the same drafts end to end: tokens, steps and acceptance histogram of single1.
  EngineOptions o;
  o.strategy = Strategy::Single1, o.depth = 4, o.topk = 3, o.budget = 6;
  GenerateStats sb = Engine(ctx, rig.model, hb.get(), nullptr, o).generate({3, 14, 15, 92}, 60);
  GenerateStats ss = Engine(ctx, rig.model, hs.get(), nullptr, o).generate({3, 14, 15, 92}, 60);
  CHECK(sb.tokens == ss.tokens);
  CHECK(sb.steps == ss.steps);
  CHECK(sb.accept_hist == ss.accept_hist);
}

TEST_CASE_FIXTURE(VkTest, "lossless: every strategy equals ar with two EAGLE-3 heads and with mixed pairs") {
  const E3Files* f = files();
  if (!f) return;
  E3Rig rig(ctx, *f);
  auto e1 = rig.head(ctx, (*f)("e1"));
  auto e3a = rig.head(ctx, (*f)("e3_bin")), e3b = rig.head(ctx, (*f)("e3_ids"));
  CHECK(!e1->eagle3());
  // e3_ids names the default taps through its config ids: the two heads share one tap buffer.
  REQUIRE(e3a->tap_points() == e3b->tap_points());
  // 8 prompts x 96 tokens per pair (the EAGLE-1/2 pair's own test runs 20 x 128).
  check_lossless(ctx, rig.model, e3a.get(), e3b.get(), "eagle3+eagle3", 1.0, 3, 3, 5, 8, 96);
  // The oracle EAGLE-1 head makes long accepted paths; merge must use them.
  check_lossless(ctx, rig.model, e1.get(), e3a.get(), "eagle1+eagle3", 1.8, 4, 3, 6, 8, 96);
  check_lossless(ctx, rig.model, e3b.get(), e1.get(), "eagle3+eagle1", 1.8, 4, 3, 6, 8, 96);
  // An EAGLE-3 head whose seven projections carry biases (attention_bias, mlp_bias).
  auto e3c = rig.head(ctx, (*f)("e3_bias"));
  check_lossless(ctx, rig.model, e3c.get(), e1.get(), "eagle3 with biases+eagle1", 1.8, 4, 3, 6, 4, 64);
  // The verifier exports its tap rows once an EAGLE-3 head drafts with it.
  CHECK(rig.model.tap_points() == e3a->tap_points());
}

TEST_CASE_FIXTURE(VkTest, "pair: a mixed EAGLE-1 + EAGLE-3 pair gets no pack, two EAGLE-3 heads do") {
  // A mixed pair's draft lists differ from the first op, so nothing pairs and a pack would only
  // cost memory; two heads of one shape pair every op and read the pack.
  const E3Files* f = files();
  if (!f) return;
  E3Rig rig(ctx, *f);
  auto e1 = rig.head(ctx, (*f)("e1"));
  auto e3a = rig.head(ctx, (*f)("e3_bin")), e3b = rig.head(ctx, (*f)("e3_ids"));
  EngineOptions o;
  o.strategy = Strategy::Merge, o.topk = 2, o.depth = 2, o.budget = 3;
  const std::vector<uint32_t> prompt = {1, 2, 3, 4, 5};
  const GenerateStats mixed = Engine(ctx, rig.model, e1.get(), e3a.get(), o).generate(prompt, 8);
  const GenerateStats alike = Engine(ctx, rig.model, e3a.get(), e3b.get(), o).generate(prompt, 8);
  CHECK(mixed.paired_per_step == 0);
  CHECK(mixed.pair_pack_bytes == 0);
  CHECK(mixed.pair_pack_refused.empty());
  const bool packs = ctx.caps().quirks.weights_via_texel_buffer && ctx.caps().pair_dispatch;
  CHECK((alike.pair_pack_bytes > 0) == packs);
  if (ctx.caps().pair_dispatch) CHECK(alike.paired_per_step > 0);
}

TEST_CASE_FIXTURE(VkTest, "EAGLE-3: malformed configs and heads are refused naming the key or tensor") {
  const E3Files* f = files();
  if (!f) return;
  E3Rig rig(ctx, *f);
  auto refused = [&](const std::string& dir, const std::string& what) {
    const std::string head_dir = dir;
    CAPTURE(head_dir);
    CHECK_THROWS_WITH_AS(EagleHead(ctx, dir, rig.model, 256, 64), doctest::Contains(what.c_str()), Error);
  };
  refused((*f)("bad_fc"), "fc.weight");
  refused((*f)("bad_d2t_range"), "tensor d2t: entry 63 is 96, mapping draft id 63 outside the verifier vocabulary of 96");
  refused((*f)("bad_d2t_dup"), "tensor d2t maps draft ids 0 and 1 both to verifier id");
  refused((*f)("bad_t2d"), "tensor t2d: entry");
  refused((*f)("bad_d2t_float"), "tensor d2t has dtype F32, expected I64");
  refused((*f)("bad_no_d2t"), "draft_vocab_size 64 < vocab_size 96 but the file has no d2t tensor");
  TempDir tmp("eagle3_bad_config");
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> configs = {
      {[](auto& j) { j["draft_vocab_size"] = 200; }, "key 'draft_vocab_size': 200 is larger than vocab_size 96"},
      {[](auto& j) { j["eagle_aux_hidden_state_layer_ids"] = {0, 1, 9}; },
       "eagle_aux_hidden_state_layer_ids entry 2 is layer 9, but the verifier has 4 layers (ids 0..3)"},
      {[](auto& j) { j["eagle_aux_hidden_state_layer_ids"] = {0, 1}; }, "expected an array of 3 layer ids"},
      {[](auto& j) { j["eagle_aux_hidden_state_layer_ids"] = {0, -1, 2}; }, "entry 1 is -1, expected a layer index"},
      {[](auto& j) { j["target_hidden_size"] = 128; }, "target_hidden_size 128 != verifier width 64"},
      {[](auto& j) { j["hidden_size"] = 32; }, "hidden_size 32 differs from the verifier width 64"},
  };
  int i = 0;
  for (const auto& [edit, what] : configs) {
    const std::string dir = tmp.path + "/c" + std::to_string(i++);
    edited_head(*f, dir, edit);
    refused(dir, what);
  }
  // Default taps (inputs of layers 2, L/2, L-3) need three layers.
  TempFile small("eagle3_small.gguf");
  write_verifier(small.path, 5, 1.0f, 96, 64, 2);
  GgufFile sg = GgufFile::open(small.path);
  LlamaModel sm(ctx, sg, E3Rig::options(KvType::F16));
  CHECK_THROWS_WITH_AS(EagleHead(ctx, (*f)("e3_bin"), sm, 256, 64),
                       doctest::Contains("need a verifier of at least 3 layers, this one has 2"), Error);
  // Two EAGLE-3 heads tapping different layers (the --topk refusal is in test_sample_engine.cpp,
  // where the draft vocabulary is smaller than the largest top-k).
  auto e3 = rig.head(ctx, (*f)("e3_bin"));
  EngineOptions o;
  const std::string other = tmp.path + "/other_taps";
  edited_head(*f, other, [](auto& j) { j["eagle_aux_hidden_state_layer_ids"] = {0, 2, 3}; });
  auto e3o = rig.head(ctx, other);
  o.strategy = Strategy::Merge, o.topk = 3, o.depth = 3, o.budget = 4;
  CHECK_THROWS_WITH_AS(Engine(ctx, rig.model, e3.get(), e3o.get(), o),
                       doctest::Contains("two EAGLE-3 heads read different verifier layers"), Error);
}
