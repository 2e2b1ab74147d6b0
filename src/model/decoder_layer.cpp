// The one decoder layer of the verifier and the draft heads (decoder_layer.hpp).
#include "decoder_layer.hpp"

#include <cassert>

namespace vkspec {

void record_decoder_layer(Sequence& seq, const DecoderLayerWeights& w, const DecoderLayerShape& s,
                          const DecoderLayerActs& m, const DecoderLayerPass& p) {
  const uint32_t N = p.N, H = s.H, Hkv = s.Hkv, D = s.D, HD = H * D, KV = Hkv * D;
  assert(!(p.out_row || p.kv_only) || !p.mask);  // causal passes only
  MatmulArgs qa;  // attn_norm (when there is one) folded into the qkv matmul
  qa.bias = w.qkv_bias;
  if (w.attn_norm) qa.norm = w.attn_norm, qa.norm_eps = s.rms_eps, qa.norm_scratch = m.xn;
  // q rotated; K rotated and V (row r: qkv[r][HD .. HD+KV) and [HD+KV .. HD+2KV)) into cache
  // rows slot .. slot+N-1: in the qkv matmul's epilogue where the device's kernel can, else one
  // rope_kv_write pass after it.
  const RopeKvFold rk{.pos = p.pos, .H = H, .D = D, .n_rot = D, .rope = s.rope, .k_col = HD, .v_col = HD + KV,
                      .kv = KV, .cache = p.kv, .slot = p.slot};
  if (!w.qk_norm) qa.rope_kv = &rk;
  matmul(seq, *w.wqkv, m.in, m.qkv, N, qa);
  if (w.qk_norm) {
    // q and k are adjacent in each qkv row: normalize them (Qwen3) as H + Hkv heads of width D.
    rmsnorm_heads(seq, m.qkv, *w.qk_norm, N, H + Hkv, D, s.rms_eps);
    rope_kv_write(seq, m.qkv, p.pos, N, H, D, D, s.rope, HD, HD + KV, KV, p.kv, p.slot);
  }
  if (p.kv_only) return;
  // With out_row: that row alone from here on, at row `to` of x: the folded projection takes its
  // residual from the pass's row; otherwise that row is moved there first.
  const uint32_t C = w.wo->N, n = p.out_row ? 1 : N;
  const Mat x = p.out_row ? m.x.row(p.out_row->to) : m.x;
  AttentionArgs at;
  at.N = n, at.H = H, at.Hkv = Hkv, at.D = D, at.t = p.out_row ? p.out_row->t : p.t;
  if (p.out_row) at.q_row = p.out_row->row;
  at.q = m.qkv, at.o = m.att;
  at.k_cache = p.kv.k, at.v_cache = p.kv.v, at.k_base = p.kv.k_base, at.v_base = p.kv.v_base, at.kv_type = p.kv.type;
  at.mask = p.mask, at.mask_offset = p.mask_offset, at.mask_words = p.mask_words, at.causal = p.mask == nullptr;
  at.window = s.window;
  at.logit_scale = s.rope.logit_gain;
  MatmulArgs acc;
  acc.accumulate = true;  // residual add fused into the projection
  acc.bias = w.o_bias;
  if (m.o_part && !w.o_bias && attention_folds_o(seq.context(), at, *w.wo, p.max_keys)) {
    at.wo = w.wo, at.o = x;  // the projection inside the attention kernel, adding into x
    at.o_part = m.o_part, at.o_arrivals = m.o_arrivals;
    if (p.out_row) at.residual_offset = m.x.offset;
    attention(seq, at);
  } else {
    if (p.out_row) copy_rows(seq, m.x, p.out_row->row, x, 1, C);
    attention(seq, at);
    matmul(seq, *w.wo, m.att, x, n, acc);
  }
  MatmulArgs ga;  // ffn_norm and act(gate) · up folded into the gate|up matmul
  ga.norm = w.ffn_norm, ga.norm_eps = s.rms_eps, ga.norm_scratch = m.xn, ga.glu_act = s.act;
  if (w.gu_bias) {
    ga.bias = w.gu_bias;
    matmul(seq, *w.wgu, x, m.gu, n, ga);
    const uint32_t F = w.wgu->N / 2;
    glu_mul(seq, m.gu, m.gu.col(F), m.act, n, F, s.act);
  } else {
    ga.glu = true, ga.glu_scratch = m.gu;
    matmul(seq, *w.wgu, x, m.act, n, ga);
  }
  acc.bias = w.down_bias;
  matmul(seq, *w.wdown, m.act, x, n, acc);
}

namespace {
uint64_t o_part_bytes(const DecoderLayerShape& s, uint32_t C, uint32_t max_rows) {
  AttentionArgs a;
  a.H = s.H, a.Hkv = s.Hkv, a.D = s.D;
  return uint64_t(max_rows) * attention_o_partials(a, C) * 4;
}
uint64_t o_arrival_bytes(uint32_t max_rows) { return (uint64_t(max_rows) + 3) / 4 * 16; }  // whole 16-byte words
}  // namespace

void make_o_fold_scratch(Context& ctx, const DecoderLayerShape& s, uint32_t C, uint32_t max_rows, Buffer& part,
                         Buffer& arrivals) {
  const uint64_t bytes = o_part_bytes(s, C, max_rows);
  if (!bytes) return;
  part = Buffer(ctx, bytes);
  arrivals = Buffer(ctx, o_arrival_bytes(max_rows));
  arrivals.upload(std::vector<uint32_t>(arrivals.size() / 4, 0));
}

uint64_t o_fold_scratch_bytes(const DecoderLayerShape& s, uint32_t C, uint32_t max_rows) {
  const uint64_t bytes = o_part_bytes(s, C, max_rows);
  return bytes ? bytes + o_arrival_bytes(max_rows) : 0;
}

}  // namespace vkspec
