#version 450
// A forward layer's RoPE and K/V store in one pass (rope.comp + kv_write.comp): in row r of a
// qkv projection, the H query heads (width D, from column 0) rotate in place; the Hkv key heads
// (from k_col) are rotated on their way into cache row slot + r, and the values (from v_col) are
// copied into the V cache. The K columns of the qkv row are left as the projection wrote them.
// Rotation as in rope.comp (MODE 0 pairs (2i, 2i+1), MODE 1 halves (i, i + n_rot/2), the first
// n_rot dims of a head); row r at rope_position(r) (rope.glsl); the slot is a dynamic scalar.
//
// Row r is gl_WorkGroupID.y. Its work items: H·n_rot/2 query pairs, then U key units, then U value
// units, where a unit is one cache word: an f16 pair packed in a u32 (KV_F16, low half first,
// even kv) or one f32 value. k_base / v_base: the layer's first value in its cache buffer.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;

#include "pair.glsl"
layout(set = 0, binding = 0, std430) buffer X { float xin[]; } PAIRED(X_);
#define xin PAIR_AT(X_).xin
layout(set = 0, binding = 1, std430) readonly buffer Pos { int pos[]; } PAIRED(Pos_);
#define pos PAIR_AT(Pos_).pos
layout(set = 0, binding = 2, std430) readonly buffer Factors { float factors[]; } PAIRED(Factors_);
#define factors PAIR_AT(Factors_).factors
#ifdef KV_F16
layout(set = 0, binding = 3, std430) writeonly buffer KC { uint kc[]; } PAIRED(KC_);
#define kc PAIR_AT(KC_).kc
layout(set = 0, binding = 4, std430) writeonly buffer VC { uint vc[]; } PAIRED(VC_);
#define vc PAIR_AT(VC_).vc
#else
layout(set = 0, binding = 3, std430) writeonly buffer KC { float kc[]; } PAIRED(KC_);
#define kc PAIR_AT(KC_).kc
layout(set = 0, binding = 4, std430) writeonly buffer VC { float vc[]; } PAIRED(VC_);
#define vc PAIR_AT(VC_).vc
#endif
#define DYN_BINDING 5
#include "dyn.glsl"
layout(push_constant) uniform Push {
  uint H, D, n_rot, x_offset, x_stride, pos_offset, mode;
  float theta, freq_scale;
  uint has_factors, has_table, first, first_slot, step;
  uint kv, k_col, v_col, slot, slot_slot, k_base, v_base;
} pc;
#include "rope.glsl"

// Dim d of the head whose first value is xin[base], rotated at position p (unrotated past n_rot).
float rotated(uint base, uint d, int p) {
  if (d >= pc.n_rot) return xin[base + d];
  const uint half_rot = pc.n_rot / 2;
  const bool second = pc.mode == 0 ? (d & 1u) != 0 : d >= half_rot;
  const vec2 v = rope_rotate(base, pc.mode == 0 ? d / 2 : (second ? d - half_rot : d), p);
  return second ? v.y : v.x;
}

void main() {
  const uint half_rot = pc.n_rot / 2, r = gl_WorkGroupID.y;
  const uint row = pc.x_offset + r * pc.x_stride;
  const uint nq = pc.H * half_rot;
#ifdef KV_F16
  const uint U = pc.kv / 2, E = 2;
#else
  const uint U = pc.kv, E = 1;
#endif
  uint g = gl_GlobalInvocationID.x;
  if (g < nq) {  // a query pair, in place
    const uint i = g % half_rot, base = row + (g / half_rot) * pc.D;
    const uvec2 ab = rope_pair(base, i);
    const vec2 v = rope_rotate(base, i, rope_position(r));
    xin[ab.x] = v.x;
    xin[ab.y] = v.y;
    return;
  }
  g -= nq;
  if (g >= 2 * U) return;
  const uint cache_row = dyn(pc.slot, pc.slot_slot) + r;
  const bool key = g < U;
  const uint u = key ? g : g - U, e = u * E;  // first value of the unit within the K / V row
  float v0, v1 = 0.0;
  if (key) {
    const int p = rope_position(r);
    const uint k0 = row + pc.k_col, d = e % pc.D;
    if (E == 2 && pc.mode == 0 && d + 1 < pc.n_rot && (d & 1u) == 0) {
      // An f16 word of adjacent pairs holds one whole pair: one angle for both values.
      const vec2 v = rope_rotate(k0 + (e / pc.D) * pc.D, d / 2, p);
      v0 = v.x, v1 = v.y;
    } else {
      v0 = rotated(k0 + (e / pc.D) * pc.D, d, p);
      if (E == 2) v1 = rotated(k0 + ((e + 1) / pc.D) * pc.D, (e + 1) % pc.D, p);
    }
  } else {
    v0 = xin[row + pc.v_col + e];
    if (E == 2) v1 = xin[row + pc.v_col + e + 1];
  }
#ifdef KV_F16
  const uint w = packHalf2x16(vec2(v0, v1));
  if (key) kc[pc.k_base / 2 + cache_row * U + u] = w;
  else vc[pc.v_base / 2 + cache_row * U + u] = w;
#else
  if (key) kc[pc.k_base + cache_row * U + u] = v0;
  else vc[pc.v_base + cache_row * U + u] = v0;
#endif
}
