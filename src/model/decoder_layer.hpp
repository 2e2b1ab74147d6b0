// The decoder layer the verifier (llama.cpp) and the draft heads (eagle_head.cpp) both record.
// One function, so the two cannot drift apart: what differs between them is data (an input norm
// or none, a qkv bias, Qwen3's q/k norm, the RoPE layout, which cache the rows write and what
// they attend to).
//
// K is the qkv matmul's input width: C, or 2C for EAGLE-3's concat(embedding, hidden).
#pragma once

#include <cstdint>
#include <optional>

#include "vkspec/ops.hpp"

namespace vkspec {

struct DecoderLayerWeights {
  const Buffer* attn_norm = nullptr;    // (K,) folded into the qkv matmul; nullptr: the input as it is
  const DeviceWeight* wqkv = nullptr;   // (H·D + 2·Hkv·D, K): q rows, then k rows, then v rows
  const Buffer* qkv_bias = nullptr;     // (H·D + 2·Hkv·D,) Qwen2; nullptr: none
  const Buffer* qk_norm = nullptr;      // (H + Hkv, D) Qwen3's per-head q/k norm; nullptr: none
  const DeviceWeight* wo = nullptr;     // (C, H·D)
  const Buffer* o_bias = nullptr;       // (C,) a head's attention_bias; nullptr: none
  const Buffer* ffn_norm = nullptr;     // (C,) folded into the gate|up matmul
  const DeviceWeight* wgu = nullptr;    // (2F, C): F gate rows, then F up rows
  const Buffer* gu_bias = nullptr;      // (2F,) a head's mlp_bias, gate then up; nullptr: none
  const DeviceWeight* wdown = nullptr;  // (C, F)
  const Buffer* down_bias = nullptr;    // (C,) a head's mlp_bias; nullptr: none
};

struct DecoderLayerShape {
  uint32_t H = 0, Hkv = 0, D = 0;
  float rms_eps = 0.0f;
  RopeArgs rope;  // the verifier's from its file; a head's is HF rotate_half
  uint32_t window = 0;  // sliding-window attention (AttentionArgs::window); 0 = every key
  GluAct act = GluAct::Silu;  // the MLP's gate activation (a head's hidden_act)
};

// Rows 0..N-1 of each.
struct DecoderLayerActs {
  Mat in;   // (N, K) the qkv matmul's input: x itself, or EAGLE-3's normalized concat
  Mat x;    // (N, C) the residual stream, updated in place
  Mat xn;   // (N, C) scratch of the folded norms
  Mat qkv;  // (N, H·D + 2·Hkv·D)
  Mat att;  // (N, H·D)
  Mat gu;   // (N, 2F) scratch of the folded GLU
  Mat act;  // (N, F)
  // Where attention carries W_o (attention_folds_o): its partial rows and arrival counts, from
  // make_o_fold_scratch. nullptr: the o matmul runs on its own.
  const Buffer* o_part = nullptr;
  const Buffer* o_arrivals = nullptr;
};

// The one row a pass computes whole (DecoderLayerPass::out_row): row `row` of the pass (dynamic:
// a head's ingest goes on from the last step's accepted row), which sees the `t` committed keys
// before its own (the pass's t + row, given by the caller since both may be dynamic), its output
// written to row `to` of x. Its bits are those row `row` of the whole pass would have: every
// kernel is batch-invariant and a causal row's keys depend only on its position.
struct DecoderLayerOutRow {
  Dyn row, t;
  uint32_t to = 0;
};

// One pass of N rows: their positions, where their K/V go, what they attend to.
struct DecoderLayerPass {
  uint32_t N = 0;
  RopePositions pos;
  KvLayer kv;
  Dyn slot;  // the rows write cache rows slot .. slot+N-1
  Dyn t;     // committed length: cache rows [0, t) are visible to every row
  uint32_t max_keys = 0;  // the most keys a row can ever see (the cache's capacity): fixes the kernels
  const Buffer* mask = nullptr;  // (N, mask_words) ancestor bits relative to t; nullptr: causal chain
  uint32_t mask_offset = 0, mask_words = 0;
  // A causal pass whose rows but one (or all) are wanted only for their K/V: every row still
  // writes its K and V, which depend on the layer's input alone, but attention and the MLP run
  // for that one row, or for none. For a model's last layer only (a next layer reads every
  // row's output): a draft head, which is one layer, in its ingest (a budget-4 step ingests 5
  // rows a head, and the draft goes on from one of them) and its prefill (no output at all).
  std::optional<DecoderLayerOutRow> out_row;  // none: every row's output
  bool kv_only = false;                       // no row's output: the pass ends with the K/V store
};

// [rmsnorm →] qkv matmul (+bias) → [q/k head norm] → rope on q and k, and the k, v rows into the
// cache, in one pass → tree/causal attention → o matmul accumulating into x → rmsnorm → gate|up
// matmul → act(gate)·up → down matmul accumulating into x. 5 dispatches whatever N where the matmul
// kernel folds the norms, the GLU and RoPE with the K/V store (+2 with Qwen3's q/k norm, which
// needs its own pass and a rope_kv_write), 4 where attention also carries the o matmul
// (attention_folds_o); a separate rmsnorm / glu_mul / rope_kv_write each otherwise. An o bias
// keeps the o matmul on its own, a gate|up bias the glu_mul (the kernels fold neither). With
// out_row one copy_rows more (the row's residual to its place) unless attention carries the o
// matmul, which then reads that residual where it is; kv_only ends after the K/V store.
void record_decoder_layer(Sequence& seq, const DecoderLayerWeights& w, const DecoderLayerShape& s,
                          const DecoderLayerActs& m, const DecoderLayerPass& p);

// The scratch of passes of up to max_rows rows where attention may carry W_o (C rows):
// DecoderLayerActs::o_part and o_arrivals (zeroed). Sized from the shapes alone
// (attention_o_partials), so a state's bytes are known before its weights are loaded; a device
// that does not fold leaves it unused, which is little, since only a small W_o folds. Both left
// empty where the shapes never fold.
void make_o_fold_scratch(Context& ctx, const DecoderLayerShape& s, uint32_t C, uint32_t max_rows, Buffer& part,
                         Buffer& arrivals);
uint64_t o_fold_scratch_bytes(const DecoderLayerShape& s, uint32_t C, uint32_t max_rows);

}  // namespace vkspec
