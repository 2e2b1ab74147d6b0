// The C API's runtime and model calls (include/vkspec/vkspec.h): a thin layer over Context,
// LlamaModel, EagleHead and Tokenizer that never lets an exception through.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <new>
#include <unordered_map>

#include "capi/capi.hpp"
#include "vkspec/model_config.hpp"

namespace vkspec::capi {

namespace {
thread_local std::string g_thread_error;

void load_vulkan_loader() {
  static std::once_flag once;
  static VkResult result = VK_SUCCESS;
  std::call_once(once, [] { result = volkInitialize(); });
  if (result != VK_SUCCESS) throw Error("no Vulkan loader found (libvulkan.so.1)");
}

bool has_ext(VkPhysicalDevice pd, const char* name) {
  uint32_t n = 0;
  vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> exts(n);
  vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, exts.data());
  for (const auto& e : exts)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

// What the application's VkDeviceCreateInfo::pNext chain enabled.
AdoptedDevice::Enabled parse_enabled(const void* chain, uint32_t n_ext, const char* const* exts) {
  AdoptedDevice::Enabled e;
  bool ssc_ext = false;
  for (uint32_t i = 0; i < n_ext; ++i)
    if (exts && exts[i] && std::strcmp(exts[i], VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME) == 0) ssc_ext = true;
  for (auto* s = static_cast<const VkBaseInStructure*>(chain); s; s = s->pNext) {
    switch (s->sType) {
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES: {
        auto* f = reinterpret_cast<const VkPhysicalDeviceVulkan12Features*>(s);
        e.timeline_semaphore |= bool(f->timelineSemaphore);
        e.shader_float16 |= bool(f->shaderFloat16);
        e.shader_int8 |= bool(f->shaderInt8);
        e.storage_buffer_8bit |= bool(f->storageBuffer8BitAccess);
        break;
      }
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES:
        e.storage_buffer_16bit |= bool(reinterpret_cast<const VkPhysicalDeviceVulkan11Features*>(s)->storageBuffer16BitAccess);
        break;
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES:
        e.timeline_semaphore |= bool(reinterpret_cast<const VkPhysicalDeviceTimelineSemaphoreFeatures*>(s)->timelineSemaphore);
        break;
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES:
        e.storage_buffer_16bit |= bool(reinterpret_cast<const VkPhysicalDevice16BitStorageFeatures*>(s)->storageBuffer16BitAccess);
        break;
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES:
        e.storage_buffer_8bit |= bool(reinterpret_cast<const VkPhysicalDevice8BitStorageFeatures*>(s)->storageBuffer8BitAccess);
        break;
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES: {
        auto* f = reinterpret_cast<const VkPhysicalDeviceShaderFloat16Int8Features*>(s);
        e.shader_float16 |= bool(f->shaderFloat16);
        e.shader_int8 |= bool(f->shaderInt8);
        break;
      }
      case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES:
        // Core only from Vulkan 1.3; vkspec asks for 1.2, so the extension must be enabled too.
        e.subgroup_size_control |=
            ssc_ext && bool(reinterpret_cast<const VkPhysicalDeviceSubgroupSizeControlFeatures*>(s)->subgroupSizeControl);
        break;
      default:
        break;
    }
  }
  return e;
}

void copy_desc_options(Model& m, const vkspec_model_desc& d) {
  if (!d.path || !*d.path) throw ArgumentError("vkspec_model_desc.path is empty: give the verifier's GGUF file");
  // "" is no head, as NULL is: a second head alone would be loaded as the first.
  if (d.head2 && *d.head2 && !(d.head1 && *d.head1)) throw ArgumentError("vkspec_model_desc.head2 without head1");
  if (d.max_budget < 1 || d.depth < 1 || d.topk < 1)
    throw ArgumentError("vkspec_model_desc: max_budget, depth and topk must be >= 1");
  m.max_budget = d.max_budget, m.depth = d.depth, m.topk = d.topk;
  m.head1 = d.head1 ? d.head1 : "";
  m.head2 = d.head2 ? d.head2 : "";
  m.model_opts.context = d.context_tokens;
  // As the command line sizes them (src/cli/session.cpp): merge verifies 1 + 2B rows.
  const uint64_t rows = std::max<uint64_t>(64, 1 + 2 * uint64_t(d.max_budget));
  if (rows > 4096) throw ArgumentError("vkspec_model_desc.max_budget " + std::to_string(d.max_budget) + " is too large");
  m.model_opts.max_rows = uint32_t(rows);
  m.head_rows = std::max<uint32_t>({uint32_t(rows), d.topk, d.depth + 1});
}
}  // namespace

void set_thread_error(const std::string& s) { g_thread_error = s; }

namespace {
std::atomic<uint64_t> g_next_error_id{1};
thread_local std::unordered_map<uint64_t, std::string> t_errors;  // ErrorText id -> this thread's text
}  // namespace

ErrorText::ErrorText() : id_(g_next_error_id.fetch_add(1, std::memory_order_relaxed)) {}
ErrorText::~ErrorText() { t_errors.erase(id_); }
ErrorText& ErrorText::operator=(const std::string& text) {
  if (text.empty())
    t_errors.erase(id_);
  else
    t_errors[id_] = text;
  return *this;
}
void ErrorText::clear() { t_errors.erase(id_); }
const std::string& ErrorText::str() const {
  static const std::string none;
  const auto it = t_errors.find(id_);
  return it == t_errors.end() ? none : it->second;
}

vkspec_status status_of_exception(ErrorText& err, vkspec_status fallback) {
  std::string text;
  const vkspec_status s = status_of_exception(text, fallback);  // inside the handler: rethrows the same exception
  err = text;
  return s;
}

vkspec_status status_of_exception(std::string& err, vkspec_status fallback) {
  try {
    throw;
  } catch (const MissingFeature& e) {
    err = e.what();
    return VKSPEC_ERROR_MISSING_FEATURE;
  } catch (const StateError& e) {
    err = e.what();
    return VKSPEC_ERROR_STATE;
  } catch (const ArgumentError& e) {
    err = e.what();
    return VKSPEC_ERROR_INVALID_ARGUMENT;
  } catch (const Cancelled& e) {
    err = e.what();
    return VKSPEC_ERROR_CANCELLED;
  } catch (const NonFiniteLogits& e) {
    err = e.what();
    return VKSPEC_ERROR_MODEL;
  } catch (const VulkanError& e) {
    err = e.what();
    return e.result == VK_ERROR_OUT_OF_DEVICE_MEMORY || e.result == VK_ERROR_OUT_OF_HOST_MEMORY ? VKSPEC_ERROR_OUT_OF_MEMORY
                                                                                                : VKSPEC_ERROR_VULKAN;
  } catch (const Error& e) {
    err = e.what();
    return fallback;
  } catch (const std::bad_alloc&) {
    err = "out of host memory";
    return VKSPEC_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    err = std::string("internal error: ") + e.what();
    return VKSPEC_ERROR_INTERNAL;
  } catch (...) {
    err = "internal error: unknown exception";
    return VKSPEC_ERROR_INTERNAL;
  }
}

void Model::load(vkspec_progress_fn progress, void* user) {
  const LlamaConfig c = read_llama_config(*file);
  // vkspec_model_desc.context_tokens 0: min(model context, 2048).
  if (!model_opts.context) model_opts.context = uint32_t(std::min(c.ctx > 0 ? c.ctx : 2048, 2048));
  // Weights by bytes, for a progress fraction that moves with the upload.
  uint64_t vbytes = 0;
  for (const GgufTensor& t : file->tensors()) vbytes += t.n_bytes;
  // The heads' bytes from their files (a head that cannot be read is refused here, by name).
  HeadBytes hb[2];
  ModelOptions o = model_opts;  // the device must hold the weights and one context
  uint32_t taps = 0;  // EAGLE-3: the verifier state's tap rows, one buffer for both heads
  for (int i = 0; i < 2; ++i)
    if (const std::string& h = i ? head2 : head1; !h.empty()) {
      hb[i] = estimate_head_bytes(h, o.context, head_rows, o.kv_type);
      o.reserve_bytes += hb[i].weights + hb[i].state.kv + hb[i].state.scratch;
      taps = std::max(taps, hb[i].tap_points);
    }
  o.reserve_bytes += llama_tap_bytes(c, o, taps);
  const uint64_t h1 = hb[0].weights, h2 = hb[1].weights;
  const double total = double(std::max<uint64_t>(1, vbytes + h1 + h2));
  const auto report = [&](double done, const char* stage) {
    if (progress && progress(float(done / total), stage, user)) throw Cancelled("load stopped by the progress callback");
  };
  report(0, "verifier");
  verifier = std::make_shared<const LlamaWeights>(*rt->ctx, *file, o);
  report(double(vbytes), "head 1");
  if (!head1.empty()) w1 = std::make_shared<const EagleHeadWeights>(*rt->ctx, head1, verifier->config());
  report(double(vbytes + h1), "head 2");
  if (!head2.empty()) w2 = std::make_shared<const EagleHeadWeights>(*rt->ctx, head2, verifier->config());
  report(total, "done");
}

Instance::Instance(const Model& m) {
  ModelOptions o = m.model_opts;
  uint32_t taps = 0;
  for (const auto& w : {m.w1, m.w2})  // the heads' states count in the verifier state's fit check
    if (w) {
      const StateBytes b = head_state_bytes(w->config(), o.context, m.head_rows, o.kv_type);
      o.reserve_bytes += b.kv + b.scratch;
      taps = std::max(taps, uint32_t(w->tap_points().size()));
    }
  o.reserve_bytes += llama_tap_bytes(m.verifier->config(), o, taps);  // EAGLE-3: the verifier's tap rows
  model = std::make_unique<LlamaModel>(m.verifier, o);
  if (m.w1) head1 = std::make_unique<EagleHead>(m.w1, *model, model->capacity(), m.head_rows);
  if (m.w2) head2 = std::make_unique<EagleHead>(m.w2, *model, model->capacity(), m.head_rows);
}

std::string no_tokenizer(const Model& m, const char* instead) {
  if (!m.tokenizer_error.empty())
    return m.file->path() + ": its tokenizer could not be loaded (" + m.tokenizer_error + "): give " + instead;
  return m.file->path() + " carries no tokenizer: give " + instead;
}

Model::~Model() {
  // No lock: freeing buffers touches only the Context's thread-safe counters (a load that fails
  // without the lock frees its half-made weights the same way), and no context uses the weights
  // any more (each holds the model).
  w2.reset();
  w1.reset();
  verifier.reset();
}

}  // namespace vkspec::capi

using namespace vkspec;
using namespace vkspec::capi;

extern "C" {

VKSPEC_API const char* vkspec_last_error(const void* handle) {
  if (!handle) return g_thread_error.c_str();
  // Every handle type derives from Handle first (capi.hpp).
  const auto* h = static_cast<const Handle*>(static_cast<const vkspec_runtime*>(handle));
  return h->magic == Handle::kMagic ? h->err.str().c_str() : "vkspec_last_error: not a vkspec handle";
}

VKSPEC_API const char* vkspec_status_name(vkspec_status s) {
  switch (s) {
    case VKSPEC_OK: return "VKSPEC_OK";
    case VKSPEC_NOT_READY: return "VKSPEC_NOT_READY";
    case VKSPEC_DONE: return "VKSPEC_DONE";
    case VKSPEC_ERROR_INVALID_ARGUMENT: return "VKSPEC_ERROR_INVALID_ARGUMENT";
    case VKSPEC_ERROR_MISSING_FEATURE: return "VKSPEC_ERROR_MISSING_FEATURE";
    case VKSPEC_ERROR_MODEL: return "VKSPEC_ERROR_MODEL";
    case VKSPEC_ERROR_VULKAN: return "VKSPEC_ERROR_VULKAN";
    case VKSPEC_ERROR_OUT_OF_MEMORY: return "VKSPEC_ERROR_OUT_OF_MEMORY";
    case VKSPEC_ERROR_STATE: return "VKSPEC_ERROR_STATE";
    case VKSPEC_ERROR_CANCELLED: return "VKSPEC_ERROR_CANCELLED";
    case VKSPEC_ERROR_INTERNAL: return "VKSPEC_ERROR_INTERNAL";
  }
  return "VKSPEC_(unknown status)";
}

VKSPEC_API vkspec_status vkspec_required_device_features(VkInstance instance, VkPhysicalDevice pd,
                                                         vkspec_device_requirements* out) {
  VKSPEC_CAPI_GUARD(g_thread_error, VKSPEC_ERROR_INVALID_ARGUMENT, {
    if (!instance || !pd || !out) throw Error("vkspec_required_device_features: instance, physical_device and out are required");
    load_vulkan_loader();
    volkLoadInstanceOnly(instance);
    *out = vkspec_device_requirements{};
    out->api_version = VK_API_VERSION_1_2;
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(pd, &props);
    if (props.apiVersion < VK_API_VERSION_1_2)
      throw MissingFeature(std::string("device '") + props.deviceName + "' supports Vulkan " +
                           std::to_string(VK_API_VERSION_MAJOR(props.apiVersion)) + "." +
                           std::to_string(VK_API_VERSION_MINOR(props.apiVersion)) + "; vkspec needs 1.2");
    uint32_t n = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, nullptr);
    std::vector<VkQueueFamilyProperties> fams(n);
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, fams.data());
    int fam = -1;
    for (uint32_t i = 0; i < n; ++i)
      if ((fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT) &&
          (fam < 0 || ((fams[i].queueFlags & VK_QUEUE_GRAPHICS_BIT) && !(fams[fam].queueFlags & VK_QUEUE_GRAPHICS_BIT))))
        fam = int(i);
    if (fam < 0) throw MissingFeature(std::string("device '") + props.deviceName + "' has no compute queue family");
    out->queue_family = uint32_t(fam);
    const bool ssc_ext = has_ext(pd, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
    // Zeroed, then typed: gcc warns of the members a {sType} initializer leaves out in this macro.
    VkPhysicalDeviceSubgroupSizeControlFeatures ssc{};
    VkPhysicalDeviceVulkan12Features f12{};
    VkPhysicalDeviceVulkan11Features f11{};
    VkPhysicalDeviceFeatures2 f{};
    ssc.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES;
    f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
    f11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
    f.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    f.pNext = &f11;
    f11.pNext = &f12;
    if (ssc_ext) f12.pNext = &ssc;
    vkGetPhysicalDeviceFeatures2(pd, &f);
    if (!f12.timelineSemaphore)
      throw MissingFeature(std::string("device '") + props.deviceName + "' lacks the timelineSemaphore feature vkspec needs");
    out->timeline_semaphore = 1;
    out->shader_float16 = f12.shaderFloat16 ? 2 : 0;
    out->shader_int8 = f12.shaderInt8 ? 2 : 0;
    out->storage_buffer_8bit = f12.storageBuffer8BitAccess ? 2 : 0;
    out->storage_buffer_16bit = f11.storageBuffer16BitAccess ? 2 : 0;
    out->subgroup_size_control = ssc_ext && ssc.subgroupSizeControl ? 2 : 0;
    out->compute_full_subgroups = ssc_ext && ssc.computeFullSubgroups ? 2 : 0;
    if (out->subgroup_size_control) out->extensions[out->extension_count++] = VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME;
    return VKSPEC_OK;
  })
}

VKSPEC_API void vkspec_runtime_desc_init(vkspec_runtime_desc* d) {
  if (!d) return;
  *d = vkspec_runtime_desc{};
  d->queue_priority = 1.0f;
  d->api_version = VK_API_VERSION_1_2;
}

VKSPEC_API vkspec_status vkspec_runtime_create(const vkspec_runtime_desc* d, vkspec_runtime** out) {
  VKSPEC_CAPI_GUARD(g_thread_error, VKSPEC_ERROR_INVALID_ARGUMENT, {
    if (out) *out = nullptr;
    if (!d || !out) throw Error("vkspec_runtime_create: desc and out are required");
    auto rt = std::make_shared<Runtime>();
    ContextOptions o;
    o.pipeline_cache_dir = d->pipeline_cache_dir ? d->pipeline_cache_dir : "";
    if (!d->queue_lock != !d->queue_unlock) throw Error("vkspec_runtime_desc: queue_lock and queue_unlock go together");
    rt->app_lock = {d->queue_lock, d->queue_unlock, d->queue_lock_user};
    if (d->queue_lock) o.queue_lock = {[](void* u) { static_cast<Runtime*>(u)->app_lock.lock(static_cast<Runtime*>(u)->app_lock.user); },
                                       [](void* u) { static_cast<Runtime*>(u)->app_lock.unlock(static_cast<Runtime*>(u)->app_lock.user); },
                                       rt.get()};
    const bool borrowed = d->instance || d->physical_device || d->device || d->queue;
    if (borrowed) {
      if (!d->instance || !d->physical_device || !d->device || !d->queue)
        throw Error("vkspec_runtime_desc: give all of instance, physical_device, device and queue (or none)");
      load_vulkan_loader();
      AdoptedDevice a;
      a.instance = d->instance, a.physical_device = d->physical_device, a.device = d->device, a.queue = d->queue;
      a.queue_family = d->queue_family;
      a.api_version = d->api_version;
      a.enabled = parse_enabled(d->enabled_features, d->enabled_extension_count, d->enabled_extensions);
      rt->ctx = std::make_unique<Context>(a, o);
    } else {
      o.device = d->device_name ? d->device_name : "";
      o.validation = d->validation != 0;
      o.queue_priority = d->queue_priority;
      o.global_priority = d->global_priority;
      rt->ctx = std::make_unique<Context>(o);
    }
    auto* h = new vkspec_runtime;
    h->rt = std::move(rt);
    h->device_name = h->rt->ctx->caps().name;
    *out = h;
    return VKSPEC_OK;
  })
}

VKSPEC_API void vkspec_runtime_destroy(vkspec_runtime* rt) { delete rt; }  // the device goes with its last user

VKSPEC_API const char* vkspec_runtime_device_name(const vkspec_runtime* rt) { return rt ? rt->device_name.c_str() : ""; }

VKSPEC_API uint32_t vkspec_runtime_validation_messages(vkspec_runtime* rt) {
  if (!rt) return 0;
  std::lock_guard<std::recursive_mutex> lock(rt->rt->mu);
  const std::vector<std::string> m = rt->rt->ctx->take_validation_messages();
  rt->err = m.empty() ? "" : m.front();
  return uint32_t(m.size());
}

VKSPEC_API uint64_t vkspec_runtime_device_bytes(vkspec_runtime* rt) {
  if (!rt) return 0;
  std::lock_guard<std::recursive_mutex> lock(rt->rt->mu);
  return rt->rt->ctx->allocated_bytes();
}

VKSPEC_API void vkspec_model_desc_init(vkspec_model_desc* d) {
  if (!d) return;
  *d = vkspec_model_desc{};
  d->max_budget = 16, d->depth = 4, d->topk = 4;
}

VKSPEC_API vkspec_status vkspec_model_memory(vkspec_runtime* rt, const vkspec_model_desc* d, vkspec_memory* out) {
  if (!rt) return set_thread_error("vkspec_model_memory: no runtime"), VKSPEC_ERROR_INVALID_ARGUMENT;
  std::lock_guard<std::recursive_mutex> lock(rt->rt->mu);  // it writes rt->err
  VKSPEC_CAPI_GUARD(rt->err, VKSPEC_ERROR_MODEL, {
    if (!d || !out) throw ArgumentError("vkspec_model_memory: desc and out are required");
    Model m;
    m.rt = rt->rt;
    copy_desc_options(m, *d);
    const GgufFile f = GgufFile::open(d->path);
    const LlamaConfig c = read_llama_config(f);
    if (!m.model_opts.context) m.model_opts.context = uint32_t(std::min(c.ctx > 0 ? c.ctx : 2048, 2048));
    // What LlamaWeights/LlamaModel and EagleHeadWeights/EagleHead will allocate.
    *out = vkspec_memory{};
    for (const GgufTensor& t : f.tensors()) out->weights += t.n_bytes;
    const StateBytes v = llama_state_bytes(c, m.model_opts);
    out->kv_cache = v.kv, out->scratch = v.scratch;
    uint32_t taps = 0;
    for (const std::string& h : {m.head1, m.head2})
      if (!h.empty()) {
        const HeadBytes b = estimate_head_bytes(h, m.model_opts.context, m.head_rows, m.model_opts.kv_type);
        out->weights += b.weights;  // f32/f16 weights as stored (EAGLE-3: its lm_head expanded)
        out->kv_cache += b.state.kv, out->scratch += b.state.scratch;
        taps = std::max(taps, b.tap_points);
      }
    out->scratch += llama_tap_bytes(c, m.model_opts, taps);  // EAGLE-3: the verifier's tap rows
    out->per_context = out->kv_cache + out->scratch;
    out->device_local = rt->rt->ctx->caps().device_local_bytes;
    return VKSPEC_OK;
  })
}

VKSPEC_API vkspec_status vkspec_model_load(vkspec_runtime* rt, const vkspec_model_desc* d, vkspec_model** out) {
  if (!rt) return set_thread_error("vkspec_model_load: no runtime"), VKSPEC_ERROR_INVALID_ARGUMENT;
  // Without the runtime's lock: a load reads files and uploads for seconds, and touches nothing
  // but the new model and the Context (safe from several threads), so other contexts keep
  // polling and submitting meanwhile.
  vkspec_status st = VKSPEC_OK;
  try {
    rt->err.clear();
    if (!d || !out) throw ArgumentError("vkspec_model_load: desc and out are required");
    *out = nullptr;
    auto m = std::make_shared<Model>();
    m->rt = rt->rt;
    copy_desc_options(*m, *d);
    if (!m->head1.empty()) try {
        check_draft_options(m->topk, m->depth, 1, uint32_t(1u << 30), kCApiOptionNames);
      } catch (const Error& e) {
        throw ArgumentError(std::string("vkspec_model_desc.") + e.what());
      }
    m->file = std::make_unique<GgufFile>(GgufFile::open(d->path));
    // A tokenizer the file's keys do not make is not the weights' fault: the model loads without
    // it (prompt_ids still work; prompt_text is refused with the reason), as the CLI does, and
    // vkspec_model_warnings says so.
    if (m->file->has("tokenizer.ggml.model") && m->file->has("tokenizer.ggml.tokens")) {
      try {
        m->tokenizer = Tokenizer::from_gguf(*m->file);
        for (const std::string& w : m->tokenizer->ignored_keys()) m->warnings += w + "\n";
      } catch (const Error& e) {
        m->tokenizer_error = e.what();
        m->warnings += m->tokenizer_error + "; prompt_text unavailable, give prompt_ids\n";
      }
    }
    m->load(d->progress, d->progress_user);
    if (const int trained = m->verifier->config().ctx; trained > 0 && m->model_opts.context > uint32_t(trained))
      m->warnings += "vkspec_model_desc.context_tokens " + std::to_string(m->model_opts.context) +
                     " exceeds the model's trained context of " + std::to_string(trained) +
                     " tokens; output past it is unreliable\n";
    auto* h = new vkspec_model;
    h->m = std::move(m);
    *out = h;
  } catch (...) {
    st = status_of_exception(rt->err, VKSPEC_ERROR_MODEL);
    set_thread_error(rt->err);
  }
  return st;
}

VKSPEC_API void vkspec_model_destroy(vkspec_model* m) { delete m; }

VKSPEC_API const char* vkspec_model_warnings(const vkspec_model* m) { return m ? m->m->warnings.c_str() : ""; }

VKSPEC_API uint32_t vkspec_model_vocab_size(const vkspec_model* m) {
  return m && m->m->verifier ? uint32_t(m->m->verifier->config().V) : 0;
}

VKSPEC_API uint32_t vkspec_model_context_tokens(const vkspec_model* m) {
  return m && m->m->verifier ? m->m->model_opts.context : 0;
}

VKSPEC_API uint32_t vkspec_model_trained_context(const vkspec_model* m) {
  return m && m->m->verifier ? uint32_t(std::max(m->m->verifier->config().ctx, 0)) : 0;
}

VKSPEC_API vkspec_status vkspec_model_end_of_generation(const vkspec_model* m, uint32_t* ids, uint32_t cap,
                                                        uint32_t* count) {
  if (!m || !count || (cap && !ids))
    return set_thread_error("vkspec_model_end_of_generation: model and count (and ids when cap > 0) are required"),
           VKSPEC_ERROR_INVALID_ARGUMENT;
  const std::vector<uint32_t> eog = m->m->tokenizer ? m->m->tokenizer->end_of_generation() : std::vector<uint32_t>{};
  *count = uint32_t(eog.size());
  for (uint32_t i = 0; i < cap && i < eog.size(); ++i) ids[i] = eog[i];
  return VKSPEC_OK;
}

VKSPEC_API vkspec_status vkspec_tokenize(vkspec_model* m, const char* text, uint32_t* ids, uint32_t cap, uint32_t* count) {
  if (!m) return set_thread_error("vkspec_tokenize: no model"), VKSPEC_ERROR_INVALID_ARGUMENT;
  std::lock_guard<std::recursive_mutex> lock(m->m->rt->mu);  // it writes m->err
  VKSPEC_CAPI_GUARD(m->err, VKSPEC_ERROR_INVALID_ARGUMENT, {
    if (!text || !count || (cap && !ids)) throw Error("vkspec_tokenize: text, count (and ids when cap > 0) are required");
    if (!m->m->tokenizer) throw Error(no_tokenizer(*m->m, "prompt ids"));
    const std::vector<uint32_t> v = m->m->tokenizer->encode(text, m->m->tokenizer->add_bos(), false);
    *count = uint32_t(v.size());
    std::copy_n(v.begin(), std::min<size_t>(cap, v.size()), ids);
    if (v.size() > cap) throw Error("vkspec_tokenize: " + std::to_string(v.size()) + " ids, room for " + std::to_string(cap));
    return VKSPEC_OK;
  })
}

}  // extern "C"
