// Scalar and block formats shared by the GGUF reader/writer, the CPU references and the kernels'
// host-side checks: f16, bf16, q8_0 and q4_0, bit-compatible with ggml.
//
// Everything is header-inline and free of global state so tests and upload code can call it in
// tight loops. Conversions are done with integer bit manipulation (no F16C, no _Float16) so the
// result is the same on every host compiler.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace vkspec {

// ---- f16 ------------------------------------------------------------------------------------

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf, or nan keeping its payload
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);  // 112 = 127 - 15
  } else if (mant == 0) {
    bits = sign;  // signed zero
  } else {
    // Subnormal: normalise the mantissa; the value is mant * 2^-24.
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    bits = sign | uint32_t(112 - e) << 23 | ((mant & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

// Round to nearest, ties to even, as IEEE conversion (and ggml's GGML_FP32_TO_FP16) does.
// Values at or past the halfway point above 65504 become inf; nan stays nan (quiet).
inline uint16_t f32_to_f16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {  // inf or nan
    if (ax == 0x7f800000u) return sign | 0x7c00u;
    return uint16_t(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));  // quiet bit set so nan never becomes inf
  }
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds up past the largest finite half
  if (ax >= 0x38800000u) {                        // normal half range (>= 2^-14)
    const uint32_t mant = ax & 0x7fffffu;
    uint32_t h = ((((ax >> 23) - 112u) << 10)) | (mant >> 13);
    const uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry correctly bumps the exponent
    return uint16_t(sign | h);
  }
  if (ax <= 0x33000000u) return sign;  // <= 2^-25: half of the smallest subnormal ties to 0
  // Subnormal half: value / 2^-24 = mant * 2^(e - 126), e = biased f32 exponent (102..112).
  const uint32_t e = ax >> 23;
  const uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - e;  // 14..24
  uint32_t h = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (h & 1u))) ++h;  // may round up into the smallest normal: fine
  return uint16_t(sign | h);
}

// ---- bf16 -----------------------------------------------------------------------------------

inline float bf16_to_f32(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }

inline uint16_t f32_to_bf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);  // keep nan a nan
  x += 0x7fffu + ((x >> 16) & 1u);                                          // ties to even
  return uint16_t(x >> 16);
}

// ---- q8_0: blocks of 32 values, an f16 scale then 32 int8 (34 bytes) ---------------------------

inline constexpr size_t kQ8_0Block = 32;
inline constexpr size_t kQ8_0Bytes = 34;

// Same rule as ggml's reference quantizer, so our files match llama.cpp's byte for byte:
// d = max|x| / 127 (stored as f16), q = round-half-away(x * (1/d)) using the f32 d.
inline void quantize_q8_0_block(const float* x, uint8_t* out) {  // x: (32,) -> out: (34,)
  float amax = 0.0f;
  for (size_t i = 0; i < kQ8_0Block; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const uint16_t dh = f32_to_f16(d);
  std::memcpy(out, &dh, 2);  // ggml is little-endian on every target we run on
  for (size_t i = 0; i < kQ8_0Block; ++i) out[2 + i] = uint8_t(int8_t(std::round(x[i] * id)));
}

inline void dequantize_q8_0_block(const uint8_t* in, float* y) {  // in: (34,) -> y: (32,)
  uint16_t dh;
  std::memcpy(&dh, in, 2);
  const float d = f16_to_f32(dh);
  for (size_t i = 0; i < kQ8_0Block; ++i) y[i] = float(int8_t(in[2 + i])) * d;
}

// ---- q4_0: blocks of 32 values, an f16 scale then 16 bytes of nibbles (18 bytes) ---------------
// Element j < 16 is the low nibble of byte j, element j + 16 its high nibble; value = (q - 8) * d.

inline constexpr size_t kQ4_0Block = 32;
inline constexpr size_t kQ4_0Bytes = 18;

inline void quantize_q4_0_block(const float* x, uint8_t* out) {  // x: (32,) -> out: (18,)
  // ggml's reference: the signed value of largest magnitude maps to -8, so d = max / -8.
  float amax = 0.0f, vmax = 0.0f;
  for (size_t i = 0; i < kQ4_0Block; ++i)
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      vmax = x[i];
    }
  const float d = vmax / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const uint16_t dh = f32_to_f16(d);
  std::memcpy(out, &dh, 2);
  for (size_t j = 0; j < kQ4_0Block / 2; ++j) {
    const int q0 = std::min(15, int(int8_t(x[j] * id + 8.5f)));
    const int q1 = std::min(15, int(int8_t(x[j + 16] * id + 8.5f)));
    out[2 + j] = uint8_t(q0 | (q1 << 4));
  }
}

inline void dequantize_q4_0_block(const uint8_t* in, float* y) {  // in: (18,) -> y: (32,)
  uint16_t dh;
  std::memcpy(&dh, in, 2);
  const float d = f16_to_f32(dh);
  for (size_t j = 0; j < kQ4_0Block / 2; ++j) {
    y[j] = float(int(in[2 + j] & 0x0f) - 8) * d;
    y[j + 16] = float(int(in[2 + j] >> 4) - 8) * d;
  }
}

// ---- finiteness --------------------------------------------------------------------------------
// Index of the first NaN or ±Inf among n values stored as `bits`-wide IEEE floats whose exponent
// field is `exp_mask` (f32: 0x7f800000, f16: 0x7c00, bf16: 0x7f80), or -1. A value is
// non-finite exactly when its exponent bits are all ones. Blocks of 64 are OR-reduced first, so
// a clean weight costs one pass at memory speed.
template <typename U>
inline int64_t first_non_finite_bits(const uint8_t* data, uint64_t n, uint64_t stride_bytes, U exp_mask) {
  auto at = [&](uint64_t i) {
    U v;
    std::memcpy(&v, data + i * stride_bytes, sizeof(U));
    return U(v & exp_mask) == exp_mask;
  };
  for (uint64_t b = 0; b < n; b += 64) {
    bool any = false;
    const uint64_t e = std::min<uint64_t>(n, b + 64);
    for (uint64_t i = b; i < e; ++i) any |= at(i);
    if (any)
      for (uint64_t i = b; i < e; ++i)
        if (at(i)) return int64_t(i);
  }
  return -1;
}
inline int64_t first_non_finite_f32(const uint8_t* d, uint64_t n) { return first_non_finite_bits<uint32_t>(d, n, 4, 0x7f800000u); }
inline int64_t first_non_finite_f16(const uint8_t* d, uint64_t n) { return first_non_finite_bits<uint16_t>(d, n, 2, 0x7c00); }
inline int64_t first_non_finite_bf16(const uint8_t* d, uint64_t n) { return first_non_finite_bits<uint16_t>(d, n, 2, 0x7f80); }

}  // namespace vkspec
