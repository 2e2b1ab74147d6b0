// Scoring token sequences with the verifier alone: every row's logits (`vkspec logits`, the
// llama.cpp interop tests) and perplexity in llama.cpp's manner (`vkspec perplexity`).
// Dimension names: T tokens, V vocab, W perplexity window (the context of one evaluation).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "vkspec/model.hpp"

namespace vkspec {

// Feeds token chains through the verifier, appending to its KV cache at positions t, t+1, ...,
// in passes of at most max_rows() rows, and hands back the logits of the rows asked for.
class ChainRunner {
 public:
  explicit ChainRunner(LlamaModel& model);
  // Runs `tokens` at positions t().. and calls on_row(i, logits (V)) for every row i >= from
  // (0-based within `tokens`), in order. Throws vkspec::Error if the chain does not fit the cache.
  void run(std::span<const uint32_t> tokens, uint32_t from,
           const std::function<void(uint32_t row, std::span<const float> logits)>& on_row);
  // All rows' logits, (T, V) row-major.
  std::vector<float> logits(std::span<const uint32_t> tokens);
  void reset() { t_ = 0; }  // forget the cache (the next chain starts at position 0)
  uint32_t t() const { return t_; }

 private:
  LlamaModel& model_;
  Buffer tokens_, pos_;  // (max_rows) u32 / i32, host-visible
  std::vector<float> row_;
  uint32_t t_ = 0;
};

struct PerplexityOptions {
  uint32_t window = 512;         // W: tokens per evaluation (llama.cpp's n_ctx)
  int32_t bos = -1;              // >= 0: each window's first token is replaced by this id (llama.cpp with add_bos)
};
struct PerplexityResult {
  uint32_t windows = 0;          // floor(T / W); the tokens after the last full window are not used
  uint64_t scored = 0;           // predictions scored: windows * (W - 1 - W/2)
  double mean_nll = 0;           // natural log
  double ppl = 0;                // exp(mean_nll)
  double seconds = 0;            // forward passes and scoring, model load excluded
  double tokens_per_s = 0;       // tokens evaluated (windows * W) per second
};
// llama.cpp's `llama-perplexity`: the tokens are cut into windows of W; each is evaluated from an
// empty cache, and only the second half is scored (row j predicts token j+1 for j in
// [W/2, W-1)), so every scored token has at least W/2 tokens of context. `progress` is called
// after each window with the running result. Needs T >= W and 4 <= W <= the model's capacity.
PerplexityResult perplexity(LlamaModel& model, std::span<const uint32_t> tokens, const PerplexityOptions& opts,
                            const std::function<void(uint32_t window, const PerplexityResult& so_far)>& progress = {});
// Throws the error `perplexity` would for T tokens, before any work (the CLI checks first, then
// prints its plan).
void check_perplexity(const LlamaModel& model, size_t T, const PerplexityOptions& opts);

// -log softmax(logits)[target] in double: log-sum-exp over the row minus the target's logit.
double token_nll(std::span<const float> logits, uint32_t target);

}  // namespace vkspec
