/* The C API called the way a careless or hostile application calls it, on vkspec's own device
 * with validation on (any message fails the test):
 *
 *   capi_hostile_test SOURCE_DIR
 *
 * Checks: a FIFO named as the model is refused at once, not waited on; argument errors are
 * VKSPEC_ERROR_INVALID_ARGUMENT and a missing file VKSPEC_ERROR_MODEL, whatever its path says;
 * a successful load clears the runtime's last error; a strategy outside the enum is refused
 * (read as an int: under UBSan, loading it as the enum type would abort); a start that is
 * refused leaves the running generation as it was; vkspec_step_submit says DONE once the device
 * has ended the generation, before any poll; vkspec_cancel from another thread ends a
 * vkspec_generate, which releases the runtime's lock while the GPU works; a generated 0x00 byte
 * keeps the text after it (text_length); a cancel while a character waits for its last bytes
 * still gives every byte (the done poll flushes); vkspec_tokenize racing context creation. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "capi_check.h"
#include "capi_poll.h"
#include "vkspec/vkspec.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Everything a generation's polls gave: its tokens and the bytes of its text. */
typedef struct Polled {
  Tokens t;
  char text[4096];
  uint32_t text_n;
} Polled;

/* One vkspec_poll, its tokens and text appended to `p`. */
static void poll_into(vkspec_context* c, Polled* p, vkspec_poll_result* r) {
  REQUIRE_OK(vkspec_poll(c, r), c);
  collect(&p->t, r->tokens, r->count);
  CHECK(r->text[r->text_length] == 0);
  if (p->text_n + r->text_length < sizeof p->text) memcpy(p->text + p->text_n, r->text, r->text_length), p->text_n += r->text_length;
}

/* ---- vkspec_cancel from another thread while vkspec_generate runs ---- */
typedef struct CancelArgs {
  vkspec_context* ctx;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int first_tokens;   /* set by the generating thread's token callback */
  vkspec_status status;
  double returned_after;  /* seconds from the first tokens to vkspec_cancel's return */
} CancelArgs;

static void on_tokens_signal(const uint32_t* ids, uint32_t n, void* user) {
  (void)ids, (void)n;
  CancelArgs* a = (CancelArgs*)user;
  pthread_mutex_lock(&a->mu);
  a->first_tokens = 1;
  pthread_cond_signal(&a->cv);
  pthread_mutex_unlock(&a->mu);
}

static void* canceller(void* p) {
  CancelArgs* a = (CancelArgs*)p;
  pthread_mutex_lock(&a->mu);
  while (!a->first_tokens) pthread_cond_wait(&a->cv, &a->mu);
  pthread_mutex_unlock(&a->mu);
  const double t0 = now_s();
  a->status = vkspec_cancel(a->ctx);
  a->returned_after = now_s() - t0;
  return NULL;
}

/* ---- calls into the context of a running vkspec_generate (its token callback makes them) ---- */
typedef struct Reenter {
  vkspec_context* ctx;
  const vkspec_generation_params* params;
  Tokens t;
  int calls;
  vkspec_status poll_s, start_s, submit_s, wait_s, generate_s;
} Reenter;

static void on_tokens_reenter(const uint32_t* ids, uint32_t n, void* user) {
  Reenter* a = (Reenter*)user;
  collect(&a->t, ids, n);
  if (a->calls++ != 0) return;
  vkspec_poll_result r;
  a->poll_s = vkspec_poll(a->ctx, &r);
  a->start_s = vkspec_generation_start(a->ctx, a->params);
  a->submit_s = vkspec_step_submit(a->ctx, 1);
  a->wait_s = vkspec_wait(a->ctx);
  a->generate_s = vkspec_generate(a->ctx, a->params, NULL, NULL, NULL);
}

/* ---- one handle's error text, per thread ---- */
typedef struct ErrorArgs {
  vkspec_model* model;
  vkspec_status status;
  char text[256];
} ErrorArgs;

static void* tokenize_ok(void* p) {
  ErrorArgs* a = (ErrorArgs*)p;
  uint32_t ids[64], n = 0;
  a->status = vkspec_tokenize(a->model, "Hello", ids, 64, &n);
  snprintf(a->text, sizeof a->text, "%s", vkspec_last_error(a->model));
  return NULL;
}

/* ---- vkspec_tokenize on one thread while another creates contexts ---- */
typedef struct TokenizeArgs {
  vkspec_model* model;
  int failures;
} TokenizeArgs;

static void* tokenize_loop(void* p) {
  TokenizeArgs* a = (TokenizeArgs*)p;
  for (int i = 0; i < 200; ++i) {
    uint32_t ids[64], n = 0;
    /* Half of them fail (cap 1), so the model's error text is written as often as read. */
    vkspec_status s = vkspec_tokenize(a->model, "Hello there, kernel", ids, (i & 1) ? 64 : 1, &n);
    if (s != ((i & 1) ? VKSPEC_OK : VKSPEC_ERROR_INVALID_ARGUMENT) || n < 10) ++a->failures;
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: capi_hostile_test SOURCE_DIR\n");
    return 2;
  }
  DemoPaths demo;
  demo_paths(argv[1], &demo);
  const char *verifier = demo.verifier, *head1 = demo.head1, *head2 = demo.head2;

  vkspec_runtime_desc rd;
  vkspec_runtime_desc_init(&rd);
  rd.validation = 1;
  rd.pipeline_cache_dir = "-";
  vkspec_runtime* rt = (vkspec_runtime*)&rd; /* not NULL: a refused create must set it to NULL */
  CHECK(vkspec_runtime_create(NULL, &rt) == VKSPEC_ERROR_INVALID_ARGUMENT && rt == NULL);
  REQUIRE_OK(vkspec_runtime_create(&rd, &rt), NULL);

  /* A FIFO where the pipeline cache file goes: neither read (the open would wait for a writer,
   * inside vkspec_runtime_create) nor replaced by a regular file at exit. */
  {
    char dir[] = "/tmp/vkspec-capi-cache-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    vkspec_runtime_desc cd = rd;
    cd.pipeline_cache_dir = dir;
    vkspec_runtime* rc = NULL;
    REQUIRE_OK(vkspec_runtime_create(&cd, &rc), NULL);
    vkspec_runtime_destroy(rc); /* writes the (empty) cache file: its name is the device's */
    char cmd[256], name[512] = "";
    snprintf(cmd, sizeof cmd, "ls %s/pipelines-*.bin 2>/dev/null", dir);
    FILE* ls = popen(cmd, "r");
    CHECK(ls != NULL && fgets(name, sizeof name, ls) != NULL);
    if (ls) pclose(ls);
    name[strcspn(name, "\n")] = 0;
    CHECK(name[0] != 0 && unlink(name) == 0 && mkfifo(name, 0600) == 0);
    const double t0 = now_s();
    rc = NULL;
    REQUIRE_OK(vkspec_runtime_create(&cd, &rc), NULL);
    vkspec_runtime_destroy(rc);
    CHECK(now_s() - t0 < 10);
    struct stat st;
    CHECK(stat(name, &st) == 0 && S_ISFIFO(st.st_mode));
    unlink(name);
    rmdir(dir);
  }

  /* A FIFO as the model: refused at once (opening it for reading would wait for a writer). */
  {
    char fifo[] = "/tmp/vkspec-capi-fifo-XXXXXX";
    CHECK(mkdtemp(fifo) != NULL);
    char path[64];
    snprintf(path, sizeof path, "%s/model.gguf", fifo);
    CHECK(mkfifo(path, 0600) == 0);
    vkspec_model_desc md;
    vkspec_model_desc_init(&md);
    md.path = path;
    vkspec_model* m = NULL;
    vkspec_memory mem;
    const double t0 = now_s();
    CHECK(vkspec_model_load(rt, &md, &m) == VKSPEC_ERROR_MODEL && m == NULL);
    CHECK(strstr(vkspec_last_error(rt), "is not a regular file") != NULL);
    CHECK(vkspec_model_memory(rt, &md, &mem) == VKSPEC_ERROR_MODEL);
    CHECK(now_s() - t0 < 10);
    unlink(path);
    rmdir(fifo);
  }

  /* Status codes: arguments are INVALID_ARGUMENT whatever the files hold; a missing file is MODEL
   * even when its path reads like another error's text. */
  {
    vkspec_model_desc md;
    vkspec_model* m = NULL;
    CHECK(vkspec_model_load(rt, NULL, &m) == VKSPEC_ERROR_INVALID_ARGUMENT);
    vkspec_model_desc_init(&md);
    md.path = verifier;
    CHECK(vkspec_model_load(rt, &md, NULL) == VKSPEC_ERROR_INVALID_ARGUMENT);
    md.head2 = head2;
    CHECK(vkspec_model_load(rt, &md, &m) == VKSPEC_ERROR_INVALID_ARGUMENT && m == NULL);
    md.head1 = ""; /* "" is no head, as NULL is: head 2 alone is not loaded as head 1 */
    CHECK(vkspec_model_load(rt, &md, &m) == VKSPEC_ERROR_INVALID_ARGUMENT && m == NULL);
    CHECK(strstr(vkspec_last_error(rt), "head2 without head1") != NULL);
    md.head1 = head1;
    md.max_budget = 0;
    CHECK(vkspec_model_load(rt, &md, &m) == VKSPEC_ERROR_INVALID_ARGUMENT);
    md.max_budget = 16;
    md.topk = 1000;
    CHECK(vkspec_model_load(rt, &md, &m) == VKSPEC_ERROR_INVALID_ARGUMENT);
    vkspec_model_desc_init(&md);
    md.path = "/nonexistent/stopped by the progress callback.gguf";
    CHECK(vkspec_model_load(rt, &md, &m) == VKSPEC_ERROR_MODEL);
    CHECK(strstr(vkspec_last_error(rt), "No such file") != NULL);
    /* A verifier GGUF as the head: named as the head given (it named <its folder>/config.json). */
    vkspec_model_desc_init(&md);
    md.path = verifier, md.head1 = verifier;
    vkspec_memory mem;
    CHECK(vkspec_model_memory(rt, &md, &mem) == VKSPEC_ERROR_MODEL);
    CHECK(strstr(vkspec_last_error(rt), "draft head ") != NULL && strstr(vkspec_last_error(rt), "verifier.gguf: no config.json") != NULL);
    CHECK(vkspec_model_load(rt, &md, &m) == VKSPEC_ERROR_MODEL && m == NULL);
    CHECK(strstr(vkspec_last_error(rt), "verifier.gguf: no config.json") != NULL);
  }

  /* A successful load after a failed one leaves no error text behind. */
  vkspec_model_desc md;
  vkspec_model_desc_init(&md);
  md.path = verifier, md.head1 = head1, md.head2 = head2;
  vkspec_model* model = NULL;
  REQUIRE_OK(vkspec_model_load(rt, &md, &model), rt);
  CHECK(strcmp(vkspec_last_error(rt), "") == 0);

  vkspec_context* c = NULL;
  REQUIRE_OK(vkspec_context_create(model, NULL, &c), model);
  vkspec_generation_params gp;
  vkspec_generation_params_init(&gp);
  gp.prompt_text = "The kernel provides";

  /* A strategy outside the enum, and too many stop ids, are refused by name. */
  {
    const int bad[] = {99, -1, 6};
    for (int i = 0; i < 3; ++i) {
      vkspec_generation_params p = gp;
      memcpy(&p.strategy, &bad[i], sizeof(int));
      CHECK(vkspec_generation_start(c, &p) == VKSPEC_ERROR_INVALID_ARGUMENT);
      CHECK(strstr(vkspec_last_error(c), "is not a strategy") != NULL);
    }
    vkspec_generation_params p = gp;
    uint32_t stop[1] = {1};
    p.stop_ids = stop, p.stop_count = 0xffffffffu; /* read before the check, this would run off the array */
    CHECK(vkspec_generation_start(c, &p) == VKSPEC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(vkspec_last_error(c), "at most 16 stop ids") != NULL);
  }

  /* The reference: merge's greedy tokens, polled to the end. */
  gp.strategy = VKSPEC_STRATEGY_MERGE;
  gp.max_tokens = 40;
  Tokens ref = {{0}, 0};
  REQUIRE_OK(vkspec_generation_start(c, &gp), c);
  poll_to_end(c, &ref);
  CHECK(ref.n == 40);

  /* vkspec_generate owns its context until it returns: a poll, start, submit, wait or generate
   * made meanwhile (here from its callback; another thread's are refused the same way) is refused
   * with VKSPEC_ERROR_STATE. A poll took the generation's tokens and a start restarted it, and
   * vkspec_generate still returned OK. */
  {
    Reenter a;
    memset(&a, 0, sizeof a);
    a.ctx = c, a.params = &gp;
    REQUIRE_OK(vkspec_generate(c, &gp, on_tokens_reenter, NULL, &a), c);
    CHECK(a.t.n == ref.n && memcmp(a.t.ids, ref.ids, ref.n * 4) == 0);
    CHECK(a.poll_s == VKSPEC_ERROR_STATE && a.start_s == VKSPEC_ERROR_STATE && a.submit_s == VKSPEC_ERROR_STATE);
    CHECK(a.wait_s == VKSPEC_ERROR_STATE && a.generate_s == VKSPEC_ERROR_STATE);
    CHECK(strstr(vkspec_last_error(c), "a vkspec_generate is running on this context") != NULL);
    REQUIRE_OK(vkspec_generation_start(c, &gp), c); /* and after it returned, the context is free */
    Tokens t = {{0}, 0};
    poll_to_end(c, &t);
    CHECK(t.n == ref.n && memcmp(t.ids, ref.ids, ref.n * 4) == 0);
  }

  /* A start that is refused leaves the running generation as it was: it goes on to the same tokens. */
  {
    Tokens t = {{0}, 0};
    REQUIRE_OK(vkspec_generation_start(c, &gp), c);
    vkspec_poll_result r;
    REQUIRE_OK(vkspec_wait(c), c);
    REQUIRE_OK(vkspec_poll(c, &r), c);
    collect(&t, r.tokens, r.count);
    CHECK(vkspec_step_submit(c, 1) == VKSPEC_OK);
    vkspec_generation_params bad = gp;
    bad.temperature = -1; /* refused by the engine's own checks */
    CHECK(vkspec_generation_start(c, &bad) == VKSPEC_ERROR_INVALID_ARGUMENT);
    /* Named as the struct field the application set, not as the command line's --temp. */
    CHECK(strstr(vkspec_last_error(c), "temperature -1 is out of range") != NULL);
    CHECK(strstr(vkspec_last_error(c), "--") == NULL);
    bad = gp;
    bad.prompt_text = NULL, bad.prompt_count = 0; /* an empty prompt, refused after the engine */
    CHECK(vkspec_generation_start(c, &bad) == VKSPEC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(vkspec_last_error(c), "prompt is empty") != NULL);
    bad = gp;
    bad.strategy = VKSPEC_STRATEGY_AR, bad.max_tokens = 100000; /* another engine, then too long */
    CHECK(vkspec_generation_start(c, &bad) == VKSPEC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(vkspec_last_error(c), "does not fit the context") != NULL);
    CHECK(strstr(vkspec_last_error(c), "raise vkspec_model_desc.context_tokens or lower max_tokens") != NULL);
    poll_to_end(c, &t);
    CHECK(t.n == ref.n && memcmp(t.ids, ref.ids, ref.n * 4) == 0);
  }

  /* DONE from vkspec_step_submit as soon as the device has ended the generation, before a poll
   * collected its tokens; nothing more is submitted. */
  {
    vkspec_generation_params p = gp;
    p.strategy = VKSPEC_STRATEGY_AR, p.max_tokens = 3;
    REQUIRE_OK(vkspec_generation_start(c, &p), c);
    REQUIRE_OK(vkspec_wait(c), c);
    CHECK(vkspec_step_submit(c, 4) == VKSPEC_OK); /* 1 + 4 tokens' worth: past the limit */
    REQUIRE_OK(vkspec_wait(c), c);
    VkSemaphore sem;
    uint64_t before = 0, after = 0;
    REQUIRE_OK(vkspec_timeline(c, &sem, &before), c);
    CHECK(vkspec_step_submit(c, 1) == VKSPEC_DONE);
    REQUIRE_OK(vkspec_timeline(c, &sem, &after), c);
    CHECK(after == before); /* no submission */
    Tokens t = {{0}, 0};
    vkspec_poll_result r;
    REQUIRE_OK(vkspec_poll(c, &r), c);
    collect(&t, r.tokens, r.count);
    CHECK(r.done && t.n == 3 && memcmp(t.ids, ref.ids, 3 * 4) == 0);
  }

  /* vkspec_cancel from another thread ends vkspec_generate: the generating thread releases the
   * runtime's lock while the GPU works, so the cancel gets in long before 200 tokens are done. */
  {
    CancelArgs a;
    memset(&a, 0, sizeof a);
    a.ctx = c;
    pthread_mutex_init(&a.mu, NULL);
    pthread_cond_init(&a.cv, NULL);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, canceller, &a) == 0);
    vkspec_generation_params p = gp;
    p.strategy = VKSPEC_STRATEGY_AR, p.max_tokens = 200;
    const vkspec_status s = vkspec_generate(c, &p, on_tokens_signal, NULL, &a);
    if (s != VKSPEC_ERROR_CANCELLED) fprintf(stderr, "vkspec_generate: %s\n", vkspec_last_error(c));
    CHECK(strstr(vkspec_last_error(c), "ended by vkspec_cancel") != NULL);
    on_tokens_signal(NULL, 0, &a); /* the canceller runs even if no token came */
    pthread_join(th, NULL);
    vkspec_poll_result r;
    REQUIRE_OK(vkspec_poll(c, &r), c);
    fprintf(stderr, "cancel from another thread: vkspec_generate %s after %u tokens (cancel returned in %.3f s)\n",
            vkspec_status_name(s), r.total, a.returned_after);
    CHECK(a.status == VKSPEC_OK);
    CHECK(s == VKSPEC_ERROR_CANCELLED);
    CHECK(r.done && r.total < 200);
    pthread_mutex_destroy(&a.mu);
    pthread_cond_destroy(&a.cv);
  }

  /* A generated 0x00 byte: the text after it is kept, and text_length counts it. The demo's
   * vocabulary is bytes; a hot sample finds a 0x00 within a few seeds. */
  {
    vkspec_generation_params p = gp;
    p.strategy = VKSPEC_STRATEGY_AR, p.max_tokens = 200, p.temperature = 50.0f;
    int found = 0;
    for (uint64_t seed = 1; seed <= 20 && !found; ++seed) {
      p.seed = seed;
      REQUIRE_OK(vkspec_generation_start(c, &p), c);
      static Polled got;
      memset(&got, 0, sizeof got);
      for (;;) {
        vkspec_poll_result r;
        poll_into(c, &got, &r);
        if (r.done && !r.in_flight) break;
        if (!r.in_flight) vkspec_step_submit(c, 8);
      }
      const Tokens t = got.t;
      const char* text = got.text;
      const uint32_t text_n = got.text_n;
      uint32_t zeros = 0;
      for (uint32_t i = 0; i < t.n; ++i) zeros += t.ids[i] == 0;
      if (!zeros) continue;
      found = 1;
      uint32_t text_zeros = 0;
      for (uint32_t i = 0; i < text_n; ++i) text_zeros += text[i] == 0;
      fprintf(stderr, "seed %llu: %u of %u tokens are 0x00; the text holds %u bytes, %u of them 0x00\n",
              (unsigned long long)seed, zeros, t.n, text_n, text_zeros);
      CHECK(text_zeros == zeros);
      CHECK(text_n > strlen(text));
    }
    CHECK(found);
  }

  /* vkspec_cancel while a character's first byte waits for the rest: the poll that says done
   * gives it (nothing more will come for it) as the one U+FFFD a cut character is, instead of
   * dropping it. A hot sample on the byte vocabulary soon ends a poll on a UTF-8 lead byte (a
   * lone one: an earlier waiting byte has been given as U+FFFD by then); the cancel comes right
   * then, with no step in flight. */
  {
    vkspec_generation_params p = gp;
    p.strategy = VKSPEC_STRATEGY_AR, p.max_tokens = 200, p.temperature = 50.0f;
    int exercised = 0;
    for (uint64_t seed = 1; seed <= 20 && !exercised; ++seed) {
      p.seed = seed;
      REQUIRE_OK(vkspec_generation_start(c, &p), c);
      static Polled got;
      memset(&got, 0, sizeof got);
      uint32_t text_at_cancel = 0, at_cancel = 0;
      int cancelled = 0;
      for (int polls = 0; polls < 2000000; ++polls) {
        vkspec_poll_result r;
        poll_into(c, &got, &r);
        if (r.done && !r.in_flight) break;
        const uint32_t last = got.t.n ? got.t.ids[got.t.n - 1] : 0;
        if (!cancelled && !r.in_flight && r.count && last >= 0xC2 && last <= 0xF4) {
          CHECK(vkspec_cancel(c) == VKSPEC_OK);
          cancelled = 1, at_cancel = got.t.n, text_at_cancel = got.text_n;
        } else if (!cancelled && !r.in_flight) {
          vkspec_step_submit(c, 1);
        }
      }
      if (!cancelled || got.t.n != at_cancel) continue;  /* tokens came after the cancel: another seed */
      exercised = 1;
      fprintf(stderr, "seed %llu: cancelled after %u tokens, the last 0x%02x; the done poll gave %u bytes of text\n",
              (unsigned long long)seed, got.t.n, got.t.ids[got.t.n - 1], got.text_n - text_at_cancel);
      CHECK(got.text_n - text_at_cancel == 3 && memcmp(got.text + text_at_cancel, "\xEF\xBF\xBD", 3) == 0);
    }
    CHECK(exercised);
  }

  /* A handle's error text is the calling thread's: another thread's successful call on the same
   * model between this thread's failure and its vkspec_last_error does not clear it (one shared
   * string did, and was read while another call wrote it). */
  {
    uint32_t ids[1], n = 0;
    CHECK(vkspec_tokenize(model, "Hello there, kernel", ids, 1, &n) == VKSPEC_ERROR_INVALID_ARGUMENT);
    ErrorArgs a;
    memset(&a, 0, sizeof a);
    a.model = model;
    pthread_t th;
    CHECK(pthread_create(&th, NULL, tokenize_ok, &a) == 0);
    pthread_join(th, NULL);
    CHECK(a.status == VKSPEC_OK && strcmp(a.text, "") == 0);
    CHECK(strstr(vkspec_last_error(model), "room for 1") != NULL);
  }

  /* vkspec_tokenize writes the model's error text: it takes the runtime's lock like every call. */
  {
    TokenizeArgs a = {model, 0};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, tokenize_loop, &a) == 0);
    for (int i = 0; i < 4; ++i) {
      vkspec_context* extra = NULL;
      REQUIRE_OK(vkspec_context_create(model, NULL, &extra), model);
      vkspec_context_destroy(extra);
    }
    pthread_join(th, NULL);
    CHECK(a.failures == 0);
  }

  vkspec_context_destroy(c);
  vkspec_model_destroy(model);
  const uint32_t messages = vkspec_runtime_validation_messages(rt);
  if (messages) fprintf(stderr, "validation: %s\n", vkspec_last_error(rt));
  CHECK(messages == 0);
  vkspec_runtime_destroy(rt);
  if (g_failures) fprintf(stderr, "%d check(s) failed\n", g_failures);
  else fprintf(stderr, "capi_hostile: all checks passed\n");
  return g_failures ? 1 : 0;
}
