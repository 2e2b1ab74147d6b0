// Weight access shared by every kernel that reads model weights (matmul, embedding gather).
//
// On the device, a weight matrix (N rows, K columns) is stored row-major with each row padded to
// a whole number of 32-value blocks (Kb = ceil(K/32) blocks), read as 16-byte texels (uvec4):
//   f32  : 8 texels per block (4 floats each)
//   f16  : 4 texels per block (8 halves each)
//   q8_0 : 2 texels per block (16 int8 each); the per-block f32 scales live in a separate array
//          (N, Kb) — separate, not GGUF's interleaved 34-byte blocks, so loads stay 16-byte aligned.
//   q4_0, q5_0, q5_1, q3_K, q4_K, q5_K, q6_K, iq4_xs: the file's own blocks, rows back to back
//          (shaders/quants.glsl; short rows interleaved, below; q6_K's reordered so that each
//          block starts on a texel); K is a multiple of the block size, so no row is padded.
// WEIGHTS_TEXEL selects a uniform texel buffer (fast on CPU rasterizers, which bounds-check every
// storage load per component) over a storage buffer (what real GPUs prefer).
//
// On the texel path the f32 / f16 / q8_0 rows are interleaved in tiles of W_TILE rows: texel t of
// every row of a tile, then texel t + 1 of every row, ... (the chunk's last tile holds the rows
// that are left); q8_0's scales likewise. A CPU walks K for many rows at once; row-major, each
// row is its own memory stream, more than the hardware prefetcher follows, and a 4096-wide f16
// matmul at batch 1 ran at half the bandwidth. Interleaved, a tile is one sequential stream.
// The file block types are interleaved block by block in tiles of RAW_TILE rows only where a row
// is short (raw_block), and stay row-major otherwise — except q4_K and q5_K, whose blocks are
// whole texels: their rows are interleaved texel by texel like f16's, in tiles of RAW_TEXEL_TILE
// rows, whatever their length (raw_texel); and q6_K, whose blocks' 13 texels of quants and scales
// are interleaved the same way, their d beside them (q6_texel).

#if defined(WT_F32)
const uint TEXELS_PER_BLOCK = 8;
#elif defined(WT_F16)
const uint TEXELS_PER_BLOCK = 4;
#elif defined(WT_Q8_0)
const uint TEXELS_PER_BLOCK = 2;
#elif defined(WT_Q4_0) || defined(WT_Q5_0) || defined(WT_Q5_1) || defined(WT_Q3_K) || defined(WT_Q4_K) || \
    defined(WT_Q5_K) || defined(WT_Q6_K) || defined(WT_IQ4_XS)
#define WEIGHTS_RAW  // the file's own blocks, see quants.glsl
#else
#error "define WT_<type>"
#endif

#ifdef WEIGHTS_TEXEL
const uint W_TILE = 64;  // ops/matmul.cpp: kTexelRowTile
#else
const uint W_TILE = 1;   // row-major
#endif
// Index of element e (of per_row) of row `row` in a chunk of `rows` rows interleaved in tiles
// of `tile` rows: element e of every row of a tile, then e + 1, ... (the last tile holds the rows
// that are left; a tile of 1 is row-major). Every layout above is this one (ops/matmul.cpp
// interleave_rows writes it), with its own tile and elements (texels or blocks).
uint tile_index(uint row, uint e, uint per_row, uint rows, uint tile) {
  const uint t0 = row - row % tile, h = min(tile, rows - t0);
  return t0 * per_row + e * h + (row - t0);
}
// The f32 / f16 / q8_0 layout's.
uint w_index(uint row, uint e, uint per_row, uint rows) { return tile_index(row, e, per_row, rows, W_TILE); }

// The weights at binding W_BINDING, q8_0's scales at the next one (0 and 1 unless the kernel says).
#ifndef W_BINDING
#define W_BINDING 0
#endif
#include "pair.glsl"
#ifdef WEIGHTS_TEXEL
TEXEL_BINDING(W_BINDING, w_tex)
uvec4 load_w(uint texel) { return TEXEL_FETCH(w_tex, int(texel)); }
#else
layout(set = 0, binding = W_BINDING, std430) readonly buffer WBuf { uvec4 w_buf[]; } PAIRED(WBuf_);
#define w_buf PAIR_AT(WBuf_).w_buf
uvec4 load_w(uint texel) { return w_buf[texel]; }
#endif

#ifdef WEIGHTS_RAW
#include "quants.glsl"
#endif

// q8_0 block scales (N, Kb) f32. Through a texel view as well when the weights are: a storage
// load of one float per block cost lavapipe more than the block's 32 quants (3.7 vs 1.5 ms at
// 4096 x 4096).
#ifdef WEIGHTS_TEXEL
TEXEL_BINDING(W_BINDING + 1, s_tex)
float load_scale(uint i) { return uintBitsToFloat(TEXEL_FETCH(s_tex, int(i / 4))[i % 4]); }
#else
layout(set = 0, binding = W_BINDING + 1, std430) readonly buffer WScales { float w_scale[]; } PAIRED(WScales_);
#define w_scale PAIR_AT(WScales_).w_scale
float load_scale(uint i) { return w_scale[i]; }
#endif

// Decodes one 32-value block into v[0..8) (each vec4 = 4 consecutive values) and its scale:
// the block's values are v * scale. q8_0 and the block types whose 32 values share one factor
// have a scale (1 otherwise); a dot product can apply it once per block instead of once per value.
// `rows` is the chunk's row count (the last tile's height).
void load_block_unscaled(uint row, uint block, uint blocks_per_row, uint rows, out vec4 v[8], out float scale) {
#if defined(WEIGHTS_RAW)
  // `block` counts 32-value sub-blocks; a file block (super-block) holds RAW_SUBS of them.
  decode_raw(row, block / RAW_SUBS, blocks_per_row / RAW_SUBS, rows, block % RAW_SUBS, v, scale);
#else
  const uint tpr = blocks_per_row * TEXELS_PER_BLOCK, t0 = block * TEXELS_PER_BLOCK;
#if defined(WT_F32)
  scale = 1.0;
  for (uint i = 0; i < 8; ++i) v[i] = uintBitsToFloat(load_w(w_index(row, t0 + i, tpr, rows)));
#elif defined(WT_F16)
  scale = 1.0;
  for (uint i = 0; i < 4; ++i) {
    uvec4 t = load_w(w_index(row, t0 + i, tpr, rows));
    v[2 * i] = vec4(unpackHalf2x16(t.x), unpackHalf2x16(t.y));
    v[2 * i + 1] = vec4(unpackHalf2x16(t.z), unpackHalf2x16(t.w));
  }
#else
  scale = load_scale(w_index(row, block, blocks_per_row, rows));
  for (uint i = 0; i < 2; ++i) {
    uvec4 t = load_w(w_index(row, t0 + i, tpr, rows));
    for (uint j = 0; j < 4; ++j) {
      uint u = t[j];
      // Sign-extend each byte: shift it to the top, then arithmetic-shift down.
      v[4 * i + j] = vec4(ivec4(int(u << 24), int(u << 16), int(u << 8), int(u)) >> 24);
    }
  }
#endif
#endif
}

#if defined(WEIGHTS_RAW)
// Decodes one 32-value block of a file block type as v · d − m (m = 0 unless RAW_MIN).
void load_block_dm(uint row, uint block, uint blocks_per_row, uint rows, out vec4 v[8], out float d, out float m) {
  const uint fb = block / RAW_SUBS, nfb = blocks_per_row / RAW_SUBS;
#if defined(WT_Q5_1)
  decode_raw_dm(row, fb, nfb, rows, block % RAW_SUBS, v, d, m);
#else
  decode_raw(row, fb, nfb, rows, block % RAW_SUBS, v, d);
  m = 0.0;
#endif
}
#endif

// Decodes one 32-value block into v[0..8) (each vec4 = 4 consecutive values), scaled.
void load_block(uint row, uint block, uint blocks_per_row, uint rows, out vec4 v[8]) {
  float scale;
  load_block_unscaled(row, block, blocks_per_row, rows, v, scale);
#if defined(WT_Q8_0) || defined(WEIGHTS_RAW)
  for (uint i = 0; i < 8; ++i) v[i] *= scale;
#endif
}
