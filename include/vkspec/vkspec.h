/* vkspec C API: lossless speculative decoding on Vulkan, embeddable in an application that owns
 * its Vulkan device and render loop. C99; every function is prefixed vkspec_, returns a
 * vkspec_status (or a value documented with it), and never lets an exception or a C++ type cross.
 *
 * Objects (opaque handles):
 *   vkspec_runtime     a Vulkan device and queue: vkspec's own, or the application's (borrowed)
 *   vkspec_model       a verifier (GGUF) with zero, one or two EAGLE draft heads and its tokenizer:
 *                      their weights, on the device once, shared by the model's contexts
 *   vkspec_context     one generation context: its own KV caches, one generation at a time
 *
 * A frame loop:
 *   vkspec_generation_start(ctx, &params);          prompt in; submits the prefill, returns at once
 *   each frame:
 *     vkspec_poll(ctx, &out);                        never waits: new tokens + text when the GPU is done
 *     if (!out.in_flight && !out.done)
 *       vkspec_step_submit(ctx, 0);                  0: as many steps as fit params.budget_us
 *     ... render: the app may wait on vkspec_timeline() in its own submit, or just keep polling ...
 *
 * THREAD SAFETY. Every function may be called from any thread. Calls on a runtime and on the
 * models and contexts made on it take that runtime's one internal lock: they serialize, never
 * race (runtimes on different devices are independent). vkspec_model_load does not take it (it
 * builds a new object, reading files and uploading): a load on one thread does not delay a
 * vkspec_poll on another. vkspec_poll, vkspec_step_submit and
 * vkspec_cancel never wait for the GPU. The blocking calls are vkspec_model_load,
 * vkspec_context_create (they upload and build), vkspec_generate, vkspec_generation_start (it
 * waits for the previous generation's work in flight, and a start with a new strategy, draft
 * shape or sampler kind builds a step, like a load), vkspec_wait, and the destroy calls (they wait for the object's own
 * work in flight, never for the application's). While vkspec_generate, vkspec_generation_start,
 * vkspec_wait or vkspec_context_destroy waits for the GPU it releases the lock: calls on other
 * contexts go ahead, and vkspec_cancel from another thread ends a vkspec_generate
 * (VKSPEC_ERROR_CANCELLED). A start (vkspec_generation_start, or vkspec_generate's) also
 * releases the lock while it builds a step and records and submits the prompt's prefill: calls
 * on other contexts go ahead. While a start is in progress, every call on its context from
 * another thread is refused with VKSPEC_ERROR_STATE, but vkspec_cancel (it then ends whatever
 * generation the context has when the start returns). vkspec_generate owns its context until it returns: a
 * vkspec_generation_start, vkspec_step_submit, vkspec_poll, vkspec_wait or vkspec_generate on
 * that context meanwhile (from another thread or a callback) is refused with VKSPEC_ERROR_STATE,
 * since it would restart the generation or take its tokens. A handle must not be destroyed while
 * another thread is in a call on it. Callbacks run on the calling thread, inside the call, with the lock held (a load's
 * progress callback without it); they must not call back into the same context.
 *
 * SHARED QUEUE. Vulkan requires external synchronization of a VkQueue. If the application submits
 * to the queue it gives vkspec from another thread, it passes queue_lock/queue_unlock: every
 * vkQueueSubmit vkspec makes is bracketed by them. vkspec may call queue_lock while it holds its
 * own locks, so the order is always vkspec's locks, then the queue lock: the application must not call
 * a vkspec function while it holds its queue lock (that order reversed is a deadlock). vkspec never calls vkQueueWaitIdle or
 * vkDeviceWaitIdle on a borrowed device; it waits only on its own fences.
 *
 * LIFETIME AND OWNERSHIP. Each handle is destroyed exactly once by its own destroy call, in any
 * order: a model keeps its runtime alive and a context its model, so destroying the runtime
 * first only drops the application's reference (the device goes when its last user does).
 * A borrowed VkInstance/VkDevice/VkQueue stays the application's: vkspec never destroys it, and
 * the application destroys it only after every vkspec handle made on it is destroyed.
 * Strings returned by vkspec (last error, poll text) belong to the handle and stay valid until the
 * next call on that handle (for the last error: the calling thread's next call). Token arrays returned by vkspec_poll likewise.
 * vkspec_last_error(NULL) is the calling thread's last error from a call without a handle to
 * keep it (vkspec_runtime_create, vkspec_required_device_features, a NULL handle). A failed
 * vkspec_model_load reports on its runtime, a failed vkspec_context_create on its model.
 *
 * WEIGHTS AND CONTEXTS. vkspec_model_load uploads the weights of the verifier and heads once;
 * every context made from that model shares that one device copy and allocates only its own KV
 * caches and scratch (vkspec_context_create), plus the buffers of its decoding step at its first
 * vkspec_generation_start with given options. A model with N contexts holds about
 * vkspec_memory.weights + N * vkspec_memory.per_context device bytes (vkspec_runtime_device_bytes
 * says what is held now). The weights stay on the device until the model handle and every
 * context made from it are destroyed, in whichever order.
 */
#ifndef VKSPEC_VKSPEC_H
#define VKSPEC_VKSPEC_H

#include <stddef.h>
#include <stdint.h>

#include <vulkan/vulkan_core.h>

#if defined(VKSPEC_BUILDING)
#define VKSPEC_API __attribute__((visibility("default")))
#else
#define VKSPEC_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define VKSPEC_VERSION_MAJOR 0
#define VKSPEC_VERSION_MINOR 2

typedef enum vkspec_status {
  VKSPEC_OK = 0,
  VKSPEC_NOT_READY = 1,  /* vkspec_step_submit: the previous submission is still in flight */
  VKSPEC_DONE = 2,       /* vkspec_step_submit: the generation is over (stop, limit or cancel) */
  VKSPEC_ERROR_INVALID_ARGUMENT = -1, /* a NULL handle, an option out of range, a bad prompt */
  VKSPEC_ERROR_MISSING_FEATURE = -2,  /* the device lacks (or was created without) what vkspec needs */
  VKSPEC_ERROR_MODEL = -3,            /* a model or head file was refused (the text names file and field),
                                       or its weights overflowed float arithmetic in a generation */
  VKSPEC_ERROR_VULKAN = -4,           /* a Vulkan call failed */
  VKSPEC_ERROR_OUT_OF_MEMORY = -5,    /* host or device memory */
  VKSPEC_ERROR_STATE = -6,            /* a call out of order (e.g. poll before any generation) */
  VKSPEC_ERROR_CANCELLED = -7,        /* a progress callback asked to stop; vkspec_cancel ended vkspec_generate */
  VKSPEC_ERROR_INTERNAL = -8
} vkspec_status;

typedef struct vkspec_runtime vkspec_runtime;
typedef struct vkspec_model vkspec_model;
typedef struct vkspec_context vkspec_context;

/* Text of the calling thread's last error on this handle ("" if none: each thread reads its own
 * calls' errors, whatever other threads do on the handle); NULL: the calling thread's last error
 * of a call that had no handle to keep it (see LIFETIME above). */
VKSPEC_API const char* vkspec_last_error(const void* handle);
VKSPEC_API const char* vkspec_status_name(vkspec_status s);

/* ---- device requirements -------------------------------------------------------------------- */

/* What an application enables when it creates a device vkspec will run on. Required: Vulkan 1.2
 * (VkApplicationInfo::apiVersion and the device), a queue family with VK_QUEUE_COMPUTE_BIT (the
 * application's graphics queue qualifies), and the timelineSemaphore feature. The rest are
 * optional: vkspec uses a faster kernel only when the application enabled what it needs. */
typedef struct vkspec_device_requirements {
  uint32_t api_version;   /* VK_API_VERSION_1_2 */
  uint32_t queue_family;  /* a compute-capable family (prefers one that also does graphics) */
  /* Features, each 1 = required, 2 = optional and supported by this device, 0 = not used. */
  uint32_t timeline_semaphore;       /* VkPhysicalDeviceVulkan12Features::timelineSemaphore (required) */
  uint32_t shader_float16;           /* VkPhysicalDeviceVulkan12Features::shaderFloat16 */
  uint32_t shader_int8;              /* VkPhysicalDeviceVulkan12Features::shaderInt8 */
  uint32_t storage_buffer_8bit;      /* VkPhysicalDeviceVulkan12Features::storageBuffer8BitAccess */
  uint32_t storage_buffer_16bit;     /* VkPhysicalDeviceVulkan11Features::storageBuffer16BitAccess */
  uint32_t subgroup_size_control;    /* VkPhysicalDeviceSubgroupSizeControlFeatures::subgroupSizeControl */
  uint32_t compute_full_subgroups;   /* ... ::computeFullSubgroups */
  /* Device extensions to enable: required ones first, then supported optional ones. */
  uint32_t extension_count;
  const char* extensions[4];         /* static strings */
} vkspec_device_requirements;

/* Fills `out` for `physical_device` (of `instance`). Returns VKSPEC_ERROR_MISSING_FEATURE, with
 * the missing item in vkspec_last_error(NULL), when vkspec cannot run on that device at all. */
VKSPEC_API vkspec_status vkspec_required_device_features(VkInstance instance, VkPhysicalDevice physical_device,
                                                         vkspec_device_requirements* out);

/* ---- runtime ------------------------------------------------------------------------------- */

typedef struct vkspec_runtime_desc {
  /* vkspec's own device (instance == NULL): "" or NULL picks VKSPEC_DEVICE or the best device
   * (discrete > integrated > virtual > CPU); else an index or a name substring. */
  const char* device_name;
  float queue_priority;      /* 0..1 (default 1) */
  uint32_t global_priority;  /* a VkQueueGlobalPriorityKHR (128..1024), asked for where the device offers it;
                              * 0: don't ask; another value is refused */
  int validation;            /* Khronos validation + synchronization validation (own device only) */
  const char* pipeline_cache_dir;  /* NULL: $XDG_CACHE_HOME/vkspec; "-": none */

  /* The application's device (all of instance, physical_device, device, queue set): borrowed. */
  VkInstance instance;
  VkPhysicalDevice physical_device;
  VkDevice device;
  uint32_t queue_family;
  VkQueue queue;
  uint32_t api_version;  /* the VkApplicationInfo::apiVersion the instance was created with */
  /* The VkDeviceCreateInfo::pNext chain the device was created with (VkPhysicalDeviceFeatures2,
   * VkPhysicalDeviceVulkan11Features, VkPhysicalDeviceVulkan12Features,
   * VkPhysicalDeviceTimelineSemaphoreFeatures, ... in any order): Vulkan cannot be asked which
   * features a device has enabled, so the application says. */
  const void* enabled_features;
  /* Device extensions the device was created with. */
  uint32_t enabled_extension_count;
  const char* const* enabled_extensions;

  /* Held around every vkQueueSubmit vkspec makes (both or neither). */
  void (*queue_lock)(void* user);
  void (*queue_unlock)(void* user);
  void* queue_lock_user;
} vkspec_runtime_desc;

VKSPEC_API void vkspec_runtime_desc_init(vkspec_runtime_desc* desc);
VKSPEC_API vkspec_status vkspec_runtime_create(const vkspec_runtime_desc* desc, vkspec_runtime** out);
VKSPEC_API void vkspec_runtime_destroy(vkspec_runtime* rt);
/* The device's name ("llvmpipe (LLVM 15.0.6, 256 bits)"), valid while rt lives. */
VKSPEC_API const char* vkspec_runtime_device_name(const vkspec_runtime* rt);
/* Validation messages since the last call (validation on): their count; the text of the first
 * one in vkspec_last_error(rt). */
VKSPEC_API uint32_t vkspec_runtime_validation_messages(vkspec_runtime* rt);
/* Device memory vkspec holds on this runtime now, in bytes: every loaded model's weights, every
 * context's KV caches, scratch and decoding-step buffers (0 for a NULL rt). */
VKSPEC_API uint64_t vkspec_runtime_device_bytes(vkspec_runtime* rt);

/* ---- model --------------------------------------------------------------------------------- */

/* Progress of vkspec_model_load: fraction 0..1 and what is loading ("verifier", "head 1", ...).
 * Return nonzero to stop the load (VKSPEC_ERROR_CANCELLED). */
typedef int (*vkspec_progress_fn)(float fraction, const char* stage, void* user);

typedef struct vkspec_model_desc {
  const char* path;         /* verifier GGUF */
  const char* head1;        /* EAGLE head folder or weights file, or NULL */
  const char* head2;        /* second head, or NULL */
  uint32_t context_tokens;  /* KV capacity; 0: min(model context, 2048) */
  uint32_t max_budget;      /* largest draft budget a generation will ask for (default 16) */
  uint32_t depth, topk;     /* largest draft depth and top-k a generation will ask for (4, 4) */
  vkspec_progress_fn progress;
  void* progress_user;
} vkspec_model_desc;

typedef struct vkspec_memory {
  uint64_t weights;      /* verifier + heads, on the device once per model (shared by its contexts) */
  uint64_t kv_cache;     /* verifier + heads, for context_tokens: each context's own */
  uint64_t scratch;      /* activations for max rows per pass: each context's own */
  uint64_t per_context;  /* kv_cache + scratch: what each context allocates (with an EAGLE-3 head
                          * the verifier's tap rows, counted in scratch, come at its first
                          * speculative start, not at vkspec_context_create) */
  uint64_t device_local; /* the device's device-local heap bytes (0 if unknown) */
} vkspec_memory;

VKSPEC_API void vkspec_model_desc_init(vkspec_model_desc* desc);
/* Device memory a model and each context will need, from the files' headers (nothing uploaded):
 * a model with N contexts needs weights + N * per_context bytes, plus each context's
 * decoding-step buffers (small beside the KV cache: the tree, logits rows and step state). Not
 * counted here: on a device that reads weights through texel buffers (a CPU device such as
 * lavapipe), a generation drafting with two heads of one shape also packs a copy of both heads'
 * weights and a state for each into one buffer, so that each paired fetch is one; a pack the
 * device cannot hold is skipped, not an error. vkspec_runtime_device_bytes counts it. */
VKSPEC_API vkspec_status vkspec_model_memory(vkspec_runtime* rt, const vkspec_model_desc* desc, vkspec_memory* out);
VKSPEC_API vkspec_status vkspec_model_load(vkspec_runtime* rt, const vkspec_model_desc* desc, vkspec_model** out);
VKSPEC_API void vkspec_model_destroy(vkspec_model* model);
/* What vkspec_model_load noticed and went on without, one line each ("\n"-terminated), "" if
 * nothing (and for a NULL model): a tokenizer key that names no token and is ignored; a
 * tokenizer the file's keys do not make (the model loads without it: prompt_ids work,
 * prompt_text is refused with the reason); a context_tokens above the trained context. Valid
 * while the model lives. */
VKSPEC_API const char* vkspec_model_warnings(const vkspec_model* model);
VKSPEC_API uint32_t vkspec_model_vocab_size(const vkspec_model* model);
/* The KV capacity in tokens every context of this model has (vkspec_model_desc.context_tokens,
 * or the default it chose), and the context the model was trained for (the GGUF's
 * <arch>.context_length; 0 if the file does not say). A context_tokens above the trained
 * context is accepted, as llama.cpp accepts it: positions past it are outside what the model
 * saw, and its output there is unreliable. 0 for a NULL model. */
VKSPEC_API uint32_t vkspec_model_context_tokens(const vkspec_model* model);
VKSPEC_API uint32_t vkspec_model_trained_context(const vkspec_model* model);
/* The ids that end a generation where llama.cpp's tools stop (the GGUF's eos, eot and eom token
 * ids, each once; an eot or eom id past the vocabulary names no token and is left out, as
 * llama.cpp leaves it out, with a line in vkspec_model_warnings): pass them in vkspec_generation_params.stop_ids to stop there. Writes at most
 * `cap` ids; *count is how many there are (0 for a model without a tokenizer). */
VKSPEC_API vkspec_status vkspec_model_end_of_generation(const vkspec_model* model, uint32_t* ids, uint32_t cap,
                                                        uint32_t* count);
/* Prompt text to ids with the model's tokenizer (BOS as the model asks). Writes at most `cap` ids
 * and returns VKSPEC_ERROR_INVALID_ARGUMENT if more were needed; *count is the full count. */
VKSPEC_API vkspec_status vkspec_tokenize(vkspec_model* model, const char* text, uint32_t* ids, uint32_t cap,
                                         uint32_t* count);

/* ---- generation ---------------------------------------------------------------------------- */

typedef enum vkspec_strategy {
  VKSPEC_STRATEGY_AR = 0,      /* the verifier alone */
  VKSPEC_STRATEGY_SINGLE1 = 1, /* head 1's draft tree */
  VKSPEC_STRATEGY_SINGLE2 = 2, /* head 2's */
  VKSPEC_STRATEGY_ROUTE = 3,   /* the more confident head's tree */
  VKSPEC_STRATEGY_MERGE = 4,   /* both trees under one root */
  VKSPEC_STRATEGY_MERGE_TRIE = 5
} vkspec_strategy;

typedef struct vkspec_generation_params {
  const char* prompt_text;     /* tokenized with the model's tokenizer, or NULL ... */
  const uint32_t* prompt_ids;  /* ... then these ids */
  uint32_t prompt_count;
  uint32_t max_tokens;         /* tokens to generate at most */
  vkspec_strategy strategy;
  uint32_t depth, topk, budget;  /* draft shape (4, 4, 8); within the model's desc */
  float temperature;             /* 0: greedy (default) */
  uint32_t top_k;
  float top_p, min_p, repeat_penalty;
  uint32_t repeat_window;
  uint64_t seed;
  const uint32_t* stop_ids;      /* generation ends after emitting one of these (at most 16); the
                                  * model's end-of-generation ids are not implied: see
                                  * vkspec_model_end_of_generation */
  uint32_t stop_count;
  /* vkspec_step_submit(ctx, 0) chains as many steps as fit this many microseconds of GPU time,
   * from the step time measured so far on this context (first submission: one step). */
  uint32_t budget_us;
} vkspec_generation_params;

typedef struct vkspec_poll_result {
  const uint32_t* tokens;  /* new token ids since the last poll (valid until the next call) */
  uint32_t count;
  const char* text;        /* their text (UTF-8; a character split over tokens waits for its end), */
  uint32_t text_length;    /* text_length bytes: a token may be a 0x00 byte, so read the length, not up to a NUL */
  int in_flight;           /* a submission is still running on the GPU */
  int done;                /* stop token, max_tokens, or cancel: nothing more will come */
  uint32_t total;          /* tokens generated so far */
  double step_us;          /* measured GPU time per step (0 until known) */
} vkspec_poll_result;

typedef struct vkspec_context_desc {
  uint32_t reserved;  /* 0 */
} vkspec_context_desc;

VKSPEC_API vkspec_status vkspec_context_create(vkspec_model* model, const vkspec_context_desc* desc, vkspec_context** out);
VKSPEC_API void vkspec_context_destroy(vkspec_context* ctx);

VKSPEC_API void vkspec_generation_params_init(vkspec_generation_params* p);
/* Checks everything, then submits the prompt's prefill and returns without waiting. A
 * generation still running on this context is ended first (waiting for its work in flight); if
 * the checks refuse the new one, the running generation is left as it was.
 * The first start with a given strategy, draft shape and sampler kind builds that decoding step
 * (pipelines, buffers, a recorded command buffer: blocking, like a load); later starts reuse it
 * while those stay the same. The sampler kind: greedy or not (temperature 0 or above it; at
 * temperature 0, repeat_penalty 1 or not), top_k and repeat_window. A new seed, another
 * temperature above 0, top_p, min_p, repeat_penalty or stop ids build nothing. To build the step
 * outside the frame loop, start once with max_tokens = 0 (nothing is submitted): that builds the
 * step and the prefill's pipelines for that prompt's length (a prompt of another length may need
 * a few more, built at its start). */
VKSPEC_API vkspec_status vkspec_generation_start(vkspec_context* ctx, const vkspec_generation_params* p);
/* Submits `steps` decoding steps (0: as many as fit budget_us; at most 64) in one submission and
 * returns at once: VKSPEC_OK, VKSPEC_NOT_READY (the previous submission is still running: poll
 * first), or VKSPEC_DONE (the generation is over, whether or not a poll has collected its last
 * tokens yet: nothing is submitted). */
VKSPEC_API vkspec_status vkspec_step_submit(vkspec_context* ctx, uint32_t steps);
/* Never waits. New tokens once the GPU is done with the last submission. VKSPEC_ERROR_MODEL
 * when the model computed logits with NaN or inf (weights that overflow float arithmetic: a damaged
 * or crafted file): the generation ended there, the tokens before that position came in earlier
 * polls, and vkspec_last_error names the position. vkspec_generate returns it too. */
VKSPEC_API vkspec_status vkspec_poll(vkspec_context* ctx, vkspec_poll_result* out);
/* Blocks until the submission in flight, if any, is done. */
VKSPEC_API vkspec_status vkspec_wait(vkspec_context* ctx);
/* Ends the generation: no further tokens are reported; work in flight completes on its own. */
VKSPEC_API vkspec_status vkspec_cancel(vkspec_context* ctx);
/* A timeline semaphore every submission of this context signals, and the value at which the last
 * submission is done (0 before any): the application may wait on it in its own vkQueueSubmit or
 * with vkWaitSemaphores. Owned by the context; valid until vkspec_context_destroy. */
VKSPEC_API vkspec_status vkspec_timeline(vkspec_context* ctx, VkSemaphore* semaphore, uint64_t* value);
/* The fence of the submission in flight (signalled when it is done); VKSPEC_ERROR_STATE when
 * none is (vkspec_poll or vkspec_wait already saw it done). Valid until the next call on ctx;
 * the application may only wait on or query it. */
VKSPEC_API vkspec_status vkspec_fence(vkspec_context* ctx, VkFence* fence);

/* Blocking convenience: the whole generation, calling on_tokens/on_text as tokens arrive (either
 * may be NULL; on_text gets `length` bytes, NUL-terminated too, but a 0x00 byte may come before
 * the end). Returns VKSPEC_ERROR_CANCELLED when vkspec_cancel (from another thread) ended it. */
typedef void (*vkspec_tokens_fn)(const uint32_t* ids, uint32_t count, void* user);
typedef void (*vkspec_text_fn)(const char* text, uint32_t length, void* user);
VKSPEC_API vkspec_status vkspec_generate(vkspec_context* ctx, const vkspec_generation_params* p,
                                         vkspec_tokens_fn on_tokens, vkspec_text_fn on_text, void* user);

#ifdef __cplusplus
}
#endif

#endif
