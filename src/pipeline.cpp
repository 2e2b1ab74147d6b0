#include "vkspec/pipeline.hpp"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "vkspec/context.hpp"

namespace vkspec {

namespace detail {
struct EmbeddedShader {
  std::string_view name;
  const uint32_t* words;
  size_t count;
};
extern const EmbeddedShader kEmbeddedShaders[];
extern const size_t kEmbeddedShaderCount;
}  // namespace detail

ShaderCode find_shader(std::string_view name) {
  for (size_t i = 0; i < detail::kEmbeddedShaderCount; ++i)
    if (detail::kEmbeddedShaders[i].name == name)
      return {detail::kEmbeddedShaders[i].name, detail::kEmbeddedShaders[i].words, detail::kEmbeddedShaders[i].count};
  throw Error("shader variant '" + std::string(name) + "' is not built into this library (see shaders/variants.cmake)");
}

bool has_shader(std::string_view name) {
  for (size_t i = 0; i < detail::kEmbeddedShaderCount; ++i)
    if (detail::kEmbeddedShaders[i].name == name) return true;
  return false;
}

std::vector<std::string_view> shader_names() {
  std::vector<std::string_view> out;
  for (size_t i = 0; i < detail::kEmbeddedShaderCount; ++i) out.push_back(detail::kEmbeddedShaders[i].name);
  return out;
}

uint64_t all_shaders_hash() {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const void* p, size_t n) {
    auto* b = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  };
  for (size_t i = 0; i < detail::kEmbeddedShaderCount; ++i) {
    mix(detail::kEmbeddedShaders[i].name.data(), detail::kEmbeddedShaders[i].name.size());
    mix(detail::kEmbeddedShaders[i].words, detail::kEmbeddedShaders[i].count * 4);
  }
  return h;
}

bool fits_stage_limits(const DeviceCaps& caps, const PipelineDesc& d, std::string* why) {
  uint64_t storage = 0, sampled = 0;
  for (VkDescriptorType t : d.bindings) {
    if (t == VK_DESCRIPTOR_TYPE_STORAGE_BUFFER) storage += d.array;
    if (t == VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER) sampled += d.array;
  }
  const auto over = [&](uint64_t n, uint32_t limit, const char* what) {
    if (n <= limit) return false;
    if (why)
      *why = "shader variant '" + d.shader + "' needs " + std::to_string(n) + " " + what + " descriptors, device '" +
             caps.name + "' allows " + std::to_string(limit) + " per shader stage";
    return true;
  };
  return !over(storage, caps.max_stage_storage_buffers, "storage-buffer") &&
         !over(sampled, caps.max_stage_sampled, "texel-buffer");
}

void pipeline_log(std::string_view line) {
  static const char* path = std::getenv("VKSPEC_PIPELINE_LOG");
  if (!path || !*path) return;
  if (FILE* f = std::fopen(path, "a")) {  // one write a line: concurrent processes interleave whole lines
    std::fwrite(line.data(), 1, line.size(), f);
    std::fclose(f);
  }
}

// One line a pipeline: milliseconds in vkCreateComputePipelines, the shader variant, its
// specialization constants. lavapipe JIT-compiles at the first dispatch instead, so there the
// count of distinct lines, not their milliseconds, is what a cold run costs.
static void log_pipeline(const PipelineDesc& desc, double ms) {
  if (!std::getenv("VKSPEC_PIPELINE_LOG")) return;
  std::string line = std::to_string(ms) + "\t" + desc.shader + "\t";
  for (size_t i = 0; i + 4 <= desc.spec.size(); i += 4) {
    uint32_t v;
    std::memcpy(&v, desc.spec.data() + i, 4);
    line += (i ? "," : "") + std::to_string(v);
  }
  if (desc.pair_same | desc.pair_packed)
    line += "\tpair " + std::to_string(desc.pair_same) + "," + std::to_string(desc.pair_packed) + "," +
            std::to_string(desc.pair_delta);
  pipeline_log(line + "\n");
}

Pipeline::Pipeline(Context& ctx, const PipelineDesc& desc, VkPipelineCache cache) : ctx_(ctx), desc_(desc) {
  const auto& vk = ctx.vk();
  const auto& caps = ctx.caps();
  if (std::string why; !fits_stage_limits(caps, desc, &why)) throw Error(why);
  if (desc.required_subgroup_size) {
    if (!caps.subgroup_size_control)
      throw Error("shader variant '" + desc.shader + "' requires subgroup size " +
                  std::to_string(desc.required_subgroup_size) + " but device '" + caps.name +
                  "' cannot control subgroup size");
    if (desc.required_subgroup_size < caps.min_subgroup_size || desc.required_subgroup_size > caps.max_subgroup_size)
      throw Error("shader variant '" + desc.shader + "' requires subgroup size " +
                  std::to_string(desc.required_subgroup_size) + ", outside device '" + caps.name + "' range [" +
                  std::to_string(caps.min_subgroup_size) + ", " + std::to_string(caps.max_subgroup_size) + "]");
  }
  ShaderCode code = find_shader(desc.shader);

  std::vector<VkDescriptorSetLayoutBinding> binds;
  for (uint32_t i = 0; i < desc.bindings.size(); ++i)
    binds.push_back({i, desc.bindings[i], desc.array, VK_SHADER_STAGE_COMPUTE_BIT, nullptr});
  VkDescriptorSetLayoutCreateInfo dli{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  dli.bindingCount = uint32_t(binds.size());
  dli.pBindings = binds.data();
  VKSPEC_VK(vk.vkCreateDescriptorSetLayout(ctx.device(), &dli, nullptr, &set_layout_));

  VkPushConstantRange pcr{VK_SHADER_STAGE_COMPUTE_BIT, 0, desc.push_size};
  VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pli.setLayoutCount = 1;
  pli.pSetLayouts = &set_layout_;
  pli.pushConstantRangeCount = desc.push_size ? 1 : 0;
  pli.pPushConstantRanges = &pcr;
  VKSPEC_VK(vk.vkCreatePipelineLayout(ctx.device(), &pli, nullptr, &layout_));

  VkShaderModuleCreateInfo smi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  smi.codeSize = code.count * 4;
  smi.pCode = code.words;
  VkShaderModule module;
  VKSPEC_VK(vk.vkCreateShaderModule(ctx.device(), &smi, nullptr, &module));

  std::vector<VkSpecializationMapEntry> entries;
  for (uint32_t i = 0; i < desc.spec.size() / 4; ++i) entries.push_back({i, i * 4, 4});
  std::vector<uint8_t> spec = desc.spec;
  if (desc.array == 2) {  // shaders/pair.glsl's constants, after the kernel's own
    for (uint32_t v : {desc.pair_same, desc.pair_packed, desc.pair_delta}) {
      entries.push_back({kPairConstantId + uint32_t(entries.size() - desc.spec.size() / 4), uint32_t(spec.size()), 4});
      spec.insert(spec.end(), reinterpret_cast<const uint8_t*>(&v), reinterpret_cast<const uint8_t*>(&v) + 4);
    }
  }
  VkSpecializationInfo si{uint32_t(entries.size()), entries.data(), spec.size(), spec.data()};

  VkPipelineShaderStageRequiredSubgroupSizeCreateInfo rss{
      VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO};
  rss.requiredSubgroupSize = desc.required_subgroup_size;
  VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = module;
  ci.stage.pName = "main";
  ci.stage.pSpecializationInfo = entries.empty() ? nullptr : &si;
  if (desc.required_subgroup_size) ci.stage.pNext = &rss;
  if (desc.full_subgroups) ci.stage.flags |= VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT;
  ci.layout = layout_;
  const auto t0 = std::chrono::steady_clock::now();
  VkResult r = vk.vkCreateComputePipelines(ctx.device(), cache, 1, &ci, nullptr, &pipeline_);
  vk.vkDestroyShaderModule(ctx.device(), module, nullptr);
  if (r != VK_SUCCESS) throw_vk_error(r, ("vkCreateComputePipelines(" + desc.shader + ")").c_str(), __FILE__, __LINE__);
  log_pipeline(desc, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
}

Pipeline::~Pipeline() {
  const auto& vk = ctx_.vk();
  if (pipeline_) vk.vkDestroyPipeline(ctx_.device(), pipeline_, nullptr);
  if (layout_) vk.vkDestroyPipelineLayout(ctx_.device(), layout_, nullptr);
  if (set_layout_) vk.vkDestroyDescriptorSetLayout(ctx_.device(), set_layout_, nullptr);
}

static std::string cache_dir(const std::string& configured) {
  if (configured == "-") return {};
  if (!configured.empty()) return configured;
  if (const char* env = std::getenv("VKSPEC_PIPELINE_CACHE"))
    return std::string(env) == "-" ? std::string() : env;  // "-": none, as the C API's pipeline_cache_dir
  // The XDG base directory rules: a relative XDG_CACHE_HOME is invalid and ignored (it would put a
  // cache folder in whatever directory the program runs from).
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x == '/') return std::string(x) + "/vkspec";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/vkspec";
  return {};
}

// A cache file past this is not read (a driver's whole cache for vkspec's shaders is a few MiB).
constexpr uintmax_t kMaxCacheBytes = uintmax_t(256) << 20;

PipelineCache::PipelineCache(Context& ctx, const std::string& dir_opt) : ctx_(ctx) {
  std::vector<char> blob;
  std::string dir = cache_dir(dir_opt);
  if (!dir.empty()) {
    std::ostringstream name;
    name << dir << "/pipelines-";
    for (uint8_t b : ctx.caps().uuid) name << std::hex << (b >> 4) << (b & 15);
    name << "-" << std::hex << ctx.caps().driver_version << "-" << all_shaders_hash() << ".bin";
    path_ = name.str();
    // Only a regular file is read (by stat, without opening it: a FIFO there would block the open,
    // inside a C API call that holds its lock), and one no larger than kMaxCacheBytes; anything
    // else at that path is left alone, neither read nor replaced at exit.
    std::error_code ec;
    const auto st = std::filesystem::status(path_, ec);
    if (std::filesystem::exists(st) && !std::filesystem::is_regular_file(st)) {
      path_.clear();
    } else if (std::filesystem::exists(st) && std::filesystem::file_size(path_, ec) <= kMaxCacheBytes && !ec) {
      std::ifstream f(path_, std::ios::binary);
      if (f) blob.assign(std::istreambuf_iterator<char>(f), {});
    }
  }
  // The driver validates the blob's header (vendor, device, UUID) and ignores one that does not
  // match, so a stale or foreign file costs only a recompile.
  VkPipelineCacheCreateInfo ci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  ci.initialDataSize = blob.size();
  ci.pInitialData = blob.empty() ? nullptr : blob.data();
  if (ctx.vk().vkCreatePipelineCache(ctx.device(), &ci, nullptr, &cache_) != VK_SUCCESS) {
    ci.initialDataSize = 0;
    ci.pInitialData = nullptr;
    VKSPEC_VK(ctx.vk().vkCreatePipelineCache(ctx.device(), &ci, nullptr, &cache_));
  }
}

PipelineCache::~PipelineCache() {
  pipelines_.clear();
  const auto& vk = ctx_.vk();
  if (!path_.empty()) {
    size_t n = 0;
    if (vk.vkGetPipelineCacheData(ctx_.device(), cache_, &n, nullptr) == VK_SUCCESS && n) {
      std::vector<char> data(n);
      if (vk.vkGetPipelineCacheData(ctx_.device(), cache_, &n, data.data()) == VK_SUCCESS) {
        std::error_code ec;
        std::filesystem::create_directories(std::filesystem::path(path_).parent_path(), ec);
        // Write then rename, so two processes never leave a torn file behind.
        std::string tmp = path_ + ".tmp" + std::to_string(reinterpret_cast<uintptr_t>(this));
        std::ofstream f(tmp, std::ios::binary);
        if (f.write(data.data(), std::streamsize(n))) {
          f.close();
          std::filesystem::rename(tmp, path_, ec);
        }
        std::filesystem::remove(tmp, ec);
      }
    }
  }
  vk.vkDestroyPipelineCache(ctx_.device(), cache_, nullptr);
}

const Pipeline& PipelineCache::get(const PipelineDesc& desc) {
  std::string key = desc.shader + "|" + std::to_string(desc.required_subgroup_size) + "|" +
                    std::to_string(desc.full_subgroups) + "|" + std::to_string(desc.push_size) + "|" +
                    std::to_string(desc.array) + "|" + std::to_string(desc.pair_same) + "," +
                    std::to_string(desc.pair_packed) + "," + std::to_string(desc.pair_delta) + "|";
  for (auto t : desc.bindings) key += std::to_string(int(t)) + ",";
  key += "|";
  key.append(reinterpret_cast<const char*>(desc.spec.data()), desc.spec.size());
  {
    std::lock_guard lock(mu_);
    auto it = pipelines_.find(key);
    if (it != pipelines_.end()) return *it->second;
  }
  auto p = std::make_unique<Pipeline>(ctx_, desc, cache_);
  std::lock_guard lock(mu_);
  return *pipelines_.emplace(key, std::move(p)).first->second;  // an existing one is kept, p destroyed
}

size_t PipelineCache::size() const {
  std::lock_guard lock(mu_);
  return pipelines_.size();
}

}  // namespace vkspec
