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

namespace vkspec {

inline uint32_t pad4(uint32_t n) { return (n + 3) / 4 * 4; }

struct ModelOptions {
  uint32_t context = 0;    // KV capacity in tokens; 0 = min(model context, 2048)
  uint32_t max_rows = 256;  // rows per forward (prefill chunk, tree size)
  WeightPath weight_path = WeightPath::Auto;
  // Refuse a file with a NaN or Inf weight at load, naming the tensor (one pass at memory speed
  // over the weights). Off only in tests that feed NaN through the kernels on purpose.
  bool check_finite = true;
};

class LlamaModel {
 public:
  LlamaModel(Context& ctx, const GgufFile& file, const ModelOptions& opts = {});

  const LlamaConfig& config() const { return cfg_; }
  uint32_t capacity() const { return cap_; }
  uint32_t max_rows() const { return max_rows_; }
  uint64_t weight_bytes() const { return weight_bytes_; }

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
  };
  // Records the forward. Afterwards logits() row r (r >= logits_from) and hidden() row r hold the
  // results for row r.
  void forward(Sequence& seq, const ForwardArgs& a);

  Mat logits() const { return {&logits_, 0, pad4(cfg_.V)}; }  // (max_rows, V)
  Mat hidden() const { return {&hidden_, 0, pad4(cfg_.C)}; }  // (max_rows, C) after the final norm
  const Buffer& k_cache(int layer) const { return layers_[layer].k; }
  const Buffer& v_cache(int layer) const { return layers_[layer].v; }
  uint32_t kv_row_floats() const { return uint32_t(cfg_.Hkv * cfg_.D); }
  const DeviceWeight& embedding() const { return embd_; }
  const DeviceWeight& lm_head() const { return cfg_.tied_output ? embd_ : out_; }
  // The file's RoPE: pairing, base, linear scale and frequency factors (DESIGN.md §6).
  RopeArgs rope_args() const {
    return {cfg_.rope_theta, cfg_.rope_neox ? RopeMode::Halves : RopeMode::Pairs, cfg_.rope_freq_scale,
            cfg_.rope_freqs ? &rope_freqs_ : nullptr};
  }
  Context& context() const { return ctx_; }

 private:
  struct Layer {
    Buffer attn_norm, ffn_norm, qkv_bias;
    Buffer qk_norm;     // (H + Hkv, D): q_norm per query head, then k_norm per kv head (Qwen3)
    DeviceWeight wqkv;  // (H*D + 2*Hkv*D, C): q, k, v rows stacked — one matmul
    DeviceWeight wo;    // (C, H*D)
    DeviceWeight wgu;   // (2F, C): gate rows then up rows
    DeviceWeight wdown; // (C, F)
    Buffer k, v;        // (cap, Hkv*D)
  };
  Context& ctx_;
  LlamaConfig cfg_;
  uint32_t cap_ = 0, max_rows_ = 0;
  void check_device_fits(const Context& ctx, const GgufFile& f) const;
  uint64_t weight_bytes_ = 0;
  DeviceWeight embd_, out_;
  Buffer out_norm_;
  Buffer rope_freqs_;  // (D/2) when the file has rope_freqs.weight
  std::vector<Layer> layers_;
  // Scratch, (max_rows, ·) each.
  Buffer x_, xn_, qkv_, attn_, gu_, act_, hidden_, logits_;
};

// Uploads a GGUF weight (or several with the same row length, stacked along rows) in the
// kernels' layout, each part in its own type (bf16 becomes f16).
DeviceWeight upload_gguf_weight(Context& ctx, const std::vector<const GgufTensor*>& parts, WeightPath path);
// An f32 vector tensor (norm weights, biases) on the device.
Buffer upload_f32(Context& ctx, const std::vector<float>& v);

}  // namespace vkspec
