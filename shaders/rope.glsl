// RoPE, shared by rope.comp, rope_kv.comp and matmul_lanes.comp's RoPE epilogue. The including
// shader declares the push block `pc` with theta, n_rot, freq_scale, pos_offset, first,
// first_slot and step, and has_factors, has_table and mode unless it defines ROPE_FACTORS,
// ROPE_TABLE and ROPE_REGISTERS; the buffers `x`, `pos` and `factors`; and includes dyn.glsl first.
//
// Row t's position: pos[pos_offset + t] from a table (has_table), plus first + step * t, where
// `first` is a dynamic scalar (a causal run is first = t0, step 1; a draft level's rows share one
// position, step 0).
// ROPE_TABLE / ROPE_FACTORS: an including shader may make has_table / has_factors constants.
#ifndef ROPE_TABLE
#define ROPE_TABLE (pc.has_table != 0)
#endif
#ifndef ROPE_FACTORS
#define ROPE_FACTORS (pc.has_factors != 0)
#endif
int rope_position(uint t) {
  return (ROPE_TABLE ? pos[pc.pos_offset + t] : 0) + int(dyn(pc.first, pc.first_slot) + pc.step * t);
}

// (cos, sin) of pair i at position p, in llama.cpp's order of operations (ggml_rope_cache_init):
//   (p * theta^(-2i/n_rot) / factors[i]) * freq_scale
// factors: Llama 3 frequency factors (rope_freqs.weight, n_rot/2), read only when has_factors;
// freq_scale: linear scaling, 1 / rope.scaling.factor. theta^(-2i/n_rot) in f32 exactly as the
// CPU reference computes it.
// `precise` throughout: the kernels that rotate (rope, rope_kv_write, and the qkv matmul's RoPE
// epilogue, matmul_lanes.comp) must agree bit for bit, so no compiler may fuse these differently.
vec2 rope_cos_sin(uint i, int p) {
  precise const float freq = pow(pc.theta, -float(2 * i) / float(pc.n_rot));
  precise float ang = float(p) * freq;
  if (ROPE_FACTORS) ang /= factors[i];
  ang *= pc.freq_scale;
  return vec2(cos(ang), sin(ang));
}

// The pair (x0, x1) of pair index i turned to position p.
vec2 rope_turn(float x0, float x1, uint i, int p) {
  const vec2 cs = rope_cos_sin(i, p);
  precise const vec2 r = vec2(x0 * cs.x - x1 * cs.y, x0 * cs.y + x1 * cs.x);
  return r;
}

#ifndef ROPE_REGISTERS  // the including shader rotates values it holds, not xin
// The two values pair i of the head at xin[base] turns: MODE 0 (2i, 2i+1), GGUF/llama.cpp "normal"
// order; MODE 1 (i, i + n_rot/2), Hugging Face rotate_half (llama.cpp "neox") order.
uvec2 rope_pair(uint base, uint i) {
  return pc.mode == 0 ? uvec2(base + 2 * i, base + 2 * i + 1) : uvec2(base + i, base + i + pc.n_rot / 2);
}

// Pair i of the head at xin[base] turned to position p: its two new values, in rope_pair's order.
vec2 rope_rotate(uint base, uint i, int p) {
  const uvec2 ab = rope_pair(base, i);
  return rope_turn(xin[ab.x], xin[ab.y], i, p);
}
#endif
