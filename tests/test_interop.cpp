// vkspec against llama.cpp's own logits (../shared/interop/, its README): random-weight GGUF
// models of several architectures and file types, each with the logits llama.cpp's CPU backend
// computed for 3 prompts of 24 ids and its 32-token greedy continuations.
//
// Per file: load; the 24 prompt rows (one pass) within the row-relative tolerance of the file's
// kind; then the continuation teacher-forced one token per pass (the decode path): the argmax at
// step s must be ids[s] wherever llama.cpp's top-2 gap exceeds the kind's margin, and the stored
// top-5 logits must lie within the same tolerance of the step's row range.
//
// A file whose tensor types vkspec does not read yet must be refused at load with a message
// naming the tensor and its type; the case then prints NOT RUN with that message (never a pass
// without a comparison). When the type lands, the same entry compares.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "cpu_reference.hpp"
#include "vk_fixture.hpp"
#include "vkspec/model.hpp"
#include "vkspec/score.hpp"

using namespace vkspec;
using namespace vkspec::test;

namespace {

// Tolerances from the interop README ("Suggested tolerances"), err(row) = max |ours - llama.cpp|
// over the vocabulary / (max - min of llama.cpp's row):
// - F16 files: llama.cpp is within 6e-4 of the float64 model (its f16 Q, K/V and softmax
//   probabilities); f32 accumulation with an f32 cache adds well under 1e-3. 2e-3 per row still
//   catches an ignored rope_freqs (3.9e-3) and every structural mistake (>= 0.2).
// - Quantized files: llama.cpp rounds activations to 8 bits before every weight matmul, which
//   puts it up to 2.7e-2 (median 1.0-1.5e-2) from the exact model of the same weights; vkspec keeps
//   f32 activations, so it lands at that distance: 6e-2 per row, 3e-2 for the median row.
// Greedy margins: a token must match where llama.cpp's top-2 gap exceeds several times what
// the row tolerance allows in logits (2e-3 · ~7 ≈ 0.014 for F16; ~0.1 for quantized files).
struct Kind {
  const char* name;
  double row_max, row_median, gap;
};
constexpr Kind kF16{"f16", 2e-3, 2e-3, 0.03};
constexpr Kind kQuant{"quantized", 6e-2, 3e-2, 0.2};

struct Expected {
  std::vector<std::vector<uint32_t>> prompts;  // (3, 24)
  struct Greedy {
    std::vector<uint32_t> ids;
    std::vector<double> gap;
    std::vector<std::vector<std::pair<uint32_t, float>>> top5;
    std::vector<std::pair<float, float>> min_max;
  };
  std::vector<Greedy> greedy;
  std::vector<float> logits;  // (3, 24, V)
  uint32_t V = 0;
};

Expected read_expected(const std::string& stem_path) {
  std::ifstream js(stem_path + ".tokens.json");
  REQUIRE_MESSAGE(js, "cannot read " << stem_path << ".tokens.json");
  const nlohmann::json j = nlohmann::json::parse(js);
  Expected e;
  e.V = j.at("n_vocab").get<uint32_t>();
  e.prompts = j.at("prompts").get<std::vector<std::vector<uint32_t>>>();
  for (const auto& g : j.at("greedy")) {
    Expected::Greedy x;
    x.ids = g.at("ids").get<std::vector<uint32_t>>();
    x.gap = g.at("top2_gap").get<std::vector<double>>();
    for (const auto& row : g.at("top5")) {
      std::vector<std::pair<uint32_t, float>> t;
      for (const auto& p : row) t.push_back({p.at(0).get<uint32_t>(), p.at(1).get<float>()});
      x.top5.push_back(t);
    }
    for (const auto& mm : g.at("row_min_max")) x.min_max.push_back({mm.at(0).get<float>(), mm.at(1).get<float>()});
    e.greedy.push_back(std::move(x));
  }
  const auto shape = j.at("logits").at("shape").get<std::vector<size_t>>();
  REQUIRE(shape == std::vector<size_t>{e.prompts.size(), e.prompts[0].size(), e.V});
  std::ifstream lf(stem_path + ".logits.f32", std::ios::binary);
  e.logits.resize(shape[0] * shape[1] * shape[2]);
  lf.read(reinterpret_cast<char*>(e.logits.data()), std::streamsize(e.logits.size() * 4));
  REQUIRE_MESSAGE(lf.gcount() == std::streamsize(e.logits.size() * 4), "short read of " << stem_path << ".logits.f32");
  return e;
}

// Row errors of `got` (rows, V) against llama.cpp's rows.
struct RowStats {
  std::vector<double> rel;  // per row: max abs diff / row range
  double max_abs = 0;
  void add(std::span<const float> got, std::span<const float> ref) {
    const auto [mn, mx] = std::minmax_element(ref.begin(), ref.end());
    double worst = 0;
    for (size_t v = 0; v < ref.size(); ++v) {
      const double d = std::fabs(double(got[v]) - ref[v]);
      worst = std::isnan(d) ? INFINITY : std::max(worst, d);
    }
    max_abs = std::max(max_abs, worst);
    rel.push_back(worst / (double(*mx) - *mn));
  }
  double max_rel() const { return rel.empty() ? 0 : *std::max_element(rel.begin(), rel.end()); }
  double median_rel() const {
    if (rel.empty()) return 0;
    auto r = rel;
    std::nth_element(r.begin(), r.begin() + r.size() / 2, r.end());
    return r[r.size() / 2];
  }
};

std::string interop_path(const std::string& stem) {
  const std::string p = shared_file("interop/" + stem + ".gguf");
  return p.empty() ? p : p.substr(0, p.size() - 5);
}

void run_interop(Context& ctx, const std::string& stem, const Kind& kind) {
  const std::string base = interop_path(stem);
  if (base.empty()) return;
  const Expected e = read_expected(base);
  std::optional<GgufFile> g;
  try {
    g.emplace(GgufFile::open(base + ".gguf"));
  } catch (const Error& err) {
    // A tensor type vkspec does not read yet: the refusal must name the tensor and the type.
    const std::string msg = err.what();
    REQUIRE_MESSAGE(msg.find("unsupported tensor type") != std::string::npos, stem << ": " << msg);
    CHECK(msg.find("tensor '") != std::string::npos);
    MESSAGE("NOT RUN: " << stem << " (" << std::string(kind.name) << "): vkspec refuses the file: " << msg);
    return;
  }
  ModelOptions mo;
  mo.context = 64;  // what llama.cpp used; 24 + 31 positions
  mo.max_rows = 24;
  LlamaModel m(ctx, *g, mo);
  REQUIRE(uint32_t(m.config().V) == e.V);
  ChainRunner run(m);
  RowStats prompt_rows, decode_rows;
  int checked = 0, mismatched = 0;
  std::string mismatches;
  for (size_t p = 0; p < e.prompts.size(); ++p) {
    const auto& prompt = e.prompts[p];
    const size_t T = prompt.size();
    run.reset();
    const std::vector<float> got = run.logits(prompt);
    for (size_t t = 0; t < T; ++t)
      prompt_rows.add(std::span(got).subspan(t * e.V, e.V), std::span(e.logits).subspan((p * T + t) * e.V, e.V));
    // Teacher-forced continuation: step 0 is the last prompt row; step s feeds ids[s-1].
    const auto& gr = e.greedy[p];
    std::vector<float> row(got.end() - e.V, got.end());
    for (size_t s = 0; s < gr.ids.size(); ++s) {
      if (s > 0) row = run.logits(std::span(&gr.ids[s - 1], 1));
      const uint32_t mine = argmax(row);
      if (gr.gap[s] > kind.gap) {
        ++checked;
        if (mine != gr.ids[s]) {
          ++mismatched;
          mismatches += " p" + std::to_string(p) + "s" + std::to_string(s) + ":" + std::to_string(mine) + "!=" +
                        std::to_string(gr.ids[s]) + "(gap " + std::to_string(gr.gap[s]) + ")";
        }
      }
      // The stored top-5 of the step against ours, relative to llama.cpp's row range.
      std::vector<float> want, mine5;
      for (const auto& [id, logit] : gr.top5[s]) want.push_back(logit), mine5.push_back(row[id]);
      const auto [mn, mx] = gr.min_max[s];
      want.push_back(mn), mine5.push_back(*std::min_element(row.begin(), row.end()));
      want.push_back(mx), mine5.push_back(*std::max_element(row.begin(), row.end()));
      decode_rows.add(mine5, want);
    }
  }
  MESSAGE(stem << " vs llama.cpp: prompt rows max abs " << prompt_rows.max_abs << " logits, row-relative max "
               << prompt_rows.max_rel() << " median " << prompt_rows.median_rel() << "; decode top-5 row-relative max "
               << decode_rows.max_rel() << "; greedy " << checked - mismatched << "/" << checked
               << " steps with gap > " << kind.gap << " match" << mismatches);
  CHECK_MESSAGE(prompt_rows.max_rel() <= kind.row_max, stem << ": worst prompt row " << prompt_rows.max_rel()
                                                               << " of its range > " << kind.row_max);
  CHECK_MESSAGE(prompt_rows.median_rel() <= kind.row_median, stem << ": median prompt row " << prompt_rows.median_rel());
  CHECK_MESSAGE(decode_rows.max_rel() <= kind.row_max, stem << ": worst decode step " << decode_rows.max_rel());
  CHECK_MESSAGE(mismatched == 0, stem << ": greedy tokens differ where llama.cpp's choice is clear:" << mismatches);
  // Not vacuous: ~85% of the 96 steps have a gap > 0.03 and ~50% one > 0.2 (README).
  CHECK(checked >= 30);
}

}  // namespace

// One line per file: the quantized files of these architectures join as they become readable.
#define INTEROP_CASE(stem, kind) \
  TEST_CASE_FIXTURE(VkTest, "interop: " stem " matches llama.cpp's logits and greedy tokens") { run_interop(ctx, stem, kind); }

INTEROP_CASE("llama-mha-f16", kF16)
INTEROP_CASE("llama-mqa-f16", kF16)
INTEROP_CASE("llama3-gqa-f16", kF16)
INTEROP_CASE("qwen2-f16", kF16)
INTEROP_CASE("phi3-f16", kF16)
INTEROP_CASE("llama-mha-Q8_0", kQuant)
INTEROP_CASE("llama-mha-Q4_0", kQuant)
INTEROP_CASE("llama-mha-Q5_0", kQuant)
INTEROP_CASE("llama-mha-Q5_1", kQuant)
INTEROP_CASE("llama-mha-Q4_K_M", kQuant)
INTEROP_CASE("llama-mha-Q5_K_M", kQuant)
INTEROP_CASE("llama-mha-Q6_K", kQuant)
INTEROP_CASE("llama-mha-Q3_K_M", kQuant)
INTEROP_CASE("llama-mha-IQ4_XS", kQuant)
INTEROP_CASE("llama-mqa-Q4_K_M", kQuant)
INTEROP_CASE("llama3-gqa-Q4_K_M", kQuant)
INTEROP_CASE("qwen2-Q4_K_M", kQuant)
INTEROP_CASE("phi3-Q4_K_M", kQuant)

// The CPU reference, the oracle of test_model.cpp's random models (and the only one for Qwen3,
// which has no llama.cpp file here), on the same files: its RoPE pairing and frequency factors,
// fused tensors, biases and tied output are llama.cpp's.
TEST_CASE("interop: the CPU reference matches llama.cpp's prompt logits on every F16 file") {
  for (const char* stem : {"llama-mha-f16", "llama-mqa-f16", "llama3-gqa-f16", "qwen2-f16", "phi3-f16"}) {
    const std::string base = interop_path(stem);
    if (base.empty()) continue;
    const Expected e = read_expected(base);
    const GgufFile g = GgufFile::open(base + ".gguf");
    CpuReference ref(g, 64);
    RowStats rows;
    for (size_t p = 0; p < e.prompts.size(); ++p) {
      ref.reset();
      const auto out = ref.forward(e.prompts[p]);
      const size_t T = e.prompts[p].size();
      for (size_t t = 0; t < T; ++t)
        rows.add(std::span(out.logits).subspan(t * e.V, e.V), std::span(e.logits).subspan((p * T + t) * e.V, e.V));
    }
    MESSAGE(std::string(stem) << ": CPU reference vs llama.cpp, row-relative max " << rows.max_rel());
    CHECK_MESSAGE(rows.max_rel() <= kF16.row_max, std::string(stem) << ": CPU reference row-relative max " << rows.max_rel());
  }
}
