// GGUF v3 writer: spec-exact files (tensors packed in order, each padded with zeros to the
// alignment, data section aligned) that llama.cpp loads. Used by tests to make small models
// and by the llama2.c converter.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "vkspec/gguf.hpp"
#include "vkspec/model_config.hpp"

namespace vkspec {

class GgufWriter {
 public:
  explicit GgufWriter(uint32_t alignment = 32);

  // Metadata, written in the order added. Adding a key twice replaces the earlier value.
  void add_u8(const std::string& key, uint8_t v);
  void add_i8(const std::string& key, int8_t v);
  void add_u16(const std::string& key, uint16_t v);
  void add_i16(const std::string& key, int16_t v);
  void add_u32(const std::string& key, uint32_t v);
  void add_i32(const std::string& key, int32_t v);
  void add_u64(const std::string& key, uint64_t v);
  void add_i64(const std::string& key, int64_t v);
  void add_f32(const std::string& key, float v);
  void add_f64(const std::string& key, double v);
  void add_bool(const std::string& key, bool v);
  void add_string(const std::string& key, const std::string& v);
  void add_array_i32(const std::string& key, std::span<const int32_t> v);
  void add_array_u32(const std::string& key, std::span<const uint32_t> v);
  void add_array_f32(const std::string& key, std::span<const float> v);
  void add_array_string(const std::string& key, const std::vector<std::string>& v);
  // Copy any value read by GgufFile (including nested arrays) — for round trips and for
  // carrying a tokenizer over to a new file.
  void add_value(const std::string& key, const GgufValue& v);
  // Raw escape hatch for tests: the exact value bytes that follow the type field.
  void add_raw(const std::string& key, GgufType type, std::vector<uint8_t> value_bytes);
  void remove(const std::string& key);

  // Tensors. dims are innermost first (dims[0] = row length). `data` is already encoded in
  // `type` and must have exactly the size the shape and type imply.
  void add_tensor(const std::string& name, std::vector<uint64_t> dims, GgmlType type, std::vector<uint8_t> data);
  // Encode f32 values as `type` (f32, f16, bf16, q8_0, q4_0) then add.
  void add_tensor_f32(const std::string& name, std::vector<uint64_t> dims, std::span<const float> values,
                      GgmlType type = GgmlType::F32);

  std::vector<uint8_t> to_bytes() const;
  void write(const std::string& path) const;  // throws vkspec::Error naming the path

 private:
  struct Kv {
    std::string key;
    GgufType type;
    std::vector<uint8_t> bytes;  // encoded value, after the type field
  };
  struct Tensor {
    std::string name;
    std::vector<uint64_t> dims;
    GgmlType type;
    std::vector<uint8_t> data;
  };
  void put(const std::string& key, GgufType type, std::vector<uint8_t> bytes);
  uint32_t alignment_;
  std::vector<Kv> kv_;
  std::vector<Tensor> tensors_;
};

// Encode f32 values in a ggml type (q8_0/q4_0 need a multiple of 32 values).
std::vector<uint8_t> encode_f32_as(std::span<const float> values, GgmlType type);

// The standard Llama metadata for `cfg` (architecture keys, no tokenizer).
void add_llama_metadata(GgufWriter& w, const LlamaConfig& cfg, const std::string& name);

// A placeholder SentencePiece vocab of V tokens so llama.cpp accepts the file: <unk> <s> </s>,
// then byte tokens <0x00>.. as far as V allows, then unused "<unused_N>" pieces. Ids 0..258
// match llama2.c's and Llama 2's SentencePiece layout.
void add_placeholder_llama_vocab(GgufWriter& w, int V);

// A random Llama model with the given shape: weights ~ U(-a, a) with a = 1/sqrt(fan_in) (norm
// weights around 1), stored as `wtype` (norms always f32). cfg.arch names the architecture and
// brings its tensors (apply_arch_traits: fused qkv and gate|up for phi3, q/k norms for qwen3);
// cfg.tied_output, cfg.qkv_bias, cfg.rope_freqs (random factors in 1..9), cfg.rope_freq_scale
// (the linear scaling keys, or YaRN's with cfg.rope_yarn, cfg.rope_orig_ctx), cfg.rope_longrope
// (Phi-3's two factor tables), cfg.rope_attn_factor
// and cfg.sliding_window select the optional tensors and keys.
GgufWriter random_llama(const LlamaConfig& cfg, uint64_t seed, GgmlType wtype);
void write_random_llama(const std::string& path, const LlamaConfig& cfg, uint64_t seed, GgmlType wtype);

}  // namespace vkspec
