// Llama-family hyperparameters from GGUF metadata, and the check that every tensor has the shape
// they imply. Dimension glossary: C model width, L layers, H/Hkv query/kv heads, D head width,
// F feed-forward width, V vocab, ctx training context.
#pragma once

#include <string>
#include <vector>

#include "vkspec/gguf.hpp"

namespace vkspec {

// One decoder for every architecture: what differs between them is data (DESIGN.md §6), filled
// from the architecture's row of the table in model_config.cpp and from the file's keys.
struct LlamaConfig {
  int C = 0, L = 0, H = 0, Hkv = 0, D = 0, F = 0, V = 0, ctx = 0;
  float rope_theta = 10000.0f;
  float rms_eps = 1e-5f;
  bool tied_output = true;  // no output.weight: logits use token_embd.weight
  bool qkv_bias = false;    // attn_{q,k,v}.bias present (Qwen2; optional in llama)
  std::string arch = "llama";
  // RoPE: angle_i(pos) = pos * rope_freq_scale * theta^(-2i/D) / rope_freqs[i].
  bool rope_neox = false;        // rotate (i, i + D/2) (llama.cpp's NEOX type) instead of (2i, 2i+1)
  float rope_freq_scale = 1.0f;  // linear scaling: 1 / <arch>.rope.scaling.factor
  bool rope_freqs = false;       // rope_freqs.weight (D/2) present: Llama 3.x frequency factors
  // YaRN (rope.scaling.type "yarn", llama.cpp's ext_factor 1, beta_fast 32, beta_slow 1): pairs that
  // turn fewer than beta_slow times over the original context are scaled by rope_freq_scale, pairs
  // that turn more than beta_fast times are not, a linear ramp between (rope_divisors); and cos and
  // sin carry the magnitude 1 + 0.1 ln(factor), which every q·k feels squared (rope_logit_gain).
  bool rope_yarn = false;
  uint32_t rope_orig_ctx = 0;     // rope.scaling.original_context_length; 0: context_length
  float rope_attn_factor = 1.0f;  // rope.scaling.attn_factor: a further magnitude of cos and sin
  // Phi-3 LongRoPE: rope_factors_long.weight and rope_factors_short.weight (D/2 each), frequency
  // factors like rope_freqs; the long ones when the context used exceeds the original context
  // (rope.scaling.original_context_length, else context_length), as llama.cpp chooses.
  bool rope_longrope = false;
  bool qk_norm = false;          // attn_q_norm / attn_k_norm (D): RMSNorm per head of q and k before RoPE (Qwen3)
  bool fused_qkv = false;        // attn_qkv.weight holds q, k, v rows (Phi-3)
  bool fused_gate_up = false;    // ffn_up.weight holds gate rows then up rows, no ffn_gate (Phi-3)
  // <arch>.attention.sliding_window, 0 = none: a query at position p sees the keys at positions
  // p - sliding_window + 1 .. p (llama.cpp's standard SWA mask), in every layer.
  uint32_t sliding_window = 0;
};

// Reads `general.architecture` (llama, mistral, qwen2, qwen3, phi3 and internlm2) and the
// `<arch>.*` keys, then validates every tensor's shape and presence. Everything a file asks for
// that this decoder does not compute — an unknown `<arch>.*` key (softcapping, YaRN's yarn_*
// parameters, experts, ...) or a tensor it would not read — is refused, never ignored. Throws
// vkspec::Error naming the file and the key or tensor (with expected and found values).
LlamaConfig read_llama_config(const GgufFile& f);

// Sets the per-architecture switches (rope_neox, qk_norm, fused_*) for c.arch from the table the
// reader uses, and clears qkv_bias where the architecture has none; false for an unknown arch.
bool apply_arch_traits(LlamaConfig& c);

// The divisor of pair i's angle (n_rot/2 of them) as the RoPE kernels apply it, before the linear
// freq_scale: angle_i = pos * theta^(-2i/n_rot) / divisor_i * freq_scale. The file's rope_freqs
// factors (empty: all 1) and YaRN's ramp, as one table; empty when every divisor is 1. A YaRN pair
// turns by theta_extrap * (freq_scale * (1 - mix_i) + mix_i) with theta_extrap the file-factored
// angle, which is this product (exact where mix_i is 0: such pairs are linear scaling bit for bit).
std::vector<float> rope_divisors(const LlamaConfig& c, const std::vector<float>& file_factors);

// What RoPE's cos/sin magnitude m does to an attention logit q·k: m², with m = attn_factor, times
// 1 + 0.1 ln(factor) under YaRN with factor > 1. The kernels rotate without m and scale the logits
// (the same product: every dimension is rotated, rope.dimension_count == D).
float rope_logit_gain(const LlamaConfig& c);

// LongRoPE's choice: the long factors when a context of `context` tokens exceeds the original one.
bool rope_uses_long_factors(const LlamaConfig& c, uint32_t context);

// Range checks shared by every reader of hyperparameters (the verifier's GGUF metadata, a draft
// head's config.json). `where` names the file and the key ("<file>: metadata key 'x'"); each
// returns the value as the runtime uses it or throws vkspec::Error "<where>: expected ..., found ...".
int check_positive_int(int64_t v, int64_t max, const std::string& where);
float check_rms_eps(double v, const std::string& where);     // 0 < eps < 1 as a float
float check_rope_theta(double v, const std::string& where);  // positive and finite as a float

// The per-layer tensor name, e.g. blk_name(3, "attn_q.weight") == "blk.3.attn_q.weight".
std::string blk_name(int layer, const char* suffix);

}  // namespace vkspec
