/* SPDX-License-Identifier: MIT */
/* gk.h from plain C11: encode, decode and dot one q4_K row; exit status says if it worked. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "gk/gk.h"

int main(void) {
  const char *forced = getenv("GK_TARGET");
  if (forced && *forced && !gk_simd_target_supported(forced)) return 77; /* not runnable here */
  enum { N = 512 };
  float x[N], y[N], a[N];
  for (int i = 0; i < N; ++i) {
    x[i] = sinf(0.1f * (float)i);
    a[i] = cosf(0.05f * (float)i);
  }
  unsigned char *w = malloc(gk_row_size(GK_TYPE_Q4_K, N));
  unsigned char *q = malloc(gk_row_size(gk_vec_dot_type(GK_TYPE_Q4_K), N));
  float dot = 0.0f;
  if (!w || !q) return 1;
  if (gk_quantize_row(GK_TYPE_Q4_K, x, w, N, NULL) || gk_dequantize_row(GK_TYPE_Q4_K, w, y, N) ||
      gk_quantize_row(gk_vec_dot_type(GK_TYPE_Q4_K), a, q, N, NULL) || gk_vec_dot(GK_TYPE_Q4_K, N, w, q, &dot)) {
    fprintf(stderr, "c_smoke: %s\n", gk_last_error());
    return 1;
  }
  if (gk_quantize_row(GK_TYPE_Q4_K, x, w, 100, NULL) == 0 || gk_last_error()[0] == '\0') return 1;
  double err = 0;
  for (int i = 0; i < N; ++i) err += (x[i] - y[i]) * (x[i] - y[i]);
  printf("c_smoke: q4_K rms error %.5f, dot %.4f\n", sqrt(err / N), dot);
  free(w);
  free(q);
  return sqrt(err / N) < 0.05 ? 0 : 1;
}
