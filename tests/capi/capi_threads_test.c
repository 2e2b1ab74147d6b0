/* A start does not hold up the other contexts while it builds a step or records and submits its
 * prefill, nor does a model load; on vkspec's own device with validation on (any message fails
 * the test, its thread-safety checks included):
 *
 *   capi_threads_test SOURCE_DIR
 *
 * The runtime gets a queue lock, so the test runs inside a start: the start's first submission
 * (on a CPU device the build's upload of the paired heads, else the prefill) takes the lock, and
 * the lock callback — on the starting thread, mid-start — has another thread call into the
 * runtime and waits for its answers. Checked there: a poll on another context returns (before,
 * the whole start held the runtime's lock and the poll waited for it: here that is a deadlock, so
 * the wait has a deadline and missing it fails); a poll and vkspec_timeline on the starting
 * context are refused with VKSPEC_ERROR_STATE naming the start; vkspec_cancel is accepted and
 * ends the generation the start begins. The same for a start that builds nothing (a step already
 * built, its prefill only), and inside a model load (its progress callback) a poll on another
 * context returns too. Every generation gives plain greedy decoding's tokens, both contexts
 * interleaved with the starts. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capi_check.h"
#include "capi_poll.h"
#include "vkspec/vkspec.h"

enum { kMaxTokens = 40 };

/* What the prober thread does inside a start or a load, and what it saw. */
typedef enum { PROBE_POLLS, PROBE_CANCEL, PROBE_OTHER } ProbeKind;

typedef struct Probe {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int armed;  /* the next queue lock taken (or load progress) runs the probe */
  int fired, answered;
  int in_time; /* answered before the callback returned, the call still going on */
  ProbeKind kind;
  vkspec_context *building, *other;
  vkspec_status other_s, building_s, timeline_s, cancel_s;
  char building_err[512];
  Tokens other_got; /* what the poll on `other` returned: part of its generation */
} Probe;

static Probe g_probe;
static pthread_mutex_t g_queue = PTHREAD_MUTEX_INITIALIZER;

static void* prober(void* arg) {
  Probe* p = (Probe*)arg;
  if (p->kind == PROBE_POLLS) {
    vkspec_poll_result r;
    p->other_s = vkspec_poll(p->other, &r);
    if (p->other_s == VKSPEC_OK) collect(&p->other_got, r.tokens, r.count);
    p->building_s = vkspec_poll(p->building, &r);
    snprintf(p->building_err, sizeof p->building_err, "%s", vkspec_last_error(p->building));
    VkSemaphore sem = VK_NULL_HANDLE;
    uint64_t value = 0;
    p->timeline_s = vkspec_timeline(p->building, &sem, &value);
  } else if (p->kind == PROBE_CANCEL) {
    p->cancel_s = vkspec_cancel(p->building);
  } else {
    vkspec_poll_result r;
    p->other_s = vkspec_poll(p->other, &r);
  }
  pthread_mutex_lock(&p->mu);
  p->answered = 1;
  pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

static pthread_t g_prober;

/* If armed: starts the prober and waits (30 s at most) for its answers. */
static void run_probe(Probe* p) {
  pthread_mutex_lock(&p->mu);
  if (p->armed) {
    p->armed = 0;
    p->fired = 1;
    if (pthread_create(&g_prober, NULL, prober, p) != 0) {
      fprintf(stderr, "pthread_create failed\n");
      exit(1);
    }
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 30;
    while (!p->answered)
      if (pthread_cond_timedwait(&p->cv, &p->mu, &deadline) == ETIMEDOUT) break;
    p->in_time = p->answered;
  }
  pthread_mutex_unlock(&p->mu);
}

/* The queue lock: the first one taken after arming runs the probe. */
static void queue_lock(void* user) {
  run_probe((Probe*)user);
  pthread_mutex_lock(&g_queue);
}

/* A load's progress: the first report after arming runs the probe. */
static int on_progress(float fraction, const char* stage, void* user) {
  (void)fraction, (void)stage;
  run_probe((Probe*)user);
  return 0;
}

static void queue_unlock(void* user) {
  (void)user;
  pthread_mutex_unlock(&g_queue);
}

static void arm(ProbeKind kind, vkspec_context* building) {
  pthread_mutex_lock(&g_probe.mu);
  g_probe.armed = 1, g_probe.fired = 0, g_probe.answered = 0, g_probe.in_time = 0, g_probe.kind = kind;
  g_probe.building = building;
  pthread_mutex_unlock(&g_probe.mu);
}

/* After the call the probe was armed for: whether the probe ran inside it and was answered
 * while the call went on (the prober joined either way). */
static int probed(void) {
  pthread_mutex_lock(&g_probe.mu);
  const int fired = g_probe.fired, in_time = g_probe.in_time;
  g_probe.armed = 0;
  pthread_mutex_unlock(&g_probe.mu);
  if (fired) pthread_join(g_prober, NULL); /* its answers are read after this */
  CHECK(fired);
  if (fired && !in_time) fprintf(stderr, "the other thread's calls did not return while the call went on\n");
  CHECK(!fired || in_time);
  return fired && in_time;
}

/* Starts `strategy` on `c` with the probe armed: probed(). */
static int start_probed(vkspec_context* c, vkspec_generation_params p, vkspec_strategy strategy, ProbeKind kind) {
  arm(kind, c);
  p.strategy = strategy;
  REQUIRE_OK(vkspec_generation_start(c, &p), c);
  return probed();
}

static int same(const Tokens* a, const Tokens* b) { return a->n == b->n && memcmp(a->ids, b->ids, a->n * 4) == 0; }

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: capi_threads_test SOURCE_DIR\n");
    return 2;
  }
  DemoPaths demo;
  demo_paths(argv[1], &demo);
  const char *verifier = demo.verifier, *head1 = demo.head1, *head2 = demo.head2;
  pthread_mutex_init(&g_probe.mu, NULL);
  pthread_cond_init(&g_probe.cv, NULL);

  vkspec_runtime_desc rd;
  vkspec_runtime_desc_init(&rd);
  rd.validation = 1;
  rd.pipeline_cache_dir = "-";
  rd.queue_lock = queue_lock, rd.queue_unlock = queue_unlock, rd.queue_lock_user = &g_probe;
  vkspec_runtime* rt = NULL;
  REQUIRE_OK(vkspec_runtime_create(&rd, &rt), NULL);
  vkspec_model_desc md;
  vkspec_model_desc_init(&md);
  md.path = verifier, md.head1 = head1, md.head2 = head2;
  vkspec_model* model = NULL;
  REQUIRE_OK(vkspec_model_load(rt, &md, &model), rt);
  vkspec_context *a = NULL, *b = NULL;
  REQUIRE_OK(vkspec_context_create(model, NULL, &a), model);
  REQUIRE_OK(vkspec_context_create(model, NULL, &b), model);
  g_probe.other = b;

  vkspec_generation_params gp;
  vkspec_generation_params_init(&gp);
  gp.prompt_text = "Once upon a time";
  gp.max_tokens = kMaxTokens;
  gp.strategy = VKSPEC_STRATEGY_AR;

  /* Plain greedy decoding on a: the reference. */
  Tokens ref = {{0}, 0};
  REQUIRE_OK(vkspec_generation_start(a, &gp), a);
  poll_to_end(a, &ref);
  CHECK(ref.n == kMaxTokens);

  /* b runs a generation across a's builds: started, one poll, then its end after them. */
  REQUIRE_OK(vkspec_generation_start(b, &gp), b);

  /* a switches to merge: a new step, built while another thread polls b, polls a and asks for
   * a's timeline. */
  if (start_probed(a, gp, VKSPEC_STRATEGY_MERGE, PROBE_POLLS)) {
    CHECK(g_probe.other_s == VKSPEC_OK);
    CHECK(g_probe.building_s == VKSPEC_ERROR_STATE);
    CHECK(strstr(g_probe.building_err, "a start (vkspec_generation_start or vkspec_generate) is in progress") != NULL);
    CHECK(g_probe.timeline_s == VKSPEC_ERROR_STATE);
  }
  Tokens merged = {{0}, 0};
  poll_to_end(a, &merged);
  CHECK(same(&merged, &ref));

  /* a switches to route, cancelled from another thread while the step is built: the start
   * succeeds, and the generation it began is ended before its first step. */
  if (start_probed(a, gp, VKSPEC_STRATEGY_ROUTE, PROBE_CANCEL)) {
    CHECK(g_probe.cancel_s == VKSPEC_OK);
    REQUIRE_OK(vkspec_wait(a), a);
    vkspec_poll_result r;
    REQUIRE_OK(vkspec_poll(a, &r), a);
    CHECK(r.done && r.total < kMaxTokens);
    CHECK(vkspec_step_submit(a, 1) == VKSPEC_DONE);
  }
  /* The route step is kept: the same options again build nothing (the prefill is recorded and
   * submitted without the lock all the same) and decode as greedy does. */
  if (start_probed(a, gp, VKSPEC_STRATEGY_ROUTE, PROBE_POLLS)) {
    CHECK(g_probe.other_s == VKSPEC_OK);
    CHECK(g_probe.building_s == VKSPEC_ERROR_STATE);
  }
  Tokens routed = {{0}, 0};
  poll_to_end(a, &routed);
  CHECK(same(&routed, &ref));

  Tokens from_b = g_probe.other_got; /* the prober's poll took b's first tokens */
  poll_to_end(b, &from_b);
  CHECK(same(&from_b, &ref));

  /* A model load on this thread while another thread polls b: the poll returns inside the
   * load (from its first progress report). */
  {
    vkspec_model_desc md2 = md;
    md2.head1 = md2.head2 = NULL;
    md2.progress = on_progress, md2.progress_user = &g_probe;
    vkspec_model* second = NULL;
    arm(PROBE_OTHER, NULL);
    REQUIRE_OK(vkspec_model_load(rt, &md2, &second), rt);
    if (probed()) CHECK(g_probe.other_s == VKSPEC_OK);
    vkspec_model_destroy(second);
  }

  vkspec_context_destroy(a);
  vkspec_context_destroy(b);
  vkspec_model_destroy(model);
  const uint32_t messages = vkspec_runtime_validation_messages(rt);
  if (messages) fprintf(stderr, "validation: %s\n", vkspec_last_error(rt));
  CHECK(messages == 0);
  vkspec_runtime_destroy(rt);
  pthread_mutex_destroy(&g_probe.mu);
  pthread_cond_destroy(&g_probe.cv);
  if (g_failures) fprintf(stderr, "%d check(s) failed\n", g_failures);
  else fprintf(stderr, "capi_threads: all checks passed\n");
  return g_failures ? 1 : 0;
}
