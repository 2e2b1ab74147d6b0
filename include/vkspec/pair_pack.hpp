// Two draft heads' weights in one buffer, so that a PAIR dispatch (Sequence::begin_pair) reads
// either head's weight through one texel view.
//
// A PAIR variant takes each texel binding as two descriptors, head A's and head B's, and picks
// one by a branch on the head index (shaders/pair.glsl). A CPU rasterizer runs both sides of that
// branch under lane masks, so each weight texel was fetched twice: single-threaded on lavapipe a
// merge step's draft took 3.2-3.5 ms paired against 2.5 ms unpaired, and 2.4 ms with one fetch.
// Here each pair of weights (A's and B's tensor of the same shape) is copied into one buffer, A's
// copies first and B's `delta()` texels after A's, and the view of A's copy that runs on past B's
// lets the shader fetch texel i + head·delta from one descriptor (PAIR_PACKED).
//
// The copies add the heads' weight bytes once more (bytes()); only devices whose kernels read
// weights through texel views get one (Engine, DeviceCaps::quirks.weights_via_texel_buffer).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include <volk.h>

#include "vkspec/buffer.hpp"

namespace vkspec {

class Context;
struct DeviceWeight;

class PairPack {
 public:
  // a[i] and b[i] are the two heads' weights of one role (same rows, columns and chunk layout);
  // a pair whose buffers differ in size is left out (its dispatches keep the branch).
  PairPack(Context& ctx, std::span<const DeviceWeight* const> a, std::span<const DeviceWeight* const> b);
  ~PairPack();
  PairPack(const PairPack&) = delete;
  PairPack& operator=(const PairPack&) = delete;

  // The view for a PAIR dispatch's texel binding whose descriptors are `a` (head A's buffer) and
  // `b` (head B's): A's copy at texel 0, B's at delta(). VK_NULL_HANDLE if they are not packed.
  VkBufferView view(VkBuffer a, VkBuffer b) const;
  uint32_t delta() const { return delta_; }
  uint64_t bytes() const { return buf_.size(); }
  size_t packed() const { return views_.size(); }  // buffer pairs packed

 private:
  Context& ctx_;
  Buffer buf_;
  uint32_t delta_ = 0;
  struct Entry {
    VkBuffer b;
    VkBufferView view;
  };
  std::unordered_map<VkBuffer, Entry> views_;  // by A's buffer
};

}  // namespace vkspec
