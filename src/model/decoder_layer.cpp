// The one decoder layer of the verifier and the draft heads (decoder_layer.hpp).
#include "decoder_layer.hpp"

namespace vkspec {

void record_decoder_layer(Sequence& seq, const DecoderLayerWeights& w, const DecoderLayerShape& s,
                          const DecoderLayerActs& m, const DecoderLayerPass& p) {
  const uint32_t N = p.N, H = s.H, Hkv = s.Hkv, D = s.D, HD = H * D, KV = Hkv * D;
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
  AttentionArgs at;
  at.N = N, at.H = H, at.Hkv = Hkv, at.D = D, at.t = p.t;
  at.q = m.qkv, at.o = m.att;
  at.k_cache = p.kv.k, at.v_cache = p.kv.v, at.k_base = p.kv.k_base, at.v_base = p.kv.v_base, at.kv_type = p.kv.type;
  at.mask = p.mask, at.mask_offset = p.mask_offset, at.mask_words = p.mask_words, at.causal = p.mask == nullptr;
  attention(seq, at);
  MatmulArgs acc;
  acc.accumulate = true;  // residual add fused into the projection
  matmul(seq, *w.wo, m.att, m.x, N, acc);
  MatmulArgs ga;  // ffn_norm and silu(gate) · up folded into the gate|up matmul
  ga.norm = w.ffn_norm, ga.norm_eps = s.rms_eps, ga.norm_scratch = m.xn;
  ga.glu = true, ga.glu_scratch = m.gu;
  matmul(seq, *w.wgu, m.x, m.act, N, ga);
  matmul(seq, *w.wdown, m.act, m.x, N, acc);
}

}  // namespace vkspec
