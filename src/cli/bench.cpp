// `vkspec bench`: every strategy over the same prompts — τ, tokens/s, speedup over `ar` (the median
// over interleaved rounds, with the rounds' spread), host waits per step, verified nodes per
// step — as a table on stderr and JSON on stdout (--json).
// Budgets are per head; merge verifies 1 + 2B nodes, so rows also carry nodes_per_step for
// comparisons at equal verified-node count (DESIGN.md §9).
#include <algorithm>
#include <cstdio>
#include <sstream>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cli/bench_common.hpp"
#include "cli/session.hpp"

namespace vkspec::cli {

nlohmann::json stats_json(const GenerateStats& st, const Session& s);
int run_suite(Args& args);  // bench_suite.cpp

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// --prompts (text, one a line) or --tokens-file (ids, one prompt a line); neither: the one-token
// prompt {1}. CRLF line ends are taken as LF; an empty line is skipped.
static void read_prompts(const Session& s, std::vector<std::vector<uint32_t>>& prompts, const std::string& tokens_path,
                         const std::string& prompts_path, int max_prompts) {
  if (tokens_path.empty() && prompts_path.empty()) {
    prompts.push_back({1});
    return;
  }
  const std::string& path = tokens_path.empty() ? prompts_path : tokens_path;
  std::istringstream f(read_file(path, "prompt file"));
  std::string line;
  for (uint64_t line_no = 1; std::getline(f, line) && int(prompts.size()) < max_prompts; ++line_no) {
    if (!line.empty() && line.back() == '\r') line.pop_back();  // a file with CRLF line ends: the CR ends the line
    if (line.empty()) continue;
    prompts.push_back(tokens_path.empty() ? s.encode(line) : s.parse_tokens(line, "--tokens-file " + path));
    if (prompts.back().empty())  // separators only, or text the tokenizer makes nothing of
      throw Error((tokens_path.empty() ? "--prompts " : "--tokens-file ") + path + " line " + std::to_string(line_no) +
                  " gives an empty prompt");
  }
  if (prompts.empty()) throw Error("the prompt file holds no prompts");
}

static int run_bench(const std::vector<std::string>& argv) {
  Args args(argv);
  if (args.has("suite") || args.has("from-json")) return run_suite(args);
  const bool json = args.flag("json");
  const bool timing = args.flag("time-kernels");
  const std::string prompts_path = args.get("prompts", "");
  const std::string tokens_path = args.get("tokens-file", "");
  if (!prompts_path.empty() && !tokens_path.empty()) throw Error("give one of --prompts and --tokens-file, not both");
  const uint32_t n = uint32_t(args.get_uint("n", 64));
  // The first new token comes from the prompt's pass; tokens/s and tau are of the steps after it.
  if (n < 2) throw Error("bench times decode steps: -n must be at least 2 (the first new token comes from the prompt's pass)");
  if (!args.has("heads"))
    for (const char* o : {"budget", "topk", "depth"})
      if (args.has(o)) throw Error(std::string("--") + o + " shapes the draft of --heads; without heads bench measures ar only");
  const int max_prompts = int(args.get_uint("max-prompts", 1 << 30, INT32_MAX, 1));
  const uint32_t rounds = uint32_t(args.get_uint("rounds", 3, 1000, 1));
  std::vector<uint32_t> budgets;
  const std::string budget_list = args.get("budget", "8");
  for (auto& b : option_list("budget", budget_list)) {
    const uint32_t v = uint32_t(parse_uint("budget", b, UINT32_MAX, 1));
    if (std::find(budgets.begin(), budgets.end(), v) != budgets.end())  // 4,04
      throw Error("option --budget lists " + std::to_string(v) + " more than once");
    budgets.push_back(v);
  }
  std::vector<Strategy> strategies;
  const std::string all = args.has("heads") ? "ar,single1,single2,route,merge,merge-trie" : "ar";
  for (auto& x : option_list(args.has("strategy") ? "strategy" : "strategies", args.get_one({"strategies", "strategy"}, all)))
    strategies.push_back(parse_strategy(x));
  Session s;
  s.engine.time_kernels = timing;
  // The prompts are read as soon as the file is open: the default context fits the longest, -n
  // and a step's slack (as generate sizes it).
  std::vector<std::vector<uint32_t>> prompts;
  s.load(args, budgets, [&]() -> uint64_t {
    read_prompts(s, prompts, tokens_path, prompts_path, max_prompts);
    size_t longest = 0;
    for (const auto& p : prompts) longest = std::max(longest, p.size());
    const uint32_t B = *std::max_element(budgets.begin(), budgets.end());
    return longest + n + (args.has("heads") ? max_step_slack(B, s.engine.depth, s.engine.topk) : 0);
  });
  args.reject_unknown();
  warn_idle(s.ctx->caps());


  // Every configuration is built first, then measured in `rounds` interleaved rounds (each runs
  // every prompt through all configurations back to back), so a slow stretch of the machine hits
  // all of them alike; each configuration's speedup is taken against ar's time in the same round.
  struct Config {
    Strategy strat = Strategy::AR;
    uint32_t B = 0, K = 0;
    std::unique_ptr<Engine> engine;
    std::string error;
    uint64_t toks = 0, steps = 0, prompt_tokens = 0;
    double secs = 0, waits = 0, cpu_us = 0, draft = 0, verify = 0, commit = 0, prefill_s = 0;
    uint32_t dispatches = 0, paired = 0, nodes = 1;
    std::vector<uint32_t> hist;
    std::array<double, 4> wins{};
    std::vector<double> round_tps;
  };
  std::vector<Config> configs;
  const EngineOptions base = s.engine;
  for (uint32_t K : s.topks)
    for (uint32_t B : budgets)
      for (Strategy strat : strategies) {
        if (strat == Strategy::AR && (B != budgets.front() || K != s.topks.front())) continue;  // ar has no tree
        Config c;
        c.strat = strat, c.B = B, c.K = K;
        // The default budget (8) fits the tree each top-k draws (--topk 1 --depth 4: 4 candidates).
        if (!args.has("budget")) c.B = default_draft_budget(K, base.depth, B);
        s.engine = base;
        s.engine.strategy = strat;
        s.engine.budget = c.B;
        s.engine.topk = K;
        try {
          c.engine = std::make_unique<Engine>(*s.ctx, *s.model, s.head1.get(), s.head2.get(), s.engine);
          for (auto& p : prompts) c.engine->check_fits(p, n);
        } catch (const Error& e) {
          // One configuration that cannot run (a tree too big for the context, say) is reported,
          // not allowed to discard every measurement before it.
          c.engine.reset();
          c.error = e.what();
        }
        configs.push_back(std::move(c));
      }
  s.engine = base;
  // Every configuration refused (a budget of 0, say): nothing would be measured, and a run that
  // measured nothing does not succeed.
  if (std::none_of(configs.begin(), configs.end(), [](const Config& c) { return c.engine != nullptr; })) {
    // One reason for all (an option every configuration shares, --temp -1 say) is said once.
    if (std::all_of(configs.begin(), configs.end(), [&](const Config& c) { return c.error == configs.front().error; }))
      throw Error("no configuration can run, nothing to measure: " + configs.front().error);
    std::string why;
    for (const Config& c : configs) why += "\n  " + std::string(strategy_name(c.strat)) + " budget " + std::to_string(c.B) + " top-k " + std::to_string(c.K) + ": " + c.error;
    throw Error("no configuration can run, nothing to measure:" + why);
  }
  const Config* ar = nullptr;
  for (const Config& c : configs)
    if (c.strat == Strategy::AR && c.engine) ar = &c;
  const bool tty = isatty(2);  // a progress line on a terminal only
  // An untimed warm-up pass per configuration over the first prompt: a driver may compile a
  // pipeline at its first dispatch (lavapipe does, and a tree step's kernels take seconds), which
  // would otherwise land in each configuration's first round, in its tokens/s and its spread.
  // Each other prompt length then gets a short run too: a prefill of a new length may need pipelines
  // of its own, which fell on whichever configuration met that prompt first (its prefill tokens/s
  // read 100x low).
  for (Config& c : configs) {
    if (!c.engine) continue;
    if (tty) std::fprintf(stderr, "\rwarm-up: %-11s budget %-4u top-k %-2u", strategy_name(c.strat), c.B, c.K);
    c.engine->generate(prompts.front(), n);
    std::vector<size_t> seen = {prompts.front().size()};
    for (const auto& p : prompts)
      if (std::find(seen.begin(), seen.end(), p.size()) == seen.end()) {
        seen.push_back(p.size());
        c.engine->generate(p, 2);
      }
  }
  for (uint32_t round = 0; round < rounds; ++round) {
    std::vector<uint64_t> toks(configs.size(), 0);
    std::vector<double> secs(configs.size(), 0.0);
    for (size_t pi = 0; pi < prompts.size(); ++pi)
      for (size_t j = 0; j < configs.size(); ++j) {
        // Every configuration runs each prompt back to back with the others, starting one place
        // further each time: a slow stretch of the machine (seconds long on a VM) then falls on
        // all of them alike, not on whichever ran its whole prompt set at the time.
        const size_t ci = (j + pi + round * prompts.size()) % configs.size();
        Config& c = configs[ci];
        if (!c.engine) continue;
        if (tty)
          std::fprintf(stderr, "\rround %u/%u, prompt %zu/%zu: %-11s budget %-4u top-k %-2u", round + 1, rounds, pi + 1,
                       prompts.size(), strategy_name(c.strat), c.B, c.K);
        const auto& p = prompts[pi];
        GenerateStats st = c.engine->generate(p, n);
        toks[ci] += st.tokens.size() - 1;  // the first token comes from the prefill, not a step
        secs[ci] += st.seconds;
        c.steps += st.steps;
        c.waits += st.host_waits_per_step * st.steps;
        c.cpu_us += st.host_cpu_us_per_step * st.steps;
        c.draft += st.draft_ms * st.steps, c.verify += st.verify_ms * st.steps, c.commit += st.commit_ms * st.steps;
        for (int i = 0; i < 4; ++i) c.wins[i] += st.head_wins[i];
        if (c.hist.size() < st.accept_hist.size()) c.hist.resize(st.accept_hist.size());
        for (size_t i = 0; i < st.accept_hist.size(); ++i) c.hist[i] += st.accept_hist[i];
        c.nodes = std::max(c.nodes, st.nodes_per_step);
        c.prefill_s += st.prefill_seconds;
        c.prompt_tokens += p.size();
        c.dispatches = std::max(c.dispatches, st.dispatches_per_step);
        c.paired = std::max(c.paired, st.paired_per_step);
      }
    for (size_t ci = 0; ci < configs.size(); ++ci) {
      Config& c = configs[ci];
      if (!c.engine) continue;
      c.toks += toks[ci];
      c.secs += secs[ci];
      c.round_tps.push_back(secs[ci] > 0 ? toks[ci] / secs[ci] : 0);
    }
  }
  if (tty) std::fprintf(stderr, "\r%-60s\r", "");
  // A --stop id emitted first by every prompt leaves no step to time: say so, not a table of zeros.
  if (std::none_of(configs.begin(), configs.end(), [](const Config& c) { return c.engine && c.steps > 0; }))
    throw Error("no decode step was timed: every prompt ended at its first new token (a --stop id?), nothing measured");

  nlohmann::json results = nlohmann::json::array();
  std::fprintf(stderr, "%-11s %6s %5s %6s %7s %10s %8s %8s %11s\n", "strategy", "budget", "top-k", "nodes", "tau", "tokens/s",
               "speedup", "spread", "waits/step");
  for (const Config& c : configs) {
    if (!c.engine) {
      std::fprintf(stderr, "%-11s %6u %5u  skipped: %s\n", strategy_name(c.strat), c.B, c.K, c.error.c_str());
      results.push_back({{"strategy", strategy_name(c.strat)}, {"budget", c.B}, {"topk", c.K}, {"error", c.error}});
      continue;
    }
    const bool is_ar = c.strat == Strategy::AR;
    const double tau = c.steps ? double(c.toks) / c.steps : 0, tps = c.secs > 0 ? c.toks / c.secs : 0;
    // Per round: this configuration's tokens/s over ar's in the same round; the median is the figure.
    std::vector<double> ratios;
    for (size_t r = 0; ar && r < c.round_tps.size(); ++r)
      if (ar->round_tps[r] > 0) ratios.push_back(c.round_tps[r] / ar->round_tps[r]);
    const double speedup = ratios.empty() ? 0 : median(ratios);
    const auto [lo, hi] = std::minmax_element(c.round_tps.begin(), c.round_tps.end());
    double round_mean = 0;
    for (double x : c.round_tps) round_mean += x / double(c.round_tps.size());
    const double spread = round_mean > 0 ? (*hi - *lo) / round_mean : 0;  // (max - min) / mean over the rounds
    const uint64_t steps = c.steps, runs = std::max<uint64_t>(uint64_t(prompts.size()) * rounds, 1);
    nlohmann::json r = {{"strategy", strategy_name(c.strat)},
                        {"budget", is_ar ? 0 : c.B},
                        {"topk", is_ar ? 0 : c.K},
                        {"drafted_depth", drafted_depth(c.strat, s.engine.depth, c.B)},
                        {"nodes_per_step", is_ar ? 1 : c.nodes},
                        {"tau", tau},
                        {"tokens_per_s", tps},
                        {"tokens_per_s_rounds", c.round_tps},
                        {"spread", spread},
                        {"speedup", ratios.empty() ? nlohmann::json(nullptr) : nlohmann::json(speedup)},
                        {"speedup_rounds", ratios},
                        {"host_waits_per_step", steps ? c.waits / steps : 0},
                        {"host_waits_per_token", c.toks ? c.waits / c.toks : 0},
                        {"host_cpu_us_per_step", steps ? c.cpu_us / steps : 0},
                        {"steps_per_submit", s.engine.steps_per_submit},
                        {"accept_hist", c.hist},
                        {"dispatches_per_step", c.dispatches},
                        {"paired_dispatches_per_step", c.paired},
                        {"prefill_tokens_per_s", c.prefill_s > 0 ? c.prompt_tokens / c.prefill_s : 0.0},
                        {"prompts", prompts.size()},
                        {"prompt_tokens", c.prompt_tokens / std::max<uint64_t>(rounds, 1)},  // all prompts' tokens, once
                        {"rounds", rounds},
                        {"new_tokens", n},  // -n, asked for
                        // what was generated per prompt run, the prefill's token included: below
                        // new_tokens where a --stop id ended runs early
                        {"generated_tokens", double(c.toks + runs) / double(runs)}};
    if (!is_ar && steps)
      r[c.strat == Strategy::Route ? "route_wins" : "accepted_path_head"] = {{"none", c.wins[0] / steps},
                                                                             {"head1", c.wins[1] / steps},
                                                                             {"head2", c.wins[2] / steps},
                                                                             {"both", c.wins[3] / steps}};
    if (timing && steps)
      r["gpu_ms_per_step"] = {{"draft", c.draft / steps}, {"verify", c.verify / steps}, {"commit", c.commit / steps}};
    results.push_back(r);
    std::fprintf(stderr, "%-11s %6u %5u %6u %7.3f %10.2f %8s %7.0f%% %11.2f\n", strategy_name(c.strat), is_ar ? 0 : c.B,
                 is_ar ? 0 : c.K, is_ar ? 1 : c.nodes, tau, tps, ratios.empty() ? "-" : (std::to_string(speedup).substr(0, 5) + "x").c_str(),
                 100.0 * spread, steps ? c.waits / steps : 0.0);
  }
  nlohmann::json out = {{"device", s.ctx->caps().name}, {"model", s.file->path()}, {"results", results}};
  if (json) std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  return 0;
}

static RegisterCommand reg{"bench",
                           "all strategies over prompts: -m M --heads H1,H2 [--prompts F | --tokens-file F] [--max-prompts P] -n N "
                           "[--strategies ar,single1,...] [--budget 4,8,...] [--topk 2,4,...|auto] [--depth D] [--rounds R] [--json] "
                           "[--time-kernels] [--stop IDS] [--steps-per-submit S] [--pair-heads on|off|unpacked] "
                           "[--ctx N] [--kv-type f16|f32] [--batch-tiles even|pow2] [--device D] "
                           "[--temp T --top-k K --top-p P --min-p M --repeat-penalty R --repeat-window W --seed S]; "
                           "or the fixed suite: --suite quick|standard [-m M | --shapes S1,S2] [--reps R] [--demo DIR] [--device D] [--json [F]] [--md [F]]; "
                           "--from-json F --md [G]",
                           run_bench};

}  // namespace vkspec::cli
