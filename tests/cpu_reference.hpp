// Plain-loop CPU reference of the Llama forward pass (llm.c style): the oracle the Vulkan
// forward, the tree-masked attention and the speculative strategies are checked against.
//
// Weights are dequantized to f32 once at construction, so the reference computes exactly what
// the stored (possibly quantized) weights mean. Dimension names: C width, L layers, H/Hkv heads,
// D head width, F ffn width, V vocab, N rows in one call, t committed KV length.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "vkspec/gguf.hpp"
#include "vkspec/model_config.hpp"

namespace vkspec::test {

class CpuReference {
 public:
  // max_ctx: KV cache capacity in rows (0 = the model's context length). kv_f16: K and V are
  // rounded through f16 as they enter the cache, as the model's default f16 cache stores them.
  explicit CpuReference(const GgufFile& f, int max_ctx = 0, bool kv_f16 = true);

  struct Output {
    std::vector<float> logits;  // (N, V)
    std::vector<float> hidden;  // (N, C): last hidden state after the final norm (lm_head input)
  };

  // Runs N rows. Row i has token tokens[i] at position id positions[i] and writes its K/V at
  // cache slot t + i (t = committed()).
  // - mask empty: the rows are a causal chain (row i sees [0, t) and rows 0..i) and are
  //   committed afterwards (t += N).
  // - mask (N*N, row-major, nonzero = visible): row i sees [0, t) plus rows j with mask[i*N+j]
  //   (the tree's ancestor mask, which includes i itself). Nothing is committed: call
  //   commit_rows() with the accepted path, or just run the next forward (it overwrites).
  Output forward(std::span<const uint32_t> tokens, std::span<const int> positions,
                 std::span<const uint8_t> mask = {});
  // Convenience: a causal chain at positions t, t+1, ...
  Output forward(std::span<const uint32_t> tokens);

  // Accept tree rows (indices into the last masked forward, in path order): their KV rows move
  // to slots t, t+1, ... and t grows by rows.size().
  void commit_rows(std::span<const int> rows);
  void truncate(int t);  // forget KV rows >= t
  int committed() const { return t_; }
  void reset() { t_ = 0; }

  // Greedy decoding: prefill the prompt, then n_new single-token steps; returns the new ids.
  // Argmax ties go to the lowest id. Resets the cache first.
  std::vector<uint32_t> greedy(std::span<const uint32_t> prompt, int n_new);

  const LlamaConfig& config() const { return cfg_; }

 private:
  struct Layer {
    std::vector<float> attn_norm, wq, wk, wv, bq, bk, bv, q_norm, k_norm, wo, ffn_norm, gate, up, down;
  };
  LlamaConfig cfg_;
  int cap_ = 0;
  int t_ = 0;
  bool kv_f16_ = true;
  std::vector<float> embd_;   // (V, C)
  std::vector<float> out_;    // (V, C); empty when tied
  std::vector<float> norm_;   // (C)
  std::vector<float> rope_freqs_;  // (D/2), empty when the file has none
  std::vector<Layer> layers_;
  std::vector<float> kcache_, vcache_;  // (L, cap, Hkv*D)
};

// Index of the largest value, lowest index on ties, NaN last (the GPU argmax: tree_order.hpp).
uint32_t argmax(std::span<const float> x);

}  // namespace vkspec::test
