// The Llama-family verifier on Vulkan: weights from GGUF, a KV cache per layer, and a forward
// pass over N rows (a prompt chunk, one token, or a tree of draft nodes) recorded into a Sequence.
//
// Shapes: C width, L layers, H/Hkv heads, D head width, F ffn width, V vocab, N rows per pass,
// cap KV capacity. Activation rows are padded to a multiple of 4 floats (the matmul reads vec4).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "vkspec/gguf.hpp"
#include "vkspec/model_config.hpp"
#include "vkspec/ops.hpp"
#include "vkspec/tree.hpp"

namespace vkspec {

inline uint32_t pad4(uint32_t n) { return (n + 3) / 4 * 4; }

struct ModelOptions {
  uint32_t context = 0;    // KV capacity in tokens; 0 = the model's context (2048 if it names none)
  KvType kv_type = KvType::F16;  // the KV cache's values (the draft heads' caches follow it)
  // At most this many of the cache's 2L streams (each layer's K, each V) per device buffer; 0:
  // as many as one storage-buffer binding can address (usually all: one commit dispatch for the
  // whole model; one per buffer otherwise). Tests force small values to check the layouts agree.
  uint32_t kv_streams_per_buffer = 0;
  uint32_t max_rows = 256;  // rows per forward (prefill chunk, tree size)
  WeightPath weight_path = WeightPath::Auto;
  // Refuse a file with a NaN or Inf weight at load, naming the tensor (one pass at memory speed
  // over the weights). Off only in tests that feed NaN through the kernels on purpose.
  bool check_finite = true;
  // Device bytes other users will need beside this model (the draft heads): counted when
  // checking that the model fits the device.
  uint64_t reserve_bytes = 0;
  // A progress line on stderr while the weights upload ("loading weights 37% (412/1100 MiB)"),
  // for files of 256 MiB and more once the load has taken a second.
  bool progress = false;
};

// The verifier's weights on the device: uploaded once, never written again, and shared (through
// std::shared_ptr) by every LlamaModel made from them — several generations, each with its own KV
// cache and scratch, on one copy of the weights. Holds no per-generation state, so it is never
// written while a step runs; its Buffers need `ctx` alive until the last owner lets go.
class LlamaWeights {
 public:
  // Uploads the file's weights. `opts` also sizes one generation state (context, max_rows, KV
  // type): the device must hold the weights, that state and opts.reserve_bytes, checked before
  // anything is uploaded.
  LlamaWeights(Context& ctx, const GgufFile& file, const ModelOptions& opts = {});
  LlamaWeights(const LlamaWeights&) = delete;
  LlamaWeights& operator=(const LlamaWeights&) = delete;

  struct Layer {
    Buffer attn_norm, ffn_norm, qkv_bias;
    Buffer qk_norm;     // (H + Hkv, D): q_norm per query head, then k_norm per kv head (Qwen3)
    DeviceWeight wqkv;  // (H*D + 2*Hkv*D, C): q, k, v rows stacked — one matmul
    DeviceWeight wo;    // (C, H*D)
    DeviceWeight wgu;   // (2F, C): gate rows then up rows (upload_glu_weight's pair blocks where folded)
    DeviceWeight wdown; // (C, F)
  };
  const LlamaConfig& config() const { return cfg_; }
  const std::string& path() const { return path_; }  // the GGUF file, for messages
  uint64_t bytes() const { return bytes_; }           // the matrices' device bytes
  const std::vector<Layer>& layers() const { return layers_; }
  const DeviceWeight& embedding() const { return embd_; }
  const DeviceWeight& lm_head() const { return cfg_.tied_output ? embd_ : out_; }
  const Buffer& output_norm() const { return out_norm_; }
  // (D/2) divisors of the RoPE angles for a state of `context` tokens: rope_freqs.weight (or
  // LongRoPE's short or long factors) and YaRN (rope_divisors); nullptr = all 1.
  const Buffer* rope_freqs(uint32_t context) const {
    const Buffer& b = rope_uses_long_factors(cfg_, context) ? rope_long_ : rope_freqs_;
    return b.size() ? &b : nullptr;
  }
  float rope_logit_gain() const { return rope_logit_gain_; }  // vkspec::rope_logit_gain(config()), once
  Context& context() const { return ctx_; }

 private:
  Context& ctx_;
  LlamaConfig cfg_;
  float rope_logit_gain_ = 1.0f;
  std::string path_;
  uint64_t bytes_ = 0;
  DeviceWeight embd_, out_;
  Buffer out_norm_;
  Buffer rope_freqs_, rope_long_;  // rope_long_: LongRoPE's long factors
  std::vector<Layer> layers_;
};

// The device bytes of one generation state (KV cache and scratch) for `cfg` and `opts`, computed
// before anything is allocated: what LlamaModel allocates, byte for byte.
struct StateBytes {
  uint64_t kv = 0, scratch = 0;
};
StateBytes llama_state_bytes(const LlamaConfig& cfg, const ModelOptions& opts);
// The scratch a state adds when EAGLE-3 heads read `points` tap points of it (enable_taps): not in
// llama_state_bytes, and one buffer however many EAGLE-3 heads share the points.
uint64_t llama_tap_bytes(const LlamaConfig& cfg, const ModelOptions& opts, uint32_t points);
uint64_t llama_tap_bytes(const LlamaConfig& cfg, uint32_t max_rows, uint32_t points);

// Passes of a prompt of P tokens when a pass takes at most R rows: [first, first + rows) spans
// covering [0, P) in order, every size R or a power of two. Passes of h = min(R, the largest power
// of two <= P), then the r < h rows left as one pass of the smallest power of two >= r (at most h)
// that ends at P, overlapping the pass before it by fewer than r rows. A pass recomputes the rows
// it shares with an earlier one to the same bits (a row's arithmetic does not depend on its pass:
// batch invariance), so the overlap costs time and changes nothing else. Why not passes of any
// size: a device that specializes a kernel on its batch tile (matmul_lanes on CPU rasterizers)
// would meet new kernels with every new prompt length, and lavapipe compiles each at its first
// dispatch (~1.4 s unoptimized) before the first token; these sizes meet at most log2(R) + 1.
struct RowPass {
  uint32_t first = 0, rows = 0;
  bool operator==(const RowPass&) const = default;
};
std::vector<RowPass> prefill_passes(uint32_t P, uint32_t R);

// One generation's verifier: the shared weights, plus its own KV cache and activation buffers.
class LlamaModel {
 public:
  // Uploads weights of its own (a LlamaWeights nobody else shares) and makes the state.
  LlamaModel(Context& ctx, const GgufFile& file, const ModelOptions& opts = {});
  // A new state over weights already on the device; opts.weight_path, check_finite and progress
  // are the weights' and not read here. Refused, with the numbers, if the device cannot hold it.
  explicit LlamaModel(std::shared_ptr<const LlamaWeights> weights, const ModelOptions& opts = {});

  const LlamaConfig& config() const { return w_->config(); }
  const std::shared_ptr<const LlamaWeights>& weights() const { return w_; }
  uint32_t capacity() const { return cap_; }
  uint32_t max_rows() const { return max_rows_; }
  uint64_t weight_bytes() const { return w_->bytes(); }  // shared with every model on these weights
  uint64_t kv_bytes() const;       // every layer's K and V cache
  uint64_t scratch_bytes() const;  // the activation buffers of a forward

  struct ForwardArgs {
    // Scalars that change from step to step are Dyn (ops.hpp): a step recorded once reads them
    // from the step state on the GPU.
    uint32_t N = 1;  // rows
    Dyn t;           // committed KV length; rows write K/V at slots t .. t+N-1
    const Buffer* tokens = nullptr;  // u32 token ids at tok_offset
    Dyn tok_offset;
    // Positions: pos[pos_offset + r] from a table (a tree's depths), or else t + r (a chain).
    const Buffer* pos = nullptr;
    uint32_t pos_offset = 0;
    const Buffer* mask = nullptr;  // tree ancestor mask (N, mask_words); nullptr = causal chain
    uint32_t mask_offset = 0, mask_words = 0;
    uint32_t logits_from = 0;  // lm_head only for rows logits_from..N-1 (prefill needs the last)
    // hidden() rows too (the draft heads' features). Without them, where the device folds the
    // final norm into the LM head's matmul, that norm costs no dispatch of its own. The logits
    // are the same bits either way: they always come from the folded norm there.
    bool hidden = true;
    // With `hidden` too, where the LM head folds the final norm (hidden_deferred()): hidden() is
    // not written, and feature_gather() normalizes the rows a commit gathers from the residual
    // stream instead, so the norm costs no dispatch of its own.
    bool defer_hidden_norm = false;
    // The rows' token embeddings are already in token_input() (a tree's meta dispatch gathered
    // them, MetaEmbed): no embedding gather of its own.
    bool embedded = false;
  };
  // Records the forward. Afterwards logits() row r (r >= logits_from) and (with a.hidden) hidden()
  // row r hold the results for row r.
  void forward(Sequence& seq, const ForwardArgs& a);

  Mat logits() const { return {&logits_, 0, pad4(config().V)}; }  // (max_rows, V)
  Mat hidden() const { return {&hidden_, 0, pad4(config().C)}; }  // (max_rows, C) after the final norm
  Mat token_input() const { return {&x_, 0, pad4(config().C)}; }  // (max_rows, C): the rows' embeddings, first
  // Whether a forward with `defer_hidden_norm` leaves hidden() unwritten on this device.
  bool hidden_deferred(const Context& ctx) const;
  // The rows of a forward recorded with `defer_hidden_norm`, gathered into dst by commit_rows:
  // hidden()'s, or where the norm was deferred the residual stream's with the final norm to apply.
  RowGather feature_gather(const Context& ctx, Mat dst) const;
  // The KV cache: 2L streams (layer l's K is stream 2l, its V 2l + 1) of `capacity` rows of
  // kv_row_floats() values each, in kv_type(). Each buffer holds a run of whole streams (all of
  // them when they fit one binding), the i-th of a buffer from word i * kv_stream_words() on.
  const KvLayer& kv_layer(int layer) const { return kv_layers_[layer]; }
  const std::vector<Buffer>& kv_buffers() const { return kv_bufs_; }
  uint32_t kv_stream_words() const { return kv_stream_words_; }
  KvType kv_type() const { return kv_type_; }
  uint32_t kv_row_floats() const { return uint32_t(config().Hkv * config().D); }  // values per row
  uint32_t kv_row_words() const { return kv_type_ == KvType::F16 ? kv_row_floats() / 2 : kv_row_floats(); }
  // Rows 0..rows-1 of a layer's K (v = false) or V cache as f32 (tests and tools; synchronous).
  std::vector<float> read_cache(int layer, bool v, uint32_t rows) const;
  // EAGLE-3 heads read the residual stream at three points (eagle_head.hpp, eagle3_tap_points:
  // point p is the input of layer p, p == L the last layer's output). After enable_taps every
  // forward also copies those rows, side by side, into taps() (max_rows, points·C); a model
  // without it does no extra work. Two different point sets are refused (one buffer serves all).
  void enable_taps(const std::vector<uint32_t>& points);
  const std::vector<uint32_t>& tap_points() const { return tap_points_; }
  uint32_t tap_width() const { return uint32_t(tap_points_.size()) * uint32_t(config().C); }
  Mat taps() const { return {&taps_, 0, pad4(tap_width())}; }
  const DeviceWeight& embedding() const { return w_->embedding(); }
  const DeviceWeight& lm_head() const { return w_->lm_head(); }
  // The file's RoPE: pairing, base, linear scale, frequency divisors and the logits' gain (DESIGN.md §6).
  RopeArgs rope_args() const {
    const LlamaConfig& c = config();
    return {c.rope_theta, c.rope_neox ? RopeMode::Halves : RopeMode::Pairs, c.rope_freq_scale, w_->rope_freqs(cap_),
            w_->rope_logit_gain()};
  }
  Context& context() const { return w_->context(); }

 private:
  std::shared_ptr<const LlamaWeights> w_;
  uint32_t cap_ = 0, max_rows_ = 0;
  KvType kv_type_ = KvType::F16;
  uint32_t kv_stream_words_ = 0;
  std::vector<Buffer> kv_bufs_;
  std::vector<KvLayer> kv_layers_;  // (cap, Hkv*D) K and V of each layer, in kv_bufs_
  // Scratch, (max_rows, ·) each.
  Buffer x_, xn_, qkv_, attn_, gu_, act_, hidden_, logits_;
  Buffer o_part_, o_arrivals_;  // where attention carries W_o (decoder_layer.hpp)
  std::vector<uint32_t> tap_points_;
  Buffer taps_;
  void copy_taps(Sequence& seq, uint32_t point, uint32_t N) const;
};

// Uploads a GGUF weight (or several with the same row length, stacked along rows) in the
// kernels' layout, each part in its own type (bf16 becomes f16).
// glu: the parts are a gated MLP's gate and up rows, stored for the folded act(gate) · up
// (upload_glu_weight) where they are of one type.
DeviceWeight upload_gguf_weight(Context& ctx, const std::vector<const GgufTensor*>& parts, WeightPath path,
                                bool glu = false);
// "f32" / "f16" → KvType; anything else is refused naming `option`.
KvType parse_kv_type(const std::string& s, const std::string& option = "--kv-type");
const char* kv_type_name(KvType t);
// Words per KV stream of `cap` rows of `row_words` words: rounded up to 64 words, so every stream
// of a shared buffer starts on a 256-byte boundary (a texel of either type).
inline uint64_t kv_stream_words(uint64_t cap, uint64_t row_words) { return (cap * row_words + 63) / 64 * 64; }
// Rows of an f32 or f16 cache (u32 words) decoded to f32.
std::vector<float> decode_kv(const std::vector<uint32_t>& words, KvType t);

// An f32 vector tensor (norm weights, biases) on the device.
Buffer upload_f32(Context& ctx, const std::vector<float>& v);

}  // namespace vkspec
