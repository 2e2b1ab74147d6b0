// Llama hyperparameters from GGUF keys and tensor-shape validation.
#include "vkspec/model_config.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <unordered_set>

namespace vkspec {

// ---- range checks shared by the verifier's and the heads' readers ------------------------------

namespace {
std::string number_str(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}
}  // namespace

int check_positive_int(int64_t v, int64_t max, const std::string& where) {
  if (v < 1 || v > max)
    throw Error(where + ": expected a positive integer up to " + std::to_string(max) + ", found " + std::to_string(v));
  return int(v);
}

float check_rms_eps(double v, const std::string& where) {
  // As a float, since that is what the kernels add: 1e-50 would be 0 there.
  const float f = float(v);
  if (!(f > 0.0f && f < 1.0f))
    throw Error(where + ": expected a small positive number (0 < eps < 1), found " + number_str(v));
  return f;
}

float check_rope_theta(double v, const std::string& where) {
  const float f = float(v);
  if (!(f > 0.0f)) throw Error(where + ": expected a positive number (the RoPE base), found " + number_str(v));
  if (!std::isfinite(f)) throw Error(where + ": expected a finite number that fits a float, found " + number_str(v));
  return f;
}

std::string blk_name(int layer, const char* suffix) {
  return "blk." + std::to_string(layer) + "." + suffix;
}

namespace {
// YaRN's ramp ends: the pair index that turns `turns` times over the original context n_ctx,
// solved from n_ctx = 2π · turns · base^(2i/n_dims); in f32 as llama.cpp computes it, so the
// floor and ceil below land on the same pairs.
float yarn_pair(int n_dims, uint32_t n_ctx, float turns, float base) {
  return float(n_dims) * std::log(float(n_ctx) / (turns * 2.0f * 3.14159265358979323846f)) / (2.0f * std::log(base));
}
}  // namespace

std::vector<float> rope_divisors(const LlamaConfig& c, const std::vector<float>& file_factors) {
  const size_t pairs = size_t(c.D) / 2;
  std::vector<float> d(pairs, 1.0f);
  for (size_t i = 0; i < pairs && i < file_factors.size(); ++i) d[i] = file_factors[i];
  if (c.rope_yarn && c.rope_freq_scale != 1.0f) {
    const float beta_fast = 32.0f, beta_slow = 1.0f;  // llama.cpp's defaults for these architectures
    const uint32_t n_ctx = c.rope_orig_ctx ? c.rope_orig_ctx : uint32_t(c.ctx);
    const float low = std::max(0.0f, std::floor(yarn_pair(c.D, n_ctx, beta_fast, c.rope_theta)));
    const float high = std::min(float(c.D - 1), std::ceil(yarn_pair(c.D, n_ctx, beta_slow, c.rope_theta)));
    const double fs = c.rope_freq_scale;
    for (size_t i = 0; i < pairs; ++i) {
      // mix 1: the pair keeps its angle (extrapolated); mix 0: scaled by fs like linear scaling.
      const float y = (float(i) - low) / std::max(0.001f, high - low);
      const double mix = 1.0 - std::min(1.0f, std::max(0.0f, y));
      // angle · (fs(1 − mix) + mix) = angle / divisor · fs
      d[i] = float(double(d[i]) * fs / (fs * (1.0 - mix) + mix));
    }
  }
  for (float v : d)
    if (v != 1.0f) return d;
  return {};
}

bool rope_uses_long_factors(const LlamaConfig& c, uint32_t context) {
  return c.rope_longrope && context > (c.rope_orig_ctx ? c.rope_orig_ctx : uint32_t(c.ctx));
}

float rope_logit_gain(const LlamaConfig& c) {
  float m = c.rope_attn_factor;
  if (c.rope_yarn && c.rope_freq_scale < 1.0f) m *= 1.0f + 0.1f * std::log(1.0f / c.rope_freq_scale);
  return m * m;
}

namespace {

int positive_int(const GgufFile& f, const std::string& key, uint32_t v) {
  return check_positive_int(v, std::numeric_limits<int>::max(), f.path() + ": metadata key '" + key + "'");
}

std::string shape(std::initializer_list<uint64_t> dims) {
  std::string s = "[";
  size_t i = 0;
  for (uint64_t d : dims) s += (i++ ? ", " : "") + std::to_string(d);
  return s + "]";
}

// GGUF dims are innermost first: a weight W (out, in) used as y = W x has dims [in, out].
// Trailing 1s are allowed (some writers store [C, 1] for a vector).
void expect_shape(const GgufFile& f, const GgufTensor& t, std::initializer_list<uint64_t> want) {
  bool ok = t.dims.size() >= want.size();
  size_t i = 0;
  for (uint64_t d : want) ok = ok && t.dims[i++] == d;
  for (; ok && i < t.dims.size(); ++i) ok = t.dims[i] == 1;
  if (!ok)
    f.fail("tensor '" + std::string(t.name) + "': expected shape " + shape(want) +
           " from the metadata, found " + t.shape_str());
}

}  // namespace

// ---- architectures -----------------------------------------------------------------------------

namespace {

// What each architecture asks of the one decoder (llama.cpp's llama_model_rope_type and its
// build_* functions for these names). Anything else is refused by name.
struct ArchTraits {
  const char* name;
  bool neox;         // rotate-half RoPE: llama.cpp's converter permutes q/k rows only for llama-family files
  bool qk_norm;      // attn_q_norm / attn_k_norm in every layer
  bool fused;        // attn_qkv and ffn_up = gate|up instead of attn_q/k/v and ffn_gate + ffn_up
  bool bias_allowed; // attn_{q,k,v}.bias may be present (all or none)
};
constexpr ArchTraits kArchs[] = {
    {"llama", false, false, false, true},
    {"mistral", false, false, false, true},
    {"internlm2", false, false, false, true},  // converted by llama.cpp into llama's layout
    {"qwen2", true, false, false, true},
    {"qwen3", true, true, false, false},
    {"phi3", true, false, true, false},
};

const ArchTraits* find_arch(const std::string& name) {
  for (const ArchTraits& a : kArchs)
    if (name == a.name) return &a;
  return nullptr;
}

// `<arch>.` keys this decoder reads (the rest of the file's `<arch>.*` keys are refused).
constexpr const char* kKnownKeys[] = {
    "context_length", "embedding_length", "block_count", "feed_forward_length", "vocab_size",
    "attention.head_count", "attention.head_count_kv", "attention.key_length", "attention.value_length",
    "attention.layer_norm_rms_epsilon", "attention.sliding_window", "rope.dimension_count", "rope.freq_base",
    "rope.scaling.type", "rope.scaling.factor", "rope.scale_linear", "rope.scaling.attn_factor",
    // The context a scaled model was trained at (YaRN's ramp reads it; linear scaling does not),
    // and whether it was fine-tuned after scaling (descriptive only).
    "rope.scaling.original_context_length", "rope.scaling.finetuned",
    "expert_count", "expert_used_count",  // written as 0 by some dense-model converters
    // YaRN's own parameters: accepted only at the values computed (read_rope_scaling).
    "rope.scaling.yarn_beta_fast", "rope.scaling.yarn_beta_slow", "rope.scaling.yarn_ext_factor",
    "rope.scaling.yarn_attn_factor",
};

// Why a known-but-unimplemented key family is refused (the message names the key either way).
std::string unimplemented_key_reason(std::string_view sub) {
  if (sub.find("softcapping") != std::string_view::npos) return "logit softcapping is not implemented";
  if (sub.rfind("rope.scaling.", 0) == 0)
    return "this RoPE scaling parameter is not implemented (YaRN is computed with llama.cpp's defaults: beta_fast 32, "
           "beta_slow 1, ext_factor 1, attn_factor 1)";
  if (sub.rfind("ssm.", 0) == 0 || sub.rfind("wkv.", 0) == 0) return "recurrent layers are not implemented";
  return "vkspec's decoder does not implement what it asks for and would compute another model";
}

// The RoPE scaling keys: linear scaling (llama.cpp's default type), none, YaRN, and LongRoPE (its
// factor tables are tensors, checked with the others); any other type is refused. As llama.cpp
// does, every type but "none" applies the factor, and "none" never scales.
void read_rope_scaling(const GgufFile& f, const std::string& p, LlamaConfig& c) {
  const std::string type_key = p + "rope.scaling.type";
  const std::string type(f.get_string(type_key, "linear"));
  if (type != "linear" && type != "none" && type != "yarn" && type != "longrope")
    f.fail("metadata key '" + type_key + "': RoPE scaling '" + type +
           "' is not implemented (vkspec computes 'linear', 'none', 'yarn' and 'longrope' scaling, and Llama 3 "
           "frequency factors from rope_freqs.weight)");
  c.rope_yarn = type == "yarn";
  std::string factor_key = p + "rope.scaling.factor";
  if (!f.has(factor_key) && f.has(p + "rope.scale_linear")) factor_key = p + "rope.scale_linear";  // older name
  float factor = 0.0f;
  if (f.has(factor_key)) {
    factor = f.get_f32(factor_key);
    // 0 means "unset" to llama.cpp (scale 1); negative, NaN or Inf is no factor at all.
    // (A factor so small that its inverse overflows is no scale either.)
    if (!(factor >= 0.0f) || !std::isfinite(factor) || (factor != 0.0f && !std::isfinite(1.0f / factor)))
      f.fail("metadata key '" + factor_key + "': expected a positive RoPE scaling factor, found " + number_str(factor));
    c.rope_freq_scale = factor == 0.0f || type == "none" ? 1.0f : 1.0f / factor;
  }
  // YaRN compresses a longer context into the trained one: a factor below 1 stretches it, where
  // llama.cpp's versions disagree on the magnitude (1 + 0.1 ln(factor) or 1), so it is refused.
  if (c.rope_yarn && factor != 0.0f && factor < 1.0f)
    f.fail("metadata key '" + factor_key + "': YaRN with a factor of " + number_str(factor) +
           " (below 1) is not implemented");
  // YaRN's own parameters. llama.cpp's loader reads them for a few other architectures only, so
  // for these it computes with its defaults whatever the file says; a file that states exactly
  // those values (newer converters copy them from the model's config) is computed, any other
  // value is refused, since the model was trained with it. ext_factor is the ramp's weight: 1
  // under YaRN, 0 (no ramp) otherwise.
  const struct {
    const char* key;
    float value;
  } yarn_defaults[] = {{"rope.scaling.yarn_beta_fast", 32.0f},
                       {"rope.scaling.yarn_beta_slow", 1.0f},
                       {"rope.scaling.yarn_ext_factor", c.rope_yarn ? 1.0f : 0.0f},
                       {"rope.scaling.yarn_attn_factor", 1.0f}};
  // What the file asks for, as the refusal names it (no type key and no factor: no scaling at all).
  const std::string asked = c.rope_yarn                                        ? "YaRN"
                            : !f.has(type_key) && !f.has(factor_key)           ? "this file's unscaled RoPE"
                                                                               : "'" + type + "' scaling";
  for (const auto& [sub, value] : yarn_defaults) {
    const std::string key = p + sub;
    if (!f.has(key)) continue;
    const float v = f.get_f32(key);
    if (v != value)
      f.fail("metadata key '" + key + "': " + number_str(v) + " is not implemented (vkspec computes " + asked + " with " +
             number_str(value) + ", llama.cpp's value here)");
  }
  const std::string orig_key = p + "rope.scaling.original_context_length";
  if (f.has(orig_key)) c.rope_orig_ctx = uint32_t(positive_int(f, orig_key, f.get_u32(orig_key)));
  const std::string attn_key = p + "rope.scaling.attn_factor";
  if (f.has(attn_key)) {
    const float a = f.get_f32(attn_key);
    if (!(a > 0.0f) || !std::isfinite(a))
      f.fail("metadata key '" + attn_key + "': expected a positive RoPE attention factor, found " + number_str(a));
    c.rope_attn_factor = a;
  }
  // The logits' gain (attn_factor and YaRN's magnitude, squared) must be a float the kernels can use.
  if (const float g = rope_logit_gain(c); !(g > 0.0f) || !std::isfinite(g))
    f.fail("metadata key '" + attn_key + "': a RoPE attention factor of " + number_str(c.rope_attn_factor) +
           " makes the attention logits' gain " + number_str(g) + " (not a positive finite float)");
  for (const char* k : {"expert_count", "expert_used_count"})
    if (f.has(p + k) && f.get_u32(p + k) != 0)
      f.fail("metadata key '" + p + k + "': mixture-of-experts layers are not implemented");
}

// Every `<arch>.*` key must be one the decoder reads; an unknown one would be silently ignored.
void refuse_unknown_keys(const GgufFile& f, const std::string& p) {
  for (const auto& [key, value] : f.metadata()) {
    if (key.rfind(p, 0) != 0) continue;
    const std::string_view sub = key.substr(p.size());
    bool known = false;
    for (const char* k : kKnownKeys) known = known || sub == k;
    if (!known) f.fail("metadata key '" + std::string(key) + "': " + unimplemented_key_reason(sub));
  }
}

}  // namespace

bool apply_arch_traits(LlamaConfig& c) {
  const ArchTraits* a = find_arch(c.arch);
  if (!a) return false;
  c.rope_neox = a->neox;
  c.qk_norm = a->qk_norm;
  c.fused_qkv = c.fused_gate_up = a->fused;
  if (!a->bias_allowed) c.qkv_bias = false;
  return true;
}

LlamaConfig read_llama_config(const GgufFile& f) {
  LlamaConfig c;
  c.arch = std::string(f.get_string("general.architecture"));
  if (!apply_arch_traits(c))
    f.fail("metadata key 'general.architecture': '" + c.arch +
           "' is not implemented (vkspec runs llama, mistral, qwen2, qwen3, phi3, internlm2)");

  const std::string p = c.arch + ".";
  refuse_unknown_keys(f, p);
  auto req = [&](const char* k) { return positive_int(f, p + k, f.get_u32(p + k)); };
  c.C = req("embedding_length");
  c.L = req("block_count");
  c.F = req("feed_forward_length");
  c.H = req("attention.head_count");
  c.ctx = req("context_length");
  c.Hkv = positive_int(f, p + "attention.head_count_kv", f.get_u32(p + "attention.head_count_kv", uint32_t(c.H)));
  if (c.H % c.Hkv != 0)
    f.fail("metadata key '" + p + "attention.head_count_kv': " + std::to_string(c.Hkv) +
           " must divide attention.head_count " + std::to_string(c.H) + " (GQA groups)");
  if (f.has(p + "attention.key_length")) {
    c.D = positive_int(f, p + "attention.key_length", f.get_u32(p + "attention.key_length"));
  } else {
    if (c.C % c.H != 0)
      f.fail("metadata key '" + p + "embedding_length': " + std::to_string(c.C) +
             " is not divisible by attention.head_count " + std::to_string(c.H));
    c.D = c.C / c.H;
  }
  if (f.has(p + "attention.value_length") && f.get_u32(p + "attention.value_length") != uint32_t(c.D))
    f.fail("metadata key '" + p + "attention.value_length': expected " + std::to_string(c.D) +
           " (same as the key length), found " + std::to_string(f.get_u32(p + "attention.value_length")));
  if (c.D % 2 != 0) f.fail("head width D = " + std::to_string(c.D) + " must be even for RoPE");
  // We rotate the whole head; partial rotary (rope.dimension_count < D) is another model family.
  const uint32_t rot = f.get_u32(p + "rope.dimension_count", uint32_t(c.D));
  if (rot != uint32_t(c.D))
    f.fail("metadata key '" + p + "rope.dimension_count': expected " + std::to_string(c.D) +
           " (the head width; partial rotary is not supported), found " + std::to_string(rot));
  c.rope_theta = check_rope_theta(f.get_f32(p + "rope.freq_base", 10000.0f),
                                  f.path() + ": metadata key '" + p + "rope.freq_base'");
  read_rope_scaling(f, p, c);
  c.rms_eps = check_rms_eps(f.get_f32(p + "attention.layer_norm_rms_epsilon"),
                            f.path() + ": metadata key '" + p + "attention.layer_norm_rms_epsilon'");
  c.sliding_window = f.get_u32(p + "attention.sliding_window", 0);

  // Vocab size: explicit key, else the embedding's rows, else the tokenizer's token list.
  const GgufTensor& emb = f.require_tensor("token_embd.weight");
  std::string v_source;
  if (f.has(p + "vocab_size")) {
    c.V = positive_int(f, p + "vocab_size", f.get_u32(p + "vocab_size"));
    v_source = p + "vocab_size";
  } else if (emb.dims.size() >= 2) {
    c.V = positive_int(f, "token_embd.weight dims[1]", uint32_t(std::min<uint64_t>(emb.dims[1], uint64_t(1) << 31)));
    v_source = "token_embd.weight rows";
  } else if (f.has("tokenizer.ggml.tokens")) {
    const uint64_t n = f.get_array("tokenizer.ggml.tokens", GgufType::STRING).count;
    c.V = positive_int(f, "tokenizer.ggml.tokens", n > uint64_t(std::numeric_limits<int>::max()) ? 0 : uint32_t(n));
    v_source = "tokenizer.ggml.tokens";
  } else {
    f.fail("cannot determine the vocab size: no '" + p + "vocab_size', no 'tokenizer.ggml.tokens', and "
           "token_embd.weight is 1-D " + emb.shape_str());
  }

  // The tokenizer's ids index the embedding's rows: a vocabulary of another size would decode
  // ids to the wrong text, or sample ids the tokenizer does not have. Checked here, where the
  // model is read, so every caller that pairs the file's tokenizer with its model is covered.
  // (A tokens key of another type is left to the tokenizer's own reader.)
  if (const GgufValue* toks = f.find("tokenizer.ggml.tokens");
      toks && toks->type == GgufType::ARRAY && toks->elem_type == GgufType::STRING && toks->count != uint64_t(c.V))
    f.fail("metadata key 'tokenizer.ggml.tokens': the tokenizer has " + std::to_string(toks->count) +
           " tokens, but the model's vocabulary (" + v_source + ") has " + std::to_string(c.V) +
           ": token ids would not match embedding rows");

  const uint64_t C = uint64_t(c.C), F = uint64_t(c.F), V = uint64_t(c.V), D = uint64_t(c.D);
  const uint64_t QD = uint64_t(c.H) * D, KVD = uint64_t(c.Hkv) * D;
  // The forward sizes its rows in 32-bit ints (q|k|v rows, gate|up rows): keep them exact.
  constexpr uint64_t kMaxRow = uint64_t(std::numeric_limits<int32_t>::max());
  if (QD + 2 * KVD > kMaxRow || 2 * F > kMaxRow)
    f.fail("rows too wide: H*D + 2*Hkv*D = " + std::to_string(QD + 2 * KVD) + " and 2*F = " + std::to_string(2 * F) +
           " must each be at most " + std::to_string(kMaxRow));
  // Every tensor of the file must be one this decoder reads: llama.cpp refuses a file with
  // tensors its architecture does not create, and an unread tensor (an output bias, a post-norm)
  // would mean computing a different model.
  std::unordered_set<std::string> used = {"token_embd.weight", "output_norm.weight", "output.weight", "rope_freqs.weight"};
  expect_shape(f, emb, {C, V});
  expect_shape(f, f.require_tensor("output_norm.weight"), {C});
  if (const GgufTensor* out = f.tensor("output.weight")) {
    expect_shape(f, *out, {C, V});
    c.tied_output = false;
  }
  if (const GgufTensor* rf = f.tensor("rope_freqs.weight")) {
    expect_shape(f, *rf, {D / 2});
    c.rope_freqs = true;
  }
  // Phi-3's LongRoPE: two tables of frequency factors, one chosen by the context (rope_divisors'
  // caller); the pair, and only in a Phi-3 file, as llama.cpp loads them.
  const GgufTensor* rl = f.tensor("rope_factors_long.weight");
  const GgufTensor* rs = f.tensor("rope_factors_short.weight");
  if (rl || rs) {
    if (c.arch != "phi3")
      f.fail("tensor '" + std::string(rl ? "rope_factors_long.weight" : "rope_factors_short.weight") +
             "' is not part of vkspec's " + c.arch + " decoder (LongRoPE factors are read in phi3 files only)");
    if (!rl || !rs)
      f.fail(std::string("tensor '") + (rl ? "rope_factors_short.weight" : "rope_factors_long.weight") +
             "': missing (LongRoPE needs both the long and the short factors)");
    if (c.rope_freqs) f.fail("tensor 'rope_freqs.weight': not expected beside LongRoPE's rope_factors_long/short");
    expect_shape(f, *rl, {D / 2});
    expect_shape(f, *rs, {D / 2});
    c.rope_longrope = true;
    used.insert("rope_factors_long.weight");
    used.insert("rope_factors_short.weight");
  }
  if (f.get_string(p + "rope.scaling.type", "linear") == "longrope" && !c.rope_longrope)
    f.fail("metadata key '" + p + "rope.scaling.type': 'longrope' without its factor tensors "
           "(rope_factors_long.weight, rope_factors_short.weight)");
  const bool bias_allowed = find_arch(c.arch)->bias_allowed;
  c.qkv_bias = bias_allowed && f.tensor(blk_name(0, "attn_q.bias")) != nullptr;
  for (int l = 0; l < c.L; ++l) {
    auto t = [&](const char* s) -> const GgufTensor& {
      const std::string name = blk_name(l, s);
      used.insert(name);
      return f.require_tensor(name);
    };
    expect_shape(f, t("attn_norm.weight"), {C});
    if (c.fused_qkv) {
      expect_shape(f, t("attn_qkv.weight"), {C, QD + 2 * KVD});
    } else {
      expect_shape(f, t("attn_q.weight"), {C, QD});
      expect_shape(f, t("attn_k.weight"), {C, KVD});
      expect_shape(f, t("attn_v.weight"), {C, KVD});
    }
    if (c.qk_norm) {
      expect_shape(f, t("attn_q_norm.weight"), {D});
      expect_shape(f, t("attn_k_norm.weight"), {D});
    }
    expect_shape(f, t("attn_output.weight"), {QD, C});
    expect_shape(f, t("ffn_norm.weight"), {C});
    if (c.fused_gate_up) {
      expect_shape(f, t("ffn_up.weight"), {C, 2 * F});
    } else {
      expect_shape(f, t("ffn_gate.weight"), {C, F});
      expect_shape(f, t("ffn_up.weight"), {C, F});
    }
    expect_shape(f, t("ffn_down.weight"), {F, C});
    // Biases come as a set: all three or none, in every layer.
    const char* bias[] = {"attn_q.bias", "attn_k.bias", "attn_v.bias"};
    const uint64_t bias_len[] = {QD, KVD, KVD};
    for (int b = 0; b < 3 && bias_allowed; ++b) {
      const GgufTensor* bt = f.tensor(blk_name(l, bias[b]));
      if ((bt != nullptr) != c.qkv_bias)
        f.fail("tensor '" + blk_name(l, bias[b]) + "': " + (c.qkv_bias ? "missing" : "unexpected") +
               " (q/k/v biases must be present in every layer or in none; blk.0.attn_q.bias is " +
               (c.qkv_bias ? "present)" : "absent)"));
      if (bt) {
        expect_shape(f, *bt, {bias_len[b]});
        used.insert(blk_name(l, bias[b]));
      }
    }
  }
  for (const GgufTensor& t : f.tensors())
    if (!used.count(std::string(t.name)))
      f.fail("tensor '" + std::string(t.name) + "' is not part of vkspec's " + c.arch + " decoder" +
             " (it would be ignored, computing another model)");
  return c;
}

}  // namespace vkspec
