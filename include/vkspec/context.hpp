// The Vulkan context: instance, physical device, logical device, one compute queue.
//
// No global state: each Context owns (or adopts) its device and carries its own device-level
// function table, so several runtimes — or a game's own VkDevice — live in one process.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <volk.h>

#include "vkspec/error.hpp"

namespace vkspec {

// Everything kernel selection may depend on, filled once from Vulkan queries.
struct DeviceCaps {
  std::string name;
  VkPhysicalDeviceType type = VK_PHYSICAL_DEVICE_TYPE_OTHER;
  uint32_t vendor_id = 0, device_id = 0, driver_version = 0, api_version = 0;
  VkDriverId driver_id = VkDriverId(0);
  std::string driver_name, driver_info;
  std::array<uint8_t, VK_UUID_SIZE> uuid{};

  uint32_t subgroup_size = 1;      // default size of compute subgroups
  uint32_t min_subgroup_size = 1;  // from VK_EXT_subgroup_size_control (== subgroup_size without it)
  uint32_t max_subgroup_size = 1;
  bool subgroup_size_control = false;  // can pin a pipeline's subgroup size
  bool compute_full_subgroups = false;
  bool subgroup_arithmetic = false;  // subgroupAdd/Max in compute
  bool subgroup_shuffle = false;

  bool fp16_arithmetic = false;  // shaderFloat16
  bool int8_arithmetic = false;  // shaderInt8
  bool storage_16bit = false;    // storageBuffer16BitAccess
  bool storage_8bit = false;     // storageBuffer8BitAccess
  // Storage-buffer descriptor arrays indexed by a dynamically uniform value
  // (shaderStorageBufferArrayDynamicIndexing), enabled on vkspec's own device: the PAIR shader
  // variants that run two draft heads' work in one dispatch need it (shaders/pair.glsl).
  bool pair_dispatch = false;

  uint32_t max_shared_memory = 16384;
  // Descriptors one compute shader may use: storage buffers, and sampled images (which uniform
  // texel buffers count as). A kernel over the limit is refused; a PAIR variant over it is not
  // used (the two heads' dispatches run one after the other).
  uint32_t max_stage_storage_buffers = 4;
  uint32_t max_stage_sampled = 16;
  uint64_t max_storage_buffer_range = 1ull << 27;
  uint64_t max_uniform_buffer_range = 16384;
  uint64_t max_texel_buffer_elements = 65536;
  // maxMemoryAllocationSize: a Buffer larger than this is refused by name before the driver is asked.
  uint64_t max_allocation_bytes = 1ull << 30;
  uint32_t max_workgroup_invocations = 128;
  std::array<uint32_t, 3> max_workgroup_size{128, 1, 1};
  std::array<uint32_t, 3> max_workgroup_count{65535, 65535, 65535};
  uint32_t max_push_constants = 128;
  uint64_t min_storage_buffer_offset_alignment = 256;
  uint64_t min_uniform_buffer_offset_alignment = 256;
  uint64_t min_texel_buffer_offset_alignment = 256;
  float timestamp_period_ns = 0;  // 0: no timestamps on the compute queue
  uint64_t device_local_bytes = 0;
  struct Heap {
    uint64_t bytes = 0;
    bool device_local = false;
  };
  std::vector<Heap> heaps;  // the device's memory heaps, in Vulkan's order
  bool unified_memory = false;  // a device-local memory type is also host-visible

  // Driver quirks: behaviour that capability queries cannot tell, each with the reason. They
  // are set in one place (context.cpp, derive_quirks) from what the driver reports, never from
  // vendor names.
  struct Quirks {
    // CPU rasterizers (llvmpipe/lavapipe) lower each storage-buffer load to a per-lane loop
    // with a bounds check per component; reading weights through a uniform texel buffer
    // (texelFetch on RGBA32UI) is 3-5x faster there and also sidesteps maxStorageBufferRange.
    bool weights_via_texel_buffer = false;
    // Barriers and shared memory are costly on CPU rasterizers (invocations are fibers over
    // SIMD lanes): matmul and attention there use one subgroup per workgroup (subgroup
    // reductions, no barrier; matmul_sg.comp, attention_sg.comp).
    bool single_subgroup_kernels = false;
    // lavapipe (Mesa's gallivm, LP_MAX_TGSI_LOOP_ITERATIONS) gives each shader invocation one
    // budget of 65535 loop iterations shared by all its loops and, once it is spent, silently
    // ends every loop after its current iteration: wrong results, or garbage indices and a
    // crash. Measured on Mesa 22.3.6: one loop of 102400 iterations ran 65535; merge_trie at
    // 32/64-wide groups on ~1000 nodes gave wrong trees (tests/test_tree_trie.cpp). 0 = none.
    // Kernels with long per-invocation loops keep under it (tree_trie.comp; merge_trie).
    uint32_t loop_iteration_limit = 0;
  } quirks;

  bool is_cpu() const { return type == VK_PHYSICAL_DEVICE_TYPE_CPU; }
  std::string type_name() const;
};

// How matmul_lanes (the kernel of CPU-like devices) cuts a pass of B rows into tiles, each tile
// size a pipeline of its own (ops/matmul.cpp: lanes_batch_tile):
//   Even         as few tiles as the size cap allows, split evenly (B = 9: one tile of 9): the
//                fastest pass; a model meets up to 16 tile sizes per weight type and fold.
//   PowersOfTwo  tiles of 1, 2, 4, 8 or 16 rows (B = 9: one tile of 16, its last 7 rows clamped
//                copies of row 8): at most 5 tile sizes, so a run that meets many pass sizes — a
//                budget search, a test suite — has a third as many pipelines to compile (lavapipe
//                compiles each at its first dispatch, ~1.5 s), and a pass computes up to ~2x its rows.
// A row's result does not depend on its tile, so both give the same bits.
enum class BatchTiles { Even, PowersOfTwo };

struct ContextOptions {
  // Device choice: "" → VKSPEC_DEVICE env var, else prefer discrete > integrated > virtual > CPU.
  // Otherwise a decimal index into the enumeration or a case-insensitive name substring.
  std::string device;
  // Khronos validation (with synchronization validation). Messages are collected (see
  // Context::take_validation_messages) and echoed to stderr.
  bool validation = false;
  // Directory for the on-disk pipeline cache; "" → $XDG_CACHE_HOME/vkspec or ~/.cache/vkspec;
  // "-" disables it.
  std::string pipeline_cache_dir;
  BatchTiles batch_tiles = BatchTiles::Even;
  // Test hook: pretend maxStorageBufferRange is this many bytes (0 = the device's).
  uint64_t storage_range_limit = 0;
  // Test hook: pretend maxPerStageDescriptorStorageBuffers is this (0 = the device's).
  uint32_t stage_storage_buffers_limit = 0;
  // Test hook: pretend maxMemoryAllocationSize is this many bytes (0 = the device's).
  uint64_t allocation_limit = 0;
  // When vkspec creates the device: the queue's priority (0..1) and, where the device offers
  // VK_KHR/EXT_global_priority, a system-wide priority (a VkQueueGlobalPriorityKHR value, 0 =
  // don't ask). A global priority the system refuses (VK_ERROR_NOT_PERMITTED) falls back to none.
  float queue_priority = 1.0f;
  uint32_t global_priority = 0;
  // Vulkan requires external synchronization of a VkQueue: every vkQueueSubmit vkspec makes is
  // bracketed by lock(user) / unlock(user) when set (an app sharing its queue passes its lock).
  struct QueueLock {
    void (*lock)(void* user) = nullptr;
    void (*unlock)(void* user) = nullptr;
    void* user = nullptr;
  } queue_lock;
};

// A device vkspec cannot run on: what is missing is named (the C API's
// VKSPEC_ERROR_MISSING_FEATURE).
struct MissingFeature : Error {
  using Error::Error;
};

// A caller's existing Vulkan objects. The caller keeps ownership; vkspec only borrows them and
// must be destroyed before they are. Vulkan cannot tell which optional features a device was
// created with, so the caller says; kernels needing a feature not listed here are not chosen.
struct AdoptedDevice {
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice physical_device = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t queue_family = 0;
  uint32_t api_version = VK_API_VERSION_1_2;
  struct Enabled {
    bool shader_float16 = false, shader_int8 = false;
    bool storage_buffer_16bit = false, storage_buffer_8bit = false;
    bool subgroup_size_control = false;
    bool timeline_semaphore = false;  // required (Vulkan 1.2 timelineSemaphore)
  } enabled;
};

// What vkspec needs of a device it did not create: Vulkan 1.2 on instance and device, a compute
// queue family, and the timelineSemaphore feature (each submission signals a timeline semaphore
// an app can wait on or fold into its own submit). Everything else is optional (AdoptedDevice::Enabled).
inline constexpr const char* kRequiredFeatures[] = {"timelineSemaphore"};

struct PhysicalDeviceInfo {
  uint32_t index;
  DeviceCaps caps;
};

class PipelineCache;

class Context {
 public:
  explicit Context(const ContextOptions& opts = {});
  Context(const AdoptedDevice& adopted, const ContextOptions& opts = {});
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // All Vulkan devices the loader sees, with their capabilities (creates a temporary instance).
  static std::vector<PhysicalDeviceInfo> enumerate();
  // Which index ContextOptions/VKSPEC_DEVICE would choose among `devices`.
  static uint32_t choose(const std::vector<PhysicalDeviceInfo>& devices, const std::string& selector);

  const DeviceCaps& caps() const { return caps_; }
  VkDevice device() const { return device_; }
  VkPhysicalDevice physical_device() const { return physical_; }
  VkQueue queue() const { return queue_; }
  uint32_t queue_family() const { return queue_family_; }
  const VolkDeviceTable& vk() const { return vk_; }
  PipelineCache& pipelines() { return *pipelines_; }
  uint64_t storage_range() const;  // maxStorageBufferRange, or the test override
  // ContextOptions::batch_tiles; a change applies to passes recorded after it.
  BatchTiles batch_tiles() const { return batch_tiles_; }
  void set_batch_tiles(BatchTiles t) { batch_tiles_ = t; }

  // Index of a memory type with `required` flags (and preferably `preferred` ones).
  uint32_t memory_type(uint32_t type_bits, VkMemoryPropertyFlags required,
                       VkMemoryPropertyFlags preferred = 0) const;

  // THREADS. A Context may be used from several threads at once as long as each Sequence, and
  // each Buffer written, is used by one thread at a time (weights only read may be shared, their
  // texel views made once): the queue, the one-shot command buffer, the pipeline cache and the
  // counters are synchronized here, and every Sequence records into a command pool of its own.
  // (The C API builds one context's step while others submit and poll.)

  // vkQueueSubmit under this context's queue mutex, then the caller's queue lock
  // (ContextOptions::queue_lock), in that order.
  void queue_submit(const VkSubmitInfo& si, VkFence fence);

  // Submits a one-off command buffer and waits for it (uploads, readbacks, setup). One at a time:
  // `record` must not call one_shot itself.
  template <class F>
  void one_shot(F&& record);

  // Validation messages collected since the last call (empty when validation is off).
  std::vector<std::string> take_validation_messages();
  bool validation_enabled() const { return messenger_ != VK_NULL_HANDLE; }

  // Host waits performed through this context (submit + fence wait), for statistics.
  uint64_t host_waits() const { return host_waits_; }
  void count_host_wait() { ++host_waits_; }

  // Bytes of device memory currently allocated through this context's Buffers (the soak test
  // checks it does not grow from step to step).
  uint64_t allocated_bytes() const { return allocated_bytes_; }
  void count_allocation(int64_t bytes) { allocated_bytes_ += uint64_t(bytes); }

  // Where a device Buffer is bound when it does not allocate memory of its own: `size` bytes at
  // `offset` of `memory`, which `in` (a buffer over all of that memory) covers; `mapped` is that
  // memory's host pointer, or nullptr.
  struct Placement {
    VkDeviceMemory memory = VK_NULL_HANDLE;
    VkDeviceSize offset = 0, size = 0;
    VkBuffer in = VK_NULL_HANDLE;
    void* mapped = nullptr;
  };
  // While a placer is set, MemoryKind::Device Buffers created on this context by the setting
  // thread ask it where to bind (the buffer's memory requirements) instead of allocating; it
  // throws where it cannot place one. Other threads are not affected. PairPack places two heads'
  // states this way. An empty function unsets it.
  using Placer = std::function<Placement(const VkMemoryRequirements&)>;
  void set_placer(Placer placer);
  // Called by Buffer for its new buffer `b`: where to bind it (kept for placed_in), or a
  // Placement with no memory when `b` allocates its own.
  Placement place(VkBuffer b, const VkMemoryRequirements& req);
  // The placement of buffer `b`, kept while it lives (memory null if `b` has its own memory):
  // what reads through a view over the placement's `in` touch (Sequence's barriers).
  Placement placed_in(VkBuffer b) const;
  void forget_placed(VkBuffer b);

 private:
  void init_device(const ContextOptions& opts, bool own);
  void one_shot_begin(VkCommandBuffer& cb);
  void one_shot_end(VkCommandBuffer cb);
  static VkBool32 VKAPI_PTR debug_callback(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                           VkDebugUtilsMessageTypeFlagsEXT types,
                                           const VkDebugUtilsMessengerCallbackDataEXT* data, void* user);

  bool owns_instance_ = false, owns_device_ = false;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  PFN_vkDestroyDebugUtilsMessengerEXT destroy_messenger_ = nullptr;  // this instance's, not volk's global
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  VkCommandPool pool_ = VK_NULL_HANDLE;  // one_shot's, under one_shot_mutex_
  VkFence fence_ = VK_NULL_HANDLE;       // one_shot's
  std::mutex one_shot_mutex_;
  std::mutex queue_mutex_;
  VolkDeviceTable vk_{};
  DeviceCaps caps_;
  VkPhysicalDeviceMemoryProperties mem_props_{};
  uint64_t storage_range_limit_ = 0;
  BatchTiles batch_tiles_ = BatchTiles::Even;
  ContextOptions::QueueLock queue_lock_;
  std::atomic<uint64_t> host_waits_{0};
  std::atomic<uint64_t> allocated_bytes_{0};
  mutable std::mutex placed_mutex_;
  std::unordered_map<VkBuffer, Placement> placed_;
  std::unique_ptr<PipelineCache> pipelines_;
  std::mutex messages_mutex_;
  std::vector<std::string> messages_;
};

template <class F>
void Context::one_shot(F&& record) {
  std::lock_guard lock(one_shot_mutex_);
  VkCommandBuffer cb;
  one_shot_begin(cb);
  record(cb);
  one_shot_end(cb);
}

}  // namespace vkspec
