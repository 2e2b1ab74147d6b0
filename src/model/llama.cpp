// The verifier forward on Vulkan: embed → L decoder layers (decoder_layer.hpp: attn_norm folded
// into the qkv matmul, optional qkv bias and Qwen3 q/k norm, the file's RoPE) → output norm →
// lm_head. Every kernel is batch-invariant, so a row's logits do not depend on N.
#include "vkspec/model.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cfloat>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "vkspec/dtype.hpp"
#include "vkspec/quants.hpp"
#include "vkspec/tree_limits.h"

#include "decoder_layer.hpp"

namespace vkspec {

Buffer upload_f32(Context& ctx, const std::vector<float>& v) {
  Buffer b(ctx, std::max<size_t>(16, v.size() * 4));
  b.upload(v);
  return b;
}

// A NaN or Inf weight makes every logit downstream NaN: a damaged (or crafted) file, refused at
// load with the tensor and element rather than computed into garbage. Plain floats are checked
// by their bits; block types by their f16 fields (scales and mins: the quants are integers).
void require_finite(const GgufTensor& t, const std::string& file) {
  int64_t bad = -1;
  switch (t.type) {
    case GgmlType::F32: bad = first_non_finite_f32(t.data, t.n_elements); break;
    case GgmlType::F16: bad = first_non_finite_f16(t.data, t.n_elements); break;
    case GgmlType::BF16: bad = first_non_finite_bf16(t.data, t.n_elements); break;
    default: {
      const BlockFormat& f = *block_format(uint32_t(t.type));  // the reader admits no other type
      const uint64_t nb = t.n_bytes / f.bytes;
      for (uint32_t i = 0; i < f.n_f16 && bad < 0; ++i)
        bad = first_non_finite_bits<uint16_t>(t.data + f.f16_offsets[i], nb, f.bytes, 0x7c00);
      if (bad >= 0) bad *= int64_t(f.elems);  // the first element of the block
      break;
    }
  }
  if (bad >= 0)
    throw Error(file + ": tensor " + std::string(t.name) + " holds a NaN or Inf at element " + std::to_string(bad) +
                " (the file is damaged)");
}

// Every weight type the kernels read stays in its file type on the device; bf16 is converted to
// f16 once here. A stack of tensors of different types (q|k|v of a Q4_K_M file, where v may be
// q6_K) becomes one weight with a run of chunks per type, so the forward still records one
// matmul for it (one dispatch per run). glu: the gate rows and up rows of a gated MLP, for the
// matmul that folds act(gate) · up in (upload_glu_weight; one type only, as that fold needs).
DeviceWeight upload_gguf_weight(Context& ctx, const std::vector<const GgufTensor*>& parts, WeightPath path, bool glu) {
  const uint64_t K = parts[0]->dims[0];
  std::vector<DeviceWeight> runs;
  std::vector<uint8_t> raw;
  for (size_t i = 0; i < parts.size();) {
    const GgmlType t = parts[i]->type;
    size_t j = i;
    uint64_t rows = 0;
    raw.clear();
    for (; j < parts.size() && parts[j]->type == t; ++j) rows += parts[j]->n_elements / K;
    // bf16 goes to f16 unless a value lies past f16's range (65504), where it would become inf and
    // every logit NaN: such a run goes to f32, computed as the file says. Each tensor is
    // dequantized once.
    std::vector<float> vals;
    for (size_t k = i; k < j; ++k) {
      if (t != GgmlType::BF16) {
        raw.insert(raw.end(), parts[k]->data, parts[k]->data + parts[k]->n_bytes);
        continue;
      }
      const std::vector<float> v = dequantize_tensor(*parts[k]);
      vals.insert(vals.end(), v.begin(), v.end());
    }
    const bool bf16_as_f32 =
        t == GgmlType::BF16 && std::any_of(vals.begin(), vals.end(), [](float x) { return std::fabs(x) > 65504.0f; });
    if (bf16_as_f32) {
      raw.assign(reinterpret_cast<const uint8_t*>(vals.data()), reinterpret_cast<const uint8_t*>(vals.data() + vals.size()));
    } else if (t == GgmlType::BF16) {
      raw.resize(vals.size() * 2);
      for (size_t e = 0; e < vals.size(); ++e) {
        const uint16_t h = f32_to_f16(vals[e]);
        std::memcpy(raw.data() + 2 * e, &h, 2);
      }
    }
    const WeightType wt = t != GgmlType::BF16 ? WeightType(uint32_t(t)) : bf16_as_f32 ? WeightType::F32 : WeightType::F16;
    if (glu && i == 0 && j == parts.size()) return upload_glu_weight(ctx, wt, uint32_t(rows / 2), uint32_t(K), raw.data(), path);
    runs.push_back(upload_weight(ctx, wt, uint32_t(rows), uint32_t(K), raw.data(), path));
    i = j;
  }
  return runs.size() == 1 ? std::move(runs[0]) : stack_weights(std::move(runs));
}

namespace {
std::vector<float> f32_of(const GgufTensor& t) { return dequantize_tensor(t); }

// The upload's progress on stderr: one line rewritten in place on a terminal, a line per
// quarter otherwise; silent for small files and fast loads.
class LoadProgress {
 public:
  LoadProgress(bool on, uint64_t total) : on_(on && total >= (uint64_t(256) << 20)), total_(total) {}
  ~LoadProgress() {  // the last line says the load finished (the norms are not counted in add())
    if (shown_)
      std::fprintf(stderr, "%sloading weights 100%% (%llu/%llu MiB)\n", tty_ ? "\r" : "", (unsigned long long)(total_ >> 20),
                   (unsigned long long)(total_ >> 20));
  }
  void add(uint64_t bytes) {
    done_ += bytes;
    if (!on_ || std::chrono::steady_clock::now() - start_ < std::chrono::seconds(1)) return;
    const unsigned pct = unsigned(std::min<uint64_t>(100, done_ * 100 / total_));
    if (!tty_ && pct / 25 == last_ / 25 && shown_) return;
    if (tty_ && pct == last_ && shown_) return;
    std::fprintf(stderr, "%sloading weights %u%% (%llu/%llu MiB)%s", tty_ ? "\r" : "", pct,
                 (unsigned long long)(done_ >> 20), (unsigned long long)(total_ >> 20), tty_ ? "" : "\n");
    std::fflush(stderr);
    last_ = pct, shown_ = true;
  }

 private:
  bool on_;
  bool tty_ = isatty(2) != 0;
  bool shown_ = false;
  unsigned last_ = 0;
  uint64_t total_, done_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};
}  // namespace

std::vector<RowPass> prefill_passes(uint32_t P, uint32_t R) {
  std::vector<RowPass> out;
  if (P == 0) return out;
  const uint32_t h = std::min(std::max(R, 1u), std::bit_floor(P));
  uint32_t c0 = 0;
  for (; c0 + h <= P; c0 += h) out.push_back({c0, h});
  if (c0 < P) {
    const uint32_t tail = std::min(std::bit_ceil(P - c0), h);
    out.push_back({P - tail, tail});
  }
  return out;
}

namespace {
// The capacity and rows a state for `opts` gets.
uint32_t capacity_of(const LlamaConfig& cfg, const ModelOptions& opts) {
  return opts.context ? opts.context : uint32_t(cfg.ctx > 0 ? cfg.ctx : 2048);
}
uint32_t rows_of(const ModelOptions& opts) { return std::max<uint32_t>(1, opts.max_rows); }
uint32_t kv_row_words_of(const LlamaConfig& cfg, KvType t) {
  const uint32_t floats = uint32_t(cfg.Hkv * cfg.D);
  return t == KvType::F16 ? floats / 2 : floats;
}
// Widths of the scratch buffers, in the order the state allocates them: x, xn, qkv, attn, gu,
// act, hidden, logits (each (max_rows, width) f32).
std::array<uint32_t, 8> scratch_widths(const LlamaConfig& c) {
  const uint32_t C = pad4(uint32_t(c.C)), HD = uint32_t(c.H * c.D), KV = uint32_t(c.Hkv * c.D);
  return {C, C, pad4(HD + 2 * KV), pad4(HD), pad4(uint32_t(2 * c.F)), pad4(uint32_t(c.F)), C, pad4(uint32_t(c.V))};
}

// Everything a state (and, from a file, its weights) will allocate, checked against the device
// before the first buffer is made: a --ctx or a tree budget too large for the device gets an
// error naming it and the numbers, not VK_ERROR_OUT_OF_DEVICE_MEMORY from whichever
// vkCreateBuffer came first. `weights`: bytes still to upload (0 for a state over weights already
// on the device, which is checked against what the device has left).
void check_device_fits(const Context& ctx, const LlamaConfig& cfg, const ModelOptions& opts, uint64_t weights) {
  const uint32_t cap = capacity_of(cfg, opts), max_rows = rows_of(opts);
  const KvType kv_type = opts.kv_type;
  const uint64_t range = ctx.caps().max_storage_buffer_range;
  const uint64_t row_bytes_kv = uint64_t(kv_row_words_of(cfg, kv_type)) * 4;
  const uint64_t kv_layer = vkspec::kv_stream_words(cap, kv_row_words_of(cfg, kv_type)) * 4;  // one layer's K (or V)
  // A row's keys are at most the cache's length. Where the driver ends a shader's loops after a
  // fixed budget, attention over more keys than its kernel can loop through would be wrong, not
  // slow. (The heads' caches are no longer than the verifier's, so this check covers them too.)
  const uint32_t max_keys = attention_max_keys(ctx, uint32_t(cfg.D), (kTreeMaxNodes + 31) / 32);
  // The longest context both limits allow: the hint each refusal gives is one the other accepts.
  const uint64_t fits_range = (range / 4 / 64 * 64) / (row_bytes_kv / 4);
  const std::string most = " (at most " + std::to_string(std::min<uint64_t>(fits_range, max_keys)) + ")";
  if (kv_layer > range)
    throw Error("a KV cache of " + std::to_string(cap) + " tokens needs " + std::to_string(kv_layer >> 20) +
                " MiB per layer, more than the device's storage-buffer range of " + std::to_string(range >> 20) +
                " MiB; use a smaller --ctx" + most + (kv_type == KvType::F32 ? " or --kv-type f16" : ""));
  if (cap > max_keys)
    throw Error("a context of " + std::to_string(cap) + " tokens is more than device '" + ctx.caps().name +
                "' can attend over: its driver ends a shader's loops after " +
                std::to_string(ctx.caps().quirks.loop_iteration_limit) + " iterations, which the attention kernel " +
                "reaches at " + std::to_string(max_keys) + " keys; use a smaller --ctx" + most);
  const std::array<uint32_t, 8> w = scratch_widths(cfg);
  const uint64_t row_bytes = uint64_t(*std::max_element(w.begin(), w.end())) * 4;
  if (uint64_t(max_rows) * row_bytes > range)
    throw Error(std::to_string(max_rows) + " rows per verifier pass (prompt chunk or verified tree) need " +
                std::to_string((uint64_t(max_rows) * row_bytes) >> 20) + " MiB of scratch per buffer, more than the " +
                "device's storage-buffer range of " + std::to_string(range >> 20) + " MiB; use fewer rows per pass (a smaller --budget, " +
                "or --cost-rows in bench-kernels)");
  const StateBytes st = llama_state_bytes(cfg, opts);
  const uint64_t need = weights + st.kv + st.scratch + opts.reserve_bytes;
  const uint64_t total = ctx.caps().device_local_bytes, used = weights ? 0 : ctx.allocated_bytes();
  const uint64_t have = total > used ? total - used : 0;
  auto mib = [](uint64_t b) { return std::to_string((b + (1 << 20) - 1) >> 20); };
  if (total && need > have)
    throw Error("the model needs about " + mib(need) + " MiB on the device (" +
                (weights ? "weights " + mib(weights) + ", " : std::string()) + "KV cache (" + kv_type_name(kv_type) +
                ") for " + std::to_string(cap) + " tokens " + mib(st.kv) + ", scratch " + mib(st.scratch) +
                (opts.reserve_bytes ? ", draft heads " + mib(opts.reserve_bytes) : std::string()) + " MiB) but the device has " +
                mib(have) + " MiB" + (used ? " left of " + mib(total) : std::string()) + "; use a smaller --ctx or --budget" +
                (kv_type == KvType::F32 ? ", or --kv-type f16" : ""));
}
}  // namespace

namespace {
DecoderLayerShape heads_of(const LlamaConfig& c) {
  DecoderLayerShape s;
  s.H = uint32_t(c.H), s.Hkv = uint32_t(c.Hkv), s.D = uint32_t(c.D);
  return s;
}
}  // namespace

StateBytes llama_state_bytes(const LlamaConfig& cfg, const ModelOptions& opts) {
  StateBytes b;
  b.kv = 2 * uint64_t(cfg.L) * vkspec::kv_stream_words(capacity_of(cfg, opts), kv_row_words_of(cfg, opts.kv_type)) * 4;
  for (uint32_t w : scratch_widths(cfg)) b.scratch += uint64_t(rows_of(opts)) * w * 4;
  b.scratch += o_fold_scratch_bytes(heads_of(cfg), uint32_t(cfg.C), rows_of(opts));
  return b;
}

namespace {
uint64_t tap_bytes(const LlamaConfig& cfg, uint32_t rows, uint32_t points) {
  return uint64_t(rows) * pad4(points * uint32_t(cfg.C)) * 4;
}
}  // namespace

uint64_t llama_tap_bytes(const LlamaConfig& cfg, const ModelOptions& opts, uint32_t points) {
  return tap_bytes(cfg, rows_of(opts), points);
}
uint64_t llama_tap_bytes(const LlamaConfig& cfg, uint32_t max_rows, uint32_t points) {
  ModelOptions o;
  o.max_rows = max_rows;
  return llama_tap_bytes(cfg, o, points);
}

LlamaWeights::LlamaWeights(Context& ctx, const GgufFile& f, const ModelOptions& opts) : ctx_(ctx), path_(f.path()) {
  cfg_ = read_llama_config(f);
  if (cfg_.D > int(kAttentionMaxHeadDim))
    f.fail("head width " + std::to_string(cfg_.D) + " exceeds the attention kernel's maximum of " +
           std::to_string(kAttentionMaxHeadDim));
  if (opts.kv_type == KvType::F16 && cfg_.D % 2 != 0)
    f.fail("head width " + std::to_string(cfg_.D) + " is odd; an f16 KV cache packs value pairs: use --kv-type f32");
  uint64_t file_bytes = 0;
  for (const GgufTensor& t : f.tensors()) file_bytes += t.n_bytes;
  check_device_fits(ctx, cfg_, opts, file_bytes);
  if (opts.check_finite)
    for (const GgufTensor& t : f.tensors()) require_finite(t, f.path());
  const WeightPath path = opts.weight_path;
  LoadProgress progress(opts.progress, file_bytes);

  embd_ = upload_gguf_weight(ctx, {&f.require_tensor("token_embd.weight")}, path);
  if (!cfg_.tied_output) out_ = upload_gguf_weight(ctx, {&f.require_tensor("output.weight")}, path);
  out_norm_ = upload_f32(ctx, f32_of(f.require_tensor("output_norm.weight")));
  // The angle is divided by each factor: zero, negative (or NaN) factors are no frequencies.
  auto factors = [&](const char* name) {
    std::vector<float> ff = f32_of(f.require_tensor(name));
    for (size_t i = 0; i < ff.size(); ++i)
      if (!(ff[i] > 0.0f))
        f.fail(std::string("tensor '") + name + "': element " + std::to_string(i) + " is " + std::to_string(ff[i]) +
               ", expected a positive frequency factor");
    return ff;
  };
  rope_logit_gain_ = vkspec::rope_logit_gain(cfg_);
  // The file's factors and YaRN's ramp as one table of divisors (none when all are 1); LongRoPE's
  // two tables both, each state choosing by its context.
  auto upload_divisors = [&](const std::vector<float>& ff, Buffer& to, const char* name) {
    const std::vector<float> d = rope_divisors(cfg_, ff);
    // Positive is not enough: a divisor of 1e-37 (a factor, or YaRN's scale 1/3e38) sends the
    // angle past the float range within a few dozen positions, every logit then NaN. Each pair's
    // angle must stay finite up to position 2^24 (past any context vkspec holds).
    for (size_t i = 0; i < d.size(); ++i) {
      const double freq = std::pow(double(cfg_.rope_theta), -2.0 * double(i) / double(cfg_.D));
      if (!(double(1u << 24) * freq / double(d[i]) < double(FLT_MAX)))
        f.fail(std::string("RoPE pair ") + std::to_string(i) + ": its divisor " + std::to_string(d[i]) + " (from " + name +
               (cfg_.rope_yarn ? " and the YaRN scaling factor" : "") +
               ") makes the rotation angle overflow the float range; the factors are out of range");
    }
    if (!d.empty()) to = upload_f32(ctx, d);
  };
  if (cfg_.rope_longrope) {
    upload_divisors(factors("rope_factors_short.weight"), rope_freqs_, "tensor 'rope_factors_short.weight'");
    upload_divisors(factors("rope_factors_long.weight"), rope_long_, "tensor 'rope_factors_long.weight'");
  } else {
    upload_divisors(cfg_.rope_freqs ? factors("rope_freqs.weight") : std::vector<float>{}, rope_freqs_,
                    cfg_.rope_freqs ? "tensor 'rope_freqs.weight'" : "no factor tensor");
  }
  bytes_ = embd_.bytes() + out_.bytes();
  progress.add(bytes_);

  for (int l = 0; l < cfg_.L; ++l) {
    Layer L;
    auto T = [&](const char* s) -> const GgufTensor& { return f.require_tensor(blk_name(l, s)); };
    L.attn_norm = upload_f32(ctx, f32_of(T("attn_norm.weight")));
    L.ffn_norm = upload_f32(ctx, f32_of(T("ffn_norm.weight")));
    L.wqkv = cfg_.fused_qkv ? upload_gguf_weight(ctx, {&T("attn_qkv.weight")}, path)
                            : upload_gguf_weight(ctx, {&T("attn_q.weight"), &T("attn_k.weight"), &T("attn_v.weight")}, path);
    if (cfg_.qk_norm) {
      // One weight row per head of a qkv row: q_norm for each query head, then k_norm for each kv head.
      const std::vector<float> qn = f32_of(T("attn_q_norm.weight")), kn = f32_of(T("attn_k_norm.weight"));
      std::vector<float> w;
      for (int h = 0; h < cfg_.H + cfg_.Hkv; ++h) w.insert(w.end(), h < cfg_.H ? qn.begin() : kn.begin(), h < cfg_.H ? qn.end() : kn.end());
      L.qk_norm = upload_f32(ctx, w);
    }
    if (cfg_.qkv_bias) {
      std::vector<float> b = f32_of(T("attn_q.bias"));
      for (const char* s : {"attn_k.bias", "attn_v.bias"}) {
        auto x = f32_of(T(s));
        b.insert(b.end(), x.begin(), x.end());
      }
      L.qkv_bias = upload_f32(ctx, b);
    }
    L.wo = upload_gguf_weight(ctx, {&T("attn_output.weight")}, path);
    // Phi-3's ffn_up already is gate rows then up rows, the layout of wgu.
    L.wgu = cfg_.fused_gate_up ? upload_gguf_weight(ctx, {&T("ffn_up.weight")}, path, true)
                               : upload_gguf_weight(ctx, {&T("ffn_gate.weight"), &T("ffn_up.weight")}, path, true);
    L.wdown = upload_gguf_weight(ctx, {&T("ffn_down.weight")}, path);
    bytes_ += L.wqkv.bytes() + L.wo.bytes() + L.wgu.bytes() + L.wdown.bytes();
    progress.add(L.wqkv.bytes() + L.wo.bytes() + L.wgu.bytes() + L.wdown.bytes());
    layers_.push_back(std::move(L));
  }
}

LlamaModel::LlamaModel(Context& ctx, const GgufFile& f, const ModelOptions& opts)
    : LlamaModel(std::make_shared<const LlamaWeights>(ctx, f, opts), opts) {}

LlamaModel::LlamaModel(std::shared_ptr<const LlamaWeights> weights, const ModelOptions& opts) : w_(std::move(weights)) {
  Context& ctx = w_->context();
  const LlamaConfig& cfg = w_->config();
  cap_ = capacity_of(cfg, opts);
  max_rows_ = rows_of(opts);
  kv_type_ = opts.kv_type;
  if (kv_type_ == KvType::F16 && cfg.D % 2 != 0)
    throw Error(w_->path() + ": head width " + std::to_string(cfg.D) +
                " is odd; an f16 KV cache packs value pairs: use --kv-type f32");
  // The weights' load checked the device for its first state; every state checks what is left.
  check_device_fits(ctx, cfg, opts, 0);
  // Words per stream (one layer's K or V), whole 256-byte blocks.
  kv_stream_words_ = uint32_t(std::min<uint64_t>(vkspec::kv_stream_words(cap_, kv_row_words()), UINT32_MAX));
  // As many whole streams per buffer as one binding can address (value offsets in 32 bits).
  const uint64_t streams = 2 * uint64_t(cfg.L);
  const uint32_t per_word = 4 / kv_value_bytes(kv_type_);  // values per u32 word
  const uint64_t fit = std::min<uint64_t>(ctx.caps().max_storage_buffer_range / 4, UINT32_MAX / per_word) /
                       std::max<uint64_t>(1, kv_stream_words_);
  uint64_t per_buffer = std::clamp<uint64_t>(fit, 1, streams);
  if (opts.kv_streams_per_buffer) per_buffer = std::min<uint64_t>(per_buffer, opts.kv_streams_per_buffer);
  // The KV cache: stream 2l is layer l's K, 2l + 1 its V.
  kv_bufs_.reserve((streams + per_buffer - 1) / per_buffer);  // KvLayer points into it: no reallocation
  for (uint64_t s = 0; s < streams; s += per_buffer)
    kv_bufs_.emplace_back(ctx, std::min(per_buffer, streams - s) * kv_stream_words_ * 4);
  kv_layers_.resize(size_t(cfg.L));
  for (int l = 0; l < cfg.L; ++l) {
    KvLayer& c = kv_layers_[size_t(l)];
    c.type = kv_type_;
    const uint64_t sk = 2 * uint64_t(l), sv = sk + 1;
    c.k = &kv_bufs_[sk / per_buffer], c.v = &kv_bufs_[sv / per_buffer];
    c.k_base = uint32_t(sk % per_buffer * kv_stream_words_ * per_word);
    c.v_base = uint32_t(sv % per_buffer * kv_stream_words_ * per_word);
  }
  const std::array<uint32_t, 8> w = scratch_widths(cfg);
  Buffer* scratch[8] = {&x_, &xn_, &qkv_, &attn_, &gu_, &act_, &hidden_, &logits_};
  for (size_t i = 0; i < w.size(); ++i) *scratch[i] = Buffer(ctx, uint64_t(max_rows_) * w[i] * 4);
  make_o_fold_scratch(ctx, heads_of(cfg), uint32_t(cfg.C), max_rows_, o_part_, o_arrivals_);
}

void LlamaModel::enable_taps(const std::vector<uint32_t>& points) {
  if (!tap_points_.empty() && tap_points_ != points) {
    auto str = [](const std::vector<uint32_t>& p) {
      std::string s;
      for (uint32_t x : p) s += (s.empty() ? "" : ", ") + std::to_string(x);
      return s;
    };
    throw Error("two EAGLE-3 heads read different verifier layers (taps before layers " + str(tap_points_) + " and " +
                str(points) + "); one pair of heads must share them");
  }
  for (uint32_t p : points)
    if (p > uint32_t(config().L))
      throw Error("tap point " + std::to_string(p) + " is past the verifier's " + std::to_string(config().L) + " layers");
  if (!tap_points_.empty() || points.empty()) return;
  tap_points_ = points;
  taps_ = Buffer(context(), tap_bytes(config(), max_rows_, uint32_t(points.size())));
}

// Rows 0..N-1 of the residual stream into their tap columns, for each tap at `point`.
void LlamaModel::copy_taps(Sequence& seq, uint32_t point, uint32_t N) const {
  const uint32_t C = uint32_t(config().C);
  for (uint32_t k = 0; k < tap_points_.size(); ++k)
    if (tap_points_[k] == point) copy_rows(seq, Mat{&x_, 0, pad4(C)}, 0, Mat{&taps_, k * C, pad4(tap_width())}, N, C);
}

uint64_t LlamaModel::kv_bytes() const {
  uint64_t n = 0;
  for (const Buffer& b : kv_bufs_) n += b.size();
  return n;
}

uint64_t LlamaModel::scratch_bytes() const {
  return x_.size() + xn_.size() + qkv_.size() + attn_.size() + gu_.size() + act_.size() + hidden_.size() +
         logits_.size() + taps_.size() + o_part_.size() + o_arrivals_.size();
}

std::vector<float> decode_kv(const std::vector<uint32_t>& words, KvType t) {
  std::vector<float> out;
  out.reserve(words.size() * 2);
  for (uint32_t w : words) {
    if (t == KvType::F32) {
      out.push_back(std::bit_cast<float>(w));
    } else {
      out.push_back(f16_to_f32(uint16_t(w & 0xffff)));
      out.push_back(f16_to_f32(uint16_t(w >> 16)));
    }
  }
  return out;
}

std::vector<float> LlamaModel::read_cache(int layer, bool v, uint32_t rows) const {
  const KvLayer& c = kv_layers_.at(size_t(layer));
  const uint32_t per_word = 4 / kv_value_bytes(kv_type_);
  const uint64_t base_words = (v ? c.v_base : c.k_base) / per_word;
  return decode_kv((v ? c.v : c.k)->read<uint32_t>(size_t(rows) * kv_row_words(), base_words * 4), kv_type_);
}

KvType parse_kv_type(const std::string& s, const std::string& option) {
  if (s == "f32") return KvType::F32;
  if (s == "f16") return KvType::F16;
  throw Error(option + " expects f32 or f16, got '" + s + "'");
}

const char* kv_type_name(KvType t) { return t == KvType::F16 ? "f16" : "f32"; }

bool LlamaModel::hidden_deferred(const Context& ctx) const { return matmul_folds_norm(ctx); }
RowGather LlamaModel::feature_gather(const Context& ctx, Mat dst) const {
  const uint32_t C = uint32_t(config().C);
  if (!hidden_deferred(ctx)) return RowGather{hidden(), dst, C};
  return RowGather{Mat{&x_, 0, pad4(C)}, dst, C, &w_->output_norm(), config().rms_eps};
}

void LlamaModel::forward(Sequence& seq, const ForwardArgs& a) {
  const LlamaConfig& cfg = config();
  const uint32_t N = a.N, C = uint32_t(cfg.C), Cp = pad4(C), F = uint32_t(cfg.F);
  const uint32_t H = uint32_t(cfg.H), Hkv = uint32_t(cfg.Hkv), D = uint32_t(cfg.D);
  const uint32_t kv = kv_row_floats(), HD = H * D, QKV = pad4(HD + 2 * kv);
  // Shape mistakes are programmer errors; the engine validates user input before recording.
  if (N == 0 || N > max_rows_ || (a.t.fixed() && a.t.base + N > cap_))
    throw Error("forward over " + std::to_string(N) + " rows at t=" + std::to_string(a.t.base) +
                " does not fit (max rows " + std::to_string(max_rows_) + ", capacity " + std::to_string(cap_) + ")");
  const Mat x{&x_, 0, Cp}, xn{&xn_, 0, Cp}, qkv{&qkv_, 0, QKV}, att{&attn_, 0, pad4(HD)}, gu{&gu_, 0, pad4(2 * F)},
      act{&act_, 0, pad4(F)}, hid{&hidden_, 0, Cp};

  if (!a.embedded) embed(seq, w_->embedding(), *a.tokens, a.tok_offset, x, N);
  const DecoderLayerShape shape{.H = H, .Hkv = Hkv, .D = D, .rms_eps = cfg.rms_eps, .rope = rope_args(),
                                 .window = cfg.sliding_window};
  const DecoderLayerActs acts{.in = x,
                              .x = x,
                              .xn = xn,
                              .qkv = qkv,
                              .att = att,
                              .gu = gu,
                              .act = act,
                              .o_part = o_part_.size() ? &o_part_ : nullptr,
                              .o_arrivals = &o_arrivals_};
  DecoderLayerPass pass{.N = N,
                        .pos = a.pos ? RopePositions::from_table(*a.pos, a.pos_offset) : RopePositions::run(a.t),
                        .kv = {},     // each layer's, below
                        .slot = a.t,  // rows write K/V at t .. t+N-1
                        .t = a.t,
                        .max_keys = cap_,
                        .mask = a.mask,
                        .mask_offset = a.mask_offset,
                        .mask_words = a.mask_words};
  for (uint32_t l = 0; l < w_->layers().size(); ++l) {
    const LlamaWeights::Layer& L = w_->layers()[l];
    copy_taps(seq, l, N);
    pass.kv = kv_layers_[l];
    record_decoder_layer(seq,
                         {.attn_norm = &L.attn_norm,
                          .wqkv = &L.wqkv,
                          .qkv_bias = cfg.qkv_bias ? &L.qkv_bias : nullptr,
                          .qk_norm = cfg.qk_norm ? &L.qk_norm : nullptr,
                          .wo = &L.wo,
                          .ffn_norm = &L.ffn_norm,
                          .wgu = &L.wgu,
                          .wdown = &L.wdown},
                         shape, acts, pass);
  }
  copy_taps(seq, uint32_t(cfg.L), N);
  const uint32_t from = std::min(a.logits_from, N - 1);
  if (matmul_folds_norm(seq.context())) {
    // The LM head normalizes x itself, so ar (no hidden rows) and a tree pass (hidden rows for
    // the heads) compute their logits identically.
    if (a.hidden && !a.defer_hidden_norm) rmsnorm(seq, x, w_->output_norm(), hid, N, C, cfg.rms_eps);
    MatmulArgs la;
    la.norm = &w_->output_norm(), la.norm_eps = cfg.rms_eps, la.norm_scratch = hid.row(from);
    matmul(seq, lm_head(), x.row(from), logits().row(from), N - from, la);
  } else {
    rmsnorm(seq, x, w_->output_norm(), hid, N, C, cfg.rms_eps);
    matmul(seq, lm_head(), hid.row(from), logits().row(from), N - from);
  }
}

}  // namespace vkspec
