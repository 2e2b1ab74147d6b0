// Measurements shared by `bench --suite` and `bench-kernels` (bench_common.hpp).
#include "cli/bench_common.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>

#include "vkspec/dtype.hpp"
#include "vkspec/gguf_writer.hpp"
#include "vkspec/quants.hpp"
#include "vkspec/sequence.hpp"

namespace vkspec::cli {

// ---- statistics -------------------------------------------------------------------------------

nlohmann::json stat_json(const std::vector<double>& v, double min_time_s, double tick_s) {
  double mean = 0, sd = 0;
  for (double x : v) mean += x;
  mean = v.empty() ? 0 : mean / double(v.size());
  for (double x : v) sd += (x - mean) * (x - mean);
  sd = v.size() > 1 ? std::sqrt(sd / double(v.size() - 1)) : 0;
  nlohmann::json why = nlohmann::json::array();
  if (v.size() < 2) why.push_back("one repetition: no spread measured");
  if (mean != 0 && sd / std::fabs(mean) > kMaxRelativeSd) {
    char b[96];
    std::snprintf(b, sizeof b, "run-to-run spread sd/mean %.1f%% > %.0f%%", 100 * sd / std::fabs(mean),
                  100 * kMaxRelativeSd);
    why.push_back(b);
  }
  if (tick_s > 0 && min_time_s < kMinTicks * tick_s) {
    char b[128];
    std::snprintf(b, sizeof b, "interval %.3g s is under %.0f timer ticks of %.3g s", min_time_s, kMinTicks, tick_s);
    why.push_back(b);
  }
  return {{"mean", mean}, {"sd", sd}, {"n", v.size()}, {"values", v}, {"unreliable", why}};
}

double stat_mean(const nlohmann::json& s) { return s.at("mean").get<double>(); }

// ---- matmul -----------------------------------------------------------------------------------

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

// Bytes a matmul must read from memory for the weights, as stored on the device.
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

WeightType parse_weight_type(const std::string& s) {
  std::string lower = s, names;
  for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
  for (uint32_t i = 0; i < 64; ++i) {
    if (!weight_type_valid(i)) continue;
    const std::string n = weight_type_name(WeightType(i));
    if (lower == n) return WeightType(i);
    names += (names.empty() ? "" : ", ") + n;
  }
  throw Error("unknown weight type '" + s + "' (known: " + names + ")");
}

nlohmann::json measure_matmul(Context& ctx, WeightType t, const MatmulPlan& plan,
                              const std::function<void(const std::string&)>& progress) {
  const uint32_t N = plan.N, K = plan.K;
  const std::string ts = weight_type_name(t);
  if (K % weight_type_block(t))
    throw Error("matmul " + std::to_string(N) + "x" + std::to_string(K) + ": " + ts + " rows must be a multiple of " +
                std::to_string(weight_type_block(t)));
  const double tick_s = ctx.caps().timestamp_period_ns * 1e-9;
  const double wb = weight_bytes(t, N, K);
  const std::string shape = std::to_string(N) + "x" + std::to_string(K) + " " + ts;
  if (wb > double(ctx.caps().max_allocation_bytes))
    throw Error("matmul " + shape + ": its " + std::to_string(uint64_t(wb) >> 20) + " MiB of weights exceed the device's largest allocation of " +
                std::to_string(ctx.caps().max_allocation_bytes >> 20) + " MiB");
  // Copies enough to rotate through --rotate-mib (so no cache holds the weights), at most 256 and
  // at most half the device's memory; the JSON reports how many.
  double most = 256;
  if (ctx.caps().device_local_bytes) most = std::min(most, std::floor(0.5 * double(ctx.caps().device_local_bytes) / wb));
  const uint32_t copies = uint32_t(std::clamp<double>(std::ceil(double(plan.rotate_mib) * 1048576.0 / wb), 1, std::max(most, 1.0)));
  // Every timed dispatch is recorded in one command buffer: bounded, not memory without end.
  const uint64_t dispatches = uint64_t(copies) * uint64_t(plan.reps + 1);
  if (dispatches > kMaxMatmulDispatches)
    throw Error("matmul " + shape + ": " + std::to_string(plan.reps) + " repetitions of " + std::to_string(copies) +
                " weight copies are " + std::to_string(dispatches) + " dispatches in one submission, more than " +
                std::to_string(kMaxMatmulDispatches) + " (lower --reps or --rotate-mib)");
  auto raw = random_weight(t, N, K, N ^ K);
  std::vector<DeviceWeight> ws;
  for (uint32_t c = 0; c < copies; ++c) ws.push_back(upload_weight(ctx, t, N, K, raw.data()));
  nlohmann::json rows = nlohmann::json::array();
  for (uint32_t B : plan.batches) {
    if (B == 0) throw Error("matmul batch sizes must be at least 1");
    if (progress) progress("matmul " + ts + " B=" + std::to_string(B));
    const uint32_t Kp = (K + 3) / 4 * 4;
    Buffer x(ctx, uint64_t(B) * Kp * 4), y(ctx, uint64_t(B) * N * 4);
    x.upload(std::vector<float>(size_t(B) * Kp, 0.5f));
    // One submission: a warm-up pass over the copies (a first dispatch pays the driver's one-time
    // costs), then the timed passes; repetition r is the median over the copies of its pass.
    Sequence seq(ctx, copies * uint32_t(plan.reps + 1) + 1);
    seq.begin();
    for (int r = -1; r < plan.reps; ++r)
      for (auto& w : ws) matmul(seq, w, Mat{&x, 0, Kp}, Mat{&y, 0, N}, B);
    seq.run();
    auto tm = seq.timings();
    tm.erase(tm.begin(), tm.begin() + copies);  // the warm-up pass
    std::vector<double> us, gbs, gflops;
    double shortest = 1e30;
    const double bytes = wb + double(B) * K * 4 + double(B) * N * 4;
    for (int r = 0; r < plan.reps; ++r) {
      std::vector<double> pass;
      for (uint32_t c = 0; c < copies; ++c) pass.push_back(tm[size_t(r) * copies + c].us);
      std::sort(pass.begin(), pass.end());
      const size_t h = pass.size() / 2;
      const double med = pass.size() % 2 ? pass[h] : 0.5 * (pass[h - 1] + pass[h]);
      shortest = std::min(shortest, pass.front() * 1e-6);
      us.push_back(med);
      gbs.push_back(bytes / (med * 1e-6) / 1e9);
      gflops.push_back(2.0 * N * K * B / (med * 1e-6) / 1e9);
    }
    rows.push_back({{"dtype", ts},
                    {"rows", N},
                    {"cols", K},
                    {"batch", B},
                    {"us", stat_json(us, shortest, tick_s)},
                    {"gb_per_s", stat_json(gbs, shortest, tick_s)},
                    {"gflop_per_s", stat_json(gflops, shortest, tick_s)},
                    {"weight_copies", copies},
                    {"path", ws[0].texel ? "texel" : "storage"}});
  }
  return rows;
}

// ---- built-in random models -------------------------------------------------------------------

const std::vector<ModelShape>& model_shapes() {
  // The shape of tools/make_random_gguf's default (a Llama-style 512-wide, 8-layer model with a
  // 32000-token vocabulary, 57 M parameters), as f16, as q4_K and as llama.cpp's Q4_K_M mix.
  static const std::vector<ModelShape> shapes = {
      {"tiny-512x8", 512, 8, 8, 1408, 32000, GgmlType::F16},
      {"tiny-512x8-q4_K", 512, 8, 8, 1408, 32000, GgmlType::Q4_K},
      {"tiny-512x8-q4_K_M", 512, 8, 8, 1408, 32000, GgmlType::Q4_K, true},
  };
  return shapes;
}

const ModelShape& find_model_shape(const std::string& name) {
  std::string names;
  for (const ModelShape& s : model_shapes()) {
    if (name == s.name) return s;
    names += (names.empty() ? "" : ", ") + std::string(s.name);
  }
  throw Error("unknown model shape '" + name + "' (built-in shapes: " + names + ")");
}

namespace {

// K-quant matrices: random blocks (every integer field random), the f16 scales shrunk so that
// values lie in ±1/sqrt(fan_in) like random_llama's, which keeps activations finite.
std::vector<uint8_t> random_quant_matrix(const BlockFormat& f, uint64_t in, uint64_t out, std::mt19937& rng) {
  std::vector<uint8_t> raw = random_blocks(f, size_t(in * out / f.elems), rng);
  const float shrink = 1.0f / std::sqrt(float(in));
  for (size_t b = 0; b < raw.size() / f.bytes; ++b)
    for (uint32_t i = 0; i < f.n_f16; ++i) {
      uint8_t* p = &raw[b * f.bytes + f.f16_offsets[i]];
      uint16_t h;
      std::memcpy(&h, p, 2);
      h = f32_to_f16(f16_to_f32(h) * shrink);
      std::memcpy(p, &h, 2);
    }
  return raw;
}

// llama.cpp's "more bits" layers of a K-quant mix: the first and last eighth and every third between.
bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// What llama.cpp stores a K-quant matrix as when its rows are no multiple of 256.
GgmlType k_fallback(GgmlType t) {
  return t == GgmlType::Q4_K ? GgmlType::Q5_0 : t == GgmlType::Q5_K ? GgmlType::Q5_1 : GgmlType::Q8_0;
}

GgufWriter random_quant_llama(const LlamaConfig& c, uint64_t seed, GgmlType wtype, bool k_m) {
  GgufWriter w;
  add_llama_metadata(w, c, "vkspec-random");
  w.add_u32("general.file_type", wtype == GgmlType::Q4_K ? 15 : 0);  // llama_ftype Q4_K_M
  add_placeholder_llama_vocab(w, c.V);
  std::mt19937 rng{uint32_t(seed)};
  std::uniform_real_distribution<float> u(-1, 1);
  const BlockFormat& f = *block_format(uint32_t(wtype));
  auto mat = [&](const std::string& name, uint64_t in, uint64_t out, bool more_bits = false) {
    GgmlType t = k_m && more_bits ? GgmlType::Q6_K : wtype;
    if (k_m && in % 256 != 0) t = k_fallback(t);
    const BlockFormat& ft = *block_format(uint32_t(t));
    if (in % ft.elems == 0) {
      w.add_tensor(name, {in, out}, t, random_quant_matrix(ft, in, out, rng));
    } else {  // rows no multiple of the super-block, without k_m: q8_0
      std::vector<float> x(in * out);
      const float a = 1.0f / std::sqrt(float(in));
      for (float& v : x) v = a * u(rng);
      w.add_tensor_f32(name, {in, out}, x, GgmlType::Q8_0);
    }
  };
  auto vec = [&](const std::string& name, uint64_t n) {
    std::vector<float> x(n);
    for (float& v : x) v = 1.0f + 0.2f * u(rng);
    w.add_tensor_f32(name, {n}, x, GgmlType::F32);
  };
  const uint64_t C = uint64_t(c.C), F = uint64_t(c.F), V = uint64_t(c.V);
  {
    std::vector<uint8_t> e = random_quant_matrix(f, C, V, rng);
    w.add_tensor("token_embd.weight", {C, V}, wtype, std::move(e));
  }
  auto blk = [](int l, const char* n) { return "blk." + std::to_string(l) + "." + n; };
  for (int l = 0; l < c.L; ++l) {
    vec(blk(l, "attn_norm.weight"), C);
    mat(blk(l, "attn_q.weight"), C, C);
    mat(blk(l, "attn_k.weight"), C, uint64_t(c.Hkv) * c.D);
    mat(blk(l, "attn_v.weight"), C, uint64_t(c.Hkv) * c.D, use_more_bits(l, c.L));
    mat(blk(l, "attn_output.weight"), C, C);
    vec(blk(l, "ffn_norm.weight"), C);
    mat(blk(l, "ffn_gate.weight"), C, F);
    mat(blk(l, "ffn_up.weight"), C, F);
    mat(blk(l, "ffn_down.weight"), F, C, use_more_bits(l, c.L));
  }
  vec("output_norm.weight", C);
  mat("output.weight", C, V, true);
  return w;
}

}  // namespace

GgufFile random_model(const ModelShape& s, uint64_t seed) {
  LlamaConfig c;
  c.C = s.C, c.L = s.L, c.H = s.H, c.Hkv = s.H, c.D = s.C / s.H, c.F = s.F, c.V = s.V, c.ctx = 2048;
  c.tied_output = false;
  apply_arch_traits(c);
  GgufWriter w = s.wtype == GgmlType::F16 || s.wtype == GgmlType::F32 || s.wtype == GgmlType::Q8_0
                     ? random_llama(c, seed, s.wtype)
                     : random_quant_llama(c, seed, s.wtype, s.k_m);
  return GgufFile::from_bytes(std::string("<built-in ") + s.name + ">", w.to_bytes());
}

uint64_t model_params(const GgufFile& f) {
  uint64_t n = 0;
  for (const GgufTensor& t : f.tensors()) n += t.n_elements;
  return n;
}

uint64_t model_bytes(const GgufFile& f) {
  uint64_t n = 0;
  for (const GgufTensor& t : f.tensors()) n += t.n_bytes;
  return n;
}

// ---- verify cost ------------------------------------------------------------------------------

namespace {
// The random token ids of a cost pass (as many as its most rows), checked against the model.
Buffer cost_tokens(Context& ctx, const LlamaModel& model, const std::vector<uint32_t>& rows, uint32_t kv_length) {
  const uint32_t maxN = rows.empty() ? 1 : *std::max_element(rows.begin(), rows.end());
  if (maxN > model.max_rows() || uint64_t(kv_length) + maxN > model.capacity())
    throw Error("verify cost: " + std::to_string(maxN) + " rows at KV length " + std::to_string(kv_length) +
                " need a model with that many rows per pass and " + std::to_string(uint64_t(kv_length) + maxN) +
                " KV slots (it has " + std::to_string(model.max_rows()) + " and " + std::to_string(model.capacity()) + ")");
  std::mt19937 rng(7);
  std::vector<uint32_t> ids(maxN);
  for (auto& t : ids) t = rng() % uint32_t(model.config().V);
  Buffer tokens(ctx, uint64_t(maxN) * 4, MemoryKind::Host);
  tokens.upload(ids.data(), ids.size() * 4);
  return tokens;
}

// One verify-like forward of N rows at KV length kv_length: every row's logits, as verify.
void record_cost_forward(Sequence& seq, LlamaModel& model, const Buffer& tokens, uint32_t N, uint32_t kv_length) {
  LlamaModel::ForwardArgs a;
  a.N = N, a.t = kv_length, a.tokens = &tokens, a.logits_from = 0;
  model.forward(seq, a);
}
}  // namespace

nlohmann::json verify_cost(Context& ctx, LlamaModel& model, const std::vector<uint32_t>& rows, int reps,
                           uint32_t per_submit, const std::function<void(const std::string&)>& progress,
                           uint32_t kv_length) {
  using clock = std::chrono::steady_clock;
  const Buffer tokens = cost_tokens(ctx, model, rows, kv_length);
  const double tick_s = double(clock::period::num) / double(clock::period::den);
  std::vector<uint32_t> order = rows;
  if (std::find(order.begin(), order.end(), 1u) == order.end()) order.insert(order.begin(), 1);
  // Per-repetition seconds per forward, for each N; the N are interleaved within a repetition so
  // that drift (frequency, other load) hits every N alike.
  std::vector<std::vector<double>> secs(order.size());
  // Recorded anew for every submission (a plain Sequence is submitted once); only submit + wait
  // is timed.
  Sequence seq(ctx);
  double shortest = 1e30;
  for (int r = -1; r < reps; ++r)  // r = -1: warm-up
    for (size_t i = 0; i < order.size(); ++i) {
      if (progress && r >= 0) progress("verify cost N=" + std::to_string(order[i]) + " rep " + std::to_string(r + 1));
      seq.begin();
      for (uint32_t k = 0; k < per_submit; ++k) record_cost_forward(seq, model, tokens, order[i], kv_length);
      seq.end();
      const auto t0 = clock::now();
      seq.submit();
      seq.wait();
      const double s = std::chrono::duration<double>(clock::now() - t0).count();
      if (r >= 0) secs[i].push_back(s / per_submit), shortest = std::min(shortest, s);
    }
  // c(N) against the 1-row forward wherever the list put it (--cost-rows 4,2,1 divided by 4's).
  const std::vector<double>& one = secs[size_t(std::find(order.begin(), order.end(), 1u) - order.begin())];
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < order.size(); ++i) {
    if (std::find(rows.begin(), rows.end(), order[i]) == rows.end()) continue;
    std::vector<double> us, ratio;
    for (int r = 0; r < reps; ++r) us.push_back(secs[i][r] * 1e6), ratio.push_back(secs[i][r] / one[r]);
    out.push_back({{"rows", order[i]},
                   {"us_per_forward", stat_json(us, shortest, tick_s)},
                   {"cost_ratio", stat_json(ratio, shortest, tick_s)}});
  }
  return out;
}

nlohmann::json verify_cost_kernels(Context& ctx, LlamaModel& model, const std::vector<uint32_t>& rows, int reps,
                                   uint32_t kv_length) {
  if (ctx.caps().timestamp_period_ns <= 0) throw Error("device '" + ctx.caps().name + "' has no compute timestamps");
  const Buffer tokens = cost_tokens(ctx, model, rows, kv_length);
  Sequence seq(ctx, 4096);  // more timestamps than any forward has dispatches
  nlohmann::json out = nlohmann::json::array();
  for (uint32_t N : rows) {
    std::map<std::string, double> us;
    std::map<std::string, uint32_t> count;
    std::vector<double> at;  // microseconds of the forward's i-th dispatch, averaged over the repetitions
    std::vector<std::string> labels;
    for (int r = -1; r < reps; ++r) {  // r = -1: warm-up
      seq.begin();
      record_cost_forward(seq, model, tokens, N, kv_length);
      seq.run();
      const std::vector<DispatchTiming> timings = seq.timings();
      if (timings.size() != seq.dispatch_count())
        throw Error("verify cost: timed " + std::to_string(timings.size()) + " of a forward's " +
                    std::to_string(seq.dispatch_count()) + " dispatches");
      if (r < 0) continue;
      count.clear();
      for (const DispatchTiming& d : timings) us[d.label] += d.us / reps, ++count[d.label];
      if (labels.empty()) {
        at.assign(timings.size(), 0.0);
        for (const DispatchTiming& d : timings) labels.push_back(d.label);
      }
      if (!std::equal(timings.begin(), timings.end(), labels.begin(), labels.end(),
                      [](const DispatchTiming& d, const std::string& l) { return d.label == l; }))
        throw Error("verify cost: a repetition's forward recorded other dispatches than the first's");
      for (size_t i = 0; i < timings.size(); ++i) at[i] += timings[i].us / reps;
    }
    nlohmann::json line = nlohmann::json::array();
    for (size_t i = 0; i < at.size(); ++i) line.push_back({{"kernel", labels[i]}, {"us", at[i]}});
    double total = 0;
    for (const auto& [k, v] : us) total += v;
    out.push_back({{"rows", N}, {"us", total}, {"us_by_kernel", us}, {"dispatches_by_kernel", count},
                   {"kernel_timeline", std::move(line)}});
  }
  return out;
}

}  // namespace vkspec::cli
