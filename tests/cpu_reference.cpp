// Plain loops on purpose: this is the reference the fast paths are checked against, so it
// should be obviously right rather than fast. Dot products use 8 partial sums only so the
// compiler can vectorise them without -ffast-math; the summation order is fixed.
#include "cpu_reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "tree_order.hpp"
#include "vkspec/dtype.hpp"

namespace vkspec::test {

namespace {

float dot(const float* a, const float* b, int n) {
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) s[k] += a[i + k] * b[i + k];
  float r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  for (; i < n; ++i) r += a[i] * b[i];
  return r;
}

// y (out) = W (out, in) x (in) [+ b (out)]
void matvec(float* y, const float* W, const float* x, int in, int out, const float* b = nullptr) {
  for (int o = 0; o < out; ++o) y[o] = dot(W + size_t(o) * in, x, in) + (b ? b[o] : 0.0f);
}

// y (C) = x / sqrt(mean(x^2) + eps) * w
void rmsnorm(float* y, const float* x, const float* w, int C, float eps) {
  double ss = 0;
  for (int i = 0; i < C; ++i) ss += double(x[i]) * x[i];
  const float r = float(1.0 / std::sqrt(ss / C + eps));
  for (int i = 0; i < C; ++i) y[i] = x[i] * r * w[i];
}

// RoPE as llama.cpp computes it (ggml_rope_cache_init, rope_yarn): pair i of each head turns by
// theta_extrap = pos * theta^(-2i/D) / factors[i], scaled by freq_scale — wholly for linear
// scaling; under YaRN mixed, theta_extrap * freq_scale * (1 - mix) + theta_extrap * mix with mix a
// ramp from 1 (pairs turning more than 32 times over the original context) to 0 (fewer than once),
// and cos and sin multiplied by attn_factor * (1 + 0.1 ln(1/freq_scale)). Written here from that
// definition in doubles, the magnitude on q and k as llama.cpp puts it (the runtime scales the
// logits instead). "Normal" pairs (2i, 2i+1) for llama-family GGUFs (their converter permuted q/k
// rows for it; llama2.c's convention too); NEOX pairs (i, i + D/2) for qwen2, qwen3, phi3.
void rope(float* v, int heads, int D, int pos, const LlamaConfig& c, const std::vector<float>& factors) {
  const bool yarn = c.rope_yarn && c.rope_freq_scale != 1.0f;
  double low = 0, high = 0, mscale = c.rope_attn_factor;
  if (yarn) {
    const double n_ctx = c.rope_orig_ctx ? c.rope_orig_ctx : c.ctx;
    auto pair_turning = [&](double turns) {  // n_ctx = 2π · turns · theta^(2i/D), solved for i
      return D * std::log(n_ctx / (turns * 2 * 3.14159265358979323846)) / (2 * std::log(double(c.rope_theta)));
    };
    low = std::max(0.0, std::floor(pair_turning(32)));
    high = std::min(double(D - 1), std::ceil(pair_turning(1)));
    mscale *= 1 + 0.1 * std::log(1.0 / c.rope_freq_scale);
  }
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < D / 2; ++i) {
      const double freq = std::pow(double(c.rope_theta), -2.0 * i / D);
      const double extrap = pos * freq / (factors.empty() ? 1.0 : double(factors[i]));
      double a = extrap * c.rope_freq_scale;
      if (yarn) {
        const double mix = 1 - std::clamp((i - low) / std::max(0.001, high - low), 0.0, 1.0);
        a = a * (1 - mix) + extrap * mix;
      }
      const float co = float(std::cos(a) * mscale), si = float(std::sin(a) * mscale);
      float* p0 = v + size_t(h) * D + (c.rope_neox ? i : 2 * i);
      float* p1 = p0 + (c.rope_neox ? D / 2 : 1);
      const float x0 = *p0, x1 = *p1;
      *p0 = x0 * co - x1 * si;
      *p1 = x0 * si + x1 * co;
    }
}

// Rows [first, first + n) of a (rows, cols) matrix: the parts of Phi-3's fused tensors.
std::vector<float> rows_of(const std::vector<float>& m, size_t cols, size_t first, size_t n) {
  return {m.begin() + first * cols, m.begin() + (first + n) * cols};
}

std::vector<float> load(const GgufFile& f, const std::string& name) {
  return dequantize_tensor(f.require_tensor(name));
}

}  // namespace

uint32_t argmax(std::span<const float> x) { return order_argmax(x); }

CpuReference::CpuReference(const GgufFile& f, int max_ctx, bool kv_f16) : cfg_(read_llama_config(f)), kv_f16_(kv_f16) {
  cap_ = max_ctx > 0 ? max_ctx : cfg_.ctx;
  embd_ = load(f, "token_embd.weight");
  norm_ = load(f, "output_norm.weight");
  if (!cfg_.tied_output) out_ = load(f, "output.weight");
  if (cfg_.rope_freqs) rope_freqs_ = load(f, "rope_freqs.weight");
  // LongRoPE: the long factors once the context exceeds the original one (llama.cpp's
  // get_rope_factors), read here from the keys themselves.
  if (cfg_.rope_longrope)
    rope_freqs_ = load(f, uint32_t(cap_) > (cfg_.rope_orig_ctx ? cfg_.rope_orig_ctx : uint32_t(cfg_.ctx))
                              ? "rope_factors_long.weight"
                              : "rope_factors_short.weight");
  for (int l = 0; l < cfg_.L; ++l) {
    auto t = [&](const char* s) { return load(f, blk_name(l, s)); };
    Layer ly;
    ly.attn_norm = t("attn_norm.weight");
    const size_t C = size_t(cfg_.C), F = size_t(cfg_.F), QD = size_t(cfg_.H) * cfg_.D, KVD = size_t(cfg_.Hkv) * cfg_.D;
    if (cfg_.fused_qkv) {  // attn_qkv: q rows, then k rows, then v rows
      const auto qkv = t("attn_qkv.weight");
      ly.wq = rows_of(qkv, C, 0, QD);
      ly.wk = rows_of(qkv, C, QD, KVD);
      ly.wv = rows_of(qkv, C, QD + KVD, KVD);
    } else {
      ly.wq = t("attn_q.weight");
      ly.wk = t("attn_k.weight");
      ly.wv = t("attn_v.weight");
    }
    if (cfg_.qk_norm) {
      ly.q_norm = t("attn_q_norm.weight");
      ly.k_norm = t("attn_k_norm.weight");
    }
    if (cfg_.qkv_bias) {
      ly.bq = t("attn_q.bias");
      ly.bk = t("attn_k.bias");
      ly.bv = t("attn_v.bias");
    }
    ly.wo = t("attn_output.weight");
    ly.ffn_norm = t("ffn_norm.weight");
    if (cfg_.fused_gate_up) {  // ffn_up: gate rows, then up rows
      const auto gu = t("ffn_up.weight");
      ly.gate = rows_of(gu, C, 0, F);
      ly.up = rows_of(gu, C, F, F);
    } else {
      ly.gate = t("ffn_gate.weight");
      ly.up = t("ffn_up.weight");
    }
    ly.down = t("ffn_down.weight");
    layers_.push_back(std::move(ly));
  }
  const size_t kvd = size_t(cfg_.Hkv) * cfg_.D;
  kcache_.assign(size_t(cfg_.L) * cap_ * kvd, 0.0f);
  vcache_.assign(size_t(cfg_.L) * cap_ * kvd, 0.0f);
}

CpuReference::Output CpuReference::forward(std::span<const uint32_t> tokens) {
  std::vector<int> pos(tokens.size());
  for (size_t i = 0; i < pos.size(); ++i) pos[i] = t_ + int(i);
  return forward(tokens, pos);
}

CpuReference::Output CpuReference::forward(std::span<const uint32_t> tokens, std::span<const int> positions,
                                           std::span<const uint8_t> mask) {
  const int N = int(tokens.size());
  const int C = cfg_.C, H = cfg_.H, Hkv = cfg_.Hkv, D = cfg_.D, F = cfg_.F, V = cfg_.V;
  const int QD = H * D, KVD = Hkv * D, group = H / Hkv;
  if (positions.size() != tokens.size()) throw std::invalid_argument("forward: positions size != tokens size");
  if (!mask.empty() && mask.size() != size_t(N) * N) throw std::invalid_argument("forward: mask must be N*N");
  if (t_ + N > cap_) throw std::invalid_argument("forward: KV cache capacity exceeded");
  for (uint32_t tok : tokens)
    if (tok >= uint32_t(V)) throw std::invalid_argument("forward: token id out of range");
  auto visible = [&](int i, int j) { return mask.empty() ? j <= i : mask[size_t(i) * N + j] != 0; };
  // Sliding window: row i at positions[i] sees keys at positions[i] - window + 1 and later (committed
  // slot s holds position s).
  const int64_t window = cfg_.sliding_window;
  auto in_window = [&](int i, int s) {
    const int64_t kpos = s < t_ ? s : positions[s - t_];
    return window == 0 || int64_t(positions[i]) - kpos < window;
  };

  std::vector<float> x(size_t(N) * C);  // (N, C) residual stream
  for (int i = 0; i < N; ++i) std::memcpy(&x[size_t(i) * C], &embd_[size_t(tokens[i]) * C], C * sizeof(float));

  std::vector<float> xn(C), q(size_t(N) * QD), att(QD), o(C), g(F), u(F), scores(t_ + N);
  const float scale = 1.0f / std::sqrt(float(D));
  for (int l = 0; l < cfg_.L; ++l) {
    const Layer& ly = layers_[l];
    float* kc = &kcache_[size_t(l) * cap_ * KVD];  // (cap, Hkv*D)
    float* vc = &vcache_[size_t(l) * cap_ * KVD];
    // q, k, v for every row first: a row may attend to any other row of this call.
    for (int i = 0; i < N; ++i) {
      rmsnorm(xn.data(), &x[size_t(i) * C], ly.attn_norm.data(), C, cfg_.rms_eps);
      float* qi = &q[size_t(i) * QD];
      float* ki = kc + size_t(t_ + i) * KVD;
      float* vi = vc + size_t(t_ + i) * KVD;
      matvec(qi, ly.wq.data(), xn.data(), C, QD, cfg_.qkv_bias ? ly.bq.data() : nullptr);
      matvec(ki, ly.wk.data(), xn.data(), C, KVD, cfg_.qkv_bias ? ly.bk.data() : nullptr);
      matvec(vi, ly.wv.data(), xn.data(), C, KVD, cfg_.qkv_bias ? ly.bv.data() : nullptr);
      if (cfg_.qk_norm) {  // Qwen3: each head of q and k RMS-normalized, before RoPE
        for (int h = 0; h < H; ++h) rmsnorm(qi + size_t(h) * D, qi + size_t(h) * D, ly.q_norm.data(), D, cfg_.rms_eps);
        for (int h = 0; h < Hkv; ++h) rmsnorm(ki + size_t(h) * D, ki + size_t(h) * D, ly.k_norm.data(), D, cfg_.rms_eps);
      }
      rope(qi, H, D, positions[i], cfg_, rope_freqs_);
      rope(ki, Hkv, D, positions[i], cfg_, rope_freqs_);
      if (kv_f16_)
        for (int x = 0; x < KVD; ++x) ki[x] = f16_to_f32(f32_to_f16(ki[x])), vi[x] = f16_to_f32(f32_to_f16(vi[x]));
    }
    for (int i = 0; i < N; ++i) {
      for (int h = 0; h < H; ++h) {
        const int kh = h / group;  // GQA: query heads share kv head h / (H / Hkv)
        const float* qh = &q[size_t(i) * QD + size_t(h) * D];
        // Keys visible to row i: committed [0, t) and this call's rows j where visible(i, j).
        float mx = -INFINITY;
        for (int s = 0; s < t_ + N; ++s) {
          const bool vis = (s < t_ || visible(i, s - t_)) && in_window(i, s);
          scores[s] = vis ? dot(qh, kc + size_t(s) * KVD + size_t(kh) * D, D) * scale : -INFINITY;
          mx = std::max(mx, scores[s]);
        }
        double sum = 0;
        for (int s = 0; s < t_ + N; ++s) {
          scores[s] = scores[s] == -INFINITY ? 0.0f : std::exp(scores[s] - mx);
          sum += scores[s];
        }
        float* ah = &att[size_t(h) * D];
        std::fill(ah, ah + D, 0.0f);
        for (int s = 0; s < t_ + N; ++s) {
          if (scores[s] == 0.0f) continue;
          const float w = float(scores[s] / sum);
          const float* vs = vc + size_t(s) * KVD + size_t(kh) * D;
          for (int d = 0; d < D; ++d) ah[d] += w * vs[d];
        }
      }
      float* xi = &x[size_t(i) * C];
      matvec(o.data(), ly.wo.data(), att.data(), QD, C);
      for (int c = 0; c < C; ++c) xi[c] += o[c];
    }
    for (int i = 0; i < N; ++i) {
      float* xi = &x[size_t(i) * C];
      rmsnorm(xn.data(), xi, ly.ffn_norm.data(), C, cfg_.rms_eps);
      matvec(g.data(), ly.gate.data(), xn.data(), C, F);
      matvec(u.data(), ly.up.data(), xn.data(), C, F);
      for (int k = 0; k < F; ++k) g[k] = g[k] / (1.0f + std::exp(-g[k])) * u[k];  // silu(gate) * up
      matvec(o.data(), ly.down.data(), g.data(), F, C);
      for (int c = 0; c < C; ++c) xi[c] += o[c];
    }
  }

  Output out;
  out.hidden.resize(size_t(N) * C);
  out.logits.resize(size_t(N) * V);
  const float* W = cfg_.tied_output ? embd_.data() : out_.data();  // (V, C)
  for (int i = 0; i < N; ++i) {
    rmsnorm(&out.hidden[size_t(i) * C], &x[size_t(i) * C], norm_.data(), C, cfg_.rms_eps);
    matvec(&out.logits[size_t(i) * V], W, &out.hidden[size_t(i) * C], C, V);
  }
  if (mask.empty()) t_ += N;
  return out;
}

void CpuReference::commit_rows(std::span<const int> rows) {
  const size_t KVD = size_t(cfg_.Hkv) * cfg_.D;
  // Rows are ascending along a path (parents before children), so row k moves to slot t+k
  // with t+k <= t+rows[k]: copying in order never reads a slot already overwritten.
  for (int l = 0; l < cfg_.L; ++l) {
    float* kc = &kcache_[size_t(l) * cap_ * KVD];
    float* vc = &vcache_[size_t(l) * cap_ * KVD];
    for (size_t k = 0; k < rows.size(); ++k) {
      if (k > 0 && rows[k] <= rows[k - 1]) throw std::invalid_argument("commit_rows: rows must ascend");
      std::memmove(kc + (t_ + k) * KVD, kc + size_t(t_ + rows[k]) * KVD, KVD * sizeof(float));
      std::memmove(vc + (t_ + k) * KVD, vc + size_t(t_ + rows[k]) * KVD, KVD * sizeof(float));
    }
  }
  t_ += int(rows.size());
}

void CpuReference::truncate(int t) { t_ = std::min(t_, std::max(0, t)); }

std::vector<uint32_t> CpuReference::greedy(std::span<const uint32_t> prompt, int n_new) {
  reset();
  std::vector<uint32_t> outs;
  if (n_new <= 0) return outs;
  Output o = forward(prompt);
  uint32_t next = argmax(std::span<const float>(o.logits).subspan(size_t(prompt.size() - 1) * cfg_.V, cfg_.V));
  outs.push_back(next);
  while (int(outs.size()) < n_new) {
    o = forward(std::span<const uint32_t>(&next, 1));
    next = argmax(o.logits);
    outs.push_back(next);
  }
  return outs;
}

}  // namespace vkspec::test
