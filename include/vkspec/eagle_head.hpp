// A draft head (DESIGN.md §5), of either published kind:
// - EAGLE-1/2: fc[2C → C](concat(embed(token), feature)) → one Llama decoder layer without input
//   norm (own KV cache, HF rotate_half RoPE) → the verifier's lm_head. The feature is the
//   verifier's last hidden state after its final norm; deeper levels feed back the head's h.
// - EAGLE-3 (config.json: an `architectures` entry containing "Eagle3", or `draft_vocab_size`):
//   the feature is the verifier's residual stream at three layers, concatenated (3·Ct) and
//   projected by fc (no bias) to C; deeper levels feed back the head's own pre-norm output. The
//   decoder layer's attention reads concat(input_layernorm(embed(token)), hidden_norm(hidden))
//   (2C wide) with the un-normalized hidden as residual; its own `norm` and `lm_head` score a
//   draft vocabulary of draft_vocab_size ids, draft id i being verifier id i + d2t[i].
// Loaded from a folder with config.json and model.safetensors or pytorch_model.bin (the
// published head layouts; safetensors when both are there).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "vkspec/model.hpp"

namespace vkspec {

struct HeadConfig {
  int C = 0, H = 0, Hkv = 0, D = 0, F = 0, V = 0;
  float rms_eps = 1e-6f, rope_theta = 10000.0f;
  // rope_scaling, as Hugging Face's rotary embedding applies it: "linear" divides every frequency
  // by factor (rope_freq_scale = 1 / factor); "llama3" divides low frequencies by factor and
  // smooths the middle band (rope_divisors, D/2 of them, divisors of each pair's angle, as a
  // verifier's rope_freqs.weight). Absent, null or "default": neither.
  float rope_freq_scale = 1.0f;
  std::vector<float> rope_divisors;
  // Hugging Face's attention_bias (q, k, v and o projections) and mlp_bias (gate, up, down).
  bool attention_bias = false, mlp_bias = false;
  // EAGLE-1/2's "bias": whether its fc has one (fc.bias), as EAGLE's loader reads it (absent or
  // null: true).
  bool fc_bias = true;
  // hidden_act: the MLP's gate activation ("silu", "gelu", "gelu_pytorch_tanh" / "gelu_new").
  GluAct hidden_act = GluAct::Silu;
  // EAGLE-3 only.
  bool eagle3 = false;
  int draft_V = 0;   // draft_vocab_size (default vocab_size)
  int target_C = 0;  // target_hidden_size: the verifier's width (default hidden_size)
  // eagle_aux_hidden_state_layer_ids (top level or under eagle_config): id k taps the output of
  // verifier layer k. Empty: the reference default, the inputs of layers 2, L/2 and L-3.
  std::vector<int> aux_layer_ids;
};

// Verifier residual-stream points an EAGLE-3 head reads, in its fc's order: point p is the
// input of decoder layer p (p == L: the last layer's output, before the final norm). Config id k
// is point k + 1. Throws naming the key and the verifier's layer count when a point is outside.
std::vector<uint32_t> eagle3_tap_points(const HeadConfig& c, int verifier_layers, const std::string& head_path);

// Every integer in a head's config.json is at most this: real heads are far below it, and it keeps
// every buffer row (2F, H*D + 2*Hkv*D) within 32-bit arithmetic.
constexpr int64_t kMaxHeadDim = int64_t(1) << 24;

// A head's config.json: hidden_size, num_attention_heads, num_key_value_heads (default: heads),
// intermediate_size, vocab_size (and for EAGLE-3 draft_vocab_size, target_hidden_size) as exact
// integers in 1..kMaxHeadDim; eagle_aux_hidden_state_layer_ids three integers; rms_norm_eps and rope_theta
// range-checked as the verifier's are; head_dim, if given, equal to hidden_size / heads;
// rope_scaling of type linear or llama3 with its numbers in range, any other type refused;
// attention_bias and mlp_bias true or false (absent or null: false). Throws
// vkspec::Error naming `path` and the key. No Vulkan: the fuzzers call it directly.
HeadConfig parse_head_config(std::string_view json_text, const std::string& path);
HeadConfig read_head_config(const std::string& config_path);
// Refuses a head whose width, vocabulary or head width does not fit the verifier.
void check_head_fits(const HeadConfig& c, const LlamaConfig& verifier, const std::string& head_path);
// The files a head path names: a folder's model.safetensors (or, without one, its
// pytorch_model.bin) and config.json, or the weights file given and config.json beside it.
// Nothing is checked to exist.
struct HeadPaths {
  std::string weights, config;
};
HeadPaths head_paths(const std::string& path);

struct HeadTensors;  // eagle_head.cpp: a head file's tensors, type- and NaN-checked on the way in

// A head's weights on the device: uploaded once, never written again, and shared (through
// std::shared_ptr) by every EagleHead made from them, each with its own KV cache and scratch.
class EagleHeadWeights {
 public:
  // `path`: a folder with config.json and model.safetensors or pytorch_model.bin (safetensors
  // preferred when both are there), or such a file (.safetensors; .bin/.pt/.pth for torch.save)
  // with config.json beside it. Throws naming the file and field if the head does not fit
  // `verifier`. check_finite: refuse NaN/Inf weights at load, naming the tensor (off only in
  // tests that feed NaN through the kernels on purpose).
  EagleHeadWeights(Context& ctx, const std::string& path, const LlamaConfig& verifier, bool check_finite = true);
  EagleHeadWeights(const EagleHeadWeights&) = delete;
  EagleHeadWeights& operator=(const EagleHeadWeights&) = delete;

  const HeadConfig& config() const { return cfg_; }
  const std::string& path() const { return path_; }  // the weights file
  const std::vector<uint32_t>& tap_points() const { return taps_; }  // EAGLE-3: eagle3_tap_points
  // Device bytes (the verifier's embedding and lm_head, which the head reads, are not counted).
  uint64_t bytes() const;
  // Every weight matrix of the head, by role in a fixed order (fc, qkv, o, gate|up, down, EAGLE-3's
  // lm_head and embedding; a role the head lacks has no chunks): two heads' lists pair up (PairPack).
  std::vector<const DeviceWeight*> device_weights() const { return {&fc_, &wqkv_, &wo_, &wgu_, &wdown_, &lm_head_, &embd_}; }

 private:
  friend class EagleHead;
  HeadConfig cfg_;
  std::string path_;
  std::vector<uint32_t> taps_;
  DeviceWeight fc_, wqkv_, wo_, wgu_, wdown_;
  Buffer fc_bias_, post_norm_;
  Buffer qkv_bias_, o_bias_, gu_bias_, down_bias_;  // HeadConfig::attention_bias / mlp_bias; else empty
  Buffer rope_divisors_;  // (D/2) f32: rope_scaling llama3's (HeadConfig), empty otherwise
  // EAGLE-3: the norms, the lm_head expanded to the verifier's vocabulary (row i + d2t[i] =
  // draft row i, other rows zero) with a bias of 0 on draft ids and -inf elsewhere, and the
  // head's own embedding when it ships one.
  DeviceWeight lm_head_, embd_;
  Buffer in_norm_, hid_norm_, out_norm_, vocab_bias_;
  bool own_embd_ = false;
  void load_eagle3(Context& ctx, const HeadTensors& f, const LlamaConfig& verifier);
};

// The device bytes of one head state (K and V cache, activation buffers) for `capacity` tokens
// and `max_rows` rows per pass: what EagleHead allocates, byte for byte.
StateBytes head_state_bytes(const HeadConfig& c, uint32_t capacity, uint32_t max_rows, KvType kv_type);
// A head's device bytes before it is loaded, from its files: the weights (the weight file's size:
// they stay f16 or f32 on the device, bf16 becoming f16; for EAGLE-3 plus the lm_head's expansion
// to the verifier's vocabulary and its bias) and one state's. Throws naming the file
// when the weights or config.json cannot be read.
// tap_points: how many verifier tap rows an EAGLE-3 head reads (0 otherwise), whose buffer is the
// verifier state's scratch (llama_tap_bytes), not the head's.
struct HeadBytes {
  uint64_t weights = 0;
  StateBytes state;
  uint32_t tap_points = 0;
};
HeadBytes estimate_head_bytes(const std::string& path, uint32_t capacity, uint32_t max_rows, KvType kv_type);

// One generation's head: shared weights, its own KV cache and scratch. Reads the verifier's
// embedding and lm_head through `verifier`, which must outlive it.
class EagleHead {
 public:
  // Uploads weights of its own (EagleHeadWeights' `path` and `check_finite`) and makes the state.
  EagleHead(Context& ctx, const std::string& path, const LlamaModel& verifier, uint32_t capacity, uint32_t max_rows,
            bool check_finite = true);
  // A new state over weights already on the device. Throws if they do not fit `verifier`.
  EagleHead(std::shared_ptr<const EagleHeadWeights> weights, const LlamaModel& verifier, uint32_t capacity,
            uint32_t max_rows);

  // Scalars that change from step to step are Dyn (ops.hpp): a step recorded once reads them from
  // the step state on the GPU.
  struct ForwardArgs {
    uint32_t N = 1;
    Dyn t;        // committed head KV length (keys [0, t) are visible)
    Dyn kv_slot;  // rows write K/V at slots kv_slot + r (== t for a causal chain)
    const Buffer* tokens = nullptr;  // u32 ids at tok_offset: token_{t+1} of each pair
    Dyn tok_offset;
    Mat features;  // (N, C) verifier features f_t (or the head's own h when drafting deeper)
    // EAGLE-3: `features` are the verifier's tap rows (N, 3·Ct), which go through fc; otherwise
    // they are the head's own fed-back outputs (N, C). EAGLE-1/2 heads ignore it.
    bool taps = false;
    // Positions: pos[pos_offset + r] from a table, or else pos_first + pos_step * r.
    const Buffer* pos = nullptr;
    uint32_t pos_offset = 0;
    Dyn pos_first;
    uint32_t pos_step = 1;
    const Buffer* mask = nullptr;  // ancestor bits relative to slot t; nullptr: causal chain
    uint32_t mask_offset = 0, mask_words = 0;
    // Logits for rows logits_from..N-1 (none when logits_from >= N) — or, with `root`, only for
    // row root_row, whose h goes to the root slot (row root_slot() of hidden() and logits(),
    // which later forwards of up to max_rows rows leave alone): the draft's root when the row
    // depends on the last step's accepted length. A causal forward wanted for one row or none
    // (`root`, or no logits) computes only that row's h: the other rows write their K/V, and
    // their hidden() rows hold the layer's input, not h.
    uint32_t logits_from = 0;
    bool root = false;
    Dyn root_row;
    Dyn root_t;  // with `root`: t + root_row, the committed keys the root row sees before itself
    // EAGLE-1/2: the tokens' embeddings are already in token_input() (rows 0..N-1), written by
    // the draft level before (draft_topk_expand's gather): no embedding gather of its own.
    bool embedded = false;
  };
  void forward(Sequence& seq, const ForwardArgs& a);
  // (max_rows + 1, C) head output h (EAGLE-3: before its final norm: what is fed back). It is the
  // residual stream itself: valid until the next forward starts.
  Mat hidden() const { return {&x_, 0, pad4(uint32_t(config().C))}; }
  // Where an EAGLE-1/2 forward reads its features: a caller that writes them here (rows 0..N-1)
  // and passes this Mat as ForwardArgs::features saves the forward's copy. EAGLE-3: none (buf null).
  Mat feature_input() const {
    const uint32_t C = uint32_t(config().C);
    return eagle3() ? Mat{} : Mat{&cat_, C, pad4(2 * C)};
  }
  // And where it reads the tokens' embeddings (EAGLE-1/2; EAGLE-3: none): the same rows, columns
  // 0..C-1, as the EAGLE reference concatenates them.
  Mat token_input() const {
    const uint32_t C = uint32_t(config().C);
    return eagle3() ? Mat{} : Mat{&cat_, 0, pad4(2 * C)};
  }
  const DeviceWeight& token_embedding() const;  // the table token_input() rows come from
  // (max_rows + 1, V) over the verifier's vocabulary; an EAGLE-3 head's ids outside its draft
  // vocabulary are -inf (probability 0).
  Mat logits() const { return {&logits_, 0, pad4(uint32_t(config().V))}; }
  bool eagle3() const { return config().eagle3; }
  const std::vector<uint32_t>& tap_points() const { return w_->tap_points(); }  // EAGLE-3: eagle3_tap_points
  uint32_t root_slot() const { return max_rows_; }
  const HeadConfig& config() const { return w_->config(); }
  const std::string& path() const { return w_->path(); }
  const std::shared_ptr<const EagleHeadWeights>& weights() const { return w_; }
  uint32_t capacity() const { return cap_; }
  uint32_t max_rows() const { return max_rows_; }
  KvType kv_type() const { return kv_type_; }
  // Device bytes: the (shared) weights, the K and V cache, the activation buffers.
  uint64_t weight_bytes() const { return w_->bytes(); }
  uint64_t kv_bytes() const { return k_.size() + v_.size(); }
  uint64_t scratch_bytes() const;

 private:
  std::shared_ptr<const EagleHeadWeights> w_;
  const LlamaModel& verifier_;
  uint32_t cap_, max_rows_;
  KvType kv_type_ = KvType::F16;
  Buffer k_, v_;
  void layer(Sequence& seq, const ForwardArgs& a, Mat attn_in);
  Buffer cat_, x_, qkv_, attn_, xn_, gu_, act_, logits_;
  Buffer o_part_, o_arrivals_;  // where attention carries W_o (decoder_layer.hpp)
  std::vector<VkBufferCopy> regions_;
};

}  // namespace vkspec
