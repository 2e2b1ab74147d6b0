/* The C API tests' shared helpers: the demo model's paths, and a generation's tokens gathered
 * poll by poll. Included by the test programs that load the demo and poll. */
#ifndef VKSPEC_TESTS_CAPI_POLL_H
#define VKSPEC_TESTS_CAPI_POLL_H

#include "capi_check.h"

/* The demo's verifier and heads under SOURCE_DIR/models. */
typedef struct DemoPaths {
  char verifier[1200], head1[1200], head2[1200];
} DemoPaths;

static void demo_paths(const char* source_dir, DemoPaths* d) {
  snprintf(d->verifier, sizeof d->verifier, "%s/models/verifier.gguf", source_dir);
  snprintf(d->head1, sizeof d->head1, "%s/models/head1", source_dir);
  snprintf(d->head2, sizeof d->head2, "%s/models/head2", source_dir);
}

typedef struct Tokens {
  uint32_t ids[512];
  uint32_t n;
} Tokens;

static void collect(Tokens* t, const uint32_t* ids, uint32_t n) {
  for (uint32_t i = 0; i < n && t->n < 512; ++i) t->ids[t->n++] = ids[i];
}

/* Polls a started generation to its end, submitting whenever the GPU is idle. */
static void poll_to_end(vkspec_context* c, Tokens* t) {
  for (;;) {
    vkspec_poll_result r;
    REQUIRE_OK(vkspec_poll(c, &r), c);
    collect(t, r.tokens, r.count);
    if (r.done && !r.in_flight) return;
    if (!r.in_flight) {
      vkspec_status s = vkspec_step_submit(c, 2);
      CHECK(s == VKSPEC_OK || s == VKSPEC_DONE);
    }
  }
}

#endif
