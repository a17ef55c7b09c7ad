// SPDX-License-Identifier: MIT
// gk::tensor: an n-dimensional array (up to 4 dims) of one gk::type, or a node of a graph.
// The struct is byte-for-byte ggml's `struct ggml_tensor` and the op enums carry ggml's
// values (tests/vs_ggml static-asserts both), so a compat layer can hand one library's
// tensors to the other without a copy. Only member functions are added; no data member is.
//
// Geometry follows GGUF: ne[0] is the innermost (contiguous) dimension, a "row" is ne[0]
// elements stored as whole blocks, nb[i] is the stride of dimension i in bytes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "gk/core/error.hpp"
#include "gk/core/types.hpp"

namespace gk {

inline constexpr int max_dims = 4;
inline constexpr int max_src = 10;
inline constexpr int max_op_params = 64;  // bytes, stored as int32 for alignment
inline constexpr int max_name = 64;

// Every op the reference knows, with its value. gk computes a subset on the CPU; the
// builders (ops.hpp) know the shape rules of all of them.
enum class op : std::int32_t {
  none = 0, dup, add, add_id, add1, acc, sub, mul, div, sqr, sqrt, log, sin, cos, sum,
  sum_rows, cumsum, mean, argmax, count_equal, repeat, repeat_back, concat, silu_back,
  norm, rms_norm, rms_norm_back, group_norm, l2_norm, mul_mat, mul_mat_id, out_prod, scale,
  set, cpy, cont, reshape, view, permute, transpose, get_rows, get_rows_back, set_rows,
  diag, diag_mask_inf, diag_mask_zero, soft_max, soft_max_back, rope, rope_back, clamp,
  conv_transpose_1d, im2col, im2col_back, im2col_3d, col2im_1d, conv_2d, conv_3d,
  conv_2d_dw, conv_transpose_2d, pool_1d, pool_2d, pool_2d_back, upscale, pad,
  pad_reflect_1d, roll, arange, timestep_embedding, argsort, top_k, leaky_relu, tri, fill,
  flash_attn_ext, flash_attn_back, ssm_conv, ssm_scan, win_part, win_unpart, get_rel_pos,
  add_rel_pos, rwkv_wkv6, gated_linear_attn, rwkv_wkv7, solve_tri, gated_delta_net,
  lightning_indexer, dsv4_hc_comb, dsv4_hc_pre, dsv4_hc_post, unary, map_custom1,
  map_custom2, map_custom3, custom, cross_entropy_loss, cross_entropy_loss_back,
  opt_step_adamw, opt_step_sgd, glu, 
  count,
};

enum class unary_op : std::int32_t {
  abs = 0, sgn, neg, step, tanh, elu, relu, sigmoid, gelu, gelu_quick, silu, hardswish,
  hardsigmoid, exp, expm1, softplus, gelu_erf, xielu, floor, ceil, round, trunc, 
  count,
};

enum class glu_op : std::int32_t {
  reglu = 0, geglu, swiglu, swiglu_oai, geglu_erf, geglu_quick, swiglu_clamp, 
  count,
};

inline constexpr std::array<std::string_view, 101> op_names = {
    "none", "dup", "add", "add_id", "add1", "acc", "sub", "mul", "div", "sqr", "sqrt",
    "log", "sin", "cos", "sum", "sum_rows", "cumsum", "mean", "argmax", "count_equal",
    "repeat", "repeat_back", "concat", "silu_back", "norm", "rms_norm", "rms_norm_back",
    "group_norm", "l2_norm", "mul_mat", "mul_mat_id", "out_prod", "scale", "set", "cpy",
    "cont", "reshape", "view", "permute", "transpose", "get_rows", "get_rows_back",
    "set_rows", "diag", "diag_mask_inf", "diag_mask_zero", "soft_max", "soft_max_back",
    "rope", "rope_back", "clamp", "conv_transpose_1d", "im2col", "im2col_back",
    "im2col_3d", "col2im_1d", "conv_2d", "conv_3d", "conv_2d_dw", "conv_transpose_2d",
    "pool_1d", "pool_2d", "pool_2d_back", "upscale", "pad", "pad_reflect_1d", "roll",
    "arange", "timestep_embedding", "argsort", "top_k", "leaky_relu", "tri", "fill",
    "flash_attn_ext", "flash_attn_back", "ssm_conv", "ssm_scan", "win_part", "win_unpart",
    "get_rel_pos", "add_rel_pos", "rwkv_wkv6", "gated_linear_attn", "rwkv_wkv7",
    "solve_tri", "gated_delta_net", "lightning_indexer", "dsv4_hc_comb", "dsv4_hc_pre",
    "dsv4_hc_post", "unary", "map_custom1", "map_custom2", "map_custom3", "custom",
    "cross_entropy_loss", "cross_entropy_loss_back", "opt_step_adamw", "opt_step_sgd",
    "glu",
};
inline constexpr std::array<std::string_view, 22> unary_op_names = {
    "abs", "sgn", "neg", "step", "tanh", "elu", "relu", "sigmoid", "gelu", "gelu_quick",
    "silu", "hardswish", "hardsigmoid", "exp", "expm1", "softplus", "gelu_erf", "xielu",
    "floor", "ceil", "round", "trunc",
};
inline constexpr std::array<std::string_view, 7> glu_op_names = {
    "reglu", "geglu", "swiglu", "swiglu_oai", "geglu_erf", "geglu_quick", "swiglu_clamp",
};

constexpr std::string_view name(op o) noexcept {
  auto i = static_cast<std::size_t>(o);
  return i < op_names.size() ? op_names[i] : std::string_view{"?"};
}
constexpr std::string_view name(unary_op o) noexcept {
  auto i = static_cast<std::size_t>(o);
  return i < unary_op_names.size() ? unary_op_names[i] : std::string_view{"?"};
}
constexpr std::string_view name(glu_op o) noexcept {
  auto i = static_cast<std::size_t>(o);
  return i < glu_op_names.size() ? glu_op_names[i] : std::string_view{"?"};
}

// Tensor flags, as the reference's.
enum tensor_flag : std::int32_t {
  flag_input = 1,    // filled by the caller before compute; never overwritten by planning
  flag_output = 2,   // read by the caller after compute; never reused
  flag_param = 4,    // trainable parameter
  flag_loss = 8,     // defines a loss
  flag_compute = 16, // must be computed
};

enum class prec : std::int32_t { default_ = 0, f32 = 10 };
enum class sort_order : std::int32_t { asc = 0, desc = 1 };
enum class tri_type : std::int32_t { upper_diag = 0, upper = 1, lower_diag = 2, lower = 3 };

inline constexpr int rope_type_normal = 0;
inline constexpr int rope_type_neox = 2;
inline constexpr int rope_type_mrope = 8;
inline constexpr int rope_type_vision = 24;
inline constexpr int rope_type_imrope = 40;

struct backend_buffer;  // opaque here; backend.hpp defines it

struct tensor {
  gk::type type;
  backend_buffer* buffer;
  std::int64_t ne[max_dims];  // elements per dimension
  std::size_t nb[max_dims];   // stride in bytes per dimension
  gk::op op;
  std::int32_t op_params[max_op_params / sizeof(std::int32_t)];
  std::int32_t flags;
  tensor* src[max_src];
  tensor* view_src;  // the tensor whose storage this one aliases (never itself a view)
  std::size_t view_offs;
  void* data;
  char name[max_name];
  void* extra;
  char padding[8];

  // ---- geometry ----
  std::int64_t nelements() const noexcept { return ne[0] * ne[1] * ne[2] * ne[3]; }
  std::int64_t nrows() const noexcept { return ne[1] * ne[2] * ne[3]; }
  std::size_t row_bytes() const noexcept { return gk::row_size(type, ne[0]); }
  bool is_empty() const noexcept { return ne[0] == 0 || ne[1] == 0 || ne[2] == 0 || ne[3] == 0; }
  int n_dims() const noexcept {
    for (int i = max_dims - 1; i >= 1; --i)
      if (ne[i] > 1) return i + 1;
    return 1;
  }
  // Bytes spanned from the first element to one past the last, as the reference counts.
  std::size_t nbytes() const noexcept {
    for (int i = 0; i < max_dims; ++i)
      if (ne[i] <= 0) return 0;
    const std::int64_t bs = gk::block_size(type);
    std::size_t n;
    if (bs == 1) {
      n = gk::type_size(type);
      for (int i = 0; i < max_dims; ++i) n += static_cast<std::size_t>(ne[i] - 1) * nb[i];
    } else {
      n = static_cast<std::size_t>(ne[0]) * nb[0] / static_cast<std::size_t>(bs);
      for (int i = 1; i < max_dims; ++i) n += static_cast<std::size_t>(ne[i] - 1) * nb[i];
    }
    return n;
  }
  // Dimensions above `m` are packed (each stride the product of the ones below); dim 0
  // is always packed. contiguous(0) is "fully contiguous", contiguous(1) "rows are packed
  // but may be strided", and so on (the reference's ggml_is_contiguous_n).
  bool is_contiguous(int m = 0) const noexcept {
    std::size_t next = gk::type_size(type);
    if (ne[0] != gk::block_size(type) && nb[0] != next) return false;
    next *= static_cast<std::size_t>(ne[0] / gk::block_size(type));
    for (int i = 1; i < max_dims; ++i) {
      if (i > m) {
        if (ne[i] != 1 && nb[i] != next) return false;
        next *= static_cast<std::size_t>(ne[i]);
      } else {
        next = static_cast<std::size_t>(ne[i]) * nb[i];
      }
    }
    return true;
  }
  bool rows_contiguous() const noexcept {
    return ne[0] == gk::block_size(type) || nb[0] == gk::type_size(type);
  }
  bool is_transposed() const noexcept { return nb[0] > nb[1]; }
  bool is_permuted() const noexcept { return nb[0] > nb[1] || nb[1] > nb[2] || nb[2] > nb[3]; }
  bool is_view() const noexcept { return view_src != nullptr; }
  bool same_shape(const tensor& o) const noexcept {
    return ne[0] == o.ne[0] && ne[1] == o.ne[1] && ne[2] == o.ne[2] && ne[3] == o.ne[3];
  }
  bool same_strides(const tensor& o) const noexcept {
    return nb[0] == o.nb[0] && nb[1] == o.nb[1] && nb[2] == o.nb[2] && nb[3] == o.nb[3];
  }
  // This tensor can be broadcast (repeated) to the shape of `o`.
  bool can_repeat_to(const tensor& o) const noexcept {
    if (is_empty()) return o.is_empty();
    return o.ne[0] % ne[0] == 0 && o.ne[1] % ne[1] == 0 && o.ne[2] % ne[2] == 0 && o.ne[3] % ne[3] == 0;
  }

  // ---- addressing ----
  char* at(std::int64_t i1, std::int64_t i2 = 0, std::int64_t i3 = 0) const noexcept {
    return static_cast<char*>(data) + i1 * static_cast<std::int64_t>(nb[1]) +
           i2 * static_cast<std::int64_t>(nb[2]) + i3 * static_cast<std::int64_t>(nb[3]);
  }

  // ---- op parameters (int32 slots; floats stored by bit pattern, as the reference does) ----
  std::int32_t param_i32(int i) const noexcept { return op_params[i]; }
  float param_f32(int i) const noexcept {
    float f;
    std::memcpy(&f, &op_params[i], sizeof f);
    return f;
  }
  void set_param_i32(int i, std::int32_t v) noexcept { op_params[i] = v; }
  void set_param_f32(int i, float v) noexcept { std::memcpy(&op_params[i], &v, sizeof v); }
  void set_params(const void* p, std::size_t bytes) {
    if (bytes > sizeof op_params) throw error("gk: op parameters of " + std::to_string(bytes) + " bytes exceed 64");
    std::memcpy(op_params, p, bytes);
  }

  std::string_view get_name() const noexcept { return {name, strnlen(name, max_name)}; }
  tensor* set_name(std::string_view n) noexcept {
    std::size_t k = n.size() < max_name - 1 ? n.size() : max_name - 1;
    std::memcpy(name, n.data(), k);
    name[k] = 0;
    return this;
  }
};

static_assert(sizeof(tensor) == 336, "gk::tensor must keep the reference's layout (336 bytes on LP64)");
static_assert(sizeof(tensor) % 16 == 0);

inline std::string shape_string(const std::int64_t* ne) {
  std::string s = "[";
  for (int i = 0; i < max_dims; ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

// "'name' f32 [4096, 64, 1, 1]": how errors name a tensor.
inline std::string describe(const tensor* t) {
  if (!t) return "(null tensor)";
  std::string s;
  if (t->name[0]) s += "'" + std::string(t->get_name()) + "' ";
  s += std::string(gk::name(t->type)) + " " + shape_string(t->ne);
  if (!t->is_contiguous()) s += " (strided)";
  return s;
}

}  // namespace gk
