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
// The heads' states (K/V caches, activations) are read through texel views too, so a pack can
// also hold them: each side's state buffers are made in the pack's memory (Context::set_placer),
// B's `delta()` texels after A's, one buffer of B's for each of A's in creation order. A view over
// such a pair reads past A's buffer through everything placed between, so Sequence counts a read
// through it as a read of the pack's whole buffer (Context::placed_in).
//
// The copies add the heads' weight bytes once more (bytes()); only devices whose kernels read
// weights through texel views get one (Engine, DeviceCaps::quirks.weights_via_texel_buffer).
#pragma once

#include <cstdint>
#include <functional>
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
  // `state_bytes` > 0: room for each side's state, which make_state(side) (0: A, 1: B) creates
  // while the pack places device Buffers; a buffer that does not fit there (or asks for an
  // alignment above kMaxPlacedAlignment) throws, naming the bytes set aside.
  static constexpr uint64_t kMaxPlacedAlignment = 65536;
  PairPack(Context& ctx, std::span<const DeviceWeight* const> a, std::span<const DeviceWeight* const> b,
           uint64_t state_bytes = 0, const std::function<void(int side)>& make_state = {});
  ~PairPack();
  PairPack(const PairPack&) = delete;
  PairPack& operator=(const PairPack&) = delete;

  // The view for a PAIR dispatch's texel binding whose descriptors are `a` (head A's buffer) and
  // `b` (head B's): A's copy (or placed buffer) at texel 0, B's at delta(). VK_NULL_HANDLE if
  // they are not packed.
  VkBufferView view(VkBuffer a, VkBuffer b) const;
  uint32_t delta() const { return delta_; }
  uint64_t bytes() const { return buf_.size(); }
  const Buffer& buffer() const { return buf_; }  // all of it: what a read through view() touches
  size_t packed() const { return views_.size(); }  // buffer pairs packed (weights, and placed ones viewed so far)

 private:
  void destroy_views();
  Context& ctx_;
  Buffer buf_;
  uint32_t delta_ = 0;
  uint64_t half_ = 0;  // bytes of a side: delta() texels
  struct Entry {
    VkBuffer b;
    VkBufferView view;
  };
  mutable std::unordered_map<VkBuffer, Entry> views_;  // by A's buffer; placed pairs added on first use
};

}  // namespace vkspec
