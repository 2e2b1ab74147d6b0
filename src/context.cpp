// Instance → physical device → device → queue, in a straight line, plus capability queries.
#include "vkspec/context.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <utility>

#include "vkspec/pipeline.hpp"

namespace vkspec {

namespace {

// volk's loader entry points are process-wide by design (they are the loader's own
// trampolines, valid for every instance); everything device-level goes through each
// Context's VolkDeviceTable, so contexts never share device state.
void init_loader() {
  static std::once_flag once;
  static VkResult result = VK_SUCCESS;
  std::call_once(once, [] { result = volkInitialize(); });
  if (result != VK_SUCCESS)
    throw Error("no Vulkan loader found (libvulkan.so.1); install libvulkan1 and a driver, e.g. "
                "mesa-vulkan-drivers for lavapipe");
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool has_extension(VkPhysicalDevice pd, const char* name) {
  uint32_t n = 0;
  vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> exts(n);
  vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, exts.data());
  for (auto& e : exts)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

bool has_layer(const char* name) {
  uint32_t n = 0;
  vkEnumerateInstanceLayerProperties(&n, nullptr);
  std::vector<VkLayerProperties> layers(n);
  vkEnumerateInstanceLayerProperties(&n, layers.data());
  for (auto& l : layers)
    if (std::strcmp(l.layerName, name) == 0) return true;
  return false;
}

int compute_family(VkPhysicalDevice pd) {
  uint32_t n = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, nullptr);
  std::vector<VkQueueFamilyProperties> fams(n);
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, fams.data());
  for (uint32_t i = 0; i < n; ++i)
    if (fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT) return int(i);
  return -1;
}

// Capability-derived quirks, set in exactly one place. See DeviceCaps::Quirks for the reasons.
void derive_quirks(DeviceCaps& c) {
  // CPU devices implement storage-buffer loads as bounds-checked per-lane loops: a fact of being
  // a CPU rasterizer, not of a vendor.
  c.quirks.weights_via_texel_buffer = c.is_cpu();
  c.quirks.single_subgroup_kernels = c.is_cpu();
  // A property of llvmpipe's shader compiler, not of CPU devices (SwiftShader has no such budget).
  c.quirks.loop_iteration_limit = c.driver_id == VK_DRIVER_ID_MESA_LLVMPIPE ? 65535u : 0u;
}

DeviceCaps query_caps(VkPhysicalDevice pd, int family) {
  DeviceCaps c;
  VkPhysicalDeviceSubgroupSizeControlProperties ssc{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES};
  VkPhysicalDeviceSubgroupProperties sub{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceDriverProperties drv{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceMaintenance3Properties m3{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  props.pNext = &sub;
  sub.pNext = &drv;
  drv.pNext = &m3;
  VkPhysicalDeviceProperties basic;
  vkGetPhysicalDeviceProperties(pd, &basic);
  const bool has_ssc = basic.apiVersion >= VK_API_VERSION_1_3 || has_extension(pd, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
  if (has_ssc) m3.pNext = &ssc;
  vkGetPhysicalDeviceProperties2(pd, &props);
  const VkPhysicalDeviceLimits& lim = props.properties.limits;

  c.name = props.properties.deviceName;
  c.type = props.properties.deviceType;
  c.vendor_id = props.properties.vendorID;
  c.device_id = props.properties.deviceID;
  c.driver_version = props.properties.driverVersion;
  c.api_version = props.properties.apiVersion;
  c.driver_id = drv.driverID;
  c.driver_name = drv.driverName;
  c.driver_info = drv.driverInfo;
  std::memcpy(c.uuid.data(), props.properties.pipelineCacheUUID, VK_UUID_SIZE);

  c.subgroup_size = sub.subgroupSize;
  c.min_subgroup_size = c.max_subgroup_size = sub.subgroupSize;
  c.subgroup_arithmetic = (sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                          (sub.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
  c.subgroup_shuffle = (sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                       (sub.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT);

  VkPhysicalDeviceSubgroupSizeControlFeatures sscf{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES};
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceFeatures2 feats{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  feats.pNext = &f11;
  f11.pNext = &f12;
  if (has_ssc) f12.pNext = &sscf;
  vkGetPhysicalDeviceFeatures2(pd, &feats);
  if (has_ssc && sscf.subgroupSizeControl && (ssc.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT)) {
    c.subgroup_size_control = true;
    c.min_subgroup_size = ssc.minSubgroupSize;
    c.max_subgroup_size = ssc.maxSubgroupSize;
    c.compute_full_subgroups = sscf.computeFullSubgroups;
  }
  c.fp16_arithmetic = f12.shaderFloat16;
  c.int8_arithmetic = f12.shaderInt8;
  c.storage_16bit = f11.storageBuffer16BitAccess;
  c.storage_8bit = f12.storageBuffer8BitAccess;
  c.pair_dispatch = feats.features.shaderStorageBufferArrayDynamicIndexing;

  c.max_shared_memory = lim.maxComputeSharedMemorySize;
  c.max_stage_storage_buffers = lim.maxPerStageDescriptorStorageBuffers;
  c.max_stage_sampled = lim.maxPerStageDescriptorSampledImages;
  c.max_storage_buffer_range = lim.maxStorageBufferRange;
  c.max_uniform_buffer_range = lim.maxUniformBufferRange;
  c.max_texel_buffer_elements = lim.maxTexelBufferElements;
  c.max_allocation_bytes = m3.maxMemoryAllocationSize;
  c.max_workgroup_invocations = lim.maxComputeWorkGroupInvocations;
  for (int i = 0; i < 3; ++i) {
    c.max_workgroup_size[i] = lim.maxComputeWorkGroupSize[i];
    c.max_workgroup_count[i] = lim.maxComputeWorkGroupCount[i];
  }
  c.max_push_constants = lim.maxPushConstantsSize;
  c.min_storage_buffer_offset_alignment = lim.minStorageBufferOffsetAlignment;
  c.min_uniform_buffer_offset_alignment = lim.minUniformBufferOffsetAlignment;
  c.min_texel_buffer_offset_alignment = lim.minTexelBufferOffsetAlignment;

  if (family >= 0) {
    uint32_t n = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, nullptr);
    std::vector<VkQueueFamilyProperties> fams(n);
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, fams.data());
    if (fams[family].timestampValidBits > 0) c.timestamp_period_ns = lim.timestampPeriod;
  }

  VkPhysicalDeviceMemoryProperties mem;
  vkGetPhysicalDeviceMemoryProperties(pd, &mem);
  for (uint32_t i = 0; i < mem.memoryHeapCount; ++i) {
    const bool local = mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT;
    if (local) c.device_local_bytes += mem.memoryHeaps[i].size;
    c.heaps.push_back({mem.memoryHeaps[i].size, local});
  }
  for (uint32_t i = 0; i < mem.memoryTypeCount; ++i) {
    auto f = mem.memoryTypes[i].propertyFlags;
    if ((f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) && (f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) &&
        (f & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) && mem.memoryHeaps[mem.memoryTypes[i].heapIndex].size >= (256u << 20))
      c.unified_memory = true;
  }
  derive_quirks(c);
  return c;
}

VkInstance create_instance(bool validation, VkDebugUtilsMessengerCreateInfoEXT* messenger_info) {
  init_loader();
  uint32_t api = VK_API_VERSION_1_0;
  if (vkEnumerateInstanceVersion) vkEnumerateInstanceVersion(&api);
  if (api < VK_API_VERSION_1_2)
    throw Error("the Vulkan loader supports only API " + std::to_string(VK_API_VERSION_MAJOR(api)) + "." +
                std::to_string(VK_API_VERSION_MINOR(api)) + "; vkspec needs Vulkan 1.2");
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "vkspec";
  app.pEngineName = "vkspec";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ci.pApplicationInfo = &app;
  const char* layers[] = {"VK_LAYER_KHRONOS_validation"};
  const char* exts[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
  VkValidationFeatureEnableEXT enables[] = {VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
  VkValidationFeaturesEXT vf{VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
  if (validation) {
    if (!has_layer(layers[0]))
      throw Error("Vulkan validation was requested but VK_LAYER_KHRONOS_validation is not installed "
                  "(Debian: apt install vulkan-validationlayers)");
    ci.enabledLayerCount = 1;
    ci.ppEnabledLayerNames = layers;
    ci.enabledExtensionCount = 1;
    ci.ppEnabledExtensionNames = exts;
    vf.enabledValidationFeatureCount = 1;
    vf.pEnabledValidationFeatures = enables;
    vf.pNext = messenger_info;  // also catches messages from vkCreateInstance itself
    ci.pNext = &vf;
  }
  VkInstance inst;
  const VkResult r = vkCreateInstance(&ci, nullptr, &inst);
  // The loader says INCOMPATIBLE_DRIVER when it found no driver at all (none installed, or
  // VK_ICD_FILENAMES / VK_DRIVER_FILES naming files that are not there).
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER)
    throw Error("no Vulkan driver was found (VK_ERROR_INCOMPATIBLE_DRIVER from vkCreateInstance): install one "
                "(on Debian, mesa-vulkan-drivers provides lavapipe, a CPU device) or check VK_ICD_FILENAMES / "
                "VK_DRIVER_FILES");
  VKSPEC_VK(r);
  volkLoadInstanceOnly(inst);
  return inst;
}

}  // namespace

std::string DeviceCaps::type_name() const {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
    default: return "other";
  }
}

std::vector<PhysicalDeviceInfo> Context::enumerate() {
  VkInstance inst = create_instance(false, nullptr);
  std::vector<PhysicalDeviceInfo> out;
  uint32_t n = 0;
  vkEnumeratePhysicalDevices(inst, &n, nullptr);
  std::vector<VkPhysicalDevice> pds(n);
  vkEnumeratePhysicalDevices(inst, &n, pds.data());
  for (uint32_t i = 0; i < n; ++i) out.push_back({i, query_caps(pds[i], compute_family(pds[i]))});
  vkDestroyInstance(inst, nullptr);
  return out;
}

uint32_t Context::choose(const std::vector<PhysicalDeviceInfo>& devices, const std::string& selector_in) {
  if (devices.empty())
    throw Error("no Vulkan device found; install a driver (e.g. mesa-vulkan-drivers for lavapipe)");
  std::string selector = selector_in;
  std::string from;  // where the selector came from, for its errors
  if (selector.empty())
    if (const char* env = std::getenv("VKSPEC_DEVICE")) selector = env, from = " (from the environment variable VKSPEC_DEVICE)";
  if (!selector.empty()) {
    bool numeric = std::all_of(selector.begin(), selector.end(), ::isdigit);
    if (numeric) {
      // Digits only, compared digit by digit: a 23-digit index is simply past the end, not an
      // out_of_range exception from the conversion.
      uint64_t idx = 0;
      for (char c : selector) idx = idx > devices.size() ? idx : idx * 10 + uint64_t(c - '0');
      if (idx >= devices.size())
        throw Error("device index " + selector + from + " does not exist: there are " + std::to_string(devices.size()) +
                    " Vulkan device(s) (see `vkspec devices`)");
      return uint32_t(idx);
    }
    for (auto& d : devices)
      if (lower(d.caps.name).find(lower(selector)) != std::string::npos) return d.index;
    std::string names;
    for (auto& d : devices) names += (names.empty() ? "" : ", ") + d.caps.name;
    throw Error("no Vulkan device matches '" + selector + "'" + from + " (available: " + names + ")");
  }
  auto rank = [](VkPhysicalDeviceType t) {
    switch (t) {
      case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
      case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
      case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
      case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
      default: return 4;
    }
  };
  uint32_t best = 0;
  for (auto& d : devices)
    if (rank(d.caps.type) < rank(devices[best].caps.type)) best = d.index;
  return best;
}

VkBool32 VKAPI_PTR Context::debug_callback(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                           VkDebugUtilsMessageTypeFlagsEXT, const VkDebugUtilsMessengerCallbackDataEXT* data,
                                           void* user) {
  auto* self = static_cast<Context*>(user);
  std::string msg = std::string(severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? "validation error: "
                                                                                          : "validation warning: ") +
                    (data->pMessage ? data->pMessage : "");
  std::fprintf(stderr, "%s\n", msg.c_str());
  if (self) {
    std::lock_guard<std::mutex> lock(self->messages_mutex_);
    self->messages_.push_back(std::move(msg));
  }
  return VK_FALSE;
}

Context::Context(const ContextOptions& opts) {
  VkDebugUtilsMessengerCreateInfoEXT mi{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  mi.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  mi.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                   VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  mi.pfnUserCallback = &Context::debug_callback;
  mi.pUserData = this;
  instance_ = create_instance(opts.validation, &mi);
  owns_instance_ = true;
  try {
    if (opts.validation) {
      // volk's vkDestroyDebugUtilsMessengerEXT is a global that follows the last instance loaded:
      // after a context without validation it is null. Keep this instance's own entry point.
      destroy_messenger_ = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
          vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
      if (!destroy_messenger_) throw Error("validation requested but vkDestroyDebugUtilsMessengerEXT is missing");
      VKSPEC_VK(vkCreateDebugUtilsMessengerEXT(instance_, &mi, nullptr, &messenger_));
    }
    uint32_t n = 0;
    vkEnumeratePhysicalDevices(instance_, &n, nullptr);
    std::vector<VkPhysicalDevice> pds(n);
    vkEnumeratePhysicalDevices(instance_, &n, pds.data());
    std::vector<PhysicalDeviceInfo> infos;
    for (uint32_t i = 0; i < n; ++i) infos.push_back({i, query_caps(pds[i], compute_family(pds[i]))});
    physical_ = pds[choose(infos, opts.device)];
    int fam = compute_family(physical_);
    if (fam < 0) throw Error("the chosen Vulkan device has no compute queue");
    queue_family_ = uint32_t(fam);
    init_device(opts, true);
  } catch (...) {
    if (device_) vkDestroyDevice(device_, nullptr);
    if (messenger_) destroy_messenger_(instance_, messenger_, nullptr);
    vkDestroyInstance(instance_, nullptr);
    throw;
  }
}

Context::Context(const AdoptedDevice& a, const ContextOptions& opts) {
  init_loader();
  if (!a.instance || !a.physical_device || !a.device || !a.queue)
    throw Error("AdoptedDevice needs instance, physical_device, device and queue");
  if (a.api_version < VK_API_VERSION_1_2)
    throw MissingFeature("the application's instance asks for Vulkan " + std::to_string(VK_API_VERSION_MAJOR(a.api_version)) +
                         "." + std::to_string(VK_API_VERSION_MINOR(a.api_version)) +
                         "; vkspec needs VkApplicationInfo::apiVersion >= 1.2");
  if (!a.enabled.timeline_semaphore)
    throw MissingFeature("the application's device was created without the timelineSemaphore feature "
                         "(VkPhysicalDeviceVulkan12Features::timelineSemaphore); vkspec needs it");
  instance_ = a.instance;
  volkLoadInstanceOnly(instance_);
  physical_ = a.physical_device;
  uint32_t nfam = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical_, &nfam, nullptr);
  std::vector<VkQueueFamilyProperties> fams(nfam);
  vkGetPhysicalDeviceQueueFamilyProperties(physical_, &nfam, fams.data());
  if (a.queue_family >= nfam)
    throw Error("queue family " + std::to_string(a.queue_family) + " does not exist: the device has " + std::to_string(nfam) +
                " queue famil" + (nfam == 1 ? "y" : "ies") + " (give the family the queue was created in)");
  if (!(fams[a.queue_family].queueFlags & VK_QUEUE_COMPUTE_BIT))
    throw MissingFeature("queue family " + std::to_string(a.queue_family) + " has no compute capability " +
                         "(vkspec records compute dispatches on the queue it is given)");
  device_ = a.device;
  queue_ = a.queue;
  queue_family_ = a.queue_family;
  init_device(opts, false);
  // Only what the caller enabled may be used.
  caps_.fp16_arithmetic &= a.enabled.shader_float16;
  caps_.int8_arithmetic &= a.enabled.shader_int8;
  caps_.storage_16bit &= a.enabled.storage_buffer_16bit;
  caps_.storage_8bit &= a.enabled.storage_buffer_8bit;
  if (!a.enabled.subgroup_size_control) {
    caps_.subgroup_size_control = caps_.compute_full_subgroups = false;
    caps_.min_subgroup_size = caps_.max_subgroup_size = caps_.subgroup_size;
  }
}

void Context::init_device(const ContextOptions& opts, bool own) {
  caps_ = query_caps(physical_, int(queue_family_));
  if (!own) caps_.pair_dispatch = false;  // an application's device: which features it enabled is unknown
  storage_range_limit_ = opts.storage_range_limit;
  if (opts.allocation_limit && opts.allocation_limit < caps_.max_allocation_bytes)
    caps_.max_allocation_bytes = opts.allocation_limit;
  batch_tiles_ = opts.batch_tiles;
  if (opts.stage_storage_buffers_limit && opts.stage_storage_buffers_limit < caps_.max_stage_storage_buffers)
    caps_.max_stage_storage_buffers = opts.stage_storage_buffers_limit;
  queue_lock_ = opts.queue_lock;
  if (!queue_lock_.lock != !queue_lock_.unlock) throw Error("a queue lock needs both lock and unlock callbacks");
  if (caps_.api_version < VK_API_VERSION_1_2)
    throw Error("device '" + caps_.name + "' supports Vulkan " + std::to_string(VK_API_VERSION_MAJOR(caps_.api_version)) +
                "." + std::to_string(VK_API_VERSION_MINOR(caps_.api_version)) + "; vkspec needs 1.2");
  if (own) {
    // Enable every optional feature the kernels can use; kernels check DeviceCaps before
    // choosing a variant that needs one.
    VkPhysicalDeviceSubgroupSizeControlFeatures ssc{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES};
    VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
    VkPhysicalDeviceFeatures2 feats{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    feats.pNext = &f11;
    f11.pNext = &f12;
    f12.shaderFloat16 = caps_.fp16_arithmetic;
    f12.shaderInt8 = caps_.int8_arithmetic;
    f12.storageBuffer8BitAccess = caps_.storage_8bit;
    f11.storageBuffer16BitAccess = caps_.storage_16bit;
    VkPhysicalDeviceVulkan12Features avail12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceFeatures2 avail{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    avail.pNext = &avail12;
    vkGetPhysicalDeviceFeatures2(physical_, &avail);
    if (!avail12.timelineSemaphore)
      throw MissingFeature("device '" + caps_.name + "' lacks the timelineSemaphore feature vkspec needs");
    f12.timelineSemaphore = VK_TRUE;
    std::vector<const char*> exts;
    if (caps_.subgroup_size_control) {
      ssc.subgroupSizeControl = VK_TRUE;
      ssc.computeFullSubgroups = caps_.compute_full_subgroups;
      f12.pNext = &ssc;
      // The instance asks for Vulkan 1.2, so the device runs at 1.2 even where 1.3 (with subgroup
      // size control in core) is available: enable the extension whenever the device offers it.
      if (has_extension(physical_, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME))
        exts.push_back(VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
    }
    feats.features.shaderInt64 = avail.features.shaderInt64;
    feats.features.shaderInt16 = avail.features.shaderInt16;
    feats.features.shaderStorageBufferArrayDynamicIndexing = caps_.pair_dispatch;
    if (!(opts.queue_priority >= 0.0f && opts.queue_priority <= 1.0f))
      throw Error("queue priority must be in 0..1, got " + std::to_string(opts.queue_priority));
    // Checked whether or not this driver offers global priorities, so a wrong value fails everywhere.
    if (opts.global_priority && opts.global_priority != VK_QUEUE_GLOBAL_PRIORITY_LOW_KHR &&
        opts.global_priority != VK_QUEUE_GLOBAL_PRIORITY_MEDIUM_KHR && opts.global_priority != VK_QUEUE_GLOBAL_PRIORITY_HIGH_KHR &&
        opts.global_priority != VK_QUEUE_GLOBAL_PRIORITY_REALTIME_KHR)
      throw Error("global priority must be a VkQueueGlobalPriorityKHR (128 low, 256 medium, 512 high, 1024 realtime) or 0, got " +
                  std::to_string(opts.global_priority));
    float prio = opts.queue_priority;
    VkDeviceQueueCreateInfo qi{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    qi.queueFamilyIndex = queue_family_;
    qi.queueCount = 1;
    qi.pQueuePriorities = &prio;
    // A system-wide queue priority where the driver offers one (KHR and EXT share the struct).
    VkDeviceQueueGlobalPriorityCreateInfoKHR gp{VK_STRUCTURE_TYPE_DEVICE_QUEUE_GLOBAL_PRIORITY_CREATE_INFO_KHR};
    const char* gp_ext = has_extension(physical_, VK_KHR_GLOBAL_PRIORITY_EXTENSION_NAME) ? VK_KHR_GLOBAL_PRIORITY_EXTENSION_NAME
                         : has_extension(physical_, VK_EXT_GLOBAL_PRIORITY_EXTENSION_NAME) ? VK_EXT_GLOBAL_PRIORITY_EXTENSION_NAME
                                                                                           : nullptr;
    if (opts.global_priority && gp_ext) {
      gp.globalPriority = VkQueueGlobalPriorityKHR(opts.global_priority);
      qi.pNext = &gp;
      exts.push_back(gp_ext);
    }
    VkDeviceCreateInfo di{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    di.pNext = &feats;
    di.queueCreateInfoCount = 1;
    di.pQueueCreateInfos = &qi;
    di.enabledExtensionCount = uint32_t(exts.size());
    di.ppEnabledExtensionNames = exts.data();
    VkResult r = vkCreateDevice(physical_, &di, nullptr, &device_);
    if ((r == VK_ERROR_NOT_PERMITTED_KHR || r == VK_ERROR_INITIALIZATION_FAILED) && qi.pNext) {
      qi.pNext = nullptr;  // the system refused the priority: run at the default one
      exts.pop_back();
      di.enabledExtensionCount = uint32_t(exts.size());
      r = vkCreateDevice(physical_, &di, nullptr, &device_);
    }
    VKSPEC_VK(r);
    owns_device_ = true;
  }
  volkLoadDeviceTable(&vk_, device_);
  if (own) vk_.vkGetDeviceQueue(device_, queue_family_, 0, &queue_);
  vkGetPhysicalDeviceMemoryProperties(physical_, &mem_props_);

  VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pi.queueFamilyIndex = queue_family_;
  VKSPEC_VK(vk_.vkCreateCommandPool(device_, &pi, nullptr, &pool_));
  VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  VKSPEC_VK(vk_.vkCreateFence(device_, &fi, nullptr, &fence_));
  pipelines_ = std::make_unique<PipelineCache>(*this, opts.pipeline_cache_dir);
}

Context::~Context() {
  // vkspec's own device: wait for everything. A borrowed one is the application's, its queue
  // shared; every vkspec submission is fenced and waited for by its owner (Sequence, one_shot).
  if (device_ && owns_device_) vk_.vkDeviceWaitIdle(device_);
  pipelines_.reset();
  if (fence_) vk_.vkDestroyFence(device_, fence_, nullptr);
  if (pool_) vk_.vkDestroyCommandPool(device_, pool_, nullptr);
  if (owns_device_) vk_.vkDestroyDevice(device_, nullptr);
  if (messenger_) destroy_messenger_(instance_, messenger_, nullptr);
  if (owns_instance_) vkDestroyInstance(instance_, nullptr);
}

namespace {
// The calling thread's placer and the context it places for (Context::set_placer).
struct ThreadPlacer {
  const Context* ctx = nullptr;
  Context::Placer placer;
};
thread_local ThreadPlacer t_placer;
}  // namespace

void Context::set_placer(Placer placer) {
  t_placer.ctx = placer ? this : nullptr;
  t_placer.placer = std::move(placer);
}

Context::Placement Context::place(VkBuffer b, const VkMemoryRequirements& req) {
  if (t_placer.ctx != this || !t_placer.placer) return {};
  const Placement p = t_placer.placer(req);
  std::lock_guard lock(placed_mutex_);
  placed_[b] = p;
  return p;
}

Context::Placement Context::placed_in(VkBuffer b) const {
  std::lock_guard lock(placed_mutex_);
  auto it = placed_.find(b);
  return it == placed_.end() ? Placement{} : it->second;
}

void Context::forget_placed(VkBuffer b) {
  std::lock_guard lock(placed_mutex_);
  placed_.erase(b);
}

uint64_t Context::storage_range() const {
  if (storage_range_limit_ && storage_range_limit_ < caps_.max_storage_buffer_range) return storage_range_limit_;
  return caps_.max_storage_buffer_range;
}

uint32_t Context::memory_type(uint32_t bits, VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred) const {
  int fallback = -1;
  for (uint32_t i = 0; i < mem_props_.memoryTypeCount; ++i) {
    if (!(bits & (1u << i))) continue;
    auto f = mem_props_.memoryTypes[i].propertyFlags;
    if ((f & required) != required) continue;
    if ((f & preferred) == preferred) return i;
    if (fallback < 0) fallback = int(i);
  }
  if (fallback < 0) throw Error("no Vulkan memory type with the required properties on '" + caps_.name + "'");
  return uint32_t(fallback);
}

void Context::queue_submit(const VkSubmitInfo& si, VkFence fence) {
  std::lock_guard lock(queue_mutex_);
  if (queue_lock_.lock) queue_lock_.lock(queue_lock_.user);
  const VkResult r = vk_.vkQueueSubmit(queue_, 1, &si, fence);
  if (queue_lock_.unlock) queue_lock_.unlock(queue_lock_.user);
  VKSPEC_VK(r);
}

std::vector<std::string> Context::take_validation_messages() {
  std::lock_guard<std::mutex> lock(messages_mutex_);
  return std::exchange(messages_, {});
}

void Context::one_shot_begin(VkCommandBuffer& cb) {
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VKSPEC_VK(vk_.vkAllocateCommandBuffers(device_, &ai, &cb));
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  VKSPEC_VK(vk_.vkBeginCommandBuffer(cb, &bi));
}

void Context::one_shot_end(VkCommandBuffer cb) {
  VKSPEC_VK(vk_.vkEndCommandBuffer(cb));
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cb;
  VKSPEC_VK(vk_.vkResetFences(device_, 1, &fence_));
  queue_submit(si, fence_);
  VKSPEC_VK(vk_.vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX));
  ++host_waits_;
  vk_.vkFreeCommandBuffers(device_, pool_, 1, &cb);
}

}  // namespace vkspec
