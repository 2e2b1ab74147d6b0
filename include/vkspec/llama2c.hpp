// Conversion of Karpathy's llama2.c checkpoints (legacy "version 0" export) to GGUF.
//
// llama2.c layout: 7 int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size,
// seq_len; a negative vocab_size means the classifier is not shared with the embedding), then
// f32 arrays: token_embedding (V, C), rms_att (L, C), wq (L, C, C), wk (L, Hkv*D, C),
// wv (L, Hkv*D, C), wo (L, C, C), rms_ffn (L, C), w1 (L, F, C), w2 (L, C, F), w3 (L, F, C),
// rms_final (C), freq_cis_real (seq, D/2), freq_cis_imag (seq, D/2), [wcls (V, C)].
#pragma once

#include <string>

#include "vkspec/gguf.hpp"
#include "vkspec/gguf_writer.hpp"
#include "vkspec/model_config.hpp"

namespace vkspec {

// Reads and validates a llama2.c checkpoint and returns a writer holding the GGUF model:
// matrices stored as `wtype` (norms stay f32), a placeholder vocab (llama2.c keeps its
// tokenizer in a separate file), rms eps 1e-5, rope theta 10000. q/k rows are copied as they
// are: llama2.c rotates consecutive pairs (2i, 2i+1), the same convention llama.cpp applies to
// GGUF "llama" models. *cfg_out receives the model's configuration.
GgufWriter llama2c_to_gguf(const std::string& path, GgmlType wtype = GgmlType::F32, LlamaConfig* cfg_out = nullptr);

// Convenience: convert `in` and write the GGUF file `out`.
LlamaConfig convert_llama2c_file(const std::string& in, const std::string& out, GgmlType wtype = GgmlType::F32);

}  // namespace vkspec
