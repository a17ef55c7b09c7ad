/* SPDX-License-Identifier: MIT */
/* gk from plain C11 through libgk.so: a two-layer MLP with a q4_K weight, rms_norm, a
 * SwiGLU-free silu and a softmax, as an engine written in C would run it.
 *
 *   weights   a no_alloc context for the tensor headers, one host buffer for their bytes
 *             (gk_alloc_ctx_tensors), rows encoded with gk_quantize_row;
 *   graph     builders record ops into a second no_alloc context; the graph allocator
 *             gives every node a slot of one reused buffer;
 *   compute   the CPU backend with 4 threads (the same bits at any count).
 * Every call that can fail is checked; gk_last_error() says why. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "gk/gk.h"

enum { D_IN = 256, D_HID = 128, D_OUT = 10, N_TOK = 3 };

#define CHECK(x)                                                                   \
  do {                                                                             \
    if (!(x)) {                                                                    \
      fprintf(stderr, "c_caller: %s failed: %s\n", #x, gk_last_error());           \
      return 1;                                                                    \
    }                                                                              \
  } while (0)

static float wave(int i, int j) { return sinf(0.37f * (float)i + 0.11f * (float)j) * 0.2f; }

int main(void) {
  CHECK(gk_init() == 0); /* loads the best SIMD target for this CPU (or GK_TARGET's) */
  printf("gk simd target: %s\n", gk_simd_target());

  /* ---- weights: headers in a context, bytes in one buffer ---- */
  gk_context *wctx = gk_context_new(8 * gk_tensor_overhead(), true);
  CHECK(wctx);
  gk_tensor *w1 = gk_new_tensor_2d(wctx, GK_TYPE_Q4_K, D_IN, D_HID); /* 256 -> 128, 4.5 bits */
  gk_tensor *w2 = gk_new_tensor_2d(wctx, GK_TYPE_F32, D_HID, D_OUT); /* 128 -> 10 */
  gk_tensor *gain = gk_new_tensor_1d(wctx, GK_TYPE_F32, D_HID);     /* rms_norm weight */
  CHECK(w1 && w2 && gain);
  gk_buffer *wbuf = gk_alloc_ctx_tensors(wctx, gk_cpu_buffer_type());
  CHECK(wbuf);

  float row[D_IN];
  unsigned char q[2048];
  size_t rs = gk_row_size(GK_TYPE_Q4_K, D_IN);
  CHECK(rs <= sizeof q);
  for (int r = 0; r < D_HID; ++r) {
    for (int i = 0; i < D_IN; ++i) row[i] = wave(i, r);
    CHECK(gk_quantize_row(GK_TYPE_Q4_K, row, q, D_IN, NULL) == 0);
    CHECK(gk_tensor_set_bytes(w1, q, (size_t)r * rs, rs) == 0);
  }
  static float w2v[D_HID * D_OUT], gv[D_HID];
  for (int i = 0; i < D_HID * D_OUT; ++i) w2v[i] = 0.3f * sinf(1.37f * (float)i * (float)(i % 7 + 1));
  for (int i = 0; i < D_HID; ++i) gv[i] = 1.0f + 0.01f * (float)i;
  CHECK(gk_tensor_set_bytes(w2, w2v, 0, sizeof w2v) == 0);
  CHECK(gk_tensor_set_bytes(gain, gv, 0, sizeof gv) == 0);

  /* ---- the graph: y = softmax(w2^T silu(rms_norm(w1^T x) * gain)) ---- */
  gk_context *gctx = gk_context_new(32 * gk_tensor_overhead(), true);
  CHECK(gctx);
  gk_tensor *x = gk_new_tensor_2d(gctx, GK_TYPE_F32, D_IN, N_TOK);
  CHECK(x);
  gk_set_input(x);
  gk_tensor *h = gk_mul_mat(gctx, w1, x);
  CHECK(h);
  h = gk_mul(gctx, gk_rms_norm(gctx, h, 1e-6f), gain);
  CHECK(h);
  h = gk_silu(gctx, h);
  gk_tensor *logits = gk_mul_mat(gctx, w2, h);
  CHECK(logits);
  gk_tensor *y = gk_soft_max(gctx, logits);
  CHECK(y);
  gk_tensor_set_name(y, "probs");
  gk_set_output(y);

  gk_graph *g = gk_graph_new();
  CHECK(g);
  CHECK(gk_build_forward_expand(g, y) == 0);
  gk_gallocr *ga = gk_gallocr_new();
  CHECK(ga);
  CHECK(gk_gallocr_alloc_graph(ga, g) == 0);
  printf("graph: %d nodes, activations in %zu bytes\n", gk_graph_n_nodes(g), gk_gallocr_buffer_size(ga));

  static float xv[D_IN * N_TOK];
  for (int i = 0; i < D_IN * N_TOK; ++i) xv[i] = wave(i % D_IN, 100 + i / D_IN) * 5.0f;
  CHECK(gk_tensor_set_bytes(x, xv, 0, sizeof xv) == 0);

  gk_backend *cpu = gk_backend_cpu_new(4);
  CHECK(cpu);
  CHECK(gk_backend_graph_compute(cpu, g) == 0);

  /* ---- results ---- */
  float probs[D_OUT * N_TOK];
  CHECK(gk_tensor_get_bytes(y, probs, 0, sizeof probs) == 0);
  int ok = 1;
  for (int t = 0; t < N_TOK; ++t) {
    double sum = 0;
    int best = 0;
    printf("token %d:", t);
    for (int i = 0; i < D_OUT; ++i) {
      float p = probs[t * D_OUT + i];
      printf(" %.4f", p);
      sum += p;
      if (p > probs[t * D_OUT + best]) best = i;
    }
    printf("  (argmax %d, sum %.6f)\n", best, sum);
    ok &= fabs(sum - 1.0) < 1e-5;
  }

  /* a mistake is an error code and a message, not a crash */
  gk_tensor *bad = gk_mul_mat(gctx, w1, w2);
  printf("a mis-shaped mul_mat: %s -> \"%s\"\n", bad ? "built?!" : "NULL", gk_last_error());
  ok &= bad == NULL;

  gk_backend_free(cpu);
  gk_gallocr_free(ga);
  gk_graph_free(g);
  gk_context_free(gctx);
  gk_buffer_free(wbuf);
  gk_context_free(wctx);
  return ok ? 0 : 1;
}
