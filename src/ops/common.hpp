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

inline uint32_t wg_of(const Pipeline& p) { return *reinterpret_cast<const uint32_t*>(p.desc().spec.data()); }

inline uint32_t groups(uint64_t n, uint32_t wg) { return uint32_t((n + wg - 1) / wg); }

}  // namespace vkspec::ops
