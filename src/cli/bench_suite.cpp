// `vkspec bench --suite quick|standard`: a fixed set of measurements with fixed seeds that anyone
// can run on their device and paste (--md) or compare (--json, tools/compare_bench.py):
//   matmul GB/s and GFLOP/s per weight type at batch 1..64,
//   pp512 / tg128 (llama-bench's tests) on -m MODEL or on built-in random models of named shapes,
//   the verify cost ratio c(N) on the first of those models,
//   every strategy on the bundled demo model and heads (τ, tokens/s, speedup over ar, ...).
// Each figure is a mean ± sd over repetitions after a warm-up; within a repetition every
// configuration runs once, in alternating order, so drift over the run hits them all alike.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "cli/bench_common.hpp"
#include "cli/commands.hpp"
#include "cli/session.hpp"
#include "vkspec/eagle_head.hpp"
#include "vkspec/engine.hpp"
#include "vkspec/tokenizer.hpp"

namespace vkspec::cli {

namespace {

using clock_type = std::chrono::steady_clock;

struct SuiteConfig {
  std::string name;
  MatmulPlan matmul;
  std::vector<std::string> types;
  std::vector<std::string> shapes;
  uint32_t pp = 512, tg = 128;
  int reps = 3;
  std::vector<uint32_t> cost_rows{1, 2, 4, 8, 16, 32, 64};
  uint32_t cost_per_submit = 1;
  std::vector<uint32_t> budgets;
  // Each top-k runs every budget, lowered to what its draft holds (budget_within: a top-k 1
  // draft is a chain of `depth` nodes), each (strategy, budget, top-k) once. Top-k 4 is the
  // demo's default; top-k 1 is what wins where a dispatch costs more than its rows (lavapipe).
  std::vector<uint32_t> topks{4, 1};
  uint32_t prompts = 2, new_tokens = 32;
};

SuiteConfig suite_config(const std::string& name) {
  SuiteConfig c;
  c.name = name;
  if (name == "quick") {
    // ~1-2 minutes on lavapipe (2 cores): CI runs it.
    // Shorter pp/tg (named by their lengths, so never mistaken for pp512/tg128).
    c.matmul.N = c.matmul.K = 2048;
    c.matmul.rotate_mib = 16;
    c.matmul.reps = 2;
    c.types = {"f16", "q8_0", "q4_0", "q4_k", "q6_k"};
    c.shapes = {"tiny-512x8", "tiny-512x8-q4_K_M"};
    c.pp = 128, c.tg = 32;
    c.reps = 2;
    c.budgets = {8};
    c.prompts = 2, c.new_tokens = 32;
  } else if (name == "standard") {
    c.matmul.N = c.matmul.K = 4096;
    c.matmul.rotate_mib = 128;
    c.matmul.reps = 3;
    c.types = {"f32", "f16", "q8_0", "q4_0", "q5_0", "q5_1", "q3_k", "q4_k", "q5_k", "q6_k", "iq4_xs"};
    c.shapes = {"tiny-512x8", "tiny-512x8-q4_K", "tiny-512x8-q4_K_M"};
    c.reps = 5;
    c.cost_per_submit = 2;
    // Budget 2 as well: where a dispatch costs more than its rows the best budget of merge and
    // merge-trie can be that small (top-k 1 over the held-out prompts, 2026-11-29: merge-trie
    // 1.27x at budget 2, 1.14x at 4; docs/README.md).
    c.budgets = {2, 4, 8, 16};
    c.prompts = 6, c.new_tokens = 64;
  } else {
    throw Error("--suite expects quick or standard, got '" + name + "'");
  }
  return c;
}

// One status line on stderr, rewritten in place on a terminal.
struct Progress {
  clock_type::time_point t0 = clock_type::now();
  std::string suite;
  bool tty = isatty(2);
  void operator()(const std::string& what) const {
    const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
    std::fprintf(stderr, tty ? "\r[bench %s %5.0fs] %-60s\x1b[K" : "[bench %s %5.0fs] %s\n", suite.c_str(), s,
                 what.c_str());
    std::fflush(stderr);
  }
  void done() const {
    if (tty) std::fprintf(stderr, "\n");
  }
};

// An optional path after a flag: "--json F" writes F, a bare "--json" (or "--json -") stdout.
std::string output_path(Args& args, const std::string& name) { return args.get_optional(name, "-", ""); }

void write_out(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return;
  }
  std::ofstream f(path, std::ios::binary);
  if (!f || !(f << text) || !(f.flush())) throw Error("cannot write " + path);
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return b;
}

// Indices first .. last-1, reversed in odd repetitions (the warm-up, -1, included), so that no
// entry always runs first or right after another; "warm-up" or "rep r/N" names the repetition.
std::vector<size_t> rep_order(size_t first, size_t last, int rep) {
  std::vector<size_t> order;
  for (size_t i = first; i < last; ++i) order.push_back(i);
  if (rep % 2 != 0) std::reverse(order.begin(), order.end());
  return order;
}
std::string rep_label(int rep, int reps) {
  return rep < 0 ? "warm-up" : "rep " + std::to_string(rep + 1) + "/" + std::to_string(reps);
}

// A model the suite measures: a file (-m) or a built-in random shape.
struct ModelUnderTest {
  std::string name, type;
  std::unique_ptr<GgufFile> file;
};

// pp and tg on every model, the models interleaved within each repetition (in alternating order,
// as bench_speculative's configurations), so that a drift of the machine's speed over the run —
// minutes here — hits every model alike. Each test past the first model's also gets its ratio to
// the first model's figure of the same repetition (`relative`): quantized vs f16 as one number
// measured side by side, not two means taken minutes apart.
nlohmann::json bench_models(Context& ctx, const std::vector<ModelUnderTest>& files, const SuiteConfig& c,
                            const Progress& progress) {
  struct Run {
    const ModelUnderTest* file;
    std::unique_ptr<LlamaModel> model;
    std::unique_ptr<Engine> engine;
    std::vector<uint32_t> prompt;
    std::string err[2];          // pp, tg: why the test cannot run here (empty: it runs)
    std::vector<double> tps[2];  // tokens/s per repetition
    double min_s[2] = {1e30, 1e30};
  };
  const std::string names[2] = {"pp" + std::to_string(c.pp), "tg" + std::to_string(c.tg)};
  std::vector<Run> runs(files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    Run& r = runs[i];
    r.file = &files[i];
    ModelOptions mo;
    mo.max_rows = c.pp;  // the prompt in one pass (llama-bench's ubatch 512)
    r.model = std::make_unique<LlamaModel>(ctx, *files[i].file, mo);
    EngineOptions eo;
    eo.strategy = Strategy::AR;
    r.engine = std::make_unique<Engine>(ctx, *r.model, nullptr, nullptr, eo);
    std::mt19937 rng(42);
    r.prompt.resize(c.pp);
    for (auto& t : r.prompt) t = rng() % uint32_t(r.model->config().V);
    try {
      r.engine->check_fits(r.prompt, 1);
    } catch (const Error& e) {
      r.err[0] = e.what();
    }
    try {
      r.engine->check_fits({1}, c.tg);
    } catch (const Error& e) {
      r.err[1] = e.what();
    }
  }
  for (int rep = -1; rep < c.reps; ++rep) {  // -1: warm-up (pipelines, caches, first-touch memory)
    const std::string label = rep_label(rep, c.reps);
    for (size_t i : rep_order(0, runs.size(), rep)) {
      Run& r = runs[i];
      for (int k = 0; k < 2; ++k) {
        if (!r.err[k].empty()) continue;
        progress(r.file->name + " " + names[k] + " " + label);
        const GenerateStats st = k == 0 ? r.engine->generate(r.prompt, 1) : r.engine->generate({1}, rep < 0 ? 8 : c.tg);
        if (rep < 0) continue;
        const double s = k == 0 ? st.prefill_seconds : st.seconds;
        r.tps[k].push_back(k == 0 ? c.pp / s : st.tokens_per_s);
        r.min_s[k] = std::min(r.min_s[k], s);
      }
    }
  }
  const double tick = double(clock_type::period::num) / clock_type::period::den;
  nlohmann::json out = nlohmann::json::array();
  for (const Run& r : runs) {
    nlohmann::json m = {{"model", r.file->name},
                        {"type", r.file->type},
                        {"size_bytes", model_bytes(*r.file->file)},
                        {"params", model_params(*r.file->file)},
                        {"tests", nlohmann::json::array()}};
    // What the model holds on the device (the same counts as `generate --json`'s memory), so a
    // quantized file's device size can be read against its file size: weights at their file
    // types, the KV cache at the suite's context, the forward's scratch at pp rows.
    m["device_memory"] = {{"weight_bytes", r.model->weight_bytes()},
                          {"kv_bytes", r.model->kv_bytes()},
                          {"scratch_bytes", r.model->scratch_bytes()},
                          {"kv_context", r.model->capacity()}};
    for (int k = 0; k < 2; ++k) {
      if (!r.err[k].empty()) {
        m["tests"].push_back({{"test", names[k]}, {"error", r.err[k]}});
        continue;
      }
      nlohmann::json t = {{"test", names[k]}, {"tokens_per_s", stat_json(r.tps[k], r.min_s[k], tick)}};
      const Run& first = runs[0];
      if (&r != &first && first.err[k].empty()) {
        std::vector<double> ratio;
        for (size_t i = 0; i < r.tps[k].size(); ++i) ratio.push_back(r.tps[k][i] / first.tps[k][i]);
        t["relative"] = {{"to", first.file->name}, {"ratio", stat_json(ratio)}};
      }
      m["tests"].push_back(std::move(t));
    }
    out.push_back(std::move(m));
  }
  return out;
}

// The files the speculative phase reads from the demo folder, checked before any work: the heads
// and prompts were opened only in the last phase, minutes into a run.
std::vector<std::string> demo_files(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> files = {dir + "/verifier.gguf", dir + "/prompts.txt"};
  std::error_code ec;
  if (!fs::is_regular_file(files[1], ec)) throw Error("--demo " + dir + " holds no prompts.txt");
  for (const char* head : {"head1", "head2"}) {
    const fs::path h = fs::path(dir) / head;
    if (!fs::is_directory(h, ec)) throw Error("--demo " + dir + " holds no " + head + "/ (the demo's draft heads)");
    for (const auto& e : fs::recursive_directory_iterator(h, ec))
      if (e.is_regular_file(ec)) files.push_back(e.path().string());
  }
  return files;
}

std::string find_demo_dir(const std::string& given) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!given.empty()) {
    if (!fs::exists(fs::path(given) / "verifier.gguf", ec))
      throw Error("--demo " + given + " holds no verifier.gguf (the bundled demo is models/)");
    return given;
  }
  if (fs::exists("models/verifier.gguf", ec)) return "models";
  if (fs::exists(fs::path(VKSPEC_MODELS_DIR) / "verifier.gguf", ec)) return VKSPEC_MODELS_DIR;
  throw Error("cannot find the demo model: run from the source tree or give --demo DIR (the repository's models/)");
}

// Every strategy on the demo verifier and heads, configurations interleaved per repetition.
nlohmann::json bench_speculative(Context& ctx, const std::string& dir, const SuiteConfig& c, const Progress& progress) {
  GgufFile file = GgufFile::open(dir + "/verifier.gguf");
  const uint32_t bmax = *std::max_element(c.budgets.begin(), c.budgets.end());
  ModelOptions mo;
  mo.max_rows = std::max<uint32_t>(64, 1 + 2 * bmax);
  LlamaModel model(ctx, file, mo);
  EngineOptions base;  // depth 4, top-k 4, greedy: the demo's defaults
  const uint32_t rows = std::max<uint32_t>({model.max_rows(), base.topk, base.depth + 1});
  EagleHead h1(ctx, dir + "/head1", model, model.capacity(), rows);
  EagleHead h2(ctx, dir + "/head2", model, model.capacity(), rows);
  const Tokenizer tok = Tokenizer::from_gguf(file);
  std::vector<std::vector<uint32_t>> prompts;
  {
    std::istringstream f(read_file(dir + "/prompts.txt", "the demo's prompt file"));
    std::string line;
    while (prompts.size() < c.prompts && std::getline(f, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();  // CRLF line ends
      if (!line.empty()) prompts.push_back(tok.encode(line, tok.add_bos(), false));
    }
  }
  if (prompts.empty()) throw Error(dir + "/prompts.txt holds no prompts");

  struct Config {
    Config(Strategy st, uint32_t b, uint32_t k) : s(st), budget(b), topk(k) {}
    Strategy s;
    uint32_t budget, topk;
    std::unique_ptr<Engine> engine;
    std::string error;
    std::vector<double> tau, tps, speedup;
    uint32_t nodes = 1, dispatches = 0;
    double waits = 0, min_s = 1e30;
    uint64_t steps = 0;
  };
  std::vector<Config> cfgs;
  cfgs.emplace_back(Strategy::AR, 0, 0);
  for (uint32_t K : c.topks)
    for (uint32_t B : c.budgets)
      for (Strategy s : {Strategy::Single1, Strategy::Single2, Strategy::Route, Strategy::Merge, Strategy::MergeTrie}) {
        const uint32_t b = budget_within(s, K, base.depth, B);
        const bool seen = std::any_of(cfgs.begin(), cfgs.end(),
                                      [&](const Config& x) { return x.s == s && x.budget == b && x.topk == K; });
        if (!seen) cfgs.emplace_back(s, b, K);
      }
  for (Config& k : cfgs) {
    EngineOptions eo = base;
    eo.strategy = k.s;
    eo.budget = k.s == Strategy::AR ? bmax : k.budget;
    if (k.s != Strategy::AR) eo.topk = k.topk;
    try {
      k.engine = std::make_unique<Engine>(ctx, model, &h1, &h2, eo);
      for (auto& p : prompts) k.engine->check_fits(p, c.new_tokens);
    } catch (const Error& e) {
      k.error = e.what();  // reported in its row; the others still run
      k.engine.reset();
    }
  }
  if (!cfgs[0].engine) throw Error("ar cannot run on the demo: " + cfgs[0].error);
  for (int r = -1; r < c.reps; ++r) {
    double ar_tps = 0;
    std::vector<size_t> order = rep_order(1, cfgs.size(), r);
    order.insert(order.begin(), 0);  // ar first: each speedup is against this repetition's ar
    for (size_t i : order) {
      Config& k = cfgs[i];
      if (!k.engine) continue;
      progress(rep_label(r, c.reps) + " " + strategy_name(k.s) +
               (k.s == Strategy::AR ? "" : " B=" + std::to_string(k.budget) + " k=" + std::to_string(k.topk)));
      uint64_t toks = 0, steps = 0;
      double secs = 0, waits = 0;
      for (auto& p : prompts) {
        const GenerateStats st = k.engine->generate(p, r < 0 ? 8 : c.new_tokens);
        toks += st.tokens.size() - 1;  // the first token comes from the prefill
        steps += st.steps;
        secs += st.seconds;
        waits += st.host_waits_per_step * st.steps;
        k.nodes = std::max(k.nodes, st.nodes_per_step);
        k.dispatches = std::max(k.dispatches, st.dispatches_per_step);
      }
      if (r < 0) continue;
      const double tps = secs > 0 ? toks / secs : 0;
      if (k.s == Strategy::AR) ar_tps = tps;
      k.tau.push_back(steps ? double(toks) / steps : 0);
      k.tps.push_back(tps);
      k.speedup.push_back(ar_tps > 0 ? tps / ar_tps : 0);
      k.waits += waits, k.steps += steps;
      k.min_s = std::min(k.min_s, secs);
    }
  }
  const double tick = double(clock_type::period::num) / clock_type::period::den;
  nlohmann::json results = nlohmann::json::array();
  for (Config& k : cfgs) {
    nlohmann::json row = {{"strategy", strategy_name(k.s)}, {"budget", k.budget}, {"topk", k.topk}};
    if (!k.engine) {
      row["error"] = k.error;
    } else {
      row["tau"] = stat_json(k.tau);
      row["tokens_per_s"] = stat_json(k.tps, k.min_s, tick);
      row["speedup"] = stat_json(k.speedup, k.min_s, tick);
      row["nodes_per_step"] = k.s == Strategy::AR ? 1u : k.nodes;
      row["dispatches_per_step"] = k.dispatches;
      row["host_waits_per_step"] = k.steps ? k.waits / double(k.steps) : 0.0;
    }
    results.push_back(row);
  }
  return {{"model", dir + "/verifier.gguf"},
          {"heads", {dir + "/head1", dir + "/head2"}},
          {"prompts", prompts.size()},
          {"new_tokens", c.new_tokens},
          {"depth", base.depth},
          {"temperature", 0.0},
          {"results", results}};
}

// Every flagged figure as "where: reason", for the top-level summary.
void collect_unreliable(const nlohmann::json& j, const std::string& where, nlohmann::json& out) {
  if (j.is_object()) {
    if (j.contains("unreliable") && j.contains("mean")) {
      for (const auto& why : j["unreliable"]) out.push_back(where + ": " + why.get<std::string>());
      return;
    }
    // Every key that tells one entry from its siblings (top-k too: one strategy and budget run at
    // several), each once: an entry repeating its parent's rows is not named twice.
    std::string here = where;
    for (const char* id : {"model", "test", "strategy", "dtype", "rows", "cols", "batch", "budget", "topk"})
      if (j.contains(id) && !j[id].is_object() && !j[id].is_array()) {
        const std::string part = std::string(" ") + id + "=" + (j[id].is_string() ? j[id].get<std::string>() : j[id].dump());
        if ((here + " ").find(part + " ") == std::string::npos) here += part;
      }
    for (auto it = j.begin(); it != j.end(); ++it) collect_unreliable(it.value(), here + (it.value().is_object() ? " " + it.key() : ""), out);
  } else if (j.is_array()) {
    for (const auto& e : j) collect_unreliable(e, where, out);
  }
}

}  // namespace

int run_suite(Args& args) {
  const std::string json_path = output_path(args, "json"), md_path = output_path(args, "md");
  const std::string from = args.get("from-json", "");
  if (!json_path.empty() && !md_path.empty()) {
    if (json_path == "-" && md_path == "-")
      throw Error("--json and --md both go to standard output, which would then hold neither JSON nor markdown: "
                  "give one of them a file");
    if (json_path != "-" && md_path != "-" && same_file(json_path, md_path))
      throw Error("--json " + json_path + " and --md " + md_path + " name the same file: give each its own file");
  }
  if (!from.empty()) {  // re-render a saved run as markdown, no device involved
    // It writes markdown only: a --json path would be left unwritten without a word.
    if (!json_path.empty()) throw Error("--from-json renders a saved run as markdown (--md [FILE]); --json does not apply to it");
    refuse_overwrite("--md", md_path, {{"--from-json", from}});
    check_writable("--md", md_path);
    args.reject_unknown();
    // A saved run is ~70 KB: a bound keeps a huge or endless input from taking the memory.
    const std::string text = read_file(from, "--from-json", size_t(16) << 20);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const std::exception& e) {
      throw Error(from + " is not JSON: " + e.what());
    }
    if (!j.is_object() || j.value("schema", "") != "vkspec-bench/1")
      throw Error(from + " is not a `vkspec bench --suite` result (schema vkspec-bench/1)");
    try {
      write_out(md_path.empty() ? "-" : md_path, suite_markdown(j));
    } catch (const nlohmann::json::exception& e) {
      throw Error(from + " lacks a field of schema vkspec-bench/1: " + e.what());
    }
    return 0;
  }
  SuiteConfig c = suite_config(args.get("suite"));
  const std::string model_path = args.get_one({"m", "model"});
  if (!model_path.empty() && args.has("shapes"))
    throw Error("--shapes picks the random models measured without -m; with -m only that file is measured: give one of them");
  const std::string demo = find_demo_dir(args.get("demo", ""));
  // Every file the run reads: an output naming one of them would destroy it.
  std::vector<std::pair<std::string, std::string>> inputs = {{"-m", model_path}};
  for (const std::string& f : demo_files(demo)) inputs.push_back({"of the demo", f});
  refuse_overwrite("--json", json_path, inputs);
  refuse_overwrite("--md", md_path, inputs);
  check_writable("--json", json_path);
  check_writable("--md", md_path);
  if (args.has("shapes")) c.shapes = option_list("shapes", args.get("shapes"));
  if (args.has("reps")) c.reps = int(args.get_uint("reps", 3, 1000, 1));
  if (!model_path.empty()) {  // c(N) runs on it after minutes of other phases: its context is checked now
    const GgufFile f = GgufFile::open(model_path);
    const uint64_t need = kCostAt + *std::max_element(c.cost_rows.begin(), c.cost_rows.end());
    const int ctx_len = read_llama_config(f).ctx;
    if (ctx_len > 0 && uint64_t(ctx_len) < need)
      throw Error("-m " + model_path + ": its context of " + std::to_string(ctx_len) + " tokens is below the " +
                  std::to_string(need) + " the suite's c(N) needs (" + std::to_string(kCostAt) + " committed positions + " +
                  std::to_string(need - kCostAt) + " rows)");
  }
  const std::string device = args.get("device", "");
  args.reject_unknown();
  for (const std::string& s : c.shapes) find_model_shape(s);  // unknown names fail before any work
  std::vector<WeightType> types;
  for (const std::string& t : c.types) types.push_back(parse_weight_type(t));

  // The lock before the device: a second run is refused before it disturbs the first.
  const auto devices = Context::enumerate();
  const uint32_t chosen = Context::choose(devices, device);
  BenchLock lock(devices[chosen].caps);
  ContextOptions co;
  co.device = std::to_string(chosen);
  Context ctx(co);
  warn_idle(ctx.caps());
  if (ctx.caps().timestamp_period_ns <= 0) throw Error("device '" + ctx.caps().name + "' has no compute timestamps");

  Progress progress;
  progress.suite = c.name;
  nlohmann::json out = {{"schema", "vkspec-bench/1"},
                        {"suite", c.name},
                        {"started_utc", utc_now()},
                        {"units", units_json()},
                        {"build", build_json()},
                        {"device", caps_json(ctx.caps())},
                        {"host", host_json()},
                        {"settings",
                         {{"reps", c.reps},
                          {"warmup", 1},
                          {"matmul_reps", c.matmul.reps},
                          {"max_relative_sd", kMaxRelativeSd},
                          {"min_timer_ticks", kMinTicks},
                          {"order", "interleaved: every model and every configuration once per repetition, alternating order"}}}};

  nlohmann::json phases;
  auto lap = [&, t = clock_type::now()](const char* name) mutable {
    const auto now = clock_type::now();
    phases[name] = std::chrono::duration<double>(now - t).count();
    t = now;
  };
  nlohmann::json mm = nlohmann::json::array();
  for (WeightType t : types)
    for (auto& row : measure_matmul(ctx, t, c.matmul, progress)) mm.push_back(row);
  out["matmul"] = {{"rows", c.matmul.N}, {"cols", c.matmul.K}, {"rotate_mib", c.matmul.rotate_mib}, {"results", mm}};

  lap("matmul_s");
  nlohmann::json cost;
  std::vector<ModelUnderTest> files;
  if (!model_path.empty()) {
    files.push_back({model_path, "file", std::make_unique<GgufFile>(GgufFile::open(model_path))});
  } else {
    for (const std::string& s : c.shapes) {
      const ModelShape& shape = find_model_shape(s);
      progress("generating the random model " + s);
      files.push_back({s, weight_type_name(WeightType(uint32_t(shape.wtype))), std::make_unique<GgufFile>(random_model(shape))});
    }
  }
  const nlohmann::json models = bench_models(ctx, files, c, progress);
  {  // c(N) on the first model
    ModelOptions mo;
    mo.max_rows = *std::max_element(c.cost_rows.begin(), c.cost_rows.end());
    LlamaModel m(ctx, *files[0].file, mo);
    cost = {{"model", files[0].name}, {"kv_length", kCostAt}, {"results", verify_cost(ctx, m, c.cost_rows, c.reps, c.cost_per_submit, progress)}};
  }
  out["models"] = models;
  out["verify_cost"] = cost;
  lap("models_s");
  out["speculative"] = bench_speculative(ctx, demo, c, progress);
  lap("speculative_s");
  out["phase_wall_s"] = phases;
  out["wall_s"] = std::chrono::duration<double>(clock_type::now() - progress.t0).count();
  out["host_after"] = host_json();
  nlohmann::json flagged = nlohmann::json::array();
  for (const char* part : {"matmul", "models", "verify_cost", "speculative"}) collect_unreliable(out[part], part, flagged);
  out["unreliable"] = flagged;
  progress("done");
  progress.done();

  const std::string json_text = out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (!json_path.empty()) write_out(json_path, json_text);
  if (!md_path.empty() || json_path.empty()) write_out(md_path.empty() ? "-" : md_path, suite_markdown(out));
  return 0;
}

}  // namespace vkspec::cli
