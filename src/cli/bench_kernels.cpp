// `vkspec bench-kernels [--json]`: achieved GB/s and GFLOP/s of the matmul per weight type and
// batch size, from timestamp queries. Weights rotate over copies totalling >= 1 GiB (or the
// --rotate-mib given) so the numbers are DRAM-bound, not cache-flattered.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <random>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "vkspec/dtype.hpp"
#include "vkspec/quants.hpp"
#include "vkspec/ops.hpp"

namespace vkspec::cli {

namespace {

std::vector<uint8_t> random_weight(WeightType t, uint32_t N, uint32_t K, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<uint8_t> raw;
  if (t == WeightType::F32) {
    raw.resize(size_t(N) * K * 4);
    for (size_t i = 0; i < size_t(N) * K; ++i) {
      float x = d(rng);
      std::memcpy(&raw[4 * i], &x, 4);
    }
  } else if (t == WeightType::F16) {
    raw.resize(size_t(N) * K * 2);
    for (size_t i = 0; i < size_t(N) * K; ++i) {
      uint16_t h = f32_to_f16(d(rng));
      std::memcpy(&raw[2 * i], &h, 2);
    }
  } else if (t != WeightType::Q8_0) {
    raw = random_blocks(*block_format(uint32_t(t)), size_t(N) * K / weight_type_block(t), rng);
  } else {
    raw.resize(size_t(N) * K / 32 * kQ8_0Bytes);
    float blk[32];
    for (size_t b = 0; b < size_t(N) * K / 32; ++b) {
      for (auto& x : blk) x = d(rng);
      quantize_q8_0_block(blk, &raw[b * kQ8_0Bytes]);
    }
  }
  return raw;
}

// Bytes a matmul must read from memory: the weights (as stored on the device) plus activations.
double weight_bytes(WeightType t, uint32_t N, uint32_t K) {
  const double kb = (K + 31) / 32;
  switch (t) {
    case WeightType::F32: return double(N) * kb * 128;
    case WeightType::F16: return double(N) * kb * 64;
    case WeightType::Q8_0: return double(N) * kb * 36;  // 32 quants + f32 scale
    default: {  // the file's own blocks
      const BlockFormat& f = *block_format(uint32_t(t));
      return double(N) * (K / f.elems) * f.bytes;
    }
  }
}

}  // namespace

static int run_bench_kernels(const std::vector<std::string>& argv) {
  Args args(argv);
  const bool json = args.flag("json");
  const uint64_t rotate_mib = args.get_uint("rotate-mib", 1024);
  const int reps = int(args.get_uint("reps", 3, 1000000));
  std::string shapes_opt = args.get("shapes", "4096x4096,512x512,1408x512,512x1408");
  std::string types_opt = args.get("types", "f16,q8_0,f32");
  std::string batches_opt = args.get("batches", "1,4,16,64");
  ContextOptions co;
  co.device = args.get("device", "");
  args.reject_unknown();
  Context ctx(co);
  if (ctx.caps().timestamp_period_ns <= 0) throw Error("device '" + ctx.caps().name + "' has no compute timestamps");

  auto split = [](const std::string& s) {
    std::vector<std::string> out;
    size_t p = 0;
    while (p <= s.size()) {
      size_t q = s.find(',', p);
      if (q == std::string::npos) q = s.size();
      if (q > p) out.push_back(s.substr(p, q - p));
      p = q + 1;
    }
    return out;
  };
  nlohmann::json results = nlohmann::json::array();
  for (const std::string& shp : split(shapes_opt)) {
    uint32_t N = 0, K = 0;
    if (std::sscanf(shp.c_str(), "%ux%u", &N, &K) != 2 || !N || !K) throw Error("bad --shapes entry '" + shp + "' (want NxK)");
    for (const std::string& ts : split(types_opt)) {
      WeightType t = WeightType::F32;
      bool known = false;
      for (uint32_t i = 0; i < 32 && !known; ++i)
        if (weight_type_valid(i) && ts == weight_type_name(WeightType(i))) t = WeightType(i), known = true;
      if (!known) throw Error("bad --types entry '" + ts + "'");
      if (K % weight_type_block(t)) throw Error("--shapes " + shp + ": " + ts + " rows must be a multiple of " +
                                                 std::to_string(weight_type_block(t)));
      const double wb = weight_bytes(t, N, K);
      const uint32_t copies = uint32_t(std::clamp<double>(std::ceil(double(rotate_mib) * 1048576.0 / wb), 1, 256));
      auto raw = random_weight(t, N, K, N ^ K);
      std::vector<DeviceWeight> ws;
      for (uint32_t c = 0; c < copies; ++c) ws.push_back(upload_weight(ctx, t, N, K, raw.data()));
      for (const std::string& bs : split(batches_opt)) {
        const uint32_t B = uint32_t(std::stoul(bs));
        const uint32_t Kp = (K + 3) / 4 * 4;
        Buffer x(ctx, uint64_t(B) * Kp * 4), y(ctx, uint64_t(B) * N * 4);
        x.upload(std::vector<float>(size_t(B) * Kp, 0.5f));
        Sequence seq(ctx, copies * reps + 1);
        seq.begin();
        for (int r = 0; r < reps; ++r)
          for (auto& w : ws) matmul(seq, w, Mat{&x, 0, Kp}, Mat{&y, 0, N}, B);
        seq.run();
        auto tm = seq.timings();
        std::vector<double> us;
        for (auto& d : tm) us.push_back(d.us);
        std::sort(us.begin(), us.end());
        const double med = us[us.size() / 2];
        const double bytes = wb + double(B) * K * 4 + double(B) * N * 4;
        nlohmann::json r = {{"op", "matmul"},
                            {"dtype", ts},
                            {"rows", N},
                            {"cols", K},
                            {"batch", B},
                            {"us", med},
                            {"us_per_row", med / B},
                            {"gb_per_s", bytes / (med * 1e-6) / 1e9},
                            {"gflop_per_s", 2.0 * N * K * B / (med * 1e-6) / 1e9},
                            {"weight_copies", copies},
                            {"path", ws[0].texel ? "texel" : "storage"}};
        results.push_back(r);
        if (!json)
          std::fprintf(stderr, "matmul %-5s %5ux%-5u B=%-3u %9.1f us  %6.2f GB/s  %7.2f GFLOP/s  (%s, %u copies)\n",
                       ts.c_str(), N, K, B, med, double(r["gb_per_s"]), double(r["gflop_per_s"]),
                       ws[0].texel ? "texel" : "storage", copies);
      }
    }
  }
  nlohmann::json out = {{"device", ctx.caps().name}, {"results", results}};
  if (json) std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  return 0;
}

static RegisterCommand reg{"bench-kernels", "matmul GB/s and GFLOP/s per weight type and batch [--json]",
                           run_bench_kernels};

}  // namespace vkspec::cli
