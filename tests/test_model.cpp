// The Vulkan verifier forward against the plain-loop CPU reference of the same GGUF: random
// small models (odd sizes, GQA and not, f32/f16/q8_0) and the real pretrained stories260K.
#include "cpu_reference.hpp"
#include "gguf_test_util.hpp"
#include "spec_fixtures.hpp"
#include "vk_fixture.hpp"
#include "vkspec/engine.hpp"
#include "vkspec/gguf_writer.hpp"
#include "vkspec/llama2c.hpp"
#include "vkspec/model.hpp"
#include "vkspec/score.hpp"

#include <bit>
#include <cstring>

using namespace vkspec;
using namespace vkspec::test;

namespace {

// Runs the Vulkan model over `tokens` as a causal chain at t (positions t..), returns logits of
// rows [logits_from, N) and hidden of all rows.
struct GpuRun {
  std::vector<float> logits, hidden;
};
GpuRun gpu_chain(LlamaModel& m, const std::vector<uint32_t>& tokens, uint32_t t, uint32_t logits_from = 0) {
  Context& ctx = m.context();
  const uint32_t N = uint32_t(tokens.size());
  std::vector<int32_t> pos(N);
  for (uint32_t i = 0; i < N; ++i) pos[i] = int32_t(t + i);
  Buffer tb(ctx, N * 4), pb(ctx, N * 4);
  tb.upload(tokens);
  pb.upload(pos);
  Sequence seq(ctx);
  seq.begin();
  LlamaModel::ForwardArgs a;
  a.N = N, a.t = t, a.tokens = &tb, a.pos = &pb, a.logits_from = logits_from;
  m.forward(seq, a);
  seq.run();
  const uint32_t V = uint32_t(m.config().V), C = uint32_t(m.config().C);
  GpuRun r;
  for (uint32_t i = logits_from; i < N; ++i) {
    auto row = m.logits().buf->read<float>(V, size_t(i) * m.logits().stride * 4);
    r.logits.insert(r.logits.end(), row.begin(), row.end());
  }
  for (uint32_t i = 0; i < N; ++i) {
    auto row = m.hidden().buf->read<float>(C, size_t(i) * m.hidden().stride * 4);
    r.hidden.insert(r.hidden.end(), row.begin(), row.end());
  }
  return r;
}

// `tol` for an f32 KV cache, where only f32 summation order differs. With the f16 cache both
// sides round K and V through f16, but a value within an f32 rounding of a half-way point may
// round to neighbouring halves (a relative 2^-11 step of that one element), so the bound is looser.
// combo < 0: every KV type with every weight path; otherwise the one pair combo % 4 names.
void compare_model(Context& ctx, const std::string& path, const std::string& what, float tol, int combo = -1) {
  GgufFile g = GgufFile::open(path);
  for (const KvType kv : {KvType::F32, KvType::F16}) {
    if (combo >= 0 && (kv == KvType::F16) != (combo % 4 >= 2)) continue;
    CpuReference ref(g, 64, kv == KvType::F16);
    const float t_kv = kv == KvType::F16 ? std::max(tol, 3e-3f) : tol;
    const std::string w = what + " (" + kv_type_name(kv) + " KV)";
    ModelOptions mo;
    mo.context = 64;
    mo.max_rows = 16;
    mo.kv_type = kv;
    for (auto wp : {WeightPath::Storage, WeightPath::Texel}) {
      if (combo >= 0 && (wp == WeightPath::Texel) != (combo % 2 == 1)) continue;
      mo.weight_path = wp;
      LlamaModel m(ctx, g, mo);
      const uint32_t V = uint32_t(m.config().V);
      std::vector<uint32_t> prompt;
      for (int i = 0; i < 9; ++i) prompt.push_back(uint32_t((i * 37 + 5) % V));
      ref.reset();
      auto r0 = ref.forward(prompt);
      auto g0 = gpu_chain(m, prompt, 0);
      check_close(g0.logits, r0.logits, t_kv, t_kv, w + " prefill logits");
      check_close(g0.hidden, r0.hidden, t_kv, t_kv, w + " prefill hidden");
      uint32_t t = uint32_t(prompt.size());
      for (int step = 0; step < 3; ++step) {
        std::vector<uint32_t> tok = {uint32_t((step * 11 + 3) % V)};
        auto r1 = ref.forward(tok);
        auto g1 = gpu_chain(m, tok, t);
        check_close(g1.logits, r1.logits, t_kv, t_kv, w + " step " + std::to_string(step) + " logits");
        ++t;
      }
    }
  }
}

}  // namespace

TEST_CASE_FIXTURE(VkTest, "verifier forward equals the CPU reference on random small models") {
  struct Shape {
    int C, H, Hkv, D, F, V, L;
    GgmlType type;
    bool tied, bias;
    const char* arch;
    bool rope_freqs = false;
    float freq_scale = 1.0f;
    uint32_t window = 0;
    bool yarn = false;
    uint32_t orig_ctx = 0;
    float attn_factor = 1.0f;
    bool longrope = false;
  };
  const Shape shapes[] = {
      {36, 3, 1, 12, 52, 101, 2, GgmlType::F32, true, false, "llama"},   // odd sizes, GQA 3:1
      {32, 4, 4, 8, 88, 67, 2, GgmlType::F16, false, false, "mistral"},  // no GQA, separate output
      {64, 8, 2, 8, 96, 160, 2, GgmlType::Q8_0, true, true, "qwen2"},    // q8_0, QKV bias, NEOX RoPE
      {64, 4, 2, 16, 128, 96, 3, GgmlType::Q4_0, false, false, "llama"}, // q4_0 read in its file layout
      // Llama 3 frequency factors with linear scaling on top; Qwen3's per-head q/k norm with
      // H*D != C; Phi-3's fused qkv and gate|up.
      {48, 4, 2, 16, 80, 90, 2, GgmlType::F16, false, false, "llama", true, 0.25f},
      {40, 6, 2, 12, 72, 83, 2, GgmlType::F32, true, false, "qwen3"},
      {48, 4, 4, 12, 64, 77, 2, GgmlType::F16, false, false, "phi3"},
      // Sliding windows shorter than the 12 positions run: Phi-3's, and one of 3 on a GQA llama.
      {48, 4, 4, 12, 64, 77, 2, GgmlType::F16, false, false, "phi3", false, 1.0f, 5},
      {36, 3, 1, 12, 52, 101, 2, GgmlType::Q8_0, true, false, "llama", false, 1.0f, 3},
      // YaRN at factor 4 from an original context of 24: pairs 0..2 of 8 on the ramp, the rest
      // scaled (and with Llama 3 factors under it); a NEOX qwen2 whose file sets the attention
      // factor under linear scaling.
      {48, 4, 2, 16, 80, 90, 2, GgmlType::F16, false, false, "qwen3", false, 0.25f, 0, true, 24},
      {48, 4, 2, 16, 80, 90, 2, GgmlType::Q8_0, true, false, "llama", true, 0.25f, 0, true, 24, 1.1f},
      {64, 8, 2, 8, 96, 160, 2, GgmlType::F32, true, true, "qwen2", false, 0.5f, 0, false, 0, 1.25f},
      // Phi-3 LongRoPE with its attention factor: the 64-token context is past an original 24
      // (long factors), then within an original 96 (short ones).
      {48, 4, 4, 12, 64, 77, 2, GgmlType::F16, false, false, "phi3", false, 1.0f, 0, false, 24, 1.19f, true},
      {48, 4, 4, 12, 64, 77, 2, GgmlType::F16, false, false, "phi3", false, 1.0f, 0, false, 96, 1.19f, true},
  };
  int i = 0;
  for (const auto& s : shapes) {
    LlamaConfig cfg;
    cfg.C = s.C, cfg.H = s.H, cfg.Hkv = s.Hkv, cfg.D = s.D, cfg.F = s.F, cfg.V = s.V, cfg.L = s.L, cfg.ctx = 128;
    cfg.tied_output = s.tied;
    cfg.qkv_bias = s.bias;
    cfg.arch = s.arch;
    cfg.rope_freqs = s.rope_freqs;
    cfg.rope_freq_scale = s.freq_scale;
    cfg.sliding_window = s.window;
    cfg.rope_yarn = s.yarn, cfg.rope_orig_ctx = s.orig_ctx, cfg.rope_attn_factor = s.attn_factor;
    cfg.rope_longrope = s.longrope;
    TempFile f("model" + std::to_string(i++) + ".gguf");
    write_random_llama(f.path, cfg, 1234 + i, s.type);
    {
      const LlamaConfig r = read_llama_config(GgufFile::open(f.path));
      REQUIRE(r.rope_freqs == s.rope_freqs);
      REQUIRE(r.rope_freq_scale == s.freq_scale);
      REQUIRE(r.sliding_window == s.window);
      REQUIRE(r.rope_yarn == s.yarn);
      REQUIRE(r.rope_orig_ctx == s.orig_ctx);
      REQUIRE(r.rope_attn_factor == s.attn_factor);
      REQUIRE(r.rope_longrope == s.longrope);
    }
    // Same weights on both sides (every type is dequantized in the shader exactly as on the
    // CPU), so only f32 summation order differs. The first shape runs under both KV cache types
    // and both weight paths; each other one under one of the four pairs in turn (every pair meets
    // several architectures): what an architecture switches on does not depend on how weights
    // are read or the cache stored, and all four for every shape took 602 s of a cold suite
    // (93 pipelines, 2-vCPU VM, 2026-12-04). The kernels behind both paths and both cache
    // types are each compared case by case in test_kernels.cpp and test_attention.cpp.
    const int index = i - 1;
    compare_model(ctx, f.path, std::string("random ") + s.arch + " " + ggml_type_name(s.type), 2e-4f,
                  index == 0 ? -1 : index);
  }
}

TEST_CASE_FIXTURE(VkTest, "verifier on stories260K: logits match and 200 greedy tokens equal the CPU reference") {
  const std::string bin = shared_file("models/stories260K.bin");
  if (bin.empty()) return;
  TempFile gguf("stories_vk.gguf");
  convert_llama2c_file(bin, gguf.path);
  compare_model(ctx, gguf.path, "stories260K", 2e-4f);

  GgufFile g = GgufFile::open(gguf.path);
  CpuReference ref(g, 256);
  const std::vector<uint32_t> prompt = {1, 403, 411, 374};
  const auto want = ref.greedy(prompt, 200);

  ModelOptions mo;
  mo.context = 256;
  mo.max_rows = 8;
  LlamaModel m(ctx, g, mo);
  std::vector<uint32_t> got;
  auto r = gpu_chain(m, prompt, 0, uint32_t(prompt.size() - 1));
  uint32_t t = uint32_t(prompt.size());
  got.push_back(vkspec::test::argmax(r.logits));
  while (got.size() < want.size()) {
    r = gpu_chain(m, {got.back()}, t++);
    got.push_back(vkspec::test::argmax(r.logits));
  }
  CHECK(got == want);
}

TEST_CASE_FIXTURE(VkTest, "context: the default is the model's whole context; a prompt filling it prefills in chunks") {
  // A context above the old 2048 default cap; the prompt is ten times the rows of a pass.
  TempFile gguf("long_ctx.gguf");
  const int ctx_len = 2600;
  write_verifier(gguf.path, 5, 0.5f, 96, 32, 2, false, ctx_len);
  GgufFile g = GgufFile::open(gguf.path);
  ModelOptions mo;
  mo.max_rows = 256;
  LlamaModel m(ctx, g, mo);
  CHECK(m.capacity() == uint32_t(ctx_len));
  CHECK(m.kv_type() == KvType::F16);
  CHECK(m.kv_bytes() >= 2ull * 2 * ctx_len * m.kv_row_floats() * 2);
  std::mt19937 rng(3);
  std::vector<uint32_t> prompt(ctx_len - 12);
  for (auto& t : prompt) t = rng() % 96;
  Engine e(ctx, m, nullptr, nullptr, EngineOptions{});
  // ar writes no cache row past the tokens it emits, so 12 new tokens fill the context (the last
  // one's row is never written) ...
  const GenerateStats st = e.generate(prompt, 12);
  REQUIRE(st.tokens.size() == 12);
  // ... and one more is refused, naming the context.
  CHECK_THROWS_WITH_AS(e.generate(prompt, 13), doctest::Contains("13 new tokens does not fit the context of 2600"), Error);
  // The same continuation from the CPU reference (K/V rounded through f16 like the cache), up to
  // the context's last row.
  CpuReference ref(g, ctx_len);
  CHECK(ref.greedy(prompt, 12) == st.tokens);
  // Steps chained past the last token (a done step's dispatches are empty) change nothing.
  EngineOptions chained;
  chained.steps_per_submit = 5;
  Engine e5(ctx, m, nullptr, nullptr, chained);
  CHECK(e5.generate(prompt, 12).tokens == st.tokens);
}

namespace {
// Two layers, odd widths, two query heads per K/V head.
LlamaConfig small_gqa_config(int ctx_len) {
  LlamaConfig cfg;
  cfg.C = 52, cfg.H = 4, cfg.Hkv = 2, cfg.D = 12, cfg.F = 72, cfg.V = 83, cfg.L = 2, cfg.ctx = ctx_len;
  return cfg;
}
}  // namespace

TEST_CASE_FIXTURE(VkTest, "a tree pass that defers the final norm: commit's gather yields hidden()'s rows bit for bit") {
  // The step's verify leaves the hidden rows un-normalized where the LM head folds the norm, and
  // commit_rows normalizes the accepted ones as it gathers them (Verifier::feature_gather).
  const LlamaConfig cfg = small_gqa_config(64);
  TempFile f("deferred_norm.gguf");
  write_random_llama(f.path, cfg, 77, GgmlType::F16);
  GgufFile g = GgufFile::open(f.path);
  for (auto wp : {WeightPath::Storage, WeightPath::Texel}) {
    ModelOptions mo;
    mo.context = 64, mo.max_rows = 16, mo.weight_path = wp;
    LlamaModel m(ctx, g, mo);
    const uint32_t N = 7, C = uint32_t(cfg.C);
    std::vector<uint32_t> tokens;
    for (uint32_t i = 0; i < N; ++i) tokens.push_back((i * 29 + 3) % uint32_t(cfg.V));
    Buffer tb(ctx, N * 4);
    tb.upload(tokens);
    // The accepted path: rows 0, 2, 3, 6 of the pass.
    const std::vector<uint32_t> path{0, 2, 3, 6};
    DeviceTree tree(ctx, N, 8);
    std::vector<uint32_t> info(16, 0);
    info[kInfoAccepted] = uint32_t(path.size()) - 1;
    tree.info.upload(info);
    Buffer acc(ctx, 64 * 4), dst(ctx, size_t(N) * pad4(C) * 4);
    acc.upload(path);
    std::vector<float> want, got;
    for (bool defer : {false, true}) {
      Sequence seq(ctx);
      seq.begin();
      LlamaModel::ForwardArgs a;
      a.N = N, a.t = 0, a.tokens = &tb, a.defer_hidden_norm = defer;
      m.forward(seq, a);
      const Mat d{&dst, 0, pad4(C)};
      const RowGather rg = defer ? m.feature_gather(ctx, d) : RowGather{m.hidden(), d, C};
      CHECK((rg.norm != nullptr) == (defer && m.hidden_deferred(ctx)));
      commit_rows(seq, tree, acc, 8, m.kv_buffers()[0], m.kv_row_words(), 1, 0, &rg);
      seq.run();
      (defer ? got : want) = dst.read<float>(path.size() * pad4(C));
    }
    INFO("weight path " << int(wp));
    CHECK(got == want);
  }
}

TEST_CASE("prefill passes: in order, covering the prompt, sizes from R and the powers of two below it") {
  for (uint32_t R : {1u, 3u, 16u, 24u, 64u})
    for (uint32_t P = 0; P <= 300; ++P) {
      const std::vector<RowPass> passes = prefill_passes(P, R);
      CAPTURE(R);
      CAPTURE(P);
      if (P == 0) {
        CHECK(passes.empty());
        continue;
      }
      REQUIRE(!passes.empty());
      uint32_t done = 0;
      for (const RowPass& s : passes) {
        CHECK(s.rows >= 1);
        CHECK(s.rows <= R);
        CHECK((s.rows == R || std::has_single_bit(s.rows)));
        CHECK(s.rows <= passes.front().rows);
        CHECK(s.first <= done);             // no gap
        CHECK(s.first + s.rows > done);     // every pass adds rows
        done = s.first + s.rows;
      }
      CHECK(passes.front().first == 0);
      CHECK(done == P);  // the last pass ends at P: its last row is P-1
      // At most one pass more than passes of the first size need.
      const uint32_t h = passes.front().rows;
      CHECK(passes.size() <= (P + h - 1) / h + 1);
      // The recomputed rows are fewer than half the prompt's, and than half a pass.
      uint64_t rows = 0;
      for (const RowPass& s : passes) rows += s.rows;
      CHECK(2 * (rows - P) < P);
      CHECK(2 * (rows - P) < h);
    }
  CHECK(prefill_passes(45, 16) == std::vector<RowPass>{{0, 16}, {16, 16}, {29, 16}});
  CHECK(prefill_passes(11, 16) == std::vector<RowPass>{{0, 8}, {7, 4}});
  CHECK(prefill_passes(100, 256) == std::vector<RowPass>{{0, 64}, {36, 64}});
  CHECK(prefill_passes(129, 256) == std::vector<RowPass>{{0, 128}, {128, 1}});
  CHECK(prefill_passes(50, 24) == std::vector<RowPass>{{0, 24}, {24, 24}, {48, 2}});
  CHECK(prefill_passes(8, 16) == std::vector<RowPass>{{0, 8}});
  CHECK(prefill_passes(33, 16) == std::vector<RowPass>{{0, 16}, {16, 16}, {32, 1}});
}

TEST_CASE_FIXTURE(VkTest, "logits of a chain in overlapping prefill passes equal those of one row a pass, bit for bit") {
  const LlamaConfig cfg = small_gqa_config(96);
  TempFile f("overlap_passes.gguf");
  write_random_llama(f.path, cfg, 91, GgmlType::F16);
  GgufFile g = GgufFile::open(f.path);
  std::vector<uint32_t> tokens(45);
  for (uint32_t i = 0; i < tokens.size(); ++i) tokens[i] = (i * 37 + 5) % uint32_t(cfg.V);
  auto chain = [&](uint32_t rows, size_t T) {
    ModelOptions mo;
    mo.context = 96, mo.max_rows = rows;
    LlamaModel m(ctx, g, mo);
    ChainRunner run(m);
    return run.logits(std::span(tokens.data(), T));
  };
  // 45 rows at 16 a pass: 16, 16 and 16 from row 29; 11 rows: 8 and 4 from row 7.
  for (size_t T : {size_t(45), size_t(11)}) {
    CAPTURE(T);
    const std::vector<float> one = chain(1, T), passes = chain(16, T);
    REQUIRE(one.size() == T * size_t(cfg.V));
    REQUIRE(passes.size() == one.size());
    CHECK(std::memcmp(one.data(), passes.data(), one.size() * 4) == 0);
  }
}
