/* The C API tests' checks: CHECK counts a failure and goes on, REQUIRE_OK stops the test with the
 * call's status and the handle's last error. One test program per file, so g_failures is its own. */
#ifndef VKSPEC_TESTS_CAPI_CHECK_H
#define VKSPEC_TESTS_CAPI_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include "vkspec/vkspec.h"

static int g_failures = 0;

#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) {                                                               \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);   \
      ++g_failures;                                                              \
    }                                                                            \
  } while (0)
#define REQUIRE_OK(call, handle)                                                                                \
  do {                                                                                                          \
    vkspec_status s_ = (call);                                                                                  \
    if (s_ != VKSPEC_OK) {                                                                                      \
      fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call, vkspec_status_name(s_),               \
              vkspec_last_error(handle));                                                                       \
      exit(1);                                                                                                  \
    }                                                                                                           \
  } while (0)

#endif
