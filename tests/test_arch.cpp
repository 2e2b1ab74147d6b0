// Architectures as data (DESIGN.md §6): the switches each architecture brings, the RoPE scaling
// keys, and the refusal of everything a file asks for that the decoder does not compute — each
// refusal names the file and the key or tensor. (The numbers themselves are checked against the
// CPU reference in test_model.cpp and against llama.cpp in test_interop.cpp.)
#include <doctest/doctest.h>

#include <cmath>

#include "gguf_test_util.hpp"
#include "vk_fixture.hpp"
#include "vkspec/gguf_writer.hpp"
#include "vkspec/model.hpp"
#include "vkspec/model_config.hpp"

using namespace vkspec;
using namespace vkspec::test;

namespace {

LlamaConfig small(const char* arch) {
  LlamaConfig c;
  c.arch = arch;
  c.C = 32, c.L = 2, c.H = 4, c.Hkv = 2, c.D = 8, c.F = 48, c.V = 40, c.ctx = 64;
  return c;
}

// Writes `w` and returns read_llama_config's error ("" if it loads).
std::string config_error(const GgufWriter& w, TempFile& f) {
  w.write(f.path);
  try {
    (void)read_llama_config(GgufFile::open(f.path));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_refused(const GgufWriter& w, std::initializer_list<std::string> parts) {
  TempFile f("arch_refused.gguf");
  const std::string msg = config_error(w, f);
  INFO("error message: " << msg);
  REQUIRE_MESSAGE(!msg.empty(), "the file was accepted");
  CHECK(msg.find(f.path) != std::string::npos);
  for (const std::string& p : parts) CHECK_MESSAGE(msg.find(p) != std::string::npos, "missing '" << p << "'");
}

}  // namespace

TEST_CASE("architectures: each one's switches come from its row of the table and its tensors") {
  struct Want {
    const char* arch;
    bool neox, qk_norm, fused;
  };
  for (const Want& w : {Want{"llama", false, false, false}, Want{"mistral", false, false, false},
                        Want{"qwen2", true, false, false}, Want{"qwen3", true, true, false}, Want{"phi3", true, false, true}}) {
    CAPTURE(w.arch);
    LlamaConfig c = small(w.arch);
    c.qkv_bias = true;  // dropped where the architecture has no q/k/v bias
    TempFile f("arch.gguf");
    REQUIRE(config_error(random_llama(c, 3, GgmlType::F32), f).empty());
    const GgufFile g = GgufFile::open(f.path);
    const LlamaConfig r = read_llama_config(g);
    CHECK(r.rope_neox == w.neox);
    CHECK(r.qk_norm == w.qk_norm);
    CHECK(r.fused_qkv == w.fused);
    CHECK(r.fused_gate_up == w.fused);
    CHECK(r.qkv_bias == (std::string(w.arch) != "qwen3" && std::string(w.arch) != "phi3"));
    CHECK((g.tensor("blk.1.attn_qkv.weight") != nullptr) == w.fused);
    CHECK((g.tensor("blk.1.ffn_gate.weight") != nullptr) == !w.fused);
    CHECK((g.tensor("blk.1.attn_k_norm.weight") != nullptr) == w.qk_norm);
  }
  // Qwen3: the head width comes from key_length and H*D need not be C.
  LlamaConfig q = small("qwen3");
  q.D = 12;
  TempFile f("qwen3.gguf");
  REQUIRE(config_error(random_llama(q, 3, GgmlType::F32), f).empty());
  CHECK(read_llama_config(GgufFile::open(f.path)).D == 12);
}

TEST_CASE("architectures: linear RoPE scaling is read from either key; 0 means unset and type none no scale, as in llama.cpp") {
  TempFile f("scale.gguf");
  auto scale_of = [&](const GgufWriter& w) {
    REQUIRE(config_error(w, f).empty());
    return read_llama_config(GgufFile::open(f.path)).rope_freq_scale;
  };
  GgufWriter w = random_llama(small("llama"), 4, GgmlType::F32);
  CHECK(scale_of(w) == 1.0f);
  w.add_string("llama.rope.scaling.type", "linear");
  w.add_f32("llama.rope.scaling.factor", 4.0f);
  CHECK(scale_of(w) == 0.25f);
  w.add_f32("llama.rope.scaling.factor", 0.0f);
  CHECK(scale_of(w) == 1.0f);
  w.remove("llama.rope.scaling.factor");
  w.add_f32("llama.rope.scale_linear", 2.0f);  // the older name
  CHECK(scale_of(w) == 0.5f);
  w.add_u32("llama.rope.scaling.original_context_length", 32);  // descriptive only
  CHECK(scale_of(w) == 0.5f);
  w.add_string("llama.rope.scaling.type", "none");  // llama.cpp: "never scale if scaling type is none"
  CHECK(scale_of(w) == 1.0f);
}

TEST_CASE("architectures: YaRN's keys are read and its ramp runs from kept pairs to scaled ones") {
  TempFile f("yarn.gguf");
  GgufWriter w = random_llama(small("qwen2"), 6, GgmlType::F32);
  w.add_string("qwen2.rope.scaling.type", "yarn");
  w.add_f32("qwen2.rope.scaling.factor", 4.0f);
  w.add_u32("qwen2.rope.scaling.original_context_length", 24);
  w.add_f32("qwen2.rope.scaling.attn_factor", 1.5f);
  REQUIRE(config_error(w, f).empty());
  LlamaConfig c = read_llama_config(GgufFile::open(f.path));
  CHECK(c.rope_yarn);
  CHECK(c.rope_freq_scale == 0.25f);
  CHECK(c.rope_orig_ctx == 24);
  CHECK(c.rope_attn_factor == 1.5f);
  // (1.5 · (1 + 0.1 ln 4))², cos and sin's magnitude on both q and k.
  CHECK(rope_logit_gain(c) == doctest::Approx(std::pow(1.5 * (1 + 0.1 * std::log(4.0)), 2)).epsilon(1e-6));
  // D = 16, theta 10000, 24 positions: pair 0 turns more than 32 times and keeps its angle (divisor
  // = freq_scale, undoing the scale); from pair ceil(16 ln(24/2π) / (2 ln 10^4)) = 2 on, the angle
  // is scaled as under linear scaling (divisor exactly 1); the ramp in between.
  c.D = 16, c.rope_theta = 10000.0f;
  const std::vector<float> d = rope_divisors(c, {});
  REQUIRE(d.size() == 8);
  CHECK(d[0] == 0.25f);
  CHECK(d[1] > 0.25f);
  CHECK(d[1] < 1.0f);
  for (size_t i = 2; i < d.size(); ++i) CHECK(d[i] == 1.0f);
  // With file factors under it, the product; without YaRN, the factors alone; all 1 is no table.
  std::vector<float> ff(8, 2.0f);
  CHECK(rope_divisors(c, ff)[0] == 0.5f);
  CHECK(rope_divisors(c, ff)[5] == 2.0f);
  // YaRN's own parameters at the values computed (llama.cpp's defaults) change nothing.
  TempFile g("yarn-defaults.gguf");
  w.add_f32("qwen2.rope.scaling.yarn_beta_fast", 32.0f);
  w.add_f32("qwen2.rope.scaling.yarn_beta_slow", 1.0f);
  w.add_f32("qwen2.rope.scaling.yarn_ext_factor", 1.0f);
  w.add_f32("qwen2.rope.scaling.yarn_attn_factor", 1.0f);
  REQUIRE(config_error(w, g).empty());
  LlamaConfig cd = read_llama_config(GgufFile::open(g.path));
  CHECK(rope_logit_gain(cd) == rope_logit_gain(read_llama_config(GgufFile::open(f.path))));
  cd.D = 16, cd.rope_theta = 10000.0f;
  CHECK(rope_divisors(cd, {}) == d);
  c.rope_yarn = false;
  CHECK(rope_divisors(c, ff) == ff);
  CHECK(rope_divisors(c, {}).empty());
  CHECK(rope_logit_gain(c) == 2.25f);
}

TEST_CASE("architectures: what the decoder does not compute is refused naming the key or tensor") {
  auto with = [](const char* arch, auto edit) {
    GgufWriter w = random_llama(small(arch), 5, GgmlType::F32);
    edit(w);
    return w;
  };
  expect_refused(with("llama", [](GgufWriter& w) { w.add_string("general.architecture", "gemma2"); }),
                 {"general.architecture", "'gemma2' is not implemented"});
  expect_refused(with("phi3", [](GgufWriter& w) { w.add_string("phi3.rope.scaling.type", "longrope"); }),
                 {"phi3.rope.scaling.type", "'longrope' without its factor tensors"});
  for (const char* type : {"llama3", "su", "dynamic"})
    expect_refused(with("qwen2", [&](GgufWriter& w) { w.add_string("qwen2.rope.scaling.type", type); }),
                   {"qwen2.rope.scaling.type", std::string("'") + type + "' is not implemented"});
  expect_refused(with("llama", [](GgufWriter& w) { w.add_f32("llama.rope.scaling.factor", -2.0f); }),
                 {"llama.rope.scaling.factor", "positive"});
  expect_refused(with("llama", [](GgufWriter& w) { w.add_f32("llama.rope.scaling.factor", 1e-40f); }),
                 {"llama.rope.scaling.factor", "positive"});
  expect_refused(with("llama", [](GgufWriter& w) { w.add_f32("llama.rope.scaling.attn_factor", -1.2f); }),
                 {"llama.rope.scaling.attn_factor", "positive"});
  expect_refused(with("llama", [](GgufWriter& w) { w.add_f32("llama.rope.scaling.attn_factor", NAN); }),
                 {"llama.rope.scaling.attn_factor", "positive"});
  expect_refused(with("qwen2",
                      [](GgufWriter& w) {
                        w.add_string("qwen2.rope.scaling.type", "yarn");
                        w.add_f32("qwen2.rope.scaling.factor", NAN);
                      }),
                 {"qwen2.rope.scaling.factor", "positive"});
  expect_refused(with("qwen2", [](GgufWriter& w) { w.add_u32("qwen2.rope.scaling.original_context_length", 0); }),
                 {"qwen2.rope.scaling.original_context_length"});
  expect_refused(with("llama", [](GgufWriter& w) { w.add_f32("llama.rope.scaling.attn_factor", 1e30f); }),
                 {"llama.rope.scaling.attn_factor", "not a positive finite float"});
  expect_refused(with("qwen2",
                      [](GgufWriter& w) {
                        w.add_string("qwen2.rope.scaling.type", "yarn");
                        w.add_f32("qwen2.rope.scaling.factor", 0.5f);
                      }),
                 {"qwen2.rope.scaling.factor", "YaRN", "below 1"});
  expect_refused(with("qwen2", [](GgufWriter& w) { w.add_f32("qwen2.rope.scaling.yarn_beta_fast", 16.0f); }),
                 {"qwen2.rope.scaling.yarn_beta_fast", "16 is not implemented", "with 32"});
  // A YaRN file (qwen2, factor 4) with one of YaRN's own keys at another value than computed.
  auto yarn_with = [&](const std::string& key, float v) {
    return with("qwen2", [&](GgufWriter& w) {
      w.add_string("qwen2.rope.scaling.type", "yarn");
      w.add_f32("qwen2.rope.scaling.factor", 4.0f);
      w.add_f32("qwen2.rope.scaling." + key, v);
    });
  };
  expect_refused(yarn_with("yarn_beta_slow", 2.0f), {"qwen2.rope.scaling.yarn_beta_slow", "2 is not implemented", "YaRN with 1"});
  expect_refused(yarn_with("yarn_attn_factor", 0.5f), {"qwen2.rope.scaling.yarn_attn_factor", "0.5 is not implemented"});
  expect_refused(yarn_with("yarn_beta_fast", NAN), {"qwen2.rope.scaling.yarn_beta_fast", "nan is not implemented"});
  // The ramp's weight: 1 only under YaRN; on linear scaling it would turn the ramp on.
  // The refusal names what the file asks for: no scaling (no type, no factor), or the type given.
  expect_refused(with("llama", [](GgufWriter& w) { w.add_f32("llama.rope.scaling.yarn_ext_factor", 1.0f); }),
                 {"llama.rope.scaling.yarn_ext_factor", "this file's unscaled RoPE with 0"});
  expect_refused(with("llama",
                      [](GgufWriter& w) {
                        w.add_string("llama.rope.scaling.type", "linear");
                        w.add_f32("llama.rope.scaling.factor", 2.0f);
                        w.add_f32("llama.rope.scaling.yarn_ext_factor", 1.0f);
                      }),
                 {"llama.rope.scaling.yarn_ext_factor", "'linear' scaling with 0"});
  expect_refused(yarn_with("yarn_ext_factor", 0.0f), {"qwen2.rope.scaling.yarn_ext_factor", "0 is not implemented"});
  expect_refused(with("qwen2", [](GgufWriter& w) { w.add_string("qwen2.rope.scaling.yarn_beta_fast", "32"); }),
                 {"qwen2.rope.scaling.yarn_beta_fast"});
  expect_refused(with("llama", [](GgufWriter& w) { w.add_f32("llama.rope.scaling.yarn_log_multiplier", 0.1f); }),
                 {"llama.rope.scaling.yarn_log_multiplier", "RoPE scaling"});
  expect_refused(with("llama", [](GgufWriter& w) { w.add_f32("llama.attn_logit_softcapping", 50.0f); }),
                 {"llama.attn_logit_softcapping", "softcapping is not implemented"});
  expect_refused(with("qwen3", [](GgufWriter& w) { w.add_f32("qwen3.final_logit_softcapping", 30.0f); }),
                 {"qwen3.final_logit_softcapping", "softcapping"});
  // Recurrent-layer keys (Mamba's ssm.*, RWKV's wkv.*) in a file that names a known architecture.
  expect_refused(with("llama", [](GgufWriter& w) { w.add_u32("llama.ssm.state_size", 16); }),
                 {"llama.ssm.state_size", "recurrent layers are not implemented"});
  expect_refused(with("qwen2", [](GgufWriter& w) { w.add_u32("qwen2.wkv.head_size", 64); }),
                 {"qwen2.wkv.head_size", "recurrent layers"});
  expect_refused(with("llama", [](GgufWriter& w) { w.add_u32("llama.expert_count", 8); }),
                 {"llama.expert_count", "mixture-of-experts"});
  expect_refused(with("llama", [](GgufWriter& w) { w.add_f32("llama.attention.layer_norm_epsilon", 1e-5f); }),
                 {"llama.attention.layer_norm_epsilon", "does not implement"});
  // Tensors the decoder would not read: LongRoPE factors, an output bias, a bias where the
  // architecture has none.
  // LongRoPE's factors: both tables, in a Phi-3 file, and not beside rope_freqs.
  const std::vector<float> ones(4, 1.0f);  // small(): D = 8
  expect_refused(with("phi3", [&](GgufWriter& w) { w.add_tensor_f32("rope_factors_long.weight", {4}, ones); }),
                 {"tensor 'rope_factors_short.weight'", "missing", "LongRoPE"});
  expect_refused(with("llama",
                      [&](GgufWriter& w) {
                        w.add_tensor_f32("rope_factors_long.weight", {4}, ones);
                        w.add_tensor_f32("rope_factors_short.weight", {4}, ones);
                      }),
                 {"tensor 'rope_factors_long.weight'", "phi3 files only"});
  expect_refused(with("phi3",
                      [&](GgufWriter& w) {
                        w.add_tensor_f32("rope_factors_long.weight", {4}, ones);
                        w.add_tensor_f32("rope_factors_short.weight", {3}, std::vector<float>(3, 1.0f));
                      }),
                 {"tensor 'rope_factors_short.weight'", "[4]"});
  expect_refused(with("llama", [](GgufWriter& w) { w.add_tensor_f32("blk.1.attn_output.bias", {32}, std::vector<float>(32, 0.0f)); }),
                 {"tensor 'blk.1.attn_output.bias'", "not part of vkspec's llama decoder"});
  expect_refused(with("qwen3", [](GgufWriter& w) { w.add_tensor_f32("blk.0.attn_q.bias", {32}, std::vector<float>(32, 0.0f)); }),
                 {"tensor 'blk.0.attn_q.bias'", "qwen3"});
  // Wrong shapes of the new tensors.
  expect_refused(with("llama", [](GgufWriter& w) { w.add_tensor_f32("rope_freqs.weight", {5}, std::vector<float>(5, 1.0f)); }),
                 {"tensor 'rope_freqs.weight'", "[4]"});
}

TEST_CASE("architectures: a missing qwen3 norm or phi3 fused tensor is refused by name") {
  // A llama-layout file relabelled (with that architecture's keys): the tensors it needs are absent.
  for (const auto& [arch, needed] : {std::pair{"qwen3", "blk.0.attn_q_norm.weight"}, std::pair{"phi3", "blk.0.attn_qkv.weight"}}) {
    LlamaConfig c = small("llama");
    GgufWriter w = random_llama(c, 6, GgmlType::F32);
    c.arch = arch;
    add_llama_metadata(w, c, "relabelled");
    expect_refused(w, {std::string("missing required tensor '") + needed + "'"});
  }
}

TEST_CASE_FIXTURE(VkTest, "architectures: a sliding window is read and loads at any capacity (test_model computes it)") {
  LlamaConfig c = small("phi3");
  c.sliding_window = 32;
  TempFile f("swa.gguf");
  write_random_llama(f.path, c, 7, GgmlType::F32);
  const GgufFile g = GgufFile::open(f.path);
  ModelOptions mo;
  mo.context = 64;  // keys past the window are masked, not refused
  LlamaModel m(ctx, g, mo);
  CHECK(m.capacity() == 64);
  CHECK(m.config().sliding_window == 32);
}

TEST_CASE_FIXTURE(VkTest, "architectures: a rope_freqs factor that is not positive is refused naming the element") {
  LlamaConfig c = small("llama");
  GgufWriter w = random_llama(c, 8, GgmlType::F32);
  std::vector<float> ff = {1.0f, 2.0f, 0.0f, 4.0f};
  w.add_tensor_f32("rope_freqs.weight", {4}, ff);
  TempFile f("freqs.gguf");
  w.write(f.path);
  const GgufFile g = GgufFile::open(f.path);
  try {
    LlamaModel m(ctx, g);
    FAIL("a zero frequency factor was accepted");
  } catch (const Error& e) {
    const std::string msg = e.what();
    CHECK(msg.find("rope_freqs.weight") != std::string::npos);
    CHECK(msg.find("element 2") != std::string::npos);
  }
}

TEST_CASE_FIXTURE(VkTest, "architectures: a rope_freqs factor so small the angle overflows is refused, not computed into NaN") {
  // 1e-37 is positive, but position 35 · 1 / 1e-37 passes the float range: every logit NaN.
  for (const float tiny : {1e-37f, 1e-40f}) {
    CAPTURE(tiny);
    LlamaConfig c = small("llama");
    GgufWriter w = random_llama(c, 8, GgmlType::F32);
    w.add_tensor_f32("rope_freqs.weight", {4}, std::vector<float>{1.0f, tiny, 1.0f, 1.0f});
    TempFile f("freqs_tiny.gguf");
    w.write(f.path);
    const GgufFile g = GgufFile::open(f.path);
    try {
      LlamaModel m(ctx, g);
      FAIL("a factor that overflows the angle was accepted");
    } catch (const Error& e) {
      const std::string msg = e.what();
      INFO(msg);
      CHECK(msg.find("rope_freqs.weight") != std::string::npos);
      CHECK(msg.find("RoPE pair 1") != std::string::npos);
      CHECK(msg.find("overflow") != std::string::npos);
    }
  }
}
