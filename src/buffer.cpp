#include "vkspec/buffer.hpp"

#include <algorithm>
#include <mutex>
#include <utility>

#include "vkspec/context.hpp"

namespace vkspec {

Buffer::Buffer(Context& ctx, VkDeviceSize bytes, MemoryKind kind, bool uniform) : ctx_(&ctx) {
  // Round up to whole 16-byte texels so a texel view can always cover the data.
  size_ = (std::max<VkDeviceSize>(bytes, 16) + 15) & ~VkDeviceSize(15);
  const auto& vk = ctx.vk();
  VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = size_;
  bi.usage = kDefaultUsage | (uniform ? VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT : 0);
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VKSPEC_VK(vk.vkCreateBuffer(ctx.device(), &bi, nullptr, &buffer_));
  VkMemoryRequirements req;
  vk.vkGetBufferMemoryRequirements(ctx.device(), buffer_, &req);
  if (kind == MemoryKind::Device) {
    Context::Placement at;
    try {
      at = ctx.place(buffer_, req);
    } catch (...) {
      vk.vkDestroyBuffer(ctx.device(), buffer_, nullptr);
      buffer_ = VK_NULL_HANDLE;
      throw;
    }
    if (at.memory) {  // bound into memory someone else owns (Context::set_placer): nothing to allocate
      VKSPEC_VK(vk.vkBindBufferMemory(ctx.device(), buffer_, at.memory, at.offset));
      if (at.mapped) mapped_ = static_cast<uint8_t*>(at.mapped) + at.offset;
      return;
    }
  }
  if (req.size > ctx.caps().max_allocation_bytes) {
    vk.vkDestroyBuffer(ctx.device(), buffer_, nullptr);
    buffer_ = VK_NULL_HANDLE;
    throw Error("a buffer of " + std::to_string(req.size) + " bytes is past the largest allocation '" + ctx.caps().name +
                "' allows (maxMemoryAllocationSize " + std::to_string(ctx.caps().max_allocation_bytes) + " bytes)");
  }
  VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  ai.allocationSize = req.size;
  const VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  ai.memoryTypeIndex = kind == MemoryKind::Device
                           ? ctx.memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, host)
                           : ctx.memory_type(req.memoryTypeBits, host, VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
  VkResult r = vk.vkAllocateMemory(ctx.device(), &ai, nullptr, &memory_);
  if (r != VK_SUCCESS) {
    vk.vkDestroyBuffer(ctx.device(), buffer_, nullptr);
    buffer_ = VK_NULL_HANDLE;
    throw Error("cannot allocate " + std::to_string(bytes) + " bytes of Vulkan memory on '" + ctx.caps().name +
                "': " + vk_result_name(r));
  }
  ctx.count_allocation(int64_t(size_));
  VKSPEC_VK(vk.vkBindBufferMemory(ctx.device(), buffer_, memory_, 0));
  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(ctx.physical_device(), &mp);
  if ((mp.memoryTypes[ai.memoryTypeIndex].propertyFlags & host) == host)
    VKSPEC_VK(vk.vkMapMemory(ctx.device(), memory_, 0, VK_WHOLE_SIZE, 0, &mapped_));
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    ctx_ = std::exchange(o.ctx_, nullptr);
    buffer_ = std::exchange(o.buffer_, VK_NULL_HANDLE);
    memory_ = std::exchange(o.memory_, VK_NULL_HANDLE);
    size_ = std::exchange(o.size_, 0);
    mapped_ = std::exchange(o.mapped_, nullptr);
    view_ = std::exchange(o.view_, VK_NULL_HANDLE);
  }
  return *this;
}

Buffer::~Buffer() { release(); }

void Buffer::release() {
  if (!ctx_) return;
  const auto& vk = ctx_->vk();
  if (view_) vk.vkDestroyBufferView(ctx_->device(), view_, nullptr);
  if (buffer_ && !memory_) ctx_->forget_placed(buffer_);  // before its handle can be reused
  if (buffer_) vk.vkDestroyBuffer(ctx_->device(), buffer_, nullptr);
  if (memory_) {
    vk.vkFreeMemory(ctx_->device(), memory_, nullptr);
    ctx_->count_allocation(-int64_t(size_));
  }
  view_ = VK_NULL_HANDLE;
  buffer_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
  ctx_ = nullptr;
}

void Buffer::upload(const void* src, size_t bytes, size_t offset) {
  if (offset + bytes > size_) throw Error("Buffer::upload past the end of the buffer");
  if (bytes == 0) return;
  if (mapped_) {
    std::memcpy(static_cast<uint8_t*>(mapped_) + offset, src, bytes);
    return;
  }
  Buffer staging(*ctx_, bytes, MemoryKind::Host);
  std::memcpy(staging.mapped(), src, bytes);
  ctx_->one_shot([&](VkCommandBuffer cb) {
    VkBufferCopy region{0, offset, bytes};
    ctx_->vk().vkCmdCopyBuffer(cb, staging.handle(), buffer_, 1, &region);
  });
}

void Buffer::download(void* dst, size_t bytes, size_t offset) const {
  if (offset + bytes > size_) throw Error("Buffer::download past the end of the buffer");
  if (bytes == 0) return;
  if (mapped_) {
    std::memcpy(dst, static_cast<const uint8_t*>(mapped_) + offset, bytes);
    return;
  }
  Buffer staging(*ctx_, bytes, MemoryKind::Host);
  ctx_->one_shot([&](VkCommandBuffer cb) {
    VkBufferCopy region{offset, 0, bytes};
    ctx_->vk().vkCmdCopyBuffer(cb, buffer_, staging.handle(), 1, &region);
  });
  std::memcpy(dst, staging.mapped(), bytes);
}

VkBufferView Buffer::texel_view() const {
  // Made at first use, which may come from two threads at once (two contexts recording over one
  // model's weights): one lock for every buffer, held only by these few calls.
  static std::mutex made;
  std::lock_guard lock(made);
  if (view_) return view_;
  view_ = make_texel_view(0, size_);
  if (!view_)
    throw Error("buffer of " + std::to_string(size_) + " bytes exceeds maxTexelBufferElements (" +
                std::to_string(ctx_->caps().max_texel_buffer_elements) + " texels)");
  return view_;
}

VkBufferView Buffer::make_texel_view(VkDeviceSize offset, VkDeviceSize range) const {
  const DeviceCaps& caps = ctx_->caps();
  if (range / 16 > caps.max_texel_buffer_elements) return VK_NULL_HANDLE;
  if (offset % std::max<uint64_t>(1, caps.min_texel_buffer_offset_alignment)) return VK_NULL_HANDLE;
  VkBufferViewCreateInfo vi{VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO};
  vi.buffer = buffer_;
  vi.format = VK_FORMAT_R32G32B32A32_UINT;
  vi.offset = offset;
  vi.range = range;
  VkBufferView v;
  VKSPEC_VK(ctx_->vk().vkCreateBufferView(ctx_->device(), &vi, nullptr, &v));
  return v;
}

}  // namespace vkspec
