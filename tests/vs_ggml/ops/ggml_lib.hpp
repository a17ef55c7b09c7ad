// SPDX-License-Identifier: MIT
// The reference's side of the library adapter tests/common/transformer_block.hpp builds
// its graph through (gk_test::gk_lib is gk's side): the same member names, ggml calls.
#pragma once

#include <cstdint>

#include "ggml.h"

namespace gk_test {

struct ggml_lib {
  using T = ggml_tensor*;
  ggml_context* c;
  T mul(T a, T b) { return ggml_mul(c, a, b); }
  T add(T a, T b) { return ggml_add(c, a, b); }
  T rms_norm(T a, float eps) { return ggml_rms_norm(c, a, eps); }
  T mul_mat(T a, T b) { return ggml_mul_mat(c, a, b); }
  T reshape_2d(T a, std::int64_t n0, std::int64_t n1) { return ggml_reshape_2d(c, a, n0, n1); }
  T reshape_3d(T a, std::int64_t n0, std::int64_t n1, std::int64_t n2) { return ggml_reshape_3d(c, a, n0, n1, n2); }
  T rope_ext(T a, T pos, std::int64_t n_dims, int mode, float base) {
    return ggml_rope_ext(c, a, pos, nullptr, static_cast<int>(n_dims), mode, 0, base, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
  }
  T set_rows(T a, T b, T idx) { return ggml_set_rows(c, a, b, idx); }
  T cache_heads(T kc, std::int64_t hd, std::int64_t kvh, std::int64_t n_kv) {
    return ggml_view_3d(c, kc, hd, n_kv, kvh, kc->nb[1], ggml_row_size(kc->type, hd), 0);
  }
  T permute(T a, int x0, int x1, int x2, int x3) { return ggml_permute(c, a, x0, x1, x2, x3); }
  T transpose(T a) { return ggml_transpose(c, a); }
  T cont(T a) { return ggml_cont(c, a); }
  T cont_2d(T a, std::int64_t n0, std::int64_t n1) { return ggml_cont_2d(c, a, n0, n1); }
  T flash_attn_ext(T q, T k, T v, T mask, float scale) { return ggml_flash_attn_ext(c, q, k, v, mask, scale, 0.0f, 0.0f); }
  T soft_max_ext(T a, T mask, float scale) { return ggml_soft_max_ext(c, a, mask, scale, 0.0f); }
  T swiglu_split(T a, T b) { return ggml_swiglu_split(c, a, b); }
};

}  // namespace gk_test
