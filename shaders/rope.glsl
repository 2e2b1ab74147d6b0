// RoPE angles, shared by rope.comp and rope_kv.comp. The including shader declares the push
// block `pc` with theta, n_rot, freq_scale, has_factors, has_table, pos_offset, first,
// first_slot and step, the buffers `pos` and `factors`, and includes dyn.glsl first.
//
// Row t's position: pos[pos_offset + t] from a table (has_table), plus first + step * t, where
// `first` is a dynamic scalar (a causal run is first = t0, step 1; a draft level's rows share one
// position, step 0).
int rope_position(uint t) {
  return (pc.has_table != 0 ? pos[pc.pos_offset + t] : 0) + int(dyn(pc.first, pc.first_slot) + pc.step * t);
}

// (cos, sin) of pair i at position p, in llama.cpp's order of operations (ggml_rope_cache_init):
//   (p * theta^(-2i/n_rot) / factors[i]) * freq_scale
// factors: Llama 3 frequency factors (rope_freqs.weight, n_rot/2), read only when has_factors;
// freq_scale: linear scaling, 1 / rope.scaling.factor. theta^(-2i/n_rot) in f32 exactly as the
// CPU reference computes it.
vec2 rope_cos_sin(uint i, int p) {
  const float freq = pow(pc.theta, -float(2 * i) / float(pc.n_rot));
  float ang = float(p) * freq;
  if (pc.has_factors != 0) ang /= factors[i];
  ang *= pc.freq_scale;
  return vec2(cos(ang), sin(ang));
}
