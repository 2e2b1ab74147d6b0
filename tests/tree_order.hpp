// The ranking order of the GPU kernels (shaders/order.glsl), for the CPU references: value
// descending, then lower index; +inf > finite > -inf > NaN, -0 == +0, all NaNs equal. A total
// order, so sorting by it is well defined whatever NaN or Inf the data holds.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>
#include <span>

namespace vkspec::test {

inline uint32_t order_key(float x) {
  uint32_t b = std::bit_cast<uint32_t>(x);
  const uint32_t mag = b & 0x7fffffffu;
  if (mag > 0x7f800000u) return 0;  // NaN
  if (mag == 0) b = 0;              // -0 == +0
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// (a, ia) ranks strictly before (b, ib).
inline bool ranks_before(float a, uint32_t ia, float b, uint32_t ib) {
  const uint32_t ka = order_key(a), kb = order_key(b);
  return ka != kb ? ka > kb : ia < ib;
}

// The larger in the order, `a` on equal keys (NaN only if both are NaN).
inline float order_max(float a, float b) { return order_key(b) > order_key(a) ? b : a; }

// Index of the first-ranked value (NaN last, ties to the lower index).
inline uint32_t order_argmax(std::span<const float> x) {
  uint32_t best = 0;
  for (uint32_t i = 1; i < x.size(); ++i)
    if (order_key(x[i]) > order_key(x[best])) best = i;
  return best;
}

// Equal as the kernels promise: the same bits, or both NaN (payloads may differ).
inline bool same_float(float a, float b) {
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b) || (a != a && b != b);
}

inline const float kNaN = std::numeric_limits<float>::quiet_NaN();
inline const float kInf = std::numeric_limits<float>::infinity();

}  // namespace vkspec::test
