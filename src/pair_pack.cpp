#include "vkspec/pair_pack.hpp"

#include "vkspec/context.hpp"
#include "vkspec/ops.hpp"

namespace vkspec {

PairPack::PairPack(Context& ctx, std::span<const DeviceWeight* const> a, std::span<const DeviceWeight* const> b)
    : ctx_(ctx) {
  // The buffer pairs to copy: each chunk's data and (q8_0) scales.
  std::vector<std::pair<const Buffer*, const Buffer*>> pairs;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (!a[i] || !b[i] || a[i]->chunks.size() != b[i]->chunks.size()) continue;
    for (size_t c = 0; c < a[i]->chunks.size(); ++c) {
      const DeviceWeight::Chunk &x = a[i]->chunks[c], &y = b[i]->chunks[c];
      for (auto [p, q] : {std::pair{&x.data, &y.data}, std::pair{&x.scales, &y.scales}})
        if (*p && *q && p->handle() != q->handle() && p->size() == q->size()) pairs.push_back({p, q});
    }
  }
  // A's copies at offsets that a texel view may start at, then B's at the same offsets plus
  // `span`, itself such an offset.
  const uint64_t align = std::max<uint64_t>(16, ctx.caps().min_texel_buffer_offset_alignment);
  auto up = [&](uint64_t n) { return (n + align - 1) / align * align; };
  std::vector<uint64_t> offsets;
  uint64_t span = 0;
  for (auto [p, q] : pairs) {
    offsets.push_back(span);
    span = up(span + p->size());
  }
  const uint64_t max_texels = ctx.caps().max_texel_buffer_elements;
  if (pairs.empty() || span / 16 > UINT32_MAX) return;
  delta_ = uint32_t(span / 16);
  buf_ = Buffer(ctx, 2 * span);
  ctx.one_shot([&](VkCommandBuffer cb) {
    for (size_t i = 0; i < pairs.size(); ++i) {
      const VkBufferCopy ra{0, offsets[i], pairs[i].first->size()}, rb{0, span + offsets[i], pairs[i].second->size()};
      ctx.vk().vkCmdCopyBuffer(cb, pairs[i].first->handle(), buf_.handle(), 1, &ra);
      ctx.vk().vkCmdCopyBuffer(cb, pairs[i].second->handle(), buf_.handle(), 1, &rb);
    }
  });
  for (size_t i = 0; i < pairs.size(); ++i) {
    const uint64_t range = span + pairs[i].second->size();
    if (range / 16 > max_texels) continue;  // past the device's view size: this pair keeps the branch
    VkBufferViewCreateInfo vi{VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO};
    vi.buffer = buf_.handle();
    vi.format = VK_FORMAT_R32G32B32A32_UINT;
    vi.offset = offsets[i];
    vi.range = range;
    VkBufferView v;
    VKSPEC_VK(ctx.vk().vkCreateBufferView(ctx.device(), &vi, nullptr, &v));
    views_[pairs[i].first->handle()] = {pairs[i].second->handle(), v};
  }
}

PairPack::~PairPack() {
  for (auto& [a, e] : views_) ctx_.vk().vkDestroyBufferView(ctx_.device(), e.view, nullptr);
}

VkBufferView PairPack::view(VkBuffer a, VkBuffer b) const {
  auto it = views_.find(a);
  return it != views_.end() && it->second.b == b ? it->second.view : VK_NULL_HANDLE;
}

}  // namespace vkspec
