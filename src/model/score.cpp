// The verifier over token chains, without the speculative engine: logits of every row and
// llama.cpp-style perplexity (include/vkspec/score.hpp).
#include "vkspec/score.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace vkspec {

ChainRunner::ChainRunner(LlamaModel& m)
    : model_(m),
      tokens_(m.context(), uint64_t(m.max_rows()) * 4, MemoryKind::Host),
      pos_(m.context(), uint64_t(m.max_rows()) * 4, MemoryKind::Host) {}

void ChainRunner::run(std::span<const uint32_t> tokens, uint32_t from,
                      const std::function<void(uint32_t, std::span<const float>)>& on_row) {
  const uint32_t T = uint32_t(tokens.size()), R = model_.max_rows(), V = uint32_t(model_.config().V);
  if (uint64_t(t_) + T > model_.capacity())
    throw Error(std::to_string(T) + " tokens at position " + std::to_string(t_) + " do not fit the context of " +
                std::to_string(model_.capacity()) + " tokens (--ctx)");
  for (uint32_t tok : tokens)
    if (tok >= V) throw Error("token id " + std::to_string(tok) + " is outside the model's vocabulary of " + std::to_string(V));
  Sequence seq(model_.context());
  std::vector<int32_t> pos(R);
  // Passes from prefill_passes over this call's tokens (they overlap; a row is handed back once).
  const uint32_t t0 = t_;
  uint32_t done = 0;  // rows [0, done) of this call computed
  for (const RowPass& pass : prefill_passes(T, R)) {
    const uint32_t c0 = pass.first, n = pass.rows;
    for (uint32_t i = 0; i < n; ++i) pos[i] = int32_t(t0 + c0 + i);
    tokens_.upload(tokens.data() + c0, n * 4);
    pos_.upload(pos.data(), n * 4);
    LlamaModel::ForwardArgs a;
    a.N = n, a.t = t0 + c0, a.tokens = &tokens_, a.pos = &pos_;
    // The lm_head only for the new rows asked for (the forward computes at least the last).
    const uint32_t want = std::max(from, done) - c0;
    a.logits_from = std::min(want, n - 1);
    a.hidden = false;
    seq.begin();
    model_.forward(seq, a);
    seq.run();
    done = c0 + n;
    t_ = t0 + done;
    const Mat L = model_.logits();
    for (uint32_t i = want; i < n; ++i) {
      row_ = L.buf->read<float>(V, (size_t(L.offset) + size_t(i) * L.stride) * 4);
      // Finite weights can still overflow on the way (a norm weight of 3e38, a v row past the f16
      // cache's range): such a row is refused, never written or scored as NaN.
      for (uint32_t v = 0; v < V; ++v)
        if (!std::isfinite(row_[v]))
          throw_nonfinite_logits(c0 + i, "entry " + std::to_string(v) + " is " + (std::isnan(row_[v]) ? "NaN" : "inf"),
                                 model_.kv_type() == KvType::F16);
      on_row(c0 + i, row_);
    }
  }
}

std::vector<float> ChainRunner::logits(std::span<const uint32_t> tokens) {
  const size_t V = size_t(model_.config().V);
  std::vector<float> out(tokens.size() * V);
  run(tokens, 0, [&](uint32_t r, std::span<const float> l) { std::copy(l.begin(), l.end(), out.begin() + r * V); });
  return out;
}

double token_nll(std::span<const float> logits, uint32_t target) {
  double mx = -INFINITY;
  for (float x : logits) mx = std::max(mx, double(x));
  double sum = 0;
  for (float x : logits) sum += std::exp(double(x) - mx);
  return mx + std::log(sum) - double(logits[target]);
}

void check_perplexity(const LlamaModel& model, size_t T, const PerplexityOptions& o) {
  const uint32_t W = o.window;
  if (W < 4)
    throw Error("perplexity window " + std::to_string(W) + " is too short: it must hold at least 4 tokens (raise --ctx)");
  if (W > model.capacity())
    throw Error("perplexity window " + std::to_string(W) + " exceeds the model's context of " +
                std::to_string(model.capacity()) + " tokens (lower --ctx)");
  if (T < W)
    throw Error("perplexity needs at least one full window: " + std::to_string(T) + " tokens < window " +
                std::to_string(W) + " (use a smaller --ctx or a longer text)");
}

PerplexityResult perplexity(LlamaModel& model, std::span<const uint32_t> tokens, const PerplexityOptions& o,
                            const std::function<void(uint32_t, const PerplexityResult&)>& progress) {
  check_perplexity(model, tokens.size(), o);
  const uint32_t W = o.window, T = uint32_t(tokens.size());
  ChainRunner run(model);
  PerplexityResult r;
  double nll = 0;
  const auto t0 = std::chrono::steady_clock::now();
  const uint32_t first = W / 2;  // llama.cpp: score the second half only
  std::vector<uint32_t> win(W);
  for (uint32_t w = 0; w < T / W; ++w) {
    std::copy(tokens.begin() + size_t(w) * W, tokens.begin() + size_t(w + 1) * W, win.begin());
    if (o.bos >= 0) win[0] = uint32_t(o.bos);
    run.reset();
    // Row j predicts token j + 1: rows first .. W-2 are scored.
    run.run(win, first, [&](uint32_t j, std::span<const float> l) {
      if (j + 1 < W) nll += token_nll(l, win[j + 1]);
    });
    r.windows = w + 1;
    r.scored += W - 1 - first;
    r.mean_nll = nll / double(r.scored);
    r.ppl = std::exp(r.mean_nll);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.tokens_per_s = r.seconds > 0 ? double(r.windows) * W / r.seconds : 0;
    if (progress) progress(r.windows, r);
  }
  return r;
}

}  // namespace vkspec
