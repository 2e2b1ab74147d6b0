// The llama2.c converter (values must equal the source floats) and the CPU reference forward
// (determinism, prefill == stepwise, tree-masked rows == each path alone).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "cpu_reference.hpp"
#include "gguf_test_util.hpp"
#include "shared_data.hpp"
#include "vkspec/gguf_writer.hpp"
#include "vkspec/llama2c.hpp"

using namespace vkspec;
using vkspec::test::CpuReference;
using vkspec::test::TempFile;

namespace {

std::vector<float> read_floats(const std::string& path, size_t offset_floats, size_t n) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(std::streamoff(28 + 4 * offset_floats));
  std::vector<float> v(n);
  in.read(reinterpret_cast<char*>(v.data()), std::streamsize(4 * n));
  return v;
}

// max |a - b| <= abs + rel * |b| everywhere; reports the worst element.
void check_close(const std::vector<float>& a, const std::vector<float>& b, float abs_tol, float rel_tol,
                 const char* what) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  long first = -1;
  for (size_t i = 0; i < a.size(); ++i) {
    const double e = std::fabs(double(a[i]) - b[i]);
    worst = std::max(worst, e);
    if (first < 0 && !(e <= abs_tol + rel_tol * std::fabs(b[i]))) first = long(i);
  }
  CHECK_MESSAGE(first < 0, what << ": max error " << worst << ", first bad index " << first);
}

struct Stories {
  std::string bin;
  TempFile gguf{"stories260K.gguf"};
  LlamaConfig cfg;
  bool ok = false;
  Stories() {
    bin = vkspec::test::shared_file("models/stories260K.bin");
    if (bin.empty()) return;
    cfg = convert_llama2c_file(bin, gguf.path);
    ok = true;
  }
};

}  // namespace

TEST_CASE("llama2c: stories260K converts with the right config and exact tensor values") {
  Stories s;
  if (!s.ok) return;
  GgufFile g = GgufFile::open(s.gguf.path);
  const LlamaConfig c = read_llama_config(g);
  CHECK(c.C == 64); CHECK(c.F == 172); CHECK(c.L == 5); CHECK(c.H == 8); CHECK(c.Hkv == 4);
  CHECK(c.D == 8); CHECK(c.V == 512); CHECK(c.ctx == 512); CHECK(c.tied_output); CHECK(!c.qkv_bias);
  CHECK(c.rms_eps == 1e-5f); CHECK(c.rope_theta == 10000.0f);
  CHECK(g.tensor("output.weight") == nullptr);
  // Offsets (in floats) of a few arrays in llama2.c order.
  const size_t C = 64, F = 172, L = 5, V = 512, KVD = 32;
  const size_t rms_att = V * C, wq = rms_att + L * C, wk = wq + L * C * C, wv = wk + L * KVD * C, wo = wv + L * KVD * C;
  const size_t rms_ffn = wo + L * C * C, w1 = rms_ffn + L * C, w2 = w1 + L * F * C, w3 = w2 + L * C * F;
  const size_t rms_final = w3 + L * F * C;
  auto same = [&](const char* name, size_t off, size_t n) {
    CAPTURE(name);
    CHECK(dequantize_tensor(g.require_tensor(name)) == read_floats(s.bin, off, n));
  };
  same("token_embd.weight", 0, V * C);
  same("blk.0.attn_norm.weight", rms_att, C);
  same("blk.2.attn_q.weight", wq + 2 * C * C, C * C);
  same("blk.3.attn_k.weight", wk + 3 * KVD * C, KVD * C);
  same("blk.4.attn_v.weight", wv + 4 * KVD * C, KVD * C);
  same("blk.1.attn_output.weight", wo + 1 * C * C, C * C);
  same("blk.4.ffn_norm.weight", rms_ffn + 4 * C, C);
  same("blk.1.ffn_gate.weight", w1 + 1 * F * C, F * C);
  same("blk.2.ffn_down.weight", w2 + 2 * C * F, C * F);
  same("blk.3.ffn_up.weight", w3 + 3 * F * C, F * C);
  same("output_norm.weight", rms_final, C);
  CHECK(g.require_tensor("blk.2.ffn_down.weight").dims == std::vector<uint64_t>{F, C});
  // The file's own RoPE table (seq, D/2) confirms theta = 10000 and angle pos * theta^(-2i/D)
  // over pair i; the pairing itself (2i, 2i+1) is llama2.c's model.py/run.c convention.
  const auto cos_table = read_floats(s.bin, rms_final + C, 512 * 4);
  for (int pos : {1, 7, 100, 511})
    for (int i = 0; i < 4; ++i)
      CHECK(cos_table[pos * 4 + i] == doctest::Approx(std::cos(pos * std::pow(10000.0, -2.0 * i / 8))).epsilon(1e-4));
}

TEST_CASE("llama2c: bad files are rejected with the reason") {
  TempFile t("bad.bin");
  int32_t h[7] = {64, 172, 5, 8, 4, 512, 512};
  std::vector<uint8_t> b(28 + 400);
  std::memcpy(b.data(), h, 28);
  t.write(b);
  CHECK_THROWS_WITH_AS(llama2c_to_gguf(t.path), doctest::Contains("does not match its header"), Error);
  h[3] = 7;
  std::memcpy(b.data(), h, 28);
  t.write(b);
  CHECK_THROWS_WITH_AS(llama2c_to_gguf(t.path), doctest::Contains("dim 64 not divisible by n_heads 7"), Error);
  t.write({1, 2, 3});
  CHECK_THROWS_WITH_AS(llama2c_to_gguf(t.path), doctest::Contains("truncated llama2.c header"), Error);
}

TEST_CASE("cpu reference: stories260K greedy is deterministic and prefill == stepwise") {
  Stories s;
  if (!s.ok) return;
  GgufFile g = GgufFile::open(s.gguf.path);
  CpuReference ref(g, 256);
  const std::vector<uint32_t> prompt = {1, 403, 411, 374};
  const auto a = ref.greedy(prompt, 64);
  const auto b = ref.greedy(prompt, 64);
  CHECK(a == b);
  std::string ids;
  for (uint32_t t : a) ids += std::to_string(t) + " ";
  MESSAGE("stories260K greedy from [1 403 411 374]: " << ids);

  // Full sequence at once vs prompt prefill then one token at a time.
  std::vector<uint32_t> seq = prompt;
  seq.insert(seq.end(), a.begin(), a.begin() + 20);
  ref.reset();
  const auto full = ref.forward(seq);
  ref.reset();
  auto part = ref.forward(std::span<const uint32_t>(seq).first(prompt.size()));
  std::vector<float> logits = part.logits, hidden = part.hidden;
  for (size_t i = prompt.size(); i < seq.size(); ++i) {
    auto o = ref.forward(std::span<const uint32_t>(&seq[i], 1));
    logits.insert(logits.end(), o.logits.begin(), o.logits.end());
    hidden.insert(hidden.end(), o.hidden.begin(), o.hidden.end());
  }
  check_close(logits, full.logits, 1e-4f, 1e-4f, "logits prefill+steps vs full");
  check_close(hidden, full.hidden, 1e-4f, 1e-4f, "hidden prefill+steps vs full");
  // The greedy tokens are the argmax of the full-sequence logits.
  for (size_t i = 0; i < 20; ++i)
    CHECK(vkspec::test::argmax(std::span<const float>(full.logits).subspan((prompt.size() - 1 + i) * 512, 512)) == a[i]);
}

TEST_CASE("cpu reference: tree-masked rows equal each root-to-leaf path run alone") {
  LlamaConfig c;
  c.C = 48; c.L = 2; c.H = 6; c.Hkv = 2; c.D = 8; c.F = 80; c.V = 67; c.ctx = 64; c.qkv_bias = true;
  c.arch = "qwen2";
  TempFile tf("tree.gguf");
  write_random_llama(tf.path, c, 11, GgmlType::F32);
  GgufFile g = GgufFile::open(tf.path);
  CpuReference ref(g, 64);
  const std::vector<uint32_t> prefix = {5, 9, 33, 2, 60};
  // Tree: 0 root; 1,2 children of 0; 3 child of 1; 4 child of 2; 5 child of 3.
  const std::vector<uint32_t> tok = {7, 11, 12, 40, 41, 66};
  const std::vector<int> parent = {-1, 0, 0, 1, 2, 3};
  const int N = 6, t = int(prefix.size());
  std::vector<int> depth(N, 0), pos(N);
  std::vector<uint8_t> mask(N * N, 0);
  for (int i = 0; i < N; ++i) {
    for (int j = i; j >= 0; j = parent[j]) mask[i * N + j] = 1;
    depth[i] = parent[i] < 0 ? 0 : depth[parent[i]] + 1;
    pos[i] = t + depth[i];
  }
  ref.forward(prefix);
  const auto tree = ref.forward(tok, pos, mask);
  CHECK(ref.committed() == t);
  for (int leaf : {4, 5}) {
    std::vector<int> path;
    for (int j = leaf; j >= 0; j = parent[j]) path.insert(path.begin(), j);
    std::vector<uint32_t> chain;
    for (int j : path) chain.push_back(tok[j]);
    ref.truncate(t);
    const auto alone = ref.forward(chain);
    for (size_t k = 0; k < path.size(); ++k) {
      std::vector<float> a(tree.logits.begin() + path[k] * c.V, tree.logits.begin() + (path[k] + 1) * c.V);
      std::vector<float> b(alone.logits.begin() + k * c.V, alone.logits.begin() + (k + 1) * c.V);
      check_close(a, b, 1e-5f, 1e-5f, "tree row vs path");
    }
  }
  // commit_rows: accept path 0-1-3 from the tree, then the next token equals the chain's.
  ref.truncate(t);
  ref.forward(tok, pos, mask);
  const std::vector<int> acc = {0, 1, 3};
  ref.commit_rows(acc);
  CHECK(ref.committed() == t + 3);
  const uint32_t nxt = 17;
  const auto after = ref.forward(std::span<const uint32_t>(&nxt, 1));
  ref.truncate(t);
  const std::vector<uint32_t> chain = {tok[0], tok[1], tok[3], nxt};
  const auto direct = ref.forward(chain);
  check_close(after.logits, std::vector<float>(direct.logits.end() - c.V, direct.logits.end()), 1e-5f, 1e-5f,
              "after commit_rows");
}
