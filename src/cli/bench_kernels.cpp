// `vkspec bench-kernels [--json]`: achieved GB/s and GFLOP/s of the matmul per weight type and
// batch size (B = 1, 2, 4, 8, 16, 32, 64 by default), from timestamp queries, and the verify cost
// ratio c(N) = time(forward N rows) / time(forward 1 row) of a model (the built-in random
// 512-wide 8-layer f16 model unless --cost-model names a GGUF or a built-in shape), its forwards'
// rows after 128 committed positions (--cost-kv another count). Weights rotate over copies
// totalling >= 1 GiB (or the --rotate-mib given), at most 256 copies, so that the numbers are
// DRAM-bound, not cache-flattered; a small matrix's 256 copies can total less (each row prints
// its copies, `weight_copies` in JSON).
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "cli/bench_common.hpp"
#include "cli/commands.hpp"
#include "cli/session.hpp"

namespace vkspec::cli {

// A list option's numbers; one given twice (2,02) is refused, as every list option is.
static std::vector<uint32_t> parse_list(const std::string& opt, const std::string& v) {
  std::vector<uint32_t> out;
  for (const std::string& s : option_list(opt, v)) {
    const uint32_t x = uint32_t(parse_uint(opt, s, 4096, 1));
    if (std::find(out.begin(), out.end(), x) != out.end())
      throw Error("option --" + opt + " lists " + std::to_string(x) + " more than once");
    out.push_back(x);
  }
  return out;
}

static int run_bench_kernels(const std::vector<std::string>& argv) {
  Args args(argv);
  const bool json = args.flag("json");
  MatmulPlan plan;
  plan.rotate_mib = args.get_uint("rotate-mib", 1024, 65536);
  plan.reps = int(args.get_uint("reps", 3, 1000, 1));
  const std::string shapes_opt = args.get("shapes", "4096x4096,512x512,1408x512,512x1408");
  const std::string types_opt = args.get("types", "f16,q8_0,f32");
  plan.batches = parse_list("batches", args.get("batches", "1,2,4,8,16,32,64"));
  const bool cost = !args.flag("no-cost");
  for (const char* o : {"cost-model", "cost-rows", "cost-kv"})
    if (!cost && args.has(o)) throw Error(std::string("--no-cost drops the cost measurement that --") + o + " sets up: give one of them");
  const bool cost_kernels = args.flag("time-kernels");
  const std::string cost_model = args.get("cost-model", "tiny-512x8");
  const std::vector<uint32_t> cost_rows = parse_list("cost-rows", args.get("cost-rows", "1,2,4,8,16,32,64"));
  // Committed positions before the cost forwards' rows: attention's share of c(N) grows with it.
  const uint32_t cost_kv = uint32_t(args.get_uint("cost-kv", kCostAt, 65536, 0));
  ContextOptions co;
  co.device = args.get("device", "");
  args.reject_unknown();
  if (cost_kernels && !cost) throw Error("--time-kernels times the forwards of the cost measurement: drop --no-cost");
  // The cost model named before any matmul runs: a mistyped path failed only after them.
  std::error_code ec;
  if (cost && std::filesystem::is_directory(cost_model, ec))
    throw Error("--cost-model " + cost_model + " is a directory: give a GGUF file or a random shape's name");
  if (cost && !std::filesystem::exists(cost_model, ec)) {
    if (cost_model.find('/') != std::string::npos || cost_model.ends_with(".gguf"))
      throw Error("--cost-model " + cost_model + ": no such file");
    find_model_shape(cost_model);
  }
  std::vector<std::pair<uint32_t, uint32_t>> shapes;
  for (const std::string& shp : option_list("shapes", shapes_opt)) {
    // Digits only on each side of the x: sscanf's %u read 4294967297 as 1 and took signs and spaces.
    const size_t x = shp.find('x');
    const std::string n = x == std::string::npos ? shp : shp.substr(0, x), k = x == std::string::npos ? "" : shp.substr(x + 1);
    auto side = [&](const std::string& d) -> uint32_t {
      try {
        return uint32_t(parse_uint("shapes", d, 65536, 1));
      } catch (const Error&) {
        throw Error("bad --shapes entry '" + shp + "' (want NxK, each 1..65536)");
      }
    };
    const std::pair<uint32_t, uint32_t> nk{side(n), side(k)};
    if (std::find(shapes.begin(), shapes.end(), nk) != shapes.end())  // 64x64,064x64
      throw Error("option --shapes lists " + std::to_string(nk.first) + "x" + std::to_string(nk.second) + " more than once");
    shapes.push_back(nk);
  }
  std::vector<WeightType> types;
  for (const std::string& ts : option_list("types", types_opt)) {
    const WeightType t = parse_weight_type(ts);
    if (std::find(types.begin(), types.end(), t) != types.end())  // f16,F16: one type spelled twice
      throw Error("option --types lists " + std::string(weight_type_name(t)) + " more than once");
    types.push_back(t);
  }
  Context ctx(co);
  warn_idle(ctx.caps());
  if (ctx.caps().timestamp_period_ns <= 0) throw Error("device '" + ctx.caps().name + "' has no compute timestamps");

  nlohmann::json results = nlohmann::json::array(), skipped = nlohmann::json::array();
  for (auto [N, K] : shapes)
    for (WeightType t : types) {
      plan.N = N, plan.K = K;
      // A block type holds K only in whole blocks (a model file would store such a matrix in
      // another type): that pair is skipped and named, the others still run.
      if (K % weight_type_block(t)) {
        const std::string why = std::string(weight_type_name(t)) + " needs K (the columns, " + std::to_string(K) +
                                ") a multiple of " + std::to_string(weight_type_block(t));
        if (!json) std::fprintf(stderr, "matmul %-6s %5ux%-5u skipped: %s\n", weight_type_name(t), N, K, why.c_str());
        skipped.push_back({{"op", "matmul"}, {"dtype", weight_type_name(t)}, {"rows", N}, {"cols", K}, {"why", why}});
        continue;
      }
      for (const auto& r : measure_matmul(ctx, t, plan)) {
        // Flat figures (means) as before, with the spread and flags beside them.
        const double us = stat_mean(r["us"]);
        nlohmann::json row = {{"op", "matmul"},
                              {"dtype", r["dtype"]},
                              {"rows", N},
                              {"cols", K},
                              {"batch", r["batch"]},
                              {"us", us},
                              {"us_sd", r["us"]["sd"]},
                              {"us_per_row", us / r["batch"].get<double>()},
                              {"gb_per_s", stat_mean(r["gb_per_s"])},
                              {"gflop_per_s", stat_mean(r["gflop_per_s"])},
                              {"weight_copies", r["weight_copies"]},
                              {"path", r["path"]},
                              {"unreliable", r["us"]["unreliable"]}};
        if (!json)
          std::fprintf(stderr, "matmul %-6s %5ux%-5u B=%-3u %9.1f us ± %5.1f  %6.2f GB/s  %7.2f GFLOP/s  (%s, %u copies)\n",
                       r["dtype"].get<std::string>().c_str(), N, K, r["batch"].get<uint32_t>(), us,
                       r["us"]["sd"].get<double>(), row["gb_per_s"].get<double>(), row["gflop_per_s"].get<double>(),
                       r["path"].get<std::string>().c_str(), r["weight_copies"].get<uint32_t>());
        results.push_back(row);
      }
    }
  if (results.empty())
    throw Error("no --types / --shapes pair can be measured: " + skipped[0]["why"].get<std::string>() + " (shape " +
                std::to_string(skipped[0]["rows"].get<uint32_t>()) + "x" + std::to_string(skipped[0]["cols"].get<uint32_t>()) + ")");
  nlohmann::json out = {{"device", ctx.caps().name}, {"results", results}, {"skipped", skipped}};

  if (cost) {
    // A file path, or else a built-in shape generated in memory.
    const bool is_file = std::filesystem::exists(cost_model, ec);
    GgufFile f = is_file ? GgufFile::open(cost_model) : random_model(find_model_shape(cost_model));
    ModelOptions mo;
    mo.max_rows = *std::max_element(cost_rows.begin(), cost_rows.end());
    mo.context = std::max<uint32_t>(2048, cost_kv + mo.max_rows);
    LlamaModel m(ctx, f, mo);
    // Timings do not depend on what the positions mean, but the measured forwards sit past what
    // the model was trained for: said, as generate says it for --ctx.
    const uint64_t reach = uint64_t(cost_kv) + mo.max_rows;
    if (m.config().ctx > 0 && reach > uint64_t(m.config().ctx))
      std::fprintf(stderr, "warning: --cost-kv %u + %u rows reach past the model's trained context of %d tokens; "
                   "timed as given, outputs there are unreliable\n", cost_kv, mo.max_rows, m.config().ctx);
    const nlohmann::json c = verify_cost(ctx, m, cost_rows, std::max(plan.reps, 2), 2, {}, cost_kv);
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& r : c) {
      rows.push_back({{"rows", r["rows"]},
                      {"us_per_forward", stat_mean(r["us_per_forward"])},
                      {"us_per_forward_sd", r["us_per_forward"]["sd"]},
                      {"cost_ratio", stat_mean(r["cost_ratio"])},
                      {"cost_ratio_sd", r["cost_ratio"]["sd"]},
                      {"unreliable", r["cost_ratio"]["unreliable"]}});
      if (!json)
        std::fprintf(stderr, "verify cost %s at %u keys N=%-3u %10.1f us/forward  c(N) = %5.2f ± %.2f\n",
                     cost_model.c_str(), cost_kv, r["rows"].get<uint32_t>(), stat_mean(r["us_per_forward"]),
                     stat_mean(r["cost_ratio"]), r["cost_ratio"]["sd"].get<double>());
    }
    out["verify_cost"] = {{"model", cost_model}, {"kv_length", cost_kv}, {"results", rows}};
    if (cost_kernels) {
      const nlohmann::json k = verify_cost_kernels(ctx, m, cost_rows, std::max(plan.reps, 2), cost_kv);
      out["verify_cost"]["kernels"] = k;
      if (!json)
        for (const auto& r : k) {
          std::string line;
          for (const auto& [label, us] : r["us_by_kernel"].items())
            line += "  " + label + " " + std::to_string(int(us.get<double>() + 0.5)) + " (" +
                    std::to_string(r["dispatches_by_kernel"][label].get<uint32_t>()) + ")";
          std::fprintf(stderr, "verify cost %s N=%-3u by kernel, us (dispatches):%s\n", cost_model.c_str(),
                       r["rows"].get<uint32_t>(), line.c_str());
        }
    }
  }
  if (json) std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  return 0;
}

static RegisterCommand reg{"bench-kernels",
                           "matmul GB/s and GFLOP/s per weight type and batch, and the verify cost c(N) "
                           "[--types f16,q4_k --batches 1,2,...,64 --shapes NxK --reps R --rotate-mib M] "
                           "[--cost-model M --cost-rows 1,2,... --cost-kv L|--no-cost] [--time-kernels] [--device D] [--json]",
                           run_bench_kernels};

}  // namespace vkspec::cli
