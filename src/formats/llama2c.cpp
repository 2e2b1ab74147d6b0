// llama2.c checkpoint -> GGUF. See include/vkspec/llama2c.hpp for the input layout.
#include "vkspec/llama2c.hpp"

#include "regular_file.hpp"
#include "vkspec/dtype.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <span>
#include <vector>

namespace vkspec {

GgufWriter llama2c_to_gguf(const std::string& path, GgmlType wtype, LlamaConfig* cfg_out) {
  require_regular_file(path, "llama2.c checkpoint");
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw Error(path + ": cannot open llama2.c checkpoint");
  const uint64_t size = uint64_t(in.tellg());
  in.seekg(0);
  if (size < 28)
    throw Error(path + ": truncated llama2.c header: expected 28 bytes (7 int32), file has " + std::to_string(size));
  int32_t h[7];
  in.read(reinterpret_cast<char*>(h), sizeof h);
  if (uint32_t(h[0]) == 0x616b3432u)  // "ak42": llama2.c's versioned export
    throw Error(path + ": llama2.c versioned export (magic 'ak42') is not supported; export with --version 0 (legacy)");
  const char* names[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
  for (int i = 0; i < 7; ++i) {
    const int64_t v = i == 5 ? std::abs(int64_t(h[i])) : h[i];
    if (v <= 0 || v > (1 << 20))
      throw Error(path + ": llama2.c header field " + names[i] + " = " + std::to_string(h[i]) +
                  " (expected a positive value up to 2^20)");
  }
  LlamaConfig c;
  c.arch = "llama";
  c.C = h[0];
  c.F = h[1];
  c.L = h[2];
  c.H = h[3];
  c.Hkv = h[4];
  c.V = std::abs(h[5]);
  c.ctx = h[6];
  c.tied_output = h[5] > 0;
  c.qkv_bias = false;
  c.rope_theta = 10000.0f;
  c.rms_eps = 1e-5f;
  if (c.C % c.H != 0)
    throw Error(path + ": llama2.c header: dim " + std::to_string(c.C) + " not divisible by n_heads " + std::to_string(c.H));
  if (c.H % c.Hkv != 0)
    throw Error(path + ": llama2.c header: n_heads " + std::to_string(c.H) + " not divisible by n_kv_heads " +
                std::to_string(c.Hkv));
  c.D = c.C / c.H;
  if (c.D % 2 != 0) throw Error(path + ": llama2.c header: head size " + std::to_string(c.D) + " must be even");

  // Each count below is at most 2^60 floats, but their sum times 4 is not bounded by 2^64: in
  // 64 bits a header such as dim=2^20, layers=1048574 wraps the expected size to exactly 28
  // bytes (the header alone), which would pass the size check. Sum in 128 bits.
  using u128 = unsigned __int128;
  const uint64_t C = c.C, F = c.F, L = c.L, V = c.V, KVD = uint64_t(c.Hkv) * c.D, S = c.ctx, D = c.D;
  const u128 floats128 = u128(V) * C + u128(L) * C + u128(L) * C * C + u128(2) * L * KVD * C + u128(L) * C * C +
                         u128(L) * C + u128(3) * L * F * C + C + u128(2) * S * (D / 2) + (c.tied_output ? 0 : u128(V) * C);
  const u128 expect128 = 28 + 4 * floats128;
  if (expect128 != size) {
    auto dec = [](u128 v) {
      std::string s;
      do s.insert(s.begin(), char('0' + int(v % 10))); while ((v /= 10) != 0);
      return s;
    };
    throw Error(path + ": llama2.c file size " + std::to_string(size) + " bytes does not match its header (dim=" +
                std::to_string(c.C) + " hidden=" + std::to_string(c.F) + " layers=" + std::to_string(c.L) +
                " heads=" + std::to_string(c.H) + " kv_heads=" + std::to_string(c.Hkv) + " vocab=" +
                std::to_string(h[5]) + " seq_len=" + std::to_string(c.ctx) + "): expected " + dec(expect128) +
                " bytes");
  }
  const uint64_t floats = uint64_t(floats128);  // == (size - 28) / 4: fits

  std::vector<float> w(static_cast<size_t>(floats));
  in.read(reinterpret_cast<char*>(w.data()), std::streamsize(floats * 4));
  if (!in) throw Error(path + ": read error in llama2.c weights");

  size_t pos = 0;
  auto take = [&](uint64_t n) {
    std::span<const float> s(w.data() + pos, size_t(n));
    pos += size_t(n);
    return s;
  };
  auto matrix_type = [&](uint64_t row) {
    return (wtype == GgmlType::Q8_0 || wtype == GgmlType::Q4_0) && row % 32 != 0 ? GgmlType::F16 : wtype;
  };

  // A NaN or Inf weight is a damaged checkpoint: refused here, naming where, rather than
  // written into a file that vkspec then refuses (or, quantized, turned into a finite garbage block).
  if (const int64_t bad = first_non_finite_f32(reinterpret_cast<const uint8_t*>(w.data()), floats); bad >= 0)
    throw Error(path + ": weight " + std::to_string(bad) + " (at byte " + std::to_string(28 + 4 * uint64_t(bad)) + ") is " +
                (std::isnan(w[size_t(bad)]) ? "NaN" : "infinite") + ": the checkpoint is damaged");

  GgufWriter g;
  add_llama_metadata(g, c, "llama2.c " + path.substr(path.find_last_of('/') + 1));
  add_placeholder_llama_vocab(g, c.V);

  // llama2.c (out, in) row-major matrices are GGUF [in, out] as they are: same bytes.
  const auto tok = take(V * C);
  const auto rms_att = take(L * C);
  const auto wq = take(L * C * C);
  const auto wk = take(L * KVD * C);
  const auto wv = take(L * KVD * C);
  const auto wo = take(L * C * C);
  const auto rms_ffn = take(L * C);
  const auto w1 = take(L * F * C);
  const auto w2 = take(L * C * F);
  const auto w3 = take(L * F * C);
  const auto rms_final = take(C);
  take(2 * S * (D / 2));  // freq_cis: recomputed from theta at run time
  g.add_tensor_f32("token_embd.weight", {C, V}, tok, matrix_type(C));
  for (uint64_t l = 0; l < L; ++l) {
    const int li = int(l);
    g.add_tensor_f32(blk_name(li, "attn_norm.weight"), {C}, rms_att.subspan(l * C, C), GgmlType::F32);
    g.add_tensor_f32(blk_name(li, "attn_q.weight"), {C, C}, wq.subspan(l * C * C, C * C), matrix_type(C));
    g.add_tensor_f32(blk_name(li, "attn_k.weight"), {C, KVD}, wk.subspan(l * KVD * C, KVD * C), matrix_type(C));
    g.add_tensor_f32(blk_name(li, "attn_v.weight"), {C, KVD}, wv.subspan(l * KVD * C, KVD * C), matrix_type(C));
    g.add_tensor_f32(blk_name(li, "attn_output.weight"), {C, C}, wo.subspan(l * C * C, C * C), matrix_type(C));
    g.add_tensor_f32(blk_name(li, "ffn_norm.weight"), {C}, rms_ffn.subspan(l * C, C), GgmlType::F32);
    // w1 = gate, w3 = up, w2 = down (llama2.c: w2(silu(w1 x) * w3 x)).
    g.add_tensor_f32(blk_name(li, "ffn_gate.weight"), {C, F}, w1.subspan(l * F * C, F * C), matrix_type(C));
    g.add_tensor_f32(blk_name(li, "ffn_down.weight"), {F, C}, w2.subspan(l * C * F, C * F), matrix_type(F));
    g.add_tensor_f32(blk_name(li, "ffn_up.weight"), {C, F}, w3.subspan(l * F * C, F * C), matrix_type(C));
  }
  g.add_tensor_f32("output_norm.weight", {C}, rms_final, GgmlType::F32);
  if (!c.tied_output) g.add_tensor_f32("output.weight", {C, V}, take(V * C), matrix_type(C));
  g.add_u32("general.file_type", wtype == GgmlType::F16 ? 1 : wtype == GgmlType::Q8_0 ? 7 : 0);
  if (cfg_out) *cfg_out = c;
  return g;
}

LlamaConfig convert_llama2c_file(const std::string& in, const std::string& out, GgmlType wtype) {
  std::error_code ec;
  if (std::filesystem::equivalent(in, out, ec))
    throw Error(out + " is the input file " + in + ": writing it would destroy the checkpoint (give another output path)");
  LlamaConfig c;
  llama2c_to_gguf(in, wtype, &c).write(out);
  return c;
}

}  // namespace vkspec
