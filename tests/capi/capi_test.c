/* The C API from C99, on a device this program makes itself (with Khronos validation and
 * synchronization validation on its instance: any message fails the test).
 *
 *   capi_test VKSPEC_CLI SOURCE_DIR
 *
 * Checks: device requirements and refusal of a device without timelineSemaphore; a runtime on the
 * application's device with its queue lock; model load progress and memory query; every strategy
 * gives the C++ path's tokens (the CLI's `generate --json`) and ar's; a sampled run equals the
 * CLI's; poll never waits; cancel mid-submission; three contexts on one model, interleaved, each
 * allocating only its KV caches and scratch (the weights are on the device once); handles
 * destroyed in any order, with work in flight; poll text of a SentencePiece vocabulary as a
 * continuation of the prompt. */
#define _POSIX_C_SOURCE 200809L
#include <volk.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "capi_check.h"
#include "vkspec/vkspec.h"

static unsigned g_validation_messages = 0;
static const char* g_cli;
static char g_src[1024];

static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT sev, VkDebugUtilsMessageTypeFlagsEXT type,
                                                 const VkDebugUtilsMessengerCallbackDataEXT* data, void* user) {
  (void)sev, (void)type, (void)user;
  fprintf(stderr, "validation: %s\n", data->pMessage);
  ++g_validation_messages;
  return VK_FALSE;
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

/* ---- the application's Vulkan objects ---- */
typedef struct App {
  VkInstance instance;
  VkDebugUtilsMessengerEXT messenger;
  VkPhysicalDevice pd;
  VkDevice device;
  VkQueue queue;
  uint32_t family;
  VkPhysicalDeviceFeatures2 f;
  VkPhysicalDeviceVulkan11Features f11;
  VkPhysicalDeviceVulkan12Features f12;
  VkPhysicalDeviceSubgroupSizeControlFeatures ssc;
  const char* exts[4];
  uint32_t n_exts;
} App;

static void make_instance(App* a) {
  CHECK(volkInitialize() == VK_SUCCESS);
  VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.apiVersion = VK_API_VERSION_1_2;
  const char* layers[] = {"VK_LAYER_KHRONOS_validation"};
  const char* exts[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
  VkValidationFeatureEnableEXT enables[] = {VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
  VkValidationFeaturesEXT vf = {VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
  vf.enabledValidationFeatureCount = 1;
  vf.pEnabledValidationFeatures = enables;
  VkInstanceCreateInfo ci = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ci.pNext = &vf;
  ci.pApplicationInfo = &app;
  ci.enabledLayerCount = 1;
  ci.ppEnabledLayerNames = layers;
  ci.enabledExtensionCount = 1;
  ci.ppEnabledExtensionNames = exts;
  if (vkCreateInstance(&ci, NULL, &a->instance) != VK_SUCCESS) {
    fprintf(stderr, "cannot create an instance with VK_LAYER_KHRONOS_validation (apt install vulkan-validationlayers)\n");
    exit(1);
  }
  volkLoadInstanceOnly(a->instance);
  VkDebugUtilsMessengerCreateInfoEXT mi = {VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  mi.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  mi.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT;
  mi.pfnUserCallback = on_message;
  CHECK(vkCreateDebugUtilsMessengerEXT(a->instance, &mi, NULL, &a->messenger) == VK_SUCCESS);
  uint32_t n = 1;
  VkResult r = vkEnumeratePhysicalDevices(a->instance, &n, &a->pd);
  CHECK((r == VK_SUCCESS || r == VK_INCOMPLETE) && n == 1);
}

/* A device with what vkspec asks for, or (timeline = 0) without timelineSemaphore. */
static VkDevice make_device(App* a, const vkspec_device_requirements* req, int timeline) {
  memset(&a->f, 0, sizeof a->f);
  memset(&a->f11, 0, sizeof a->f11);
  memset(&a->f12, 0, sizeof a->f12);
  a->f.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  a->f11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  a->f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  a->f.pNext = &a->f11;
  a->f11.pNext = &a->f12;
  a->f12.timelineSemaphore = timeline ? VK_TRUE : VK_FALSE;
  a->f12.shaderFloat16 = req->shader_float16 != 0;
  a->f12.shaderInt8 = req->shader_int8 != 0;
  a->f12.storageBuffer8BitAccess = req->storage_buffer_8bit != 0;
  a->f11.storageBuffer16BitAccess = req->storage_buffer_16bit != 0;
  /* The optional subgroup size control too, so kernels are chosen as on vkspec's own device. */
  a->n_exts = 0;
  a->ssc.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES;
  a->ssc.pNext = NULL;
  a->ssc.subgroupSizeControl = req->subgroup_size_control != 0;
  a->ssc.computeFullSubgroups = req->compute_full_subgroups != 0;
  for (uint32_t i = 0; i < req->extension_count; ++i) a->exts[a->n_exts++] = req->extensions[i];
  if (req->subgroup_size_control) a->f12.pNext = &a->ssc;
  float prio = 1.0f;
  VkDeviceQueueCreateInfo qi = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qi.queueFamilyIndex = req->queue_family;
  qi.queueCount = 1;
  qi.pQueuePriorities = &prio;
  VkDeviceCreateInfo di = {VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  di.pNext = &a->f;
  di.queueCreateInfoCount = 1;
  di.pQueueCreateInfos = &qi;
  di.enabledExtensionCount = a->n_exts;
  di.ppEnabledExtensionNames = a->exts;
  VkDevice dev = VK_NULL_HANDLE;
  CHECK(vkCreateDevice(a->pd, &di, NULL, &dev) == VK_SUCCESS);
  volkLoadDevice(dev); /* device-level entry points for this device (one device at a time here) */
  return dev;
}

static vkspec_runtime_desc borrowed_desc(const App* a, VkDevice dev, VkQueue q, uint32_t family) {
  vkspec_runtime_desc d;
  vkspec_runtime_desc_init(&d);
  d.instance = a->instance;
  d.physical_device = a->pd;
  d.device = dev;
  d.queue = q;
  d.queue_family = family;
  d.api_version = VK_API_VERSION_1_2;
  d.enabled_features = &a->f;
  d.enabled_extension_count = a->n_exts;
  d.enabled_extensions = a->exts;
  d.pipeline_cache_dir = "-";
  return d;
}

/* ---- the queue lock the application shares its queue through ---- */
static int g_locked = 0, g_lock_calls = 0;
static void queue_lock(void* user) {
  CHECK(user == &g_locked);
  CHECK(g_locked == 0);
  g_locked = 1;
  ++g_lock_calls;
}
static void queue_unlock(void* user) {
  CHECK(user == &g_locked);
  CHECK(g_locked == 1);
  g_locked = 0;
}

/* ---- the C++ path: `vkspec generate --json` ---- */
typedef struct Tokens {
  uint32_t ids[512];
  uint32_t n;
} Tokens;

static void ids_text(const uint32_t* ids, uint32_t n, char* out, size_t cap) {
  size_t k = 0;
  out[0] = 0;
  for (uint32_t i = 0; i < n && k + 12 < cap; ++i) k += (size_t)snprintf(out + k, cap - k, "%s%u", i ? " " : "", ids[i]);
}

static Tokens cli_generate(const uint32_t* prompt, uint32_t n_prompt, uint32_t n, const char* strategy, const char* extra) {
  char ids[4096], cmd[8192];
  ids_text(prompt, n_prompt, ids, sizeof ids);
  snprintf(cmd, sizeof cmd,
           "'%s' generate -m '%s/models/verifier.gguf' --heads '%s/models/head1,%s/models/head2' --tokens '%s' -n %u "
           "--strategy %s %s --json",
           g_cli, g_src, g_src, g_src, ids, n, strategy, extra);
  FILE* p = popen(cmd, "r");
  static char buf[1 << 16];
  size_t len = p ? fread(buf, 1, sizeof buf - 1, p) : 0;
  buf[len] = 0;
  CHECK(p && pclose(p) == 0);
  Tokens t;
  t.n = 0;
  const char* s = strstr(buf, "\"tokens\":[");
  CHECK(s != NULL);
  if (!s) return t;
  s += strlen("\"tokens\":[");
  while (*s && *s != ']' && t.n < 512) {
    char* end;
    t.ids[t.n++] = (uint32_t)strtoul(s, &end, 10);
    s = end;
    while (*s == ',' || *s == ' ') ++s;
  }
  return t;
}

/* ---- the C API path ---- */
static void on_tokens(const uint32_t* ids, uint32_t n, void* user) {
  Tokens* t = (Tokens*)user;
  for (uint32_t i = 0; i < n && t->n < 512; ++i) t->ids[t->n++] = ids[i];
}

static Tokens c_generate(vkspec_context* ctx, const vkspec_generation_params* p) {
  Tokens t;
  t.n = 0;
  REQUIRE_OK(vkspec_generate(ctx, p, on_tokens, NULL, &t), ctx);
  return t;
}

static int same(const Tokens* a, const Tokens* b) { return a->n == b->n && memcmp(a->ids, b->ids, a->n * 4) == 0; }

/* Non-blocking: poll until done, submitting whenever the GPU is idle. */
static Tokens frame_loop(vkspec_context* c1) {
  Tokens t;
  t.n = 0;
  for (;;) {
    vkspec_poll_result r;
    REQUIRE_OK(vkspec_poll(c1, &r), c1);
    on_tokens(r.tokens, r.count, &t);
    if (r.done && !r.in_flight) break;
    if (!r.in_flight) CHECK(vkspec_step_submit(c1, 3) == VKSPEC_OK);
  }
  return t;
}

static float g_last_fraction = -1;
static int g_progress_calls = 0;
static int on_progress(float fraction, const char* stage, void* user) {
  (void)user;
  CHECK(stage != NULL);
  CHECK(fraction >= g_last_fraction && fraction <= 1.0f);
  g_last_fraction = fraction;
  ++g_progress_calls;
  return 0;
}
static int stop_progress(float fraction, const char* stage, void* user) {
  (void)fraction, (void)stage, (void)user;
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: capi_test VKSPEC_CLI SOURCE_DIR\n");
    return 2;
  }
  g_cli = argv[1];
  snprintf(g_src, sizeof g_src, "%s", argv[2]);
  App a;
  memset(&a, 0, sizeof a);
  make_instance(&a);

  /* vkspec's own device, with a queue priority and a global priority where the driver has one. */
  {
    vkspec_runtime_desc d;
    vkspec_runtime_desc_init(&d);
    d.pipeline_cache_dir = "-";
    d.queue_priority = 0.5f;
    d.global_priority = VK_QUEUE_GLOBAL_PRIORITY_HIGH_KHR;
    vkspec_runtime* own = NULL;
    REQUIRE_OK(vkspec_runtime_create(&d, &own), NULL);
    CHECK(strlen(vkspec_runtime_device_name(own)) > 0);
    vkspec_runtime_destroy(own);
    d.queue_priority = 2.0f;
    CHECK(vkspec_runtime_create(&d, &own) == VKSPEC_ERROR_INVALID_ARGUMENT && own == NULL);
    CHECK(strstr(vkspec_last_error(NULL), "priority") != NULL);
    d.queue_priority = 1.0f;
    d.global_priority = 3; /* not a VkQueueGlobalPriorityKHR */
    CHECK(vkspec_runtime_create(&d, &own) == VKSPEC_ERROR_INVALID_ARGUMENT && own == NULL);
    CHECK(strstr(vkspec_last_error(NULL), "global priority") != NULL);
  }

  /* Requirements, then refusal of a device created without timelineSemaphore. */
  vkspec_device_requirements req;
  REQUIRE_OK(vkspec_required_device_features(a.instance, a.pd, &req), NULL);
  CHECK(req.api_version == VK_API_VERSION_1_2 && req.timeline_semaphore == 1);
  {
    VkDevice bare = make_device(&a, &req, 0);
    VkQueue q;
    vkGetDeviceQueue(bare, req.queue_family, 0, &q);
    vkspec_runtime_desc d = borrowed_desc(&a, bare, q, req.queue_family);
    vkspec_runtime* rt = NULL;
    CHECK(vkspec_runtime_create(&d, &rt) == VKSPEC_ERROR_MISSING_FEATURE);
    CHECK(rt == NULL);
    CHECK(strstr(vkspec_last_error(NULL), "timelineSemaphore") != NULL);
    d.api_version = VK_API_VERSION_1_1;
    CHECK(vkspec_runtime_create(&d, &rt) == VKSPEC_ERROR_MISSING_FEATURE);
    CHECK(strstr(vkspec_last_error(NULL), "1.2") != NULL);
    vkDestroyDevice(bare, NULL);
  }
  a.device = make_device(&a, &req, 1);
  a.family = req.queue_family;
  vkGetDeviceQueue(a.device, a.family, 0, &a.queue);

  {
    /* A queue family the device does not have is an argument error that says so. */
    vkspec_runtime_desc bad = borrowed_desc(&a, a.device, a.queue, 99);
    vkspec_runtime* none = NULL;
    CHECK(vkspec_runtime_create(&bad, &none) == VKSPEC_ERROR_INVALID_ARGUMENT && none == NULL);
    CHECK(strstr(vkspec_last_error(NULL), "queue family 99 does not exist") != NULL);
  }
  vkspec_runtime_desc rd = borrowed_desc(&a, a.device, a.queue, a.family);
  rd.queue_lock = queue_lock;
  rd.queue_unlock = queue_unlock;
  rd.queue_lock_user = &g_locked;
  vkspec_runtime* rt = NULL;
  REQUIRE_OK(vkspec_runtime_create(&rd, &rt), NULL);

  /* Memory before load, load with progress; a load stopped by its callback. */
  char verifier[1200], head1[1200], head2[1200];
  snprintf(verifier, sizeof verifier, "%s/models/verifier.gguf", g_src);
  snprintf(head1, sizeof head1, "%s/models/head1", g_src);
  snprintf(head2, sizeof head2, "%s/models/head2", g_src);
  vkspec_model_desc md;
  vkspec_model_desc_init(&md);
  md.path = verifier, md.head1 = head1, md.head2 = head2;
  md.progress = on_progress;
  vkspec_memory mem;
  REQUIRE_OK(vkspec_model_memory(rt, &md, &mem), rt);
  CHECK(mem.weights > 1000000 && mem.kv_cache > 0 && mem.scratch > 0);
  CHECK(mem.per_context == mem.kv_cache + mem.scratch);
  vkspec_model* model = NULL;
  md.progress = stop_progress;
  CHECK(vkspec_model_load(rt, &md, &model) == VKSPEC_ERROR_CANCELLED && model == NULL);
  md.progress = on_progress;
  const uint64_t bytes_empty = vkspec_runtime_device_bytes(rt);
  REQUIRE_OK(vkspec_model_load(rt, &md, &model), rt);
  /* The load uploads the weights and nothing per context (bf16 would shrink to f16; none here). */
  const uint64_t weight_bytes = vkspec_runtime_device_bytes(rt) - bytes_empty;
  fprintf(stderr, "memory: weights %llu reported, %llu on the device; per context %llu reported (kv %llu, scratch %llu)\n",
          (unsigned long long)mem.weights, (unsigned long long)weight_bytes, (unsigned long long)mem.per_context,
          (unsigned long long)mem.kv_cache, (unsigned long long)mem.scratch);
  CHECK(weight_bytes > mem.weights * 9 / 10 && weight_bytes < mem.weights * 11 / 10);
  CHECK(g_progress_calls >= 3 && g_last_fraction == 1.0f);
  /* context_tokens 0: the trained context where it is at most 2048 (the demo's 512). */
  const uint32_t trained = vkspec_model_trained_context(model);
  CHECK(trained > 0 && vkspec_model_context_tokens(model) == (trained < 2048 ? trained : 2048));
  CHECK(vkspec_model_context_tokens(NULL) == 0 && vkspec_model_trained_context(NULL) == 0);
  {  /* The demo's byte vocabulary declares no end-of-generation id. */
    uint32_t eog[4], n_eog = 99;
    REQUIRE_OK(vkspec_model_end_of_generation(model, eog, 4, &n_eog), model);
    CHECK(n_eog == 0);
    CHECK(vkspec_model_end_of_generation(NULL, eog, 4, &n_eog) == VKSPEC_ERROR_INVALID_ARGUMENT);
  }
  {  /* Past the trained context: accepted, and the model says both numbers. */
    vkspec_model_desc wide = md;
    wide.progress = NULL, wide.head1 = NULL, wide.head2 = NULL;
    wide.context_tokens = trained + 64;
    vkspec_model* mw = NULL;
    REQUIRE_OK(vkspec_model_load(rt, &wide, &mw), rt);
    CHECK(vkspec_model_context_tokens(mw) == trained + 64 && vkspec_model_trained_context(mw) == trained);
    vkspec_model_destroy(mw);
  }
  vkspec_model_desc bad = md;
  bad.path = "/nonexistent.gguf";
  vkspec_model* none = NULL;
  CHECK(vkspec_model_load(rt, &bad, &none) == VKSPEC_ERROR_MODEL && none == NULL);
  CHECK(strstr(vkspec_last_error(rt), "/nonexistent.gguf") != NULL);

  uint32_t prompt[64], n_prompt = 0;
  REQUIRE_OK(vkspec_tokenize(model, "The kernel provides a simple interface for", prompt, 64, &n_prompt), model);
  CHECK(n_prompt > 10);

  vkspec_context* c1 = NULL;
  REQUIRE_OK(vkspec_context_create(model, NULL, &c1), model);
  /* A context allocates its KV caches and scratch, exactly as vkspec_model_memory said. */
  CHECK(vkspec_runtime_device_bytes(rt) - bytes_empty - weight_bytes == mem.per_context);
  vkspec_poll_result r0;
  CHECK(vkspec_poll(c1, &r0) == VKSPEC_ERROR_STATE);
  CHECK(vkspec_step_submit(c1, 1) == VKSPEC_ERROR_STATE);

  /* Every strategy against the C++ path and against ar, token for token. */
  const char* names[] = {"ar", "single1", "single2", "route", "merge", "merge-trie"};
  vkspec_generation_params gp;
  vkspec_generation_params_init(&gp);
  gp.prompt_ids = prompt, gp.prompt_count = n_prompt, gp.max_tokens = 40;
  Tokens ar = c_generate(c1, &gp);
  CHECK(ar.n == 40);
  for (int s = 0; s < 6; ++s) {
    gp.strategy = (vkspec_strategy)s;
    Tokens mine = c_generate(c1, &gp);
    Tokens cli = cli_generate(prompt, n_prompt, 40, names[s], "");
    if (!same(&mine, &cli) || !same(&mine, &ar)) fprintf(stderr, "strategy %s differs\n", names[s]);
    CHECK(same(&mine, &cli));
    CHECK(same(&mine, &ar));
  }
  /* Sampled: the same seed gives the CLI's tokens. */
  gp.strategy = VKSPEC_STRATEGY_MERGE, gp.temperature = 0.7f, gp.top_p = 0.9f, gp.seed = 2;
  Tokens sampled = c_generate(c1, &gp);
  Tokens sampled_cli = cli_generate(prompt, n_prompt, 40, "merge", "--temp 0.7 --top-p 0.9 --seed 2");
  CHECK(same(&sampled, &sampled_cli));
  CHECK(!same(&sampled, &ar));
  /* Another seed, temperature, min-p, penalty and a stop id on the same context: the step built
   * for the first sampler is reused (only its values change), and the tokens are the CLI's, whose
   * engine is built with these values; then the first values again give the first tokens. */
  gp.temperature = 0.9f, gp.min_p = 0.05f, gp.repeat_penalty = 1.2f, gp.seed = 3;
  uint32_t stop_id = sampled.ids[20];
  gp.stop_ids = &stop_id, gp.stop_count = 1;
  Tokens retuned = c_generate(c1, &gp);
  char extra[128];
  snprintf(extra, sizeof extra, "--temp 0.9 --top-p 0.9 --min-p 0.05 --repeat-penalty 1.2 --seed 3 --stop %u", stop_id);
  Tokens retuned_cli = cli_generate(prompt, n_prompt, 40, "merge", extra);
  CHECK(same(&retuned, &retuned_cli));
  CHECK(!same(&retuned, &sampled));
  gp.temperature = 0.7f, gp.min_p = 0, gp.repeat_penalty = 1, gp.seed = 2, gp.stop_ids = NULL, gp.stop_count = 0;
  Tokens again = c_generate(c1, &gp);
  CHECK(same(&again, &sampled));
  /* A warm-up start (max_tokens 0) with one seed, then a start with another: the second's values. */
  gp.seed = 5, gp.max_tokens = 0;
  REQUIRE_OK(vkspec_generation_start(c1, &gp), c1);
  gp.seed = 6, gp.max_tokens = 40;
  REQUIRE_OK(vkspec_generation_start(c1, &gp), c1);
  Tokens after_warmup = frame_loop(c1);
  Tokens seed6_cli = cli_generate(prompt, n_prompt, 40, "merge", "--temp 0.7 --top-p 0.9 --seed 6");
  CHECK(same(&after_warmup, &seed6_cli));
  gp.seed = 2;
  gp.temperature = 0, gp.top_p = 1, gp.seed = 0;

  /* The frame-loop path gives the same tokens; the timeline semaphore reaches its value. */
  gp.strategy = VKSPEC_STRATEGY_MERGE;
  REQUIRE_OK(vkspec_generation_start(c1, &gp), c1);
  Tokens looped = frame_loop(c1);
  CHECK(same(&looped, &ar));
  VkSemaphore sem;
  uint64_t value = 0, reached = 0;
  REQUIRE_OK(vkspec_timeline(c1, &sem, &value), c1);
  CHECK(value >= 2 && vkGetSemaphoreCounterValue(a.device, sem, &reached) == VK_SUCCESS && reached == value);
  {
    /* The app folds vkspec's timeline into its own submission: it runs after vkspec's last one. */
    VkTimelineSemaphoreSubmitInfo ti = {VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
    ti.waitSemaphoreValueCount = 1;
    ti.pWaitSemaphoreValues = &value;
    const VkPipelineStageFlags stage = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
    VkSubmitInfo si = {VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.pNext = &ti;
    si.waitSemaphoreCount = 1;
    si.pWaitSemaphores = &sem;
    si.pWaitDstStageMask = &stage;
    VkFenceCreateInfo fi = {VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkFence f;
    CHECK(vkCreateFence(a.device, &fi, NULL, &f) == VK_SUCCESS);
    CHECK(vkQueueSubmit(a.queue, 1, &si, f) == VK_SUCCESS);
    CHECK(vkWaitForFences(a.device, 1, &f, VK_TRUE, 10000000000ull) == VK_SUCCESS);
    vkDestroyFence(a.device, f, NULL);
  }

  /* Poll never waits: right after submitting 24 steps it returns at once, the work in flight. */
  gp.max_tokens = 150;
  REQUIRE_OK(vkspec_generation_start(c1, &gp), c1);
  REQUIRE_OK(vkspec_wait(c1), c1);
  vkspec_poll_result r;
  REQUIRE_OK(vkspec_poll(c1, &r), c1);
  CHECK(r.count == 1 && !r.in_flight);
  CHECK(vkspec_step_submit(c1, 24) == VKSPEC_OK);
  CHECK(vkspec_step_submit(c1, 1) == VKSPEC_NOT_READY);
  double t0 = now_us();
  REQUIRE_OK(vkspec_poll(c1, &r), c1);
  const double poll_us = now_us() - t0;
  CHECK(r.in_flight && r.count == 0);
  VkFence fence;
  REQUIRE_OK(vkspec_fence(c1, &fence), c1);
  CHECK(vkGetFenceStatus(a.device, fence) == VK_NOT_READY);
  t0 = now_us();
  REQUIRE_OK(vkspec_wait(c1), c1);
  const double wait_us = now_us() - t0;
  fprintf(stderr, "poll %.0f us while the submission took %.0f us more\n", poll_us, wait_us);
  CHECK(poll_us * 10 < wait_us);
  REQUIRE_OK(vkspec_poll(c1, &r), c1);
  CHECK(r.count > 24 && !r.in_flight && r.step_us > 0);
  CHECK(vkspec_fence(c1, &fence) == VKSPEC_ERROR_STATE); /* nothing in flight: no fence to wait on */

  /* Cancel mid-submission: nothing more is reported, submit says done, the context runs again. */
  CHECK(vkspec_step_submit(c1, 24) == VKSPEC_OK);
  REQUIRE_OK(vkspec_cancel(c1), c1);
  REQUIRE_OK(vkspec_poll(c1, &r), c1);
  CHECK(r.done && r.count == 0);
  CHECK(vkspec_step_submit(c1, 1) == VKSPEC_DONE);
  REQUIRE_OK(vkspec_wait(c1), c1);
  REQUIRE_OK(vkspec_poll(c1, &r), c1);
  CHECK(r.done && !r.in_flight && r.count == 0);
  gp.max_tokens = 40;
  Tokens after = c_generate(c1, &gp);
  CHECK(same(&after, &ar));
  const uint64_t step_bytes = vkspec_runtime_device_bytes(rt) - bytes_empty - weight_bytes - mem.per_context;
  fprintf(stderr, "memory: context 1's decoding step (merge) holds %llu bytes beside its KV caches and scratch\n",
          (unsigned long long)step_bytes);

  /* Three contexts on one model, interleaved step by step, each with its own KV cache: a new
   * context adds its KV caches and scratch to the device, not another copy of the weights. */
  const uint64_t one = vkspec_runtime_device_bytes(rt);
  vkspec_context* c2 = NULL;
  REQUIRE_OK(vkspec_context_create(model, NULL, &c2), model);
  const uint64_t two = vkspec_runtime_device_bytes(rt);
  fprintf(stderr, "memory: a second context added %llu bytes (weights: %llu)\n", (unsigned long long)(two - one),
          (unsigned long long)weight_bytes);
  CHECK(two - one == mem.per_context);
  vkspec_context* c3 = NULL;
  REQUIRE_OK(vkspec_context_create(model, NULL, &c3), model);
  CHECK(vkspec_runtime_device_bytes(rt) - two == mem.per_context);
  vkspec_generation_params g2 = gp, g3 = gp;
  g2.prompt_ids = prompt + 3, g2.prompt_count = n_prompt - 3, g2.strategy = VKSPEC_STRATEGY_AR;
  g3.prompt_ids = prompt + 6, g3.prompt_count = n_prompt - 6, g3.strategy = VKSPEC_STRATEGY_AR;
  Tokens ref2 = c_generate(c2, &g2);
  Tokens ref3 = cli_generate(g3.prompt_ids, g3.prompt_count, 40, "ar", "");
  gp.strategy = VKSPEC_STRATEGY_MERGE_TRIE;
  g2.strategy = VKSPEC_STRATEGY_ROUTE;
  g3.strategy = VKSPEC_STRATEGY_SINGLE2;
  vkspec_context* cs[3] = {c1, c2, c3};
  const vkspec_generation_params* ps[3] = {&gp, &g2, &g3};
  Tokens ts[3];
  int done[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    ts[i].n = 0;
    REQUIRE_OK(vkspec_generation_start(cs[i], ps[i]), cs[i]);
  }
  while (!done[0] || !done[1] || !done[2]) {
    for (int i = 0; i < 3; ++i) {
      vkspec_poll_result ri;
      REQUIRE_OK(vkspec_poll(cs[i], &ri), cs[i]);
      on_tokens(ri.tokens, ri.count, &ts[i]);
      done[i] = ri.done && !ri.in_flight;
      if (!ri.in_flight && !ri.done) vkspec_step_submit(cs[i], (uint32_t)i + 1);
    }
  }
  CHECK(same(&ts[0], &ar));
  CHECK(same(&ts[1], &ref2));
  CHECK(same(&ts[2], &ref3));
  CHECK(!same(&ar, &ref2) && !same(&ref2, &ref3));
  /* A context destroyed with a submission in flight waits for it (validation and ASan watch). */
  REQUIRE_OK(vkspec_generation_start(c3, &g3), c3);
  REQUIRE_OK(vkspec_wait(c3), c3);
  REQUIRE_OK(vkspec_poll(c3, &r), c3);
  CHECK(vkspec_step_submit(c3, 8) == VKSPEC_OK);
  vkspec_context_destroy(c3);

  /* Contexts first, then their model: every byte goes back. */
  {
    const uint64_t before = vkspec_runtime_device_bytes(rt);
    vkspec_model* mb = NULL;
    md.progress = NULL;
    REQUIRE_OK(vkspec_model_load(rt, &md, &mb), rt);
    vkspec_context *x1 = NULL, *x2 = NULL;
    REQUIRE_OK(vkspec_context_create(mb, NULL, &x1), mb);
    REQUIRE_OK(vkspec_context_create(mb, NULL, &x2), mb);
    CHECK(vkspec_runtime_device_bytes(rt) - before == weight_bytes + 2 * mem.per_context);
    vkspec_generation_params gx = gp;
    gx.strategy = VKSPEC_STRATEGY_SINGLE1;
    REQUIRE_OK(vkspec_generation_start(x1, &gx), x1);
    Tokens mine = c_generate(x2, &gx);
    CHECK(same(&mine, &ar));
    vkspec_context_destroy(x1); /* its prefill may still run */
    vkspec_context_destroy(x2);
    CHECK(vkspec_runtime_device_bytes(rt) - before == weight_bytes);
    vkspec_model_destroy(mb);
    CHECK(vkspec_runtime_device_bytes(rt) == before);
  }

  /* Text from a SentencePiece vocabulary: poll's text is a continuation of the prompt, so its
   * first piece keeps its space (" compart", not "compart"), byte for byte the CLI's stdout after
   * the echoed prompt (tests/cli_test.sh checks that against the vocabulary's pieces). */
  {
    char vocab[1200], dir[] = "/tmp/capi-spm-XXXXXX", path[1300], cmd[4096];
    snprintf(vocab, sizeof vocab, "%s/../shared/tokenizer-vectors/ggml-vocab-llama-spm.gguf", g_src);
    FILE* vf = fopen(vocab, "rb");
    if (!vf) {
      const char* ci = getenv("CI");
      if (ci && strcmp(ci, "true") == 0) CHECK(!"CI=true but the llama-spm vocabulary is missing");
      else fprintf(stderr, "NOT RUN: SPM poll text (%s missing)\n", vocab);
    } else {
      fclose(vf);
      CHECK(mkdtemp(dir) != NULL);
      snprintf(path, sizeof path, "%s/spm.gguf", dir);
      const char* slash = strrchr(g_cli, '/');
      snprintf(cmd, sizeof cmd, "'%.*s/make_random_gguf' '%s' --dim 64 --layers 1 --heads 2 --kv-heads 2 --ffn 128 "
               "--tokenizer-from '%s' 2>/dev/null", slash ? (int)(slash - g_cli) : 1, slash ? g_cli : ".", path, vocab);
      CHECK(system(cmd) == 0);
      vkspec_model_desc sd;
      vkspec_model_desc_init(&sd);
      sd.path = path;
      vkspec_model* sm = NULL;
      vkspec_context* sc = NULL;
      REQUIRE_OK(vkspec_model_load(rt, &sd, &sm), rt);
      {  /* The vocabulary's eos_token_id 2 is its end of generation; cap 0 still counts. */
        uint32_t eog[4] = {0}, n_eog = 0;
        REQUIRE_OK(vkspec_model_end_of_generation(sm, eog, 4, &n_eog), sm);
        CHECK(n_eog == 1 && eog[0] == 2);
        REQUIRE_OK(vkspec_model_end_of_generation(sm, NULL, 0, &n_eog), sm);
        CHECK(n_eog == 1);
      }
      REQUIRE_OK(vkspec_context_create(sm, NULL, &sc), sm);
      vkspec_generation_params sp;
      vkspec_generation_params_init(&sp);
      sp.prompt_text = "The cat";
      sp.max_tokens = 6;
      REQUIRE_OK(vkspec_generation_start(sc, &sp), sc);
      char text[4096];
      size_t len = 0;
      for (vkspec_poll_result r;;) {
        REQUIRE_OK(vkspec_poll(sc, &r), sc);
        if (r.text_length && len + r.text_length < sizeof text) memcpy(text + len, r.text, r.text_length), len += r.text_length;
        if (r.done) break;
        if (!r.in_flight) REQUIRE_OK(vkspec_step_submit(sc, 0), sc);
      }
      snprintf(cmd, sizeof cmd, "'%s' generate -m '%s' -p 'The cat' -n 6 2>/dev/null", g_cli, path);
      FILE* p = popen(cmd, "r");
      char out[4096];
      size_t n = p ? fread(out, 1, sizeof out, p) : 0;
      CHECK(p && pclose(p) == 0);
      const size_t pre = strlen("The cat");
      CHECK(n == pre + len + 1 && memcmp(out, "The cat", pre) == 0 && memcmp(out + pre, text, len) == 0);
      CHECK(len > 1 && text[0] == ' ');
      if (len > 1 && text[0] != ' ') fprintf(stderr, "poll text: '%.*s'\n", (int)len, text);
      vkspec_context_destroy(sc);
      vkspec_model_destroy(sm);
      unlink(path);
      rmdir(dir);
    }
  }

  /* The model handle first: its contexts keep the weights (not a byte freed) and keep working. */
  const uint64_t held = vkspec_runtime_device_bytes(rt);
  vkspec_model_destroy(model);
  CHECK(vkspec_runtime_device_bytes(rt) == held);
  Tokens late = c_generate(c2, &g2);
  CHECK(same(&late, &ref2));

  /* Then the runtime handle: the device stays while contexts use it. */
  vkspec_runtime_destroy(rt);
  late = c_generate(c2, &g2);
  CHECK(same(&late, &ref2));
  vkspec_context_destroy(c1);
  late = c_generate(c2, &g2);
  CHECK(same(&late, &ref2));
  vkspec_context_destroy(c2);  /* the last user: the runtime goes now; the device is still ours */

  CHECK(g_lock_calls > 0 && g_locked == 0);
  CHECK(vkDeviceWaitIdle(a.device) == VK_SUCCESS);
  vkDestroyDevice(a.device, NULL);
  vkDestroyDebugUtilsMessengerEXT(a.instance, a.messenger, NULL);
  vkDestroyInstance(a.instance, NULL);
  CHECK(g_validation_messages == 0);
  if (g_failures) fprintf(stderr, "%d check(s) failed\n", g_failures);
  else fprintf(stderr, "capi: all checks passed\n");
  return g_failures ? 1 : 0;
}
