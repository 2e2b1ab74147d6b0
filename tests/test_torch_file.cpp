// pytorch_model.bin files written by torch.save itself (tests/torch_fixtures.py, at test time):
// every tensor's bytes equal torch's, and an EAGLE head loads from pytorch_model.bin exactly as
// from model.safetensors.
#include <doctest/doctest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "torch_test_util.hpp"
#include "vk_fixture.hpp"
#include "vkspec/eagle_head.hpp"
#include "vkspec/gguf.hpp"
#include "vkspec/safetensors.hpp"
#include "vkspec/torch_file.hpp"

using namespace vkspec;
using namespace vkspec::test;

namespace {

std::string hex(const uint8_t* p, uint64_t n) {
  static const char digits[] = "0123456789abcdef";
  std::string s;
  for (uint64_t i = 0; i < n; ++i) s += {digits[p[i] >> 4], digits[p[i] & 15]};
  return s;
}

// Every tensor of tiny.json: same names, dtype, shape and bytes.
void check_tiny(const TorchFile& f, const std::string& dir) {
  std::ifstream in(dir + "/tiny.json");
  const nlohmann::json expect = nlohmann::json::parse(in);
  CHECK(f.tensors().size() == expect.size());
  for (const auto& [name, e] : expect.items()) {
    CAPTURE(name);
    auto it = f.tensors().find(name);
    REQUIRE(it != f.tensors().end());
    const SafeTensor& t = it->second;
    CHECK(t.dtype == e["dtype"].get<std::string>());
    CHECK(t.shape == e["shape"].get<std::vector<uint64_t>>());
    CHECK(hex(t.data, t.bytes) == e["hex"].get<std::string>());
  }
}

}  // namespace

TEST_CASE("pytorch_model.bin: every dtype and view torch.save writes reads back bit for bit") {
  const std::string dir = torch_fixtures();
  if (dir.empty()) return;
  SUBCASE("protocol 2 (torch.save's default)") { check_tiny(TorchFile::open(dir + "/tiny.bin"), dir); }
  SUBCASE("protocol 4 (FRAME, MEMOIZE, STACK_GLOBAL)") { check_tiny(TorchFile::open(dir + "/tiny_p4.bin"), dir); }
  SUBCASE("from_bytes reads the same") {
    check_tiny(TorchFile::from_bytes("tiny.bin", read_bytes(dir + "/tiny.bin")), dir);
  }
  SUBCASE("views share storage; strided ones are copied out") {
    const TorchFile f = TorchFile::open(dir + "/tiny.bin");
    const auto& t = f.tensors();
    CHECK(t.at("rows").data == t.at("base").data + 6 * 4);  // a contiguous slice points into its storage
    CHECK(t.at("tied_a").data == t.at("tied_b").data);
    CHECK(t.at("transposed").shape == std::vector<uint64_t>{6, 4});
    CHECK(t.at("scalar").shape.empty());
    CHECK(t.at("scalar").to_f32() == std::vector<float>{3.5f});
    CHECK(t.at("empty").bytes == 0);
    CHECK(t.at("i64").to_f32()[1] == -1.0f);
    CHECK(t.at("bool").to_f32() == std::vector<float>{1, 0, 1});
  }
  SUBCASE("a file moved keeps its tensors") {
    TorchFile a = TorchFile::open(dir + "/tiny.bin");
    const uint8_t* p = a.tensors().at("transposed").data;
    const TorchFile b(std::move(a));
    CHECK(b.tensors().at("transposed").data == p);
    check_tiny(b, dir);
  }
}

TEST_CASE("pytorch_model.bin: the pre-1.6 format is refused with what to do") {
  const std::string dir = torch_fixtures();
  if (dir.empty()) return;
  CHECK_THROWS_WITH_AS(TorchFile::open(dir + "/legacy.bin"), doctest::Contains("before PyTorch 1.6"), Error);
}

TEST_CASE("pytorch_model.bin: a demo head converted with torch.save holds the safetensors bytes") {
  const std::string dir = torch_fixtures();
  if (dir.empty()) return;
  const SafetensorsFile st = SafetensorsFile::open(std::string(VKSPEC_SOURCE_DIR) + "/models/head1/model.safetensors");
  const TorchFile tf = TorchFile::open(dir + "/head1/pytorch_model.bin");
  REQUIRE(tf.tensors().size() == st.tensors().size());
  for (const auto& [name, s] : st.tensors()) {
    CAPTURE(name);
    const SafeTensor& t = tf.get(name, s.shape);
    CHECK(t.dtype == s.dtype);
    REQUIRE(t.bytes == s.bytes);
    CHECK(std::memcmp(t.data, s.data, s.bytes) == 0);
  }
}

TEST_CASE_FIXTURE(VkTest, "EAGLE head from pytorch_model.bin drafts bit-identically to model.safetensors") {
  const std::string dir = torch_fixtures();
  if (dir.empty()) return;
  const std::string models = std::string(VKSPEC_SOURCE_DIR) + "/models/";
  const GgufFile g = GgufFile::open(models + "verifier.gguf");
  ModelOptions mo;
  mo.context = 64;
  mo.max_rows = 16;
  const LlamaModel model(ctx, g, mo);
  EagleHead from_st(ctx, models + "head1", model, 64, 16);
  EagleHead from_bin(ctx, dir + "/head1", model, 64, 16);
  CHECK(from_bin.path() == dir + "/head1/pytorch_model.bin");

  const uint32_t N = 7, C = uint32_t(model.config().C), V = uint32_t(model.config().V);
  std::vector<uint32_t> toks;
  std::vector<int32_t> pos;
  for (uint32_t i = 0; i < N; ++i) toks.push_back((i * 37 + 101) % V), pos.push_back(int32_t(i));
  const std::vector<float> feats = random_floats(size_t(N) * C, 3);
  Buffer tb(ctx, N * 4), fb(ctx, feats.size() * 4), pb(ctx, N * 4);
  tb.upload(toks);
  fb.upload(feats);
  pb.upload(pos);
  auto run = [&](EagleHead& head) {
    Sequence seq(ctx);
    seq.begin();
    EagleHead::ForwardArgs a;
    a.N = N, a.tokens = &tb, a.features = Mat{&fb, 0, C}, a.pos = &pb;
    head.forward(seq, a);
    seq.run();
    std::vector<float> out;
    for (uint32_t r = 0; r < N; ++r) {
      auto h = head.hidden().buf->read<float>(C, size_t(r) * head.hidden().stride * 4);
      auto l = head.logits().buf->read<float>(V, size_t(r) * head.logits().stride * 4);
      out.insert(out.end(), h.begin(), h.end());
      out.insert(out.end(), l.begin(), l.end());
    }
    return out;
  };
  const std::vector<float> a = run(from_st), b = run(from_bin);
  REQUIRE(a.size() == b.size());
  CHECK(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

TEST_CASE_FIXTURE(VkTest, "EAGLE head folder: safetensors preferred over pytorch_model.bin; non-float weights refused") {
  const std::string dir = torch_fixtures();
  if (dir.empty()) return;
  const GgufFile g = GgufFile::open(std::string(VKSPEC_SOURCE_DIR) + "/models/verifier.gguf");
  ModelOptions mo;
  mo.context = 32;
  const LlamaModel model(ctx, g, mo);
  const EagleHead both(ctx, dir + "/head_both", model, 32, 8);
  CHECK(both.path() == dir + "/head_both/model.safetensors");
  CHECK_THROWS_WITH_AS(EagleHead(ctx, dir + "/head1_i64", model, 32, 8),
                       doctest::Contains("tensor fc.bias has dtype I64, expected F32, F16 or BF16"), Error);
  // A .bin file given directly, config.json beside it.
  const EagleHead file(ctx, dir + "/head1/pytorch_model.bin", model, 32, 8);
  CHECK(file.config().C == model.config().C);
}
