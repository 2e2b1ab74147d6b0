// Host side of sampling (shaders/sample_probs.comp, shaders/sample_accept.comp) and the
// host copy of the Philox generator. Both kernels run with a fixed workgroup size: their sums
// then have one order on every device, so a seed gives the same tokens everywhere the logits agree.
#include "vkspec/sample.hpp"

#include <bit>
#include <cassert>
#include <climits>

#include "ops/common.hpp"

namespace vkspec {

using namespace ops;

namespace {

struct ProbsPush {
  uint32_t V, x_offset, x_stride, p_offset, p_stride;
  uint32_t t, W, top_k, greedy;
  float temp, top_p, min_p, penalty;
  uint32_t t_slot, params_slot;
};
static_assert(sizeof(ProbsPush) == 60);

struct AcceptPush {
  uint32_t n, V, p_offset, p_stride, A, step, seed_lo, seed_hi, step_slot, seed_slot;
};
static_assert(sizeof(AcceptPush) == 40);

KernelConfig fixed_workgroup(KernelConfig cfg) {
  if (!cfg.workgroup_size) cfg.workgroup_size = kSampleWorkgroup;
  return cfg;
}

}  // namespace

// Where the driver ends a shader's loops after a budget (DeviceCaps::Quirks::
// loop_iteration_limit), the passes sample_probs.comp makes over a row of V logits, charged as the
// attention kernel's are (attention.cpp: lavapipe charged 3 units a pass there; 4 here):
// P = ceil(V / (VU * WG)) passes per row loop; R = log2(WG) + 1 per workgroup reduction; when
// sampling, two radix descents (top-k, top-p) of 32 + ceil(log2 V) bits, each bit P + R + 1, and
// six more row loops and three reductions; greedy, three row loops and one reduction. Around them
// lane 0's penalty window (the path, <= kTreeMaxPath, twice, then W committed tokens) and the
// de-duplication (W / WG outer passes of W / 16 inner ones). sample_accept.comp's row loops make
// 2 V / WG + WG passes, fewer than these at every V.
uint32_t sample_max_vocab(const Context& ctx, uint32_t window, bool greedy) {
  const uint64_t limit = ctx.caps().quirks.loop_iteration_limit;
  if (!limit) return UINT32_MAX;
  constexpr uint64_t kUnitsPerPass = 4, kUnroll = 32 /* VU */, WG = kSampleWorkgroup, R = 7 /* log2 64 + 1 */;
  const uint64_t fixed = 2 * kTreeMaxPath + window + 1 + (window + WG - 1) / WG * (1 + (window + 15) / 16) + 16;
  uint32_t best = 0;
  for (uint64_t P = 1;; ++P) {  // the count grows with V (P and the id bits): walk P up
    const uint64_t V = P * kUnroll * WG;
    uint64_t ibits = 0;
    while ((uint64_t(1) << ibits) < V) ++ibits;
    const uint64_t passes = greedy ? 3 * P + R + fixed : 2 * (32 + ibits) * (P + R + 1) + 6 * P + 3 * R + fixed;
    if (kUnitsPerPass * passes > limit || V > UINT32_MAX) break;
    best = uint32_t(V);
  }
  return best;
}

std::array<uint32_t, kStateSamplingWords> sampler_state_words(const SamplingOptions& o) {
  return {std::bit_cast<uint32_t>(o.temperature), std::bit_cast<uint32_t>(o.top_p), std::bit_cast<uint32_t>(o.min_p),
          std::bit_cast<uint32_t>(o.repeat_penalty), uint32_t(o.seed), uint32_t(o.seed >> 32)};
}

void sample_probs(Sequence& seq, Mat logits, Mat probs, uint32_t N, uint32_t V, const SamplingOptions& o,
                  const Buffer& seq_tokens, Dyn t, const DeviceTree& tree, KernelConfig cfg, SamplerValues from) {
  assert(N >= 1 && N <= tree.cap && V >= 1 && probs.stride >= V);
  assert(from == SamplerValues::Recorded || !t.fixed());  // the values live beside t
  assert(o.repeat_window <= kSampleMaxWindow && o.top_p > 0 && o.min_p >= 0 && o.min_p <= 1);
  const uint32_t max_v = sample_max_vocab(seq.context(), o.repeat_window, !(o.temperature > 0));
  if (V > max_v)
    throw Error("sampling over a vocabulary of " + std::to_string(V) + " tokens is more than device '" +
                seq.context().caps().name + "' can do: its driver ends a shader's loops after " +
                std::to_string(seq.context().caps().quirks.loop_iteration_limit) +
                " iterations, which the sampling kernel reaches past " + std::to_string(max_v) +
                " tokens (with --repeat-window " + std::to_string(o.repeat_window) + ")" +
                (o.temperature > 0 ? "; use --temp 0" : ""));
  ProbsPush push{V, logits.offset, logits.stride, probs.offset, probs.stride, t.base, o.repeat_window, o.top_k,
                 o.temperature > 0 ? 0u : 1u, o.temperature, o.top_p, o.min_p, o.repeat_penalty, t.slot,
                 from == SamplerValues::FromState ? kStateSampling : kDynFixed};
  const Pipeline& p = simple_pipeline(seq.context(), "sample_probs", 7, sizeof(push), fixed_workgroup(cfg));
  seq.dispatch(p,
               {logits.in(), probs.out(), in(seq_tokens), in(tree.token), in(tree.parent), out(tree.nonfinite),
                t.binding(seq_tokens)},
               push, N, 1, 1, "sample_probs");
}

void accept_sample(Sequence& seq, const DeviceTree& tree, const AcceptSampleArgs& a, KernelConfig cfg) {
  assert(a.n >= 1 && a.n <= tree.cap && a.n <= kTreeMaxNodes && a.accepted && a.V >= 1);  // shared arrays
  assert(a.seed_from == SamplerValues::Recorded || !a.step.fixed());
  const Buffer& info = a.info ? *a.info : tree.info;
  AcceptPush push{a.n,        a.V,  a.probs.offset,         a.probs.stride,
                  tree.max_depth + 1, a.step.base, uint32_t(a.seed), uint32_t(a.seed >> 32), a.step.slot,
                  a.seed_from == SamplerValues::FromState ? kStateSeed : kDynFixed};
  const Pipeline& p = simple_pipeline(seq.context(), "sample_accept", 8, sizeof(push), fixed_workgroup(cfg));
  seq.dispatch(p,
               {in(tree.token), in(tree.parent), in(tree.head), a.probs.in(), out(info), out(*a.accepted),
                in(tree.nonfinite), a.step.binding(tree.token)},
               push, a.trials, 1, 1, "accept_sample");
}

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  for (int r = 0; r < 10; ++r) {
    const uint64_t p0 = uint64_t(0xD2511F53u) * c[0], p1 = uint64_t(0xCD9E8D57u) * c[2];
    c = {uint32_t(p1 >> 32) ^ c[1] ^ k[0], uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k[1], uint32_t(p0)};
    k[0] += 0x9E3779B9u;
    k[1] += 0xBB67AE85u;
  }
  return c;
}

float sample_uniform(uint64_t seed, uint32_t step, uint32_t node, uint32_t trial) {
  const uint32_t x = philox4x32_10({step, node, trial, 0x766b7370u}, {uint32_t(seed), uint32_t(seed >> 32)})[0];
  return float(x >> 8) * (1.0f / 16777216.0f);
}

}  // namespace vkspec
