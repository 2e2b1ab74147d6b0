// Shared plumbing for the ops: the one-workgroup-size specialization most kernels use.
#pragma once

#include <string>
#include <vector>

#include "vkspec/ops.hpp"
#include "vkspec/pipeline.hpp"

namespace vkspec::ops {

// Specialization constants of every kernel whose only constant is its workgroup size
// (`layout(local_size_x_id = 0)` + `layout(constant_id = 0) const uint WG`).
struct WorkgroupSpec {
  uint32_t wg;
};
static_assert(sizeof(WorkgroupSpec) == 4);

inline const Pipeline& simple_pipeline(Context& ctx, const char* shader, uint32_t n_storage, uint32_t push_size,
                                       const KernelConfig& cfg, uint32_t preferred_wg = 64) {
  WorkgroupSpec spec{pick_workgroup(ctx, cfg, preferred_wg)};
  auto desc = make_pipeline_desc(shader, std::vector<VkDescriptorType>(n_storage, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER),
                                 push_size, spec, cfg.required_subgroup_size);
  return ctx.pipelines().get(desc);
}

// Kernels that reduce one row per workgroup (reduce.glsl), `row_loops` loops over a row of
// `row_len` values each: one subgroup per row where barriers are what costs — on a CPU
// rasterizer each barrier switches between the workgroup's SIMD fibers, and one fiber walks
// the row just as fast (rmsnorm ~85 -> ~50 us per dispatch on lavapipe) — unless that many
// passes would come near a driver's loop budget (DeviceCaps::Quirks::loop_iteration_limit,
// charged 4 units a pass as sample.cpp does). Elsewhere 64. A function of the device and the
// row's shape only, so a row's reduction order never changes between passes.
inline uint32_t row_reduction_workgroup(const Context& ctx, uint64_t row_len, uint64_t row_loops) {
  const DeviceCaps& caps = ctx.caps();
  const uint64_t S = caps.subgroup_size, limit = caps.quirks.loop_iteration_limit;
  if (!caps.quirks.single_subgroup_kernels || S == 0 || S >= 64) return 64;
  const uint64_t passes = row_loops * ((row_len + S - 1) / S + 8 /* reductions */);
  return !limit || 4 * passes <= limit / 2 ? uint32_t(S) : 64;
}

inline uint32_t wg_of(const Pipeline& p) { return *reinterpret_cast<const uint32_t*>(p.desc().spec.data()); }

inline uint32_t groups(uint64_t n, uint32_t wg) { return uint32_t((n + wg - 1) / wg); }

}  // namespace vkspec::ops
