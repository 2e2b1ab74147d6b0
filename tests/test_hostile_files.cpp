// Hostile input files: each case is a file built to break one reader (GGUF, safetensors, a head's
// config.json, the tokenizer's metadata). Every one must end in a vkspec::Error that names the
// file, the field and what was expected — never a crash, a wrapped integer, a raw library
// exception or a giant allocation. Crashes the fuzzers (tests/fuzz/) find are added here.
#include <doctest/doctest.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gguf_test_util.hpp"
#include "spec_fixtures.hpp"
#include "vk_fixture.hpp"
#include "vkspec/eagle_head.hpp"
#include "vkspec/gguf.hpp"
#include "vkspec/gguf_writer.hpp"
#include "vkspec/llama2c.hpp"
#include "vkspec/model_config.hpp"
#include "vkspec/safetensors.hpp"
#include "vkspec/tokenizer.hpp"

using namespace vkspec;
using namespace vkspec::test;

namespace {

// gcc defines __SANITIZE_ADDRESS__, clang answers __has_feature.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

// The error `fn` throws, or "" (and a failed check) if it throws something else or nothing.
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL_CHECK("threw a non-vkspec exception: " << std::string(e.what()));
    return "";
  }
  FAIL_CHECK("did not throw");
  return "";
}

// Every substring of `parts` must occur in `msg`.
void expect_contains(const std::string& msg, std::initializer_list<std::string> parts) {
  INFO("error message: " << msg);
  for (const std::string& p : parts) CHECK_MESSAGE(msg.find(p) != std::string::npos, "missing '" << p << "'");
}

std::string open_gguf_error(const std::vector<uint8_t>& bytes, const TempFile& f) {
  f.write(bytes);
  return error_of([&] { (void)GgufFile::open(f.path); });
}

}  // namespace

// ---- GGUF ------------------------------------------------------------------------------------

TEST_CASE("hostile gguf: nested arrays fail before allocating (memory stays far below the file's claims)") {
  if (kAddressSanitizer) {
    MESSAGE("NOT RUN under AddressSanitizer: the address-space limit this test sets conflicts with its shadow memory");
    return;
  }
  // Five nested arrays of arrays, each claiming as many elements as the 16 MB file could hold if
  // it held nothing else. A reader that sizes each level from its own count before reading the
  // elements allocates count x sizeof(GgufValue) per level (~1 GB in all) before failing.
  const uint64_t file_size = 16u << 20;
  const uint64_t n = file_size / 12 - 64;
  Bytes b;
  b.header(0, 1).str("nest").u32(uint32_t(GgufType::ARRAY));
  for (int level = 0; level < 5; ++level) b.u32(uint32_t(GgufType::ARRAY)).u64(n);
  b.zeros(size_t(file_size - b.b.size()));
  TempFile f("nested.gguf");
  f.write(b.b);

  // Parse in a child limited to 256 MB of address space beyond what it already maps; it reports
  // the error message through a pipe, or its exit code says how it failed.
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    long pages = 0;
    std::ifstream("/proc/self/statm") >> pages;
    const rlim_t limit = rlim_t(pages) * rlim_t(::sysconf(_SC_PAGESIZE)) + (rlim_t(256) << 20);
    const rlimit rl{limit, limit};
    ::setrlimit(RLIMIT_AS, &rl);
    int code = 2;  // loaded without error
    std::string msg;
    try {
      (void)GgufFile::open(f.path);
    } catch (const Error& e) {
      msg = e.what();
      code = 0;
    } catch (const std::bad_alloc&) {
      code = 1;
    } catch (...) {
      code = 3;
    }
    if (::write(fds[1], msg.data(), msg.size()) < 0) code = 4;
    ::_exit(code);
  }
  ::close(fds[1]);
  std::string msg;
  char buf[512];
  for (ssize_t k; (k = ::read(fds[0], buf, sizeof buf)) > 0;) msg.append(buf, size_t(k));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  INFO("exit code (0 error, 1 bad_alloc, 2 loaded, 3 other exception): " << WEXITSTATUS(status));
  CHECK(WEXITSTATUS(status) == 0);
  expect_contains(msg, {f.path, "metadata key 'nest'"});
}

TEST_CASE("hostile gguf: sibling arrays cannot each claim the same remaining bytes") {
  // An array of 3 string arrays: the first claims all the bytes, leaving nothing for the two
  // elements the outer array still owes.
  TempFile f("siblings.gguf");
  Bytes b;
  b.header(0, 1).str("outer").u32(uint32_t(GgufType::ARRAY)).u32(uint32_t(GgufType::ARRAY)).u64(3);
  b.u32(uint32_t(GgufType::STRING)).u64(100);
  b.zeros(800 + 12);
  expect_contains(open_gguf_error(b.b, f),
                  {f.path, "metadata key 'outer[0]': array count 100 of string is impossible: needs at least 8 bytes per element"});
}

TEST_CASE("hostile gguf: the tensor table cannot claim bytes the metadata still needs") {
  // The header promises two metadata entries; the tensor count must leave room for them.
  TempFile f("claims.gguf");
  Bytes b;
  // 17 bytes of entry "a" + 104 = 121, one short of 2 x 13 (entries) + 3 x 32 (tensor infos).
  b.header(3, 2).kv_u32("a", 1).zeros(104);
  expect_contains(open_gguf_error(b.b, f), {f.path, "tensor count 3 is impossible"});
}

TEST_CASE("hostile gguf: a tensor whose byte size passes 2^64 does not wrap to a small size") {
  // 2^62 f32 elements are 2^64 bytes: a wrapped size of 0 would pass the bounds check.
  TempFile f("wrapbytes.gguf");
  auto b = Bytes().header(1, 0).tensor("w", {1ull << 31, 1ull << 31}, 0, 0).pad().zeros(64).b;
  expect_contains(open_gguf_error(b, f), {f.path, "tensor 'w' [2147483648, 2147483648] f32", "bytes"});
  auto h = Bytes().header(1, 0).tensor("h", {1ull << 62, 1}, 1, 0).pad().zeros(64).b;
  expect_contains(open_gguf_error(h, f), {f.path, "tensor 'h'", "f16"});
}

TEST_CASE("hostile gguf: tensors whose bytes overlap are refused, naming both") {
  // 64 bytes of f32 at 0 and 32 bytes at 32 would alias the second onto the first's tail.
  TempFile f("overlap.gguf");
  auto b = Bytes().header(2, 0).tensor("a", {16}, 0, 0).tensor("b", {8}, 0, 32).pad().zeros(96).b;
  expect_contains(open_gguf_error(b, f), {f.path, "'a'", "'b'", "[0, +64)", "[32, +32)", "overlap"});
  // Back to back, in either order in the table: no bytes shared.
  f.write(Bytes().header(2, 0).tensor("b", {8}, 0, 64).tensor("a", {16}, 0, 0).pad().zeros(96).b);
  CHECK(GgufFile::open(f.path).tensors().size() == 2);
}

TEST_CASE("hostile gguf: bad magic bytes are printed as \\xNN hex") {
  TempFile f("magic80.gguf");
  std::vector<uint8_t> b = {0x80, 0xff, 'G', 0x01};
  b.resize(64, 0);
  expect_contains(open_gguf_error(b, f), {f.path, "found '\\x80\\xffG\\x01'"});
}

TEST_CASE("hostile gguf: a zero-element tensor dequantizes to nothing") {
  // The output vector has no storage (data() may be null): memcpy(nullptr, p, 0) is undefined
  // behaviour that UBSan reports.
  TempFile f("empty_tensor.gguf");
  f.write(Bytes().header(3, 0).tensor("e", {0}, 0, 0).tensor("q", {32, 0}, 8, 0).tensor("h", {0, 4}, 1, 0).pad().b);
  GgufFile g = GgufFile::open(f.path);
  for (const GgufTensor& t : g.tensors()) CHECK(dequantize_tensor(t).empty());
}

TEST_CASE("hostile gguf: memory-backed files parse like mapped ones") {
  const std::vector<uint8_t> bytes = random_llama([] {
    LlamaConfig c;
    c.C = 32, c.L = 1, c.H = 2, c.Hkv = 1, c.D = 16, c.F = 48, c.V = 270, c.ctx = 64;
    return c;
  }(), 4, GgmlType::Q8_0).to_bytes();
  GgufFile g = GgufFile::from_bytes("mem.gguf", bytes);
  const LlamaConfig c = read_llama_config(g);
  CHECK(c.V == 270);
  CHECK(g.tensors().size() == 11);  // 9 per layer, embedding, output norm (tied output)
  GgufFile moved = std::move(g);
  CHECK(dequantize_tensor(moved.require_tensor("output_norm.weight")).size() == 32);
  std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + 100);
  expect_contains(error_of([&] { (void)GgufFile::from_bytes("cut.gguf", cut); }), {"cut.gguf: "});
}

// ---- model config: the verifier and its tokenizer ---------------------------------------------

namespace {
LlamaConfig tiny_config() {
  LlamaConfig c;
  c.C = 32, c.L = 1, c.H = 2, c.Hkv = 1, c.D = 16, c.F = 48, c.V = 300, c.ctx = 64;
  return c;
}
}  // namespace

TEST_CASE("hostile model: a tokenizer whose vocabulary differs from the model's is refused with both sizes") {
  GgufWriter w = random_llama(tiny_config(), 2, GgmlType::F32);
  std::vector<std::string> toks;
  for (int i = 0; i < 290; ++i) toks.push_back("t" + std::to_string(i));
  w.add_array_string("tokenizer.ggml.tokens", toks);
  w.add_array_f32("tokenizer.ggml.scores", std::vector<float>(290, 0.0f));
  w.add_array_i32("tokenizer.ggml.token_type", std::vector<int32_t>(290, 1));
  TempFile f("vocab_mismatch.gguf");
  w.write(f.path);
  GgufFile g = GgufFile::open(f.path);
  expect_contains(error_of([&] { (void)read_llama_config(g); }), {f.path, "tokenizer.ggml.tokens", "290", "300"});
}

TEST_CASE("hostile model: hyperparameters out of range are refused naming the key") {
  auto reject = [](const std::string& key, float v, const std::string& what) {
    GgufWriter w = random_llama(tiny_config(), 2, GgmlType::F32);
    w.add_f32(key, v);
    TempFile f("hparam.gguf");
    w.write(f.path);
    GgufFile g = GgufFile::open(f.path);
    expect_contains(error_of([&] { (void)read_llama_config(g); }), {f.path, key, what});
  };
  reject("llama.rope.freq_base", -10000.0f, "positive");
  reject("llama.rope.freq_base", INFINITY, "finite");
  reject("llama.rope.freq_base", NAN, "positive");
  reject("llama.attention.layer_norm_rms_epsilon", -1.0f, "0 < eps < 1");
  reject("llama.attention.layer_norm_rms_epsilon", NAN, "0 < eps < 1");
}

// ---- tokenizer ---------------------------------------------------------------------------------

namespace {
// The token texts add_placeholder_llama_vocab(w, V) writes, for a test to change one.
std::vector<std::string> placeholder_tokens(int V = 300) {
  std::vector<std::string> toks;
  for (int i = 0; i < V; ++i) {
    char buf[32];
    if (i < 3) std::snprintf(buf, sizeof buf, "%s", i == 0 ? "<unk>" : i == 1 ? "<s>" : "</s>");
    else if (i < 259) std::snprintf(buf, sizeof buf, "<0x%02X>", i - 3);
    else std::snprintf(buf, sizeof buf, "<unused_%d>", i);
    toks.push_back(buf);
  }
  return toks;
}
}  // namespace

TEST_CASE("hostile tokenizer: a malformed SPM byte token is refused naming the token and its id") {
  for (const char* bad : {"<0xZZ>", "<0x-1>", "<0x1G>", "<0x+F>", "<0x 1>"}) {
    GgufWriter w;
    add_placeholder_llama_vocab(w, 300);
    std::vector<std::string> toks = placeholder_tokens();
    toks[5] = bad;  // was <0x02>, type byte
    w.add_array_string("tokenizer.ggml.tokens", toks);
    TempFile f("badbyte.gguf");
    w.write(f.path);
    GgufFile g = GgufFile::open(f.path);
    expect_contains(error_of([&] { (void)Tokenizer::from_gguf(g).decode(std::vector<uint32_t>{5}); }),
                    {f.path, "token 5 '" + std::string(bad) + "'", "<0xHH>"});
  }
}

// ---- safetensors -------------------------------------------------------------------------------

namespace {

// A safetensors file with the given JSON header and `data_bytes` zero bytes of data.
void write_safetensors(const std::string& path, const std::string& header, size_t data_bytes) {
  std::ofstream f(path, std::ios::binary);
  const uint64_t n = header.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f.write(header.data(), std::streamsize(n));
  f << std::string(data_bytes, '\0');
}

std::string safetensors_error(const std::string& header, size_t data_bytes) {
  TempFile f("hostile.safetensors");
  write_safetensors(f.path, header, data_bytes);
  std::string msg = error_of([&] { (void)SafetensorsFile::open(f.path); });
  CHECK_MESSAGE(msg.find(f.path) != std::string::npos, "error does not name the file: " << msg);
  return msg;
}

}  // namespace

TEST_CASE("hostile safetensors: shapes and offsets must be non-negative integers") {
  const char* good = R"({"w": {"dtype": "F32", "shape": [2, 4], "data_offsets": [0, 32]}})";
  {
    TempFile f("good.safetensors");
    write_safetensors(f.path, good, 32);
    CHECK(SafetensorsFile::open(f.path).tensors().at("w").bytes == 32);
  }
  expect_contains(safetensors_error(R"({"w": {"dtype": "F32", "shape": [2.5, 4], "data_offsets": [0, 32]}})", 32),
                  {"tensor 'w'", "'shape'", "2.5", "non-negative integer"});
  expect_contains(safetensors_error(R"({"w": {"dtype": "F32", "shape": [-2, -4], "data_offsets": [0, 32]}})", 32),
                  {"tensor 'w'", "'shape'", "-2", "non-negative integer"});
  expect_contains(safetensors_error(R"({"w": {"dtype": "F32", "shape": [2, 4], "data_offsets": [0.0, 32]}})", 32),
                  {"tensor 'w'", "'data_offsets'", "non-negative integer"});
  expect_contains(safetensors_error(R"({"w": {"dtype": "F32", "shape": [2, 4], "data_offsets": [0, -32]}})", 32),
                  {"tensor 'w'", "'data_offsets'"});
  // 2^62 x 4 elements of 4 bytes wraps to 0 in 64 bits: the product must be overflow-checked.
  expect_contains(
      safetensors_error(R"({"w": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 0]}})", 0),
      {"tensor 'w'", "overflow"});
  expect_contains(safetensors_error(R"({"w": {"dtype": "F32", "shape": [2, 4], "data_offsets": [0, 16]}})", 32),
                  {"tensor 'w'", "16 bytes", "needs 32"});
}

TEST_CASE("hostile safetensors: tensors whose bytes overlap are refused, naming both") {
  // Found by fuzz_safetensors: an I64 tensor laid over its neighbours' bytes was accepted, so a
  // crafted head could alias one weight onto another.
  const char* two = R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                        "b": {"dtype": "I64", "shape": [2], "data_offsets": [%s]}})";
  auto header = [&](const char* offsets) {
    char buf[512];
    std::snprintf(buf, sizeof buf, two, offsets);
    return std::string(buf);
  };
  expect_contains(safetensors_error(header("8, 24"), 32), {"'a'", "'b'", "[0, 16]", "[8, 24]", "overlap"});
  expect_contains(safetensors_error(header("0, 16"), 32), {"'a'", "'b'", "overlap"});
  // Side by side, or with a gap, or an empty tensor inside another's bytes: no bytes shared.
  for (const char* ok : {"16, 32", "24, 40"}) {
    TempFile f("adjacent.safetensors");
    write_safetensors(f.path, header(ok), 40);
    CHECK(SafetensorsFile::open(f.path).tensors().size() == 2);
  }
  TempFile f("empty.safetensors");
  write_safetensors(f.path, R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                               "e": {"dtype": "F32", "shape": [0], "data_offsets": [8, 8]}})", 16);
  CHECK(SafetensorsFile::open(f.path).tensors().size() == 2);
}

TEST_CASE("hostile safetensors: wrong-typed header values name the tensor and the key") {
  expect_contains(safetensors_error(R"({"w": {"dtype": 3, "shape": [2, 4], "data_offsets": [0, 32]}})", 32),
                  {"tensor 'w'", "'dtype'", "string"});
  expect_contains(safetensors_error(R"({"w": {"dtype": "F32", "shape": "2x4", "data_offsets": [0, 32]}})", 32),
                  {"tensor 'w'", "'shape'", "array"});
  expect_contains(safetensors_error(R"({"w": {"dtype": "F32", "shape": [2, 4]}})", 32),
                  {"tensor 'w'", "'data_offsets'", "missing"});
  expect_contains(safetensors_error(R"({"w": [1, 2]})", 32), {"tensor 'w'", "object"});
  expect_contains(safetensors_error(R"({"w": {"dtype": "F32", "shape": [2, 4], "data_offsets": [0, 32, 64]}})", 32),
                  {"tensor 'w'", "'data_offsets'", "2 entries"});
}

// ---- a head's config.json ------------------------------------------------------------------------

namespace {

// A verifier and a matching head on temp files; `edit` changes the head's config.json.
struct HeadFiles {
  TempFile gguf{"hostile_head.gguf"};
  TempDir dir{"hostile_head"};
  LlamaConfig cfg;
  HeadFiles() {
    cfg = write_verifier(gguf.path, 3, 1.0f);
    write_head(dir.path, cfg, gguf.path, 1, 0);
  }
  std::string config_path() const { return dir.path + "/config.json"; }
  void edit(const std::string& key, const nlohmann::json& v) const {
    nlohmann::json j;
    std::ifstream(config_path()) >> j;
    j[key] = v;
    std::ofstream(config_path()) << j.dump();
  }
  void edit_raw(const std::string& key, const std::string& literal) const {
    // A literal the json library would not write itself (e.g. 1e400).
    nlohmann::json j;
    std::ifstream(config_path()) >> j;
    j[key] = "@@";
    std::string s = j.dump();
    s.replace(s.find("\"@@\""), 4, literal);
    std::ofstream(config_path()) << s;
  }
};

}  // namespace

TEST_CASE("hostile head config: integers are exact, in range, and not floats") {
  auto reject = [](auto&& change, std::initializer_list<std::string> what) {
    HeadFiles h;
    change(h);
    std::string msg = error_of([&] { (void)read_head_config(h.config_path()); });
    expect_contains(msg, {h.config_path()});
    expect_contains(msg, what);
  };
  // 2^32 + 64 is 64 once truncated to 32 bits: it must not pass as the verifier's width.
  reject([](const HeadFiles& h) { h.edit("hidden_size", 4294967296ll + 64); }, {"'hidden_size'", "4294967360"});
  reject([](const HeadFiles& h) { h.edit("hidden_size", 64.5); }, {"'hidden_size'", "integer", "64.5"});
  reject([](const HeadFiles& h) { h.edit("hidden_size", 64.0); }, {"'hidden_size'", "integer"});
  reject([](const HeadFiles& h) { h.edit("intermediate_size", -64); }, {"'intermediate_size'", "-64"});
  reject([](const HeadFiles& h) { h.edit("num_attention_heads", 0); }, {"'num_attention_heads'", "0"});
  reject([](const HeadFiles& h) { h.edit("vocab_size", "96"); }, {"'vocab_size'", "integer", "string"});
  reject([](const HeadFiles& h) { h.edit("num_key_value_heads", nullptr); }, {"'num_key_value_heads'", "null"});
  reject([](const HeadFiles& h) { h.edit("hidden_size", 18446744073709551615ull); }, {"'hidden_size'"});
  // The json library itself refuses numbers past a double; its message names the literal.
  reject([](const HeadFiles& h) { h.edit_raw("hidden_size", "1e400"); }, {"not valid JSON", "1e400"});
  reject([](const HeadFiles& h) { h.edit("head_dim", 32); }, {"'head_dim'", "16", "32"});
}

TEST_CASE("hostile head config: rope_theta and rms_norm_eps are range-checked like the verifier's") {
  auto reject = [](const std::string& key, auto&& change, const std::string& what) {
    HeadFiles h;
    change(h);
    expect_contains(error_of([&] { (void)read_head_config(h.config_path()); }), {h.config_path(), "'" + key + "'", what});
  };
  reject("rope_theta", [](const HeadFiles& h) { h.edit("rope_theta", -10000.0); }, "positive");
  reject("rope_theta", [](const HeadFiles& h) { h.edit("rope_theta", 0); }, "positive");
  reject("rope_theta", [](const HeadFiles& h) { h.edit_raw("rope_theta", "1e39"); }, "finite");
  reject("rms_norm_eps", [](const HeadFiles& h) { h.edit("rms_norm_eps", -1); }, "0 < eps < 1");
  reject("rms_norm_eps", [](const HeadFiles& h) { h.edit("rms_norm_eps", 2.0); }, "0 < eps < 1");
  reject("rms_norm_eps", [](const HeadFiles& h) { h.edit("rms_norm_eps", "1e-5"); }, "number");
  reject("rms_norm_eps", [](const HeadFiles& h) { h.edit("rms_norm_eps", 1e-50); }, "0 < eps < 1");
  HeadFiles ok;
  const HeadConfig c = read_head_config(ok.config_path());
  CHECK(c.C == 64);
  CHECK(c.D == 16);
  CHECK(c.rms_eps == doctest::Approx(1e-5));
}

TEST_CASE_FIXTURE(VkTest, "hostile head config: EagleHead refuses what read_head_config refuses, naming file and key") {
  HeadFiles h;
  GgufFile g = GgufFile::open(h.gguf.path);
  ModelOptions mo;
  mo.context = 32;
  LlamaModel model(ctx, g, mo);
  // Truncated to 32 bits this is the verifier's width 64, which would load.
  h.edit("hidden_size", 4294967296ll + 64);
  expect_contains(error_of([&] { EagleHead(ctx, h.dir.path, model, 32, 8); }), {h.config_path(), "'hidden_size'"});
  h.edit("hidden_size", 64);
  h.edit("rope_theta", -10000.0);
  expect_contains(error_of([&] { EagleHead(ctx, h.dir.path, model, 32, 8); }), {h.config_path(), "'rope_theta'"});
  h.edit("rope_theta", 10000.0);
  h.edit("rms_norm_eps", "tiny");
  expect_contains(error_of([&] { EagleHead(ctx, h.dir.path, model, 32, 8); }), {h.config_path(), "'rms_norm_eps'"});
}

// ---- llama2.c checkpoints ----------------------------------------------------------------------

TEST_CASE("hostile llama2.c: a header whose size arithmetic wraps 64 bits is refused, not allocated") {
  // dim=2^20 hidden=2 layers=1048574 heads=1 kv_heads=1 vocab=1 seq_len=14: 28 + 4 x floats is
  // 2^64 + 28, so in 64 bits the header alone "matches" its own size, and the loader then asked
  // for a vector of ~2^62 floats (std::length_error).
  TempFile f("wrap.bin");
  Bytes b;
  for (int32_t v : {1 << 20, 2, 1048574, 1, 1, 1, 14}) b.put(v);
  f.write(b.b);
  expect_contains(error_of([&] { (void)llama2c_to_gguf(f.path); }),
                  {f.path, "does not match its header", "expected 18446744073709551644 bytes"});
}

TEST_CASE("hostile tokenizer: an id past the vocabulary is a vkspec::Error from every accessor") {
  GgufWriter w;
  add_placeholder_llama_vocab(w, 300);
  TempFile f("ids.gguf");
  w.write(f.path);
  GgufFile g = GgufFile::open(f.path);
  const Tokenizer tok = Tokenizer::from_gguf(g);
  for (uint32_t id : {300u, 0xffffffffu}) {
    expect_contains(error_of([&] { (void)tok.token_text(id); }), {f.path, "token id " + std::to_string(id), "300 tokens"});
    expect_contains(error_of([&] { (void)tok.token_type(id); }), {f.path, "token id " + std::to_string(id)});
    expect_contains(error_of([&] { (void)tok.decode(std::vector<uint32_t>{5, id}); }), {f.path, "token id"});
  }
}

// ---- found by probing crafted files (session 19) -------------------------------------------------

TEST_CASE("hostile head config: a deeply nested value is named by its kind, not quoted (quoting recursed off the stack)") {
  // 100,000 levels: nlohmann's dump() recursed once per level quoting it in the error and
  // overflowed the stack; the parse itself is iterative.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  HeadFiles h;
  h.edit_raw("hidden_act", deep);
  expect_contains(error_of([&] { (void)read_head_config(h.config_path()); }), {h.config_path(), "'hidden_act'", "an array of 1 item(s)"});
  HeadFiles b;
  b.edit_raw("attention_bias", deep);
  expect_contains(error_of([&] { (void)read_head_config(b.config_path()); }), {b.config_path(), "an array of 1 item(s)", "is not true or false"});
}

TEST_CASE("hostile safetensors: a deeply nested shape or offset is named by its kind, not quoted") {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  expect_contains(safetensors_error("{\"t\":{\"dtype\":\"F32\",\"shape\":[" + deep + "],\"data_offsets\":[0,4]}}", 4),
                  {"'t'", "shape", "an array of 1 item(s)"});
  expect_contains(safetensors_error("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0," + deep + "]}}", 4),
                  {"'t'", "data_offsets", "an array of 1 item(s)"});
}

TEST_CASE("hostile files: a FIFO named as a model, a head or its config is refused at once, not waited on") {
  TempDir d("fifo");
  const std::string fifo = d.path + "/pipe";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  // Opening a FIFO for reading blocks until a writer comes: each of these would hang.
  expect_contains(error_of([&] { (void)GgufFile::open(fifo); }), {fifo, "is not a regular file"});
  expect_contains(error_of([&] { (void)SafetensorsFile::open(fifo); }), {fifo, "is not a regular file"});
  expect_contains(error_of([&] { (void)read_head_config(fifo); }), {fifo, "is not a regular file"});
  expect_contains(error_of([&] { (void)llama2c_to_gguf(fifo, GgmlType::F16, nullptr); }), {fifo, "is not a regular file"});
  expect_contains(error_of([&] { (void)GgufFile::open(d.path); }), {d.path, "is a directory, not a GGUF file"});
}

TEST_CASE("hostile messages: control bytes quoted from a file are shown as \\xNN, a NUL does not end the message") {
  const char raw[] = "metadata key 'general.architecture': 'lla\0ma\x1b[2J' is not implemented";
  const Error e(std::string(raw, sizeof raw - 1));
  const std::string msg = e.what();
  CHECK(msg == "metadata key 'general.architecture': 'lla\\x00ma\\x1b[2J' is not implemented");
  CHECK(std::string(Error("two\nlines\tand a tab").what()) == "two\nlines\tand a tab");
  // Bytes that are no UTF-8 character are escaped too (stderr stays UTF-8); characters are kept.
  CHECK(std::string(Error("caf\xc3\xa9 \xff\xc3 \xed\xa0\x80 \xf0\x9f\xa6\x99").what()) ==
        "caf\xc3\xa9 \\xff\\xc3 \\xed\\xa0\\x80 \xf0\x9f\xa6\x99");
  // A megabyte quoted from a file: the message keeps its start and end, says what it left out.
  const std::string big = "metadata key 'tokenizer.ggml.pre': '" + std::string(1 << 20, 'x') + "\xc3\xa9' is unknown";
  const std::string cut = Error(big).what();
  CHECK(cut.size() < 4200);
  CHECK(cut.rfind("metadata key 'tokenizer.ggml.pre': 'x", 0) == 0);
  CHECK(cut.find("bytes left out ...]") != std::string::npos);
  CHECK(cut.substr(cut.size() - 14) == "\xc3\xa9' is unknown");
}

TEST_CASE("hostile tokenizer: a byte the vocabulary has no token for (and no <unk>) is refused, not dropped") {
  GgufWriter w;
  add_placeholder_llama_vocab(w, 300);
  std::vector<std::string> toks = placeholder_tokens();
  toks[3 + 'h'] = "<unused_h>";  // no <0x68> token
  w.add_array_string("tokenizer.ggml.tokens", toks);
  std::vector<int32_t> types(300, 5);
  types[0] = 2, types[1] = types[2] = 3;
  for (int i = 3; i < 259; ++i) types[i] = i == 3 + 'h' ? 5 : 6;
  w.add_array_i32("tokenizer.ggml.token_type", types);
  w.remove("tokenizer.ggml.unknown_token_id");
  TempFile f("nobyte.gguf");
  w.write(f.path);
  GgufFile g = GgufFile::open(f.path);
  const Tokenizer t = Tokenizer::from_gguf(g);
  REQUIRE(t.unk() < 0);  // the placeholder vocabulary names no unknown token
  CHECK(!t.encode("ello", false, false).empty());  // every byte of it has a token
  expect_contains(error_of([&] { (void)t.encode("hello", false, false); }), {f.path, "byte 0x68", "<0x68>", "cannot be encoded"});
}

// ---- found by probing tokenizer metadata (session 20) --------------------------------------------

TEST_CASE("hostile tokenizer: byte tokens in lower-case hex encode their bytes, as they decode to them") {
  // "<0x7a>" decodes to 'z'; the encoder looked up only "<0x7A>" and, with an <unk>, turned
  // every 'z' into <unk> without a word.
  GgufWriter w;
  add_placeholder_llama_vocab(w, 300);
  std::vector<std::string> toks = placeholder_tokens();
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02x>", b);
    toks[3 + b] = name;
  }
  w.add_array_string("tokenizer.ggml.tokens", toks);
  w.add_bool("tokenizer.ggml.add_space_prefix", false);  // (a space would be "▁", a piece this vocabulary lacks)
  TempFile f("lowerhex.gguf");
  w.write(f.path);
  GgufFile g = GgufFile::open(f.path);
  const Tokenizer t = Tokenizer::from_gguf(g);
  const std::string text = "zoo\xc3\xa9";
  const auto ids = t.encode(text, false, false);
  for (uint32_t id : ids) CHECK(id != uint32_t(t.unk()));
  CHECK(t.decode(ids) == text);
}

TEST_CASE("hostile tokenizer: 20,000 user-defined tokens: text splits at the longest literal in each place") {
  // Literals: user-defined "ab", "abc", "b", and 20,000 more ("u0" ... "u19999"); control "<s>"
  // only with parse_special; a user-defined text equal to a control one wins; of equal texts the
  // lower id. 200 KB of text against them (a list scanned at every byte took minutes at 60k x 1 MB).
  const int V = 20300;
  GgufWriter w;
  add_placeholder_llama_vocab(w, V);
  std::vector<std::string> toks = placeholder_tokens(V);
  std::vector<int32_t> types(V, 5);
  types[0] = 2, types[1] = types[2] = 3;
  for (int i = 3; i < 259; ++i) types[i] = 6;
  const uint32_t ab = 259, abc = 260, b = 261, dup = 262, ctl_twin = 263;
  toks[ab] = "ab", toks[abc] = "abc", toks[b] = "b", toks[dup] = "abc", toks[ctl_twin] = "</s>";
  for (uint32_t i = ab; i <= ctl_twin; ++i) types[i] = 4;
  for (int i = 264; i < V; ++i) toks[i] = "u" + std::to_string(i - 264), types[i] = 4;
  w.add_array_string("tokenizer.ggml.tokens", toks);
  w.add_array_i32("tokenizer.ggml.token_type", types);
  w.add_bool("tokenizer.ggml.add_space_prefix", false);
  TempFile f("literals.gguf");
  w.write(f.path);
  GgufFile g = GgufFile::open(f.path);
  const Tokenizer t = Tokenizer::from_gguf(g);
  const uint32_t x = 3 + 'x', u19999 = 264 + 19999, u1 = 265;
  // "x" is a byte; "abcab" = "abc" (the lower of two ids) + "ab"; "b"; "<s>" as bytes unless
  // parse_special; "</s>" the user-defined twin; "u19999" the longest of u1, u19, ..., u19999.
  const std::string text = "xabcabb<s></s>u19999u1";
  std::vector<uint32_t> want{x, abc, ab, b};
  for (char c : std::string("<s>")) want.push_back(3 + uint8_t(c));
  for (uint32_t id : {ctl_twin, u19999, u1}) want.push_back(id);
  CHECK(t.encode(text, false, false) == want);
  std::vector<uint32_t> special{x, abc, ab, b, 1, ctl_twin, u19999, u1};
  CHECK(t.encode(text, false, true) == special);
  std::string big;
  while (big.size() < 200000) big += "u" + std::to_string(big.size() % 20000) + "zabc";
  const auto ids = t.encode(big, false, false);
  CHECK(t.decode(ids) == big);
  CHECK(std::count(ids.begin(), ids.end(), abc) > 10000);
}
