// GGUF reader and writer: round trips, and one test per malformed-file case. Every error must
// name the file and the field, so each check matches a substring of the message.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "gguf_test_util.hpp"
#include "shared_data.hpp"
#include "vkspec/gguf.hpp"
#include "vkspec/gguf_writer.hpp"
#include "vkspec/model_config.hpp"

using namespace vkspec;
using vkspec::test::Bytes;
using vkspec::test::TempFile;

namespace {

LlamaConfig small_config() {
  LlamaConfig c;
  c.C = 64; c.L = 2; c.H = 4; c.Hkv = 2; c.D = 16; c.F = 96; c.V = 300; c.ctx = 128;
  return c;
}

// Opening `bytes` must throw a vkspec::Error containing `what` and the file's path.
void expect_reject(const std::vector<uint8_t>& bytes, const std::string& what, const std::string& name) {
  TempFile f(name + ".gguf");
  f.write(bytes);
  std::string msg;
  try {
    GgufFile g = GgufFile::open(f.path);
    (void)read_llama_config(g);
  } catch (const Error& e) {
    msg = e.what();
  }
  INFO("error message: " << msg);
  CHECK_MESSAGE(msg.find(what) != std::string::npos, "expected an error containing '" << what << "'");
  CHECK_MESSAGE(msg.find(f.path) != std::string::npos, "error does not name the file");
}

std::vector<uint8_t> valid_model_bytes() { return random_llama(small_config(), 1, GgmlType::F32).to_bytes(); }

}  // namespace

// ---- round trips -----------------------------------------------------------------------------

TEST_CASE("gguf: metadata of every type round-trips") {
  GgufWriter w;
  w.add_u8("t.u8", 200);
  w.add_i8("t.i8", -100);
  w.add_u16("t.u16", 60000);
  w.add_i16("t.i16", -30000);
  w.add_u32("t.u32", 4000000000u);
  w.add_i32("t.i32", -2000000000);
  w.add_u64("t.u64", 1ull << 60);
  w.add_i64("t.i64", -(1ll << 60));
  w.add_f32("t.f32", 1.5f);
  w.add_f64("t.f64", -2.25);
  w.add_bool("t.bool", true);
  w.add_string("t.str", "héllo");
  const std::vector<int32_t> ai = {1, -2, 3};
  const std::vector<float> af = {0.5f, -1.0f};
  w.add_array_i32("t.ai32", ai);
  w.add_array_f32("t.af32", af);
  w.add_array_string("t.astr", {"a", "", "ccc"});
  TempFile tf("meta.gguf");
  w.write(tf.path);
  GgufFile g = GgufFile::open(tf.path);
  CHECK(g.version() == 3);
  CHECK(g.tensors().empty());  // metadata-only files load
  CHECK(g.find("t.u8")->u == 200);
  CHECK(g.find("t.i8")->i == -100);
  CHECK(g.find("t.u16")->u == 60000);
  CHECK(g.find("t.i16")->i == -30000);
  CHECK(g.get_u32("t.u32") == 4000000000u);
  CHECK(g.find("t.i32")->i == -2000000000);
  CHECK(g.find("t.u64")->u == (1ull << 60));
  CHECK(g.get_i64("t.i64") == -(1ll << 60));
  CHECK(g.get_f32("t.f32") == 1.5f);
  CHECK(g.find("t.f64")->f == -2.25);
  CHECK(g.get_bool("t.bool", false));
  CHECK(g.get_string("t.str") == "héllo");
  const GgufValue& a = g.get_array("t.ai32", GgufType::I32);
  REQUIRE(a.count == 3);
  CHECK(a.elem_i64(1) == -2);
  CHECK(g.get_array("t.af32", GgufType::F32).elem_f64(0) == 0.5);
  const GgufValue& s = g.get_array("t.astr", GgufType::STRING);
  REQUIRE(s.strings.size() == 3);
  CHECK(s.strings[2] == "ccc");
  CHECK(s.strings[1].empty());
  // Typed getters name the key and the expected type.
  CHECK_THROWS_WITH_AS(g.get_string("t.u32"), doctest::Contains("'t.u32': expected string, found u32"), Error);
  CHECK_THROWS_WITH_AS(g.get_u32("t.i32"), doctest::Contains("does not fit in u32"), Error);
  CHECK_THROWS_WITH_AS(g.get_u32("nope"), doctest::Contains("missing required metadata key 'nope'"), Error);
  CHECK_THROWS_WITH_AS(g.get_array("t.astr", GgufType::F32), doctest::Contains("found array of string"), Error);

  // Re-emitting what was read gives the same bytes.
  GgufWriter w2;
  for (auto& [k, v] : g.metadata()) w2.add_value(std::string(k), v);
  CHECK(w2.to_bytes() == w.to_bytes());
}

TEST_CASE("gguf: random llama models round-trip (f32, f16, q8_0, q4_0, bias, untied, odd sizes)") {
  struct Case { GgmlType type; bool bias, tied; const char* arch; int C, H, Hkv, F, V; };
  const Case cases[] = {
      {GgmlType::F32, false, true, "llama", 64, 4, 2, 96, 300},
      {GgmlType::F16, true, false, "qwen2", 64, 4, 4, 96, 300},
      {GgmlType::Q8_0, false, false, "llama", 64, 8, 2, 160, 259},
      {GgmlType::Q4_0, false, true, "llama", 64, 4, 1, 96, 290},
      {GgmlType::Q8_0, true, true, "qwen2", 42, 3, 1, 37, 23},  // odd widths fall back to f16
  };
  for (const Case& k : cases) {
    CAPTURE(ggml_type_name(k.type));
    CAPTURE(k.C);
    LlamaConfig c = small_config();
    c.arch = k.arch; c.C = k.C; c.H = k.H; c.Hkv = k.Hkv; c.D = k.C / k.H; c.F = k.F; c.V = k.V;
    c.qkv_bias = k.bias; c.tied_output = k.tied;
    GgufWriter w = random_llama(c, 42, k.type);
    TempFile tf("model.gguf");
    w.write(tf.path);
    GgufFile g = GgufFile::open(tf.path);
    CHECK(g.data_offset() % 32 == 0);
    const LlamaConfig r = read_llama_config(g);
    CHECK(r.C == c.C); CHECK(r.L == c.L); CHECK(r.H == c.H); CHECK(r.Hkv == c.Hkv); CHECK(r.D == c.D);
    CHECK(r.F == c.F); CHECK(r.V == c.V); CHECK(r.ctx == c.ctx); CHECK(r.arch == c.arch);
    CHECK(r.qkv_bias == c.qkv_bias); CHECK(r.tied_output == c.tied_output);
    CHECK(r.rope_theta == c.rope_theta); CHECK(r.rms_eps == c.rms_eps);
    for (const GgufTensor& t : g.tensors()) CHECK((t.data - g.data(g.tensors()[0]).data()) % 32 == 0);
    if (c.C % 32 == 0) CHECK(g.require_tensor("blk.0.attn_q.weight").type == k.type);
    // Copy every kv and tensor through the writer: identical bytes.
    GgufWriter w2;
    for (auto& [key, v] : g.metadata()) w2.add_value(std::string(key), v);
    for (const GgufTensor& t : g.tensors()) {
      auto d = g.data(t);
      w2.add_tensor(std::string(t.name), t.dims, t.type, std::vector<uint8_t>(d.begin(), d.end()));
    }
    CHECK(w2.to_bytes() == w.to_bytes());
  }
}

TEST_CASE("gguf: q8_0 tensors dequantize to within half a step of the source") {
  std::vector<float> x(64 * 3);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i) * 0.37f) * (1.0f + float(i % 7));
  GgufWriter w;
  w.add_tensor_f32("a", {64, 3}, x, GgmlType::Q8_0);
  w.add_tensor_f32("b", {64, 3}, x, GgmlType::F16);
  TempFile tf("q8.gguf");
  w.write(tf.path);
  GgufFile g = GgufFile::open(tf.path);
  const auto a = dequantize_tensor(g.require_tensor("a"));
  const auto b = dequantize_tensor(g.require_tensor("b"));
  CHECK(g.require_tensor("a").n_bytes == 6 * 34);
  for (size_t blk = 0; blk < 6; ++blk) {
    float amax = 0;
    for (size_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[blk * 32 + i]));
    for (size_t i = 0; i < 32; ++i) CHECK(std::fabs(a[blk * 32 + i] - x[blk * 32 + i]) <= amax / 127 * 0.51f + 1e-3f);
  }
  for (size_t i = 0; i < x.size(); ++i) CHECK(std::fabs(b[i] - x[i]) <= std::fabs(x[i]) * 1e-3f);
}

TEST_CASE("gguf: version 2 files and a custom alignment load") {
  GgufWriter w(64);
  std::vector<float> x(10, 1.0f);
  w.add_tensor_f32("t", {10}, x);
  w.add_tensor_f32("u", {5, 2}, x);
  auto b = w.to_bytes();
  b[4] = 2;  // v2 has the same layout as v3 for little-endian files
  TempFile tf("v2.gguf");
  tf.write(b);
  GgufFile g = GgufFile::open(tf.path);
  CHECK(g.version() == 2);
  CHECK(g.alignment() == 64);
  CHECK(g.require_tensor("u").offset == 64);
  CHECK(g.data_offset() % 64 == 0);
}

// ---- malformed files: one case each ------------------------------------------------------------

TEST_CASE("gguf reject: wrong magic") {
  auto b = valid_model_bytes();
  std::memcpy(b.data(), "GGML", 4);
  expect_reject(b, "bad magic: expected 'GGUF', found 'GGML'", "magic");
}

TEST_CASE("gguf reject: unsupported version") {
  expect_reject(Bytes().header(0, 0, 1).b, "unsupported GGUF version 1 (expected 2 or 3)", "v1");
  expect_reject(Bytes().header(0, 0, 4).b, "unsupported GGUF version 4", "v4");
}

TEST_CASE("gguf reject: truncated header") {
  auto b = Bytes().header(0, 0).b;
  b.resize(14);
  expect_reject(b, "truncated header (tensor count)", "trunchdr");
  expect_reject({}, "truncated header (magic)", "empty");
}

TEST_CASE("gguf reject: truncated metadata string") {
  // The value's string length field itself is cut off after 3 of 8 bytes.
  auto b = Bytes().header(0, 1).str("general.name").u32(8).b;
  b.insert(b.end(), {5, 0, 0});
  expect_reject(b, "truncated metadata key 'general.name' string value length", "truncstr");
}

TEST_CASE("gguf reject: string length past the end") {
  auto b = Bytes().header(0, 1).str("general.name").u32(8).u64(1ull << 40).raw("abc").b;
  expect_reject(b, "metadata key 'general.name' string value: string length 1099511627776 runs past the end",
                "strlen");
  // A key whose own length lies.
  auto k = Bytes().header(0, 1).u64(~0ull).zeros(16).b;
  expect_reject(k, "metadata entry 0 key: string length 18446744073709551615 runs past the end", "keylen");
}

TEST_CASE("gguf reject: array count overflow") {
  // 2^61 u32 elements would be 2^63 bytes: must fail before allocating anything.
  auto b = Bytes().header(0, 1).str("tokenizer.ggml.scores").u32(9).u32(6).u64(1ull << 61).zeros(16).b;
  expect_reject(b, "metadata key 'tokenizer.ggml.scores': array count 2305843009213693952 of f32", "arrcount");
  auto s = Bytes().header(0, 1).str("tokenizer.ggml.tokens").u32(9).u32(8).u64(~0ull).zeros(16).b;
  expect_reject(s, "array count 18446744073709551615 of string", "arrcount2");
}

TEST_CASE("gguf reject: tensor count overflow") {
  expect_reject(Bytes().header(~0ull >> 1, 0).zeros(64).b, "tensor count 9223372036854775807 is impossible", "tcount");
  expect_reject(Bytes().header(0, 1ull << 40).zeros(64).b, "metadata count 1099511627776 is impossible", "kvcount");
}

TEST_CASE("gguf reject: tensor offset past the end") {
  auto b = Bytes().header(1, 0).tensor("token_embd.weight", {8, 4}, 0, 1ull << 20).pad().zeros(128).b;
  expect_reject(b, "tensor 'token_embd.weight' [8, 4] f32: data [1048576, +128) runs past the end", "offset");
  // Offset + size wrapping around 2^64 must not pass the check.
  auto w = Bytes().header(1, 0).tensor("x", {8}, 0, ~0ull - 31).pad().zeros(32).b;
  expect_reject(w, "tensor 'x' [8] f32: data [18446744073709551584, +32) runs past the end", "offwrap");
}

TEST_CASE("gguf reject: misaligned tensor offset") {
  auto b = Bytes().header(2, 0).tensor("a", {4}, 0, 0).tensor("b", {4}, 0, 16).pad().zeros(64).b;
  expect_reject(b, "tensor 'b': data offset 16 is not a multiple of the alignment 32", "misalign");
  auto a = Bytes().header(0, 1).str("general.alignment").u32(4).u32(48).b;
  expect_reject(a, "'general.alignment': expected a nonzero power of two, found 48", "badalign");
}

TEST_CASE("gguf reject: tensor data truncated") {
  auto b = valid_model_bytes();
  b.resize(b.size() - 100);
  expect_reject(b, "output_norm.weight' [64] f32: data", "datatrunc");
}

TEST_CASE("gguf reject: dims overflow") {
  auto b = Bytes().header(1, 0).tensor("huge", {1ull << 32, 1ull << 32}, 0, 0).pad().b;
  expect_reject(b, "tensor 'huge': dims [4294967296, 4294967296] overflow", "dimsovf");
  auto n = Bytes().header(1, 0).tensor("five", {1, 1, 1, 1, 1}, 0, 0).pad().b;
  expect_reject(n, "tensor 'five': n_dims 5 (expected 1..4)", "ndims");
}

TEST_CASE("gguf reject: shapes that disagree with the metadata") {
  LlamaConfig c = small_config();
  GgufWriter w = random_llama(c, 3, GgmlType::F32);
  std::vector<float> bad(64 * 48, 0.0f);
  GgufWriter w2;  // same metadata, attn_q of layer 1 with 48 instead of 64 outputs
  TempFile src("shape_src.gguf");
  w.write(src.path);
  GgufFile g = GgufFile::open(src.path);
  for (auto& [k, v] : g.metadata()) w2.add_value(std::string(k), v);
  for (const GgufTensor& t : g.tensors()) {
    if (t.name == "blk.1.attn_q.weight") {
      w2.add_tensor_f32(std::string(t.name), {64, 48}, bad);
      continue;
    }
    auto d = g.data(t);
    w2.add_tensor(std::string(t.name), t.dims, t.type, std::vector<uint8_t>(d.begin(), d.end()));
  }
  expect_reject(w2.to_bytes(), "tensor 'blk.1.attn_q.weight': expected shape [64, 64] from the metadata, found [64, 48]",
                "shape");
}

TEST_CASE("gguf reject: unsupported tensor type") {
  // q2_K (10): a ggml type vkspec does not read (q4_K, 12, is read since the quantized kernels).
  auto b = Bytes().header(1, 0).tensor("blk.0.ffn_up.weight", {256, 2}, 10, 0).pad().zeros(512).b;
  expect_reject(b, "tensor 'blk.0.ffn_up.weight': unsupported tensor type 10", "qtype");
  auto q = Bytes().header(1, 0).tensor("q", {48}, 8, 0).pad().zeros(64).b;
  expect_reject(q, "tensor 'q': row length 48 is not a multiple of the q8_0 block size 32", "qrow");
}

TEST_CASE("gguf reject: duplicate tensor name / metadata key") {
  auto b = Bytes().header(2, 0).tensor("a", {8}, 0, 0).tensor("a", {8}, 0, 32).pad().zeros(64).b;
  expect_reject(b, "duplicate tensor name 'a'", "duptensor");
  auto k = Bytes().header(0, 2).kv_u32("x.y", 1).kv_u32("x.y", 2).b;
  expect_reject(k, "duplicate metadata key 'x.y'", "dupkey");
}

TEST_CASE("gguf reject: missing required key or tensor") {
  LlamaConfig c = small_config();
  GgufWriter w = random_llama(c, 5, GgmlType::F32);
  w.remove("llama.embedding_length");
  expect_reject(w.to_bytes(), "missing required metadata key 'llama.embedding_length'", "nokey");
  GgufWriter w2 = random_llama(c, 5, GgmlType::F32);
  w2.add_string("llama.block_count", "two");
  expect_reject(w2.to_bytes(), "metadata key 'llama.block_count': expected an unsigned 32-bit integer, found string",
                "keytype");
  GgufWriter w3 = random_llama(c, 5, GgmlType::F32);
  w3.add_u32("llama.block_count", 3);  // claims a layer the file does not have
  expect_reject(w3.to_bytes(), "missing required tensor 'blk.2.attn_norm.weight'", "notensor");
  GgufWriter w4 = random_llama(c, 5, GgmlType::F32);
  w4.add_u32("llama.attention.head_count_kv", 3);
  expect_reject(w4.to_bytes(), "head_count_kv': 3 must divide attention.head_count 4", "gqa");
  GgufWriter w5 = random_llama(c, 5, GgmlType::F32);
  w5.add_string("general.architecture", "mamba");
  expect_reject(w5.to_bytes(), "'general.architecture': 'mamba' is not implemented", "arch");
}

TEST_CASE("gguf: a vocab-only file with no tensors loads (shared tokenizer vectors)") {
  const std::string p = vkspec::test::shared_file("tokenizer-vectors/ggml-vocab-llama-spm.gguf");
  if (p.empty()) return;
  GgufFile g = GgufFile::open(p);
  CHECK(g.tensors().empty());
  CHECK(g.get_string("tokenizer.ggml.model") == "llama");
  CHECK(g.get_array("tokenizer.ggml.tokens", GgufType::STRING).strings.size() == 32000);
}

TEST_CASE("gguf: random corruptions are rejected or loaded, never crash") {
  // Flip bytes and cut the file at random places; every outcome must be a clean load or a
  // vkspec::Error (run under valgrind/ASan to see that nothing reads out of bounds).
  LlamaConfig c = small_config();
  c.L = 1;
  c.V = 40;
  const std::vector<uint8_t> good = random_llama(c, 9, GgmlType::Q8_0).to_bytes();
  uint64_t s = 12345;
  auto rnd = [&] {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return uint32_t(s >> 33);
  };
  TempFile tf("fuzz.gguf");
  int rejected = 0;
  for (int it = 0; it < 300; ++it) {
    std::vector<uint8_t> b = good;
    const size_t header_end = 2048;  // most structure lives in the first bytes
    for (int k = 0; k < 1 + int(rnd() % 4); ++k) b[rnd() % std::min(b.size(), header_end)] = uint8_t(rnd());
    if (rnd() % 4 == 0) b.resize(rnd() % b.size());
    tf.write(b);
    try {
      GgufFile g = GgufFile::open(tf.path);
      (void)read_llama_config(g);
      for (const GgufTensor& t : g.tensors()) (void)dequantize_tensor(t);
    } catch (const Error&) {
      ++rejected;
    }
  }
  MESSAGE(rejected << "/300 corrupted files rejected");
}
