// GGUF v3 writer and small-model generators. The layout written is the one the reader checks
// (include/vkspec/gguf.hpp); tensors are packed in insertion order, each starting at a multiple
// of the alignment, which is also what llama.cpp's loader insists on.
#include "vkspec/gguf_writer.hpp"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "vkspec/dtype.hpp"

namespace vkspec {

namespace {

template <class T>
void append(std::vector<uint8_t>& out, T v) {
  const size_t n = out.size();
  out.resize(n + sizeof(T));  // resize + memcpy: vector::insert trips a GCC 12 -Wstringop-overflow false positive
  std::memcpy(out.data() + n, &v, sizeof(T));
}

void append_string(std::vector<uint8_t>& out, std::string_view s) {
  append<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

template <class T>
std::vector<uint8_t> scalar(T v) {
  std::vector<uint8_t> out;
  append(out, v);
  return out;
}

void encode_value(std::vector<uint8_t>& out, const GgufValue& v);

void encode_array_body(std::vector<uint8_t>& out, const GgufValue& v) {
  append<uint32_t>(out, uint32_t(v.elem_type));
  append<uint64_t>(out, v.count);
  if (v.elem_type == GgufType::STRING) {
    for (auto s : v.strings) append_string(out, s);
  } else if (v.elem_type == GgufType::ARRAY) {
    for (const GgufValue& a : v.arrays) encode_array_body(out, a);
  } else {
    out.insert(out.end(), v.raw, v.raw + v.count * gguf_scalar_size(v.elem_type));
  }
}

void encode_value(std::vector<uint8_t>& out, const GgufValue& v) {
  switch (v.type) {
    case GgufType::U8: append<uint8_t>(out, uint8_t(v.u)); break;
    case GgufType::I8: append<int8_t>(out, int8_t(v.i)); break;
    case GgufType::U16: append<uint16_t>(out, uint16_t(v.u)); break;
    case GgufType::I16: append<int16_t>(out, int16_t(v.i)); break;
    case GgufType::U32: append<uint32_t>(out, uint32_t(v.u)); break;
    case GgufType::I32: append<int32_t>(out, int32_t(v.i)); break;
    case GgufType::U64: append<uint64_t>(out, v.u); break;
    case GgufType::I64: append<int64_t>(out, v.i); break;
    case GgufType::F32: append<float>(out, float(v.f)); break;
    case GgufType::F64: append<double>(out, v.f); break;
    case GgufType::BOOL: append<uint8_t>(out, v.u ? 1 : 0); break;
    case GgufType::STRING: append_string(out, v.str); break;
    case GgufType::ARRAY: encode_array_body(out, v); break;
  }
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    throw Error("GgufWriter: alignment must be a power of two, got " + std::to_string(alignment));
  if (alignment != 32) add_u32("general.alignment", alignment);
}

void GgufWriter::put(const std::string& key, GgufType type, std::vector<uint8_t> bytes) {
  for (Kv& kv : kv_)
    if (kv.key == key) {
      kv.type = type;
      kv.bytes = std::move(bytes);
      return;
    }
  kv_.push_back({key, type, std::move(bytes)});
}

void GgufWriter::add_u8(const std::string& k, uint8_t v) { put(k, GgufType::U8, scalar(v)); }
void GgufWriter::add_i8(const std::string& k, int8_t v) { put(k, GgufType::I8, scalar(v)); }
void GgufWriter::add_u16(const std::string& k, uint16_t v) { put(k, GgufType::U16, scalar(v)); }
void GgufWriter::add_i16(const std::string& k, int16_t v) { put(k, GgufType::I16, scalar(v)); }
void GgufWriter::add_u32(const std::string& k, uint32_t v) { put(k, GgufType::U32, scalar(v)); }
void GgufWriter::add_i32(const std::string& k, int32_t v) { put(k, GgufType::I32, scalar(v)); }
void GgufWriter::add_u64(const std::string& k, uint64_t v) { put(k, GgufType::U64, scalar(v)); }
void GgufWriter::add_i64(const std::string& k, int64_t v) { put(k, GgufType::I64, scalar(v)); }
void GgufWriter::add_f32(const std::string& k, float v) { put(k, GgufType::F32, scalar(v)); }
void GgufWriter::add_f64(const std::string& k, double v) { put(k, GgufType::F64, scalar(v)); }
void GgufWriter::add_bool(const std::string& k, bool v) { put(k, GgufType::BOOL, scalar<uint8_t>(v ? 1 : 0)); }

void GgufWriter::add_string(const std::string& k, const std::string& v) {
  std::vector<uint8_t> b;
  append_string(b, v);
  put(k, GgufType::STRING, std::move(b));
}

namespace {
template <class T>
std::vector<uint8_t> numeric_array(GgufType et, std::span<const T> v) {
  std::vector<uint8_t> b;
  append<uint32_t>(b, uint32_t(et));
  append<uint64_t>(b, v.size());
  for (T x : v) append<T>(b, x);
  return b;
}
}  // namespace

void GgufWriter::add_array_i32(const std::string& k, std::span<const int32_t> v) {
  put(k, GgufType::ARRAY, numeric_array(GgufType::I32, v));
}
void GgufWriter::add_array_u32(const std::string& k, std::span<const uint32_t> v) {
  put(k, GgufType::ARRAY, numeric_array(GgufType::U32, v));
}
void GgufWriter::add_array_f32(const std::string& k, std::span<const float> v) {
  put(k, GgufType::ARRAY, numeric_array(GgufType::F32, v));
}

void GgufWriter::add_array_string(const std::string& k, const std::vector<std::string>& v) {
  std::vector<uint8_t> b;
  append<uint32_t>(b, uint32_t(GgufType::STRING));
  append<uint64_t>(b, v.size());
  for (const std::string& s : v) append_string(b, s);
  put(k, GgufType::ARRAY, std::move(b));
}

void GgufWriter::add_value(const std::string& k, const GgufValue& v) {
  std::vector<uint8_t> b;
  encode_value(b, v);
  put(k, v.type, std::move(b));
}

void GgufWriter::add_raw(const std::string& k, GgufType type, std::vector<uint8_t> value_bytes) {
  put(k, type, std::move(value_bytes));
}

void GgufWriter::remove(const std::string& key) {
  std::erase_if(kv_, [&](const Kv& kv) { return kv.key == key; });
}

void GgufWriter::add_tensor(const std::string& name, std::vector<uint64_t> dims, GgmlType type,
                            std::vector<uint8_t> data) {
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;
  const uint64_t be = ggml_block_elems(type);
  if (dims.empty() || dims.size() > 4 || dims[0] % be != 0 || n / be * ggml_block_bytes(type) != data.size())
    throw Error("GgufWriter: tensor '" + name + "': " + std::to_string(data.size()) + " bytes do not match " +
                std::to_string(dims.size()) + "-d shape of " + std::to_string(n) + " " +
                ggml_type_name(type) + " elements");
  for (const Tensor& t : tensors_)
    if (t.name == name) throw Error("GgufWriter: duplicate tensor '" + name + "'");
  tensors_.push_back({name, std::move(dims), type, std::move(data)});
}

std::vector<uint8_t> encode_f32_as(std::span<const float> x, GgmlType type) {
  std::vector<uint8_t> out(x.size() / ggml_block_elems(type) * ggml_block_bytes(type));
  switch (type) {
    case GgmlType::F32:
      std::memcpy(out.data(), x.data(), x.size() * 4);
      break;
    case GgmlType::F16:
    case GgmlType::BF16:
      for (size_t i = 0; i < x.size(); ++i) {
        const uint16_t h = type == GgmlType::F16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
        // A finite value the type cannot hold would be written as Inf (a file loaders refuse as damaged).
        if (std::isfinite(x[i]) && !std::isfinite(type == GgmlType::F16 ? f16_to_f32(h) : bf16_to_f32(h)))
          throw Error("value " + std::to_string(x[i]) + " at element " + std::to_string(i) + " is past the range of " +
                      ggml_type_name(type) + " (write this tensor as f32)");
        std::memcpy(&out[2 * i], &h, 2);
      }
      break;
    case GgmlType::Q8_0:
    case GgmlType::Q4_0: {
      // A block's scale from a NaN or Inf would make the whole block garbage, silently.
      if (const int64_t bad = first_non_finite_f32(reinterpret_cast<const uint8_t*>(x.data()), x.size()); bad >= 0)
        throw Error("a NaN or Inf at element " + std::to_string(bad) + " cannot be quantized to " + ggml_type_name(type));
      if (x.size() % 32 != 0)
        throw Error(std::string("encode_f32_as: ") + ggml_type_name(type) + " needs a multiple of 32 values, got " +
                    std::to_string(x.size()));
      const bool q8 = type == GgmlType::Q8_0;
      for (size_t b = 0; b < x.size() / 32; ++b) {
        if (q8)
          quantize_q8_0_block(x.data() + 32 * b, out.data() + kQ8_0Bytes * b);
        else
          quantize_q4_0_block(x.data() + 32 * b, out.data() + kQ4_0Bytes * b);
      }
      break;
    }
    default:  // other block types are written from their raw blocks (add_tensor)
      throw Error(std::string("encode_f32_as: no quantizer for ") + ggml_type_name(type));
  }
  return out;
}

void GgufWriter::add_tensor_f32(const std::string& name, std::vector<uint64_t> dims, std::span<const float> values,
                                GgmlType type) {
  std::vector<uint8_t> data;
  try {
    data = encode_f32_as(values, type);
  } catch (const Error& e) {
    throw Error("tensor " + name + ": " + e.what());
  }
  add_tensor(name, std::move(dims), type, std::move(data));
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  std::vector<uint8_t> out;
  out.insert(out.end(), {'G', 'G', 'U', 'F'});
  append<uint32_t>(out, 3);
  append<uint64_t>(out, tensors_.size());
  append<uint64_t>(out, kv_.size());
  for (const Kv& kv : kv_) {
    append_string(out, kv.key);
    append<uint32_t>(out, uint32_t(kv.type));
    out.insert(out.end(), kv.bytes.begin(), kv.bytes.end());
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    append_string(out, t.name);
    append<uint32_t>(out, uint32_t(t.dims.size()));
    for (uint64_t d : t.dims) append<uint64_t>(out, d);
    append<uint32_t>(out, uint32_t(t.type));
    append<uint64_t>(out, offset);
    offset = align_up(offset + t.data.size(), alignment_);
  }
  out.resize(align_up(out.size(), alignment_), 0);
  for (const Tensor& t : tensors_) {
    out.insert(out.end(), t.data.begin(), t.data.end());
    out.resize(align_up(out.size(), alignment_), 0);  // zero padding, also after the last tensor
  }
  return out;
}

void GgufWriter::write(const std::string& path) const {
  namespace fs = std::filesystem;
  const std::vector<uint8_t> bytes = to_bytes();
  // A regular file (or none yet) is written beside itself and renamed into place, so a failed
  // write leaves what was there; anything else (a device, a pipe) is written as it is.
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  const bool replace = !fs::exists(st) || fs::is_regular_file(st);
  // Through a symbolic link: the file it names is replaced, not the link.
  std::string target = path;
  if (fs::exists(st))
    if (const fs::path c = fs::canonical(path, ec); !ec) target = c.string();  // else the path as given
  const std::string tmp = replace ? target + ".tmp" + std::to_string(::getpid()) : path;
  auto put = [&]() {
    std::unique_ptr<FILE, int (*)(FILE*)> fp(std::fopen(tmp.c_str(), "wb"), &std::fclose);
    if (!fp) throw Error(path + ": cannot open for writing: " + std::strerror(errno));
    if (std::fwrite(bytes.data(), 1, bytes.size(), fp.get()) != bytes.size())
      throw Error(path + ": short write (" + std::to_string(bytes.size()) + " bytes)");
    if (std::fclose(fp.release()) != 0) throw Error(path + ": error closing file");
    if (replace && std::rename(tmp.c_str(), target.c_str()) != 0)
      throw Error(path + ": cannot replace it: " + std::strerror(errno));
  };
  try {
    put();
  } catch (...) {
    if (replace) std::remove(tmp.c_str());
    throw;
  }
}

// ---- Llama metadata and random models --------------------------------------------------------

void add_llama_metadata(GgufWriter& w, const LlamaConfig& c, const std::string& name) {
  const std::string p = c.arch + ".";
  w.add_string("general.architecture", c.arch);
  w.add_string("general.name", name);
  w.add_u32(p + "context_length", uint32_t(c.ctx));
  w.add_u32(p + "embedding_length", uint32_t(c.C));
  w.add_u32(p + "block_count", uint32_t(c.L));
  w.add_u32(p + "feed_forward_length", uint32_t(c.F));
  w.add_u32(p + "attention.head_count", uint32_t(c.H));
  w.add_u32(p + "attention.head_count_kv", uint32_t(c.Hkv));
  w.add_u32(p + "rope.dimension_count", uint32_t(c.D));
  if (c.D * c.H != c.C) {
    w.add_u32(p + "attention.key_length", uint32_t(c.D));
    w.add_u32(p + "attention.value_length", uint32_t(c.D));
  }
  w.add_f32(p + "rope.freq_base", c.rope_theta);
  if (c.rope_freq_scale != 1.0f || c.rope_yarn) {
    w.add_string(p + "rope.scaling.type", c.rope_yarn ? "yarn" : "linear");
    w.add_f32(p + "rope.scaling.factor", 1.0f / c.rope_freq_scale);
  } else if (c.rope_longrope) {
    w.add_string(p + "rope.scaling.type", "longrope");
  }
  if (c.rope_orig_ctx) w.add_u32(p + "rope.scaling.original_context_length", c.rope_orig_ctx);
  if (c.rope_attn_factor != 1.0f) w.add_f32(p + "rope.scaling.attn_factor", c.rope_attn_factor);
  if (c.sliding_window) w.add_u32(p + "attention.sliding_window", c.sliding_window);
  w.add_f32(p + "attention.layer_norm_rms_epsilon", c.rms_eps);
  w.add_u32(p + "vocab_size", uint32_t(c.V));
  w.add_u32("general.file_type", 0);
}

void add_placeholder_llama_vocab(GgufWriter& w, int V) {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;  // llama.cpp: 1 normal, 2 unknown, 3 control, 5 unused, 6 byte
  const char* special[] = {"<unk>", "<s>", "</s>"};
  const int32_t special_type[] = {2, 3, 3};
  for (int i = 0; i < V; ++i) {
    char buf[32];
    if (i < 3) {
      tokens.push_back(special[i]);
      types.push_back(special_type[i]);
    } else if (i < 3 + 256) {
      std::snprintf(buf, sizeof buf, "<0x%02X>", i - 3);
      tokens.push_back(buf);
      types.push_back(6);
    } else {
      std::snprintf(buf, sizeof buf, "<unused_%d>", i);
      tokens.push_back(buf);
      types.push_back(5);
    }
    scores.push_back(0.0f);
  }
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_array_string("tokenizer.ggml.tokens", tokens);
  w.add_array_f32("tokenizer.ggml.scores", scores);
  w.add_array_i32("tokenizer.ggml.token_type", types);
  w.add_u32("tokenizer.ggml.unknown_token_id", 0);
  w.add_u32("tokenizer.ggml.bos_token_id", 1);
  w.add_u32("tokenizer.ggml.eos_token_id", 2);
}

namespace {
// splitmix64: tiny, seedable, identical on every platform.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float uniform(float a) { return (float(next() >> 40) / float(1 << 24) * 2.0f - 1.0f) * a; }  // U(-a, a)
};
}  // namespace

GgufWriter random_llama(const LlamaConfig& cfg, uint64_t seed, GgmlType wtype) {
  LlamaConfig c = cfg;
  if (!apply_arch_traits(c)) throw Error("random_llama: unknown architecture '" + c.arch + "'");
  GgufWriter w;
  add_llama_metadata(w, c, "vkspec-random");
  // general.file_type: 0 all f32, 1 mostly f16, 7 mostly q8_0, 2 mostly q4_0 (llama_ftype).
  w.add_u32("general.file_type", wtype == GgmlType::F16 ? 1 : wtype == GgmlType::Q8_0 ? 7
                                 : wtype == GgmlType::Q4_0 ? 2 : wtype == GgmlType::BF16 ? 32 : 0);
  if (c.V >= 3) add_placeholder_llama_vocab(w, c.V);
  Rng rng{seed};
  auto mat = [&](const std::string& name, uint64_t in, uint64_t out, GgmlType type) {
    std::vector<float> x(in * out);  // (out, in)
    const float a = 1.0f / std::sqrt(float(in));
    for (float& v : x) v = rng.uniform(a);
    w.add_tensor_f32(name, {in, out}, x, type);
  };
  auto vec = [&](const std::string& name, uint64_t n, float center, float spread) {
    std::vector<float> x(n);
    for (float& v : x) v = center + rng.uniform(spread);
    w.add_tensor_f32(name, {n}, x, GgmlType::F32);
  };
  const uint64_t C = c.C, F = c.F, QD = uint64_t(c.H) * c.D, KVD = uint64_t(c.Hkv) * c.D;
  // Quantized types need rows that are multiples of 32; fall back to f16 for odd widths so
  // random odd-sized models remain valid.
  auto wt = [&](uint64_t in) {
    return (wtype == GgmlType::Q8_0 || wtype == GgmlType::Q4_0) && in % 32 != 0 ? GgmlType::F16 : wtype;
  };
  {
    // Embedding rows scaled up so the residual stream starts with a sensible magnitude.
    std::vector<float> e(C * uint64_t(c.V));  // (V, C)
    for (float& v : e) v = rng.uniform(1.0f);
    w.add_tensor_f32("token_embd.weight", {C, uint64_t(c.V)}, e, wt(C));
  }
  if (c.rope_freqs) {  // Llama 3 style frequency factors: 1 for fast rotations up to 8 for slow ones
    std::vector<float> ff(size_t(c.D) / 2);
    for (size_t i = 0; i < ff.size(); ++i) ff[i] = 1.0f + 7.0f * float(i) / float(ff.size()) + rng.uniform(0.5f) + 0.5f;
    w.add_tensor_f32("rope_freqs.weight", {ff.size()}, ff, GgmlType::F32);
  }
  if (c.rope_longrope) {  // Phi-3 LongRoPE: short factors near 1, long ones up to ~9
    for (const auto& [name, span] : {std::pair{"rope_factors_short.weight", 0.5f}, {"rope_factors_long.weight", 8.0f}}) {
      std::vector<float> ff(size_t(c.D) / 2);
      for (size_t i = 0; i < ff.size(); ++i) ff[i] = 1.0f + span * float(i) / float(ff.size()) + rng.uniform(0.25f) + 0.25f;
      w.add_tensor_f32(name, {ff.size()}, ff, GgmlType::F32);
    }
  }
  for (int l = 0; l < c.L; ++l) {
    vec(blk_name(l, "attn_norm.weight"), C, 1.0f, 0.2f);
    if (c.fused_qkv) {
      mat(blk_name(l, "attn_qkv.weight"), C, QD + 2 * KVD, wt(C));
    } else {
      mat(blk_name(l, "attn_q.weight"), C, QD, wt(C));
      mat(blk_name(l, "attn_k.weight"), C, KVD, wt(C));
      mat(blk_name(l, "attn_v.weight"), C, KVD, wt(C));
    }
    if (c.qk_norm) {
      vec(blk_name(l, "attn_q_norm.weight"), uint64_t(c.D), 1.0f, 0.2f);
      vec(blk_name(l, "attn_k_norm.weight"), uint64_t(c.D), 1.0f, 0.2f);
    }
    if (c.qkv_bias) {
      vec(blk_name(l, "attn_q.bias"), QD, 0.0f, 0.1f);
      vec(blk_name(l, "attn_k.bias"), KVD, 0.0f, 0.1f);
      vec(blk_name(l, "attn_v.bias"), KVD, 0.0f, 0.1f);
    }
    mat(blk_name(l, "attn_output.weight"), QD, C, wt(QD));
    vec(blk_name(l, "ffn_norm.weight"), C, 1.0f, 0.2f);
    if (c.fused_gate_up) {
      mat(blk_name(l, "ffn_up.weight"), C, 2 * F, wt(C));
    } else {
      mat(blk_name(l, "ffn_gate.weight"), C, F, wt(C));
      mat(blk_name(l, "ffn_up.weight"), C, F, wt(C));
    }
    mat(blk_name(l, "ffn_down.weight"), F, C, wt(F));
  }
  vec("output_norm.weight", C, 1.0f, 0.2f);
  if (!c.tied_output) mat("output.weight", C, uint64_t(c.V), wt(C));
  return w;
}

void write_random_llama(const std::string& path, const LlamaConfig& cfg, uint64_t seed, GgmlType wtype) {
  random_llama(cfg, seed, wtype).write(path);
}

}  // namespace vkspec
