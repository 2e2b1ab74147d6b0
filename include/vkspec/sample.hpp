// Sampling that stays exact (DESIGN.md §3, seed 000 §6.2, seed 001 §6.2): the decoding operator G
// on the GPU, tree rejection sampling as an acceptance kernel, and the counter-based generator
// both draw from.
//
// G (sample_probs): logits row of node i -> probability row p_i, in this order:
//   1. repetition penalty (llama.cpp): every token in the window gets logit/penalty if logit > 0,
//      else logit*penalty (once per token, however often it occurs in the window);
//   2. temperature: logit / T (T == 0: greedy, p = one-hot at the arg-max, ties to the lower id);
//   3. top-k: keep the k best by (logit desc, id asc) — ties at the boundary go to the lower id;
//   4. top-p: of those, keep the smallest best-first prefix whose renormalised mass is >= top_p;
//   5. min-p: keep tokens with p >= min_p * p_max;
//   then renormalise. (HF / vLLM order: temperature before the truncations; llama.cpp applies
//   its temperature last, so top-p/min-p sets differ from llama.cpp's at T != 1.)
// The penalty window of node i is the last W tokens of the sequence the verifier saw at that
// node: committed y[0..t] (y[t] = the step's root) followed by the tokens of i's ancestors below
// the root and i itself. That is exactly the window `ar` uses when it samples at the same
// position, so G gives every strategy the distribution `ar` would sample from.
//
// Randomness: Philox4x32-10 (Salmon et al., SC'11), key = seed, counter = (step, node, trial,
// 'vksp'); word 0 -> u = (x >> 8) * 2^-24 in [0, 1). step = the index of the last token of the
// context whose distribution is sampled (t + depth of the current node), node = the tree index
// of the child being tried, or 0 for the final draw from what is left. A root-only tree (`ar`)
// therefore draws the same u at the same position as a speculative step whose drafts were all
// absent, and each (step, node) is used at most once along any realised trajectory.
#pragma once

#include <array>
#include <cstdint>

#include "vkspec/ops.hpp"
#include "vkspec/tree.hpp"

namespace vkspec {

struct SamplingOptions {
  float temperature = 0;     // 0: greedy
  float top_p = 1;           // 1: off
  float min_p = 0;           // 0: off
  float repeat_penalty = 1;  // 1: off
  uint32_t top_k = 0;        // 0: off
  uint32_t repeat_window = 64;
  uint64_t seed = 0;
  // True when generation needs G (anything but plain greedy without a penalty).
  bool active() const { return temperature > 0 || repeat_penalty != 1.0f; }
};

constexpr uint32_t kSampleMaxWindow = 1024;  // repeat_window limit (shared memory of sample_probs)
constexpr uint32_t kSampleWorkgroup = 64;    // fixed: reduction order (and so every bit) is device-independent

// p(N, V) = G(logits(N, V)) for tree nodes 0..N-1. Node i's penalty window is built from
// seq_tokens[0..t] and the ancestors of i (tree.parent/token); N == 1 with a root-only tree is
// `ar`. p.stride >= V.
// The largest vocabulary the sampling kernels handle on this device with a penalty window of
// `window` tokens (greedy: temperature 0): UINT32_MAX unless the driver ends a shader's loops
// after a fixed budget (DeviceCaps::Quirks::loop_iteration_limit). sample_probs refuses more.
uint32_t sample_max_vocab(const Context& ctx, uint32_t window, bool greedy);

// Where the sampling kernels take the sampler's values (temperature, top-p, min-p, repetition
// penalty, seed) from: the options given, recorded into the command, or the step state's words
// kStateSampling .. (vkspec/step_state.h) in the state buffer of the dispatch's Dyn, which the
// host writes with each prompt (sampler_state_words): a step recorded once then serves any
// values. Whether sampling is greedy, top-k and the penalty window stay recorded.
enum class SamplerValues { Recorded, FromState };
std::array<uint32_t, kStateSamplingWords> sampler_state_words(const SamplingOptions& o);

void sample_probs(Sequence& seq, Mat logits, Mat probs, uint32_t N, uint32_t V, const SamplingOptions& o,
                  const Buffer& seq_tokens, Dyn t, const DeviceTree& tree, KernelConfig cfg = {},
                  SamplerValues from = SamplerValues::Recorded);

struct AcceptSampleArgs {
  uint32_t n = 1;         // tree nodes (rows of probs)
  uint32_t V = 0;
  Mat probs;              // (n, V) from sample_probs
  uint64_t seed = 0;
  Dyn step;               // index of the root in the sequence (the committed length t)
  SamplerValues seed_from = SamplerValues::Recorded;  // FromState: the seed in step's state buffer
  uint32_t trials = 1;    // independent walks over the same tree and p, trial b in workgroup b
  const Buffer* info = nullptr;  // outputs: slots 5..8 at b*16 (default: tree.info)
  const Buffer* accepted = nullptr;  // (trials, tree.max_depth + 1) node indices, root first
};

// Tree rejection sampling (DESIGN.md §3). From the root, at the current node try its children in
// index order: child token x is accepted with probability p(x) under the current renormalised p;
// on rejection p(x) = 0 and the rest is renormalised (a sibling with an already rejected token
// is rejected without a draw, as p = 0 demands); if all children are rejected the next root is
// drawn from what is left. Nodes reached by the same token path (duplicates under the root in a
// merged tree) are one node for the walk: after accepting x, the children of every node with
// that path are candidates, and p is taken from the lowest-index one (their contexts are equal).
// Writes the same outputs as accept_greedy: info[kInfoAccepted] = a, info[kInfoBestRow] = 0,
// info[kInfoNextRoot], info[kInfoBestHead] (OR of the heads of the accepted path's last nodes:
// 3 = both; 0 if a == 0), accepted[0..a] (the lowest-index node of each accepted level).
void accept_sample(Sequence& seq, const DeviceTree& tree, const AcceptSampleArgs& a, KernelConfig cfg = {});

// The generator, host side (tests, and anything that must reproduce the GPU's draws).
std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key);
float sample_uniform(uint64_t seed, uint32_t step, uint32_t node, uint32_t trial = 0);

}  // namespace vkspec
