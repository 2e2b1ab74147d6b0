// choose_by_trial: see include/vkspec/autotune.hpp.
#include "vkspec/autotune.hpp"

#include <algorithm>

#include "vkspec/error.hpp"

namespace vkspec {

AutoChoice choose_by_trial(Context& ctx, LlamaModel& verifier, EagleHead* head1, EagleHead* head2,
                           const EngineOptions& base, const std::vector<Strategy>& strategies,
                           const std::vector<uint32_t>& budgets, const std::vector<uint32_t>& topks,
                           const std::vector<uint32_t>& prompt,
                           uint32_t n_trial, uint32_t rounds, const std::function<void(const AutoTrial&)>& on_trial,
                           bool budgets_are_ceilings) {
  if (budgets.empty()) throw Error("automatic choice: no budget to try");
  AutoChoice out;
  auto candidate = [](Strategy s, uint32_t b, uint32_t k) {
    AutoTrial t;
    t.strategy = s, t.budget = b, t.topk = k;
    return t;
  };
  out.trials.push_back(candidate(Strategy::AR, 0, 0));
  const std::vector<uint32_t> ks = topks.empty() ? std::vector<uint32_t>{base.topk} : topks;
  for (Strategy s : strategies) {
    if (s == Strategy::AR) continue;
    for (uint32_t k : ks)
      for (uint32_t b : budgets) {
        if (budgets_are_ceilings) b = budget_within(s, k, base.depth, b);
        const bool seen = std::any_of(out.trials.begin(), out.trials.end(), [&](const AutoTrial& t) {
          return t.strategy == s && t.budget == b && t.topk == k;
        });
        if (!seen) out.trials.push_back(candidate(s, b, k));
      }
  }
  rounds = std::max(1u, rounds);
  for (uint32_t r = 0; r < rounds; ++r)
    for (AutoTrial& t : out.trials) {
      if (!t.skipped.empty()) continue;
      EngineOptions o = base;
      o.strategy = t.strategy;
      o.budget = t.strategy == Strategy::AR ? base.budget : t.budget;
      o.topk = t.strategy == Strategy::AR ? base.topk : t.topk;
      o.time_kernels = false;
      try {
        Engine trial(ctx, verifier, head1, head2, o);
        const GenerateStats st = trial.generate(prompt, n_trial);
        t.tau = st.tau;
        t.tokens_per_s = std::max(t.tokens_per_s, st.tokens_per_s);
      } catch (const Error& e) {
        if (t.strategy == Strategy::AR) throw;  // ar always runs, or nothing does
        t.skipped = e.what();
      }
      if (r + 1 == rounds || !t.skipped.empty())
        if (on_trial) on_trial(t);
    }
  const AutoTrial* best = &out.trials[pick_trial(out.trials)];
  out.options = base;
  out.options.strategy = best->strategy;
  if (best->strategy != Strategy::AR) out.options.budget = best->budget, out.options.topk = best->topk;
  out.tokens_per_s = best->tokens_per_s;
  out.ar_tokens_per_s = out.trials.front().tokens_per_s;
  return out;
}

size_t pick_trial(const std::vector<AutoTrial>& trials, double min_gain) {
  if (trials.empty() || trials.front().strategy != Strategy::AR) throw Error("automatic choice: ar must be the first trial");
  size_t best = 0;
  for (size_t i = 1; i < trials.size(); ++i)
    if (trials[i].skipped.empty() && (best == 0 || trials[i].tokens_per_s > trials[best].tokens_per_s)) best = i;
  // Strictly faster: a trial too short to time any decoding (-n 0 or 1) measures 0 everywhere.
  return best != 0 && trials[best].tokens_per_s > min_gain * trials.front().tokens_per_s ? best : 0;
}

}  // namespace vkspec
