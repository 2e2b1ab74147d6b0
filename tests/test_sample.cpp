// Sampling that stays exact (include/vkspec/sample.hpp): the Philox generator against published
// answers, the decoding operator G against a plain CPU reference, the tree rejection-sampling
// kernel against a CPU replica (same draws, same result) and against the distribution it must
// produce (chi-square, fixed seeds). End to end through the engine: test_sample_engine.cpp.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <tuple>

#include "chi2.hpp"
#include "tree_order.hpp"
#include "vkspec/step_state.h"
#include "vk_fixture.hpp"
#include "vkspec/sample.hpp"

using namespace vkspec;
using namespace vkspec::test;

namespace {

struct HostTree {
  std::vector<uint32_t> token, head;
  std::vector<int> parent;
  void push(uint32_t tok, int par, uint32_t hd) {
    token.push_back(tok);
    parent.push_back(par);
    head.push_back(hd);
  }
  uint32_t size() const { return uint32_t(token.size()); }
  uint32_t depth(uint32_t i) const {
    uint32_t d = 0;
    for (int j = int(i); j > 0; j = parent[j]) ++d;
    return d;
  }
};

std::unique_ptr<DeviceTree> upload(Context& ctx, const HostTree& h, uint32_t max_depth) {
  auto d = std::make_unique<DeviceTree>(ctx, h.size(), max_depth);
  d->token.upload(h.token);
  d->parent.upload(h.parent);
  d->head.upload(h.head);
  return d;
}

// ---- G on the CPU: the plain definition in include/vkspec/sample.hpp ------------------------
std::vector<float> ref_probs(std::vector<float> y, const SamplingOptions& o, const std::vector<uint32_t>& seq_tokens,
                             uint32_t t, const HostTree& tree, uint32_t node) {
  const uint32_t V = uint32_t(y.size());
  if (o.repeat_penalty != 1.0f) {
    std::vector<uint32_t> win;
    for (int j = int(node); j > 0 && win.size() < o.repeat_window; j = tree.parent[j]) win.push_back(tree.token[j]);
    for (int64_t k = t; k >= 0 && win.size() < o.repeat_window; --k) win.push_back(seq_tokens[k]);
    std::vector<bool> done(V, false);
    for (uint32_t v : win)
      if (v < V && !done[v]) {
        done[v] = true;
        y[v] = y[v] > 0 ? y[v] / o.repeat_penalty : y[v] * o.repeat_penalty;
      }
  }
  // The kernels' order (tree_order.hpp): value desc, id asc, NaN last.
  std::vector<uint32_t> order(V);
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return ranks_before(y[a], a, y[b], b); });
  std::vector<float> p(V, 0.0f);
  if (o.temperature == 0) {
    p[order[0]] = 1;
    return p;
  }
  // Shifted by a finite maximum first, as the kernel does (l / T overflows for T near 1e-38).
  const float m0 = y[order[0]];
  const float shift = std::isfinite(m0) ? m0 : 0.0f;
  for (auto& v : y) v = (v - shift) / o.temperature;
  uint32_t keep = o.top_k && o.top_k < V ? o.top_k : V;
  const float m = y[order[0]];
  // exp(y - m); 1 at the maximum (an infinite maximum shares the mass), 0 for NaN unless all are.
  const auto weight = [m](float v) {
    if (order_key(v) == order_key(m)) return 1.0f;
    if (std::isnan(v)) return 0.0f;
    return std::exp(v - m);
  };
  // f32 like the kernel: at exact boundaries (equal logits) the cut depends on top_p * z in f32.
  float z = 0;
  for (uint32_t r = 0; r < keep; ++r) z += weight(y[order[r]]);
  if (o.top_p < 1) {
    float c = 0;
    uint32_t r = 0;
    while (r < keep) {
      c += weight(y[order[r]]);
      ++r;
      if (c >= o.top_p * z) break;
    }
    keep = r;
  }
  double zz = 0;
  for (uint32_t r = 0; r < keep; ++r) {
    const float e = weight(y[order[r]]);
    if (e >= o.min_p) zz += e, p[order[r]] = e;
  }
  for (auto& v : p) v = float(v / zz);
  return p;
}

// ---- the acceptance walk on the CPU, same draws and same float order as the kernel ------------
struct Walk {
  std::vector<uint32_t> path;  // node indices, root first
  uint32_t next = 0;
};
Walk ref_walk(const HostTree& tr, const std::vector<float>& P, uint32_t V, uint64_t seed, uint32_t step, uint32_t trial) {
  const uint32_t n = tr.size();
  std::vector<uint32_t> level(n, 0);
  level[0] = 1;
  Walk w;
  w.path = {0};
  uint32_t e = 0, r = 0;
  std::vector<uint32_t> rej;
  for (;;) {
    rej.clear();
    float gone = 0;
    int hit = -1;
    for (uint32_t j = r + 1; j < n; ++j) {
      if (level[tr.parent[j]] != e + 1) continue;
      const uint32_t x = tr.token[j];
      if (std::find(rej.begin(), rej.end(), x) != rej.end()) continue;
      const float px = P[r * V + x];
      if (sample_uniform(seed, step + e, j, trial) * (1.0f - gone) < px) {
        hit = int(j);
        break;
      }
      rej.push_back(x);
      gone += px;
    }
    if (hit < 0) break;
    for (uint32_t j = uint32_t(hit); j < n; ++j)
      if (level[tr.parent[j]] == e + 1 && tr.token[j] == tr.token[hit]) level[j] = e + 2;
    ++e;
    r = uint32_t(hit);
    w.path.push_back(r);
  }
  // inverse CDF in chunks of ceil(V / 64), as the kernel sums them
  const uint32_t chunk = (V + 63) / 64;
  std::vector<float> part(64, 0.0f);
  auto q = [&](uint32_t i) { return std::find(rej.begin(), rej.end(), i) != rej.end() ? 0.0f : P[r * V + i]; };
  for (uint32_t k = 0; k < 64; ++k)
    for (uint32_t i = std::min(k * chunk, V); i < std::min(k * chunk + chunk, V); ++i) part[k] += q(i);
  float total = 0;
  for (float x : part) total += x;
  const float target = sample_uniform(seed, step + e, 0, trial) * total;
  float acc = 0;
  w.next = UINT32_MAX;
  for (uint32_t k = 0; k < 64 && w.next == UINT32_MAX; ++k) {
    if (part[k] > 0 && target < acc + part[k]) {
      for (uint32_t i = std::min(k * chunk, V); i < std::min(k * chunk + chunk, V); ++i)
        if (q(i) > 0) {
          acc += q(i);
          if (target < acc) {
            w.next = i;
            break;
          }
        }
    } else {
      acc += part[k];
    }
  }
  return w;
}

// The hand-built merged tree of the acceptance tests: head 1's and head 2's subtrees both hold
// token 1 under the root (and the path 1,0 twice), head 1 drafts a token of probability 0.
//   0 root ─┬ 1:[1]h1 ─┬ 3:[0] ── 5:[2]
//           │          └ 4:[3]
//           ├ 2:[7]h1 (p = 0)
//           ├ 6:[1]h2 ─┬ 7:[0]
//           │          └ 8:[5]
//           └ 9:[4]h2 ── 10:[1]
HostTree merged_tree() {
  HostTree t;
  t.push(0, -1, 0);
  t.push(1, 0, 1);
  t.push(7, 0, 1);
  t.push(0, 1, 1);
  t.push(3, 1, 1);
  t.push(2, 3, 1);
  t.push(1, 0, 2);
  t.push(0, 6, 2);
  t.push(5, 6, 2);
  t.push(4, 0, 2);
  t.push(1, 9, 2);
  return t;
}

constexpr uint32_t kV = 8;
// A Markov chain over 8 tokens: the root's p, then q_x = p(next | last token x). Some entries 0.
std::vector<float> root_p() { return {0.30f, 0.20f, 0.15f, 0.12f, 0.10f, 0.08f, 0.05f, 0.0f}; }
std::vector<std::vector<float>> markov_q() {
  std::vector<std::vector<float>> q(kV, std::vector<float>(kV));
  for (uint32_t x = 0; x < kV; ++x) {
    float s = 0;
    for (uint32_t y = 0; y < kV; ++y) s += q[x][y] = y == (x + 3) % kV ? 0.0f : float(1 + (x * 3 + y * 5) % 7);
    for (auto& v : q[x]) v /= s;
  }
  return q;
}
// p rows for every node: the root's, else q of the node's token (the context's last token).
std::vector<float> node_rows(const HostTree& t) {
  auto q = markov_q();
  std::vector<float> P;
  for (uint32_t i = 0; i < t.size(); ++i) {
    auto r = i == 0 ? root_p() : q[t.token[i]];
    P.insert(P.end(), r.begin(), r.end());
  }
  return P;
}

struct Trials {
  std::vector<uint32_t> info, accepted;
};
Trials run_trials(Context& ctx, const HostTree& t, const std::vector<float>& P, uint32_t trials, uint64_t seed,
                  uint32_t step, uint32_t max_depth, uint32_t V = kV) {
  auto d = upload(ctx, t, max_depth);
  Buffer probs(ctx, P.size() * 4), info(ctx, uint64_t(trials) * 64), acc(ctx, uint64_t(trials) * (max_depth + 1) * 4);
  probs.upload(P);
  Sequence seq(ctx);
  seq.begin();
  AcceptSampleArgs a;
  a.n = t.size(), a.V = V, a.probs = Mat{&probs, 0, V}, a.seed = seed, a.step = step, a.trials = trials;
  a.info = &info, a.accepted = &acc;
  accept_sample(seq, *d, a);
  seq.run();
  return {info.read<uint32_t>(size_t(trials) * 16), acc.read<uint32_t>(size_t(trials) * (max_depth + 1))};
}

// G over N rows of logits on the GPU (read back from `probs`) and on the CPU from the same
// values x (N, V): returns (got, want).
std::pair<std::vector<float>, std::vector<float>> gpu_and_ref_probs(Context& ctx, Mat logits, Buffer& probs, uint32_t N,
                                                                     uint32_t V, const SamplingOptions& o,
                                                                     const Buffer& seq_tokens, uint32_t t,
                                                                     const DeviceTree& d, const std::vector<float>& x,
                                                                     const std::vector<uint32_t>& hist,
                                                                     const HostTree& tr) {
  Sequence seq(ctx);
  seq.begin();
  sample_probs(seq, logits, Mat{&probs, 0, V}, N, V, o, seq_tokens, t, d);
  seq.run();
  std::vector<float> got = probs.read<float>(size_t(N) * V), want;
  for (uint32_t i = 0; i < N; ++i) {
    auto r = ref_probs(std::vector<float>(x.begin() + size_t(i) * V, x.begin() + size_t(i + 1) * V), o, hist, t, tr, i);
    want.insert(want.end(), r.begin(), r.end());
  }
  return {got, want};
}

}  // namespace

TEST_CASE("sampling: Philox4x32-10 matches the Random123 known-answer vectors") {
  auto a = philox4x32_10({0, 0, 0, 0}, {0, 0});
  CHECK(a == std::array<uint32_t, 4>{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
  auto b = philox4x32_10({~0u, ~0u, ~0u, ~0u}, {~0u, ~0u});
  CHECK(b == std::array<uint32_t, 4>{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu});
  auto c = philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u});
  CHECK(c == std::array<uint32_t, 4>{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u});
}

TEST_CASE_FIXTURE(VkTest, "sampling: G equals the CPU reference (temperature, top-k, top-p, min-p, penalty, ties)") {
  // Tree rows share a history; node rows differ by their ancestors' tokens in the window.
  HostTree tr;
  tr.push(3, -1, 0);
  tr.push(5, 0, 1);
  tr.push(2, 0, 1);
  tr.push(5, 1, 1);
  tr.push(0, 3, 1);
  tr.push(7, 4, 1);
  const uint32_t N = tr.size(), t = 29;
  auto d = upload(ctx, tr, 5);
  std::mt19937 rng(7);
  struct Case {
    float temp, top_p, min_p, pen;
    uint32_t top_k, W;
  };
  const Case cases[] = {{1.0f, 1.0f, 0.0f, 1.0f, 0, 64},   {0.8f, 0.9f, 0.0f, 1.0f, 0, 64},
                        {0.7f, 1.0f, 0.0f, 1.0f, 5, 64},   {1.3f, 0.6f, 0.0f, 1.0f, 10, 64},
                        {0.9f, 1.0f, 0.08f, 1.0f, 0, 64},  {0.8f, 0.95f, 0.05f, 1.3f, 40, 16},
                        {0.0f, 1.0f, 0.0f, 1.0f, 0, 64},   {0.0f, 1.0f, 0.0f, 1.5f, 0, 3},
                        {0.6f, 0.8f, 0.02f, 1.1f, 3, 200}, {1.0f, 0.5f, 0.0f, 0.8f, 1, 8},
                        // Near the float minimum (the logits are scaled by 40 for these): l / T
                        // overflowed to ±inf and the row sampled almost uniformly.
                        {1.2e-38f, 1.0f, 0.0f, 1.0f, 0, 64}, {1.2e-38f, 0.9f, 0.05f, 1.2f, 4, 16}};
  for (uint32_t V : {1u, 7u, 23u, 37u, 300u, 1000u}) {
    std::vector<uint32_t> hist(t + 1);
    for (auto& x : hist) x = rng() % (V + 2);  // ids >= V are ignored by the penalty
    Buffer seq_tokens(ctx, hist.size() * 4);
    seq_tokens.upload(hist);
    // Logits on a 0.25 grid: many exact ties, which top-k and top-p must break by id.
    std::vector<float> x(size_t(N) * V);
    for (auto& v : x) v = 0.25f * float(int(rng() % 17) - 8);
    Buffer logits(ctx, x.size() * 4 + 64), probs(ctx, x.size() * 4 + 64);
    bool scaled = false;
    for (const Case& c : cases) {
      if (c.temp > 0 && c.temp < 1e-30f && !scaled) {
        for (auto& v : x) v *= 40.0f;  // the same grid, |l| up to 80: 80 / 1.2e-38 is past the float range
        scaled = true;
      }
      logits.upload(x, 16);  // an offset, to exercise x_offset
      SamplingOptions o;
      o.temperature = c.temp, o.top_p = c.top_p, o.min_p = c.min_p, o.repeat_penalty = c.pen, o.top_k = c.top_k;
      o.repeat_window = c.W;
      auto [got, want] = gpu_and_ref_probs(ctx, Mat{&logits, 4, V}, probs, N, V, o, seq_tokens, t, *d, x, hist, tr);
      const std::string what = "V " + std::to_string(V) + " T " + std::to_string(c.temp) + " k " +
                               std::to_string(c.top_k) + " p " + std::to_string(c.top_p) + " min-p " +
                               std::to_string(c.min_p) + " pen " + std::to_string(c.pen) + " W " + std::to_string(c.W);
      size_t support = 0;
      for (size_t i = 0; i < got.size(); ++i) support += (got[i] > 0) != (want[i] > 0);
      CHECK_MESSAGE(support == 0, what << ": kept sets differ in " << support << " entries");
      check_close(got, want, 1e-6f, 1e-4f, what);
      // Each row is marked for sample_accept exactly when its logits hold NaN or ±inf.
      const auto flags = d->nonfinite.read<uint32_t>(N);
      for (uint32_t i = 0; i < N; ++i) {
        bool bad = false;
        for (uint32_t v = 0; v < V; ++v) bad = bad || !std::isfinite(x[size_t(i) * V + v]);
        CHECK_MESSAGE(flags[i] == (bad ? 1u : 0u), what << " row " << i);
      }
    }
  }
}

// A step recorded once takes the sampler's values from the step state (SamplerValues::FromState),
// written with each prompt: the rows and draws must be those of the same values recorded into the
// command, bit for bit, whatever values the recording itself carries.
TEST_CASE_FIXTURE(VkTest, "sampling: the sampler's values from the step state give the recorded values' rows and draws") {
  HostTree tr;
  tr.push(3, -1, 0);
  tr.push(5, 0, 1);
  tr.push(2, 0, 1);
  tr.push(5, 1, 1);
  const uint32_t N = tr.size(), t = 17, V = 300, trials = 256;
  auto d = upload(ctx, tr, 3);
  std::mt19937 rng(11);
  std::vector<uint32_t> hist(t + 1);
  for (auto& x : hist) x = rng() % V;
  Buffer seq_tokens(ctx, hist.size() * 4), logits(ctx, size_t(N) * V * 4), probs(ctx, size_t(N) * V * 4),
      state(ctx, kStateWords * 4), info(ctx, uint64_t(trials) * 64), acc(ctx, uint64_t(trials) * 4 * 4);
  seq_tokens.upload(hist);
  std::vector<float> x(size_t(N) * V);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (int c = 0; c < 8; ++c) {
    for (auto& v : x) v = 6.0f * u(rng) - 3.0f;
    logits.upload(x);
    SamplingOptions o;  // random values; top-k and the window are recorded either way
    o.temperature = 0.3f + 1.5f * u(rng), o.top_p = c % 2 ? 0.5f + 0.5f * u(rng) : 1.0f;
    o.min_p = c % 3 ? 0.1f * u(rng) : 0.0f, o.repeat_penalty = c % 4 ? 0.8f + 0.6f * u(rng) : 1.0f;
    o.top_k = c % 2 ? 0 : 1 + rng() % 40, o.repeat_window = 1 + rng() % 32;
    o.seed = (uint64_t(rng()) << 32) | rng();
    SamplingOptions other = o;  // what the state-reading recording carries: none of o's values
    other.temperature = o.temperature + 2.0f, other.top_p = 0.25f, other.min_p = 0.5f, other.repeat_penalty = 3.0f;
    other.seed = ~o.seed;
    uint32_t words[kStateWords] = {t};
    const auto w = sampler_state_words(o);
    std::copy(w.begin(), w.end(), words + kStateSampling);
    state.upload(std::vector<uint32_t>(words, words + kStateWords));
    auto run = [&](bool from_state) {
      Sequence seq(ctx);
      seq.begin();
      const Dyn tt = from_state ? Dyn(state, kStateT) : Dyn(t);
      const SamplerValues from = from_state ? SamplerValues::FromState : SamplerValues::Recorded;
      sample_probs(seq, Mat{&logits, 0, V}, Mat{&probs, 0, V}, N, V, from_state ? other : o, seq_tokens, tt, *d, {}, from);
      AcceptSampleArgs a;
      a.n = N, a.V = V, a.probs = Mat{&probs, 0, V}, a.seed = from_state ? other.seed : o.seed, a.step = tt;
      a.seed_from = from, a.trials = trials, a.info = &info, a.accepted = &acc;
      accept_sample(seq, *d, a);
      seq.run();
      return std::make_tuple(probs.read<uint32_t>(size_t(N) * V), info.read<uint32_t>(size_t(trials) * 16),
                             acc.read<uint32_t>(size_t(trials) * 4));
    };
    const auto recorded = run(false), from_state = run(true);
    CAPTURE(c);
    CHECK(std::get<0>(recorded) == std::get<0>(from_state));  // the rows' bits
    CHECK(std::get<1>(recorded) == std::get<1>(from_state));  // every trial's outcome
    CHECK(std::get<2>(recorded) == std::get<2>(from_state));
  }
}

TEST_CASE_FIXTURE(VkTest, "sampling: the walk takes nothing from a node whose logits were not finite, and flags its draw") {
  // Chain root 0 → 1 (token 3) → 2 (token 4); p makes every trial accept both: the root's row is
  // one-hot at 3, node 1's at 4. A node marked non-finite stops the walk there, and the next root
  // drawn from it carries kTokenNonFinite (advance.glsl then emits nothing from it).
  HostTree tr;
  tr.push(1, -1, 0);
  tr.push(3, 0, 1);
  tr.push(4, 1, 1);
  std::vector<float> P(3 * size_t(kV), 0.0f);
  P[3] = 1.0f, P[kV + 4] = 1.0f;
  for (uint32_t v = 0; v < kV; ++v) P[2 * size_t(kV) + v] = 1.0f / kV;
  const uint32_t trials = 64;
  for (int bad : {-1, 0, 1, 2}) {
    auto d = upload(ctx, tr, 3);
    std::vector<uint32_t> flags(3, 0);
    if (bad >= 0) flags[bad] = 1;
    d->nonfinite.upload(flags);
    Buffer probs(ctx, P.size() * 4), info(ctx, uint64_t(trials) * 64), acc(ctx, uint64_t(trials) * 4 * 4);
    probs.upload(P);
    Sequence seq(ctx);
    seq.begin();
    AcceptSampleArgs a;
    a.n = 3, a.V = kV, a.probs = Mat{&probs, 0, kV}, a.seed = 5, a.step = 9, a.trials = trials;
    a.info = &info, a.accepted = &acc;
    accept_sample(seq, *d, a);
    seq.run();
    const auto in = info.read<uint32_t>(size_t(trials) * 16);
    // Where the walk ends: node 2 (clean, or marked itself), else the marked node.
    const uint32_t stop = bad < 0 || bad == 2 ? 2u : uint32_t(bad);
    for (uint32_t b = 0; b < trials; ++b) {
      CAPTURE(bad);
      CAPTURE(b);
      CHECK(in[b * 16 + kInfoAccepted] == stop);
      const uint32_t next = in[b * 16 + kInfoNextRoot];
      CHECK(((next & kTokenNonFinite) != 0) == (bad >= 0));
      CHECK((next & ~kTokenNonFinite) < kV);
    }
  }
}

TEST_CASE_FIXTURE(VkTest, "sampling: G on NaN and ±Inf logits is a distribution equal to the CPU reference") {
  // Rows of a broken verifier: scattered NaN / ±Inf, all NaN, two +inf (they share the mass),
  // -inf with NaN; NaN never gets mass unless the whole row is NaN.
  HostTree tr;
  tr.push(3, -1, 0);
  tr.push(5, 0, 1);
  tr.push(2, 0, 1);
  tr.push(5, 1, 1);
  tr.push(6, 2, 1);  // a clean row
  const uint32_t N = tr.size(), t = 5;
  auto d = upload(ctx, tr, 3);
  std::vector<uint32_t> hist(t + 1, 1);
  Buffer seq_tokens(ctx, hist.size() * 4);
  seq_tokens.upload(hist);
  std::mt19937 rng(11);
  for (uint32_t V : {1u, 7u, 37u, 300u}) {
    std::vector<float> x(size_t(N) * V);
    for (uint32_t i = 0; i < N; ++i)
      for (uint32_t v = 0; v < V; ++v) {
        const uint32_t r = rng() % 6;
        const float f = 0.25f * float(int(rng() % 17) - 8);
        float& y = x[size_t(i) * V + v];
        switch (i) {
          case 0: y = r == 0 ? kNaN : r == 1 ? kInf : r == 2 ? -kInf : f; break;
          case 1: y = kNaN; break;
          case 2: y = v == V / 3 || v == V - 1 ? kInf : r == 0 ? kNaN : f; break;
          case 3: y = r < 2 ? kNaN : -kInf; break;
          default: y = f; break;
        }
      }
    Buffer logits(ctx, x.size() * 4), probs(ctx, x.size() * 4);
    logits.upload(x);
    SamplingOptions cases[4];
    cases[0].temperature = 1.0f;
    cases[1].temperature = 0.8f, cases[1].top_p = 0.9f, cases[1].top_k = 5;
    cases[2].temperature = 0.7f, cases[2].min_p = 0.05f, cases[2].repeat_penalty = 1.3f;
    cases[3].temperature = 0.0f, cases[3].repeat_penalty = 1.2f;
    for (const SamplingOptions& o : cases) {
      auto [got, want] = gpu_and_ref_probs(ctx, Mat{&logits, 0, V}, probs, N, V, o, seq_tokens, t, *d, x, hist, tr);
      const std::string what = "V " + std::to_string(V) + " T " + std::to_string(o.temperature);
      for (uint32_t i = 0; i < N; ++i) {
        double sum = 0;
        bool finite = true, all_nan = true;
        for (uint32_t v = 0; v < V; ++v) all_nan = all_nan && std::isnan(x[size_t(i) * V + v]);
        for (uint32_t v = 0; v < V; ++v) {
          const float q = got[size_t(i) * V + v];
          finite = finite && std::isfinite(q) && q >= 0;
          sum += q;
          if (std::isnan(x[size_t(i) * V + v]) && !all_nan) CHECK_MESSAGE(q == 0.0f, what << " NaN logit got mass");
        }
        CHECK_MESSAGE(finite, what << " row " << i);
        CHECK_MESSAGE(std::fabs(sum - 1.0) < 1e-4, what << " row " << i << " sums to " << sum);
      }
      check_close(got, want, 1e-6f, 1e-4f, what);
    }
  }
}

TEST_CASE_FIXTURE(VkTest, "sampling: acceptance kernel equals a CPU replica draw for draw") {
  const HostTree tr = merged_tree();
  const auto P = node_rows(tr);
  const uint32_t trials = 3000, D = 3;
  Trials r = run_trials(ctx, tr, P, trials, 0x1234567890abcdefull, 1000, D);
  size_t bad = 0, first_bad = SIZE_MAX;
  for (uint32_t b = 0; b < trials; ++b) {
    Walk w = ref_walk(tr, P, kV, 0x1234567890abcdefull, 1000, b);
    const uint32_t a = r.info[b * 16 + kInfoAccepted];
    bool ok = a + 1 == w.path.size() && r.info[b * 16 + kInfoNextRoot] == w.next;
    for (uint32_t e = 0; ok && e <= a; ++e) ok = r.accepted[b * (D + 1) + e] == w.path[e];
    if (!ok && bad++ == 0) first_bad = b;
  }
  CHECK_MESSAGE(bad == 0, bad << " trials differ from the CPU replica, first " << first_bad);
}

// Real vocabularies (Qwen2: 152,064 tokens) make the kernels' row loops long enough to reach a
// driver's loop budget (DeviceCaps::Quirks::loop_iteration_limit: lavapipe returned infinities
// and wrong kept sets from sample_probs, before its row loops were unrolled). G runs at the
// largest vocabulary sample_max_vocab allows with the longest penalty window, where a budget
// exists, and must still equal the CPU reference.
TEST_CASE_FIXTURE(VkTest, "sampling: G at the largest vocabulary the device allows equals the CPU reference") {
  HostTree tr;
  tr.push(3, -1, 0);
  tr.push(5, 0, 1);
  tr.push(2, 1, 1);
  const uint32_t N = tr.size(), t = 1500, W = kSampleMaxWindow;
  auto d = upload(ctx, tr, 3);
  const uint32_t bound = sample_max_vocab(ctx, W, false);
  CHECK(bound >= 152064u);  // a Qwen2 or Llama 3 vocabulary must be sampleable
  const uint32_t V = std::min(bound, 262144u);
  CHECK(sample_max_vocab(ctx, W, true) >= V);  // greedy does less per row
  std::mt19937 rng(11);
  std::vector<uint32_t> hist(t + 1);
  for (auto& x : hist) x = rng() % 400;  // a window with many repeats, all penalised
  Buffer seq_tokens(ctx, hist.size() * 4);
  seq_tokens.upload(hist);
  std::vector<float> x(size_t(N) * V);
  // Peaked like a language model's row: ~1/256 of the ids high (5..10), the rest far below
  // (-30..-20), on a 0.01 grid (ties). Over a flat row top-p's cut falls among tokens of
  // probability ~1e-5, and the reference's sequential f32 sum (which drops addends below half an
  // ulp of the running total) moves it by itself; here the low tail weighs nothing in any order.
  for (auto& v : x) v = rng() % 256 == 0 ? 5.0f + 0.01f * float(rng() % 500) : -30.0f + 0.01f * float(rng() % 1000);
  Buffer logits(ctx, x.size() * 4), probs(ctx, x.size() * 4);
  logits.upload(x);
  struct Case {
    float temp, top_p, min_p, pen;
    uint32_t top_k;
  };
  for (const Case& c : {Case{0.8f, 0.9f, 0.0f, 1.3f, 0}, Case{1.1f, 1.0f, 0.0f, 1.0f, 40}, Case{0.0f, 1.0f, 0.0f, 1.2f, 0}}) {
    SamplingOptions o;
    o.temperature = c.temp, o.top_p = c.top_p, o.min_p = c.min_p, o.repeat_penalty = c.pen, o.top_k = c.top_k;
    o.repeat_window = W;
    auto [got, want] = gpu_and_ref_probs(ctx, Mat{&logits, 0, V}, probs, N, V, o, seq_tokens, t, *d, x, hist, tr);
    const std::string what = "V " + std::to_string(V) + " T " + std::to_string(c.temp) + " k " +
                             std::to_string(c.top_k) + " p " + std::to_string(c.top_p);
    size_t support = 0;
    for (size_t i = 0; i < got.size(); ++i) support += (got[i] > 0) != (want[i] > 0);
    CHECK_MESSAGE(support == 0, what << ": kept sets differ in " << support << " entries");
    check_close(got, want, 1e-6f, 1e-4f, what);
  }
  if (bound != UINT32_MAX) {  // past the bound: refused by name, not computed wrong
    SamplingOptions o;
    o.temperature = 0.8f, o.repeat_window = W;
    Sequence seq(ctx);
    seq.begin();
    CHECK_THROWS_WITH(sample_probs(seq, Mat{&logits, 0, bound + 1}, Mat{&probs, 0, bound + 1}, 1, bound + 1, o,
                                   seq_tokens, t, *d),
                      doctest::Contains(("vocabulary of " + std::to_string(bound + 1) + " tokens").c_str()));
  }
}

TEST_CASE_FIXTURE(VkTest, "sampling: acceptance kernel at a 152,064-token vocabulary equals the CPU replica") {
  // The Markov rows of the 8-token test over a real vocabulary: 0.8 of each row's mass on the
  // first 8 ids (the tree's tokens), 0.2 spread over every 997th id past them, and nothing
  // elsewhere — as after top-p. The next-root draw then walks chunks all over the row, most of
  // each chunk without mass (a per-token scan of those once ran past lavapipe's loop budget).
  const HostTree tr = merged_tree();
  const uint32_t V = 152064, trials = 200, D = 3;
  const auto small = node_rows(tr);
  std::vector<float> P(size_t(tr.size()) * V);
  for (uint32_t i = 0; i < tr.size(); ++i) {
    float* row = &P[size_t(i) * V];
    const uint32_t spread = (V - 1) / 997;
    for (uint32_t v = 997; v < V; v += 997) row[v] = 0.2f / float(spread);
    for (uint32_t v = 0; v < kV; ++v) row[v] = 0.8f * small[size_t(i) * kV + v];
  }
  Trials r = run_trials(ctx, tr, P, trials, 0xfeedface12345678ull, 77, D, V);
  size_t bad = 0, first_bad = SIZE_MAX, far = 0;
  for (uint32_t b = 0; b < trials; ++b) {
    Walk w = ref_walk(tr, P, V, 0xfeedface12345678ull, 77, b);
    const uint32_t a = r.info[b * 16 + kInfoAccepted];
    bool ok = a + 1 == w.path.size() && r.info[b * 16 + kInfoNextRoot] == w.next;
    for (uint32_t e = 0; ok && e <= a; ++e) ok = r.accepted[b * (D + 1) + e] == w.path[e];
    far += w.next >= kV;
    if (!ok && bad++ == 0) first_bad = b;
  }
  CHECK_MESSAGE(bad == 0, bad << " trials differ from the CPU replica, first " << first_bad);
  CHECK_MESSAGE(far > 0, "no draw landed past the first ids: the test would not see a wrong chunk walk");
}

TEST_CASE_FIXTURE(VkTest, "sampling: tree rejection sampling emits p(x1) and p(x1) p(x2 | x1) (chi-square)") {
  // 40,000 independent walks over one merged tree with duplicates, in ONE dispatch (trial b is
  // workgroup b, drawing with counter trial = b). First emitted token x1 = the first accepted
  // draft, else the next root; x2 = the second accepted draft, else the next root after one
  // accepted draft. After no accepted draft x2 would come from the next step's own tree; here it
  // is drawn on the CPU from q_{x1} (what that step samples), so the pair law tests the walk's
  // second level where it decides x2 and its first level everywhere.
  const HostTree tr = merged_tree();
  const auto P = node_rows(tr);
  const auto p = root_p();
  const auto q = markov_q();
  const uint32_t trials = 40000, D = 3;
  Trials r = run_trials(ctx, tr, P, trials, 20240607, 77, D);
  std::vector<double> o1(kV, 0), o2(kV * kV, 0);
  std::mt19937 rng(5);
  std::vector<double> accepted_hist(D + 1, 0);
  for (uint32_t b = 0; b < trials; ++b) {
    const uint32_t a = r.info[b * 16 + kInfoAccepted], next = r.info[b * 16 + kInfoNextRoot];
    std::vector<uint32_t> toks;
    for (uint32_t e = 1; e <= a; ++e) toks.push_back(tr.token[r.accepted[b * (D + 1) + e]]);
    toks.push_back(next);
    if (toks.size() < 2) toks.push_back(uint32_t(std::discrete_distribution<int>(q[toks[0]].begin(), q[toks[0]].end())(rng)));
    ++accepted_hist[a];
    o1[toks[0]] += 1;
    o2[toks[0] * kV + toks[1]] += 1;
  }
  std::vector<double> e1(kV), e2(kV * kV);
  for (uint32_t x = 0; x < kV; ++x) {
    e1[x] = trials * double(p[x]);
    for (uint32_t y = 0; y < kV; ++y) e2[x * kV + y] = trials * double(p[x]) * double(q[x][y]);
  }
  const Chi2 c1 = chi2_fit(o1, e1), c2 = chi2_fit(o2, e2);
  MESSAGE("x1: chi2 " << c1.stat << ", df " << c1.df << ", critical (p = 0.001) " << chi2_crit_001(c1.df));
  MESSAGE("(x1, x2): chi2 " << c2.stat << ", df " << c2.df << ", critical (p = 0.001) " << chi2_crit_001(c2.df));
  MESSAGE("accepted drafts per walk: a=0 " << accepted_hist[0] << ", 1 " << accepted_hist[1] << ", 2 "
                                           << accepted_hist[2] << ", 3 " << accepted_hist[3]);
  CHECK(c1.impossible == 0);
  CHECK(c2.impossible == 0);
  CHECK(c1.stat < chi2_crit_001(c1.df));
  CHECK(c2.stat < chi2_crit_001(c2.df));
  CHECK(accepted_hist[2] > 0);  // the second level was exercised
}
