// Small verifiers and EAGLE heads for the speculative-decoding tests, written to temp files.
//
// "Oracle" heads make drafts the verifier accepts most of the time, so long accepted paths and
// multi-token commits are exercised: in a verifier whose attention and MLP outputs are scaled by
// `mix` (small), the next token depends mostly on the current one, and argmax lm_head(rmsnorm(e) ⊙ w)
// = argmax lm_head(e ⊙ w) (a positive scale never changes an argmax). A head whose fc maps
// concat(embed(tok), f) to embed(tok) ⊙ w (and whose layer adds nothing) drafts exactly that.
#pragma once

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf_test_util.hpp"
#include "vkspec/dtype.hpp"
#include <doctest/doctest.h>

#include "vkspec/eagle_head.hpp"
#include "vkspec/engine.hpp"
#include "vkspec/gguf_writer.hpp"
#include "vkspec/model.hpp"

namespace vkspec::test {

struct TempDir {
  std::string path;
  explicit TempDir(const std::string& name)
      : path((std::filesystem::temp_directory_path() / ("vkspec_" + std::to_string(::getpid()) + "_" + name)).string()) {
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

inline std::vector<float> uniform(size_t n, std::mt19937& rng, float a) {
  std::uniform_real_distribution<float> d(-a, a);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// A Llama verifier, f32, tied output; attention-output and down projections scaled by `mix`.
// poison_output: an untied output.weight (the embedding) whose rows make hostile logits — rows
// 3 and 40 NaN, row 7 / row 11 with one +inf / -inf weight (a logit of +-inf by the sign of the
// hidden state's first entry), what a broken checkpoint gives the verifier's argmax.
// nan_embedding_row >= 0: that token's embedding row is NaN and output.weight is the clean
// embedding, untied: the logits are those of the tied file until the token is an input.
inline LlamaConfig write_verifier(const std::string& path, uint32_t seed, float mix, int V = 96, int C = 64, int L = 2,
                                  bool poison_output = false, int context_length = 512, uint32_t window = 0,
                                  int nan_embedding_row = -1) {
  LlamaConfig cfg;
  cfg.C = C, cfg.H = 4, cfg.Hkv = 2, cfg.D = C / 4, cfg.F = 96, cfg.V = V, cfg.L = L, cfg.ctx = context_length;
  cfg.sliding_window = window;
  std::mt19937 rng(seed);
  GgufWriter w;
  add_llama_metadata(w, cfg, "spec-test");
  const uint64_t uC = C, uV = V, uF = cfg.F, KV = uint64_t(cfg.Hkv) * cfg.D;
  auto emb = uniform(uV * uC, rng, 1.0f);
  if (nan_embedding_row >= 0) {
    std::vector<float> broken = emb;
    std::fill_n(broken.begin() + size_t(nan_embedding_row) * C, C, std::numeric_limits<float>::quiet_NaN());
    w.add_tensor_f32("token_embd.weight", {uC, uV}, broken, GgmlType::F32);
  } else {
    w.add_tensor_f32("token_embd.weight", {uC, uV}, emb, GgmlType::F32);
  }
  std::vector<float> ones(C, 1.0f);
  auto norm = uniform(uC, rng, 0.5f);
  for (auto& x : norm) x += 1.0f;
  w.add_tensor_f32("output_norm.weight", {uC}, norm, GgmlType::F32);
  const float a = 1.0f / std::sqrt(float(C));
  for (int l = 0; l < L; ++l) {
    auto name = [&](const char* s) { return "blk." + std::to_string(l) + "." + s; };
    w.add_tensor_f32(name("attn_norm.weight"), {uC}, ones, GgmlType::F32);
    w.add_tensor_f32(name("ffn_norm.weight"), {uC}, ones, GgmlType::F32);
    w.add_tensor_f32(name("attn_q.weight"), {uC, uC}, uniform(uC * uC, rng, a * 3), GgmlType::F32);
    w.add_tensor_f32(name("attn_k.weight"), {uC, KV}, uniform(uC * KV, rng, a * 3), GgmlType::F32);
    w.add_tensor_f32(name("attn_v.weight"), {uC, KV}, uniform(uC * KV, rng, a), GgmlType::F32);
    w.add_tensor_f32(name("attn_output.weight"), {uC, uC}, uniform(uC * uC, rng, a * mix), GgmlType::F32);
    w.add_tensor_f32(name("ffn_gate.weight"), {uC, uF}, uniform(uC * uF, rng, a), GgmlType::F32);
    w.add_tensor_f32(name("ffn_up.weight"), {uC, uF}, uniform(uC * uF, rng, a), GgmlType::F32);
    w.add_tensor_f32(name("ffn_down.weight"), {uF, uC}, uniform(uF * uC, rng, mix / std::sqrt(float(cfg.F))),
                     GgmlType::F32);
  }
  if (nan_embedding_row >= 0) w.add_tensor_f32("output.weight", {uC, uV}, emb, GgmlType::F32);
  if (poison_output) {
    std::vector<float> out = emb;
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    for (int r : {3, 40})
      if (r < V) std::fill(out.begin() + size_t(r) * C, out.begin() + size_t(r + 1) * C, nan);
    if (7 < V) out[size_t(7) * C] = inf;
    if (11 < V) out[size_t(11) * C] = -inf;
    w.add_tensor_f32("output.weight", {uC, uV}, out, GgmlType::F32);
  }
  w.write(path);
  return cfg;
}

// Writes an EAGLE head folder (model.safetensors + config.json) in Hugging Face layout.
// mode 0: random weights (low acceptance). mode 1: oracle (see above). mode 2: oracle + noise.
// nan: fc.weight all NaN (a broken head: every hidden state and logit it makes is NaN).
// extra: further (C)-shaped tensors of ones under these names.
// attn_bias / mlp_bias: the config says attention_bias / mlp_bias and the file has the biases
// Hugging Face's layer then carries (q, k, v, o; gate, up, down).
inline void write_head(const std::string& dir, const LlamaConfig& vcfg, const std::string& verifier_path, uint32_t seed,
                       int mode, float noise = 0.0f, bool nan = false, const std::vector<std::string>& extra = {},
                       bool attn_bias = false, bool mlp_bias = false) {
  const uint64_t C = vcfg.C, F = 64, H = vcfg.H, Hkv = vcfg.Hkv, D = vcfg.D;
  std::mt19937 rng(seed);
  std::vector<std::pair<std::string, std::pair<std::vector<uint64_t>, std::vector<float>>>> t;
  const float a = 1.0f / std::sqrt(float(C));
  std::vector<float> fc = uniform(C * 2 * C, rng, mode == 0 ? a : noise);
  if (mode != 0) {
    // The oracle head needs the verifier's final norm weights (f32 in the file written above).
    const GgufFile v = GgufFile::open(verifier_path);
    const GgufTensor& t = v.require_tensor("output_norm.weight");
    if (t.type != GgmlType::F32 || t.n_bytes != C * 4) throw std::runtime_error("output_norm.weight is not f32 (C,)");
    std::vector<float> norm(C);
    std::memcpy(norm.data(), t.data, C * 4);
    for (uint64_t i = 0; i < C; ++i) fc[i * 2 * C + i] += norm[i];  // h = embed(tok) ⊙ w (+ noise)
  }
  if (nan) std::fill(fc.begin(), fc.end(), std::numeric_limits<float>::quiet_NaN());
  const float layer = mode == 0 ? a : 0.0f;
  t.push_back({"fc.weight", {{C, 2 * C}, fc}});
  t.push_back({"fc.bias", {{C}, uniform(C, rng, mode == 0 ? 0.1f : 0.0f)}});
  t.push_back({"layers.0.self_attn.q_proj.weight", {{H * D, C}, uniform(H * D * C, rng, a)}});
  t.push_back({"layers.0.self_attn.k_proj.weight", {{Hkv * D, C}, uniform(Hkv * D * C, rng, a)}});
  t.push_back({"layers.0.self_attn.v_proj.weight", {{Hkv * D, C}, uniform(Hkv * D * C, rng, a)}});
  t.push_back({"layers.0.self_attn.o_proj.weight", {{C, H * D}, uniform(C * H * D, rng, layer)}});
  t.push_back({"layers.0.mlp.gate_proj.weight", {{F, C}, uniform(F * C, rng, a)}});
  t.push_back({"layers.0.mlp.up_proj.weight", {{F, C}, uniform(F * C, rng, a)}});
  t.push_back({"layers.0.mlp.down_proj.weight", {{C, F}, uniform(C * F, rng, layer)}});
  t.push_back({"layers.0.post_attention_layernorm.weight", {{C}, std::vector<float>(C, 1.0f)}});
  // Small beside the oracle's signal, so such heads still draft well.
  const float b = mode == 0 ? 0.1f : 0.02f;
  if (attn_bias) {
    t.push_back({"layers.0.self_attn.q_proj.bias", {{H * D}, uniform(H * D, rng, b)}});
    t.push_back({"layers.0.self_attn.k_proj.bias", {{Hkv * D}, uniform(Hkv * D, rng, b)}});
    t.push_back({"layers.0.self_attn.v_proj.bias", {{Hkv * D}, uniform(Hkv * D, rng, b)}});
    t.push_back({"layers.0.self_attn.o_proj.bias", {{C}, uniform(C, rng, b)}});
  }
  if (mlp_bias) {
    t.push_back({"layers.0.mlp.gate_proj.bias", {{F}, uniform(F, rng, b)}});
    t.push_back({"layers.0.mlp.up_proj.bias", {{F}, uniform(F, rng, b)}});
    t.push_back({"layers.0.mlp.down_proj.bias", {{C}, uniform(C, rng, b)}});
  }
  for (const std::string& name : extra) t.push_back({name, {{C}, std::vector<float>(C, 1.0f)}});
  // safetensors: u64 header length, JSON header, then the data (F16 here, as published heads).
  nlohmann::json h = nlohmann::json::object();
  std::vector<uint8_t> data;
  for (auto& [name, sv] : t) {
    const uint64_t off = data.size();
    for (float x : sv.second) {
      uint16_t b = f32_to_f16(x);
      data.push_back(uint8_t(b & 0xff));
      data.push_back(uint8_t(b >> 8));
    }
    h[name] = {{"dtype", "F16"}, {"shape", sv.first}, {"data_offsets", {off, uint64_t(data.size())}}};
  }
  std::string hs = h.dump();
  std::ofstream f(dir + "/model.safetensors", std::ios::binary);
  const uint64_t n = hs.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f.write(hs.data(), std::streamsize(n));
  f.write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size()));
  nlohmann::json cfg = {{"architectures", {"LlamaForCausalLMEagle"}},
                        {"hidden_size", C},
                        {"intermediate_size", F},
                        {"num_attention_heads", H},
                        {"num_key_value_heads", Hkv},
                        {"rms_norm_eps", 1e-5},
                        {"rope_theta", 10000.0},
                        {"vocab_size", vcfg.V},
                        {"max_position_embeddings", 512}};
  if (attn_bias) cfg["attention_bias"] = true;
  if (mlp_bias) cfg["mlp_bias"] = true;
  std::ofstream(dir + "/config.json") << cfg.dump(2);
}

// A verifier and two heads written to temp files and loaded on `ctx`: what every end-to-end
// speculative test starts from.
struct RigOptions {
  uint32_t seed = 42;  // verifier weights
  float mix = 1.0f;    // see write_verifier: small = next token follows the current one
  int V = 96, C = 64, L = 2;
  uint32_t seed1 = 101, seed2 = 202;  // head weights
  int mode1 = 2, mode2 = 2;           // see write_head: 0 random, 2 oracle
  float noise1 = 0, noise2 = 0;
  uint32_t context = 256, rows = 64;  // KV capacity and rows per pass, verifier and heads
  bool nan_head1 = false;      // write_head(nan): head 1's weights are NaN
  bool poison_output = false;  // write_verifier(poison_output): NaN / +-inf logits
  int nan_embedding = -1;      // write_verifier(nan_embedding_row): this token's input row is NaN
  KvType kv_type = KvType::F16;  // ModelOptions::kv_type, kv_streams_per_buffer
  uint32_t kv_streams_per_buffer = 0;
  uint32_t window = 0;  // the verifier's sliding window (0: none)
  bool head1_biases = false;  // write_head(attn_bias, mlp_bias) for head 1; head 2 has none
};

struct SpecRig {
  TempFile gguf;
  TempDir h1, h2;
  LlamaConfig cfg;
  std::unique_ptr<GgufFile> file;
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<EagleHead> head1, head2;
  SpecRig(Context& ctx, const std::string& name, const RigOptions& o)
      : gguf(name + ".gguf"), h1(name + "_h1"), h2(name + "_h2") {
    cfg = write_verifier(gguf.path, o.seed, o.mix, o.V, o.C, o.L, o.poison_output, 512, o.window, o.nan_embedding);
    write_head(h1.path, cfg, gguf.path, o.seed1, o.mode1, o.noise1, o.nan_head1, {}, o.head1_biases, o.head1_biases);
    write_head(h2.path, cfg, gguf.path, o.seed2, o.mode2, o.noise2);
    file = std::make_unique<GgufFile>(GgufFile::open(gguf.path));
    ModelOptions mo;
    mo.context = o.context;
    mo.max_rows = o.rows;
    mo.check_finite = !o.poison_output && o.nan_embedding < 0;  // the poisoned rows are meant to reach the kernels
    mo.kv_type = o.kv_type;
    mo.kv_streams_per_buffer = o.kv_streams_per_buffer;
    model = std::make_unique<LlamaModel>(ctx, *file, mo);
    head1 = std::make_unique<EagleHead>(ctx, h1.path, *model, o.context, o.rows, !o.nan_head1);
    head2 = std::make_unique<EagleHead>(ctx, h2.path, *model, o.context, o.rows);
  }
};

// The bundled demo (models/README.md): the trained byte-level verifier, both trained heads and
// the held-out benchmark prompts (each line's bytes are its token ids).
struct DemoRig {
  GgufFile file;
  LlamaModel model;
  EagleHead head1, head2;
  std::vector<std::vector<uint32_t>> prompts;
  static std::string dir() { return std::string(VKSPEC_SOURCE_DIR) + "/models/"; }
  static ModelOptions rows(uint32_t r) {
    ModelOptions mo;
    mo.max_rows = r;
    return mo;
  }
  explicit DemoRig(Context& ctx, uint32_t max_rows = 64)
      : file(GgufFile::open(dir() + "verifier.gguf")),
        model(ctx, file, rows(max_rows)),
        head1(ctx, dir() + "head1", model, model.capacity(), max_rows),
        head2(ctx, dir() + "head2", model, model.capacity(), max_rows) {
    std::ifstream in(dir() + "prompts.txt");
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) prompts.emplace_back(line.begin(), line.end());
  }
};

inline std::vector<std::vector<uint32_t>> random_prompts(int n, uint32_t V) {
  std::vector<std::vector<uint32_t>> out;
  std::mt19937 rng(9);
  for (int i = 0; i < n; ++i) {
    std::vector<uint32_t> p(1 + rng() % 12);
    for (auto& x : p) x = rng() % V;
    out.push_back(p);
  }
  return out;
}

// Every strategy over the prompts ps emits exactly ar's n_new tokens with heads h1, h2 (of either
// kind); merge and merge-trie reach at least min_tau_merge tokens per step, every strategy at least
// min_tau_all.
inline void check_lossless_on(Context& ctx, LlamaModel& model, EagleHead* h1, EagleHead* h2,
                              const std::vector<std::vector<uint32_t>>& ps, const char* what, double min_tau_merge,
                              double min_tau_all, uint32_t depth, uint32_t topk, uint32_t budget,
                              uint32_t n_new = 128) {
  EngineOptions ao;
  ao.strategy = Strategy::AR;
  Engine ar(ctx, model, nullptr, nullptr, ao);
  std::vector<std::vector<uint32_t>> want;
  for (auto& p : ps) want.push_back(ar.generate(p, n_new).tokens);
  for (Strategy s : {Strategy::Single1, Strategy::Single2, Strategy::Route, Strategy::Merge, Strategy::MergeTrie}) {
    EngineOptions o;
    o.strategy = s;
    o.depth = depth, o.topk = topk, o.budget = budget;
    Engine e(ctx, model, h1, h2, o);
    uint64_t toks = 0, steps = 0;
    for (size_t i = 0; i < ps.size(); ++i) {
      GenerateStats st = e.generate(ps[i], n_new);
      REQUIRE_MESSAGE(st.tokens.size() == want[i].size(), what << " " << std::string(strategy_name(s)) << " prompt " << i);
      size_t bad = 0;
      while (bad < want[i].size() && st.tokens[bad] == want[i][bad]) ++bad;
      CHECK_MESSAGE(bad == want[i].size(), what << " " << std::string(strategy_name(s)) << " prompt " << i
                                                << ": first divergence from ar at token " << bad);
      CHECK(st.host_waits_per_step <= 1.0);
      toks += st.tokens.size() - 1;
      steps += st.steps;
    }
    const double tau = double(toks) / double(steps);
    MESSAGE(std::string(what) << " " << std::string(strategy_name(s)) << ": tau " << tau);
    if (s == Strategy::Merge || s == Strategy::MergeTrie) CHECK(tau >= min_tau_merge);
    CHECK(tau >= min_tau_all);
  }
}

// check_lossless_on over n_prompts random prompts.
inline void check_lossless(Context& ctx, LlamaModel& model, EagleHead* h1, EagleHead* h2, const char* what,
                           double min_tau_merge, uint32_t depth, uint32_t topk, uint32_t budget, int n_prompts = 8,
                           uint32_t n_new = 128) {
  check_lossless_on(ctx, model, h1, h2, random_prompts(n_prompts, uint32_t(model.config().V)), what, min_tau_merge,
                    0.0, depth, topk, budget, n_new);
}

}  // namespace vkspec::test
