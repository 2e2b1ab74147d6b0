// Device buffers: one VkBuffer + one allocation (or a place in another's: Context::set_placer),
// move-only, with upload/readback.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include <volk.h>

namespace vkspec {

class Context;

enum class MemoryKind {
  Device,    // device-local; host-mapped too when the device has unified memory
  Host,      // host-visible, coherent (staging, small per-step parameters read by the host)
};

class Buffer {
 public:
  // Usage: STORAGE | UNIFORM_TEXEL | TRANSFER_SRC | TRANSFER_DST | INDIRECT are always set; add UNIFORM
  // with `uniform` when the buffer is bound as a UBO.
  static constexpr VkBufferUsageFlags kDefaultUsage =
      VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT |
      VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT;

  Buffer() = default;
  Buffer(Context& ctx, VkDeviceSize bytes, MemoryKind kind = MemoryKind::Device, bool uniform = false);
  ~Buffer();
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  VkBuffer handle() const { return buffer_; }
  VkDeviceSize size() const { return size_; }
  explicit operator bool() const { return buffer_ != VK_NULL_HANDLE; }
  // Host pointer when the memory is host-visible and coherent, else nullptr.
  void* mapped() const { return mapped_; }
  // Its own allocation; VK_NULL_HANDLE for a buffer placed in another's (Context::set_placer).
  VkDeviceMemory memory() const { return memory_; }

  // Synchronous copies (setup and tests; the step loop never calls these). They go through a
  // staging buffer unless the memory is mapped. The caller must not have GPU work in flight
  // touching this buffer.
  void upload(const void* src, size_t bytes, size_t offset = 0);
  void download(void* dst, size_t bytes, size_t offset = 0) const;
  template <class T>
  void upload(std::span<const T> v, size_t offset = 0) { upload(v.data(), v.size_bytes(), offset); }
  template <class T>
  void upload(const std::vector<T>& v, size_t offset = 0) { upload(v.data(), v.size() * sizeof(T), offset); }
  template <class T>
  std::vector<T> read(size_t count, size_t offset = 0) const {
    std::vector<T> v(count);
    download(v.data(), count * sizeof(T), offset);
    return v;
  }

  // A uniform texel buffer view of the whole buffer as RGBA32UI (16-byte texels), created on
  // first use. Used for weights on devices where texel fetches beat storage loads.
  VkBufferView texel_view() const;
  // A new RGBA32UI view of `range` bytes from `offset` (the caller destroys it), or
  // VK_NULL_HANDLE where the device cannot view that: past maxTexelBufferElements, or an offset
  // off minTexelBufferOffsetAlignment.
  VkBufferView make_texel_view(VkDeviceSize offset, VkDeviceSize range) const;

 private:
  void release();
  Context* ctx_ = nullptr;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  VkDeviceSize size_ = 0;
  void* mapped_ = nullptr;
  mutable VkBufferView view_ = VK_NULL_HANDLE;
};

}  // namespace vkspec
