// The kernels. Each op is shaders/<op>.comp + src/ops/<op>.cpp; this header is their interface.
//
// Dimension names: T tokens (rows), C model width, H/Hkv heads, D head width, F ffn width,
// V vocab, K inner dimension of a matmul, N output rows of a matmul, B activation rows.
// Activations are f32 matrices addressed by Mat{buffer, offset, stride} in floats.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "vkspec/buffer.hpp"
#include "vkspec/context.hpp"
#include "vkspec/sequence.hpp"
#include "vkspec/step_state.h"

namespace vkspec {

// An f32 matrix view: element (r, c) is buf[offset + r * stride + c].
struct Mat {
  const Buffer* buf = nullptr;
  uint32_t offset = 0;
  uint32_t stride = 0;
  Binding in() const { return vkspec::in(*buf); }
  Binding out() const { return vkspec::out(*buf); }
  Mat row(uint32_t r) const { return {buf, offset + r * stride, stride}; }
  Mat col(uint32_t c) const { return {buf, offset + c, stride}; }
};

// A scalar the GPU reads when the dispatch runs (vkspec/step_state.h): `base`, plus word `slot`
// of a step-state buffer when one is given. A plain number converts to a fixed Dyn, so one op
// serves a one-off call (tests, prefill) and a step recorded once and replayed.
struct Dyn {
  uint32_t base = 0;
  const Buffer* state = nullptr;
  uint32_t slot = kDynFixed;
  Dyn(uint32_t b = 0) : base(b) {}  // NOLINT: implicit by design
  Dyn(const Buffer& s, uint32_t sl, uint32_t b = 0) : base(b), state(&s), slot(sl) {}
  Dyn operator+(uint32_t d) const {
    Dyn r = *this;
    r.base += d;
    return r;
  }
  bool fixed() const { return state == nullptr; }
  // What the kernel's state binding gets: the state buffer, or `unused` (never read) when fixed.
  Binding binding(const Buffer& unused) const { return in(state ? *state : unused); }
};

// Per-dispatch knobs every op accepts; 0 / -1 mean "choose from DeviceCaps". Tests sweep them.
struct KernelConfig {
  uint32_t workgroup_size = 0;
  int use_subgroup = -1;          // matmul: subgroupAdd reduction (needs subgroup arithmetic)
  uint32_t required_subgroup_size = 0;
  uint32_t rows_per_workgroup = 0;  // matmul
  uint32_t batch_tile = 0;          // matmul: activation rows per workgroup (BMAX); attention_sg: query rows (RQ)
  int matmul_rows = -1;  // matmul variant: 0 workgroup split-K, 1 rows per invocation, 2 subgroup split-K, -1 auto
  int x_shuffle = -1;    // matmul variant 3 (x), attention_sg (q): fetched once per subgroup and shuffled (1), per lane (0), -1 auto
  uint32_t row_groups = 0;  // matmul variant 3: consecutive row groups each invocation walks
};

// ---- weights ------------------------------------------------------------------------------

// ggml's type numbers, so a GGUF tensor type converts by a cast. f32, f16 and q8_0 are repacked
// into 32-value blocks at upload; the other block types stay in their file layout
// (shaders/weights.glsl, shaders/quants.glsl).
enum class WeightType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8,
  Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, IQ4_XS = 23,
};
const char* weight_type_name(WeightType t);  // also the shader variant's type: "q4_k"
bool weight_type_valid(uint32_t t);          // one of the above
uint32_t weight_type_block(WeightType t);    // values per block: 1 (f32, f16), 32 or 256

// A weight matrix (N rows, K columns) on the device in the kernels' layout (shaders/weights.glsl).
// A matrix larger than one descriptor may cover (maxStorageBufferRange, or maxTexelBufferElements
// texels) is split into row chunks; ops dispatch once per chunk, so callers never see the split.
// Each chunk has its own type: a stack of tensors of different types (a Q4_K_M file's q|k|v
// rows, where v may be q6_K) is one weight whose chunks differ in type (stack_weights).
struct DeviceWeight {
  uint32_t N = 0, K = 0;
  uint32_t blocks_per_row = 0;  // ceil(K / 32): the kernels walk 32-value (sub-)blocks
  bool texel = false;           // read through a uniform texel buffer
  struct Chunk {
    WeightType type = WeightType::F32;
    Buffer data;    // (rows, row bytes) as uvec4 texels
    Buffer scales;  // (rows, blocks_per_row) f32, q8_0 only (a 16-byte dummy otherwise)
    uint32_t row_begin = 0, rows = 0;
  };
  std::vector<Chunk> chunks;
  // 0: rows in order. Else a gate|up weight of upload_glu_weight: pair blocks of this many gate
  // rows followed by their up rows, read only by the folded act(gate) · up matmul.
  uint32_t glu_pairs = 0;
  uint64_t bytes() const;  // device bytes, all chunks
};

enum class WeightPath { Auto, Texel, Storage };

// `src` is GGUF layout: N rows of K values (f32 / f16 bits), or N rows of K / block blocks of a
// block type (q8_0: 34 bytes, f16 scale + 32 int8). K must be a multiple of a block type's block.
DeviceWeight upload_weight(Context& ctx, WeightType type, uint32_t N, uint32_t K, const void* src,
                           WeightPath path = WeightPath::Auto);
// A gated MLP's gate|up weight: `src` holds F gate rows then F up rows (as upload_weight's).
// Where the device's kernel folds act(gate) · up into the matmul (matmul_folds_glu), the rows are
// stored in pair blocks that keep each gate row's up row in the same row tile (glu_pairs); such a
// weight is only for matmul with MatmulArgs::glu. Elsewhere the same as upload_weight(2F rows).
DeviceWeight upload_glu_weight(Context& ctx, WeightType type, uint32_t F, uint32_t K, const void* src,
                               WeightPath path = WeightPath::Auto);
// Rows of `parts` stacked in order as one weight (same K and path; types may differ).
DeviceWeight stack_weights(std::vector<DeviceWeight> parts);

// ---- ops ----------------------------------------------------------------------------------

struct RopeKvFold;  // below

// The gate's activation of a gated MLP, act(gate) · up: SiLU (SwiGLU), GELU through tanh
// (Hugging Face's gelu_pytorch_tanh / gelu_new), exact GELU through erf (gelu).
enum class GluAct : uint32_t { Silu = 0, GeluTanh = 1, GeluErf = 2 };

struct MatmulArgs {
  const Buffer* bias = nullptr;  // (N,) added to every row
  bool accumulate = false;       // y += W x (fused residual add)
  KernelConfig cfg{};
  // RMSNorm of x folded in: y = W · rmsnorm(x; norm (K,), norm_eps). Where the device's kernel
  // cannot fold it, a separate rmsnorm writes x's B rows to norm_scratch first.
  const Buffer* norm = nullptr;
  float norm_eps = 0.0f;
  Mat norm_scratch{};
  // W is F gate rows then F up rows; y(B, F) = act(gate) · up. Where the kernel cannot pair the
  // rows (or W is split in chunks), the 2F rows go to glu_scratch and glu_mul follows. No bias.
  bool glu = false;
  GluAct glu_act = GluAct::Silu;
  Mat glu_scratch{};
  // W is a layer's q|k|v rows: y is the qkv projection, then rope_kv_write(y, *rope_kv) — folded
  // into the matmul's epilogue where the device's kernel can (CPU-like devices, one chunk, heads
  // of D = n_rot with D % 4 == 0), else a second dispatch. Not with accumulate or glu.
  const RopeKvFold* rope_kv = nullptr;
};
// y(B, N) = x(B, K) · W^T. x.stride and x.offset must be multiples of 4.
void matmul(Sequence& seq, const DeviceWeight& W, Mat x, Mat y, uint32_t B, const MatmulArgs& args = {});
// Whether matmul() folds MatmulArgs::norm into the matmul on this device (no separate rmsnorm).
bool matmul_folds_norm(const Context& ctx, const KernelConfig& cfg = {});
// Whether it folds act(gate) · up (MatmulArgs::glu) into the matmul of a one-chunk weight.
bool matmul_folds_glu(const Context& ctx, const KernelConfig& cfg = {});

// out(T, C) = table[tokens[tok_offset + t]]
void embed(Sequence& seq, const DeviceWeight& table, const Buffer& tokens, Dyn tok_offset, Mat out, uint32_t T,
           KernelConfig cfg = {});
// y(T, C) = x * rsqrt(mean(x^2) + eps) * w
void rmsnorm(Sequence& seq, Mat x, const Buffer& w, Mat y, uint32_t T, uint32_t C, float eps, KernelConfig cfg = {});
// In place, per head: x(T, heads, D) head h of every row = rmsnorm(head) * w(heads, D) row h
// (Qwen3's q/k norm over the q and k heads of a qkv row, with q_norm repeated per query head).
void rmsnorm_heads(Sequence& seq, Mat x, const Buffer& w, uint32_t T, uint32_t heads, uint32_t D, float eps,
                   KernelConfig cfg = {});

enum class RopeMode : uint32_t { Pairs = 0, Halves = 1 };  // GGUF (2i, 2i+1) / HF rotate_half (llama.cpp NEOX)
// Angle of pair i at position p: (p * theta^(-2i/n_rot) / factors[i]) * freq_scale.
struct RopeArgs {
  float theta = 10000.0f;                // base (rope.freq_base)
  RopeMode mode = RopeMode::Pairs;
  float freq_scale = 1.0f;               // linear scaling: 1 / rope.scaling.factor
  const Buffer* factors = nullptr;       // (n_rot/2) f32 frequency divisors (rope_divisors); nullptr = all 1
  // cos and sin's magnitude squared (rope_logit_gain): not applied by the rotation, it multiplies
  // every attention logit of the layer instead (AttentionArgs::logit_scale).
  float logit_gain = 1.0f;
};
// Row t's position: table[offset + t] (when a table is given) + first + step * t.
struct RopePositions {
  const Buffer* table = nullptr;
  uint32_t offset = 0;
  Dyn first;
  uint32_t step = 0;
  static RopePositions from_table(const Buffer& b, uint32_t off) { return {&b, off, 0u, 0}; }
  static RopePositions run(Dyn first, uint32_t step = 1) { return {nullptr, 0, first, step}; }
};
// x(T, H, D) rotated in place at positions `pos`; the first n_rot dims rotate.
void rope(Sequence& seq, Mat x, const RopePositions& pos, uint32_t T, uint32_t H, uint32_t D, uint32_t n_rot,
          const RopeArgs& r, KernelConfig cfg = {});
// x(T, H, D) rotated in place at positions pos[pos_offset + t]; the first n_rot dims rotate.
void rope(Sequence& seq, Mat x, const Buffer& pos, uint32_t pos_offset, uint32_t T, uint32_t H, uint32_t D,
          uint32_t n_rot, const RopeArgs& r, KernelConfig cfg = {});
// The type of a KV cache's values. F16 rows are packed two values per u32 word (packHalf2x16,
// low half first: no 16-bit storage feature needed), so an f16 row needs an even length.
enum class KvType : uint32_t { F32 = 0, F16 = 1 };
inline uint32_t kv_value_bytes(KvType t) { return t == KvType::F16 ? 2 : 4; }
// One layer's cache: K rows in k from value k_base on, V rows in v from v_base (values, not
// bytes; both layers of a model may share one buffer). Row r of K is values k_base + r*kv ...
struct KvLayer {
  const Buffer* k = nullptr;
  const Buffer* v = nullptr;
  uint32_t k_base = 0, v_base = 0;
  KvType type = KvType::F32;
};
// Cache rows slot + r (r < N, kv values each) of the layer's K / V = columns [k_col, k_col + kv) /
// [v_col, v_col + kv) of src row r: the K and V of a qkv projection into place (rounded to f16
// for an f16 cache).
void kv_write(Sequence& seq, Mat src, uint32_t k_col, uint32_t v_col, uint32_t N, uint32_t kv, const KvLayer& cache,
              Dyn slot, KernelConfig cfg = {});
inline void kv_write(Sequence& seq, Mat src, uint32_t k_col, uint32_t v_col, uint32_t N, uint32_t kv,
                     const Buffer& k_cache, const Buffer& v_cache, Dyn slot, KernelConfig cfg = {}) {
  kv_write(seq, src, k_col, v_col, N, kv, KvLayer{&k_cache, &v_cache}, slot, cfg);
}
// rope + kv_write of a forward layer in one dispatch: in each row r < N of the qkv projection x,
// the H query heads (columns [0, H·D)) rotate in place at positions `pos`; the key heads
// (columns [k_col, k_col + kv), kv = Hkv·D) rotated the same way go to cache row slot + r, the
// values ([v_col, v_col + kv)) as they are. x's key columns keep the projection's values.
void rope_kv_write(Sequence& seq, Mat x, const RopePositions& pos, uint32_t N, uint32_t H, uint32_t D, uint32_t n_rot,
                   const RopeArgs& r, uint32_t k_col, uint32_t v_col, uint32_t kv, const KvLayer& cache, Dyn slot,
                   KernelConfig cfg = {});
// rope_kv_write's arguments, for MatmulArgs::rope_kv (x is the matmul's y, N its B).
struct RopeKvFold {
  RopePositions pos;
  uint32_t H = 0, D = 0, n_rot = 0;
  RopeArgs rope;
  uint32_t k_col = 0, v_col = 0, kv = 0;
  KvLayer cache;
  Dyn slot;
};
// dst row r = src row (row0 + r), r < rows, `cols` floats.
void copy_rows(Sequence& seq, Mat src, Dyn row0, Mat dst, uint32_t rows, uint32_t cols, KernelConfig cfg = {});
// out(T, F) = act(gate) * up
void glu_mul(Sequence& seq, Mat gate, Mat up, Mat out, uint32_t T, uint32_t F, GluAct act = GluAct::Silu,
             KernelConfig cfg = {});
// out(T, C) = a + b
void add(Sequence& seq, Mat a, Mat b, Mat out, uint32_t T, uint32_t C, KernelConfig cfg = {});
// y(T, V) = softmax(x * inv_temp)
void softmax(Sequence& seq, Mat x, Mat y, uint32_t T, uint32_t V, float inv_temp = 1.0f, KernelConfig cfg = {});
// out[out_offset + t] = argmax_v x(t, v), ties to the lower index
void argmax(Sequence& seq, Mat x, const Buffer& out, Dyn out_offset, uint32_t T, uint32_t V,
            KernelConfig cfg = {});
// ids/logp(T, k) at [o_offset + t * o_stride + j]: top-k by value with log-softmax scores, k <= 32
void topk(Sequence& seq, Mat logits, uint32_t T, uint32_t V, uint32_t k, const Buffer& ids, const Buffer& logp,
          uint32_t o_offset, uint32_t o_stride, KernelConfig cfg = {});

// Tree-masked attention (shaders/attention.comp). q(N, H, D) rows attend to cache slots [0, t)
// and to the cache rows t + j of their tree ancestors j (mask bit j of row i, self included), or
// with `causal` to rows t..t+i (a chain: prompt prefill or one token). Caches are (cap, Hkv, D).
// Two kernels, both exact in the sense of DESIGN.md §1 (a row's output depends only on its keys
// and their positions): attention.comp, one workgroup per (row, head) (GPUs), and
// attention_sg.comp, one subgroup per (row, GQA head group) with no barriers (CPU rasterizers).
// KernelConfig knobs, -1 / 0 = from DeviceCaps: use_subgroup 0 workgroup kernel, 1 subgroup
// kernel, 2 subgroup kernel with K/V forced through storage buffers (instead of texel views);
// workgroup_size (workgroup kernel); required_subgroup_size and rows_per_workgroup = query heads
// per workgroup, a divisor of H / Hkv (subgroup kernel). Choose them per device and model, never
// per call: a tree pass reproduces one-token decoding only when both use the same kernel.
struct AttentionArgs {
  uint32_t N = 0, H = 0, Hkv = 0, D = 0;
  Dyn t;  // committed length
  Mat q, o;
  // Row i's q is row q_row + i of q: dynamic where one row chosen on the GPU attends (a draft
  // head's ingest, DecoderLayerPass::out_row). Its state buffer, if any, is t's, if t has one.
  Dyn q_row;
  const Buffer* k_cache = nullptr;
  const Buffer* v_cache = nullptr;
  uint32_t k_base = 0, v_base = 0;  // first value of the layer's K / V (KvLayer)
  KvType kv_type = KvType::F32;
  const Buffer* mask = nullptr;  // (N, mask_words) u32, unused when causal
  uint32_t mask_offset = 0;      // in u32 words
  uint32_t mask_words = 0;
  bool causal = true;
  // Sliding window (0: none): a row at position p sees the keys at positions p - window + 1 .. p.
  // Positions are logical (DESIGN.md §2): committed slot s is position s, a tree row's ancestor at
  // depth e is t + e.
  uint32_t window = 0;
  float logit_scale = 1.0f;  // q·k is multiplied by logit_scale / sqrt(D) (RopeArgs::logit_gain)
  // The o-projection folded in (only where attention_folds_o says it may): o is then the residual
  // stream (N, wo->N), and each row adds its attention output times wo^T to it. o_part: scratch
  // of N · attention_o_partials floats; o_arrivals: N u32 counters (those of rows a workgroup
  // starts at are used), zero (and zero again after).
  const DeviceWeight* wo = nullptr;
  const Buffer* o_part = nullptr;
  const Buffer* o_arrivals = nullptr;
  // With wo and N == 1: the row's residual is row q_row of o's buffer from this offset (o's
  // stride), and o's row is set to it plus the projection, where it would be added to in place.
  // A draft head's ingest row so goes from the pass's row to its own without a copy.
  std::optional<uint32_t> residual_offset;
};
constexpr uint32_t kAttentionMaxDepth = 64;  // tree depth + 1 the attention kernel supports
constexpr uint32_t kAttentionMaxHeadDim = 256;
void attention(Sequence& seq, const AttentionArgs& a, KernelConfig cfg = {});
// The most keys (committed + tree) one attention row may visit on this device with the kernel
// `cfg` selects, for heads of width D and masks of mask_words words: UINT32_MAX unless the driver
// ends a shader's loops after a fixed budget (DeviceCaps::Quirks::loop_iteration_limit). A cache
// longer than this must be refused: past it the kernel would return a wrong answer.
uint32_t attention_max_keys(const Context& ctx, uint32_t D, uint32_t mask_words, KernelConfig cfg = {});
// Whether attention over `a`'s heads (H, Hkv, D; a.wo ignored) can carry the o-projection `wo`
// for a model whose rows see at most max_keys keys: on devices where the subgroup kernel runs,
// for W_o small enough that one workgroup's walk over it costs less than a dispatch, of a type
// the folded variants read, within the driver's loop budget at max_keys. A function of the
// device and the model only, so every pass of a model records the same kernels.
bool attention_folds_o(const Context& ctx, const AttentionArgs& a, const DeviceWeight& wo, uint32_t max_keys,
                       KernelConfig cfg = {});
// Query heads the subgroup kernel takes a workgroup by default (a GQA group's heads share each
// K/V load): the largest divisor of H / Hkv with at most 256 values of q, from the shape alone.
uint32_t attention_heads_per_workgroup(uint32_t H, uint32_t Hkv, uint32_t D);
// Floats of AttentionArgs::o_part per row when attention over `a`'s heads carries a W_o of C rows
// (one partial row per head group), from the shapes alone; 0 where those never fold.
uint32_t attention_o_partials(const AttentionArgs& a, uint32_t C, KernelConfig cfg = {});

// Workgroup size for a simple kernel from the config or the device.
uint32_t pick_workgroup(const Context& ctx, const KernelConfig& cfg, uint32_t preferred = 64);

}  // namespace vkspec
