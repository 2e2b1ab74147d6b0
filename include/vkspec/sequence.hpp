// A Sequence records many dispatches into ONE command buffer, inserting the barriers they need,
// and can time each dispatch with timestamp queries.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <volk.h>

#include "vkspec/buffer.hpp"
#include "vkspec/pipeline.hpp"

namespace vkspec {

class Context;
class PairPack;

// One descriptor of a dispatch. The access (read or write) drives barrier insertion.
struct Binding {
  const Buffer* buffer = nullptr;
  VkDeviceSize offset = 0;
  VkDeviceSize range = VK_WHOLE_SIZE;
  bool write = false;
};
inline Binding in(const Buffer& b, VkDeviceSize off = 0, VkDeviceSize range = VK_WHOLE_SIZE) { return {&b, off, range, false}; }
inline Binding out(const Buffer& b, VkDeviceSize off = 0, VkDeviceSize range = VK_WHOLE_SIZE) { return {&b, off, range, true}; }

struct DispatchTiming {
  std::string label;
  double us;
};

class Sequence {
 public:
  // `max_timed`: how many dispatches can carry a timestamp (0 disables timing).
  // A `replayable` sequence is recorded once and submitted many times (a StepPlan's step, several
  // copies per submission): its dispatches are indirect, their recorded grid sizes kept in a
  // device buffer that gate() — the recording's first dispatch — copies to the live arguments,
  // or zeroes once the step state says the generation is done.
  explicit Sequence(Context& ctx, uint32_t max_timed = 0, bool replayable = false);
  ~Sequence();
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;

  // Starts recording (waits for a previous submission of this sequence first).
  void begin();
  // Records one dispatch. Bindings follow the pipeline's binding list in order; a uniform texel
  // binding uses the buffer's RGBA32UI view. A barrier is inserted first if this dispatch touches
  // a buffer written since the last barrier, or writes one read since then.
  void dispatch(const Pipeline& p, std::span<const Binding> bindings, const void* push, uint32_t push_size,
                uint32_t gx, uint32_t gy = 1, uint32_t gz = 1, const char* label = nullptr);
  void dispatch(const Pipeline& p, std::initializer_list<Binding> bindings, const void* push, uint32_t push_size,
                uint32_t gx, uint32_t gy = 1, uint32_t gz = 1, const char* label = nullptr) {
    dispatch(p, std::span<const Binding>(bindings.begin(), bindings.size()), push, push_size, gx, gy, gz, label);
  }
  template <class Push>
  void dispatch(const Pipeline& p, std::initializer_list<Binding> bindings, const Push& push, uint32_t gx,
                uint32_t gy = 1, uint32_t gz = 1, const char* label = nullptr) {
    dispatch(p, bindings, &push, sizeof(Push), gx, gy, gz, label);
  }
  // The same with a binding list built at run time (a variant with more bindings than another).
  template <class Push>
  void dispatch(const Pipeline& p, std::span<const Binding> bindings, const Push& push, uint32_t gx, uint32_t gy = 1,
                uint32_t gz = 1, const char* label = nullptr) {
    dispatch(p, bindings, &push, sizeof(Push), gx, gy, gz, label);
  }
  void copy(const Buffer& src, VkDeviceSize src_off, const Buffer& dst, VkDeviceSize dst_off, VkDeviceSize bytes);
  void copy(const Buffer& src, const Buffer& dst, const std::vector<VkBufferCopy>& regions);
  void fill(const Buffer& dst, uint32_t value, VkDeviceSize off = 0, VkDeviceSize bytes = VK_WHOLE_SIZE);
  // vkCmdUpdateBuffer: `bytes` (a multiple of 4, <= 65536) from host memory, at this point of the recording.
  void update(const Buffer& dst, VkDeviceSize off, const void* data, VkDeviceSize bytes);
  // Replayable sequences only, first in the recording: the rest of this recording's dispatches
  // run only while state[kStateDone] == 0 (vkspec/step_state.h).
  void gate(const Buffer& state);
  // Two independent recordings in one pass (two draft heads' levels): after begin_pair(), commands
  // are captured as list A until next_pair(), then as list B; end_pair() records both, zipped.
  // The i-th commands of A and B run as ONE dispatch of the shader's PAIR variant (grid z = 2,
  // each binding an array of A's and B's descriptor, shaders/pair.glsl) where they are the same
  // pipeline with the same push constants and a grid of one z layer, and the device has
  // DeviceCaps::pair_dispatch; otherwise A's command and then B's. Neither list may read what
  // the other writes.
  // `pack`: the two heads' weights (and states) packed (PairPack): a texel binding found there is
  // read from one descriptor (shaders/pair.glsl, PAIR_PACKED). It must outlive the recording.
  void begin_pair(const PairPack* pack = nullptr);
  void next_pair();
  void end_pair();
  uint32_t paired_count() const { return paired_; }  // PAIR dispatches since begin()
  // Texel bindings of those read from one descriptor (the same view twice, or PairPack's).
  uint32_t single_fetch_bindings() const { return single_fetch_; }
  // Makes all prior writes visible to the next commands (normally automatic).
  void barrier();

  // Ends recording; a final barrier makes results visible to the host.
  void end();
  void submit(uint32_t copies = 1);  // copies > 1: replayable only, the recording back to back
  // The same, also signalling `timeline` (a timeline semaphore) to `value` when done.
  void submit(uint32_t copies, VkSemaphore timeline, uint64_t value);
  void wait();  // one host wait (counted in Context::host_waits)
  // Never waits: true when nothing is in flight (the fence of the last submission is signalled).
  bool ready();
  bool pending() const { return pending_; }
  VkFence fence() const { return fence_; }  // signalled when the last submission is done
  void run() {
    end();
    submit();
    wait();
  }

  // After wait(): GPU time per timed dispatch, in recording order.
  std::vector<DispatchTiming> timings() const;
  uint32_t dispatch_count() const { return dispatches_; }
  Context& context() const { return ctx_; }
  VkCommandBuffer command_buffer() const { return cb_; }

 private:
  struct Captured {
    const Pipeline* p = nullptr;  // null: a transfer command, replayed by `run`
    std::vector<Binding> bindings;
    std::vector<uint8_t> push;
    uint32_t g[3] = {1, 1, 1};
    const char* label = nullptr;
    std::function<void()> run;
  };
  // One dispatch; `pair` (optional) is B's bindings of a PAIR dispatch of `p`.
  // `views` (optional, with `pair`): per binding, a texel view to bind as both descriptors;
  // `pack_read`: the buffer those views read (PairPack::buffer), read as a whole.
  void record(const Pipeline& p, const Binding* bindings, const Binding* pair, size_t n, const void* push,
              uint32_t push_size, uint32_t gx, uint32_t gy, uint32_t gz, const char* label,
              const VkBufferView* views = nullptr, VkBuffer pack_read = VK_NULL_HANDLE);
  const Pipeline* pair_pipeline(const Pipeline& p, uint32_t same, uint32_t packed, uint32_t delta);
  bool capture(std::function<void()> run);  // true: captured (in a pair section), not recorded
  void touch(VkBuffer b, bool write);
  bool hazard(VkBuffer b, bool write) const;
  Context& ctx_;
  VkCommandPool cmd_pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cb_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  VkDescriptorPool pool_ = VK_NULL_HANDLE;
  VkQueryPool queries_ = VK_NULL_HANDLE;
  uint32_t max_timed_ = 0, timed_ = 0, dispatches_ = 0, paired_ = 0;
  int capturing_ = -1;  // the pair list being captured, -1 none
  std::vector<Captured> lists_[2];
  std::map<std::tuple<const Pipeline*, uint32_t, uint32_t, uint32_t>, const Pipeline*> pair_of_;
  const PairPack* pack_ = nullptr;  // of the pair section being captured
  uint32_t single_fetch_ = 0;
  bool recording_ = false, pending_ = false, replayable_ = false;
  Buffer recorded_args_, live_args_;  // replayable: (count, pad[3], gx gy gz per dispatch)
  std::vector<uint32_t> args_;
  const Pipeline* gate_pipeline_ = nullptr;
  std::vector<std::string> labels_;
  std::unordered_set<VkBuffer> written_, read_;
};

}  // namespace vkspec
