/* SPDX-License-Identifier: MIT */
/* Prints one line per result of libgk.so's integer paths and float paths, "<path> <what>
 * <hash>", for tests/c_api/targets_agree.py to compare across SIMD targets (it runs this
 * once per GK_TARGET). Integer paths: every encoder (with and without importance weights),
 * every decoder, every quantized dot, and quantized matmul and get_rows in a graph at two
 * thread counts. They must agree bit for bit on every target. Float paths (f16/bf16/f32
 * matmul) print too; only the integer ones are required to agree.
 * With --bench it also prints the rate of one llama-sized quantized matmul per format.
 * Exit 77: GK_TARGET names a target this CPU cannot run. */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gk/gk.h"

static uint64_t fnv(const void *p, size_t n) {
  const unsigned char *b = p;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

static uint32_t rng = 12345u;
static float gauss(void) { /* sum of uniforms: deterministic across libc's */
  float s = 0;
  for (int i = 0; i < 4; ++i) {
    rng = rng * 1664525u + 1013904223u;
    s += (float)(rng >> 8) / 16777216.0f;
  }
  return (s - 2.0f) * 1.7f;
}

static int die(const char *what) {
  fprintf(stderr, "c_fingerprint: %s: %s\n", what, gk_last_error());
  exit(1);
}

static int integer_path(gk_type t) {
  gk_type a = gk_vec_dot_type(t);
  return t != GK_TYPE_F32 && t != GK_TYPE_F16 && t != GK_TYPE_BF16 &&
         (a == GK_TYPE_Q8_0 || a == GK_TYPE_Q8_1 || a == GK_TYPE_Q8_K);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static gk_backend *cpu; /* asked which matmuls the CPU has a kernel for */

/* y = w x over a graph: w [k, m] of type t, x f32 [k, n]; returns the hash of y, or 0
 * when the CPU has no matmul for t (q8_K, for one, is only an activation format). */
static uint64_t matmul(gk_type t, int64_t k, int64_t m, int64_t n, int threads, int reps, double *seconds) {
  size_t rs = gk_row_size(t, k);
  gk_context *c = gk_context_new(rs * (size_t)m + (size_t)(k + m) * (size_t)n * 4 + 8 * gk_tensor_overhead() + (1 << 16), false);
  if (!c) die("context");
  gk_tensor *w = gk_new_tensor_2d(c, t, k, m), *x = gk_new_tensor_2d(c, GK_TYPE_F32, k, n);
  if (!w || !x) die("tensors");
  float *row = malloc(sizeof(float) * (size_t)k);
  unsigned char *q = gk_tensor_data(w);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t i = 0; i < k; ++i) row[i] = gauss();
    if (gk_quantize_row(t, row, q + (size_t)r * rs, k, NULL)) die("quantize");
  }
  float *xs = gk_tensor_data(x);
  for (int64_t i = 0; i < k * n; ++i) xs[i] = gauss();
  gk_tensor *y = gk_mul_mat(c, w, x);
  if (!y) die("mul_mat");
  if (!gk_backend_supports_op(cpu, y)) {
    gk_context_free(c);
    free(row);
    return 0;
  }
  gk_graph *g = gk_graph_new();
  gk_build_forward_expand(g, y);
  double t0 = now();
  for (int i = 0; i < reps; ++i)
    if (gk_graph_compute(g, threads)) die("compute");
  if (seconds) *seconds = (now() - t0) / reps;
  uint64_t h = fnv(gk_tensor_data(y), gk_tensor_nbytes(y));
  gk_graph_free(g);
  gk_context_free(c);
  free(row);
  return h;
}

int main(int argc, char **argv) {
  const char *forced = getenv("GK_TARGET");
  if (forced && *forced && !gk_simd_target_supported(forced)) {
    printf("GK_TARGET=%s: not runnable here\n", forced);
    return 77;
  }
  if (gk_init()) die("init");
  cpu = gk_backend_cpu_new(1);
  if (!cpu) die("cpu backend");
  int bench = argc > 1 && strcmp(argv[1], "--bench") == 0;
  printf("target %s\n", gk_simd_target());

  enum { N = 1024 };
  float x[N], imp[N], y[N];
  for (int t = 0; t < GK_TYPE_COUNT; ++t) {
    gk_type a = gk_vec_dot_type((gk_type)t);
    if (a == GK_TYPE_COUNT) continue;
    const char *name = gk_type_name((gk_type)t), *path = integer_path((gk_type)t) ? "int" : "float";
    for (int i = 0; i < N; ++i) {
      x[i] = gauss();
      imp[i] = fabsf(gauss()) + 0.1f;
    }
    size_t rs = gk_row_size((gk_type)t, N), ra = gk_row_size(a, N);
    unsigned char *q = malloc(rs), *qa = malloc(ra);
    /* encoders and decoders are exact functions of their inputs: "int" whatever the type */
    if (gk_quantize_row((gk_type)t, x, q, N, NULL)) die(name);
    printf("int encode %s %016llx\n", name, (unsigned long long)fnv(q, rs));
    if (gk_dequantize_row((gk_type)t, q, y, N)) die(name);
    printf("int decode %s %016llx\n", name, (unsigned long long)fnv(y, sizeof y));
    if (gk_quantize_row((gk_type)t, x, q, N, imp)) die(name);
    printf("int encode+imatrix %s %016llx\n", name, (unsigned long long)fnv(q, rs));
    for (int i = 0; i < N; ++i) y[i] = gauss();
    float d = 0;
    if (gk_quantize_row(a, y, qa, N, NULL) || gk_vec_dot((gk_type)t, N, q, qa, &d)) die(name);
    printf("%s vec_dot %s %08x\n", path, name, (unsigned)fnv(&d, sizeof d));
    for (int threads = 1; threads <= 3; threads += 2)
      printf("%s mul_mat/%dt %s %016llx\n", path, threads, name,
             (unsigned long long)matmul((gk_type)t, 512, 37, 7, threads, 1, NULL));
    free(q);
    free(qa);
  }
  if (bench) {
    /* one layer's up-projection of a 7B model for one token and a 16-token batch */
    const gk_type types[] = {GK_TYPE_Q4_0, GK_TYPE_Q8_0, GK_TYPE_Q4_K, GK_TYPE_Q6_K, GK_TYPE_IQ4_XS, GK_TYPE_F16};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; ++i)
      for (int n = 1; n <= 16; n += 15) {
        double s = 0;
        matmul(types[i], 4096, 4096, n, 1, 3, &s);
        printf("bench %s mul_mat 4096x4096x%d 1 thread: %.2f GFLOP/s\n", gk_type_name(types[i]), n,
               2.0 * 4096 * 4096 * n / s * 1e-9);
      }
  }
  gk_backend_free(cpu);
  return 0;
}
