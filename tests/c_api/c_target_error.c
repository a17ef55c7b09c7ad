/* SPDX-License-Identifier: MIT */
/* Run with GK_TARGET naming a target this build does not have: no module loads, and every
 * call says so through its error return and gk_last_error() instead of crashing. (The
 * other refusal, a target this CPU cannot run, takes the same path with the features it
 * lacks named; it needs an older CPU to be seen.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gk/gk.h"

#define EXPECT(x)                                                  \
  do {                                                             \
    if (!(x)) {                                                    \
      fprintf(stderr, "c_target_error: %s is false\n", #x);        \
      return 1;                                                    \
    }                                                              \
  } while (0)

int main(void) {
  const char *forced = getenv("GK_TARGET");
  EXPECT(forced && strcmp(forced, "pentium3") == 0);
  EXPECT(gk_init() != 0);
  EXPECT(gk_simd_target() == NULL);
  EXPECT(strstr(gk_last_error(), "GK_TARGET=pentium3 is not a target of this build") != NULL);
  float x[32] = {0};
  unsigned char q[64];
  EXPECT(gk_quantize_row(GK_TYPE_Q8_0, x, q, 32, NULL) != 0);
  EXPECT(gk_context_new(1024, false) == NULL);
  EXPECT(gk_add(NULL, NULL, NULL) == NULL);
  EXPECT(gk_device_count() == 0);
  EXPECT(gk_simd_target_supported("pentium3") == 0);
  printf("c_target_error: %s\n", gk_last_error());
  return 0;
}
