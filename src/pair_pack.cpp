#include "vkspec/pair_pack.hpp"

#include "vkspec/context.hpp"
#include "vkspec/ops.hpp"

namespace vkspec {

namespace {
uint64_t round_up(uint64_t n, uint64_t align) { return (n + align - 1) / align * align; }
}  // namespace

PairPack::PairPack(Context& ctx, std::span<const DeviceWeight* const> a, std::span<const DeviceWeight* const> b,
                   uint64_t state_bytes, const std::function<void(int side)>& make_state)
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
  // A side: its weight copies at offsets a texel view may start at, then its state; B's side the
  // same, half_ bytes on. half_ is a multiple of kMaxPlacedAlignment, so a placed buffer and its
  // twin one side on meet the same alignment.
  const uint64_t align = std::max<uint64_t>(16, ctx.caps().min_texel_buffer_offset_alignment);
  std::vector<uint64_t> offsets;
  uint64_t span = 0;
  for (auto [p, q] : pairs) {
    offsets.push_back(span);
    span = round_up(span + p->size(), align);
  }
  if (pairs.empty() && !state_bytes) return;
  const uint64_t state_at = round_up(span, kMaxPlacedAlignment);
  half_ = round_up(state_at + state_bytes, kMaxPlacedAlignment);
  if (half_ / 16 > UINT32_MAX)
    throw Error("a pair pack of two " + std::to_string(half_ >> 20) + " MiB sides is past a 32-bit texel distance");
  delta_ = uint32_t(half_ / 16);
  buf_ = Buffer(ctx, 2 * half_);
  if (!pairs.empty())
    ctx.one_shot([&](VkCommandBuffer cb) {
      for (size_t i = 0; i < pairs.size(); ++i) {
        const VkBufferCopy ra{0, offsets[i], pairs[i].first->size()}, rb{0, half_ + offsets[i], pairs[i].second->size()};
        ctx.vk().vkCmdCopyBuffer(cb, pairs[i].first->handle(), buf_.handle(), 1, &ra);
        ctx.vk().vkCmdCopyBuffer(cb, pairs[i].second->handle(), buf_.handle(), 1, &rb);
      }
    });
  // A view past the device's view size or texel alignment is not made: that pair keeps the branch.
  for (size_t i = 0; i < pairs.size(); ++i)
    if (VkBufferView v = buf_.make_texel_view(offsets[i], half_ + pairs[i].second->size()))
      views_[pairs[i].first->handle()] = {pairs[i].second->handle(), v};
  if (!make_state) return;
  // Each side's state, bound from state_at of its half on. Buffers created with the same usage
  // and flags share their memory-type bits (Vulkan's rule), so any device Buffer fits buf_'s type.
  for (int side = 0; side < 2; ++side) {
    const uint64_t base = side * half_;
    uint64_t next = base + state_at;
    ctx.set_placer([&](const VkMemoryRequirements& req) {
      const uint64_t at = round_up(next, std::max<uint64_t>(req.alignment, 1));
      if (req.alignment > kMaxPlacedAlignment || at + req.size > base + half_)
        throw Error("a head state buffer of " + std::to_string(req.size) + " bytes (alignment " +
                    std::to_string(req.alignment) + ") does not fit the " + std::to_string(state_bytes) +
                    " bytes the pair pack sets aside for a head's state");
      next = at + req.size;
      return Context::Placement{buf_.memory(), at, req.size, buf_.handle(), buf_.mapped()};
    });
    try {
      make_state(side);
    } catch (...) {
      ctx.set_placer({});
      destroy_views();  // no destructor runs for an object whose constructor throws
      throw;
    }
    ctx.set_placer({});
  }
}

PairPack::~PairPack() { destroy_views(); }

void PairPack::destroy_views() {
  for (auto& [a, e] : views_) ctx_.vk().vkDestroyBufferView(ctx_.device(), e.view, nullptr);
  views_.clear();
}

VkBufferView PairPack::view(VkBuffer a, VkBuffer b) const {
  auto it = views_.find(a);
  if (it != views_.end()) return it->second.b == b ? it->second.view : VK_NULL_HANDLE;
  // Two placed buffers, B's one side on from A's.
  const Context::Placement pa = ctx_.placed_in(a), pb = ctx_.placed_in(b);
  if (!buf_ || pa.in != buf_.handle() || pb.in != buf_.handle() || pb.offset != pa.offset + half_) return VK_NULL_HANDLE;
  const VkBufferView v = buf_.make_texel_view(pa.offset, (half_ + pb.size) / 16 * 16);
  if (v) views_[a] = {b, v};
  return v;
}

}  // namespace vkspec
