// Host side of shaders/attention.comp.
#include <cassert>
#include <cmath>

#include "ops/common.hpp"

namespace vkspec {

using namespace ops;

namespace {
struct AttentionSpec {
  uint32_t wg;         // 0
  uint32_t dmax;       // 1
  uint32_t max_depth;  // 2
};
static_assert(sizeof(AttentionSpec) == 12);

struct AttentionPush {
  uint32_t N, H, Hkv, D, t, q_offset, q_stride, o_offset, o_stride, mask_offset, mask_words, causal;
  float scale;
};
static_assert(sizeof(AttentionPush) == 52);
}  // namespace

void attention(Sequence& seq, const AttentionArgs& a, KernelConfig cfg) {
  Context& ctx = seq.context();
  assert(a.H % a.Hkv == 0 && a.D <= kAttentionMaxHeadDim);
  AttentionSpec spec{pick_workgroup(ctx, cfg, 64), kAttentionMaxHeadDim, kAttentionMaxDepth};
  auto desc = make_pipeline_desc("attention", std::vector<VkDescriptorType>(5, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER),
                                 sizeof(AttentionPush), spec, cfg.required_subgroup_size);
  const Pipeline& p = ctx.pipelines().get(desc);
  AttentionPush push{a.N,        a.H,           a.Hkv,        a.D,          a.t,
                     a.q.offset, a.q.stride,    a.o.offset,   a.o.stride,   a.mask_offset,
                     a.mask_words, a.causal ? 1u : 0u, 1.0f / std::sqrt(float(a.D))};
  const Buffer& mask = a.mask ? *a.mask : *a.q.buf;  // any buffer when causal: never read
  seq.dispatch(p, {a.q.in(), in(*a.k_cache), in(*a.v_cache), in(mask), a.o.out()}, push, a.N, a.H, 1, "attention");
}

}  // namespace vkspec
