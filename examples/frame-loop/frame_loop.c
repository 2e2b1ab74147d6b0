/* frame-loop: an application that owns its Vulkan device and renders a frame every 1/fps seconds
 * with its own compute pipeline, while text streams from the demo model through vkspec on the
 * SAME VkDevice and queue. Headless (the frame is a buffer; the last one is written as a PNG), so
 * it runs on lavapipe.
 *
 * Each frame: render (submit, wait for the app's own fence), then vkspec_poll (never waits) and,
 * when vkspec's GPU work is idle, vkspec_step_submit(ctx, 0): as many decoding steps as fit
 * --budget-us, which run in the frame's idle time. Frame time = the frame's work until its
 * fence signals (vkspec work still running on the queue delays it: that is what the budget bounds).
 *
 *   frame_loop [--models DIR] [--frames N] [--fps F] [--budget-us B[,B2...]] [--iters K]
 *              [--strategy ar|merge|...] [--validate] [--png OUT.png] [--quiet]
 *
 * Prints frame-time p50/p99 without generation and, per budget, with it, plus tokens/s. */
#define _POSIX_C_SOURCE 200809L
#include <volk.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "png.h"
#include "vkspec/vkspec.h"

static const uint32_t kRenderSpv[] =
#include "render.spv.inc"
    ;

#define W 320
#define H 240
#define MAX_FRAMES 100000

static unsigned g_messages = 0;
static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT s, VkDebugUtilsMessageTypeFlagsEXT t,
                                                 const VkDebugUtilsMessengerCallbackDataEXT* d, void* u) {
  (void)s, (void)t, (void)u;
  fprintf(stderr, "validation: %s\n", d->pMessage);
  ++g_messages;
  return VK_FALSE;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static void sleep_until(double t_ms) {
  const double d = t_ms - now_ms();
  if (d <= 0) return;
  struct timespec ts = {(time_t)(d / 1e3), (long)((d - (double)(time_t)(d / 1e3) * 1e3) * 1e6)};
  nanosleep(&ts, NULL);
}

static void die_vk(VkResult r, const char* what) {
  if (r == VK_SUCCESS) return;
  fprintf(stderr, "frame-loop: %s failed (VkResult %d)\n", what, (int)r);
  exit(1);
}

static int cmp_double(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static double percentile(double* v, int n, double q) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  int i = (int)(q * (n - 1) + 0.5);
  return n ? v[i] : 0;
}

typedef struct App {
  VkInstance instance;
  VkDebugUtilsMessengerEXT messenger;
  VkPhysicalDevice pd;
  VkDevice device;
  VkQueue queue;
  uint32_t family;
  VkBuffer frame;
  VkDeviceMemory frame_mem;
  void* frame_ptr;
  VkDescriptorSetLayout dsl;
  VkDescriptorPool dpool;
  VkDescriptorSet set;
  VkPipelineLayout layout;
  VkShaderModule shader;
  VkPipeline pipeline;
  VkCommandPool cpool;
  VkCommandBuffer cb;
  VkFence fence;
  uint32_t iters;
} App;

static void create_device(App* a, int validate, vkspec_device_requirements* req, VkPhysicalDeviceFeatures2* f2) {
  die_vk(volkInitialize(), "volkInitialize");
  VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "frame-loop";
  app.apiVersion = VK_API_VERSION_1_2;
  const char* layers[] = {"VK_LAYER_KHRONOS_validation"};
  const char* exts[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
  VkValidationFeatureEnableEXT enables[] = {VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
  VkValidationFeaturesEXT vf = {VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
  vf.enabledValidationFeatureCount = 1;
  vf.pEnabledValidationFeatures = enables;
  VkInstanceCreateInfo ci = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ci.pApplicationInfo = &app;
  if (validate) {
    ci.pNext = &vf;
    ci.enabledLayerCount = 1, ci.ppEnabledLayerNames = layers;
    ci.enabledExtensionCount = 1, ci.ppEnabledExtensionNames = exts;
  }
  die_vk(vkCreateInstance(&ci, NULL, &a->instance), "vkCreateInstance (validation needs vulkan-validationlayers)");
  volkLoadInstanceOnly(a->instance);
  if (validate) {
    VkDebugUtilsMessengerCreateInfoEXT mi = {VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    mi.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    mi.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT;
    mi.pfnUserCallback = on_message;
    die_vk(vkCreateDebugUtilsMessengerEXT(a->instance, &mi, NULL, &a->messenger), "vkCreateDebugUtilsMessengerEXT");
  }
  uint32_t n = 1;
  VkResult r = vkEnumeratePhysicalDevices(a->instance, &n, &a->pd);
  if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || n == 0) die_vk(VK_ERROR_INITIALIZATION_FAILED, "no Vulkan device");
  /* What vkspec needs, enabled alongside what the app itself uses. */
  if (vkspec_required_device_features(a->instance, a->pd, req) != VKSPEC_OK) {
    fprintf(stderr, "frame-loop: %s\n", vkspec_last_error(NULL));
    exit(1);
  }
  static VkPhysicalDeviceVulkan11Features f11 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  static VkPhysicalDeviceVulkan12Features f12 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  static VkPhysicalDeviceSubgroupSizeControlFeatures ssc = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES};
  f2->sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  f2->pNext = &f11;
  f11.pNext = &f12;
  f12.timelineSemaphore = VK_TRUE;
  f12.shaderFloat16 = req->shader_float16 != 0, f12.shaderInt8 = req->shader_int8 != 0;
  f12.storageBuffer8BitAccess = req->storage_buffer_8bit != 0;
  f11.storageBuffer16BitAccess = req->storage_buffer_16bit != 0;
  ssc.subgroupSizeControl = req->subgroup_size_control != 0;
  ssc.computeFullSubgroups = req->compute_full_subgroups != 0;
  if (ssc.subgroupSizeControl) f12.pNext = &ssc;
  float prio = 1.0f;
  VkDeviceQueueCreateInfo qi = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qi.queueFamilyIndex = a->family = req->queue_family;
  qi.queueCount = 1;
  qi.pQueuePriorities = &prio;
  VkDeviceCreateInfo di = {VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  di.pNext = f2;
  di.queueCreateInfoCount = 1;
  di.pQueueCreateInfos = &qi;
  di.enabledExtensionCount = req->extension_count;
  di.ppEnabledExtensionNames = req->extensions;
  die_vk(vkCreateDevice(a->pd, &di, NULL, &a->device), "vkCreateDevice");
  volkLoadDevice(a->device);
  vkGetDeviceQueue(a->device, a->family, 0, &a->queue);
}

static void create_renderer(App* a) {
  VkBufferCreateInfo bi = {VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = W * H * 4;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
  die_vk(vkCreateBuffer(a->device, &bi, NULL, &a->frame), "vkCreateBuffer");
  VkMemoryRequirements mr;
  vkGetBufferMemoryRequirements(a->device, a->frame, &mr);
  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(a->pd, &mp);
  const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  uint32_t type = 0;
  while (type < mp.memoryTypeCount && !((mr.memoryTypeBits >> type & 1) && (mp.memoryTypes[type].propertyFlags & want) == want)) ++type;
  if (type == mp.memoryTypeCount) die_vk(VK_ERROR_OUT_OF_DEVICE_MEMORY, "no host-visible memory for the frame");
  VkMemoryAllocateInfo ai = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  ai.allocationSize = mr.size;
  ai.memoryTypeIndex = type;
  die_vk(vkAllocateMemory(a->device, &ai, NULL, &a->frame_mem), "vkAllocateMemory");
  die_vk(vkBindBufferMemory(a->device, a->frame, a->frame_mem, 0), "vkBindBufferMemory");
  die_vk(vkMapMemory(a->device, a->frame_mem, 0, VK_WHOLE_SIZE, 0, &a->frame_ptr), "vkMapMemory");

  VkDescriptorSetLayoutBinding b = {0, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, NULL};
  VkDescriptorSetLayoutCreateInfo dl = {VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  dl.bindingCount = 1, dl.pBindings = &b;
  die_vk(vkCreateDescriptorSetLayout(a->device, &dl, NULL, &a->dsl), "vkCreateDescriptorSetLayout");
  VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1};
  VkDescriptorPoolCreateInfo dp = {VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  dp.maxSets = 1, dp.poolSizeCount = 1, dp.pPoolSizes = &ps;
  die_vk(vkCreateDescriptorPool(a->device, &dp, NULL, &a->dpool), "vkCreateDescriptorPool");
  VkDescriptorSetAllocateInfo da = {VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  da.descriptorPool = a->dpool, da.descriptorSetCount = 1, da.pSetLayouts = &a->dsl;
  die_vk(vkAllocateDescriptorSets(a->device, &da, &a->set), "vkAllocateDescriptorSets");
  VkDescriptorBufferInfo dbi = {a->frame, 0, VK_WHOLE_SIZE};
  VkWriteDescriptorSet w = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
  w.dstSet = a->set, w.descriptorCount = 1, w.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, w.pBufferInfo = &dbi;
  vkUpdateDescriptorSets(a->device, 1, &w, 0, NULL);

  VkPushConstantRange pr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, 16};
  VkPipelineLayoutCreateInfo pl = {VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pl.setLayoutCount = 1, pl.pSetLayouts = &a->dsl, pl.pushConstantRangeCount = 1, pl.pPushConstantRanges = &pr;
  die_vk(vkCreatePipelineLayout(a->device, &pl, NULL, &a->layout), "vkCreatePipelineLayout");
  VkShaderModuleCreateInfo sm = {VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  sm.codeSize = sizeof kRenderSpv, sm.pCode = kRenderSpv;
  die_vk(vkCreateShaderModule(a->device, &sm, NULL, &a->shader), "vkCreateShaderModule");
  VkComputePipelineCreateInfo cp = {VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  cp.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  cp.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT, cp.stage.module = a->shader, cp.stage.pName = "main";
  cp.layout = a->layout;
  die_vk(vkCreateComputePipelines(a->device, VK_NULL_HANDLE, 1, &cp, NULL, &a->pipeline), "vkCreateComputePipelines");
  VkCommandPoolCreateInfo cpi = {VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  cpi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, cpi.queueFamilyIndex = a->family;
  die_vk(vkCreateCommandPool(a->device, &cpi, NULL, &a->cpool), "vkCreateCommandPool");
  VkCommandBufferAllocateInfo cba = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  cba.commandPool = a->cpool, cba.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, cba.commandBufferCount = 1;
  die_vk(vkAllocateCommandBuffers(a->device, &cba, &a->cb), "vkAllocateCommandBuffers");
  VkFenceCreateInfo fi = {VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  die_vk(vkCreateFence(a->device, &fi, NULL, &a->fence), "vkCreateFence");
}

/* One frame of the app's own rendering: record, submit, wait for its fence. */
static void render(App* a, uint32_t frame) {
  die_vk(vkResetCommandBuffer(a->cb, 0), "vkResetCommandBuffer");
  VkCommandBufferBeginInfo bi = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  die_vk(vkBeginCommandBuffer(a->cb, &bi), "vkBeginCommandBuffer");
  vkCmdBindPipeline(a->cb, VK_PIPELINE_BIND_POINT_COMPUTE, a->pipeline);
  vkCmdBindDescriptorSets(a->cb, VK_PIPELINE_BIND_POINT_COMPUTE, a->layout, 0, 1, &a->set, 0, NULL);
  const uint32_t push[4] = {W, H, frame, a->iters};
  vkCmdPushConstants(a->cb, a->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof push, push);
  vkCmdDispatch(a->cb, (W + 7) / 8, (H + 7) / 8, 1);
  VkMemoryBarrier mb = {VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT, mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(a->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
  die_vk(vkEndCommandBuffer(a->cb), "vkEndCommandBuffer");
  VkSubmitInfo si = {VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1, si.pCommandBuffers = &a->cb;
  die_vk(vkResetFences(a->device, 1, &a->fence), "vkResetFences");
  die_vk(vkQueueSubmit(a->queue, 1, &si, a->fence), "vkQueueSubmit");
  die_vk(vkWaitForFences(a->device, 1, &a->fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
}

typedef struct Options {
  const char* models;
  const char* png;
  int frames, validate, quiet;
  double fps;
  uint32_t budgets[8], n_budgets, iters;
  vkspec_strategy strategy;
} Options;

static void parse(int argc, char** argv, Options* o) {
  o->models = "models", o->png = NULL, o->frames = 120, o->validate = 0, o->quiet = 0, o->fps = 60;
  o->budgets[0] = 2000, o->budgets[1] = 8000, o->n_budgets = 2, o->iters = 48, o->strategy = VKSPEC_STRATEGY_MERGE;
  const char* strategies[] = {"ar", "single1", "single2", "route", "merge", "merge-trie"};
  for (int i = 1; i < argc; ++i) {
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--validate")) o->validate = 1;
    else if (!strcmp(argv[i], "--quiet")) o->quiet = 1;
    else if (v && !strcmp(argv[i], "--models")) o->models = v, ++i;
    else if (v && !strcmp(argv[i], "--png")) o->png = v, ++i;
    else if (v && !strcmp(argv[i], "--frames")) o->frames = atoi(v), ++i;
    else if (v && !strcmp(argv[i], "--fps")) o->fps = atof(v), ++i;
    else if (v && !strcmp(argv[i], "--iters")) o->iters = (uint32_t)atoi(v), ++i;
    else if (v && !strcmp(argv[i], "--strategy")) {
      int s = 0;
      while (s < 6 && strcmp(v, strategies[s])) ++s;
      if (s == 6) fprintf(stderr, "frame-loop: unknown strategy '%s'\n", v), exit(2);
      o->strategy = (vkspec_strategy)s, ++i;
    } else if (v && !strcmp(argv[i], "--budget-us")) {
      o->n_budgets = 0;
      for (const char* p = v; *p && o->n_budgets < 8; p += *p == ',') {
        char* end;
        o->budgets[o->n_budgets++] = (uint32_t)strtoul(p, &end, 10);
        if (end == p) fprintf(stderr, "frame-loop: --budget-us takes microseconds, e.g. 2000,8000\n"), exit(2);
        p = end;
      }
      ++i;
    } else {
      fprintf(stderr, "frame-loop: unknown or incomplete option '%s' (see the comment at the top of frame_loop.c)\n", argv[i]);
      exit(2);
    }
  }
  if (o->frames < 1 || o->frames > MAX_FRAMES || !(o->fps > 0) || o->iters < 1 || o->iters > 4096)
    fprintf(stderr, "frame-loop: need 1 <= --frames <= %d, --fps > 0, 1 <= --iters <= 4096\n", MAX_FRAMES), exit(2);
}

static double g_times[MAX_FRAMES];

int main(int argc, char** argv) {
  Options o;
  parse(argc, argv, &o);
  App a;
  memset(&a, 0, sizeof a);
  a.iters = o.iters;
  vkspec_device_requirements req;
  VkPhysicalDeviceFeatures2 f2;
  memset(&f2, 0, sizeof f2);
  create_device(&a, o.validate, &req, &f2);
  create_renderer(&a);

  /* vkspec on the app's device and queue (one thread here, so no queue lock is needed). */
  vkspec_runtime_desc rd;
  vkspec_runtime_desc_init(&rd);
  rd.instance = a.instance, rd.physical_device = a.pd, rd.device = a.device;
  rd.queue = a.queue, rd.queue_family = a.family, rd.api_version = VK_API_VERSION_1_2;
  rd.enabled_features = &f2;
  rd.enabled_extension_count = req.extension_count, rd.enabled_extensions = req.extensions;
  vkspec_runtime* rt;
  if (vkspec_runtime_create(&rd, &rt) != VKSPEC_OK) return fprintf(stderr, "frame-loop: %s\n", vkspec_last_error(NULL)), 1;
  char verifier[1024], head1[1024], head2[1024];
  snprintf(verifier, sizeof verifier, "%s/verifier.gguf", o.models);
  snprintf(head1, sizeof head1, "%s/head1", o.models);
  snprintf(head2, sizeof head2, "%s/head2", o.models);
  vkspec_model_desc md;
  vkspec_model_desc_init(&md);
  md.path = verifier, md.head1 = head1, md.head2 = head2;
  vkspec_model* model;
  vkspec_context* ctx;
  if (vkspec_model_load(rt, &md, &model) != VKSPEC_OK) return fprintf(stderr, "frame-loop: %s\n", vkspec_last_error(rt)), 1;
  if (vkspec_context_create(model, NULL, &ctx) != VKSPEC_OK) return fprintf(stderr, "frame-loop: %s\n", vkspec_last_error(model)), 1;
  printf("frame-loop on %s: %dx%d, %u iterations/pixel, %.0f fps target, %d frames per phase\n",
         vkspec_runtime_device_name(rt), W, H, a.iters, o.fps, o.frames);

  /* Build the decoding step before the frame loop (blocking, like the load): a start with
   * max_tokens = 0 submits nothing; later starts with the same options reuse what it built. */
  vkspec_generation_params warm;
  vkspec_generation_params_init(&warm);
  warm.prompt_text = "warm up";
  warm.max_tokens = 0;
  warm.strategy = o.strategy;
  warm.temperature = 0.7f, warm.top_p = 0.9f, warm.seed = 1;
  if (vkspec_generation_start(ctx, &warm) != VKSPEC_OK) return fprintf(stderr, "frame-loop: %s\n", vkspec_last_error(ctx)), 1;
  static const char* prompts[] = {"The kernel provides a simple interface for", "The driver", "When the device is",
                                  "This function returns"};
  uint32_t story = 0;
  const double interval = 1000.0 / o.fps;
  uint32_t frame = 0;
  /* Phase 0: rendering alone. Then one phase per budget with generation streaming. */
  for (uint32_t phase = 0; phase <= o.n_budgets; ++phase) {
    const uint32_t budget = phase ? o.budgets[phase - 1] : 0;
    vkspec_generation_params gp;
    vkspec_generation_params_init(&gp);
    gp.prompt_text = prompts[story++ % 4];
    gp.max_tokens = 150; /* the demo model holds 256 tokens */
    gp.strategy = o.strategy;
    gp.temperature = 0.7f, gp.top_p = 0.9f, gp.seed = 1; /* as warmed up: the sampler is part of the step */
    gp.budget_us = budget;
    uint64_t tokens = 0, submits = 0;
    double step_us = 0;
    int started = 0;
    double next = now_ms();
    const double t_start = next;
    for (int i = 0; i < o.frames; ++i, ++frame) {
      sleep_until(next);
      const double t0 = now_ms();
      next = t0 + interval;
      render(&a, frame);
      if (phase) {
        vkspec_poll_result r;
        if (!started) {
          if (vkspec_generation_start(ctx, &gp) != VKSPEC_OK) return fprintf(stderr, "frame-loop: %s\n", vkspec_last_error(ctx)), 1;
          started = 1;
        } else if (vkspec_poll(ctx, &r) == VKSPEC_OK) {
          tokens += r.count;
          if (r.step_us > 0) step_us = r.step_us;
          if (!o.quiet && r.text_length) fwrite(r.text, 1, r.text_length, stdout), fflush(stdout);
          if (r.done && !r.in_flight) {
            gp.prompt_text = prompts[story++ % 4]; /* a new story when one ends */
            if (vkspec_generation_start(ctx, &gp) != VKSPEC_OK) return fprintf(stderr, "frame-loop: %s\n", vkspec_last_error(ctx)), 1;
            if (!o.quiet) fputs("\n---\n", stdout);
          } else if (!r.in_flight) {
            vkspec_status s = vkspec_step_submit(ctx, 0); /* as many steps as fit the budget */
            if (s == VKSPEC_OK) ++submits;
            else if (s < 0) return fprintf(stderr, "frame-loop: %s\n", vkspec_last_error(ctx)), 1;
          }
        }
      }
      g_times[i] = now_ms() - t0;
    }
    const double seconds = (now_ms() - t_start) / 1e3;
    if (phase) vkspec_cancel(ctx), vkspec_wait(ctx);
    const double p50 = percentile(g_times, o.frames, 0.5), p99 = percentile(g_times, o.frames, 0.99);
    if (!o.quiet && phase) puts("");
    if (!phase)
      printf("render only:        frame p50 %6.2f ms  p99 %6.2f ms\n", p50, p99);
    else
      printf("budget_us %6u:    frame p50 %6.2f ms  p99 %6.2f ms  %5.1f tokens/s  (%llu tokens, %llu submissions, step %.0f us)\n",
             budget, p50, p99, (double)tokens / seconds, (unsigned long long)tokens, (unsigned long long)submits, step_us);
    fflush(stdout);
  }

  int ok = 1;
  if (o.png) {
    ok = png_write_rgba(o.png, (const uint8_t*)a.frame_ptr, W, H);
    printf("last frame: %s%s\n", o.png, ok ? "" : " (write failed)");
  }
  vkspec_context_destroy(ctx);
  vkspec_model_destroy(model);
  vkspec_runtime_destroy(rt);
  vkDestroyFence(a.device, a.fence, NULL);
  vkDestroyCommandPool(a.device, a.cpool, NULL);
  vkDestroyPipeline(a.device, a.pipeline, NULL);
  vkDestroyShaderModule(a.device, a.shader, NULL);
  vkDestroyPipelineLayout(a.device, a.layout, NULL);
  vkDestroyDescriptorPool(a.device, a.dpool, NULL);
  vkDestroyDescriptorSetLayout(a.device, a.dsl, NULL);
  vkDestroyBuffer(a.device, a.frame, NULL);
  vkFreeMemory(a.device, a.frame_mem, NULL);
  vkDestroyDevice(a.device, NULL);
  if (a.messenger) vkDestroyDebugUtilsMessengerEXT(a.instance, a.messenger, NULL);
  vkDestroyInstance(a.instance, NULL);
  if (o.validate) printf("validation messages: %u\n", g_messages);
  return ok && g_messages == 0 ? 0 : 1;
}
