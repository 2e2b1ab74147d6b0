/* The C API tests' generation helpers: a generation's tokens, gathered poll by poll. Included
 * after capi_check.h by the test programs that poll. */
#ifndef VKSPEC_TESTS_CAPI_POLL_H
#define VKSPEC_TESTS_CAPI_POLL_H

#include "capi_check.h"

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
