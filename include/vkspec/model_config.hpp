// Llama-family hyperparameters from GGUF metadata, and the check that every tensor has the shape
// they imply. Dimension glossary: C model width, L layers, H/Hkv query/kv heads, D head width,
// F feed-forward width, V vocab, ctx training context.
#pragma once

#include <string>

#include "vkspec/gguf.hpp"

namespace vkspec {

struct LlamaConfig {
  int C = 0, L = 0, H = 0, Hkv = 0, D = 0, F = 0, V = 0, ctx = 0;
  float rope_theta = 10000.0f;
  float rms_eps = 1e-5f;
  bool tied_output = true;  // no output.weight: logits use token_embd.weight
  bool qkv_bias = false;    // Qwen2-style attn_{q,k,v}.bias present
  std::string arch = "llama";
};

// Reads `general.architecture` (llama, qwen2 and a few Llama-shaped relatives) and the
// `<arch>.*` keys, then validates every tensor's shape and presence. Throws vkspec::Error naming
// the file and the key or tensor (with expected and found shapes).
LlamaConfig read_llama_config(const GgufFile& f);

// Range checks shared by every reader of hyperparameters (the verifier's GGUF metadata, a draft
// head's config.json). `where` names the file and the key ("<file>: metadata key 'x'"); each
// returns the value as the runtime uses it or throws vkspec::Error "<where>: expected ..., found ...".
int check_positive_int(int64_t v, int64_t max, const std::string& where);
float check_rms_eps(double v, const std::string& where);     // 0 < eps < 1 as a float
float check_rope_theta(double v, const std::string& where);  // positive and finite as a float

// The per-layer tensor name, e.g. blk_name(3, "attn_q.weight") == "blk.3.attn_q.weight".
std::string blk_name(int layer, const char* suffix);

}  // namespace vkspec
