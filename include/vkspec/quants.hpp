// ggml's block formats beyond q8_0/q4_0 (dtype.hpp): q5_0, q5_1, the K-quants q3_K, q4_K, q5_K,
// q6_K, and iq4_xs — CPU dequantization written from the block layouts, one 32-value sub-block
// at a time, exactly as shaders/quants.glsl decodes them on the device.
//
// Layouts (little-endian, no padding; "d" fields are f16):
//   q5_0   (32 values, 22 bytes): d, qh u32 (bit j = 5th bit of value j), qs[16] nibbles
//                                  (value j < 16: low nibble of qs[j], j + 16: high); v = d·(q − 16)
//   q5_1   (32, 24): d, m, qh u32, qs[16] as q5_0;                     v = d·q + m
//   q3_K   (256, 110): hmask[32], qs[64], scales[12] (16 six-bit), d
//   q4_K   (256, 144): d, dmin, scales[12] (8 six-bit scales + 8 mins), qs[128]
//   q5_K   (256, 176): d, dmin, scales[12], qh[32], qs[128]
//   q6_K   (256, 210): ql[128], qh[64], scales[16] int8, d
//   iq4_xs (256, 136): d, scales_h u16, scales_l[4], qs[128]; values from a 16-entry codebook
// The K-quant layouts interleave sub-blocks; each *_sub function below says which bytes value
// l of sub-block s (values 32·s .. 32·s + 31 of the super-block) comes from. Each value is
// computed with the same float operations, in the same order, as the shader, so the device's
// dequantized weights (an embedding row) equal these bit for bit; integer products (scale times
// quant) are exact, so d · (sc · q) has one rounding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "vkspec/dtype.hpp"

namespace vkspec {

inline constexpr size_t kQ5_0Bytes = 22, kQ5_1Bytes = 24;
inline constexpr size_t kQK = 256;  // K-quant / iq4_xs super-block
inline constexpr size_t kQ3_KBytes = 110, kQ4_KBytes = 144, kQ5_KBytes = 176, kQ6_KBytes = 210, kIQ4_XSBytes = 136;

// The 16 values an iq4 nibble selects (ggml's kvalues_iq4nl), times the sub-block scale.
inline constexpr int8_t kIQ4NLValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

namespace quant_detail {
inline float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}
inline uint32_t u32_at(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
// q4_K / q5_K: the 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes. Bytes
// 0..3 hold scales 0..3 (low 6 bits), bytes 4..7 mins 0..3; sub-blocks 4..7 take their low
// 4 bits from bytes 8..11 (scale low nibble, min high nibble) and their top 2 bits from the top
// 2 bits of bytes 0..3 (scales) and 4..7 (mins).
inline void k4_scale_min(const uint8_t* s, int j, int& sc, int& m) {
  if (j < 4) {
    sc = s[j] & 63;
    m = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}
// q3_K: six-bit scale k (0..15). Low 4 bits: bytes 0..7, low nibble for k < 8, high nibble of
// byte k − 8 otherwise; top 2 bits: bits 2·(k/4) of byte 8 + k%4. Stored with a bias of 32.
inline int k3_scale(const uint8_t* s, int k) {
  const int lo = k < 8 ? s[k] & 0x0f : s[k - 8] >> 4;
  const int hi = (s[8 + k % 4] >> (2 * (k / 4))) & 3;
  return (lo | (hi << 4)) - 32;
}
}  // namespace quant_detail

// ---- 32-value blocks ------------------------------------------------------------------------

inline void dequantize_q5_0_block(const uint8_t* in, float* y) {  // in: (22,) -> y: (32,)
  const float d = quant_detail::half_at(in);
  const uint32_t qh = quant_detail::u32_at(in + 2);
  for (int j = 0; j < 16; ++j) {
    const int lo = (in[6 + j] & 0x0f) | int((qh >> j) & 1u) << 4;
    const int hi = (in[6 + j] >> 4) | int((qh >> (j + 16)) & 1u) << 4;
    y[j] = float(lo - 16) * d;
    y[j + 16] = float(hi - 16) * d;
  }
}

inline void dequantize_q5_1_block(const uint8_t* in, float* y) {  // in: (24,) -> y: (32,)
  const float d = quant_detail::half_at(in), m = quant_detail::half_at(in + 2);
  const uint32_t qh = quant_detail::u32_at(in + 4);
  for (int j = 0; j < 16; ++j) {
    const int lo = (in[8 + j] & 0x0f) | int((qh >> j) & 1u) << 4;
    const int hi = (in[8 + j] >> 4) | int((qh >> (j + 16)) & 1u) << 4;
    y[j] = float(lo) * d + m;
    y[j + 16] = float(hi) * d + m;
  }
}

// ---- 256-value super-blocks, one 32-value sub-block s (0..7) at a time ------------------------

// Value l: 2 bits at shift 2·(s%4) of qs[32·(s/4) + l], minus 4 unless bit s of hmask[l] is set;
// scale 2s + l/16.
inline void dequantize_q3_K_sub(const uint8_t* in, int s, float* y) {
  const float d = quant_detail::half_at(in + 108);
  const uint8_t* hm = in;
  const uint8_t* qs = in + 32 + 32 * (s / 4);
  for (int l = 0; l < 32; ++l) {
    const int q = ((qs[l] >> (2 * (s % 4))) & 3) - (((hm[l] >> s) & 1) ? 0 : 4);
    y[l] = d * float(quant_detail::k3_scale(in + 96, 2 * s + l / 16) * q);
  }
}

// Value l: nibble s%2 of qs[32·(s/2) + l]; d·scale_s·q − dmin·min_s.
inline void dequantize_q4_K_sub(const uint8_t* in, int s, float* y) {
  const float d = quant_detail::half_at(in), dmin = quant_detail::half_at(in + 2);
  int sc, m;
  quant_detail::k4_scale_min(in + 4, s, sc, m);
  const uint8_t* qs = in + 16 + 32 * (s / 2);
  for (int l = 0; l < 32; ++l) y[l] = d * float(sc) * float((qs[l] >> (4 * (s % 2))) & 0x0f) - dmin * float(m);
}

// As q4_K, with bit s of qh[l] as the 5th bit.
inline void dequantize_q5_K_sub(const uint8_t* in, int s, float* y) {
  const float d = quant_detail::half_at(in), dmin = quant_detail::half_at(in + 2);
  int sc, m;
  quant_detail::k4_scale_min(in + 4, s, sc, m);
  const uint8_t* qh = in + 16;
  const uint8_t* qs = in + 48 + 32 * (s / 2);
  for (int l = 0; l < 32; ++l) {
    const int q = ((qs[l] >> (4 * (s % 2))) & 0x0f) | (((qh[l] >> s) & 1) << 4);
    y[l] = d * float(sc) * float(q) - dmin * float(m);
  }
}

// Sub-block s = 4·n + j (n: which 128-value half). Value l: nibble j/2 of ql[64n + 32·(j%2) + l]
// with bits 2j..2j+1 of qh[32n + l] on top, minus 32; int8 scale 8n + 2j + l/16.
inline void dequantize_q6_K_sub(const uint8_t* in, int s, float* y) {
  const int n = s / 4, j = s % 4;
  const float d = quant_detail::half_at(in + 208);
  const uint8_t* ql = in + 64 * n + 32 * (j % 2);
  const uint8_t* qh = in + 128 + 32 * n;
  const auto* sc = reinterpret_cast<const int8_t*>(in + 192 + 8 * n + 2 * j);
  for (int l = 0; l < 32; ++l) {
    const int q = (((ql[l] >> (4 * (j / 2))) & 0x0f) | (((qh[l] >> (2 * j)) & 3) << 4)) - 32;
    y[l] = d * float(sc[l / 16] * q);
  }
}

// Sub-block s: six-bit scale (nibble s%2 of scales_l[s/2], bits 2s..2s+1 of scales_h on top)
// minus 32; value l < 16 the low nibble of qs[16s + l], l ≥ 16 the high nibble of qs[16s + l − 16].
inline void dequantize_iq4_xs_sub(const uint8_t* in, int s, float* y) {
  const float d = quant_detail::half_at(in);
  uint16_t sh;
  std::memcpy(&sh, in + 2, 2);
  const int ls = ((in[4 + s / 2] >> (4 * (s % 2))) & 0x0f) | (((sh >> (2 * s)) & 3) << 4);
  const float dl = d * float(ls - 32);
  const uint8_t* qs = in + 8 + 16 * s;
  for (int l = 0; l < 16; ++l) {
    y[l] = dl * float(kIQ4NLValues[qs[l] & 0x0f]);
    y[l + 16] = dl * float(kIQ4NLValues[qs[l] >> 4]);
  }
}

template <void (*Sub)(const uint8_t*, int, float*)>
inline void dequantize_super_block(const uint8_t* in, float* y) {  // in: one super-block -> y: (256,)
  for (int s = 0; s < 8; ++s) Sub(in, s, y + 32 * s);
}
inline void dequantize_q3_K_block(const uint8_t* in, float* y) { dequantize_super_block<dequantize_q3_K_sub>(in, y); }
inline void dequantize_q4_K_block(const uint8_t* in, float* y) { dequantize_super_block<dequantize_q4_K_sub>(in, y); }
inline void dequantize_q5_K_block(const uint8_t* in, float* y) { dequantize_super_block<dequantize_q5_K_sub>(in, y); }
inline void dequantize_q6_K_block(const uint8_t* in, float* y) { dequantize_super_block<dequantize_q6_K_sub>(in, y); }
inline void dequantize_iq4_xs_block(const uint8_t* in, float* y) {
  dequantize_super_block<dequantize_iq4_xs_sub>(in, y);
}

// ---- the table ---------------------------------------------------------------------------------
// One entry per block type, keyed by ggml's type number (the GGUF tensor type): block size,
// bytes, the byte offsets of its f16 fields (scales and mins, which the NaN/Inf check at load
// reads) and its CPU dequantizer.
struct BlockFormat {
  uint32_t ggml_type;
  const char* name;
  uint32_t elems, bytes;
  uint32_t n_f16;
  uint32_t f16_offsets[2];
  void (*dequantize)(const uint8_t* block, float* y);  // (bytes,) -> (elems,)
  float max_per_d;  // largest |value| / |d| the integer fields allow (sizes random test blocks)
};

inline constexpr BlockFormat kBlockFormats[] = {
    {2, "q4_0", 32, 18, 1, {0, 0}, dequantize_q4_0_block, 8},
    {6, "q5_0", 32, 22, 1, {0, 0}, dequantize_q5_0_block, 16},
    {7, "q5_1", 32, 24, 2, {0, 2}, dequantize_q5_1_block, 31},
    {8, "q8_0", 32, 34, 1, {0, 0}, dequantize_q8_0_block, 128},
    {11, "q3_K", 256, 110, 1, {108, 0}, dequantize_q3_K_block, 32 * 4},
    {12, "q4_K", 256, 144, 2, {0, 2}, dequantize_q4_K_block, 63 * 15},
    {13, "q5_K", 256, 176, 2, {0, 2}, dequantize_q5_K_block, 63 * 31},
    {14, "q6_K", 256, 210, 1, {208, 0}, dequantize_q6_K_block, 128 * 32},
    {23, "iq4_xs", 256, 136, 1, {0, 0}, dequantize_iq4_xs_block, 32 * 127},
};

// The block format of a ggml type number, or nullptr for plain floats and unknown types.
inline const BlockFormat* block_format(uint32_t ggml_type) {
  for (const BlockFormat& f : kBlockFormats)
    if (f.ggml_type == ggml_type) return &f;
  return nullptr;
}

// Dequantizes `n` values (a multiple of the block size) of a block type.
inline void dequantize_blocks(const BlockFormat& f, const uint8_t* in, float* y, size_t n) {
  for (size_t b = 0; b < n / f.elems; ++b) f.dequantize(in + b * f.bytes, y + b * f.elems);
}

// `n_blocks` blocks of random bits whose f16 fields are replaced by finite values sized so every
// dequantized value lies in [-1, 1] (kernel tests and bench-kernels: every bit pattern of the
// integer fields is a valid block, so random bytes cover the format's corners).
template <typename Rng>
inline std::vector<uint8_t> random_blocks(const BlockFormat& f, size_t n_blocks, Rng& rng) {
  std::vector<uint8_t> out(n_blocks * f.bytes);
  for (auto& b : out) b = uint8_t(rng() >> 7);
  for (size_t b = 0; b < n_blocks; ++b)
    for (uint32_t i = 0; i < f.n_f16; ++i) {
      // Two f16 fields (d and a min) can add up: each takes half the range.
      const float u = float(rng() % 20001u) / 10000.0f - 1.0f;
      const uint16_t h = f32_to_f16(u / (f.max_per_d * float(f.n_f16)));
      std::memcpy(&out[b * f.bytes + f.f16_offsets[i]], &h, 2);
    }
  return out;
}

}  // namespace vkspec
