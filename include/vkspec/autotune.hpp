// Choosing the strategy and budget by what they cost on this device (`--strategy auto`,
// `--budget auto`). Speculation pays only where a verify pass over a tree costs little more than
// one token; whether it does depends on the device's matmul at small batch and on how often the
// heads are right on this text, so the choice is measured, not assumed.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "vkspec/engine.hpp"

namespace vkspec {

struct AutoTrial {
  Strategy strategy = Strategy::AR;
  uint32_t budget = 0;
  uint32_t topk = 0;  // the draft's top-k (0 for ar)
  double tau = 0;
  double tokens_per_s = 0;  // the best of the rounds
  std::string skipped;      // why the configuration could not run (empty when it ran)
};

struct AutoChoice {
  EngineOptions options;  // the base options with the chosen strategy, budget and top-k
  double tokens_per_s = 0;
  double ar_tokens_per_s = 0;
  std::vector<AutoTrial> trials;
};

// How much faster than `ar` a speculative candidate must have run in the trial to be chosen. A
// short trial on a device whose speed swings from run to run (lavapipe: ±40%) otherwise picks a
// configuration that is slower than plain decoding as often as not when the two are close.
inline constexpr double kAutoMinGain = 1.15;

// Runs every (strategy, budget, top-k) candidate, and always `ar`, for n_trial tokens of `prompt`, in
// `rounds` interleaved rounds (so a slow spell of a shared machine hits every candidate alike),
// keeps each candidate's best tokens/s and returns pick_trial's choice. Configurations the engine
// refuses (a budget past the tree kernels' limits, a missing head) are reported in `trials` and
// skipped. An empty `topks` tries base.topk only; the heads must have been built for the largest.
// With `budgets_are_ceilings` (the user named no budget, or asked for `auto`), a budget larger
// than a top-k's draft can fill (max_draft_budget: a top-k 1 draft is a chain of `depth` nodes)
// is tried at that size instead of being skipped, once per (strategy, top-k).
AutoChoice choose_by_trial(Context& ctx, LlamaModel& verifier, EagleHead* head1, EagleHead* head2,
                           const EngineOptions& base, const std::vector<Strategy>& strategies,
                           const std::vector<uint32_t>& budgets, const std::vector<uint32_t>& topks,
                           const std::vector<uint32_t>& prompt,
                           uint32_t n_trial = 32, uint32_t rounds = 3,
                           const std::function<void(const AutoTrial&)>& on_trial = {},
                           bool budgets_are_ceilings = false);

// The index in `trials` (trials[0] is `ar`) of the fastest candidate that ran, if it beat `ar` by
// more than min_gain; otherwise 0 (`ar`).
size_t pick_trial(const std::vector<AutoTrial>& trials, double min_gain = kAutoMinGain);

}  // namespace vkspec
