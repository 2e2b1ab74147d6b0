// Weight upload (GGUF layout → kernel layout, split into descriptor-sized chunks), matmul, embed.
#include <algorithm>
#include <bit>
#include <cassert>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "ops/common.hpp"
#include "vkspec/dtype.hpp"
#include "vkspec/quants.hpp"

namespace vkspec {

using namespace ops;

const char* weight_type_name(WeightType t) {
  switch (t) {
    case WeightType::F32: return "f32";
    case WeightType::F16: return "f16";
    case WeightType::Q4_0: return "q4_0";
    case WeightType::Q5_0: return "q5_0";
    case WeightType::Q5_1: return "q5_1";
    case WeightType::Q8_0: return "q8_0";
    case WeightType::Q3_K: return "q3_k";
    case WeightType::Q4_K: return "q4_k";
    case WeightType::Q5_K: return "q5_k";
    case WeightType::Q6_K: return "q6_k";
    case WeightType::IQ4_XS: return "iq4_xs";
  }
  return "?";
}

bool weight_type_valid(uint32_t t) { return t == 0 || t == 1 || block_format(t) != nullptr; }

uint32_t weight_type_block(WeightType t) {
  const BlockFormat* f = block_format(uint32_t(t));
  return f ? f->elems : 1;
}

namespace {

// Device bytes of one row of K values. f32 / f16 / q8_0 are repacked into 32-value blocks
// (q8_0's scales in a separate array); the other block types keep the file's bytes (q6_K's
// reordered, group_q6_k and tile_q6_k).
uint64_t row_bytes_of(WeightType t, uint32_t K) {
  const uint64_t kb = (K + 31) / 32;
  switch (t) {
    case WeightType::F32: return kb * 128;
    case WeightType::F16: return kb * 64;
    case WeightType::Q8_0: return kb * 32;  // quants only; scales are separate
    default: {
      const BlockFormat& f = *block_format(uint32_t(t));
      return uint64_t(K / f.elems) * f.bytes;
    }
  }
}

// quants.glsl reads a span's texels whole: the texel after the last block must exist.
constexpr uint64_t kRawSlack = 32;
// Texel-path f32 / f16 / q8_0 rows are interleaved in tiles of this many rows (weights.glsl's
// W_TILE, which says why).
constexpr uint32_t kTexelRowTile = 64;
// Texel-path rows of the file block types are interleaved block by block in tiles of
// kRawRowTile rows when a row holds at most kRawTileMaxRowBytes (quants.glsl: raw_block says why).
constexpr uint32_t kRawRowTile = 16;
constexpr uint64_t kRawTileMaxRowBytes = 1024;
// q4_K and q5_K rows on the texel path, whatever their length, interleaved texel by texel in
// tiles of this many rows (quants.glsl: raw_texel says why).
constexpr uint32_t kRawTexelTile = 16;
constexpr uint32_t kSuperBlockRows = 4;  // matmul_lanes rows and batch rows per lane over 256-value blocks (see matmul())

// Rearranges `rows` row-major rows of `per_row` elements of `size` bytes into weights.glsl's
// texel-path order: each tile of `tile_rows` rows (the last one shorter) element-interleaved.
template <class T>
void interleave_rows(T* data, uint32_t rows, uint64_t per_row, size_t size, uint32_t tile_rows = kTexelRowTile) {
  auto* bytes = reinterpret_cast<uint8_t*>(data);
  std::vector<uint8_t> tile;
  for (uint32_t t0 = 0; t0 < rows; t0 += tile_rows) {
    const uint32_t h = std::min(tile_rows, rows - t0);
    uint8_t* base = bytes + uint64_t(t0) * per_row * size;
    tile.assign(base, base + uint64_t(h) * per_row * size);
    for (uint32_t r = 0; r < h; ++r)
      for (uint64_t e = 0; e < per_row; ++e)
        std::memcpy(base + (e * h + r) * size, tile.data() + (uint64_t(r) * per_row + e) * size, size);
  }
}

// q6_K's device order on the storage path (quants.glsl: q6_texel): each group of 8 blocks (the
// last may be shorter) as the 8 blocks' f16 d, then their other 208 bytes each, so every block
// starts on a 16-byte texel. A short last group of m blocks takes 16 + 208·m bytes, at most 14
// more than its 210·m, which the chunk's kRawSlack holds.
constexpr size_t kQ6KBody = kQ6_KBytes - 2, kQ6KGroup = 8;  // a block's bytes before d; blocks a group
void group_q6_k(uint8_t* data, uint64_t blocks) {
  static_assert(kRawSlack >= 16 - 2);
  std::vector<uint8_t> group(kQ6KGroup * kQ6_KBytes);
  for (uint64_t g0 = 0; g0 < blocks; g0 += kQ6KGroup) {
    const uint64_t m = std::min<uint64_t>(kQ6KGroup, blocks - g0);
    uint8_t* base = data + g0 * kQ6_KBytes;
    std::memcpy(group.data(), base, m * kQ6_KBytes);
    std::memset(base, 0, 16);
    for (uint64_t j = 0; j < m; ++j) {
      const uint8_t* blk = group.data() + j * kQ6_KBytes;
      std::memcpy(base + 2 * j, blk + kQ6KBody, 2);  // d: the file block's last 2 bytes
      std::memcpy(base + 16 + j * kQ6KBody, blk, kQ6KBody);
    }
  }
}

// q6_K's device order on the texel path (quants.glsl: q6_texel): tiles of kRawTexelTile rows (the
// last one h rows), block by block; a tile's block is body texel i (of 13) of each of its rows in
// turn, then the rows' d, 8 to a texel. A whole tile's block is the file's 16 · 210 bytes; a
// short last tile's takes 208·h + 16·ceil(h/8) bytes, at most 14 a block more than its 210·h.
std::vector<uint8_t> tile_q6_k(const uint8_t* rows_src, uint32_t rows, uint32_t nfb, uint64_t slack) {
  constexpr uint32_t T = kRawTexelTile, body_texels = kQ6KBody / 16;
  static_assert(kQ6KBody % 16 == 0 && T % 8 == 0 && T * kQ6_KBytes % 16 == 0);
  const uint32_t last = rows % T == 0 ? T : rows % T;
  const auto tile_block_texels = [&](uint32_t h) { return uint64_t(body_texels) * h + (h + 7) / 8; };
  const uint64_t full = (rows - last) / T;  // the tiles before the last
  std::vector<uint8_t> out((full * nfb * tile_block_texels(T) + nfb * tile_block_texels(last)) * 16 + slack, 0);
  for (uint32_t t0 = 0; t0 < rows; t0 += T) {
    const uint32_t h = std::min(T, rows - t0);
    for (uint32_t fb = 0; fb < nfb; ++fb) {
      uint8_t* tb = out.data() + ((t0 / T) * nfb * tile_block_texels(T) + fb * tile_block_texels(h)) * 16;
      for (uint32_t r = 0; r < h; ++r) {
        const uint8_t* blk = rows_src + (uint64_t(t0 + r) * nfb + fb) * kQ6_KBytes;
        for (uint32_t i = 0; i < body_texels; ++i) std::memcpy(tb + (uint64_t(i) * h + r) * 16, blk + 16 * i, 16);
        std::memcpy(tb + uint64_t(body_texels) * h * 16 + 2 * r, blk + kQ6KBody, 2);  // d: the block's last 2 bytes
      }
    }
  }
  return out;
}

std::string variant(const char* op, const DeviceWeight& W, const DeviceWeight::Chunk& c) {
  return std::string(op) + "_" + weight_type_name(c.type) + (W.texel ? "_texel" : "_storage");
}

// Mirrors matmul.comp's constants, in constant_id order.
struct MatmulSpec {
  uint32_t wg;           // 0: local_size_x
  uint32_t rows;         // 1: ROWS
  uint32_t bmax;         // 2: BMAX
  uint32_t use_subgroup; // 3: USE_SUBGROUP (bool as 32-bit)
  uint32_t slots;        // 4: SLOTS == wg
};
static_assert(sizeof(MatmulSpec) == 20);

// Mirrors matmul_rows.comp's constants.
struct MatmulRowsSpec {
  uint32_t wg;  // 0: local_size_x
  uint32_t r;   // 1: R rows per invocation
  uint32_t bt;  // 2: BT activation rows per workgroup
};
static_assert(sizeof(MatmulRowsSpec) == 12);

// Mirrors matmul_lanes.comp's constants.
struct MatmulLanesSpec {
  uint32_t wg, r, bt;
  uint32_t norm, glu;  // bools as 32-bit
  uint32_t xs, xt;     // x shared by subgroup shuffles: the subgroup size (0: off), texels per lane
  uint32_t act;        // GluAct, with glu (0 otherwise, so one pipeline serves every plain matmul)
  uint32_t tail;       // K % 32 != 0 (bool as 32-bit)
  uint32_t groups;     // q4_0, q5_0, q5_1 rows long enough to be read in groups of 8 blocks
  uint32_t glu_pairs;  // with glu: DeviceWeight::glu_pairs
  uint32_t rg;         // row groups an invocation walks (lanes_row_groups)
  uint32_t bias, accumulate;  // bools as 32-bit: constants, not push values (matmul_lanes.comp)
};
static_assert(sizeof(MatmulLanesSpec) == 56);

struct MatmulLanesPush {
  uint32_t K, N, row_offset, B, x_stride, x_offset, y_stride, y_offset;
  float eps;
};
static_assert(sizeof(MatmulLanesPush) == 36);

// matmul_lanes.comp's ROPE_KV variant: four more constants, the push block extended.
struct MatmulLanesRopeSpec {
  MatmulLanesSpec lanes;
  uint32_t kv_f16;  // 14: KV_F16
  uint32_t mode, table, factors;  // 15-17: RoPE's pairing; a position table, frequency factors (bools)
};
static_assert(sizeof(MatmulLanesRopeSpec) == 72);
struct MatmulLanesRopePush {
  MatmulLanesPush lanes;
  uint32_t n_rot;
  float theta, freq_scale;
  uint32_t pos_offset, first, first_slot, step;
  uint32_t hd, kv, slot, slot_slot, k_base, v_base;
};
static_assert(sizeof(MatmulLanesRopePush) == 88);

struct MatmulPush {
  uint32_t K, N, row_offset, B, x_stride, x_offset, y_stride, y_offset, accumulate, has_bias;
};
static_assert(sizeof(MatmulPush) == 40);

struct EmbedPush {
  uint32_t T, C, row_begin, rows, tok_offset, o_offset, o_stride, tok_slot;
};

std::vector<VkDescriptorType> weight_bindings(const DeviceWeight& W, uint32_t extra) {
  // Weights and q8_0 scales share one path (shaders/weights.glsl).
  const VkDescriptorType wt = W.texel ? VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
  std::vector<VkDescriptorType> b{wt, wt};
  b.insert(b.end(), extra, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER);
  return b;
}

}  // namespace

uint64_t DeviceWeight::bytes() const {
  uint64_t n = 0;
  for (auto& c : chunks) n += c.data.size() + c.scales.size();
  return n;
}

namespace {
// Bytes of one row as upload_weight's `src` holds it (GGUF layout).
uint64_t src_row_bytes_of(WeightType type, uint32_t K) {
  const uint32_t block = weight_type_block(type);
  if (block > 1 && type != WeightType::Q8_0) return row_bytes_of(type, K);
  return type == WeightType::Q8_0 ? uint64_t(K) / 32 * kQ8_0Bytes : uint64_t(K) * (type == WeightType::F32 ? 4 : 2);
}

// The rows one tile of the texel-path layout holds (weights.glsl, quants.glsl); 1: row-major.
uint32_t texel_row_tile(WeightType type, uint64_t row_bytes) {
  const uint32_t block = weight_type_block(type);
  if (block == 1 || type == WeightType::Q8_0) return kTexelRowTile;
  if (type == WeightType::Q4_K || type == WeightType::Q5_K || type == WeightType::Q6_K) return kRawTexelTile;
  return row_bytes <= kRawTileMaxRowBytes ? kRawRowTile : 1;
}

bool uses_texel_path(const Context& ctx, WeightPath path) {
  return path == WeightPath::Texel || (path == WeightPath::Auto && ctx.caps().quirks.weights_via_texel_buffer);
}

// Rows of a weight one chunk (one descriptor) holds; the test hook (storage_range) caps both paths.
uint64_t chunk_rows(const Context& ctx, bool texel, WeightType type, uint32_t K) {
  const bool raw = weight_type_block(type) > 1 && type != WeightType::Q8_0;
  const uint64_t row_bytes = row_bytes_of(type, K);
  // q6_K's texel tiles: a short last tile takes up to 14 bytes a block more (tile_q6_k).
  const uint64_t slack = !raw ? 0 : kRawSlack + (texel && type == WeightType::Q6_K ? K / 256 * 16 : 0);
  uint64_t limit = texel ? ctx.caps().max_texel_buffer_elements * 16 : ctx.caps().max_storage_buffer_range;
  std::string what = texel ? "maxTexelBufferElements" : "maxStorageBufferRange";  // the bound that binds, for the error
  if (ctx.storage_range() < limit) limit = ctx.storage_range(), what = "the test's storage range";
  // A chunk is one allocation: below maxMemoryAllocationSize, with room for the driver's rounding.
  if (ctx.caps().max_allocation_bytes > 65536 && ctx.caps().max_allocation_bytes - 65536 < limit)
    limit = ctx.caps().max_allocation_bytes - 65536, what = "maxMemoryAllocationSize (less 64 KiB)";
  if (row_bytes + slack > limit)
    throw Error("one weight row of " + std::to_string(row_bytes) + " bytes" +
                (slack ? " (and " + std::to_string(slack) + " of padding)" : std::string()) + " exceeds the " +
                std::to_string(limit) + " bytes one weight buffer may span on this device (" + what + ")");
  return std::max<uint64_t>(1, (limit - slack) / row_bytes);
}
}  // namespace

DeviceWeight upload_weight(Context& ctx, WeightType type, uint32_t N, uint32_t K, const void* src, WeightPath path) {
  const uint32_t block = weight_type_block(type);
  if (K % block != 0)
    throw Error(std::string(weight_type_name(type)) + " weight with " + std::to_string(K) + " columns: " +
                weight_type_name(type) + " rows must be a multiple of " + std::to_string(block));
  const bool raw = block > 1 && type != WeightType::Q8_0;
  DeviceWeight W;
  W.N = N;
  W.K = K;
  W.blocks_per_row = (K + 31) / 32;
  W.texel = uses_texel_path(ctx, path);
  const uint64_t row_bytes = row_bytes_of(type, K);
  const uint64_t src_row_bytes = src_row_bytes_of(type, K);
  const uint64_t slack = raw ? kRawSlack : 0;
  const uint64_t rows_per_chunk = chunk_rows(ctx, W.texel, type, K);

  const auto* s8 = static_cast<const uint8_t*>(src);
  std::vector<uint8_t> staging;
  std::vector<float> scales;
  for (uint64_t r0 = 0; r0 < N; r0 += rows_per_chunk) {
    const uint32_t rows = uint32_t(std::min<uint64_t>(rows_per_chunk, N - r0));
    const uint32_t block_bytes = raw ? block_format(uint32_t(type))->bytes : 0;
    if (raw && type == WeightType::Q6_K && W.texel) {
      staging = tile_q6_k(s8 + r0 * src_row_bytes, rows, uint32_t(row_bytes / block_bytes), slack);
    } else if (raw) {
      // Rows are back to back in the file too: the chunk is one contiguous range of it. Short rows
      // on the texel path are then interleaved block by block (quants.glsl: raw_block), and q4_K /
      // q5_K rows texel by texel (raw_texel); q6_K's storage rows are regrouped.
      staging.assign(rows * row_bytes + slack, 0);
      std::memcpy(staging.data(), s8 + r0 * src_row_bytes, rows * row_bytes);
      const uint32_t tile = W.texel ? texel_row_tile(type, row_bytes) : 1;
      if (tile > 1 && (type == WeightType::Q4_K || type == WeightType::Q5_K))  // whole-texel blocks
        interleave_rows(staging.data(), rows, row_bytes / 16, 16, tile);
      else if (tile > 1)
        interleave_rows(staging.data(), rows, row_bytes / block_bytes, block_bytes, tile);
      if (type == WeightType::Q6_K) group_q6_k(staging.data(), rows * row_bytes / block_bytes);
    } else {
      staging.assign(rows * row_bytes + slack, 0);  // zero padding past K
      // Row-major rows of whole blocks first (zero past K), then on the texel path the tiles
      // interleaved texel by texel.
      if (type == WeightType::Q8_0) scales.assign(size_t(rows) * W.blocks_per_row, 0.0f);
      for (uint32_t r = 0; r < rows; ++r) {
        const uint8_t* row = s8 + (r0 + r) * src_row_bytes;
        uint8_t* dst = staging.data() + r * row_bytes;
        if (type != WeightType::Q8_0) {
          std::memcpy(dst, row, src_row_bytes);
          continue;
        }
        for (uint32_t b = 0; b < W.blocks_per_row; ++b) {
          const uint8_t* blk = row + b * kQ8_0Bytes;
          uint16_t d;
          std::memcpy(&d, blk, 2);
          scales[size_t(r) * W.blocks_per_row + b] = f16_to_f32(d);
          std::memcpy(dst + b * 32, blk + 2, 32);
        }
      }
      if (W.texel) {
        interleave_rows(staging.data(), rows, row_bytes / 16, 16);
        if (!scales.empty()) interleave_rows(scales.data(), rows, W.blocks_per_row, sizeof(float));
      }
    }
    DeviceWeight::Chunk c;
    c.type = type;
    c.row_begin = uint32_t(r0);
    c.rows = rows;
    c.data = Buffer(ctx, staging.size());
    c.data.upload(staging.data(), staging.size());
    c.scales = Buffer(ctx, std::max<size_t>(16, (scales.size() * 4 + 15) / 16 * 16));  // whole 16-byte texels
    if (!scales.empty()) c.scales.upload(scales);
    W.chunks.push_back(std::move(c));
  }
  return W;
}

DeviceWeight upload_glu_weight(Context& ctx, WeightType type, uint32_t F, uint32_t K, const void* src, WeightPath path) {
  // Pair blocks of half a texel-path tile, where the lanes kernel folds act(gate) · up
  // (matmul_lanes.comp: GLU_PAIRS); a row-major layout has no tiles to keep together, and a
  // weight split by the descriptor range is not folded (the kernel needs one chunk): gate rows and
  // up rows in order there, for a plain matmul and glu_mul.
  const bool texel = uses_texel_path(ctx, path);
  const uint32_t tile = texel && matmul_folds_glu(ctx) ? texel_row_tile(type, row_bytes_of(type, K)) : 1;
  if (tile < 2 || F == 0 || 2 * uint64_t(F) > chunk_rows(ctx, texel, type, K))
    return upload_weight(ctx, type, 2 * F, K, src, path);
  const uint32_t P = tile / 2;
  const uint64_t rb = src_row_bytes_of(type, K);
  const auto* s8 = static_cast<const uint8_t*>(src);
  std::vector<uint8_t> paired(2 * uint64_t(F) * rb);
  for (uint32_t g = 0; g < F; ++g) {
    const uint32_t blk = g / P, h = std::min(P, F - blk * P);
    const uint64_t gate = 2 * uint64_t(P) * blk + g % P;
    std::memcpy(paired.data() + gate * rb, s8 + uint64_t(g) * rb, rb);
    std::memcpy(paired.data() + (gate + h) * rb, s8 + (uint64_t(F) + g) * rb, rb);
  }
  DeviceWeight W = upload_weight(ctx, type, 2 * F, K, paired.data(), path);
  W.glu_pairs = P;
  return W;
}

DeviceWeight stack_weights(std::vector<DeviceWeight> parts) {
  assert(!parts.empty());
  DeviceWeight W;
  W.K = parts[0].K;
  W.blocks_per_row = parts[0].blocks_per_row;
  W.texel = parts[0].texel;
  for (DeviceWeight& p : parts) {
    assert(p.K == W.K && p.texel == W.texel && p.glu_pairs == 0);
    for (DeviceWeight::Chunk& c : p.chunks) {
      c.row_begin += W.N;
      W.chunks.push_back(std::move(c));
    }
    W.N += p.N;
  }
  return W;
}

namespace {
int matmul_variant(const Context& ctx, const KernelConfig& cfg) {
  // 0 split-K across a workgroup (GPUs), 1 whole rows per invocation, 2 split-K within one
  // subgroup, 3 lanes across rows with a register tile (matmul_lanes.comp). CPU rasterizers get
  // 3: at the demo's shapes it runs B = 4..64 rows 2.5-5x faster than 2 (whose per-lane tile of
  // 16 rows x 4 batch rows x 32 values spills, and whose subgroup reduction costs per output).
  // Only where the device has subgroup shuffles: the module declares them (its x shuffle, off or
  // on), and a module may not declare what the device lacks. Such a CPU device gets 1 (matmul_rows
  // needs no subgroup operation); a forced 3 there is refused naming what is missing.
  const DeviceCaps& caps = ctx.caps();
  if (cfg.matmul_rows >= 0) return cfg.matmul_rows;
  return caps.quirks.single_subgroup_kernels ? (caps.subgroup_shuffle ? 3 : 1) : 0;
}

// Activation rows per workgroup of matmul_lanes: at most `max_tile`, and as few tiles as that
// allows, split evenly — B = 9 with tiles of up to 4 runs as 3 tiles of 3, not 3 of 4 whose last
// computes 3 clamped copies of row 8. The shader's per-row arithmetic is the same for every tile
// size, so any B stays batch-invariant.
// With BatchTiles::PowersOfTwo the even tile is rounded up to a power of two (the caps below are
// powers of two, so it stays within them).
uint32_t lanes_batch_tile(uint32_t B, uint32_t max_tile, BatchTiles policy) {
  const uint32_t tiles = (std::max(B, 1u) + max_tile - 1) / max_tile;
  const uint32_t even = (std::max(B, 1u) + tiles - 1) / tiles;
  return policy == BatchTiles::PowersOfTwo ? std::min(std::bit_ceil(even), max_tile) : even;
}
// f16 / f32 / q8_0 keep 8 weight rows per lane and up to 8 rows of x: since their loop over K is
// flat (matmul_lanes.comp), 8 batch rows measured faster than 4 on lavapipe (4096² f16 at B = 16:
// 22.1 -> 17.5 ms single-threaded, 14.8 -> 12.9 ms on 2 threads). At 16, 32, ... rows a tile of
// 16 (2-vCPU Xeon, 4096²: f16 B = 16 / 64 47 / 48 -> 55 / 57 GFLOP/s, q8_0 52 / 54 -> 62 / 64;
// the 512-wide 8-layer model's 16-row forward ~15% faster): each weight texel a lane fetches — on a CPU
// rasterizer a call that gathers 8 lanes' 16 bytes one by one — then feeds twice the
// multiply-adds. f16 and f32 split every other B evenly into tiles of at most 16 too, not 8:
// fewer tiles fetch every weight fewer times (2-vCPU EPYC, single-threaded: B = 9 as one tile,
// not two of 5, the demo's gate|up 1024x192 206 -> 158 us and the 512-wide model's 1536x512
// 660 -> 484 us; B = 17 as two tiles of 9, not three of 6, 12%; B = 42 as three of 14, not six of
// 7, 14-18%). q8_0 keeps tiles of at most 8 between multiples of 16: its per-half partial sums
// double the live accumulators (4096² B = 12, 2 threads: 6.2 -> 6.8 ms with a tile of 12).
// B = 17 as 16 + 1 would compute 32 rows, hence the even split. Each tile size is one more
// pipeline per weight type and fold (lavapipe compiles a 16-row one in ~2 s, an 8-row one in
// ~0.4 s); a model meets a few (its verify pass, its draft levels, the prefill's powers of two:
// prefill_passes), never one per step or per prompt length.
// The block types decode a whole block per row into registers and stay at 4.
constexpr uint32_t kLanesBatchTile = 8, kLanesBatchTileWide = 16, kBlockBatchTile = 4;
uint32_t lanes_flat_batch_tile(uint32_t B, WeightType type, BatchTiles policy) {
  if (B > 0 && B % kLanesBatchTileWide == 0) return kLanesBatchTileWide;
  return lanes_batch_tile(B, type == WeightType::Q8_0 ? kLanesBatchTile : kLanesBatchTileWide, policy);
}

// Row groups per invocation of matmul_lanes for the 256-value block types, whose lanes keep 2-4
// rows: a workgroup per 16-32 rows is a task of lavapipe's pool each, and at K = 512 one costs
// about as much to start as to run (single-threaded, 32000x512 at batch 1: q6_K 6.3 -> 3.9 ms,
// q4_K 4.0 -> 2.5 ms with 16 groups; 4000x4096 5-12% too). Walking up to 16 groups an invocation
// keeps at least 8 workgroups per host thread (a CPU device runs on this host's cores, one pool
// thread each) so that the pool still balances. f16 / f32 / q8_0 (8 rows a lane) and the 32-value
// block types measured no gain (the 512-wide model at batch 1: f16 4% slower), and keep 1. The
// grid changes, not a row's arithmetic: results stay bit for bit whatever the groups.
uint32_t lanes_row_groups(uint64_t workgroups) {
  static const uint64_t min_workgroups = 8 * std::max(1u, std::thread::hardware_concurrency());
  for (uint32_t g = 16; g > 1; g /= 2)
    if (workgroups / g >= min_workgroups) return g;
  return 1;
}
}  // namespace

bool matmul_folds_norm(const Context& ctx, const KernelConfig& cfg) { return matmul_variant(ctx, cfg) == 3; }
bool matmul_folds_glu(const Context& ctx, const KernelConfig& cfg) { return matmul_variant(ctx, cfg) == 3; }

void matmul(Sequence& seq, const DeviceWeight& W, Mat x, Mat y, uint32_t B, const MatmulArgs& args) {
  Context& ctx = seq.context();
  assert(x.stride % 4 == 0 && x.offset % 4 == 0);
  assert(!(args.glu && (args.bias || args.accumulate)));
  const KernelConfig& cfg = args.cfg;
  const int v = matmul_variant(ctx, cfg);
  const bool fold_norm = args.norm && v == 3, fold_glu = args.glu && v == 3 && W.chunks.size() == 1;
  if (args.norm && !fold_norm) {
    rmsnorm(seq, x, *args.norm, args.norm_scratch, B, W.K, args.norm_eps);
    MatmulArgs rest = args;
    rest.norm = nullptr;
    return matmul(seq, W, args.norm_scratch, y, B, rest);
  }
  if (args.rope_kv) {
    assert(!args.accumulate && !args.glu);
    const RopeKvFold& f = *args.rope_kv;
    const DeviceCaps& caps = ctx.caps();
    // The epilogue owns whole RoPE pairs per lane, f16 cache words across a lane pair (mode 1).
    // Chunks of whole heads each (one dispatch a chunk: e.g. a Q4_K_M file's q4_K q and k, q6_K v).
    const bool whole_heads = f.D > 0 && std::all_of(W.chunks.begin(), W.chunks.end(), [&](const DeviceWeight::Chunk& c) {
      return c.row_begin % f.D == 0 && c.rows % f.D == 0;
    });
    const bool fold = v == 3 && whole_heads && f.n_rot == f.D && f.D % 4 == 0 && f.kv % f.D == 0 &&
                      f.k_col == f.H * f.D && f.v_col == f.k_col + f.kv && W.N == f.v_col + f.kv &&
                      caps.subgroup_shuffle && caps.subgroup_size >= 2 && caps.min_subgroup_size == caps.max_subgroup_size &&
                      (cfg.workgroup_size ? cfg.workgroup_size : caps.subgroup_size) % caps.subgroup_size == 0;
    if (!fold) {
      MatmulArgs rest = args;
      rest.rope_kv = nullptr;
      matmul(seq, W, x, y, B, rest);
      return rope_kv_write(seq, y, f.pos, B, f.H, f.D, f.n_rot, f.rope, f.k_col, f.v_col, f.kv, f.cache, f.slot);
    }
  }
  if (W.glu_pairs && !fold_glu)
    throw Error("matmul: a gate|up weight stored in pair blocks (upload_glu_weight) needs the folded act(gate) · up of "
                "the lanes kernel, not " + std::string(args.glu ? "variant " + std::to_string(v) : "a plain matmul"));
  if (args.glu && !fold_glu) {
    MatmulArgs rest = args;
    rest.glu = false;
    matmul(seq, W, x, args.glu_scratch, B, rest);
    const uint32_t F = W.N / 2;
    return glu_mul(seq, args.glu_scratch, args.glu_scratch.col(F), y, B, F, args.glu_act);
  }
  const Buffer& bias = args.bias ? *args.bias : W.chunks[0].scales;  // dummy binding when unused
  if (v == 3) {
    // x (and the norm's weight) always through texel views: uniform fetches every lane shares.
    MatmulLanesSpec spec{cfg.workgroup_size ? cfg.workgroup_size : ctx.caps().subgroup_size,
                         cfg.rows_per_workgroup ? cfg.rows_per_workgroup : 8,
                         cfg.batch_tile ? cfg.batch_tile : lanes_flat_batch_tile(B, WeightType::Q8_0, ctx.batch_tiles()), fold_norm, fold_glu, 0, 1,
                         fold_glu ? uint32_t(args.glu_act) : 0u, W.K % 32 != 0, 0, fold_glu ? W.glu_pairs : 0u, 1,
                         args.bias ? 1u : 0u, args.accumulate ? 1u : 0u};
    // x through subgroup shuffles where every subgroup of the workgroup is whole and of one
    // known size (the shader's texel-to-lane map is specialized on it).
    const DeviceCaps& caps = ctx.caps();
    if (!caps.subgroup_shuffle)
      throw Error("matmul: the lanes kernel (variant 3) needs subgroup shuffles, which device '" + caps.name + "' lacks");
    const uint32_t S = caps.subgroup_size;
    const bool shuffle = cfg.x_shuffle != 0 && S >= 2 && caps.min_subgroup_size == caps.max_subgroup_size &&
                         spec.wg % S == 0;
    if (cfg.x_shuffle == 1 && !shuffle)
      throw Error("matmul with x shared by subgroup shuffles requested but on device '" + caps.name +
                  "' the workgroup is not whole subgroups of one size");
    spec.xs = shuffle ? S : 0;
    spec.xt = shuffle ? (2 * spec.bt + S - 1) / S : 1;
    auto bindings = weight_bindings(W, 3);
    bindings[2] = VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
    bindings.push_back(VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER);
    const RopeKvFold* rk = args.rope_kv;  // folded: checked above
    if (rk) bindings.insert(bindings.end(), 5, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER);
    for (const auto& c : W.chunks) {
      MatmulLanesSpec cs = spec;
      const uint32_t block = weight_type_block(c.type);
      if (!cfg.batch_tile)  // per chunk: a file's tensors may mix types
        cs.bt = block > 1 && c.type != WeightType::Q8_0 ? lanes_batch_tile(B, kBlockBatchTile, ctx.batch_tiles())
                                                          : lanes_flat_batch_tile(B, c.type, ctx.batch_tiles());
      // 256-value file blocks keep each row's whole block (q3_K, q6_K, iq4_xs) or a 32-byte
      // chunk of it (q4_K, q5_K) in registers, unrolled over its sub-blocks: more rows per lane
      // spill and multiply the shader's size, and with it the driver's compile time.
      if (block == 256) {
        cs.r = std::min(cs.r, kSuperBlockRows);
        cs.bt = std::min(cs.bt, kSuperBlockRows);
        // q4_K, q5_K and q6_K at batch 1 keep 2 rows a lane: their x (one fetch and 8 shuffles
        // a 32-value block) is then shared by fewer rows, but 4 rows' words spill (4096² on
        // single-threaded lavapipe, 2 vs 4 rows: q4_K 2.34 vs 2.65 ms, q6_K 3.11 vs 3.33 ms).
        // From 4 batch rows on, q6_K gains from 4 (B = 16: 14.3 vs 16.5 ms on 2 threads).
        // A row's sum is the same whatever the rows beside it, so B may choose.
        if (c.type == WeightType::Q4_K || c.type == WeightType::Q5_K || (c.type == WeightType::Q6_K && B < 4)) cs.r = std::min(cs.r, 2u);
      }
      cs.xt = shuffle ? (2 * cs.bt + S - 1) / S : 1;
      // matmul_lanes.comp's group walk: rows of a multiple of 8 blocks past kRawTileMaxRowBytes.
      cs.groups = block == 32 && c.type != WeightType::Q8_0 && W.blocks_per_row % 8 == 0 &&
                  uint64_t(W.blocks_per_row) * block_format(uint32_t(c.type))->bytes > kRawTileMaxRowBytes;
      if (fold_glu || rk) cs.r = std::max(2u, cs.r & ~1u);  // gate rows and their up rows / RoPE pairs
      // Row groups: a workgroup's lanes each own the rows (rk: RoPE pairs) of cs.rg consecutive groups.
      const uint32_t group_rows = cs.wg * (fold_glu || rk ? cs.r / 2 : cs.r);
      cs.rg = cfg.row_groups ? cfg.row_groups
                             : block == 256 ? lanes_row_groups(uint64_t(groups(rk || fold_glu ? c.rows / 2 : c.rows, group_rows)) *
                                                               groups(B, cs.bt))
                                            : 1;
      const uint32_t lanes_rows = (fold_glu ? cs.r / 2 : cs.r) * cs.rg;
      MatmulLanesPush push{W.K, c.rows, c.row_begin, B, x.stride, x.offset, y.stride, y.offset, args.norm_eps};
      const uint32_t out_rows = fold_glu ? c.rows / 2 : c.rows;
      const Buffer& norm = args.norm ? *args.norm : bias;
      if (!rk) {
        auto desc = make_pipeline_desc(variant("matmul_lanes", W, c), bindings, sizeof(MatmulLanesPush), cs);
        seq.dispatch(ctx.pipelines().get(desc), {in(c.data), in(c.scales), x.in(), y.out(), in(bias), in(norm)}, push,
                     groups(out_rows, cs.wg * lanes_rows), groups(B, cs.bt), 1, "matmul");
        continue;
      }
      // The RoPE + K/V epilogue (matmul_lanes.comp, ROPE_KV): its constants and buffers follow.
      MatmulLanesRopeSpec rs{cs, rk->cache.type == KvType::F16, uint32_t(rk->rope.mode), rk->pos.table != nullptr,
                             rk->rope.factors != nullptr};
      MatmulLanesRopePush rp{push,
                             rk->n_rot,
                             rk->rope.theta,
                             rk->rope.freq_scale,
                             rk->pos.offset,
                             rk->pos.first.base,
                             rk->pos.first.slot,
                             rk->pos.step,
                             rk->k_col,  // == hd
                             rk->kv,
                             rk->slot.base,
                             rk->slot.slot,
                             rk->cache.k_base,
                             rk->cache.v_base};
      const Buffer* state = rk->pos.first.fixed() ? rk->slot.state : rk->pos.first.state;
      assert(rk->slot.fixed() || rk->slot.state == state);
      const Buffer& table = rk->pos.table ? *rk->pos.table : c.data;  // bound, never read, without one
      auto desc = make_pipeline_desc(variant("matmul_lanes_rope", W, c), bindings, sizeof(MatmulLanesRopePush), rs);
      seq.dispatch(ctx.pipelines().get(desc),
                   {in(c.data), in(c.scales), x.in(), y.out(), in(bias), in(norm), in(table),
                    in(rk->rope.factors ? *rk->rope.factors : table), out(*rk->cache.k), out(*rk->cache.v),
                    in(state ? *state : table)},
                   rp, groups(c.rows / 2, cs.wg * (cs.r / 2) * cs.rg), groups(B, cs.bt), 1, "matmul");
    }
    return;
  }
  if (v == 2) {
    // One subgroup per workgroup (matmul_sg.comp): the workgroup size is pinned to the subgroup.
    const uint32_t S = cfg.required_subgroup_size ? cfg.required_subgroup_size : ctx.caps().subgroup_size;
    // The batch tile follows B: a CPU rasterizer runs predicated-off tile rows anyway, so B = 1
    // with a tile of 4 cost as much as B = 4. Every tile computes a row in the same order, so
    // the choice never changes a bit of the result (batch invariance holds across tiles).
    const uint32_t bt = cfg.batch_tile ? cfg.batch_tile : B <= 2 ? std::max(B, 1u) : 4;
    MatmulRowsSpec spec{S, cfg.rows_per_workgroup ? cfg.rows_per_workgroup : 16, bt};
    const bool xt = W.texel;  // x through a texel view whenever the weights are
    auto bindings = weight_bindings(W, 3);
    if (xt) bindings[2] = VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
    for (const auto& c : W.chunks) {
      auto desc = make_pipeline_desc(variant(xt ? "matmul_sg_xt" : "matmul_sg", W, c), bindings, sizeof(MatmulPush),
                                     spec, ctx.caps().subgroup_size_control ? S : 0);
      desc.full_subgroups = ctx.caps().compute_full_subgroups;
      const Pipeline& p = ctx.pipelines().get(desc);
      MatmulPush push{W.K, c.rows, c.row_begin, B, x.stride, x.offset, y.stride, y.offset, args.accumulate ? 1u : 0u,
                      args.bias ? 1u : 0u};
      seq.dispatch(p, {in(c.data), in(c.scales), x.in(), y.out(), in(bias)}, push, groups(c.rows, spec.r),
                   groups(B, spec.bt), 1, "matmul");
    }
    return;
  }
  if (v == 1) {
    // One variant for every B, so a row's result never depends on the batch (see the shader).
    MatmulRowsSpec spec{pick_workgroup(ctx, cfg, 16), cfg.rows_per_workgroup ? cfg.rows_per_workgroup : 4,
                        cfg.batch_tile ? cfg.batch_tile : 8};
    const bool xt = W.texel;  // x through a texel view whenever the weights are
    auto bindings = weight_bindings(W, 3);
    if (xt) bindings[2] = VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
    for (const auto& c : W.chunks) {
      auto desc = make_pipeline_desc(variant(xt ? "matmul_rows_xt" : "matmul_rows", W, c), bindings,
                                     sizeof(MatmulPush), spec, cfg.required_subgroup_size);
      const Pipeline& p = ctx.pipelines().get(desc);
      MatmulPush push{W.K, c.rows, c.row_begin, B, x.stride, x.offset, y.stride, y.offset, args.accumulate ? 1u : 0u,
                      args.bias ? 1u : 0u};
      seq.dispatch(p, {in(c.data), in(c.scales), x.in(), y.out(), in(bias)}, push,
                   groups(c.rows, spec.wg * spec.r), groups(B, spec.bt), 1, "matmul");
    }
    return;
  }
  MatmulSpec spec{};
  spec.wg = pick_workgroup(ctx, cfg, 64);
  spec.rows = cfg.rows_per_workgroup ? cfg.rows_per_workgroup : 4;
  spec.bmax = cfg.batch_tile ? cfg.batch_tile : 8;
  spec.use_subgroup = cfg.use_subgroup >= 0 ? uint32_t(cfg.use_subgroup) : uint32_t(ctx.caps().subgroup_arithmetic);
  spec.slots = spec.wg;
  assert(spec.rows <= 8 && spec.bmax <= 16);
  if (spec.use_subgroup && !ctx.caps().subgroup_arithmetic)
    throw Error("matmul with subgroup reduction requested but device '" + ctx.caps().name +
                "' lacks subgroup arithmetic in compute shaders");
  if (uint64_t(spec.wg) * spec.rows * spec.bmax * 4 > ctx.caps().max_shared_memory)
    throw Error("matmul tile needs more shared memory than device '" + ctx.caps().name + "' has");
  for (const auto& c : W.chunks) {
    auto desc = make_pipeline_desc(variant("matmul", W, c), weight_bindings(W, 3), sizeof(MatmulPush), spec,
                                   cfg.required_subgroup_size);
    const Pipeline& p = ctx.pipelines().get(desc);
    MatmulPush push{W.K, c.rows, c.row_begin, B, x.stride, x.offset, y.stride, y.offset, args.accumulate ? 1u : 0u,
                    args.bias ? 1u : 0u};
    // y is read (accumulate) and written; mark it written so later readers wait for it.
    seq.dispatch(p, {in(c.data), in(c.scales), x.in(), y.out(), in(bias)}, push, groups(c.rows, spec.rows),
                 groups(B, spec.bmax), 1, "matmul");
  }
}

void embed(Sequence& seq, const DeviceWeight& table, const Buffer& tokens, Dyn tok_offset, Mat o, uint32_t T,
           KernelConfig cfg) {
  Context& ctx = seq.context();
  WorkgroupSpec spec{pick_workgroup(ctx, cfg, 32)};
  for (const auto& c : table.chunks) {
    auto desc = make_pipeline_desc(variant("embed", table, c), weight_bindings(table, 3), sizeof(EmbedPush), spec,
                                   cfg.required_subgroup_size);
    const Pipeline& p = ctx.pipelines().get(desc);
    EmbedPush push{T, table.K, c.row_begin, c.rows, tok_offset.base, o.offset, o.stride, tok_offset.slot};
    seq.dispatch(p, {in(c.data), in(c.scales), in(tokens), o.out(), tok_offset.binding(tokens)}, push, T, 1, 1, "embed");
  }
}

}  // namespace vkspec
