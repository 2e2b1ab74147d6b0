// Llama hyperparameters from GGUF keys and tensor-shape validation.
#include "vkspec/model_config.hpp"

#include <cmath>
#include <cstdio>
#include <limits>

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

LlamaConfig read_llama_config(const GgufFile& f) {
  LlamaConfig c;
  c.arch = std::string(f.get_string("general.architecture"));
  // Architectures whose tensors and math are the Llama decoder (optional qkv bias included).
  static const char* kLlamaLike[] = {"llama", "qwen2", "mistral", "internlm2"};
  bool known = false;
  for (const char* a : kLlamaLike) known = known || c.arch == a;
  if (!known)
    f.fail("metadata key 'general.architecture': expected a Llama-family architecture (llama, qwen2, "
           "mistral), found '" + c.arch + "'");

  const std::string p = c.arch + ".";
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
  c.rms_eps = check_rms_eps(f.get_f32(p + "attention.layer_norm_rms_epsilon"),
                            f.path() + ": metadata key '" + p + "attention.layer_norm_rms_epsilon'");

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

  const uint64_t C = uint64_t(c.C), F = uint64_t(c.F), V = uint64_t(c.V);
  const uint64_t QD = uint64_t(c.H) * uint64_t(c.D), KVD = uint64_t(c.Hkv) * uint64_t(c.D);
  // The forward sizes its rows in 32-bit ints (q|k|v rows, gate|up rows): keep them exact.
  constexpr uint64_t kMaxRow = uint64_t(std::numeric_limits<int32_t>::max());
  if (QD + 2 * KVD > kMaxRow || 2 * F > kMaxRow)
    f.fail("rows too wide: H*D + 2*Hkv*D = " + std::to_string(QD + 2 * KVD) + " and 2*F = " + std::to_string(2 * F) +
           " must each be at most " + std::to_string(kMaxRow));
  expect_shape(f, emb, {C, V});
  expect_shape(f, f.require_tensor("output_norm.weight"), {C});
  if (const GgufTensor* out = f.tensor("output.weight")) {
    expect_shape(f, *out, {C, V});
    c.tied_output = false;
  }
  c.qkv_bias = f.tensor(blk_name(0, "attn_q.bias")) != nullptr;
  for (int l = 0; l < c.L; ++l) {
    auto t = [&](const char* s) -> const GgufTensor& { return f.require_tensor(blk_name(l, s)); };
    expect_shape(f, t("attn_norm.weight"), {C});
    expect_shape(f, t("attn_q.weight"), {C, QD});
    expect_shape(f, t("attn_k.weight"), {C, KVD});
    expect_shape(f, t("attn_v.weight"), {C, KVD});
    expect_shape(f, t("attn_output.weight"), {QD, C});
    expect_shape(f, t("ffn_norm.weight"), {C});
    expect_shape(f, t("ffn_gate.weight"), {C, F});
    expect_shape(f, t("ffn_up.weight"), {C, F});
    expect_shape(f, t("ffn_down.weight"), {F, C});
    // Biases come as a set: all three or none, in every layer.
    const char* bias[] = {"attn_q.bias", "attn_k.bias", "attn_v.bias"};
    const uint64_t bias_len[] = {QD, KVD, KVD};
    for (int b = 0; b < 3; ++b) {
      const GgufTensor* bt = f.tensor(blk_name(l, bias[b]));
      if ((bt != nullptr) != c.qkv_bias)
        f.fail("tensor '" + blk_name(l, bias[b]) + "': " + (c.qkv_bias ? "missing" : "unexpected") +
               " (q/k/v biases must be present in every layer or in none; blk.0.attn_q.bias is " +
               (c.qkv_bias ? "present)" : "absent)"));
      if (bt) expect_shape(f, *bt, {bias_len[b]});
    }
  }
  return c;
}

}  // namespace vkspec
