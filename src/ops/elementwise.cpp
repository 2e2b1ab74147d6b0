// rmsnorm, rope, glu_mul, add: per-row or per-element kernels with a workgroup-size constant.
#include <cassert>

#include "ops/common.hpp"

namespace vkspec {

using namespace ops;

uint32_t pick_workgroup(const Context& ctx, const KernelConfig& cfg, uint32_t preferred) {
  uint32_t wg = cfg.workgroup_size ? cfg.workgroup_size : preferred;
  if (wg > ctx.caps().max_workgroup_invocations || wg > ctx.caps().max_workgroup_size[0])
    throw Error("workgroup size " + std::to_string(wg) + " exceeds device '" + ctx.caps().name + "' limit " +
                std::to_string(std::min(ctx.caps().max_workgroup_invocations, ctx.caps().max_workgroup_size[0])));
  return wg;
}

namespace {
struct RmsnormPush {
  uint32_t C, x_offset, x_stride, y_offset, y_stride;
  float eps;
  uint32_t sub, sub_stride, w_stride;  // sub-rows per row (heads), their stride and their weight rows' stride
};
static_assert(sizeof(RmsnormPush) == 36);

void rmsnorm_dispatch(Sequence& seq, const Buffer& xb, const Buffer& w, const Buffer& yb, const RmsnormPush& push,
                      uint32_t rows, const KernelConfig& cfg) {
  const Pipeline& p =
      simple_pipeline(seq.context(), "rmsnorm", 3, sizeof(RmsnormPush), cfg, row_reduction_workgroup(seq.context(), push.C, 2));
  seq.dispatch(p, {in(xb), in(w), out(yb)}, push, rows, 1, 1, "rmsnorm");
}
}  // namespace

void rmsnorm(Sequence& seq, Mat x, const Buffer& w, Mat y, uint32_t T, uint32_t C, float eps, KernelConfig cfg) {
  rmsnorm_dispatch(seq, *x.buf, w, *y.buf, {C, x.offset, x.stride, y.offset, y.stride, eps, 1, 0, 0}, T, cfg);
}

void rmsnorm_heads(Sequence& seq, Mat x, const Buffer& w, uint32_t T, uint32_t heads, uint32_t D, float eps,
                   KernelConfig cfg) {
  rmsnorm_dispatch(seq, *x.buf, w, *x.buf, {D, x.offset, x.stride, x.offset, x.stride, eps, heads, D, D}, T * heads,
                   cfg);
}

void rope(Sequence& seq, Mat x, const RopePositions& pos, uint32_t T, uint32_t H, uint32_t D, uint32_t n_rot,
          const RopeArgs& r, KernelConfig cfg) {
  assert(n_rot % 2 == 0 && n_rot <= D);
  struct Push {
    uint32_t T, H, D, n_rot, x_offset, x_stride, pos_offset, mode;
    float theta, freq_scale;
    uint32_t has_factors, has_table, first, first_slot, step;
  } push{T,         H,
         D,         n_rot,
         x.offset,  x.stride,
         pos.offset, uint32_t(r.mode),
         r.theta,   r.freq_scale,
         r.factors != nullptr, pos.table != nullptr,
         pos.first.base, pos.first.slot,
         pos.step};
  static_assert(sizeof(Push) == 60);
  const Pipeline& p = simple_pipeline(seq.context(), "rope", 4, sizeof(Push), cfg);
  // Bound but never read: the table without one, the factors without them.
  const Buffer& table = pos.table ? *pos.table : *x.buf;
  seq.dispatch(p, {x.out(), in(table), in(r.factors ? *r.factors : table), pos.first.binding(table)}, push,
               groups(uint64_t(T) * H * (n_rot / 2), wg_of(p)), 1, 1, "rope");
}

void rope(Sequence& seq, Mat x, const Buffer& pos, uint32_t pos_offset, uint32_t T, uint32_t H, uint32_t D,
          uint32_t n_rot, const RopeArgs& r, KernelConfig cfg) {
  rope(seq, x, RopePositions::from_table(pos, pos_offset), T, H, D, n_rot, r, cfg);
}

void kv_write(Sequence& seq, Mat src, uint32_t k_col, uint32_t v_col, uint32_t N, uint32_t kv, const KvLayer& cache,
              Dyn slot, KernelConfig cfg) {
  const bool f16 = cache.type == KvType::F16;
  assert(!f16 || (kv % 2 == 0 && cache.k_base % 2 == 0 && cache.v_base % 2 == 0));  // whole u32 words
  struct Push {
    uint32_t kv, src_offset, src_stride, k_col, v_col, slot, slot_slot, k_base, v_base;
  } push{kv, src.offset, src.stride, k_col, v_col, slot.base, slot.slot, cache.k_base, cache.v_base};
  const Pipeline& p = simple_pipeline(seq.context(), f16 ? "kv_write_f16" : "kv_write", 4, sizeof(Push), cfg);
  seq.dispatch(p, {src.in(), out(*cache.k), out(*cache.v), slot.binding(*src.buf)}, push,
               groups(f16 ? kv / 2 : kv, wg_of(p)), N, 1, "kv_write");
}

void rope_kv_write(Sequence& seq, Mat x, const RopePositions& pos, uint32_t N, uint32_t H, uint32_t D, uint32_t n_rot,
                   const RopeArgs& r, uint32_t k_col, uint32_t v_col, uint32_t kv, const KvLayer& cache, Dyn slot,
                   KernelConfig cfg) {
  const bool f16 = cache.type == KvType::F16;
  assert(n_rot % 2 == 0 && n_rot <= D && kv % D == 0);
  assert(!f16 || (kv % 2 == 0 && cache.k_base % 2 == 0 && cache.v_base % 2 == 0));  // whole u32 words
  // The step state, when either dynamic scalar reads it (both read the same buffer if both do).
  const Buffer* state = pos.first.fixed() ? slot.state : pos.first.state;
  assert(slot.fixed() || slot.state == state);
  struct Push {
    uint32_t H, D, n_rot, x_offset, x_stride, pos_offset, mode;
    float theta, freq_scale;
    uint32_t has_factors, has_table, first, first_slot, step;
    uint32_t kv, k_col, v_col, slot, slot_slot, k_base, v_base;
  } push{H,
         D,
         n_rot,
         x.offset,
         x.stride,
         pos.offset,
         uint32_t(r.mode),
         r.theta,
         r.freq_scale,
         r.factors != nullptr,
         pos.table != nullptr,
         pos.first.base,
         pos.first.slot,
         pos.step,
         kv,
         k_col,
         v_col,
         slot.base,
         slot.slot,
         cache.k_base,
         cache.v_base};
  static_assert(sizeof(Push) == 84);
  const Pipeline& p = simple_pipeline(seq.context(), f16 ? "rope_kv_f16" : "rope_kv", 6, sizeof(Push), cfg);
  const Buffer& table = pos.table ? *pos.table : *x.buf;  // bound but never read without one
  const uint64_t items = uint64_t(H) * (n_rot / 2) + 2ull * (f16 ? kv / 2 : kv);
  seq.dispatch(p,
               {x.out(), in(table), in(r.factors ? *r.factors : table), out(*cache.k), out(*cache.v),
                in(state ? *state : table)},
               push, groups(items, wg_of(p)), N, 1, "rope_kv_write");
}

void copy_rows(Sequence& seq, Mat src, Dyn row0, Mat dst, uint32_t rows, uint32_t cols, KernelConfig cfg) {
  struct Push {
    uint32_t cols, src_offset, src_stride, dst_offset, dst_stride, row0, row0_slot;
  } push{cols, src.offset, src.stride, dst.offset, dst.stride, row0.base, row0.slot};
  const Pipeline& p = simple_pipeline(seq.context(), "copy_rows", 3, sizeof(Push), cfg);
  seq.dispatch(p, {src.in(), dst.out(), row0.binding(*src.buf)}, push, groups(cols, wg_of(p)), rows, 1, "copy_rows");
}

void glu_mul(Sequence& seq, Mat gate, Mat up, Mat out, uint32_t T, uint32_t F, GluAct act, KernelConfig cfg) {
  struct Push {
    uint32_t T, F, g_offset, g_stride, u_offset, u_stride, o_offset, o_stride;
  } push{T, F, gate.offset, gate.stride, up.offset, up.stride, out.offset, out.stride};
  struct Spec {
    uint32_t wg, act;  // glu_mul.comp's constants 0, 1
  } spec{pick_workgroup(seq.context(), cfg, 64), uint32_t(act)};
  const Pipeline& p = seq.context().pipelines().get(make_pipeline_desc(
      "glu_mul", std::vector<VkDescriptorType>(3, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER), sizeof(Push), spec,
      cfg.required_subgroup_size));
  seq.dispatch(p, {gate.in(), up.in(), out.out()}, push, groups(uint64_t(T) * F, wg_of(p)), 1, 1, "glu_mul");
}

void add(Sequence& seq, Mat a, Mat b, Mat out, uint32_t T, uint32_t C, KernelConfig cfg) {
  struct Push {
    uint32_t T, C, a_offset, a_stride, b_offset, b_stride, o_offset, o_stride;
  } push{T, C, a.offset, a.stride, b.offset, b.stride, out.offset, out.stride};
  const Pipeline& p = simple_pipeline(seq.context(), "add", 3, sizeof(Push), cfg);
  seq.dispatch(p, {a.in(), b.in(), out.out()}, push, groups(uint64_t(T) * C, wg_of(p)), 1, 1, "add");
}

}  // namespace vkspec
