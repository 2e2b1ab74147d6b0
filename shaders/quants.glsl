// Block types read in place in their GGUF layout (included by weights.glsl for WEIGHTS_RAW).
//
// q4_0, q5_0, q5_1, q3_K, q4_K, q5_K, q6_K and iq4_xs keep the file's bytes on the device: a
// chunk's rows back to back (on the texel path short rows interleaved block by block, raw_block;
// q4_K and q5_K texel by texel, raw_texel), each row K / RAW_ELEMS blocks of RAW_BYTES, no
// padding — so device memory equals file size. A block may therefore start at any even byte
// (18-, 22- and 110-byte blocks); the helpers below fetch the 16-byte texels covering a span once
// and shift the words into place. The host pads each chunk by 32 bytes so the last span's extra
// texel exists. q6_K alone is reordered (the same bytes in another order, q6_texel below) so that
// its blocks start on a texel.
// Layouts and the rule for each value: include/vkspec/quants.hpp (the CPU reference),
// which computes every value with the same float operations in the same order, so a decoded
// weight is bit-identical on both sides; `precise` keeps the compiler from fusing a
// multiply-add into an fma that would round differently.
//
// decode_raw(row, fb, nfb, rows, s, v, scale): sub-block s (32 values) of file block fb (of nfb
// a row) of `row` in a chunk of `rows` rows; value 4i + c is v[i][c] * scale.

#if defined(WT_Q4_0)
const uint RAW_ELEMS = 32, RAW_BYTES = 18;
#elif defined(WT_Q5_0)
const uint RAW_ELEMS = 32, RAW_BYTES = 22;
#elif defined(WT_Q5_1)
const uint RAW_ELEMS = 32, RAW_BYTES = 24;
#elif defined(WT_Q3_K)
const uint RAW_ELEMS = 256, RAW_BYTES = 110;
#elif defined(WT_Q4_K)
const uint RAW_ELEMS = 256, RAW_BYTES = 144;
#elif defined(WT_Q5_K)
const uint RAW_ELEMS = 256, RAW_BYTES = 176;
#elif defined(WT_Q6_K)
const uint RAW_ELEMS = 256, RAW_BYTES = 210;
#elif defined(WT_IQ4_XS)
const uint RAW_ELEMS = 256, RAW_BYTES = 136;
#else
#error "quants.glsl: unknown block type"
#endif
const uint RAW_SUBS = RAW_ELEMS / 32;  // 32-value sub-blocks per block
// The types whose values are n·d − m with a per-sub-block m (decode_raw_dm).
#if defined(WT_Q5_1) || defined(WT_Q4_K) || defined(WT_Q5_K)
const bool RAW_MIN = true;
#else
const bool RAW_MIN = false;
#endif

// The texel-path tiles of a chunk's rows (weights.glsl says why rows are interleaved at all).
// raw_block(row, fb, nfb, rows): the device index of file block fb (of nfb a row) of `row` in a
// chunk of `rows` rows. A short row (at most RAW_TILE_MAX_ROW_BYTES, ops/matmul.cpp:
// kRawTileMaxRowBytes) is too short a memory stream for the prefetcher to follow when every lane
// walks its own: tiles of RAW_TILE rows (a lanes workgroup's at batch 1) are interleaved block by
// block, one stream a tile. Single-threaded lavapipe, batch 1: q6_K 32768 x 512 5.3 → 4.9 ms;
// q5_0 512 x 1408 256 → 157 µs, q4_0 190 → 132 µs. Longer rows are streams enough and
// interleaved block by block measured slower (q4_K, before its texel tiles below: 8192 x 2048,
// 1152-byte rows, 2.65 → 2.8-3.1 ms; 4096², 2.08 → 2.6-2.8 ms), so they stay row-major, as on the
// storage path.
const uint RAW_TILE = 16, RAW_TILE_MAX_ROW_BYTES = 1024;
uint raw_block(uint row, uint fb, uint nfb, uint rows) {
#ifdef WEIGHTS_TEXEL
  const uint tile = nfb * RAW_BYTES <= RAW_TILE_MAX_ROW_BYTES ? RAW_TILE : 1u;
#else
  const uint tile = 1u;
#endif
  return tile_index(row, fb, nfb, rows, tile);
}

#if defined(WT_Q4_K) || defined(WT_Q5_K)
// q4_K and q5_K blocks are whole texels (144, 176 bytes), so on the texel path every row is
// interleaved texel by texel in tiles of RAW_TEXEL_TILE rows, as f16's are (ops/matmul.cpp:
// kRawTexelTile): the lanes of a workgroup, one row each, then fetch neighbouring texels, where
// with whole blocks side by side each lane's fetch was a cache line of its own. Single-threaded
// lavapipe, blocks interleaved (short rows) or row-major → texels interleaved, batch 1: q4_K
// 512x512 54.7 → 47.8 µs, 2816x512 275 → 249 µs, 4096² 2.09 → 1.92 ms, q5_K 61.0 → 53.7 µs,
// 309 → 278 µs, 2.35 → 2.15 ms; batch 16: q4_K 455 → 389 µs, 2.50 → 2.16 ms, 20.0 → 18.8 ms.
// raw_texel(row, fb, i, nfb, rows): the device index of texel i of that block.
const uint RAW_TEXEL_TILE = 16, RAW_BLOCK_TEXELS = RAW_BYTES / 16;
uint raw_texel(uint row, uint fb, uint i, uint nfb, uint rows) {
#ifdef WEIGHTS_TEXEL
  const uint tile = RAW_TEXEL_TILE;
#else
  const uint tile = 1u;
#endif
  return tile_index(row, fb * RAW_BLOCK_TEXELS + i, nfb * RAW_BLOCK_TEXELS, rows, tile);
}
#endif

// The 16 bits at byte b (even).
uint raw_u16(uint b) {
  const uint w = load_w(b >> 4)[(b >> 2) & 3u];
  return (b & 2u) != 0 ? w >> 16 : w & 0xffffu;
}
float raw_half(uint b) { return unpackHalf2x16(raw_u16(b)).x; }

#if defined(WT_Q6_K)
// q6_K's device order: every block's 208 bytes of ql, qh and scales (13 texels, Q6_BODY_TEXELS)
// start on a texel, its f16 d apart. In the file a 210-byte block starts at any even byte and
// every word of it had to be shifted out of two texels (ops/matmul.cpp: upload_weight reorders).
// - Storage path: groups of 8 blocks (a chunk's last group may be shorter), the 8 blocks' d in the
//   group's first texel (block j's in half j), then each block's body — 105 texels, the 1680
//   bytes the file holds for 8 blocks.
// - Texel path: tiles of Q6_TILE rows (the last one shorter, h rows), block by block; in a
//   tile's block, body texel i of every row of the tile (16·i + row), then the rows' d, 8 to a
//   texel: 210 texels for 16 rows, the file's 3360 bytes. As with q4_K's texels (raw_texel), the
//   lanes of a workgroup, one row each, then fetch neighbouring texels, where with whole blocks
//   side by side each lane's fetch was a cache line of its own; a short row's blocks of a tile
//   were 16 streams of 210 bytes (32000x512 at batch 1 cost 1.6x a 4096² matrix per byte).
const uint Q6_GROUP_TEXELS = 105, Q6_BODY_TEXELS = 13;
#ifdef WEIGHTS_TEXEL
const uint Q6_TILE = 16;  // ops/matmul.cpp: kRawTexelTile
// The first texel of block fb of the tile that holds `row`, with the tile's rows h and the row's place in it.
uint q6_tile_block(uint row, uint fb, uint nfb, uint rows, out uint h, out uint rho) {
  const uint t0 = row - row % Q6_TILE;
  h = min(Q6_TILE, rows - t0);
  rho = row - t0;
  return (t0 / Q6_TILE) * nfb * (Q6_BODY_TEXELS * Q6_TILE + Q6_TILE / 8) + fb * (Q6_BODY_TEXELS * h + (h + 7) / 8);
}
// The device texel of body texel i (0..12) of block fb (of nfb a row) of `row` in a chunk of `rows` rows.
uint q6_texel(uint row, uint fb, uint i, uint nfb, uint rows) {
  uint h, rho;
  const uint t = q6_tile_block(row, fb, nfb, rows, h, rho);
  return t + i * h + rho;
}
// d of that block in the low half of a word (the caller unpacks).
uint q6_d_word(uint row, uint fb, uint nfb, uint rows) {
  uint h, rho;
  const uint t = q6_tile_block(row, fb, nfb, rows, h, rho) + Q6_BODY_TEXELS * h + rho / 8;
  return raw_u16((t << 4) + 2 * (rho % 8));
}
#else
uint q6_texel(uint row, uint fb, uint i, uint nfb, uint rows) {
  const uint db = raw_block(row, fb, nfb, rows);
  return (db / 8) * Q6_GROUP_TEXELS + 1 + Q6_BODY_TEXELS * (db % 8) + i;
}
uint q6_d_word(uint row, uint fb, uint nfb, uint rows) {
  const uint db = raw_block(row, fb, nfb, rows);
  return raw_u16(((db / 8) * Q6_GROUP_TEXELS << 4) + 2 * (db % 8));
}
#endif
#endif

// Words s .. s+3 of the 8 words (p, q), s in 0..4. Vector selects, not an array indexed by s:
// CPU rasterizers spill a dynamically indexed local array to memory, which cost q6_K 5x.
uvec4 window(uvec4 p, uvec4 q, uint s) {
  return s == 0u ? p : s == 1u ? uvec4(p.yzw, q.x) : s == 2u ? uvec4(p.zw, q.xy) : s == 3u ? uvec4(p.w, q.xyz) : q;
}
// The 16 bytes at byte b (even) from the texels (p, q) that cover them, p holding byte b.
uvec4 span16(uvec4 p, uvec4 q, uint b) {
  const uint s = (b >> 2) & 3u;
  const uvec4 lo = window(p, q, s);
  return (b & 2u) == 0 ? lo : (lo >> 16) | (window(p, q, s + 1) << 16);
}

// w[i] = the 4 bytes at b + 4i (b even), for 16 and 32 bytes: 2 and 3 texels, each fetched once.
void raw_words4(uint b, out uint w[4]) {
  const uvec4 v = span16(load_w(b >> 4), load_w((b >> 4) + 1), b);
  for (uint i = 0; i < 4; ++i) w[i] = v[i];
}
void raw_words8(uint b, out uint w[8]) {
  const uvec4 a = load_w(b >> 4), c = load_w((b >> 4) + 1), e = load_w((b >> 4) + 2);
  const uvec4 v0 = span16(a, c, b), v1 = span16(c, e, b);
  for (uint i = 0; i < 4; ++i) {
    w[i] = v0[i];
    w[4 + i] = v1[i];
  }
}

// Conversions to float go through int (values < 2^31): a CPU without AVX-512 has no unsigned
// conversion, and the compiler emulates one in several instructions per value.
// The 4 bytes of a word, and its 8 nibbles as low (bytes' bits 0..3) and high halves.
uvec4 bytes4(uint w) { return (uvec4(w) >> uvec4(0, 8, 16, 24)) & 0xffu; }
uvec4 lo4(uint w) { return (uvec4(w) >> uvec4(0, 8, 16, 24)) & 0xfu; }
uvec4 hi4(uint w) { return (uvec4(w) >> uvec4(4, 12, 20, 28)) & 0xfu; }
// Bit `bit` of each of the 4 bytes of w.
uvec4 bit4(uint w, uint bit) { return (uvec4(w) >> (uvec4(0, 8, 16, 24) + bit)) & 1u; }
// Bits j .. j+3 of x, one per component.
uvec4 bits_from(uint x, uint j) { return (uvec4(x) >> (uvec4(0, 1, 2, 3) + j)) & 1u; }

#if defined(WT_Q4_K) || defined(WT_Q5_K)
// The 6-bit scale and min of sub-block j from the 12 packed bytes (texel words y, z, w): bytes
// 0-3 hold the low 6 bits of scales 0-3 (and the top 2 bits of scales 4-7), bytes 4-7 the same
// for the mins, bytes 8-11 the low 4 bits of scales and mins 4-7. Written with selects on j
// rather than an indexed byte: j may be dynamic (matmul_lanes.comp's chunk loop).
void k4_scale_min(uvec4 h, uint j, out float sc, out float m) {
  const uint jb = 8 * (j & 3u);
  const uint by = (h.y >> jb) & 0xffu, bz = (h.z >> jb) & 0xffu, bw = (h.w >> jb) & 0xffu;
  sc = float(int(j < 4 ? by & 63u : (bw & 0xfu) | ((by >> 6) << 4)));
  m = float(int(j < 4 ? bz & 63u : (bw >> 4) | ((bz >> 6) << 4)));
}
#endif

#if defined(WT_IQ4_XS)
// The iq4_nl table (-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113) as
// the rounded quartic through it: the quartic is within 0.477 of every entry, so rounding gives
// each one exactly (checked in f32 for all 16). A table indexed per value is a per-lane gather
// on CPU rasterizers; this is a conversion, four multiply-adds (fused or not: the rounding
// errors are far inside the 0.023 margin) and a rounding.
vec4 iq4(uvec4 n) {
  const vec4 x = vec4(ivec4(n));
  return round(fma(fma(fma(fma(vec4(0.0013247202), x, vec4(0.041216824)), x, vec4(-1.5001836)), x, vec4(24.743246)), x,
                   vec4(-127.0436)));
}
#endif

#if defined(WT_Q4_0) || defined(WT_Q5_0) || defined(WT_Q5_1)
// A 32-value block from its words as integers n and factors: value 4i + c is n[i][c]·d − m.
// `hd` holds the block's first bytes: the f16 d in its low half (q5_1: d | m << 16); q[k] is
// the word after the scale(s): at byte 2 + 4k (q4_0: the nibbles; q5_0: qh, then the nibbles) or
// 4 + 4k (q5_1: qh, then the nibbles). Whoever fetched the words (decode_raw from any even byte,
// matmul_lanes.comp's 8-block groups from registers) decodes them here, so both give the same bits.
// A dot product then costs d·Σn·x − m·Σx per block, not a multiply and an add per value.
void decode32_words(uint hd, uint q[5], out vec4 n[8], out float d, out float m) {
  const vec2 dm = unpackHalf2x16(hd);
  d = dm.x;
#if defined(WT_Q4_0)
  m = 0.0;
  for (uint i = 0; i < 4; ++i) {
    n[i] = vec4(ivec4(lo4(q[i])) - 8);
    n[4 + i] = vec4(ivec4(hi4(q[i])) - 8);
  }
#else
  const int off = RAW_MIN ? 0 : 16;
  m = RAW_MIN ? -dm.y : 0.0;
  for (uint i = 0; i < 4; ++i) {
    n[i] = vec4(ivec4(lo4(q[1 + i]) | (bits_from(q[0], 4 * i) << 4)) - off);
    n[4 + i] = vec4(ivec4(hi4(q[1 + i]) | (bits_from(q[0], 16 + 4 * i) << 4)) - off);
  }
#endif
}
#endif

#if defined(WT_Q4_0) || defined(WT_Q5_0) || defined(WT_Q5_1)
// The 16 bytes at byte o (even, 0 ..16) of the texels (p, q).
uvec4 span16_at(uvec4 p, uvec4 q, uint o) {
  const uvec4 lo = window(p, q, o >> 2);
  return (o & 2u) == 0 ? lo : (lo >> 16) | (window(p, q, (o >> 2) + 1) << 16);
}

// Block fb's words as decode32_words takes them: hd (d, q5_1: d | m << 16) and q. A block lies in
// the two texels from its first byte's (q5_0's 22 bytes: three), each fetched once; fetching d
// and the words apart took one texel more (a per-lane call on CPU rasterizers). Single-threaded
// lavapipe, 512x1408 at batch 1, the lanes kernel: q5_0 159-167 → 148-152 µs, q5_1 152 → 106,
// q4_0 136-141 → 128.
void raw32_words(uint row, uint fb, uint nfb, uint rows, out uint hd, out uint q[5]) {
  const uint b = raw_block(row, fb, nfb, rows) * RAW_BYTES, o = b & 15u;  // the device block's byte
  const uvec4 p = load_w(b >> 4), c = load_w((b >> 4) + 1);
  const uint w0 = p[o >> 2];  // o < 16
  hd = (o & 2u) != 0 ? w0 >> 16 : w0 & 0xffffu;
#if defined(WT_Q4_0)
  const uvec4 n = span16_at(p, c, o + 2);  // the 16 bytes of nibbles: o + 17 < 32
  q = uint[5](n.x, n.y, n.z, n.w, 0u);
#elif defined(WT_Q5_0)
  const uvec4 e = load_w((b >> 4) + 2);
  const uvec4 n = span16_at(p, c, o + 2), f = span16_at(c, e, o + 2);  // qh, then the nibbles
  q = uint[5](n.x, n.y, n.z, n.w, f.x);
#else  // q5_1: b is a multiple of 8, so o is 0 or 8 and the 24 bytes end inside c
  hd = w0;
  const uvec4 n = o == 0u ? p : uvec4(p.zw, c.xy);
  const uvec2 f = o == 0u ? c.xy : c.zw;
  q = uint[5](n.y, n.z, n.w, f.x, f.y);
#endif
}
#endif

#if defined(WT_Q5_1)
// decode_raw_dm(row, fb, nfb, rows, s, n, d, m): the block as integers n and its factors, value
// 4i + c being n[i][c]·d − m (decode_raw computes n·d + (−m), the same value). (The 256-value
// types: decode_words.)
void decode_raw_dm(uint row, uint fb, uint nfb, uint rows, uint s, out vec4 n[8], out float d, out float m) {
  uint hd, q[5];
  raw32_words(row, fb, nfb, rows, hd, q);
  decode32_words(hd, q, n, d, m);
}
#endif

void decode_raw(uint row, uint fb, uint nfb, uint rows, uint s, out vec4 v[8], out float scale) {
#if defined(WT_Q3_K) || defined(WT_IQ4_XS)
  const uint db = raw_block(row, fb, nfb, rows), b = db * RAW_BYTES;  // the device block, its byte
#endif
#if defined(WT_Q4_0) || defined(WT_Q5_0)
  uint hd, q[5];
  raw32_words(row, fb, nfb, rows, hd, q);
  float m;
  decode32_words(hd, q, v, scale, m);
#elif defined(WT_Q5_1)
  uint hd, q[5];  // hd = d | m << 16, q[0] = qh, q[1..4] = nibbles
  raw32_words(row, fb, nfb, rows, hd, q);
  const vec2 dm = unpackHalf2x16(hd);
  scale = 1.0;
  for (uint i = 0; i < 4; ++i) {
    precise vec4 a = vec4(lo4(q[1 + i]) | (bits_from(q[0], 4 * i) << 4)) * dm.x + dm.y;
    precise vec4 c = vec4(hi4(q[1 + i]) | (bits_from(q[0], 16 + 4 * i) << 4)) * dm.x + dm.y;
    v[i] = a;
    v[4 + i] = c;
  }
#elif defined(WT_Q4_K) || defined(WT_Q5_K)
  // Texel 0 = d, dmin, 12 scale bytes (q5_K: 2 texels of fifth bits next), then the quants.
  const uvec4 h = load_w(raw_texel(row, fb, 0, nfb, rows));
  const vec2 dd = unpackHalf2x16(h.x);
  float sc, m;
  k4_scale_min(h, s, sc, m);
  precise float dl = dd.x * sc;
  precise float ml = dd.y * m;
  scale = 1.0;
#if defined(WT_Q4_K)
  const uint qt = 1 + 2 * (s / 2);
#else
  const uint qt = 3 + 2 * (s / 2);
  const uvec4 qh0 = load_w(raw_texel(row, fb, 1, nfb, rows)), qh1 = load_w(raw_texel(row, fb, 2, nfb, rows));
#endif
  const uvec4 q0 = load_w(raw_texel(row, fb, qt, nfb, rows)), q1 = load_w(raw_texel(row, fb, qt + 1, nfb, rows));
  for (uint i = 0; i < 8; ++i) {
    const uint w = i < 4 ? q0[i] : q1[i - 4];
    uvec4 n = (s & 1u) != 0 ? hi4(w) : lo4(w);
#if defined(WT_Q5_K)
    n |= bit4(i < 4 ? qh0[i] : qh1[i - 4], s) << 4;
#endif
    precise vec4 x = dl * vec4(n) - ml;
    v[i] = x;
  }
#elif defined(WT_Q6_K)
  const uint n = s / 4, j = s % 4;
  scale = unpackHalf2x16(q6_d_word(row, fb, nfb, rows)).x;
  const uvec4 st = load_w(q6_texel(row, fb, 12, nfb, rows));  // the 16 int8 scales; values 0..15 and 16..31 of s: bytes 2s, 2s + 1
  const uint sw = j / 2 == 0 ? (n == 0 ? st.x : st.z) : (n == 0 ? st.y : st.w);
  const uint sc2 = (j % 2) != 0 ? sw >> 16 : sw;
  const int sc0 = int(sc2 << 24) >> 24, sc1 = int(sc2 << 16) >> 24;
  const uint qlt = 4 * n + 2 * (j % 2), qht = 8 + 2 * n;  // body texels: ql bytes 64n + 32(j % 2), qh 128 + 32n
  const uvec4 ql0 = load_w(q6_texel(row, fb, qlt, nfb, rows)), ql1 = load_w(q6_texel(row, fb, qlt + 1, nfb, rows));
  const uvec4 qh0 = load_w(q6_texel(row, fb, qht, nfb, rows)), qh1 = load_w(q6_texel(row, fb, qht + 1, nfb, rows));
  for (uint i = 0; i < 8; ++i) {
    const uint l = i < 4 ? ql0[i] : ql1[i - 4], h = i < 4 ? qh0[i] : qh1[i - 4];
    const uvec4 lo = (j / 2) != 0 ? hi4(l) : lo4(l);
    const uvec4 hi = (bytes4(h) >> (2 * j)) & 3u;
    v[i] = vec4((ivec4(lo | (hi << 4)) - 32) * (i < 4 ? sc0 : sc1));
  }
#elif defined(WT_Q3_K)
  const uint n = s / 4, j = s % 4;
  uint hm[8], qs[8], sw[4];
  raw_words8(b, hm);
  raw_words8(b + 32 + 32 * n, qs);
  raw_words4(b + 96, sw);  // 12 scale bytes, then d
  scale = unpackHalf2x16(sw[3]).x;
  int sc[2];
  for (uint h = 0; h < 2; ++h) {
    const uint k = 2 * s + h;
    const uint lo = k < 8 ? (sw[k / 4] >> (8 * (k % 4))) & 0xfu : (sw[(k - 8) / 4] >> (8 * ((k - 8) % 4) + 4)) & 0xfu;
    const uint hi = (sw[2] >> (8 * (k % 4) + 2 * (k / 4))) & 3u;
    sc[h] = int(lo | (hi << 4)) - 32;
  }
  for (uint i = 0; i < 8; ++i) {
    const ivec4 q = ivec4((bytes4(qs[i]) >> (2 * j)) & 3u) - 4 * ivec4(1u - bit4(hm[i], s));
    v[i] = vec4(q * sc[i / 4]);
  }
#elif defined(WT_IQ4_XS)
  uint hd[4], q[4];  // hd[0] = d | scales_h << 16, hd[1] = scales_l (b is a multiple of 8)
  raw_words4(b, hd);
  raw_words4(b + 8 + 16 * s, q);
  const uint ls = ((hd[1] >> (8 * (s / 2) + 4 * (s % 2))) & 0xfu) | (((hd[0] >> (16 + 2 * s)) & 3u) << 4);
  scale = unpackHalf2x16(hd[0]).x * float(int(ls) - 32);
  for (uint i = 0; i < 4; ++i) {
    v[i] = iq4(lo4(q[i]));
    v[4 + i] = iq4(hi4(q[i]));
  }
#endif
}

#if defined(WT_Q3_K) || defined(WT_Q6_K) || defined(WT_IQ4_XS)
// Whole 256-value blocks as words, for kernels that walk a row block by block (matmul_lanes.comp
// on CPU rasterizers, where a texel fetch is a per-lane gather that costs far more than the
// arithmetic it feeds): one block is RAW_TEXELS fetches, then its 8 sub-blocks decode from
// registers — 14 fetches per 256 q6_K values instead of 64. (q4_K and q5_K, whose blocks start
// on a texel, are read by matmul_lanes.comp in 32-byte chunks instead: their words would spill.)
#define RAW_SUPER
const uint RAW_WORDS = (RAW_BYTES + 3) / 4;
const uint RAW_TEXELS = (RAW_WORDS + 7) / 4;  // covers RAW_WORDS + 1 words from any of a texel's 4 words

// w[k] = the 4 bytes at 4k of block fb (of nfb a row) of `row` in a chunk of `rows` rows. q6_K:
// its 208 bytes from texels, then d (w[52]'s low half, where the file holds it). Otherwise from
// b = the device block's byte (even): the last word may run past the block into the next or the
// chunk's 32 bytes of padding, and the texels read stay inside them.
void raw_block_words(uint row, uint fb, uint nfb, uint rows, out uint w[RAW_WORDS]) {
#if defined(WT_Q6_K)
  [[unroll]] for (uint i = 0; i < Q6_BODY_TEXELS; ++i) {
    const uvec4 t = load_w(q6_texel(row, fb, i, nfb, rows));
    [[unroll]] for (uint c = 0; c < 4; ++c) w[4 * i + c] = t[c];
  }
  w[52] = q6_d_word(row, fb, nfb, rows);
#else
  const uint b = raw_block(row, fb, nfb, rows) * RAW_BYTES;
  uvec4 t[RAW_TEXELS];
  [[unroll]] for (uint i = 0; i < RAW_TEXELS; ++i) t[i] = load_w((b >> 4) + i);
  const uint q = (b >> 2) & 3u;
  const bool odd = (b & 2u) != 0;
  [[unroll]] for (uint k = 0; k < RAW_WORDS; ++k) {
    // Words q + k and q + k + 1 of the texels, by selects over constant indices (a dynamically
    // indexed local array is spilled to memory on CPU rasterizers).
    const uint a0 = t[k / 4][k % 4], a1 = t[(k + 1) / 4][(k + 1) % 4], a2 = t[(k + 2) / 4][(k + 2) % 4],
               a3 = t[(k + 3) / 4][(k + 3) % 4], a4 = t[(k + 4) / 4][(k + 4) % 4];
    const uint lo = q == 0u ? a0 : q == 1u ? a1 : q == 2u ? a2 : a3;
    const uint hi = q == 0u ? a1 : q == 1u ? a2 : q == 2u ? a3 : a4;
    w[k] = odd ? (lo >> 16) | (hi << 16) : lo;
  }
#endif
}

// Sub-block s (a constant where the caller unrolls) of a block's words as integers n and
// factors: value 4i + c is n[i][c]·d − m, with the same float operations as decode_raw.
// (matmul_lanes.comp decodes q6_K in its own q6_dot.)
void decode_words(uint w[RAW_WORDS], uint s, out vec4 n[8], out float d, out float m) {
  m = 0.0;
#if defined(WT_Q3_K)
  const uint h = s / 4, j = s % 4;
  d = unpackHalf2x16(w[27]).x;
  int sc[2];
  [[unroll]] for (uint g = 0; g < 2; ++g) {
    const uint k = 2 * s + g;
    const uint lo = k < 8 ? (w[24 + k / 4] >> (8 * (k % 4))) & 0xfu : (w[24 + (k - 8) / 4] >> (8 * ((k - 8) % 4) + 4)) & 0xfu;
    const uint hi = (w[26] >> (8 * (k % 4) + 2 * (k / 4))) & 3u;
    sc[g] = int(lo | (hi << 4)) - 32;
  }
  [[unroll]] for (uint i = 0; i < 8; ++i) {
    const ivec4 q = ivec4((bytes4(w[8 + 8 * h + i]) >> (2 * j)) & 3u) - 4 * ivec4(1u - bit4(w[i], s));
    n[i] = vec4(q * sc[i / 4]);
  }
#elif defined(WT_IQ4_XS)
  const uint ls = ((w[1] >> (8 * (s / 2) + 4 * (s % 2))) & 0xfu) | (((w[0] >> (16 + 2 * s)) & 3u) << 4);
  d = unpackHalf2x16(w[0]).x * float(int(ls) - 32);
  [[unroll]] for (uint i = 0; i < 4; ++i) {
    n[i] = iq4(lo4(w[2 + 4 * s + i]));
    n[4 + i] = iq4(hi4(w[2 + 4 * s + i]));
  }
#endif
}
#endif
