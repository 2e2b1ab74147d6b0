// Host side of the tree-masked attention kernels:
//   attention.comp     — portable: one workgroup per (row, head), workgroup reductions (GPUs);
//   attention_sg.comp  — one subgroup per (up to 4 rows, GQA head group), no barriers (CPU
//                        rasterizers).
// Both visit keys in logical-position order with a reduction order fixed by the positions, and
// the choice depends only on the device and the model's shape (never on N; attention_sg's rows
// per workgroup may, as they change no row's ops), so a tree pass reproduces one-token decoding
// bit for bit on a given device.
#include <algorithm>
#include <cassert>
#include <climits>
#include <cmath>

#include "ops/common.hpp"
#include "vkspec/tree_limits.h"

namespace vkspec {

using namespace ops;

namespace {
// Mirrors attention.comp's constants, in constant_id order.
struct AttentionSpec {
  uint32_t wg;         // 0
  uint32_t dmax;       // 1
  uint32_t max_depth;  // 2
};
static_assert(sizeof(AttentionSpec) == 12);

// Mirrors attention_sg.comp's constants.
struct AttentionSgSpec {
  uint32_t s;      // 0: workgroup size == subgroup size
  uint32_t d;      // 1: D
  uint32_t hpw;    // 2: query heads per workgroup
  uint32_t qshuf;  // 3: q loaded once per subgroup and shuffled to every lane
};
static_assert(sizeof(AttentionSgSpec) == 16);

// attention_sg.comp's O_PROJ variant: two more constants (4, 5; the plain variant has neither and
// ignores them), and both variants' query rows per workgroup (6).
struct AttentionSgOSpec {
  AttentionSgSpec sg;
  uint32_t kb;    // 4: blocks of 32 per W_o row
  uint32_t ovec;  // 5: the residual stream read and written as vec4s
  uint32_t rq;    // 6: query rows per workgroup
};
static_assert(sizeof(AttentionSgOSpec) == 28);

// Both shaders' push constants.
struct AttentionPush {
  uint32_t N, H, Hkv, D, t, q_offset, q_stride, o_offset, o_stride, mask_offset, mask_words, causal;
  float scale;
  uint32_t t_slot;
  uint32_t k_base, v_base;
  uint32_t window;
  uint32_t q_row, q_row_slot;
};
static_assert(sizeof(AttentionPush) == 76);
struct AttentionOPush {
  AttentionPush a;
  uint32_t C;
  uint32_t res_offset, res_q;
};
static_assert(sizeof(AttentionOPush) == 88);

// W_o's weights past which the folded o-projection does not pay: a row's workgroups walk all of
// them between them (one per head group), where the matmul spreads them over the device and
// shares each weight between the rows of a tile. Measured on lavapipe at the demo's shape (W_o
// 288x288 f16, 6 heads of 48 in 3 groups, 200 keys): one row single-threaded, attention 40-45 us,
// with the fold 85 us, attention then the matmul 112-116 us; 10 rows on 2 threads, 396 us folded
// against 335-411 us apart. The fold's projection runs at ~2 GFLOP/s a thread, so it pays while
// a row's W_o costs less than a dispatch (50-100 us) — and a verify pass pays it once per row
// where the matmul reads W_o once per tile. At 512x512 (the benchmark suite's tiny-512x8 f16,
// 8 heads of 64, 128 keys, 2 threads) the fold kept one-token decoding where it was (65-76
// tokens/s either way) but made a 16-row forward 53-55 ms against 44 ms apart, c(16) 3.45-3.81
// against 2.76-3.02; so W_o folds up to 2^17 weights (the demo's 192x192 and 288x288 do).
constexpr uint64_t kFoldOMaxWeights = 1u << 17;

// Kernel choice, from the device only: where barriers and shared memory are what costs
// (DeviceCaps::Quirks::single_subgroup_kernels), the subgroup kernel (1), whose workgroup is
// pinned to exactly one subgroup; elsewhere the workgroup kernel (0).
// attention_sg's module uses subgroup arithmetic and shuffles (a module may not declare a
// capability the device lacks, even on a path a constant turns off).
bool subgroup_kernel_fits(const DeviceCaps& caps) { return caps.subgroup_arithmetic && caps.subgroup_shuffle; }

int pick_variant(const DeviceCaps& caps, const KernelConfig& cfg) {
  if (cfg.use_subgroup >= 0) return cfg.use_subgroup;
  return caps.quirks.single_subgroup_kernels && subgroup_kernel_fits(caps) && caps.subgroup_size_control ? 1 : 0;
}

// The subgroup kernel's workgroup: pinned where the device can; otherwise the default compute
// subgroup size is what a workgroup of that size gets.
uint32_t subgroup_width(const DeviceCaps& caps, const KernelConfig& cfg) {
  return cfg.required_subgroup_size ? cfg.required_subgroup_size : caps.subgroup_size;
}

uint32_t hpw_of(const AttentionArgs& a, const KernelConfig& cfg) {
  return cfg.rows_per_workgroup ? cfg.rows_per_workgroup : attention_heads_per_workgroup(a.H, a.Hkv, a.D);
}

// Query rows per subgroup workgroup (attention_sg.comp's RQ): the rows then load each key they all
// see (the committed slots of a tree pass) once, and with W_o folded each of its blocks once. The
// largest power of two up to kMaxQueryRows within the register budget of
// attention_heads_per_workgroup (RQ·HPW·D <= 256: a GQA group's heads already share the loads),
// where N has as many rows; else 1, as for sliding windows (the rows' walks would start at
// different keys). Two pipelines a model at most, since each costs lavapipe a compile. 1 with W_o
// folded in: the fold is for small models, whose passes are short, and its 4-row variant doubled
// the demo's first-run compile time
// (generate, merge, cold pipeline cache: 22 -> 50 s) for no gain measured at its context lengths. A
// row's bits do not depend on RQ (the shader says why), so it may follow N; the fold's multi-row
// code is kept and tested (cfg.batch_tile). Measured on lavapipe, single-threaded, 16 rows of the
// 512-wide 8-layer f16 model (8 heads of 64): at 1024 keys attention 47-51 ms -> 27-29 ms (RQ 4; RQ
// 8: 25 ms), at 128 keys the same within the spread (a row's own fixed work, q and the final
// reductions, is most of it there).
constexpr uint32_t kMaxQueryRows = 4;
uint32_t query_rows_per_workgroup(const AttentionArgs& a, const KernelConfig& cfg) {
  if (a.window != 0) return 1;
  if (cfg.batch_tile) return cfg.batch_tile;
  if (a.wo) return 1;
  const uint32_t hpw = hpw_of(a, cfg);
  uint32_t rq = 1;
  while (rq * 2 <= kMaxQueryRows && rq * 2 * hpw * a.D <= 256) rq *= 2;
  return a.N >= rq ? rq : 1;
}

// The most query rows a workgroup may take for `cfg`, whatever N: what the loop budget covers.
uint64_t max_query_rows(const KernelConfig& cfg) { return std::max(kMaxQueryRows, cfg.batch_tile); }

uint32_t ceil_log2(uint32_t x) {
  uint32_t b = 0;
  while ((1u << b) < x) ++b;
  return b;
}

// The budget one invocation spends, and from that the most keys a row may have. Per kernel:
//  - attention_sg: the key loop takes S keys a pass; its inner loops run to specialization
//    constants and are [[unroll]]ed, so they cost nothing; around it the mask count (mask_words),
//    and in the last two passes the ancestor lookup (mask_words + kAttentionMaxDepth each).
//    lavapipe (Mesa 22.3) charged 3 units of its 65535 per pass of the key loop, at D = 16, 64
//    and 128 alike (the kernel went wrong from 174,760 keys at S = 8, which is 65535 * 8 / 3), so
//    each pass here costs kUnitsPerPass = 4.
//  - attention: a pass takes WG keys and runs the q·k loop (D, a push constant), two workgroup
//    reductions (log2 WG + 1 each) and the V loop (DPL output dims per lane, each over the WG
//    keys of the pass); before it the q load and the ancestor walk (lane 0). Counting one unit
//    per pass of each loop, this is 1.4x (D = 128) to 2.9x (D = 16) what lavapipe charged.
// `spent`: units the invocation's other loops take first (the folded o-projection's).
uint32_t max_keys_after(const Context& ctx, uint32_t D, uint32_t mask_words, const KernelConfig& cfg, uint64_t spent) {
  const DeviceCaps& caps = ctx.caps();
  if (!caps.quirks.loop_iteration_limit) return UINT32_MAX;
  if (spent >= caps.quirks.loop_iteration_limit) return 0;
  const uint64_t limit = caps.quirks.loop_iteration_limit - spent;
  constexpr uint64_t kSlack = 16;  // loop entry/exit bookkeeping the formulas round away
  uint64_t fixed, per_pass, keys_per_pass;
  if (pick_variant(caps, cfg) != 0) {  // 1: K/V as texels where the device prefers them, 2: storage
    constexpr uint64_t kUnitsPerPass = 4;
    // Each of a workgroup's query rows counts its mask and walks its own last passes (one more
    // plain pass at most, a chain's rows being fewer apart than a pass); the shared passes are
    // the key loop's.
    fixed = max_query_rows(cfg) * kUnitsPerPass * (3ull * mask_words + 2ull * kAttentionMaxDepth + 1) + kSlack;
    per_pass = kUnitsPerPass;
    keys_per_pass = subgroup_width(caps, cfg);
  } else {
    const uint64_t WG = pick_workgroup(ctx, cfg, 64), DPL = (kAttentionMaxHeadDim + WG - 1) / WG;
    fixed = (D + WG - 1) / WG + 2ull * mask_words + kAttentionMaxDepth + DPL + kSlack;
    per_pass = D + 2 * (ceil_log2(uint32_t(WG)) + 1) + DPL * (WG + 1) + 1;
    keys_per_pass = WG;
  }
  if (fixed >= limit) return 0;
  return uint32_t(std::min<uint64_t>(UINT32_MAX, (limit - fixed) / per_pass * keys_per_pass));
}
}  // namespace

// The per-lane accumulators (HPW * D floats, plus as many for q) kept to a register-file-ish
// size. A function of the model's shape only — never of N — so every pass uses the same pipeline.
uint32_t attention_heads_per_workgroup(uint32_t H, uint32_t Hkv, uint32_t D) {
  const uint32_t G = H / Hkv;
  uint32_t best = 1;
  for (uint32_t h = 1; h <= G; ++h)
    if (G % h == 0 && h * D <= 256) best = h;
  return best;
}

uint32_t attention_max_keys(const Context& ctx, uint32_t D, uint32_t mask_words, KernelConfig cfg) {
  return max_keys_after(ctx, D, mask_words, cfg, 0);
}

bool attention_folds_o(const Context& ctx, const AttentionArgs& a, const DeviceWeight& wo, uint32_t max_keys,
                       KernelConfig cfg) {
  const DeviceCaps& caps = ctx.caps();
  if (pick_variant(caps, cfg) == 0 || !subgroup_kernel_fits(caps) || !wo.texel || wo.chunks.size() != 1 ||
      caps.max_stage_storage_buffers < 8)  // q, K, V, mask, x, the step state, partials, arrivals
    return false;
  const WeightType type = wo.chunks[0].type;
  if (type != WeightType::F32 && type != WeightType::F16 && type != WeightType::Q8_0) return false;
  if (wo.K != a.H * a.D || !attention_o_partials(a, wo.N, cfg)) return false;
  // An invocation runs one head group's attention and its share of W_o: per W_o row a lane owns,
  // one unit per block and per pass of the block decode's loops (at most 8), and one per group in
  // the last workgroup's sum. What is left of the loop budget must cover max_keys.
  const uint64_t S = subgroup_width(caps, cfg), hpw = hpw_of(a, cfg), G = a.H / hpw;
  const uint64_t rq = max_query_rows(cfg);
  const uint64_t project = (wo.N + S - 1) / S * (hpw * a.D / 32 * 10 + rq * (G + 2)) + rq + 16;
  return max_keys <= max_keys_after(ctx, a.D, (kTreeMaxNodes + 31) / 32, cfg, project);
}

uint32_t attention_o_partials(const AttentionArgs& a, uint32_t C, KernelConfig cfg) {
  // A head group's output stays in registers as vec4s and meets W_o in whole 32-value blocks.
  const uint32_t hpw = hpw_of(a, cfg);
  if (a.D % 4 != 0 || hpw * a.D % 32 != 0 || uint64_t(C) * a.H * a.D > kFoldOMaxWeights) return 0;
  return a.H / hpw * ((C + 3) / 4 * 4);  // a group's partial row in whole vec4s
}

void attention(Sequence& seq, const AttentionArgs& a, KernelConfig cfg) {
  Context& ctx = seq.context();
  const DeviceCaps& caps = ctx.caps();
  const bool f16 = a.kv_type == KvType::F16;
  assert(a.H % a.Hkv == 0 && a.D <= kAttentionMaxHeadDim);
  assert(!f16 || (a.D % 2 == 0 && a.k_base % 2 == 0 && a.v_base % 2 == 0));  // rows on whole u32 words
  AttentionPush push{a.N,        a.H,           a.Hkv,        a.D,          a.t.base,
                     a.q.offset, a.q.stride,    a.o.offset,   a.o.stride,   a.mask_offset,
                     a.mask_words, a.causal ? 1u : 0u, a.logit_scale / std::sqrt(float(a.D)), a.t.slot,
                     a.k_base,   a.v_base,      a.window,     a.q_row.base, a.q_row.slot};
  const Buffer& mask = a.mask ? *a.mask : *a.q.buf;  // any buffer when causal: never read
  // One state buffer serves both dynamic scalars (the kernels have one binding for it).
  assert(a.t.fixed() || a.q_row.fixed() || a.t.state == a.q_row.state);
  const Binding state = (a.t.fixed() ? a.q_row : a.t).binding(mask);

  const int variant = pick_variant(caps, cfg);
  if (variant == 0) {
    assert(!a.wo);  // attention_folds_o: the subgroup kernel only
    AttentionSpec spec{pick_workgroup(ctx, cfg, 64), kAttentionMaxHeadDim, kAttentionMaxDepth};
    auto desc = make_pipeline_desc(f16 ? "attention_f16" : "attention", std::vector<VkDescriptorType>(6, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER),
                                   sizeof(AttentionPush), spec, cfg.required_subgroup_size);
    const Pipeline& p = ctx.pipelines().get(desc);
    seq.dispatch(p, {a.q.in(), in(*a.k_cache), in(*a.v_cache), in(mask), a.o.out(), state}, push, a.N,
                 a.H, 1, "attention");
    return;
  }

  if (!subgroup_kernel_fits(caps))
    throw Error("attention: the subgroup kernel needs subgroup arithmetic and shuffles, which device '" + caps.name +
                "' lacks (" + (caps.subgroup_arithmetic ? "shuffle" : "arithmetic") + ")");
  const uint32_t S = subgroup_width(caps, cfg);
  // q shared by shuffles (cfg.x_shuffle 0: loaded in every lane, for tests).
  AttentionSgSpec spec{S, a.D, hpw_of(a, cfg), cfg.x_shuffle != 0 ? 1u : 0u};
  assert((a.H / a.Hkv) % spec.hpw == 0);
  // K/V through texel views where those are the fast path (the weights' reason, see the quirk),
  // rows start on a 16-byte texel (4 f32 or 8 f16 values: D and the bases multiples of that)
  // and each cache fits one view. A function of the model and the device, so it never changes
  // between passes.
  const uint64_t max_view = caps.max_texel_buffer_elements * 16;
  const uint32_t per_texel = f16 ? 8 : 4;
  const bool texel = variant == 1 && caps.quirks.weights_via_texel_buffer && a.D % per_texel == 0 &&
                     a.k_base % per_texel == 0 && a.v_base % per_texel == 0 && a.k_cache->size() <= max_view &&
                     a.v_cache->size() <= max_view;
  std::string name = std::string("attention_sg") + (texel ? "_texel" : "") + (f16 ? "_f16" : "");
  const VkDescriptorType kv = texel ? VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
  std::vector<VkDescriptorType> bindings{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kv, kv, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                         VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER};
  const uint32_t rq = query_rows_per_workgroup(a, cfg), row_groups = (a.N + rq - 1) / rq;
  assert(rq == 1 || a.window == 0);
  if (!a.wo) {
    auto desc = make_pipeline_desc(name, bindings, sizeof(AttentionPush), AttentionSgOSpec{spec, 0, 0, rq},
                                   caps.subgroup_size_control ? S : 0);
    desc.full_subgroups = caps.compute_full_subgroups;
    seq.dispatch(ctx.pipelines().get(desc), {a.q.in(), in(*a.k_cache), in(*a.v_cache), in(mask), a.o.out(), state},
                 push, row_groups, a.H / spec.hpw, 1, "attention");
    return;
  }
  // The o-projection folded in: W_o (and q8_0's scales) at bindings 6, 7, the partial rows and
  // their arrival counts at 8, 9.
  const DeviceWeight& wo = *a.wo;
  assert(wo.texel && wo.chunks.size() == 1 && wo.K == a.H * a.D && a.o_part && a.o_arrivals);
  assert(a.o_part->size() >= uint64_t(a.N) * attention_o_partials(a, wo.N, cfg) * 4 && a.o_arrivals->size() >= a.N * 4);
  const DeviceWeight::Chunk& c = wo.chunks[0];
  name += std::string("_o_") + weight_type_name(c.type);
  bindings.insert(bindings.end(), 2, VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER);
  bindings.insert(bindings.end(), 2, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER);
  // The residual rows: o's own, or (one row) row q_row of o's buffer from residual_offset.
  assert(!a.residual_offset || a.N == 1);
  const uint32_t res_offset = a.residual_offset ? *a.residual_offset : a.o.offset;
  AttentionSgOSpec ospec{spec, wo.blocks_per_row,
                         wo.N % 4 == 0 && push.o_offset % 4 == 0 && push.o_stride % 4 == 0 && res_offset % 4 == 0, rq};
  auto desc = make_pipeline_desc(name, bindings, sizeof(AttentionOPush), ospec, caps.subgroup_size_control ? S : 0);
  desc.full_subgroups = caps.compute_full_subgroups;
  seq.dispatch(ctx.pipelines().get(desc),
               {a.q.in(), in(*a.k_cache), in(*a.v_cache), in(mask), a.o.out(), state, in(c.data), in(c.scales),
                out(*a.o_part), out(*a.o_arrivals)},
               AttentionOPush{push, wo.N, res_offset, a.residual_offset ? 1u : 0u}, row_groups, a.H / spec.hpw, 1, "attention");
}

}  // namespace vkspec
