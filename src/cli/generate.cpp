// `vkspec generate`: stream a continuation with any strategy; stats to stderr, or one JSON object
// on stdout with --json.
#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/session.hpp"
#include "vkspec/autotune.hpp"

namespace vkspec::cli {

nlohmann::json stats_json(const GenerateStats& st, const Session& s) {
  nlohmann::json j = {{"strategy", strategy_name(s.engine.strategy)},
                      {"device", s.ctx->caps().name},
                      {"tokens", st.tokens},
                      {"text", utf8_sanitize(s.decode(st.tokens, /*continuation=*/true))},  // a run may stop mid-character
                      {"steps", st.steps},
                      // With no step after the prompt's pass (-n 1, or a stop token first) there is no
                      // decode rate to report: null, not a 0 that reads as "slow".
                      {"tau", st.steps ? nlohmann::json(st.tau) : nlohmann::json()},
                      {"tokens_per_s", st.steps ? nlohmann::json(st.tokens_per_s) : nlohmann::json()},
                      {"prefill_s", st.prefill_seconds},
                      {"host_waits_per_step", st.host_waits_per_step},
                      {"host_waits_per_token", st.host_waits_per_token},
                      {"host_cpu_us_per_step", st.host_cpu_us_per_step},
                      {"steps_per_submit", s.engine.steps_per_submit},
                      {"stopped", st.stopped},
                      {"stop_ids", s.engine.stop_tokens},
                      {"dispatches_per_step", st.dispatches_per_step},
                      {"paired_dispatches_per_step", st.paired_per_step},
                      {"paired_single_fetch_bindings_per_step", st.single_fetch_per_step},
                      {"nodes_per_step", st.nodes_per_step},
                      {"accept_hist", st.accept_hist},
                      {"temperature", s.engine.sampling.temperature},
                      {"seed", s.engine.sampling.seed}};
  if (s.engine.strategy != Strategy::AR) {
    j["budget"] = s.engine.budget;
    j["depth"] = s.engine.depth;
    j["drafted_depth"] = drafted_depth(s.engine.strategy, s.engine.depth, s.engine.budget);  // at most B (2B merge-trie)
    j["topk"] = s.engine.topk;
    const double n = st.steps ? double(st.steps) : 1.0;
    j[s.engine.strategy == Strategy::Route ? "route_wins" : "accepted_path_head"] = {
        {"none", st.head_wins[0] / n}, {"head1", st.head_wins[1] / n}, {"head2", st.head_wins[2] / n},
        {"both", st.head_wins[3] / n}};
  }
  j["memory"] = s.memory_json();
  if (st.pair_pack_bytes) {
    j["memory"]["pair_pack_bytes"] = st.pair_pack_bytes;
    j["memory"]["total_bytes"] = j["memory"]["total_bytes"].get<uint64_t>() + st.pair_pack_bytes;
  }
  if (!st.pair_pack_refused.empty()) j["memory"]["pair_pack_refused"] = st.pair_pack_refused;
  if (s.engine.time_kernels)
  {
    j["gpu_ms_per_step"] = {{"draft", st.draft_ms}, {"verify", st.verify_ms}, {"commit", st.commit_ms}};
    j["timed_submissions"] = st.timed_submissions;  // the first left out where others follow (driver warm-up)
    j["kernel_ms_per_step"] = st.kernel_ms;
    j["kernel_dispatches_per_step"] = st.kernel_dispatches;
    nlohmann::json line = nlohmann::json::array();
    for (const auto& d : st.kernel_timeline) line.push_back({{"kernel", d.label}, {"phase", d.phase}, {"us", d.us}});
    j["kernel_timeline"] = std::move(line);
  }
  return j;
}

static int run_generate(const std::vector<std::string>& argv) {
  Args args(argv);
  const bool json = args.flag("json");
  const bool timing = args.flag("time-kernels");
  const std::string tokens = args.get("tokens", "");
  const std::string prompt = args.get_one({"p", "prompt"});
  const std::string prompt_file = args.get_one({"f", "file"});
  if (!tokens.empty() + !prompt.empty() + !prompt_file.empty() > 1)
    throw Error("give one of -p TEXT, -f FILE or --tokens IDS: each is the whole prompt");
  const uint32_t n = uint32_t(args.get_uint("n", 128));
  Session s;
  // --strategy auto / --budget auto: measured on this device and prompt (vkspec/autotune.hpp).
  const std::string strategy_opt = args.get("strategy", "ar");
  const bool auto_strategy = strategy_opt == "auto";
  try {
    s.engine.strategy = auto_strategy ? Strategy::AR : parse_strategy(strategy_opt);
  } catch (const Error&) {  // generate also takes auto, which bench's list does not
    throw Error("unknown strategy '" + strategy_opt + "' (choose ar, single1, single2, route, merge, merge-trie or auto)");
  }
  const bool budget_given = args.has("budget");
  const std::string budget_opt = args.get("budget", "8");
  const bool auto_budget = budget_opt == "auto";
  const std::vector<uint32_t> candidates =
      !auto_budget ? std::vector<uint32_t>{} : auto_strategy ? std::vector<uint32_t>{4, 8, 16}
                                                             : std::vector<uint32_t>{4, 8, 16, 32, 64};
  s.engine.budget = auto_budget ? 8 : uint32_t(parse_uint("budget", budget_opt, UINT32_MAX, 1));
  s.engine.time_kernels = timing;
  // The prompt is read as soon as the file is open, so that the default context fits it: prompt,
  // -n and the most a step writes past them (verified tree and draft levels, Engine::check_fits).
  std::vector<uint32_t> ids;
  bool have_prompt = true;
  const std::vector<uint32_t> budgets = auto_budget ? candidates : std::vector<uint32_t>{s.engine.budget};
  s.load(args, budgets, [&]() -> uint64_t {
    if (!tokens.empty()) {
      ids = s.parse_tokens(tokens);
    } else if (!prompt_file.empty()) {
      ids = s.encode(read_file(prompt_file, "prompt file"));
    } else if (!prompt.empty()) {
      ids = s.encode(prompt);
    } else {
      have_prompt = false;  // refused below, after the options
      return 0;
    }
    const uint32_t B = *std::max_element(budgets.begin(), budgets.end());
    const bool drafts = auto_strategy || s.engine.strategy != Strategy::AR;
    return ids.size() + uint64_t(n) + (drafts ? max_step_slack(B, s.engine.depth, s.engine.topk) : 0);
  });
  // The model's end-of-generation ids stop it, as in llama.cpp's tools, unless --ignore-eos.
  const bool ignore_eos = args.flag("ignore-eos");
  args.reject_unknown();
  if (s.tokenizer && !ignore_eos)
    for (uint32_t id : s.tokenizer->end_of_generation())
      if (std::find(s.engine.stop_tokens.begin(), s.engine.stop_tokens.end(), id) == s.engine.stop_tokens.end())
        s.engine.stop_tokens.push_back(id);
  // The default budget fits the tree the given top-k and depth draw (--topk 1 --depth 4 draws 4
  // candidates): "--budget 8 must be in 1..4" blamed an option the user never typed.
  if (!budget_given && !auto_budget)
    s.engine.budget = default_draft_budget(s.engine.topk, s.engine.depth, s.engine.budget);
  // With no --strategy, generate runs ar, which drafts nothing: a draft option given then would be
  // dropped unseen (a forgotten --strategy), so it is refused by name. An explicit --strategy ar
  // keeps them (a script that compares strategies passes the same options to each).
  if (!args.has("strategy")) {
    std::string unused;
    for (const char* o : {"heads", "budget", "topk", "depth", "pair-heads"})
      if (args.has(o)) unused += (unused.empty() ? "--" : ", --") + std::string(o);
    if (!unused.empty())
      throw Error(unused + " set(s) how a speculative strategy drafts, but no --strategy was given, so generate runs ar, "
                  "which drafts nothing: give --strategy single1|single2|route|merge|merge-trie|auto (or ar), or drop " + unused);
  }
  if (!have_prompt) throw Error("no prompt: give -p TEXT, -f FILE or --tokens \"1 2 3\"");
  nlohmann::json auto_json;
  // A top-k list or `auto` is tried like a budget; so is kAutoTopks under auto when no --topk was
  // given. The heads were sized for the default top-k, which is kAutoTopks' largest.
  if ((auto_strategy || auto_budget) && !s.topk_given) s.topks = kAutoTopks;
  const bool auto_topk = s.topks.size() > 1;
  if (auto_strategy || ((auto_budget || auto_topk) && s.engine.strategy != Strategy::AR)) {
    std::vector<Strategy> strategies{s.engine.strategy};
    if (auto_strategy) {
      strategies.clear();
      if (s.head1) strategies.push_back(Strategy::Single1);
      if (s.head2)
        for (Strategy x : {Strategy::Single2, Strategy::Route, Strategy::Merge, Strategy::MergeTrie}) strategies.push_back(x);
    }
    const std::vector<uint32_t> budgets = auto_budget ? candidates : std::vector<uint32_t>{s.engine.budget};
    const AutoChoice c = choose_by_trial(
        *s.ctx, *s.model, s.head1.get(), s.head2.get(), s.engine, strategies, budgets, s.topks, ids,
        std::min<uint32_t>(n, 32), 3, [&](const AutoTrial& t) {
          if (!t.skipped.empty())
            std::fprintf(stderr, "auto: %-10s budget %3u top-k %2u: skipped (%s)\n", strategy_name(t.strategy), t.budget,
                         t.topk, t.skipped.c_str());
          else
            std::fprintf(stderr, "auto: %-10s budget %3u top-k %2u: tau %.2f, %.1f tokens/s\n", strategy_name(t.strategy),
                         t.budget, t.topk, t.tau, t.tokens_per_s);
        },
        auto_budget || !budget_given);
    s.engine = c.options;
    const std::string shape = s.engine.strategy == Strategy::AR ? std::string()
                                                                 : " budget " + std::to_string(s.engine.budget) + " top-k " +
                                                                       std::to_string(s.engine.topk);
    std::fprintf(stderr, "auto chose %s%s on %s (%.1f tokens/s in the trial; ar %.1f)\n", strategy_name(s.engine.strategy),
                 shape.c_str(), s.ctx->caps().name.c_str(), c.tokens_per_s, c.ar_tokens_per_s);
    for (const AutoTrial& t : c.trials)
      auto_json.push_back({{"strategy", strategy_name(t.strategy)}, {"budget", t.budget}, {"topk", t.topk}, {"tau", t.tau},
                           {"tokens_per_s", t.tokens_per_s}, {"skipped", t.skipped}});
  }
  Engine engine(*s.ctx, *s.model, s.head1.get(), s.head2.get(), s.engine);
  std::optional<StreamDecoder> dec;
  if (s.tokenizer) dec.emplace(*s.tokenizer, false, /*continuation=*/true);  // the prompt came before
  // The prompt is echoed with the first tokens (or at the end, if none come), not before the
  // engine has checked the request: a refused one prints nothing to stdout.
  bool echoed = false;
  // Text as it is, NUL bytes included (fputs would stop at the first: a prompt file may hold one).
  auto put = [](const std::string& text) { std::fwrite(text.data(), 1, text.size(), stdout); };
  auto echo_prompt = [&] {
    if (!echoed && !json && dec) put(s.decode(ids));
    echoed = true;
  };
  auto stream = [&](const uint32_t* t, size_t k) {
    if (json) return;
    echo_prompt();
    for (size_t i = 0; i < k; ++i) {
      if (dec)
        put(dec->push(t[i]));
      else
        std::printf("%u ", t[i]);
    }
    std::fflush(stdout);
  };
  GenerateStats st = engine.generate(ids, n, stream);
  echo_prompt();
  if (!st.pair_pack_refused.empty())
    std::fprintf(stderr, "warning: the heads run paired but unpacked (no pair pack: %s)\n", st.pair_pack_refused.c_str());
  if (json) {
    nlohmann::json j = stats_json(st, s);
    if (!auto_json.is_null()) {
      j["auto_trials"] = auto_json;
      j["auto_min_gain"] = kAutoMinGain;
    }
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    if (dec) put(dec->flush());
    std::printf("\n");
    std::fflush(stdout);  // the text first, then the statistics, also when both go to one pipe
    if (st.steps == 0)
      std::fprintf(stderr, "[%s on %s] %zu token%s, no decode step after the prompt's pass (no tokens/s to report)\n",
                   strategy_name(s.engine.strategy), s.ctx->caps().name.c_str(), st.tokens.size(),
                   st.tokens.size() == 1 ? "" : "s");
    else
      std::fprintf(stderr,
                   "[%s on %s] %zu tokens, %u steps, tau %.2f, %.1f tokens/s, %.2f host waits/token, %.0f us host CPU/step\n",
                   strategy_name(s.engine.strategy), s.ctx->caps().name.c_str(), st.tokens.size(), st.steps, st.tau,
                   st.tokens_per_s, st.host_waits_per_token, st.host_cpu_us_per_step);
    if (s.engine.time_kernels && st.steps > 0) {
      // --time-kernels in text: the phases, then the kernels by GPU time (all of it under --json).
      std::fprintf(stderr, "GPU ms/step: draft %.3f, verify %.3f, commit %.3f; kernels:", st.draft_ms, st.verify_ms,
                   st.commit_ms);
      std::vector<std::pair<double, std::string>> by_time;
      for (const auto& [label, ms] : st.kernel_ms) by_time.push_back({ms, label});
      std::sort(by_time.rbegin(), by_time.rend());
      for (const auto& [ms, label] : by_time) std::fprintf(stderr, " %s %.3f", label.c_str(), ms);
      std::fprintf(stderr, "\n");
    }
  }
  return 0;
}

static RegisterCommand reg{"generate",
                           "generate text: -m MODEL.gguf (-p TEXT | -f FILE | --tokens IDS) -n N [--strategy S|auto] [--budget B|auto] [--topk K|auto] [--depth D] [--heads H1,H2]"
                           " [--json]"
                           " [--temp T --top-k K --top-p P --min-p M --repeat-penalty R --repeat-window W --seed S]"
                           " [--steps-per-submit S] [--pair-heads on|off|unpacked] [--stop IDS] [--ignore-eos] [--ctx N] [--kv-type f16|f32]"
                           " [--batch-tiles even|pow2] [--time-kernels] [--device D]",
                           run_generate};

}  // namespace vkspec::cli
