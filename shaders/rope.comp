#version 450
// In-place rotary embedding of x(T, H, D). Row t's position is pos[pos_offset + t] from a table
// (has_table), plus first + step * t, where `first` is a dynamic scalar (dyn.glsl): a causal run
// is (first = t0, step 1), a draft level's rows share one position (step 0).
// MODE 0: consecutive pairs (2i, 2i+1) — GGUF/llama.cpp "normal" order.
// MODE 1: halves (i, i + n_rot/2) — Hugging Face rotate_half (llama.cpp "neox") order.
// Only the first n_rot dims of each head rotate. One invocation per pair.
// Angle of pair i at position p, in llama.cpp's order of operations (ggml_rope_cache_init):
//   (p * theta^(-2i/n_rot) / factors[i]) * freq_scale
// factors: Llama 3 frequency factors (rope_freqs.weight, n_rot/2), read only when has_factors;
// freq_scale: linear scaling, 1 / rope.scaling.factor.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;

layout(set = 0, binding = 0, std430) buffer X { float x[]; };
layout(set = 0, binding = 1, std430) readonly buffer Pos { int pos[]; };
layout(set = 0, binding = 2, std430) readonly buffer Factors { float factors[]; };
#define DYN_BINDING 3
#include "dyn.glsl"
layout(push_constant) uniform Push {
  uint T, H, D, n_rot, x_offset, x_stride, pos_offset, mode;
  float theta, freq_scale;
  uint has_factors, has_table, first, first_slot, step;
} pc;

void main() {
  const uint half_rot = pc.n_rot / 2;
  const uint g = gl_GlobalInvocationID.x;
  if (g >= pc.T * pc.H * half_rot) return;
  const uint i = g % half_rot, h = (g / half_rot) % pc.H, t = g / (half_rot * pc.H);
  const uint base = pc.x_offset + t * pc.x_stride + h * pc.D;
  const uint a = pc.mode == 0 ? base + 2 * i : base + i;
  const uint b = pc.mode == 0 ? a + 1 : a + half_rot;
  // theta^(-2i/n_rot) computed in f32 exactly as the CPU reference does.
  const float freq = pow(pc.theta, -float(2 * i) / float(pc.n_rot));
  const int p = (pc.has_table != 0 ? pos[pc.pos_offset + t] : 0) + int(dyn(pc.first, pc.first_slot) + pc.step * t);
  float ang = float(p) * freq;
  if (pc.has_factors != 0) ang /= factors[i];
  ang *= pc.freq_scale;
  const float c = cos(ang), s = sin(ang);
  const float x0 = x[a], x1 = x[b];
  x[a] = x0 * c - x1 * s;
  x[b] = x0 * s + x1 * c;
}
