// Compute pipelines built from embedded SPIR-V, with named specialization-constant structs.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <volk.h>

namespace vkspec {

class Context;
struct DeviceCaps;

// The SPIR-V of one shader variant as compiled at build time (shaders/variants.cmake).
struct ShaderCode {
  std::string_view name;
  const uint32_t* words;
  size_t count;
};
ShaderCode find_shader(std::string_view name);  // throws naming the variant if it is not built
bool has_shader(std::string_view name);
std::vector<std::string_view> shader_names();
uint64_t all_shaders_hash();  // FNV-1a over every embedded module: part of the cache key
// Appends `line` to the file VKSPEC_PIPELINE_LOG names (nothing when unset): every pipeline built
// logs itself there; the test binary adds its cases (tools/pipeline_log.py reads both).
void pipeline_log(std::string_view line);

// Specialization constants are plain structs of 4-byte fields; field i is constant_id i.
// Each op mirrors its shader's `layout(constant_id = i)` list in one struct with static_asserts.
template <class Spec>
std::span<const uint8_t> spec_bytes(const Spec& s) {
  static_assert(sizeof(Spec) % 4 == 0, "specialization structs hold 4-byte fields only");
  return {reinterpret_cast<const uint8_t*>(&s), sizeof(Spec)};
}

// The first of shaders/pair.glsl's specialization constants (PAIR_SAME, PAIR_PACKED, PAIR_DELTA).
inline constexpr uint32_t kPairConstantId = 40;

struct PipelineDesc {
  std::string shader;                        // variant name
  std::vector<VkDescriptorType> bindings;    // binding i of set 0
  uint32_t push_size = 0;                    // bytes of push constants
  std::vector<uint8_t> spec;                 // specialization data, 4-byte fields
  uint32_t required_subgroup_size = 0;       // 0: the driver's choice
  bool full_subgroups = false;               // require full subgroups (needs subgroup size control)
  uint32_t array = 1;                        // descriptors per binding: 2 for a PAIR variant (Sequence::begin_pair)
  // A PAIR variant's constants 40-42 (shaders/pair.glsl): texel bindings read once, not through a
  // branch over both descriptors. Bits by binding index; delta in texels.
  uint32_t pair_same = 0, pair_packed = 0, pair_delta = 0;
};

// Whether the device lets one compute shader use the descriptors `d` declares (DeviceCaps'
// per-stage limits); `why` names the one it exceeds.
bool fits_stage_limits(const DeviceCaps& caps, const PipelineDesc& d, std::string* why = nullptr);

template <class Spec>
PipelineDesc make_pipeline_desc(std::string shader, std::vector<VkDescriptorType> bindings, uint32_t push_size,
                                const Spec& spec, uint32_t required_subgroup_size = 0) {
  auto b = spec_bytes(spec);
  return {std::move(shader), std::move(bindings), push_size, {b.begin(), b.end()}, required_subgroup_size, false};
}

class Pipeline {
 public:
  Pipeline(Context& ctx, const PipelineDesc& desc, VkPipelineCache cache);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  VkPipeline handle() const { return pipeline_; }
  VkPipelineLayout layout() const { return layout_; }
  VkDescriptorSetLayout set_layout() const { return set_layout_; }
  const PipelineDesc& desc() const { return desc_; }

 private:
  Context& ctx_;
  PipelineDesc desc_;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
};

// Memoizes pipelines per (variant, constants, subgroup size) and keeps a VkPipelineCache that is
// saved to disk, keyed by the device's pipeline-cache UUID, driver version and the hash of all
// embedded shaders, so a second run skips shader compilation.
class PipelineCache {
 public:
  PipelineCache(Context& ctx, const std::string& dir);
  ~PipelineCache();
  // Safe from several threads: a pipeline not made yet is compiled outside the lock (another
  // thread may make the same one meanwhile; the first kept wins).
  const Pipeline& get(const PipelineDesc& desc);
  const std::string& path() const { return path_; }
  size_t size() const;  // pipelines created (on lavapipe each a compile)

 private:
  Context& ctx_;
  std::string path_;
  VkPipelineCache cache_ = VK_NULL_HANDLE;  // internally synchronized (created without the external bit)
  mutable std::mutex mu_;                   // pipelines_
  std::map<std::string, std::unique_ptr<Pipeline>> pipelines_;
};

}  // namespace vkspec
