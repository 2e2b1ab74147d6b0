// What `bench --suite` and `bench-kernels` share: repetition statistics with reliability flags,
// the matmul measurement, the built-in random models of named shapes, the verify cost ratio
// c(N), and the report pieces (device, host, build, lock, markdown). Every figure's key names its
// unit (tokens_per_s, gb_per_s, us, ...); kUnits lists them for the JSON schema.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vkspec/context.hpp"
#include "vkspec/gguf.hpp"
#include "vkspec/model.hpp"
#include "vkspec/ops.hpp"

namespace vkspec::cli {

// ---- statistics -------------------------------------------------------------------------------
// A figure measured over repetitions: {"mean", "sd", "n", "values", "unreliable": [reasons]}.
// `min_time_s`: the shortest interval behind one value and `tick_s` the timer's resolution; a
// value shorter than 100 ticks (resolution error > 1%) or a spread sd/mean > 10% is flagged.
inline constexpr double kMaxRelativeSd = 0.10;
inline constexpr double kMinTicks = 100;
nlohmann::json stat_json(const std::vector<double>& values, double min_time_s = 0, double tick_s = 0);
double stat_mean(const nlohmann::json& s);

// ---- matmul -----------------------------------------------------------------------------------
struct MatmulPlan {
  uint32_t N = 4096, K = 4096;  // weight rows x columns
  std::vector<uint32_t> batches{1, 2, 4, 8, 16, 32, 64};
  int reps = 3;
  uint64_t rotate_mib = 1024;  // weights rotate over copies totalling this much (DRAM-bound)
};
inline constexpr uint64_t kMaxMatmulDispatches = 65536;  // per batch size, warm-up included
// One JSON row per batch: dtype, rows, cols, batch, us, gb_per_s, gflop_per_s (each a stat over
// the repetitions), weight_copies, path. `progress` is called before each batch.
nlohmann::json measure_matmul(Context& ctx, WeightType t, const MatmulPlan& plan,
                              const std::function<void(const std::string&)>& progress = {});
WeightType parse_weight_type(const std::string& s);  // "f16", "q4_k"/"q4_K", ... ; throws naming the choices

// ---- built-in random models -------------------------------------------------------------------
struct ModelShape {
  const char* name;  // "tiny-512x8" (f16), "tiny-512x8-q4_K", "tiny-512x8-q4_K_M"
  int C, L, H, F, V;
  GgmlType wtype;
  // llama.cpp's Q4_K_M mix (llama_tensor_get_type): Q6_K for output.weight, and for attn_v and
  // ffn_down in its "more bits" layers; rows no multiple of 256 fall back as llama.cpp's do
  // (Q4_K to Q5_0, Q6_K to Q8_0). Without it every matrix is `wtype`, falling back to Q8_0.
  bool k_m = false;
};
const std::vector<ModelShape>& model_shapes();
const ModelShape& find_model_shape(const std::string& name);  // throws naming the shapes
// The random Llama of `shape` as a GGUF in memory (fixed seed). Matrices whose rows are no
// multiple of the type's block fall back to q8_0, as llama.cpp's K-quant mixes do.
GgufFile random_model(const ModelShape& shape, uint64_t seed = 1);
// "57.36 M" style parameter count and the bytes of all tensors.
uint64_t model_params(const GgufFile& f);
uint64_t model_bytes(const GgufFile& f);

// ---- verify cost ratio c(N) = time(forward N rows) / time(forward 1 row) --------------------
// `model` must have max_rows >= max(rows) and capacity >= kv_length + max(rows). Each forward
// computes every row's logits (as a verify pass does) with kv_length committed positions before
// its rows (kCostAt unless bench-kernels --cost-kv says otherwise); `reps` timed submissions of
// `per_submit` forwards each, wall clock.
inline constexpr uint32_t kCostAt = 128;
nlohmann::json verify_cost(Context& ctx, LlamaModel& model, const std::vector<uint32_t>& rows, int reps,
                           uint32_t per_submit, const std::function<void(const std::string&)>& progress = {},
                           uint32_t kv_length = kCostAt);
// Where those forwards' time goes: per N, GPU microseconds by kernel label (timestamp queries,
// which themselves add to each dispatch: compare kernels with each other and across N, not with
// the wall-clock figures), averaged over `reps` forwards after a warm-up, and dispatch counts.
nlohmann::json verify_cost_kernels(Context& ctx, LlamaModel& model, const std::vector<uint32_t>& rows, int reps,
                                   uint32_t kv_length = kCostAt);

// ---- report pieces ----------------------------------------------------------------------------
nlohmann::json caps_json(const DeviceCaps& c);  // devices.cpp
nlohmann::json build_json();                    // vkspec version, git commit, compiler, build type
nlohmann::json host_json();                     // CPU governor / power hints, cpuidle, load, LP_NUM_THREADS
// On a CPU device (whose dispatches hand work to host threads), a note on stderr when the host's
// idle vCPUs halt without polling.
void warn_idle(const DeviceCaps& caps);
nlohmann::json units_json();                    // every figure key -> its unit

// Refuses (throws naming the PID and the lock file) while another benchmark holds the lock of
// this device; a lock left by a dead process is taken over (flock is released at exit).
class BenchLock {
 public:
  explicit BenchLock(const DeviceCaps& caps);
  ~BenchLock();
  BenchLock(const BenchLock&) = delete;
  BenchLock& operator=(const BenchLock&) = delete;
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

// The paste-ready markdown of a suite's JSON: device line, pp/tg table (llama-bench's columns),
// speculative table, matmul table, verify cost, footnotes for unreliable figures.
std::string suite_markdown(const nlohmann::json& suite);

}  // namespace vkspec::cli
