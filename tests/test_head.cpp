// EAGLE head forward vs a plain CPU reference that applies rotate_half to the Hugging Face
// layout weights (DESIGN.md §5), and the refusals of heads that do not fit the verifier.
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>

#include <nlohmann/json.hpp>

#include "act_reference.hpp"
#include "spec_fixtures.hpp"
#include "vk_fixture.hpp"
#include "vkspec/dtype.hpp"
#include "vkspec/eagle_head.hpp"
#include "vkspec/safetensors.hpp"

using namespace vkspec;
using namespace vkspec::test;

namespace {

// h(N, C) and logits(N, V) of the head over a causal chain at positions 0..N-1.
// inv_freq: pair i's frequency (D/2 of them; empty: 10000^(-2i/D)).
void head_ref(const std::string& dir, const GgufFile& g, const LlamaConfig& vc, const std::vector<uint32_t>& toks,
              const std::vector<float>& feats, std::vector<float>& h_out, std::vector<float>& logits,
              bool kv_f16 = false, const std::vector<double>& inv_freq = {}) {
  auto st = SafetensorsFile::open(dir + "/model.safetensors");
  auto W = [&](const std::string& n) { return st.tensors().at(n).to_f32(); };
  // The gate's activation from config.json, as Hugging Face's ACT2FN defines each name.
  const std::string act_name =
      nlohmann::json::parse(std::ifstream(dir + "/config.json")).value("hidden_act", std::string("silu"));
  const GluAct act = act_name == "gelu" ? GluAct::GeluErf
                     : act_name == "gelu_pytorch_tanh" || act_name == "gelu_new" ? GluAct::GeluTanh
                                                                                 : GluAct::Silu;
  const int C = vc.C, H = vc.H, Hkv = vc.Hkv, D = vc.D, N = int(toks.size());
  const int F = int(st.tensors().at("layers.0.mlp.gate_proj.weight").shape[0]);
  auto emb = dequantize_tensor(g.require_tensor("token_embd.weight"));
  auto fc = W("fc.weight"), fcb = st.tensors().count("fc.bias") ? W("fc.bias") : std::vector<float>(C, 0.0f), wq = W("layers.0.self_attn.q_proj.weight"),
       wk = W("layers.0.self_attn.k_proj.weight"), wv = W("layers.0.self_attn.v_proj.weight"),
       wo = W("layers.0.self_attn.o_proj.weight"), wg = W("layers.0.mlp.gate_proj.weight"),
       wu = W("layers.0.mlp.up_proj.weight"), wd = W("layers.0.mlp.down_proj.weight"),
       pn = W("layers.0.post_attention_layernorm.weight");
  auto mv = [](const std::vector<float>& w, const std::vector<double>& x, int rows, int cols) {
    std::vector<double> y(rows);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) y[r] += double(w[size_t(r) * cols + c]) * x[c];
    return y;
  };
  // A projection's bias where the file has one (attention_bias, mlp_bias), added to its output.
  auto add_bias = [&](std::vector<double> y, const std::string& proj) {
    const std::string n = "layers.0." + proj + ".bias";
    if (st.tensors().count(n)) {
      auto b = W(n);
      for (size_t i = 0; i < y.size(); ++i) y[i] += b[i];
    }
    return y;
  };
  auto rot = [&](std::vector<double>& v, int heads, int pos) {  // HF rotate_half: pairs (i, i + D/2)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < D / 2; ++i) {
        double ang = pos * (inv_freq.empty() ? std::pow(10000.0, -2.0 * i / D) : inv_freq[size_t(i)]);
        double c = std::cos(ang), s = std::sin(ang);
        double a = v[h * D + i], b = v[h * D + i + D / 2];
        v[h * D + i] = a * c - b * s;
        v[h * D + i + D / 2] = a * s + b * c;
      }
  };
  std::vector<std::vector<double>> K, Vv;
  h_out.clear();
  logits.clear();
  for (int t = 0; t < N; ++t) {
    std::vector<double> in(2 * C);
    for (int c = 0; c < C; ++c) in[c] = emb[size_t(toks[t]) * C + c], in[C + c] = feats[size_t(t) * C + c];
    auto x = mv(fc, in, C, 2 * C);
    for (int c = 0; c < C; ++c) x[c] += fcb[c];
    auto q = add_bias(mv(wq, x, H * D, C), "self_attn.q_proj"), k = add_bias(mv(wk, x, Hkv * D, C), "self_attn.k_proj"),
         v = add_bias(mv(wv, x, Hkv * D, C), "self_attn.v_proj");
    rot(q, H, t);
    rot(k, Hkv, t);
    if (kv_f16)  // the cache stores K and V rounded to f16
      for (int d = 0; d < Hkv * D; ++d) k[d] = f16_to_f32(f32_to_f16(float(k[d]))), v[d] = f16_to_f32(f32_to_f16(float(v[d])));
    K.push_back(k);
    Vv.push_back(v);
    std::vector<double> att(H * D);
    for (int h = 0; h < H; ++h) {
      const int hk = h / (H / Hkv);
      std::vector<double> s(t + 1);
      double m = -1e300, l = 0;
      for (int j = 0; j <= t; ++j) {
        for (int d = 0; d < D; ++d) s[j] += q[h * D + d] * K[j][hk * D + d];
        s[j] /= std::sqrt(double(D));
        m = std::max(m, s[j]);
      }
      for (auto& e : s) l += (e = std::exp(e - m));
      for (int d = 0; d < D; ++d)
        for (int j = 0; j <= t; ++j) att[h * D + d] += s[j] / l * Vv[j][hk * D + d];
    }
    auto o = add_bias(mv(wo, att, C, H * D), "self_attn.o_proj");
    for (int c = 0; c < C; ++c) x[c] += o[c];
    double ss = 0;
    for (double e : x) ss += e * e;
    std::vector<double> xn(C);
    for (int c = 0; c < C; ++c) xn[c] = x[c] / std::sqrt(ss / C + 1e-5) * pn[c];
    auto gt = add_bias(mv(wg, xn, F, C), "mlp.gate_proj"), up = add_bias(mv(wu, xn, F, C), "mlp.up_proj");
    for (int f = 0; f < F; ++f) gt[f] = glu_act_ref(act, gt[f]) * up[f];
    auto dn = add_bias(mv(wd, gt, C, F), "mlp.down_proj");
    for (int c = 0; c < C; ++c) x[c] += dn[c];
    for (int c = 0; c < C; ++c) h_out.push_back(float(x[c]));
    auto lg = mv(emb, x, vc.V, C);  // tied lm_head
    for (double e : lg) logits.push_back(float(e));
  }
}

// The head over a causal chain of N tokens at positions 0..N-1 with random features: the inputs
// (toks, feats) and what it made (hidden rows h, logits rows l), read back row by row.
struct HeadRun {
  std::vector<uint32_t> toks;
  std::vector<float> feats, h, l;
};
HeadRun run_head(Context& ctx, EagleHead& head, const LlamaConfig& vc, uint32_t N) {
  HeadRun run;
  const uint32_t C = uint32_t(vc.C);
  for (uint32_t i = 0; i < N; ++i) run.toks.push_back((i * 29 + 3) % uint32_t(vc.V));
  run.feats = random_floats(size_t(N) * C, 5);
  std::vector<int32_t> pos(N);
  for (uint32_t i = 0; i < N; ++i) pos[i] = int32_t(i);
  Buffer tb(ctx, N * 4), fb(ctx, run.feats.size() * 4), pb(ctx, N * 4);
  tb.upload(run.toks);
  fb.upload(run.feats);
  pb.upload(pos);
  Sequence seq(ctx);
  seq.begin();
  EagleHead::ForwardArgs a;
  a.N = N, a.t = 0, a.kv_slot = 0, a.tokens = &tb, a.features = Mat{&fb, 0, C}, a.pos = &pb;
  head.forward(seq, a);
  seq.run();
  for (uint32_t r = 0; r < N; ++r) {
    auto h = head.hidden().buf->read<float>(C, size_t(r) * head.hidden().stride * 4);
    auto l = head.logits().buf->read<float>(vc.V, size_t(r) * head.logits().stride * 4);
    run.h.insert(run.h.end(), h.begin(), h.end());
    run.l.insert(run.l.end(), l.begin(), l.end());
  }
  return run;
}

// A random verifier (f32 cache, 64 positions, 16 rows) for the heads under test.
struct HeadRig {
  TempFile vf;
  LlamaConfig vc;
  GgufFile g;
  LlamaModel model;
  HeadRig(Context& ctx, const std::string& name)
      : vf(name + ".gguf"), vc(write_verifier(vf.path, 7, 1.0f)), g(GgufFile::open(vf.path)), model(ctx, g, options()) {}
  static ModelOptions options() {
    ModelOptions mo;
    mo.context = 64;
    mo.max_rows = 16;
    mo.kv_type = KvType::F32;
    return mo;
  }
  // The head in `dir` over 9 chained rows, checked against head_ref; its run.
  HeadRun check(Context& ctx, const std::string& dir) {
    EagleHead head(ctx, dir, model, 64, 16);
    const HeadRun run = run_head(ctx, head, vc, 9);
    std::vector<float> h_ref, l_ref;
    head_ref(dir, g, vc, run.toks, run.feats, h_ref, l_ref);
    check_close(run.h, h_ref, 1e-4f, 1e-4f, "head hidden");
    check_close(run.l, l_ref, 1e-3f, 1e-4f, "head logits");
    return run;
  }
};

// model.safetensors rewritten with every tensor in `dtype` ("BF16", "F16" or "F32"), after `edit`
// has changed the values (read as f32); a tensor for which it returns false is left out.
using TensorMap = std::map<std::string, std::pair<std::vector<uint64_t>, std::vector<float>>>;
void rewrite_head_dtype(const std::string& dir, const std::string& dtype,
                        const std::function<bool(const std::string&, std::vector<float>&)>& edit, const TensorMap& add = {}) {
  TensorMap t = add;
  {
    auto st = SafetensorsFile::open(dir + "/model.safetensors");
    for (const auto& [name, x] : st.tensors()) t[name] = {x.shape, x.to_f32()};
  }
  nlohmann::json h = nlohmann::json::object();
  std::vector<uint8_t> data;
  for (auto& [name, sv] : t) {
    if (!edit(name, sv.second)) continue;
    const uint64_t off = data.size();
    for (float x : sv.second) {
      const uint32_t b = dtype == "BF16"  ? f32_to_bf16(x)
                         : dtype == "F16" ? f32_to_f16(x)
                                          : std::bit_cast<uint32_t>(x);
      for (int i = 0; i < (dtype == "F32" ? 4 : 2); ++i) data.push_back(uint8_t(b >> (8 * i)));
    }
    h[name] = {{"dtype", dtype}, {"shape", sv.first}, {"data_offsets", {off, uint64_t(data.size())}}};
  }
  const std::string hs = h.dump();
  std::ofstream f(dir + "/model.safetensors", std::ios::binary | std::ios::trunc);
  const uint64_t n = hs.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f.write(hs.data(), std::streamsize(n));
  f.write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size()));
}

}  // namespace

TEST_CASE_FIXTURE(VkTest, "EAGLE head forward equals a rotate_half reference on Hugging Face layout weights") {
  TempFile vf("head_verifier.gguf");
  LlamaConfig vc = write_verifier(vf.path, 7, 1.0f);
  GgufFile g = GgufFile::open(vf.path);
  TempDir hd("head_rand");
  write_head(hd.path, vc, vf.path, 11, 0);
  // The head's cache takes the verifier's type: f32, and f16 against a reference that rounds
  // K and V through f16 as they enter the cache.
  for (const KvType kv : {KvType::F32, KvType::F16}) {
    CAPTURE(kv_type_name(kv));
    ModelOptions mo;
    mo.context = 64;
    mo.max_rows = 16;
    mo.kv_type = kv;
    LlamaModel model(ctx, g, mo);
    EagleHead head(ctx, hd.path, model, 64, 16);
    CHECK(head.kv_type() == kv);

    const HeadRun run = run_head(ctx, head, vc, 9);
    std::vector<float> h_ref, l_ref;
    head_ref(hd.path, g, vc, run.toks, run.feats, h_ref, l_ref, kv == KvType::F16);
    check_close(run.h, h_ref, 1e-4f, 1e-4f, "head hidden");
    check_close(run.l, l_ref, 1e-3f, 1e-4f, "head logits");
  }
}

// A bf16 or f32 head is stored in f16 only where every value is an f16: a value past f16's
// 65504 became Inf there (every logit NaN), and one below its range lost its bits.
TEST_CASE_FIXTURE(VkTest, "EAGLE head weights in bf16 or f32 beyond f16's range are computed as the file gives them") {
  HeadRig rig(ctx, "head_wide");
  for (const std::string dtype : {"BF16", "F32"}) {
    CAPTURE(dtype);
    TempDir hd("head_wide");
    write_head(hd.path, rig.vc, rig.vf.path, 11, 0);
    rewrite_head_dtype(hd.path, dtype, [](const std::string& name, std::vector<float>& x) {
      // One residual channel far past f16 (the layer's norms keep the rest of the sums apart from
      // it, so the reference's tolerance still holds), and a weight below f16's smallest.
      if (name == "fc.weight") x[5] = 1.0e5f;
      if (name == "layers.0.self_attn.v_proj.weight") x[9] = -3.0e-9f;
      return true;
    });
    const HeadRun run = rig.check(ctx, hd.path);
    for (float v : run.l) REQUIRE(std::isfinite(v));
    // The estimate made before upload (the fit check's) holds what the upload made: fc and
    // q|k|v went to f32, twice the file's bytes for bf16 (the rest, f16 values, to f16).
    EagleHead head(ctx, hd.path, rig.model, 64, 16);
    const uint64_t estimate = estimate_head_bytes(hd.path, 64, 16, KvType::F32).weights;
    CAPTURE(estimate);
    CHECK(head.weight_bytes() <= estimate);
  }
  // Values that are all f16s (a bf16 copy of an f16 head's small weights) still give the reference.
  TempDir hd("head_narrow");
  write_head(hd.path, rig.vc, rig.vf.path, 11, 0);
  rewrite_head_dtype(hd.path, "BF16", [](const std::string&, std::vector<float>&) { return true; });
  rig.check(ctx, hd.path);
}

// EAGLE's config key "bias" says whether fc has one (EAGLE's loader: default true).
TEST_CASE_FIXTURE(VkTest, "EAGLE head config bias false computes fc without a bias, and a file that disagrees is refused") {
  HeadRig rig(ctx, "head_fc_bias");
  auto set_bias = [](const std::string& dir, bool on) {
    nlohmann::json cfg = nlohmann::json::parse(std::ifstream(dir + "/config.json"));
    cfg["bias"] = on;
    std::ofstream(dir + "/config.json", std::ios::trunc) << cfg.dump();
  };
  auto drop_fc_bias = [](const std::string& name, std::vector<float>&) { return name != "fc.bias"; };
  auto load_error = [&](const std::string& dir) {
    try {
      EagleHead head(ctx, dir, rig.model, 64, 16);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  TempDir none("head_fc_nobias");
  write_head(none.path, rig.vc, rig.vf.path, 11, 0);
  rewrite_head_dtype(none.path, "F16", drop_fc_bias);
  CHECK(load_error(none.path).find("fc.bias") != std::string::npos);  // default true: the bias is missing
  set_bias(none.path, false);
  rig.check(ctx, none.path);  // against the reference without a bias
  TempDir both("head_fc_both");
  write_head(both.path, rig.vc, rig.vf.path, 11, 0);
  set_bias(both.path, false);
  const std::string msg = load_error(both.path);
  CAPTURE(msg);
  CHECK(msg.find("tensor fc.bias is not part of an EAGLE-1/2 head") != std::string::npos);
  CHECK(msg.find("config.json sets bias to false") != std::string::npos);
  set_bias(both.path, true);
  rig.check(ctx, both.path);
}

TEST_CASE_FIXTURE(VkTest, "EAGLE head with attention_bias and mlp_bias equals the reference that adds each projection's bias") {
  HeadRig rig(ctx, "head_bias_verifier");
  const LlamaConfig& vc = rig.vc;
  LlamaModel& model = rig.model;
  const std::string& vpath = rig.vf.path;
  for (const auto [attn, mlp] : {std::pair{true, false}, std::pair{false, true}, std::pair{true, true}}) {
    CAPTURE(attn);
    CAPTURE(mlp);
    TempDir hd("head_bias");
    write_head(hd.path, vc, vpath, 11, 0, 0.0f, false, {}, attn, mlp);
    const HeadRun run = rig.check(ctx, hd.path);
    // Without its biases the same head computes something else: the biases are not ignored.
    TempDir nb("head_bias_off");
    write_head(nb.path, vc, vpath, 11, 0);
    const HeadRun plain = run_head(ctx, *std::make_unique<EagleHead>(ctx, nb.path, model, 64, 16), vc, 9);
    CHECK(plain.h != run.h);
  }
  // A config that asks for biases the file lacks is refused naming the tensor.
  TempDir hd("head_bias_missing");
  write_head(hd.path, vc, vpath, 11, 0);
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(hd.path + "/config.json"));
  cfg["mlp_bias"] = true;
  std::ofstream(hd.path + "/config.json") << cfg.dump();
  CHECK_THROWS_WITH_AS(EagleHead(ctx, hd.path, model, 64, 16), doctest::Contains("layers.0.mlp.gate_proj.bias"), Error);
}

// A draft head's prefill wants no row's output and its ingest only the root row's (the draft goes
// on from there): the other rows write their K/V and nothing else (DecoderLayerPass::out_row,
// kv_only). Against one forward over the whole chain, every row's logits: the root's h and
// logits bit for bit, for each root row of the ingest, its index and t read from a step-state
// buffer as a step reads them. With attention_bias the o matmul runs on its own, without it the
// device may fold W_o into attention: both paths.
TEST_CASE_FIXTURE(VkTest, "a head forward wanted for one row (ingest) or none (prefill) equals the whole chain there, bit for bit") {
  HeadRig rig(ctx, "head_one_row_verifier");
  const LlamaConfig& vc = rig.vc;
  const uint32_t C = uint32_t(vc.C), V = uint32_t(vc.V), N = 9, P = 5;  // P rows of prefill, N - P of ingest
  for (const bool attn_bias : {false, true}) {
    CAPTURE(attn_bias);
    TempDir hd("head_one_row");
    write_head(hd.path, vc, rig.vf.path, 13, 0, 0.0f, false, {}, attn_bias, attn_bias);
    EagleHead whole(ctx, hd.path, rig.model, 64, 16);
    const HeadRun run = run_head(ctx, whole, vc, N);
    Buffer tb(ctx, N * 4), fb(ctx, run.feats.size() * 4), state(ctx, 16);
    tb.upload(run.toks);
    fb.upload(run.feats);
    for (uint32_t r = 0; r < N - P; ++r) {
      CAPTURE(r);
      EagleHead head(ctx, hd.path, rig.model, 64, 16);
      // The step state: word 1 the root row, word 2 the length after it (t = P + r + 1).
      state.upload(std::vector<uint32_t>{0, r, P + r + 1, 0});
      Sequence seq(ctx);
      seq.begin();
      EagleHead::ForwardArgs a;
      a.N = P, a.t = 0, a.kv_slot = 0, a.tokens = &tb, a.features = Mat{&fb, 0, C}, a.pos_first = 0;
      a.logits_from = P;  // the prefill: K/V only
      head.forward(seq, a);
      EagleHead::ForwardArgs b;
      b.N = N - P, b.t = P, b.kv_slot = P, b.tokens = &tb, b.tok_offset = P, b.features = Mat{&fb, P * C, C};
      b.pos_first = P;
      b.root = true, b.root_row = Dyn(state, 1), b.root_t = Dyn(state, 2, 0xffffffffu);
      head.forward(seq, b);
      seq.run();
      const auto h = head.hidden().buf->read<float>(C, size_t(head.root_slot()) * head.hidden().stride * 4);
      const auto l = head.logits().buf->read<float>(V, size_t(head.root_slot()) * head.logits().stride * 4);
      CHECK(std::memcmp(h.data(), &run.h[size_t(P + r) * C], C * 4) == 0);
      CHECK(std::memcmp(l.data(), &run.l[size_t(P + r) * V], V * 4) == 0);
    }
  }
}

// hidden_act: GELU heads (exact and tanh), through the folded GLU and, with mlp_bias, through the
// gate|up matmul then glu_mul.
TEST_CASE_FIXTURE(VkTest, "EAGLE head hidden_act gelu / gelu_pytorch_tanh / gelu_new equals the reference") {
  HeadRig rig(ctx, "head_act_verifier");
  TempDir sd("head_act_silu");
  write_head(sd.path, rig.vc, rig.vf.path, 11, 0);
  const HeadRun silu = run_head(ctx, *std::make_unique<EagleHead>(ctx, sd.path, rig.model, 64, 16), rig.vc, 9);
  for (const char* act : {"gelu", "gelu_pytorch_tanh", "gelu_new"})
    for (bool mlp_bias : {false, true}) {
      CAPTURE(act);
      CAPTURE(mlp_bias);
      TempDir hd("head_act");
      write_head(hd.path, rig.vc, rig.vf.path, 11, 0, 0.0f, false, {}, false, mlp_bias);
      nlohmann::json cfg = nlohmann::json::parse(std::ifstream(hd.path + "/config.json"));
      cfg["hidden_act"] = act;
      std::ofstream(hd.path + "/config.json") << cfg.dump();
      const HeadRun run = rig.check(ctx, hd.path);
      if (!mlp_bias) CHECK(run.h != silu.h);  // the same weights under SiLU compute something else
    }
}

// rope_scaling in a head's config.json, against Hugging Face's frequencies written the way
// transformers computes them (_compute_llama3_parameters: masks over wavelengths), not as the
// runtime's divisors. D = 8, theta 10^4: wavelengths 2π·10^(i) for pair i; with an original
// context of 400, low 1 and high 8, pair 0 keeps its frequency, pair 1 (62.8, between 50 and 400)
// is smoothed, pairs 2 and 3 are divided by the factor.
TEST_CASE_FIXTURE(VkTest, "EAGLE head rope_scaling (linear, llama3) turns q and k as Hugging Face does") {
  TempFile vf("head_rs_verifier.gguf");
  LlamaConfig vc = write_verifier(vf.path, 7, 1.0f, 96, 32);
  REQUIRE(vc.D == 8);
  GgufFile g = GgufFile::open(vf.path);
  const int D = vc.D;
  std::vector<double> base(size_t(D) / 2);
  for (int i = 0; i < D / 2; ++i) base[size_t(i)] = std::pow(10000.0, -2.0 * i / D);
  struct Variant {
    nlohmann::json scaling;
    std::vector<double> inv_freq;
  };
  std::vector<Variant> variants;
  {
    std::vector<double> lin = base;
    for (double& f : lin) f /= 2.5;
    variants.push_back({{{"type", "linear"}, {"factor", 2.5}}, lin});
  }
  {
    const double factor = 8, low = 1, high = 8, orig = 400, pi = 3.14159265358979323846;
    std::vector<double> l3(base.size());
    for (size_t i = 0; i < base.size(); ++i) {
      const double wavelen = 2 * pi / base[i];
      const double llama = wavelen > orig / low ? base[i] / factor : base[i];
      const double smooth = (orig / wavelen - low) / (high - low);
      const double smoothed = (1 - smooth) * llama / factor + smooth * llama;
      const bool medium = !(wavelen < orig / high) && !(wavelen > orig / low);
      l3[i] = medium ? smoothed : llama;
    }
    REQUIRE(l3[0] == base[0]);  // the three regimes are all present
    REQUIRE(l3[1] != base[1]);
    REQUIRE(l3[1] != base[1] / factor);
    REQUIRE(l3[3] == base[3] / factor);
    variants.push_back({{{"rope_type", "llama3"},
                         {"factor", factor},
                         {"low_freq_factor", low},
                         {"high_freq_factor", high},
                         {"original_max_position_embeddings", 400}},
                        l3});
  }
  for (const Variant& v : variants) {
    CAPTURE(v.scaling.dump());
    TempDir hd("head_rs");
    write_head(hd.path, vc, vf.path, 11, 0);
    nlohmann::json cfg = nlohmann::json::parse(std::ifstream(hd.path + "/config.json"));
    cfg["rope_scaling"] = v.scaling;
    std::ofstream(hd.path + "/config.json") << cfg.dump(2);
    ModelOptions mo;
    mo.context = 64;
    mo.max_rows = 16;
    mo.kv_type = KvType::F32;
    LlamaModel model(ctx, g, mo);
    EagleHead head(ctx, hd.path, model, 64, 16);
    const HeadRun run = run_head(ctx, head, vc, 9);
    std::vector<float> h_ref, l_ref, h_plain, l_plain;
    head_ref(hd.path, g, vc, run.toks, run.feats, h_ref, l_ref, false, v.inv_freq);
    head_ref(hd.path, g, vc, run.toks, run.feats, h_plain, l_plain, false);
    check_close(run.h, h_ref, 1e-4f, 1e-4f, "head hidden with rope_scaling");
    // The scaling changes the result: unscaled RoPE is far outside the tolerance.
    float diff = 0;
    for (size_t i = 0; i < h_ref.size(); ++i) diff = std::max(diff, std::abs(h_ref[i] - h_plain[i]));
    CAPTURE(diff);
    CHECK(diff > 1e-3f);
  }
}

TEST_CASE("EAGLE head rope_scaling that is not computed is refused naming the key") {
  auto refused = [](nlohmann::json scaling, const std::string& what) {
    nlohmann::json cfg = {{"hidden_size", 64}, {"num_attention_heads", 8}, {"intermediate_size", 64}, {"vocab_size", 96},
                          {"rope_scaling", scaling}};
    std::string msg;
    try {
      (void)parse_head_config(cfg.dump(), "head/config.json");
    } catch (const Error& e) {
      msg = e.what();
    }
    CAPTURE(msg);
    CHECK(msg.find(what) != std::string::npos);
  };
  refused({{"rope_type", "yarn"}, {"factor", 4.0}}, "key 'rope_scaling.rope_type': RoPE scaling 'yarn' is not implemented");
  refused({{"type", "dynamic"}, {"factor", 2.0}}, "key 'rope_scaling.type'");
  refused({{"factor", 2.0}}, "key 'rope_scaling.type': expected a string");
  refused({{"type", "linear"}, {"factor", -2.0}}, "key 'rope_scaling.factor': expected a positive number, found -2.0");
  refused({{"type", "linear"}}, "key 'rope_scaling.factor': expected a positive number, found nothing");
  refused({{"rope_type", "llama3"}, {"factor", 8.0}}, "key 'rope_scaling.original_max_position_embeddings': missing");
  refused({{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 4.0}, {"high_freq_factor", 1.0},
           {"original_max_position_embeddings", 8192}},
          "key 'rope_scaling.high_freq_factor': expected more than low_freq_factor");
  refused("llama3", "key 'rope_scaling': expected an object or null");
  // null and "default" are no scaling.
  for (const nlohmann::json& none : {nlohmann::json(nullptr), nlohmann::json{{"rope_type", "default"}}}) {
    nlohmann::json cfg = {{"hidden_size", 64}, {"num_attention_heads", 8}, {"intermediate_size", 64}, {"vocab_size", 96},
                          {"rope_scaling", none}};
    const HeadConfig c = parse_head_config(cfg.dump(), "head/config.json");
    CHECK(c.rope_freq_scale == 1.0f);
    CHECK(c.rope_divisors.empty());
  }
}

TEST_CASE_FIXTURE(VkTest, "a head with a tensor it would not read is refused naming it") {
  TempFile vf("unread_verifier.gguf");
  LlamaConfig vc = write_verifier(vf.path, 7, 1.0f);
  ModelOptions mo;
  mo.context = 64;
  LlamaModel model(ctx, GgufFile::open(vf.path), mo);
  auto load_error = [&](const std::vector<std::string>& extra) {
    TempDir hd("head_unread");
    write_head(hd.path, vc, vf.path, 11, 0, 0.0f, false, extra);
    try {
      EagleHead head(ctx, hd.path, model, 64, 16);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  for (const char* name : {"layers.0.input_layernorm.weight", "layers.0.self_attn.q_proj.bias", "layers.1.mlp.up_proj.weight",
                           "layers.0.mlp.down_proj.bias"}) {
    const std::string msg = load_error({name});
    CAPTURE(msg);
    CHECK(msg.find(std::string("tensor ") + name + " is not part of an EAGLE-1/2 head") != std::string::npos);
    // A projection bias names the switch that would have read it.
    const std::string n(name);
    CHECK((msg.find("does not set attention_bias to true") != std::string::npos) == (n == "layers.0.self_attn.q_proj.bias"));
    CHECK((msg.find("does not set mlp_bias to true") != std::string::npos) == (n == "layers.0.mlp.down_proj.bias"));
  }
  // A saved rotary buffer is recomputed, not read: accepted (its shape does not matter here).
  CHECK(load_error({"layers.0.self_attn.rotary_emb.inv_freq"}).empty());
  // A saved base-model embedding is not read; of the verifier's shape it is accepted, of another
  // shape refused naming the mismatch.
  {
    TempDir hd("head_emb");
    write_head(hd.path, vc, vf.path, 11, 0);
    const uint64_t V = uint64_t(vc.V), C = uint64_t(vc.C);
    rewrite_head_dtype(hd.path, "F16", [](const std::string&, std::vector<float>&) { return true; },
                       {{"embed_tokens.weight", {{V, C}, std::vector<float>(V * C, 0.5f)}}});
    CHECK_NOTHROW(EagleHead(ctx, hd.path, model, 64, 16));
  }
  const std::string emb = load_error({"embed_tokens.weight"});
  CAPTURE(emb);
  CHECK(emb.find("tensor embed_tokens.weight has shape [" + std::to_string(vc.C) + "], not the verifier's embedding [" +
                 std::to_string(vc.V) + ", " + std::to_string(vc.C) + "]") != std::string::npos);
}

TEST_CASE("a head config that names another layer is refused naming the key") {
  auto msg_of = [](const std::string& key, nlohmann::json v) {
    nlohmann::json cfg = {{"hidden_size", 64}, {"num_attention_heads", 8}, {"intermediate_size", 64}, {"vocab_size", 96}};
    cfg[key] = v;
    try {
      (void)parse_head_config(cfg.dump(), "head/config.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(msg_of("hidden_act", "relu").find("key 'hidden_act': \"relu\" is not implemented") != std::string::npos);
  CHECK(msg_of("hidden_act", "gelu_fast").find("gelu_pytorch_tanh") != std::string::npos);  // the list it computes
  CHECK(msg_of("hidden_act", 1).find("key 'hidden_act': 1 is not implemented") != std::string::npos);
  CHECK(msg_of("num_hidden_layers", 2).find("key 'num_hidden_layers': 2 layers") != std::string::npos);
  // The bias switches are computed (see the forward test below); only a non-boolean is refused.
  CHECK(msg_of("attention_bias", "true").find("key 'attention_bias': \"true\" is not true or false") != std::string::npos);
  CHECK(msg_of("mlp_bias", 1).find("key 'mlp_bias': 1 is not true or false") != std::string::npos);
  for (const char* act : {"silu", "swish", "gelu", "gelu_pytorch_tanh", "gelu_new"}) CHECK(msg_of("hidden_act", act).empty());
  CHECK(parse_head_config(R"({"hidden_size": 64, "num_attention_heads": 8, "intermediate_size": 64, "vocab_size": 96,
                              "hidden_act": "gelu_pytorch_tanh"})",
                          "c.json")
            .hidden_act == GluAct::GeluTanh);
  CHECK(msg_of("num_hidden_layers", 1).empty());
  CHECK(msg_of("attention_bias", false).empty());
  CHECK(msg_of("attention_bias", true).empty());
  CHECK(msg_of("mlp_bias", true).empty());
  CHECK(msg_of("mlp_bias", nullptr).empty());
}

TEST_CASE_FIXTURE(VkTest, "a head that does not fit the verifier is refused with the reason") {
  TempFile vf("fit_verifier.gguf");
  LlamaConfig vc = write_verifier(vf.path, 3, 1.0f);
  GgufFile g = GgufFile::open(vf.path);
  ModelOptions mo;
  mo.context = 32;
  LlamaModel model(ctx, g, mo);
  {
    TempDir hd("head_width");
    LlamaConfig other = vc;
    other.C = 32, other.D = 8;
    write_head(hd.path, other, vf.path, 1, 0);
    CHECK_THROWS_WITH_AS(EagleHead(ctx, hd.path, model, 32, 8), doctest::Contains("hidden_size 32 != verifier width 64"),
                         Error);
  }
  {
    TempDir hd("head_vocab");
    LlamaConfig other = vc;
    other.V = 50;
    write_head(hd.path, other, vf.path, 1, 0);
    CHECK_THROWS_WITH_AS(EagleHead(ctx, hd.path, model, 32, 8), doctest::Contains("vocab_size 50"), Error);
  }
  {
    TempDir hd("head_missing");
    CHECK_THROWS_WITH_AS(EagleHead(ctx, hd.path, model, 32, 8), doctest::Contains("model.safetensors"), Error);
  }
  {
    TempDir hd("head_trunc");
    write_head(hd.path, vc, vf.path, 1, 0);
    std::filesystem::resize_file(hd.path + "/model.safetensors", 4000);
    CHECK_THROWS_WITH_AS(EagleHead(ctx, hd.path, model, 32, 8), doctest::Contains("outside the"), Error);
  }
}
