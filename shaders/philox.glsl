// Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy as 1, 2, 3",
// SC'11): 10 rounds of two 32x32->64 multiplies with a Weyl-sequence key schedule. Counter-based:
// the same (key, counter) gives the same bits on every device, no state is carried.
uvec4 philox4x32_10(uvec4 c, uvec2 k) {
  for (int r = 0; r < 10; ++r) {
    uint hi0, lo0, hi1, lo1;
    umulExtended(0xD2511F53u, c.x, hi0, lo0);
    umulExtended(0xCD9E8D57u, c.z, hi1, lo1);
    c = uvec4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
    k += uvec2(0x9E3779B9u, 0xBB67AE85u);
  }
  return c;
}

// u in [0, 1) with 24 random bits (exact in f32), keyed by (seed, step, node, trial).
float philox_uniform(uvec2 seed, uint step, uint node, uint trial) {
  const uint x = philox4x32_10(uvec4(step, node, trial, 0x766b7370u), seed).x;  // 'vksp'
  return float(x >> 8) * (1.0 / 16777216.0);
}
