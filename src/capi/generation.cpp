// The C API's generation contexts (include/vkspec/vkspec.h): an Engine per context, driven by its
// non-blocking begin / submit / poll / cancel, with its own KV caches over the model's shared weights.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <utility>

#include "capi/capi.hpp"

using namespace vkspec;
using namespace vkspec::capi;

struct vkspec_context : Handle {
  std::shared_ptr<Model> m;        // its weights outlive this context, whatever is destroyed first
  std::unique_ptr<Instance> inst;  // this context's KV caches and scratch
  std::unique_ptr<Engine> engine;  // records into inst: declared after it, destroyed first
  // Signalled by every submission of this context (to ++timeline_value), whichever engine made it.
  VkSemaphore timeline = VK_NULL_HANDLE;
  uint64_t timeline_value = 0;
  std::optional<StreamDecoder> decoder;
  bool started = false;
  bool cancelled = false;  // by vkspec_cancel: vkspec_generate reports it
  // Inside vkspec_generate, which owns the generation until it returns: a start, submit, poll or
  // wait from another thread (or a callback) would restart it or take its tokens, so they are refused.
  bool generating = false;
  // A start (vkspec_generation_start, or vkspec_generate's) is in progress: from its beginning
  // (in_start; it releases the lock while it waits for older work), and the part of it that runs
  // without the runtime's lock (start_unlocked: the engine's build, its checks and the prefill's
  // recording and submission). Meanwhile other threads' calls on this context are refused, but
  // vkspec_cancel, kept in cancel_requested and applied to whatever generation the context has
  // when the start returns.
  bool in_start = false;
  bool start_unlocked = false;
  bool cancel_requested = false;
  uint32_t budget_us = 0, total = 0;
  // Measured GPU time per step: submission to observed completion, over the steps it chained.
  double step_us = 0;
  uint32_t steps_in_flight = 0;
  std::chrono::steady_clock::time_point submitted;
  // What the last poll returned (valid until the next call).
  std::vector<uint32_t> tokens;
  std::string text;
};

namespace {

using clock_type = std::chrono::steady_clock;

// The strategy read as the int it is in C: in C++ a vkspec_strategy outside the enumerators (99, -1)
// may not even be loaded, so the value is copied out as an int first.
Strategy strategy_of(const vkspec_strategy& field) {
  static_assert(sizeof(vkspec_strategy) == sizeof(int), "vkspec_strategy is an int in C");
  int s = 0;
  std::memcpy(&s, &field, sizeof s);
  switch (s) {
    case VKSPEC_STRATEGY_AR: return Strategy::AR;
    case VKSPEC_STRATEGY_SINGLE1: return Strategy::Single1;
    case VKSPEC_STRATEGY_SINGLE2: return Strategy::Single2;
    case VKSPEC_STRATEGY_ROUTE: return Strategy::Route;
    case VKSPEC_STRATEGY_MERGE: return Strategy::Merge;
    case VKSPEC_STRATEGY_MERGE_TRIE: return Strategy::MergeTrie;
  }
  throw ArgumentError("vkspec_generation_params.strategy " + std::to_string(s) + " is not a strategy (VKSPEC_STRATEGY_AR .. VKSPEC_STRATEGY_MERGE_TRIE)");
}

// Starts a generation: the engine for these options (reused when they record the same step: a
// new seed, temperature, top-p, min-p, penalty or stop ids builds nothing), the prompt's ids, then
// Engine::begin (submits the prefill, does not wait). Everything is checked before the running
// generation is touched: a start that is refused leaves it as it was.
void wait_unlocked(vkspec_context* c, std::unique_lock<std::recursive_mutex>& lock);
void require_not_generating(const vkspec_context* c, const char* call);
void require_not_starting(const vkspec_context* c, const char* call);

// `in_generate`: called by vkspec_generate, which owns the context; else by vkspec_generation_start.
void start(vkspec_context* c, const vkspec_generation_params& p, std::unique_lock<std::recursive_mutex>& lock,
           bool in_generate) {
  // A vkspec_cancel made from another thread during this start ends whatever generation the
  // context has once the start returns: the new one, or the old one where the start failed.
  struct EndStart {
    vkspec_context* c;
    ~EndStart() {
      c->in_start = false;
      if (std::exchange(c->cancel_requested, false) && c->started) c->engine->cancel(), c->cancelled = true;
    }
  } end_start{c};
  c->in_start = true;
  Model& m = *c->m;
  EngineOptions o;
  o.names = &kCApiOptionNames;  // errors name the struct fields, not the command line's flags
  o.strategy = strategy_of(p.strategy);
  o.depth = p.depth, o.topk = p.topk, o.budget = p.budget;
  if (o.strategy != Strategy::AR && (o.depth > m.depth || o.topk > m.topk || o.budget > m.max_budget))
    throw ArgumentError("depth " + std::to_string(o.depth) + ", topk " + std::to_string(o.topk) + ", budget " +
                        std::to_string(o.budget) + " exceed what the model was loaded for (vkspec_model_desc depth " +
                        std::to_string(m.depth) + ", topk " + std::to_string(m.topk) + ", max_budget " +
                        std::to_string(m.max_budget) + ")");
  o.sampling.temperature = p.temperature, o.sampling.top_k = p.top_k, o.sampling.top_p = p.top_p;
  o.sampling.min_p = p.min_p, o.sampling.repeat_penalty = p.repeat_penalty, o.sampling.repeat_window = p.repeat_window;
  o.sampling.seed = p.seed;
  if (p.stop_count && !p.stop_ids) throw ArgumentError("stop_count > 0 but stop_ids is NULL");
  if (p.stop_count > kOutMaxStop)  // before reading that many ids from stop_ids
    throw ArgumentError("stop_count " + std::to_string(p.stop_count) + ": at most " + std::to_string(kOutMaxStop) + " stop ids");
  o.stop_tokens.assign(p.stop_ids, p.stop_ids + p.stop_count);
  std::vector<uint32_t> prompt;
  if (p.prompt_text) {
    if (!m.tokenizer) throw ArgumentError(no_tokenizer(m, "prompt_ids instead of prompt_text"));
    prompt = m.tokenizer->encode(p.prompt_text, m.tokenizer->add_bos(), false);
  } else {
    if (p.prompt_count && !p.prompt_ids) throw ArgumentError("prompt_count > 0 but prompt_ids is NULL");
    prompt.assign(p.prompt_ids, p.prompt_ids + p.prompt_count);
  }
  // The running generation's work in flight (it stays resumable), waited for without the lock:
  // calls on other contexts go ahead (on this one they are refused: in_start). Until the timeline
  // stands still; the engine's own wait then finds it done.
  if (c->engine) {
    for (uint64_t seen = c->timeline_value + 1; seen != c->timeline_value;) {
      seen = c->timeline_value;
      wait_unlocked(c, lock);
    }
    c->engine->wait();
  }
  // A vkspec_generate may have taken the context while the lock was released: it owns it now.
  if (!in_generate) require_not_generating(c, "vkspec_generation_start");
  // The rest without the runtime's lock: a new step is pipelines, buffers and a recorded command
  // buffer (62–156 ms warm on lavapipe, about a second cold) and the prefill may need pipelines
  // for its length, and calls on other contexts go ahead meanwhile. The Context, its pipeline
  // cache and the shared weights are safe from several threads; this context's own state is not,
  // so other threads' calls on it are refused until the start returns (start_unlocked). The lock
  // is held again on return or throw.
  struct Relock {
    vkspec_context* c;
    std::unique_lock<std::recursive_mutex>& lock;
    ~Relock() {
      lock.lock();
      c->start_unlocked = false;
      c->m->rt->built.notify_all();
    }
  };
  c->start_unlocked = true;
  Relock relock{c, lock};
  lock.unlock();
  std::unique_ptr<Engine> fresh;  // checks the options; on a throw the running engine is untouched
  if (!c->engine || !c->engine->records_same_step(o))
    fresh = std::make_unique<Engine>(*m.rt->ctx, *c->inst->model, c->inst->head1.get(), c->inst->head2.get(), o);
  (fresh ? *fresh : *c->engine).check_fits(prompt, p.max_tokens);
  if (!fresh) c->engine->retune(o);  // checks the values first: on a throw nothing changed
  // Checked: from here the running generation ends.
  c->started = false;
  if (fresh) {
    c->engine = std::move(fresh);
    c->engine->set_timeline(c->timeline, &c->timeline_value);
  }
  c->engine->begin(prompt, p.max_tokens);
  c->decoder.reset();
  if (m.tokenizer) c->decoder.emplace(*m.tokenizer, false, /*continuation=*/true);  // after the prompt
  c->started = true;
  c->cancelled = false;
  c->budget_us = p.budget_us;
  c->total = 0;
  c->steps_in_flight = 0;
  c->tokens.clear();
  c->text.clear();
}

uint32_t steps_for_budget(const vkspec_context* c) {
  if (!c->budget_us || c->step_us <= 0) return 1;
  return uint32_t(std::clamp(std::floor(c->budget_us / c->step_us), 1.0, 64.0));
}

// Engine::poll into the context's result buffers; updates the step time once a submission is seen done.
void poll(vkspec_context* c, vkspec_poll_result* out) {
  Engine::Progress pr = c->engine->poll();
  if (!pr.in_flight && c->steps_in_flight) {
    const double us = std::chrono::duration<double, std::micro>(clock_type::now() - c->submitted).count() / c->steps_in_flight;
    // The observed time includes however late the poll came: follow decreases at once, increases slowly.
    c->step_us = c->step_us <= 0 || us < c->step_us ? us : c->step_us + 0.125 * (us - c->step_us);
    c->steps_in_flight = 0;
  }
  c->tokens = std::move(pr.tokens);
  c->text.clear();
  if (c->decoder) {
    for (uint32_t id : c->tokens) c->text += c->decoder->push(id);
    // At the end, a character still waiting for its last bytes is given as it is, in the poll
    // that first says done (after vkspec_cancel too): nothing more comes for it.
    if (pr.done) c->text += c->decoder->flush();
  }
  c->total += uint32_t(c->tokens.size());
  if (out) {
    out->tokens = c->tokens.data();
    out->count = uint32_t(c->tokens.size());
    out->text = c->text.c_str();
    out->text_length = uint32_t(c->text.size());
    out->in_flight = pr.in_flight;
    out->done = pr.done;
    out->total = c->total;
    out->step_us = c->step_us;
  }
}

#define CTX_GUARD(c, fallback, ...)                                                                \
  if (!c) return set_thread_error("no context (NULL handle)"), VKSPEC_ERROR_INVALID_ARGUMENT;     \
  std::unique_lock<std::recursive_mutex> lock_(c->m->rt->mu);                                     \
  VKSPEC_CAPI_GUARD(c->err, fallback, __VA_ARGS__)

// Waits until the GPU is done with every submission this context has made so far, with the
// runtime's lock released meanwhile (`lock` holds it on entry and again on return): calls on
// other contexts, and vkspec_cancel on this one, go ahead while it waits. The context's own
// timeline is waited on, never a fence another call could reset. (Where the calling thread holds
// the lock more than once, inside a callback, it stays held: the wait then blocks the others, as
// any call inside a callback does.)
void wait_unlocked(vkspec_context* c, std::unique_lock<std::recursive_mutex>& lock) {
  const Context& ctx = *c->m->rt->ctx;
  VkSemaphoreWaitInfo wi{};
  wi.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO;
  wi.semaphoreCount = 1;
  const VkSemaphore sem = c->timeline;
  const uint64_t value = c->timeline_value;
  wi.pSemaphores = &sem;
  wi.pValues = &value;
  lock.unlock();
  const VkResult r = ctx.vk().vkWaitSemaphores(ctx.device(), &wi, UINT64_MAX);
  lock.lock();
  // Another thread's start may have gone on without the lock meanwhile (the lock was free, so
  // this thread held it once, and waiting here releases it): its end, before any use.
  c->m->rt->built.wait(lock, [c] { return !c->start_unlocked; });
  VKSPEC_VK(r);
}

void require_started(const vkspec_context* c) {
  if (!c->started) throw StateError("no generation on this context: call vkspec_generation_start first");
}

void require_not_starting(const vkspec_context* c, const char* call) {
  if (c->in_start)
    throw StateError(std::string(call) + ": a start (vkspec_generation_start or vkspec_generate) is in progress on this "
                     "context on another thread; call again once it returns");
}

void require_not_generating(const vkspec_context* c, const char* call) {
  if (c->generating)
    throw StateError(std::string(call) + ": a vkspec_generate is running on this context; only vkspec_cancel, "
                     "vkspec_timeline and vkspec_fence may be called on it until it returns");
}

}  // namespace

extern "C" {

VKSPEC_API vkspec_status vkspec_context_create(vkspec_model* model, const vkspec_context_desc* desc, vkspec_context** out) {
  if (!model) return set_thread_error("vkspec_context_create: no model"), VKSPEC_ERROR_INVALID_ARGUMENT;
  std::lock_guard<std::recursive_mutex> lock(model->m->rt->mu);
  VKSPEC_CAPI_GUARD(model->err, VKSPEC_ERROR_INVALID_ARGUMENT, {
    if (!out) throw Error("vkspec_context_create: out is required");
    if (desc && desc->reserved) throw Error("vkspec_context_desc.reserved must be 0");
    *out = nullptr;
    Model& m = *model->m;
    auto inst = std::make_unique<Instance>(m);  // its own KV caches and scratch over the shared weights
    const VolkDeviceTable& vk = m.rt->ctx->vk();
    VkSemaphoreTypeCreateInfo ti{};
    ti.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO;
    ti.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
    VkSemaphoreCreateInfo si{};
    si.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO;
    si.pNext = &ti;
    VkSemaphore sem = VK_NULL_HANDLE;
    VKSPEC_VK(vk.vkCreateSemaphore(m.rt->ctx->device(), &si, nullptr, &sem));
    auto* c = new vkspec_context;
    c->m = model->m;
    c->inst = std::move(inst);
    c->timeline = sem;
    *out = c;
    return VKSPEC_OK;
  })
}

VKSPEC_API void vkspec_context_destroy(vkspec_context* c) {
  if (!c) return;
  std::shared_ptr<Model> m = c->m;  // outlives the lock below, so the runtime cannot go inside it
  {
    std::unique_lock<std::recursive_mutex> lock(m->rt->mu);
    try {
      // Its own work in flight, waited for without the lock; then the engine goes. The timeline
      // value covers every submission, so the semaphore's signal is waited for too. (Destroying
      // a context another thread is in a call on is a misuse, vkspec.h; a start going on without
      // the lock is only waited for by wait_unlocked, which does not make that safe.)
      wait_unlocked(c, lock);
      c->engine.reset();
      const Context& ctx = *m->rt->ctx;
      ctx.vk().vkDestroySemaphore(ctx.device(), c->timeline, nullptr);
    } catch (...) {
    }
    delete c;
  }
}

VKSPEC_API void vkspec_generation_params_init(vkspec_generation_params* p) {
  if (!p) return;
  *p = vkspec_generation_params{};
  p->max_tokens = 64;
  p->strategy = VKSPEC_STRATEGY_AR;
  p->depth = 4, p->topk = 4, p->budget = 8;
  p->top_p = 1, p->repeat_penalty = 1, p->repeat_window = 64;
}

VKSPEC_API vkspec_status vkspec_generation_start(vkspec_context* c, const vkspec_generation_params* p) {
  CTX_GUARD(c, VKSPEC_ERROR_INVALID_ARGUMENT, {
    if (!p) throw ArgumentError("vkspec_generation_start: params are required");
    require_not_starting(c, "vkspec_generation_start");
    require_not_generating(c, "vkspec_generation_start");
    start(c, *p, lock_, /*in_generate=*/false);
    return VKSPEC_OK;
  })
}

VKSPEC_API vkspec_status vkspec_step_submit(vkspec_context* c, uint32_t steps) {
  CTX_GUARD(c, VKSPEC_ERROR_INVALID_ARGUMENT, {
    require_not_starting(c, "vkspec_step_submit");
    require_not_generating(c, "vkspec_step_submit");
    require_started(c);
    if (steps > 64) throw Error("vkspec_step_submit: at most 64 steps per submission, got " + std::to_string(steps));
    if (c->engine->done()) return VKSPEC_DONE;
    const uint32_t n = steps ? steps : steps_for_budget(c);
    if (!c->engine->submit(n)) return c->engine->done() ? VKSPEC_DONE : VKSPEC_NOT_READY;
    c->submitted = clock_type::now();
    c->steps_in_flight = n;
    return VKSPEC_OK;
  })
}

VKSPEC_API vkspec_status vkspec_poll(vkspec_context* c, vkspec_poll_result* out) {
  CTX_GUARD(c, VKSPEC_ERROR_INVALID_ARGUMENT, {
    if (!out) throw Error("vkspec_poll: out is required");
    require_not_starting(c, "vkspec_poll");
    require_not_generating(c, "vkspec_poll");
    require_started(c);
    poll(c, out);
    return VKSPEC_OK;
  })
}

VKSPEC_API vkspec_status vkspec_wait(vkspec_context* c) {
  CTX_GUARD(c, VKSPEC_ERROR_INVALID_ARGUMENT, {
    require_not_starting(c, "vkspec_wait");
    require_not_generating(c, "vkspec_wait");
    require_started(c);
    wait_unlocked(c, lock_);
    if (c->started) c->engine->wait();  // done on the GPU: only the engine's own bookkeeping
    return VKSPEC_OK;
  })
}

VKSPEC_API vkspec_status vkspec_cancel(vkspec_context* c) {
  CTX_GUARD(c, VKSPEC_ERROR_INVALID_ARGUMENT, {
    if (c->in_start) {  // a start on another thread: it applies the cancel when it returns
      c->cancel_requested = true;
      return VKSPEC_OK;
    }
    require_started(c);
    c->engine->cancel();
    c->cancelled = true;
    return VKSPEC_OK;
  })
}

VKSPEC_API vkspec_status vkspec_timeline(vkspec_context* c, VkSemaphore* semaphore, uint64_t* value) {
  CTX_GUARD(c, VKSPEC_ERROR_INVALID_ARGUMENT, {
    require_not_starting(c, "vkspec_timeline");  // the start's prefill moves the value
    if (!semaphore || !value) throw Error("vkspec_timeline: semaphore and value are required");
    *semaphore = c->timeline;
    *value = c->timeline_value;
    return VKSPEC_OK;
  })
}

VKSPEC_API vkspec_status vkspec_fence(vkspec_context* c, VkFence* fence) {
  CTX_GUARD(c, VKSPEC_ERROR_INVALID_ARGUMENT, {
    require_not_starting(c, "vkspec_fence");
    require_started(c);
    if (!fence) throw Error("vkspec_fence: fence is required");
    *fence = c->engine->fence();
    if (!*fence) throw StateError("vkspec_fence: no submission in flight on this context");
    return VKSPEC_OK;
  })
}

VKSPEC_API vkspec_status vkspec_generate(vkspec_context* c, const vkspec_generation_params* p, vkspec_tokens_fn on_tokens,
                                         vkspec_text_fn on_text, void* user) {
  CTX_GUARD(c, VKSPEC_ERROR_INVALID_ARGUMENT, {
    if (!p) throw ArgumentError("vkspec_generate: params are required");
    require_not_starting(c, "vkspec_generate");
    require_not_generating(c, "vkspec_generate");
    c->generating = true;  // from before the start, whose wait for older work releases the lock
    struct Release {
      vkspec_context* c;
      ~Release() { c->generating = false; }
    } release{c};
    start(c, *p, lock_, /*in_generate=*/true);
    vkspec_poll_result r{};
    // Steps past the end are no-ops on the GPU, so a few per submission cost nothing extra.
    const uint32_t per_submit = p->budget_us ? 0 : 4;
    for (;;) {
      // Without the lock while the GPU works: vkspec_cancel from another thread ends the loop.
      wait_unlocked(c, lock_);
      c->engine->wait();
      poll(c, &r);
      if (r.count && on_tokens) on_tokens(r.tokens, r.count, user);
      if (r.text_length && on_text) on_text(r.text, r.text_length, user);
      if (r.done) break;
      const uint32_t n = per_submit ? per_submit : steps_for_budget(c);
      if (c->engine->submit(n)) c->submitted = clock_type::now(), c->steps_in_flight = n;
    }
    if (c->cancelled) throw Cancelled("vkspec_generate: ended by vkspec_cancel after " + std::to_string(c->total) + " tokens");
    return VKSPEC_OK;
  })
}

}  // extern "C"
