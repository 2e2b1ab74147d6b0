// f16 / bf16 / q8_0 / q4_0 helpers (include/vkspec/dtype.hpp).
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <ios>
#include <limits>
#include <random>

#include "vkspec/dtype.hpp"

using namespace vkspec;

TEST_CASE("f16: every half survives f16 -> f32 -> f16") {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = f16_to_f32(uint16_t(h));
    const bool nan = ((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff) != 0;
    if (nan) {
      CHECK(std::isnan(f));
      CHECK(std::isnan(f16_to_f32(f32_to_f16(f))));
      continue;
    }
    if (f32_to_f16(f) != h) {
      FAIL_CHECK("half 0x" << std::hex << h << " -> " << f << " -> 0x" << f32_to_f16(f));
      break;
    }
  }
}

TEST_CASE("f16: known values, subnormals, rounding, overflow") {
  CHECK(f16_to_f32(0x3c00) == 1.0f);
  CHECK(f16_to_f32(0xc000) == -2.0f);
  CHECK(f16_to_f32(0x7bff) == 65504.0f);
  CHECK(f16_to_f32(0x0001) == std::ldexp(1.0f, -24));  // smallest subnormal
  CHECK(f16_to_f32(0x03ff) == std::ldexp(1023.0f, -24));
  CHECK(f32_to_f16(65504.0f) == 0x7bff);
  CHECK(f32_to_f16(65519.99f) == 0x7bff);
  CHECK(f32_to_f16(65520.0f) == 0x7c00);  // halfway rounds to even = inf
  CHECK(f32_to_f16(1e10f) == 0x7c00);
  CHECK(f32_to_f16(-INFINITY) == 0xfc00);
  CHECK(f32_to_f16(std::ldexp(1.0f, -25)) == 0x0000);              // tie -> even (0)
  CHECK(f32_to_f16(std::ldexp(1.5f, -25)) == 0x0001);              // above the tie
  CHECK(f32_to_f16(std::ldexp(3.0f, -25)) == 0x0002);              // 1.5 ulp -> tie -> even (2)
  CHECK(f32_to_f16(-0.0f) == 0x8000);
  CHECK(f32_to_f16(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);       // tie -> even (down)
  CHECK(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);   // tie -> even (up)
  CHECK(f32_to_f16(std::ldexp(2047.0f, -25)) == 0x0400);           // rounds up into the normals
}

#if defined(__FLT16_MAX__)
TEST_CASE("f16: matches the compiler's _Float16 conversion on random floats") {
  std::mt19937 rng(7);
  int bad = 0;
  for (int i = 0; i < 2000000 && bad < 5; ++i) {
    uint32_t bits = rng();
    if (i % 2) bits = (bits & 0x807fffffu) | ((100u + rng() % 50u) << 23);  // focus on the half range
    const float f = std::bit_cast<float>(bits);
    if (std::isnan(f)) continue;
    const _Float16 ref = static_cast<_Float16>(f);
    uint16_t rb;
    std::memcpy(&rb, &ref, 2);
    if (rb != f32_to_f16(f)) {
      ++bad;
      FAIL_CHECK("f32 bits 0x" << std::hex << bits << ": ours 0x" << f32_to_f16(f) << " compiler 0x" << rb);
    }
  }
}
#endif


// Independent of the bit tricks: the chosen half must be a nearest neighbour of x, and on an exact
// tie the even one. Random floats concentrated in the half range, normals and subnormals.
TEST_CASE("f16: conversion picks the nearest half, ties to even (random floats)") {
  std::mt19937 rng(7);
  int bad = 0;
  for (int i = 0; i < 300000 && bad < 5; ++i) {
    const uint32_t bits = (rng() & 0x807fffffu) | ((97u + rng() % 46u) << 23);  // |x| in [2^-30, 2^16)
    const float x = std::bit_cast<float>(bits);
    const uint16_t h = f32_to_f16(x);
    if ((h & 0x7fffu) == 0x7c00u) {
      CHECK(std::fabs(x) >= 65520.0f);
      continue;
    }
    const double got = f16_to_f32(h);
    const double err = std::fabs(double(x) - got);
    for (int dlt : {-1, 1}) {
      const uint16_t n = uint16_t((h & 0x7fffu) + dlt) | (h & 0x8000u);
      if ((h & 0x7fffu) == 0 && dlt < 0) continue;
      if ((n & 0x7fffu) >= 0x7c00u) continue;
      const double other = std::fabs(double(x) - double(f16_to_f32(n)));
      const bool ok = err < other || (err == other && (h & 1u) == 0);
      if (!ok) {
        ++bad;
        FAIL_CHECK("x=" << x << " -> half 0x" << std::hex << h << " but neighbour 0x" << n << " is nearer/even");
      }
    }
  }
}

TEST_CASE("bf16") {
  CHECK(bf16_to_f32(0x3f80) == 1.0f);
  CHECK(f32_to_bf16(1.0f) == 0x3f80);
  CHECK(f32_to_bf16(std::bit_cast<float>(0x3f808000u)) == 0x3f80);  // tie -> even
  CHECK(f32_to_bf16(std::bit_cast<float>(0x3f818000u)) == 0x3f82);
  CHECK(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
}

TEST_CASE("q8_0: scale, rounding and round-trip error") {
  float x[32];
  for (int i = 0; i < 32; ++i) x[i] = std::sin(float(i)) * 3.0f;
  x[5] = -4.0f;  // the largest magnitude, negative
  uint8_t blk[kQ8_0Bytes];
  quantize_q8_0_block(x, blk);
  uint16_t dh;
  std::memcpy(&dh, blk, 2);
  CHECK(dh == f32_to_f16(4.0f / 127.0f));
  CHECK(int8_t(blk[2 + 5]) == -127);
  float y[32];
  dequantize_q8_0_block(blk, y);
  const float d = f16_to_f32(dh);
  for (int i = 0; i < 32; ++i) {
    CHECK(int8_t(blk[2 + i]) == int(std::round(x[i] * (127.0f / 4.0f))));
    CHECK(std::fabs(y[i] - x[i]) <= 0.5f * d + 4.0f * 1e-3f);  // half a step + f16 scale error
  }
  float z[32] = {};
  quantize_q8_0_block(z, blk);
  dequantize_q8_0_block(blk, y);
  for (float v : y) CHECK(v == 0.0f);
}

// ggml maps the largest magnitude to -8, so +max clamps to +7: error up to one full step.
TEST_CASE("q4_0: round-trip error within one step") {
  float x[32];
  for (int i = 0; i < 32; ++i) x[i] = std::cos(float(i) * 0.7f);
  uint8_t blk[kQ4_0Bytes];
  quantize_q4_0_block(x, blk);
  float y[32];
  dequantize_q4_0_block(blk, y);
  uint16_t dh;
  std::memcpy(&dh, blk, 2);
  const float d = std::fabs(f16_to_f32(dh));
  for (int i = 0; i < 32; ++i) CHECK(std::fabs(y[i] - x[i]) <= d + 1e-3f);
}

TEST_CASE("first_non_finite finds the first NaN/Inf of f32, f16 and bf16 at any position") {
  std::mt19937 rng(5);
  for (uint64_t n : {1ull, 63ull, 64ull, 65ull, 200ull}) {
    std::vector<float> x(n);
    for (auto& v : x) v = std::uniform_real_distribution<float>(-60000.f, 60000.f)(rng);
    auto pack = [&](auto conv, size_t w) {
      std::vector<uint8_t> b(n * w);
      for (uint64_t i = 0; i < n; ++i) {
        auto h = conv(x[i]);
        std::memcpy(b.data() + i * w, &h, w);
      }
      return b;
    };
    auto f32 = [](float v) { return v; };
    auto f16 = [](float v) { return f32_to_f16(v); };
    auto bf16 = [](float v) { return f32_to_bf16(v); };
    CHECK(first_non_finite_f32(pack(f32, 4).data(), n) == -1);
    CHECK(first_non_finite_f16(pack(f16, 2).data(), n) == -1);
    CHECK(first_non_finite_bf16(pack(bf16, 2).data(), n) == -1);
    for (float bad : {std::nanf(""), INFINITY, -INFINITY}) {
      const uint64_t at = rng() % n;
      const float keep = x[at];
      x[at] = bad;
      if (at + 1 < n) x[n - 1] = bad;  // a later one must not be reported first
      CHECK(first_non_finite_f32(pack(f32, 4).data(), n) == int64_t(at));
      CHECK(first_non_finite_f16(pack(f16, 2).data(), n) == int64_t(at));
      CHECK(first_non_finite_bf16(pack(bf16, 2).data(), n) == int64_t(at));
      x[at] = keep;
      x[n - 1] = 1.0f;
    }
  }
}
