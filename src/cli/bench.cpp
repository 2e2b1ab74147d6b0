// `vkspec bench`: every strategy over the same prompts — τ, tokens/s, speedup over `ar`, host
// waits per step, verified nodes per step — as a table on stderr and JSON on stdout (--json).
// Budgets are per head; merge verifies 1 + 2B nodes, so rows also carry nodes_per_step for
// comparisons at equal verified-node count (DESIGN.md §9).
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli/session.hpp"

namespace vkspec::cli {

nlohmann::json stats_json(const GenerateStats& st, const Session& s);
int run_suite(Args& args);  // bench_suite.cpp

static int run_bench(const std::vector<std::string>& argv) {
  Args args(argv);
  if (args.has("suite") || args.has("from-json")) return run_suite(args);
  const bool json = args.flag("json");
  const bool timing = args.flag("time-kernels");
  const std::string prompts_path = args.get("prompts", "");
  const std::string tokens_path = args.get("tokens-file", "");
  const uint32_t n = uint32_t(args.get_uint("n", 64));
  if (n == 0) throw Error("bench needs -n of at least 1 new token per prompt");
  const int max_prompts = int(args.get_uint("max-prompts", 1 << 30, INT32_MAX));
  std::vector<uint32_t> budgets;
  const std::string budget_list = args.get("budget", "8");
  for (auto& b : split_list(budget_list, ',')) budgets.push_back(uint32_t(parse_uint("budget", b)));
  if (budgets.empty()) throw Error("--budget expects one or more budgets separated by commas, got '" + budget_list + "'");
  std::vector<Strategy> strategies;
  const std::string all = args.has("heads") ? "ar,single1,single2,route,merge,merge-trie" : "ar";
  for (auto& x : split_list(args.get("strategies", args.get("strategy", all)), ','))
    strategies.push_back(parse_strategy(x));
  if (strategies.empty()) throw Error("--strategies expects one or more strategies separated by commas");
  Session s;
  s.engine.time_kernels = timing;
  s.load(args, budgets);
  args.reject_unknown();

  std::vector<std::vector<uint32_t>> prompts;
  if (!tokens_path.empty() || !prompts_path.empty()) {
    const std::string& path = tokens_path.empty() ? prompts_path : tokens_path;
    std::ifstream f(path);
    if (!f) throw Error("cannot read prompt file " + path);
    std::string line;
    while (std::getline(f, line) && int(prompts.size()) < max_prompts) {
      if (line.empty()) continue;
      prompts.push_back(tokens_path.empty() ? s.encode(line) : s.parse_tokens(line));
    }
  } else {
    prompts.push_back({1});
  }
  if (prompts.empty()) throw Error("the prompt file holds no prompts");

  nlohmann::json results = nlohmann::json::array();
  double ar_tps = 0;
  std::fprintf(stderr, "%-11s %6s %6s %7s %10s %8s %11s\n", "strategy", "budget", "nodes", "tau", "tokens/s", "speedup",
               "waits/step");
  for (uint32_t B : budgets)
    for (Strategy strat : strategies) {
      if (strat == Strategy::AR && B != budgets.front()) continue;  // ar has no budget
      s.engine.strategy = strat;
      s.engine.budget = B;
      std::unique_ptr<Engine> eng;
      try {
        eng = std::make_unique<Engine>(*s.ctx, *s.model, s.head1.get(), s.head2.get(), s.engine);
        for (auto& p : prompts) eng->check_fits(p, n);
      } catch (const Error& e) {
        // One configuration that cannot run (a tree too big for the context, say) is reported,
        // not allowed to discard every measurement before it.
        std::fprintf(stderr, "%-11s %6u  skipped: %s\n", strategy_name(strat), B, e.what());
        results.push_back({{"strategy", strategy_name(strat)}, {"budget", B}, {"error", e.what()}});
        continue;
      }
      Engine& engine = *eng;
      uint64_t toks = 0, steps = 0;
      double secs = 0, waits = 0, cpu_us = 0, draft = 0, verify = 0, commit = 0, prefill_s = 0;
      uint64_t prompt_tokens = 0;
      uint32_t dispatches = 0;
      std::vector<uint32_t> hist;
      std::array<double, 4> wins{};
      uint32_t nodes = 1;
      for (auto& p : prompts) {
        GenerateStats st = engine.generate(p, n);
        toks += st.tokens.size() - 1;  // the first token comes from the prefill, not a step
        steps += st.steps;
        secs += st.seconds;
        waits += st.host_waits_per_step * st.steps;
        cpu_us += st.host_cpu_us_per_step * st.steps;
        draft += st.draft_ms * st.steps, verify += st.verify_ms * st.steps, commit += st.commit_ms * st.steps;
        for (int i = 0; i < 4; ++i) wins[i] += st.head_wins[i];
        if (hist.size() < st.accept_hist.size()) hist.resize(st.accept_hist.size());
        for (size_t i = 0; i < st.accept_hist.size(); ++i) hist[i] += st.accept_hist[i];
        nodes = std::max(nodes, st.nodes_per_step);
        prefill_s += st.prefill_seconds;
        prompt_tokens += p.size();
        dispatches = std::max(dispatches, st.dispatches_per_step);
      }
      const double tau = steps ? double(toks) / steps : 0, tps = secs > 0 ? toks / secs : 0;
      if (strat == Strategy::AR) ar_tps = tps;
      nlohmann::json r = {{"strategy", strategy_name(strat)},
                          {"budget", strat == Strategy::AR ? 0 : B},
                          {"nodes_per_step", strat == Strategy::AR ? 1 : nodes},
                          {"tau", tau},
                          {"tokens_per_s", tps},
                          {"speedup", ar_tps > 0 ? nlohmann::json(tps / ar_tps) : nlohmann::json(nullptr)},
                          {"host_waits_per_step", steps ? waits / steps : 0},
                          {"host_waits_per_token", toks ? waits / toks : 0},
                          {"host_cpu_us_per_step", steps ? cpu_us / steps : 0},
                          {"steps_per_submit", s.engine.steps_per_submit},
                          {"accept_hist", hist},
                          {"dispatches_per_step", dispatches},
                          {"prefill_tokens_per_s", prefill_s > 0 ? prompt_tokens / prefill_s : 0.0},
                          {"prompts", prompts.size()},
                          {"new_tokens", n}};
      if (strat != Strategy::AR)
        r[strat == Strategy::Route ? "route_wins" : "accepted_path_head"] = {
            {"none", wins[0] / steps}, {"head1", wins[1] / steps}, {"head2", wins[2] / steps}, {"both", wins[3] / steps}};
      if (timing && steps)
        r["gpu_ms_per_step"] = {{"draft", draft / steps}, {"verify", verify / steps}, {"commit", commit / steps}};
      results.push_back(r);
      std::fprintf(stderr, "%-11s %6u %6u %7.3f %10.2f %8s %11.2f\n", strategy_name(strat),
                   strat == Strategy::AR ? 0 : B, strat == Strategy::AR ? 1 : nodes, tau, tps,
                   ar_tps > 0 ? (std::to_string(tps / ar_tps).substr(0, 5) + "x").c_str() : "-",
                   steps ? waits / steps : 0.0);
    }
  nlohmann::json out = {{"device", s.ctx->caps().name}, {"model", s.file->path()}, {"results", results}};
  if (json) std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  return 0;
}

static RegisterCommand reg{"bench",
                           "all strategies over prompts: -m M --heads H1,H2 [--prompts F | --tokens-file F] -n N "
                           "[--budget 4,8,...] [--json] [--temp T --top-k K --top-p P --min-p M --repeat-penalty R --seed S]; "
                           "or the fixed suite: --suite quick|standard [-m M] [--json [F]] [--md [F]]; --from-json F --md [G]",
                           run_bench};

}  // namespace vkspec::cli
