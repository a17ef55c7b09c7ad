// SPDX-License-Identifier: MIT
// Builders and layout against the reference. gk::tensor must be ggml_tensor byte for byte
// and every op enum must carry ggml's value (static_asserts below); every builder in
// ops/extra.hpp and ops/view.hpp must make the node the reference makes: result type,
// ne, nb, op, all 64 op_params bytes, flags, which source slots are set (and to the
// corresponding tensor) and, for views and in-place ops, the aliased tensor and offset.
// Bad shapes must throw gk::error and leave the context as it was; the reference is
// never called with bad shapes (it aborts). Planted controls: deliberately wrong copies of
// builders go through the same comparison and must be caught.
//
// Nothing is computed here: both contexts are no_alloc.
#include <catch2/catch.hpp>

#include <array>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "ggml.h"
#include "gk/ops.hpp"

// ---- layout: the struct and every enum the compat layer forwards ----

static_assert(sizeof(gk::tensor) == sizeof(ggml_tensor));
static_assert(alignof(gk::tensor) == alignof(ggml_tensor));
#define GK_SAME_OFFSET(f) static_assert(offsetof(gk::tensor, f) == offsetof(ggml_tensor, f), "offset of " #f);
GK_SAME_OFFSET(type) GK_SAME_OFFSET(buffer) GK_SAME_OFFSET(ne) GK_SAME_OFFSET(nb) GK_SAME_OFFSET(op)
GK_SAME_OFFSET(op_params) GK_SAME_OFFSET(flags) GK_SAME_OFFSET(src) GK_SAME_OFFSET(view_src)
GK_SAME_OFFSET(view_offs) GK_SAME_OFFSET(data) GK_SAME_OFFSET(name) GK_SAME_OFFSET(extra) GK_SAME_OFFSET(padding)
#undef GK_SAME_OFFSET
static_assert(sizeof(gk::tensor::op_params) == sizeof(ggml_tensor::op_params));
static_assert(sizeof(gk::tensor::name) == sizeof(ggml_tensor::name));
static_assert(gk::max_dims == GGML_MAX_DIMS && gk::max_src == GGML_MAX_SRC && gk::max_op_params == GGML_MAX_OP_PARAMS &&
              gk::max_name == GGML_MAX_NAME);

#define GK_SAME_ENUM(g, r) static_assert(static_cast<int>(g) == static_cast<int>(r), #g " != " #r);
GK_SAME_ENUM(gk::op::none, GGML_OP_NONE) GK_SAME_ENUM(gk::op::dup, GGML_OP_DUP)
GK_SAME_ENUM(gk::op::add, GGML_OP_ADD) GK_SAME_ENUM(gk::op::add_id, GGML_OP_ADD_ID)
GK_SAME_ENUM(gk::op::add1, GGML_OP_ADD1) GK_SAME_ENUM(gk::op::acc, GGML_OP_ACC)
GK_SAME_ENUM(gk::op::sub, GGML_OP_SUB) GK_SAME_ENUM(gk::op::mul, GGML_OP_MUL)
GK_SAME_ENUM(gk::op::div, GGML_OP_DIV) GK_SAME_ENUM(gk::op::sqr, GGML_OP_SQR)
GK_SAME_ENUM(gk::op::sqrt, GGML_OP_SQRT) GK_SAME_ENUM(gk::op::log, GGML_OP_LOG)
GK_SAME_ENUM(gk::op::sin, GGML_OP_SIN) GK_SAME_ENUM(gk::op::cos, GGML_OP_COS)
GK_SAME_ENUM(gk::op::sum, GGML_OP_SUM) GK_SAME_ENUM(gk::op::sum_rows, GGML_OP_SUM_ROWS)
GK_SAME_ENUM(gk::op::cumsum, GGML_OP_CUMSUM) GK_SAME_ENUM(gk::op::mean, GGML_OP_MEAN)
GK_SAME_ENUM(gk::op::argmax, GGML_OP_ARGMAX) GK_SAME_ENUM(gk::op::count_equal, GGML_OP_COUNT_EQUAL)
GK_SAME_ENUM(gk::op::repeat, GGML_OP_REPEAT) GK_SAME_ENUM(gk::op::repeat_back, GGML_OP_REPEAT_BACK)
GK_SAME_ENUM(gk::op::concat, GGML_OP_CONCAT) GK_SAME_ENUM(gk::op::silu_back, GGML_OP_SILU_BACK)
GK_SAME_ENUM(gk::op::norm, GGML_OP_NORM) GK_SAME_ENUM(gk::op::rms_norm, GGML_OP_RMS_NORM)
GK_SAME_ENUM(gk::op::rms_norm_back, GGML_OP_RMS_NORM_BACK) GK_SAME_ENUM(gk::op::group_norm, GGML_OP_GROUP_NORM)
GK_SAME_ENUM(gk::op::l2_norm, GGML_OP_L2_NORM) GK_SAME_ENUM(gk::op::mul_mat, GGML_OP_MUL_MAT)
GK_SAME_ENUM(gk::op::mul_mat_id, GGML_OP_MUL_MAT_ID) GK_SAME_ENUM(gk::op::out_prod, GGML_OP_OUT_PROD)
GK_SAME_ENUM(gk::op::scale, GGML_OP_SCALE) GK_SAME_ENUM(gk::op::set, GGML_OP_SET)
GK_SAME_ENUM(gk::op::cpy, GGML_OP_CPY) GK_SAME_ENUM(gk::op::cont, GGML_OP_CONT)
GK_SAME_ENUM(gk::op::reshape, GGML_OP_RESHAPE) GK_SAME_ENUM(gk::op::view, GGML_OP_VIEW)
GK_SAME_ENUM(gk::op::permute, GGML_OP_PERMUTE) GK_SAME_ENUM(gk::op::transpose, GGML_OP_TRANSPOSE)
GK_SAME_ENUM(gk::op::get_rows, GGML_OP_GET_ROWS) GK_SAME_ENUM(gk::op::get_rows_back, GGML_OP_GET_ROWS_BACK)
GK_SAME_ENUM(gk::op::set_rows, GGML_OP_SET_ROWS) GK_SAME_ENUM(gk::op::diag, GGML_OP_DIAG)
GK_SAME_ENUM(gk::op::diag_mask_inf, GGML_OP_DIAG_MASK_INF) GK_SAME_ENUM(gk::op::diag_mask_zero, GGML_OP_DIAG_MASK_ZERO)
GK_SAME_ENUM(gk::op::soft_max, GGML_OP_SOFT_MAX) GK_SAME_ENUM(gk::op::soft_max_back, GGML_OP_SOFT_MAX_BACK)
GK_SAME_ENUM(gk::op::rope, GGML_OP_ROPE) GK_SAME_ENUM(gk::op::rope_back, GGML_OP_ROPE_BACK)
GK_SAME_ENUM(gk::op::clamp, GGML_OP_CLAMP) GK_SAME_ENUM(gk::op::conv_transpose_1d, GGML_OP_CONV_TRANSPOSE_1D)
GK_SAME_ENUM(gk::op::im2col, GGML_OP_IM2COL) GK_SAME_ENUM(gk::op::im2col_back, GGML_OP_IM2COL_BACK)
GK_SAME_ENUM(gk::op::im2col_3d, GGML_OP_IM2COL_3D) GK_SAME_ENUM(gk::op::col2im_1d, GGML_OP_COL2IM_1D)
GK_SAME_ENUM(gk::op::conv_2d, GGML_OP_CONV_2D) GK_SAME_ENUM(gk::op::conv_3d, GGML_OP_CONV_3D)
GK_SAME_ENUM(gk::op::conv_2d_dw, GGML_OP_CONV_2D_DW) GK_SAME_ENUM(gk::op::conv_transpose_2d, GGML_OP_CONV_TRANSPOSE_2D)
GK_SAME_ENUM(gk::op::pool_1d, GGML_OP_POOL_1D) GK_SAME_ENUM(gk::op::pool_2d, GGML_OP_POOL_2D)
GK_SAME_ENUM(gk::op::pool_2d_back, GGML_OP_POOL_2D_BACK) GK_SAME_ENUM(gk::op::upscale, GGML_OP_UPSCALE)
GK_SAME_ENUM(gk::op::pad, GGML_OP_PAD) GK_SAME_ENUM(gk::op::pad_reflect_1d, GGML_OP_PAD_REFLECT_1D)
GK_SAME_ENUM(gk::op::roll, GGML_OP_ROLL) GK_SAME_ENUM(gk::op::arange, GGML_OP_ARANGE)
GK_SAME_ENUM(gk::op::timestep_embedding, GGML_OP_TIMESTEP_EMBEDDING) GK_SAME_ENUM(gk::op::argsort, GGML_OP_ARGSORT)
GK_SAME_ENUM(gk::op::top_k, GGML_OP_TOP_K) GK_SAME_ENUM(gk::op::leaky_relu, GGML_OP_LEAKY_RELU)
GK_SAME_ENUM(gk::op::tri, GGML_OP_TRI) GK_SAME_ENUM(gk::op::fill, GGML_OP_FILL)
GK_SAME_ENUM(gk::op::flash_attn_ext, GGML_OP_FLASH_ATTN_EXT) GK_SAME_ENUM(gk::op::flash_attn_back, GGML_OP_FLASH_ATTN_BACK)
GK_SAME_ENUM(gk::op::ssm_conv, GGML_OP_SSM_CONV) GK_SAME_ENUM(gk::op::ssm_scan, GGML_OP_SSM_SCAN)
GK_SAME_ENUM(gk::op::win_part, GGML_OP_WIN_PART) GK_SAME_ENUM(gk::op::win_unpart, GGML_OP_WIN_UNPART)
GK_SAME_ENUM(gk::op::get_rel_pos, GGML_OP_GET_REL_POS) GK_SAME_ENUM(gk::op::add_rel_pos, GGML_OP_ADD_REL_POS)
GK_SAME_ENUM(gk::op::rwkv_wkv6, GGML_OP_RWKV_WKV6) GK_SAME_ENUM(gk::op::gated_linear_attn, GGML_OP_GATED_LINEAR_ATTN)
GK_SAME_ENUM(gk::op::rwkv_wkv7, GGML_OP_RWKV_WKV7) GK_SAME_ENUM(gk::op::solve_tri, GGML_OP_SOLVE_TRI)
GK_SAME_ENUM(gk::op::gated_delta_net, GGML_OP_GATED_DELTA_NET) GK_SAME_ENUM(gk::op::lightning_indexer, GGML_OP_LIGHTNING_INDEXER)
GK_SAME_ENUM(gk::op::dsv4_hc_comb, GGML_OP_DSV4_HC_COMB) GK_SAME_ENUM(gk::op::dsv4_hc_pre, GGML_OP_DSV4_HC_PRE)
GK_SAME_ENUM(gk::op::dsv4_hc_post, GGML_OP_DSV4_HC_POST) GK_SAME_ENUM(gk::op::unary, GGML_OP_UNARY)
GK_SAME_ENUM(gk::op::map_custom1, GGML_OP_MAP_CUSTOM1) GK_SAME_ENUM(gk::op::map_custom2, GGML_OP_MAP_CUSTOM2)
GK_SAME_ENUM(gk::op::map_custom3, GGML_OP_MAP_CUSTOM3) GK_SAME_ENUM(gk::op::custom, GGML_OP_CUSTOM)
GK_SAME_ENUM(gk::op::cross_entropy_loss, GGML_OP_CROSS_ENTROPY_LOSS) GK_SAME_ENUM(gk::op::cross_entropy_loss_back, GGML_OP_CROSS_ENTROPY_LOSS_BACK)
GK_SAME_ENUM(gk::op::opt_step_adamw, GGML_OP_OPT_STEP_ADAMW) GK_SAME_ENUM(gk::op::opt_step_sgd, GGML_OP_OPT_STEP_SGD)
GK_SAME_ENUM(gk::op::glu, GGML_OP_GLU) GK_SAME_ENUM(gk::op::count, GGML_OP_COUNT)
GK_SAME_ENUM(gk::unary_op::abs, GGML_UNARY_OP_ABS) GK_SAME_ENUM(gk::unary_op::sgn, GGML_UNARY_OP_SGN)
GK_SAME_ENUM(gk::unary_op::neg, GGML_UNARY_OP_NEG) GK_SAME_ENUM(gk::unary_op::step, GGML_UNARY_OP_STEP)
GK_SAME_ENUM(gk::unary_op::tanh, GGML_UNARY_OP_TANH) GK_SAME_ENUM(gk::unary_op::elu, GGML_UNARY_OP_ELU)
GK_SAME_ENUM(gk::unary_op::relu, GGML_UNARY_OP_RELU) GK_SAME_ENUM(gk::unary_op::sigmoid, GGML_UNARY_OP_SIGMOID)
GK_SAME_ENUM(gk::unary_op::gelu, GGML_UNARY_OP_GELU) GK_SAME_ENUM(gk::unary_op::gelu_quick, GGML_UNARY_OP_GELU_QUICK)
GK_SAME_ENUM(gk::unary_op::silu, GGML_UNARY_OP_SILU) GK_SAME_ENUM(gk::unary_op::hardswish, GGML_UNARY_OP_HARDSWISH)
GK_SAME_ENUM(gk::unary_op::hardsigmoid, GGML_UNARY_OP_HARDSIGMOID) GK_SAME_ENUM(gk::unary_op::exp, GGML_UNARY_OP_EXP)
GK_SAME_ENUM(gk::unary_op::expm1, GGML_UNARY_OP_EXPM1) GK_SAME_ENUM(gk::unary_op::softplus, GGML_UNARY_OP_SOFTPLUS)
GK_SAME_ENUM(gk::unary_op::gelu_erf, GGML_UNARY_OP_GELU_ERF) GK_SAME_ENUM(gk::unary_op::xielu, GGML_UNARY_OP_XIELU)
GK_SAME_ENUM(gk::unary_op::floor, GGML_UNARY_OP_FLOOR) GK_SAME_ENUM(gk::unary_op::ceil, GGML_UNARY_OP_CEIL)
GK_SAME_ENUM(gk::unary_op::round, GGML_UNARY_OP_ROUND) GK_SAME_ENUM(gk::unary_op::trunc, GGML_UNARY_OP_TRUNC)
GK_SAME_ENUM(gk::unary_op::count, GGML_UNARY_OP_COUNT) GK_SAME_ENUM(gk::glu_op::reglu, GGML_GLU_OP_REGLU)
GK_SAME_ENUM(gk::glu_op::geglu, GGML_GLU_OP_GEGLU) GK_SAME_ENUM(gk::glu_op::swiglu, GGML_GLU_OP_SWIGLU)
GK_SAME_ENUM(gk::glu_op::swiglu_oai, GGML_GLU_OP_SWIGLU_OAI) GK_SAME_ENUM(gk::glu_op::geglu_erf, GGML_GLU_OP_GEGLU_ERF)
GK_SAME_ENUM(gk::glu_op::geglu_quick, GGML_GLU_OP_GEGLU_QUICK) GK_SAME_ENUM(gk::glu_op::swiglu_clamp, GGML_GLU_OP_SWIGLU_CLAMP)
GK_SAME_ENUM(gk::glu_op::count, GGML_GLU_OP_COUNT)
GK_SAME_ENUM(gk::flag_input, GGML_TENSOR_FLAG_INPUT) GK_SAME_ENUM(gk::flag_output, GGML_TENSOR_FLAG_OUTPUT)
GK_SAME_ENUM(gk::flag_param, GGML_TENSOR_FLAG_PARAM) GK_SAME_ENUM(gk::flag_loss, GGML_TENSOR_FLAG_LOSS)
GK_SAME_ENUM(gk::flag_compute, GGML_TENSOR_FLAG_COMPUTE)
GK_SAME_ENUM(gk::rope_type_normal, GGML_ROPE_TYPE_NORMAL) GK_SAME_ENUM(gk::rope_type_neox, GGML_ROPE_TYPE_NEOX)
GK_SAME_ENUM(gk::rope_type_mrope, GGML_ROPE_TYPE_MROPE) GK_SAME_ENUM(gk::rope_type_vision, GGML_ROPE_TYPE_VISION)
GK_SAME_ENUM(gk::rope_type_imrope, GGML_ROPE_TYPE_IMROPE)
GK_SAME_ENUM(gk::sort_order::asc, GGML_SORT_ORDER_ASC) GK_SAME_ENUM(gk::sort_order::desc, GGML_SORT_ORDER_DESC)
GK_SAME_ENUM(gk::tri_type::upper_diag, GGML_TRI_TYPE_UPPER_DIAG) GK_SAME_ENUM(gk::tri_type::upper, GGML_TRI_TYPE_UPPER)
GK_SAME_ENUM(gk::tri_type::lower_diag, GGML_TRI_TYPE_LOWER_DIAG) GK_SAME_ENUM(gk::tri_type::lower, GGML_TRI_TYPE_LOWER)
GK_SAME_ENUM(gk::prec::default_, GGML_PREC_DEFAULT) GK_SAME_ENUM(gk::prec::f32, GGML_PREC_F32)
GK_SAME_ENUM(gk::pool_op::max, GGML_OP_POOL_MAX) GK_SAME_ENUM(gk::pool_op::avg, GGML_OP_POOL_AVG)
GK_SAME_ENUM(gk::pool_op::count, GGML_OP_POOL_COUNT)
GK_SAME_ENUM(gk::scale_mode::nearest, GGML_SCALE_MODE_NEAREST) GK_SAME_ENUM(gk::scale_mode::bilinear, GGML_SCALE_MODE_BILINEAR)
GK_SAME_ENUM(gk::scale_mode::bicubic, GGML_SCALE_MODE_BICUBIC) GK_SAME_ENUM(gk::scale_mode::count, GGML_SCALE_MODE_COUNT)
GK_SAME_ENUM(gk::scale_flag_align_corners, GGML_SCALE_FLAG_ALIGN_CORNERS)
GK_SAME_ENUM(gk::scale_flag_antialias, GGML_SCALE_FLAG_ANTIALIAS)
GK_SAME_ENUM(gk::n_tasks_max, GGML_N_TASKS_MAX)
#undef GK_SAME_ENUM
static_assert(sizeof(gk::custom_params<gk::custom1_fn>) == 24 && offsetof(gk::custom_params<gk::custom1_fn>, n_tasks) == 8 &&
              offsetof(gk::custom_params<gk::custom1_fn>, userdata) == 16,
              "custom op parameters must keep the reference's {fun, n_tasks, userdata} layout");

namespace {

using ne4 = std::array<std::int64_t, 4>;
constexpr gk::type f32 = gk::type::f32, f16 = gk::type::f16, i32 = gk::type::i32;

// The same leaves in a gk context and a ggml context (both no_alloc), and a map from each
// gk tensor to its ggml twin so source slots and aliases can be compared by identity.
struct both {
  gk::context g{gk::context_params{16u << 20, nullptr, true}};
  ggml_context* r = ggml_init(ggml_init_params{16u << 20, nullptr, true});
  std::map<const gk::tensor*, const ggml_tensor*> twin;
  int matched = 0;

  both() = default;
  both(const both&) = delete;
  ~both() { ggml_free(r); }

  struct pr {
    gk::tensor* g;
    ggml_tensor* r;
  };

  pr leaf(gk::type t, ne4 ne) {
    pr p{g.new_tensor(t, 4, ne.data()), ggml_new_tensor(r, static_cast<ggml_type>(t), 4, ne.data())};
    twin[p.g] = p.r;
    return p;
  }

  const ggml_tensor* twin_of(const gk::tensor* t) const {
    auto it = twin.find(t);
    return it == twin.end() ? nullptr : it->second;
  }

  // Every way the two nodes differ, or "" if they are the same node. op_params bytes in
  // [skip_lo, skip_hi) are not compared (the padding inside a custom op's parameters).
  std::string differences(const gk::tensor* a, const ggml_tensor* b, int skip_lo = -1, int skip_hi = -1) const {
    std::string d;
    auto add = [&](const std::string& s) { d += (d.empty() ? "" : "; ") + s; };
    if (static_cast<int>(a->type) != static_cast<int>(b->type))
      add("type " + std::to_string(static_cast<int>(a->type)) + " vs " + std::to_string(b->type));
    for (int i = 0; i < 4; ++i) {
      if (a->ne[i] != b->ne[i])
        add("ne[" + std::to_string(i) + "] " + std::to_string(a->ne[i]) + " vs " + std::to_string(b->ne[i]));
      if (a->nb[i] != b->nb[i])
        add("nb[" + std::to_string(i) + "] " + std::to_string(a->nb[i]) + " vs " + std::to_string(b->nb[i]));
    }
    if (static_cast<int>(a->op) != static_cast<int>(b->op))
      add("op " + std::string(gk::name(a->op)) + " vs " + ggml_op_name(b->op));
    const auto* pa = reinterpret_cast<const unsigned char*>(a->op_params);
    const auto* pb = reinterpret_cast<const unsigned char*>(b->op_params);
    for (int i = 0; i < GGML_MAX_OP_PARAMS; ++i)
      if ((i < skip_lo || i >= skip_hi) && pa[i] != pb[i]) {
        add("op_params byte " + std::to_string(i) + " (slot " + std::to_string(i / 4) + ") " + std::to_string(pa[i]) +
            " vs " + std::to_string(pb[i]));
        break;
      }
    if (a->flags != b->flags) add("flags " + std::to_string(a->flags) + " vs " + std::to_string(b->flags));
    for (int i = 0; i < GGML_MAX_SRC; ++i) {
      const bool ga = a->src[i] != nullptr, gb = b->src[i] != nullptr;
      if (ga != gb) add("src[" + std::to_string(i) + "] set " + std::to_string(ga) + " vs " + std::to_string(gb));
      else if (ga && twin_of(a->src[i]) != b->src[i]) add("src[" + std::to_string(i) + "] is a different tensor");
    }
    if ((a->view_src != nullptr) != (b->view_src != nullptr)) add("one is a view, the other not");
    else if (a->view_src && twin_of(a->view_src) != b->view_src) add("view_src is a different tensor");
    if (a->view_offs != b->view_offs)
      add("view_offs " + std::to_string(a->view_offs) + " vs " + std::to_string(b->view_offs));
    return d;
  }

  // Checks the two nodes match and records them as twins (so they can be used as sources).
  pr same(gk::tensor* a, ggml_tensor* b, int skip_lo = -1, int skip_hi = -1) {
    REQUIRE(a != nullptr);
    REQUIRE(b != nullptr);
    const std::string d = differences(a, b, skip_lo, skip_hi);
    INFO("gk " << gk::describe(a) << " op " << gk::name(a->op));
    CHECK(d == "");
    if (d.empty()) ++matched;
    twin[a] = b;
    return {a, b};
  }
};

void report(const char* what, const both& B) { std::printf("builders: %-28s %3d nodes identical\n", what, B.matched); }

}  // namespace

// A bad call throws gk::error and leaves the context as it found it (nothing half-built).
#define BAD(B, EXPR)                                         \
  do {                                                       \
    const std::size_t used_ = (B).g.used();                  \
    const std::size_t count_ = (B).g.tensors().size();       \
    CHECK_THROWS_AS((void)(EXPR), gk::error);                \
    CHECK((B).g.used() == used_);                            \
    CHECK((B).g.tensors().size() == count_);                 \
  } while (0)

TEST_CASE("op, unary and glu names are the reference's, lower-cased") {
  auto lower = [](const char* s) {
    std::string r(s);
    for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return r;
  };
  int bad = 0, shifted = 0;
  for (int i = 0; i < GGML_OP_COUNT; ++i) {
    const std::string want = lower(ggml_op_name(static_cast<ggml_op>(i)));
    INFO("op " << i);
    CHECK(std::string(gk::name(static_cast<gk::op>(i))) == want);
    bad += std::string(gk::name(static_cast<gk::op>(i))) != want;
    // planted control: a table off by one must be caught by the same comparison
    shifted += std::string(gk::name(static_cast<gk::op>(i + 1))) != want;
  }
  for (int i = 0; i < GGML_UNARY_OP_COUNT; ++i)
    CHECK(std::string(gk::name(static_cast<gk::unary_op>(i))) == lower(ggml_unary_op_name(static_cast<ggml_unary_op>(i))));
  for (int i = 0; i < GGML_GLU_OP_COUNT; ++i)
    CHECK(std::string(gk::name(static_cast<gk::glu_op>(i))) == lower(ggml_glu_op_name(static_cast<ggml_glu_op>(i))));
  CHECK(bad == 0);
  CHECK(shifted == GGML_OP_COUNT);
  std::printf("builders: names: %d ops, %d unary, %d glu match; planted off-by-one table: %d/%d caught\n",
              GGML_OP_COUNT, GGML_UNARY_OP_COUNT, GGML_GLU_OP_COUNT, shifted, GGML_OP_COUNT);
}

// ---------------------------------------------------------------------------------------
// Views
// ---------------------------------------------------------------------------------------

TEST_CASE("views: reshape, view, permute, transpose") {
  both B;
  for (gk::type t : {f32, f16, gk::type::q4_0}) {
    const std::int64_t n0 = t == gk::type::q4_0 ? 64 : 12;
    auto a = B.leaf(t, {n0, 5, 2, 3});
    B.same(gk::reshape_1d(B.g, a.g, n0 * 30), ggml_reshape_1d(B.r, a.r, n0 * 30));
    B.same(gk::reshape_2d(B.g, a.g, n0 * 2, 15), ggml_reshape_2d(B.r, a.r, n0 * 2, 15));
    B.same(gk::reshape_3d(B.g, a.g, n0, 10, 3), ggml_reshape_3d(B.r, a.r, n0, 10, 3));
    auto r4 = B.same(gk::reshape_4d(B.g, a.g, n0, 3, 5, 2), ggml_reshape_4d(B.r, a.r, n0, 3, 5, 2));
    auto like = B.leaf(f32, {n0 * 3, 10, 1, 1});
    B.same(gk::reshape(B.g, r4.g, like.g), ggml_reshape(B.r, r4.r, like.r));
    const std::size_t nb1 = a.g->nb[1], nb2 = a.g->nb[2];
    B.same(gk::view_1d(B.g, a.g, n0 * 2, nb1), ggml_view_1d(B.r, a.r, n0 * 2, nb1));
    B.same(gk::view_2d(B.g, a.g, n0, 3, nb1, 2 * nb1), ggml_view_2d(B.r, a.r, n0, 3, nb1, 2 * nb1));
    B.same(gk::view_3d(B.g, a.g, n0, 2, 2, nb1 * 2, nb2, nb1), ggml_view_3d(B.r, a.r, n0, 2, 2, nb1 * 2, nb2, nb1));
    auto v4 = B.same(gk::view_4d(B.g, a.g, n0, 4, 2, 3, nb1, nb2, a.g->nb[3], nb1),
                     ggml_view_4d(B.r, a.r, n0, 4, 2, 3, nb1, nb2, a.r->nb[3], nb1));
    // a view of a view resolves to the base, with the offsets added
    B.same(gk::view_2d(B.g, v4.g, n0, 2, nb1, nb1), ggml_view_2d(B.r, v4.r, n0, 2, nb1, nb1));
    if (t != gk::type::q4_0) {
      auto p = B.same(gk::permute(B.g, a.g, 1, 2, 0, 3), ggml_permute(B.r, a.r, 1, 2, 0, 3));
      B.same(gk::permute(B.g, a.g, 0, 2, 1, 3), ggml_permute(B.r, a.r, 0, 2, 1, 3));
      B.same(gk::permute(B.g, p.g, 3, 0, 2, 1), ggml_permute(B.r, p.r, 3, 0, 2, 1));
      auto tr = B.same(gk::transpose(B.g, a.g), ggml_transpose(B.r, a.r));
      B.same(gk::transpose(B.g, tr.g), ggml_transpose(B.r, tr.r));
      BAD(B, gk::reshape_2d(B.g, tr.g, 5, n0 * 6));  // not contiguous
    }
    BAD(B, gk::reshape_2d(B.g, a.g, n0, 29));                                // wrong element count
    BAD(B, gk::view_2d(B.g, a.g, n0, 30, nb1, nb1));                         // runs one row past the end
    BAD(B, gk::view_1d(B.g, a.g, n0 * 30, 1));                               // one byte past the end
    BAD(B, gk::view_4d(B.g, a.g, n0, 5, 2, 4, nb1, nb2, a.g->nb[3], 0));     // one image past the end
    BAD(B, gk::view_2d(B.g, a.g, n0, 2, nb2 * 6, 0));                        // strided past the end
    BAD(B, gk::permute(B.g, a.g, 0, 1, 1, 3));                               // not a permutation
  }
  report("views", B);
}

// ---------------------------------------------------------------------------------------
// Backward ops, set, diag
// ---------------------------------------------------------------------------------------

TEST_CASE("builders: backward ops") {
  both B;
  for (gk::type t : {f32, f16}) {
    for (auto [an, bn] : std::vector<std::pair<ne4, ne4>>{
             {{8, 6, 4, 2}, {8, 3, 1, 2}}, {{8, 6, 4, 2}, {4, 1, 1, 1}}, {{7, 1, 1, 1}, {7, 1, 1, 1}}, {{33, 3, 1, 1}, {1, 1, 1, 1}}}) {
      auto a = B.leaf(t, an), b = B.leaf(t, bn);
      B.same(gk::repeat_back(B.g, a.g, b.g), ggml_repeat_back(B.r, a.r, b.r));
    }
    for (ne4 n : {ne4{7, 3, 1, 1}, ne4{33, 2, 3, 1}, ne4{1, 1, 1, 1}, ne4{257, 3, 2, 2}}) {
      auto a = B.leaf(t, n), b = B.leaf(t, n);
      B.same(gk::silu_back(B.g, a.g, b.g), ggml_silu_back(B.r, a.r, b.r));
      B.same(gk::rms_norm_back(B.g, a.g, b.g, 1e-6f), ggml_rms_norm_back(B.r, a.r, b.r, 1e-6f));
      B.same(gk::soft_max_ext_back(B.g, a.g, b.g, 0.5f, 0.0f), ggml_soft_max_ext_back(B.r, a.r, b.r, 0.5f, 0.0f));
      B.same(gk::soft_max_ext_back_inplace(B.g, a.g, b.g, 0.125f, 8.0f),
             ggml_soft_max_ext_back_inplace(B.r, a.r, b.r, 0.125f, 8.0f));
    }
  }
  for (auto [an, cn] : std::vector<std::pair<ne4, ne4>>{{{7, 5, 1, 1}, {7, 11, 1, 1}}, {{1, 1, 1, 1}, {1, 3, 1, 1}}}) {
    auto a = B.leaf(f32, an), b = B.leaf(i32, {an[1], 1, 1, 1}), c = B.leaf(f32, cn);
    B.same(gk::get_rows_back(B.g, a.g, b.g, c.g), ggml_get_rows_back(B.r, a.r, b.r, c.r));
  }
  for (ne4 n : {ne4{10, 7, 1, 1}, ne4{3, 2, 4, 1}}) {
    auto l = B.leaf(f32, {1, 1, 1, 1}), b = B.leaf(f32, n), c = B.leaf(f32, n);
    B.same(gk::cross_entropy_loss(B.g, b.g, c.g), ggml_cross_entropy_loss(B.r, b.r, c.r));
    B.same(gk::cross_entropy_loss_back(B.g, l.g, b.g, c.g), ggml_cross_entropy_loss_back(B.r, l.r, b.r, c.r));
  }
  auto a = B.leaf(f32, {8, 6, 1, 1}), b3 = B.leaf(f32, {3, 6, 1, 1}), b = B.leaf(f32, {8, 5, 1, 1});
  BAD(B, gk::repeat_back(B.g, a.g, b3.g));
  BAD(B, gk::silu_back(B.g, a.g, b.g));
  BAD(B, gk::rms_norm_back(B.g, a.g, b.g, 1e-6f));
  BAD(B, gk::soft_max_ext_back(B.g, a.g, b.g, 1.0f, 0.0f));
  auto idx = B.leaf(i32, {6, 1, 1, 1}), idxf = B.leaf(f32, {6, 1, 1, 1}), c9 = B.leaf(f32, {9, 4, 1, 1});
  BAD(B, gk::get_rows_back(B.g, a.g, idx.g, c9.g));   // row lengths differ
  BAD(B, gk::get_rows_back(B.g, a.g, idxf.g, b.g));   // indices not i32
  BAD(B, gk::cross_entropy_loss(B.g, a.g, b.g));
  BAD(B, gk::cross_entropy_loss_back(B.g, a.g, b.g, b.g));  // loss gradient not a scalar
  report("backward ops", B);
}

TEST_CASE("builders: set, diag") {
  both B;
  for (gk::type t : {f32, f16}) {
    auto a = B.leaf(t, {16, 8, 2, 1}), b = B.leaf(t, {4, 3, 1, 1}), v = B.leaf(t, {7, 1, 1, 1});
    const std::size_t off = 2 * a.g->nb[1] + 4 * a.g->nb[0];
    B.same(gk::set(B.g, a.g, b.g, a.g->nb[1], a.g->nb[2], a.g->nb[3], off),
           ggml_set(B.r, a.r, b.r, a.r->nb[1], a.r->nb[2], a.r->nb[3], off));
    B.same(gk::set_inplace(B.g, a.g, b.g, 2 * a.g->nb[1], a.g->nb[2], a.g->nb[3], off),
           ggml_set_inplace(B.r, a.r, b.r, 2 * a.r->nb[1], a.r->nb[2], a.r->nb[3], off));
    B.same(gk::set_1d(B.g, a.g, v.g, 8), ggml_set_1d(B.r, a.r, v.r, 8));
    B.same(gk::set_1d_inplace(B.g, a.g, v.g, 0), ggml_set_1d_inplace(B.r, a.r, v.r, 0));
    B.same(gk::set_2d(B.g, a.g, b.g, a.g->nb[1], 16), ggml_set_2d(B.r, a.r, b.r, a.r->nb[1], 16));
    B.same(gk::set_2d_inplace(B.g, a.g, b.g, 3 * a.g->nb[1], 0), ggml_set_2d_inplace(B.r, a.r, b.r, 3 * a.r->nb[1], 0));
    auto big = B.leaf(t, {300, 1, 1, 1});
    BAD(B, gk::set_1d(B.g, a.g, big.g, 0));                       // more elements than a
    BAD(B, gk::set_1d(B.g, a.g, v.g, std::size_t{1} << 30));      // offset too large for the reference's slot
    BAD(B, gk::set_2d(B.g, a.g, b.g, a.g->nb[2], a.g->nb[2]));    // b written past the end of a
    for (ne4 n : {ne4{7, 1, 3, 2}, ne4{1, 1, 1, 1}, ne4{33, 1, 1, 1}}) {
      auto d = B.leaf(t, n);
      B.same(gk::diag(B.g, d.g), ggml_diag(B.r, d.r));
    }
    BAD(B, gk::diag(B.g, b.g));
  }
  report("set, diag", B);
}

TEST_CASE("builders: rope back") {
  both B;
  for (gk::type t : {f32, f16}) {
    auto a = B.leaf(t, {64, 8, 5, 1}), pos = B.leaf(i32, {5, 1, 1, 1}), ff = B.leaf(f32, {32, 1, 1, 1});
    for (int mode : {0, 2})
      for (auto c : {both::pr{nullptr, nullptr}, ff})
        B.same(gk::rope_ext_back(B.g, a.g, pos.g, c.g, 64, mode, 4096, 10000.0f, 0.5f, 1.0f, 1.0f, 32.0f, 1.0f),
               ggml_rope_ext_back(B.r, a.r, pos.r, c.r, 64, mode, 4096, 10000.0f, 0.5f, 1.0f, 1.0f, 32.0f, 1.0f));
    B.same(gk::rope_ext_back(B.g, a.g, pos.g, nullptr, 32, 2, 0, 500000.0f, 1.0f, 0.0f, 0.75f, 32.0f, 1.0f),
           ggml_rope_ext_back(B.r, a.r, pos.r, nullptr, 32, 2, 0, 500000.0f, 1.0f, 0.0f, 0.75f, 32.0f, 1.0f));
    auto pos4 = B.leaf(i32, {20, 1, 1, 1});
    int sections[4] = {16, 8, 8, 0};
    for (int mode : {8, 24, 40})
      B.same(gk::rope_multi_back(B.g, a.g, pos4.g, nullptr, 64, sections, mode, 4096, 10000.0f, 1.0f, 0.0f, 1.0f,
                                 32.0f, 1.0f),
             ggml_rope_multi_back(B.r, a.r, pos4.r, nullptr, 64, sections, mode, 4096, 10000.0f, 1.0f, 0.0f, 1.0f,
                                  32.0f, 1.0f));
    // sections are stored only when the mode is a multi-rope one, as the reference does
    B.same(gk::rope_multi_back(B.g, a.g, pos.g, nullptr, 64, sections, 0, 4096, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f),
           ggml_rope_multi_back(B.r, a.r, pos.r, nullptr, 64, sections, 0, 4096, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f,
                                1.0f));
    auto posf = B.leaf(f32, {5, 1, 1, 1}), ff4 = B.leaf(f32, {4, 1, 1, 1});
    BAD(B, gk::rope_ext_back(B.g, a.g, pos4.g, nullptr, 64, 0, 0, 1e4f, 1, 0, 1, 32, 1));   // positions count
    BAD(B, gk::rope_ext_back(B.g, a.g, posf.g, nullptr, 64, 0, 0, 1e4f, 1, 0, 1, 32, 1));   // positions not i32
    BAD(B, gk::rope_ext_back(B.g, a.g, pos.g, nullptr, 64, 1, 0, 1e4f, 1, 0, 1, 32, 1));    // mode & 1
    BAD(B, gk::rope_ext_back(B.g, a.g, pos.g, ff4.g, 64, 0, 0, 1e4f, 1, 0, 1, 32, 1));      // too few factors
    BAD(B, gk::rope_multi_back(B.g, a.g, pos.g, nullptr, 64, sections, 8, 0, 1e4f, 1, 0, 1, 32, 1));  // 4 per token
  }
  report("rope_back", B);
}

TEST_CASE("builders: flash_attn_back (the reference aborts; checked against its shape rule)") {
  // ggml_flash_attn_back aborts before building ("adapt to ggml_flash_attn_ext() changes"),
  // so the result is checked against the rule written after the abort: q, k, v gradients
  // as f32, each padded to 16 bytes, concatenated in one vector.
  gk::context g{gk::context_params{1u << 20, nullptr, true}};
  struct tcase {
    ne4 q, k, v;
    std::int64_t want;
  };
  for (auto [qn, kn, vn, want] : {tcase{{16, 7, 4, 1}, {16, 9, 2, 1}, {9, 16, 2, 1}, 448 + 288 + 288},
                                  tcase{{5, 3, 1, 1}, {5, 7, 1, 1}, {7, 5, 1, 1}, (64 + 144 + 144) / 4}}) {
    auto* q = g.new_tensor(f32, 4, qn.data());
    auto* k = g.new_tensor(f32, 4, kn.data());
    auto* v = g.new_tensor(f32, 4, vn.data());
    auto* d = g.new_tensor(f32, 4, qn.data());
    for (bool masked : {false, true}) {
      gk::tensor* r = gk::flash_attn_back(g, q, k, v, d, masked);
      CHECK(r->op == gk::op::flash_attn_back);
      CHECK(r->type == f32);
      CHECK((r->ne[0] == want && r->ne[1] == 1 && r->ne[2] == 1 && r->ne[3] == 1));
      CHECK(r->param_i32(0) == (masked ? 1 : 0));
      CHECK((r->src[0] == q && r->src[1] == k && r->src[2] == v && r->src[3] == d && r->src[4] == nullptr));
    }
    const std::size_t used = g.used();
    CHECK_THROWS_AS(gk::flash_attn_back(g, q, k, q, d, false), gk::error);  // v not [M, D, ...]
    CHECK_THROWS_AS(gk::flash_attn_back(g, q, k, v, k, false), gk::error);  // d not q's shape
    CHECK(g.used() == used);
  }
  std::printf("builders: %-28s checked against the reference's shape rule (reference aborts)\n", "flash_attn_back");
}

// ---------------------------------------------------------------------------------------
// Convolution and pooling
// ---------------------------------------------------------------------------------------

TEST_CASE("builders: im2col, col2im, direct and transposed convolutions") {
  both B;
  for (gk::type t : {f32, f16}) {
    // 2D: kernel [KW, KH, IC, OC], input [W, H, IC, N]
    auto k2 = B.leaf(t, {3, 3, 4, 8}), x2 = B.leaf(t, {17, 13, 4, 2}), k5 = B.leaf(t, {5, 2, 4, 3});
    for (auto dst : {f32, f16}) {
      B.same(gk::im2col(B.g, k2.g, x2.g, 1, 1, 1, 1, 1, 1, true, dst),
             ggml_im2col(B.r, k2.r, x2.r, 1, 1, 1, 1, 1, 1, true, static_cast<ggml_type>(dst)));
      B.same(gk::im2col(B.g, k5.g, x2.g, 2, 3, 0, 2, 1, 2, true, dst),
             ggml_im2col(B.r, k5.r, x2.r, 2, 3, 0, 2, 1, 2, true, static_cast<ggml_type>(dst)));
    }
    // 1D: kernel [K, IC, OC], input [L, IC, N]
    auto k1 = B.leaf(t, {5, 4, 6, 1}), x1 = B.leaf(t, {33, 4, 3, 1});
    B.same(gk::im2col(B.g, k1.g, x1.g, 2, 0, 2, 0, 1, 0, false, f16),
           ggml_im2col(B.r, k1.r, x1.r, 2, 0, 2, 0, 1, 0, false, GGML_TYPE_F16));
    B.same(gk::im2col(B.g, k1.g, x1.g, 1, 0, 0, 0, 3, 0, false, f32),
           ggml_im2col(B.r, k1.r, x1.r, 1, 0, 0, 0, 3, 0, false, GGML_TYPE_F32));
    BAD(B, gk::im2col(B.g, k2.g, x1.g, 1, 1, 0, 0, 1, 1, true, f32));   // channel counts differ
    BAD(B, gk::im2col(B.g, k1.g, x2.g, 1, 0, 0, 0, 1, 0, false, f32));  // 1D channel counts differ
    auto tiny = B.leaf(t, {2, 2, 4, 1});
    BAD(B, gk::im2col(B.g, k2.g, tiny.g, 1, 1, 0, 0, 1, 1, true, f32));  // input smaller than the kernel
    BAD(B, gk::im2col(B.g, k2.g, x2.g, 0, 1, 0, 0, 1, 1, true, f32));    // zero stride

    auto cols = B.leaf(f32, {36, 17, 13, 2});
    const std::int64_t in_ne[4] = {17, 13, 4, 2};
    B.same(gk::im2col_back(B.g, cols.g, k2.g, in_ne, 1, 1, 1, 1, 1, 1, true),
           ggml_im2col_back(B.r, cols.r, k2.r, const_cast<std::int64_t*>(in_ne), 1, 1, 1, 1, 1, 1, true));

    // 3D: kernel [KW, KH, KD, OC*IC], input [W, H, D, N*IC]
    auto k3 = B.leaf(t, {3, 3, 3, 4 * 5}), x3 = B.leaf(t, {9, 8, 7, 4 * 2}), k3b = B.leaf(t, {2, 3, 1, 4 * 1});
    B.same(gk::im2col_3d(B.g, k3.g, x3.g, 4, 1, 1, 1, 1, 1, 1, 1, 1, 1, f32),
           ggml_im2col_3d(B.r, k3.r, x3.r, 4, 1, 1, 1, 1, 1, 1, 1, 1, 1, GGML_TYPE_F32));
    B.same(gk::im2col_3d(B.g, k3b.g, x3.g, 4, 2, 1, 3, 0, 1, 0, 1, 2, 1, f16),
           ggml_im2col_3d(B.r, k3b.r, x3.r, 4, 2, 1, 3, 0, 1, 0, 1, 2, 1, GGML_TYPE_F16));
    B.same(gk::conv_3d_direct(B.g, k3.g, x3.g, 1, 1, 1, 1, 1, 1, 1, 1, 1, 4, 2, 5),
           ggml_conv_3d_direct(B.r, k3.r, x3.r, 1, 1, 1, 1, 1, 1, 1, 1, 1, 4, 2, 5));
    B.same(gk::conv_3d_direct(B.g, k3b.g, x3.g, 2, 1, 2, 0, 1, 0, 1, 2, 1, 4, 2, 1),
           ggml_conv_3d_direct(B.r, k3b.r, x3.r, 2, 1, 2, 0, 1, 0, 1, 2, 1, 4, 2, 1));
    auto small3 = B.leaf(t, {2, 2, 2, 4 * 2});
    BAD(B, gk::im2col_3d(B.g, k3.g, small3.g, 4, 1, 1, 1, 0, 0, 0, 1, 1, 1, f32));  // input too small
    BAD(B, gk::im2col_3d(B.g, k3.g, x3.g, 3, 1, 1, 1, 0, 0, 0, 1, 1, 1, f32));      // IC does not divide
    BAD(B, gk::conv_3d_direct(B.g, k3.g, x3.g, 1, 1, 1, 0, 0, 0, 1, 1, 1, 4, 2, 4));  // a->ne[3] != c*oc
    BAD(B, gk::conv_3d_direct(B.g, k3.g, x3.g, 1, 1, 1, 0, 0, 0, 1, 1, 1, 4, 3, 5));  // b->ne[3] != c*n

    // direct 2D
    B.same(gk::conv_2d_direct(B.g, k2.g, x2.g, 1, 1, 1, 1, 1, 1), ggml_conv_2d_direct(B.r, k2.r, x2.r, 1, 1, 1, 1, 1, 1));
    B.same(gk::conv_2d_direct(B.g, k5.g, x2.g, 2, 3, 0, 2, 1, 2), ggml_conv_2d_direct(B.r, k5.r, x2.r, 2, 3, 0, 2, 1, 2));
    BAD(B, gk::conv_2d_direct(B.g, k2.g, x1.g, 1, 1, 0, 0, 1, 1));  // channel counts differ (4 vs 3)
    BAD(B, gk::conv_2d_direct(B.g, k2.g, x2.g, 1, 0, 0, 0, 1, 1));  // zero stride

    // col2im_1d: a [K*oc, T_in]
    for (auto [K, oc, T, s0, p0] : std::vector<std::array<int, 5>>{{3, 5, 10, 2, 1}, {4, 1, 1, 1, 0}, {7, 3, 9, 3, 3}}) {
      auto a = B.leaf(t, {K * oc, T, 1, 1});
      B.same(gk::col2im_1d(B.g, a.g, s0, oc, p0), ggml_col2im_1d(B.r, a.r, s0, oc, p0));
    }
    auto ca = B.leaf(t, {15, 10, 1, 1});
    BAD(B, gk::col2im_1d(B.g, ca.g, 2, 4, 0));                        // 15 is not whole blocks of 4
    gk::tensor* ca_t = gk::transpose(B.g, ca.g);
    BAD(B, gk::col2im_1d(B.g, ca_t, 2, 5, 0));                        // not contiguous
    BAD(B, gk::col2im_1d(B.g, ca.g, 1, 5, 20));                       // output length not positive

    // conv_transpose_1d: a [K, OC, IC], b [L, IC]
    auto kt = B.leaf(t, {3, 5, 4, 1}), xt = B.leaf(t, {10, 4, 1, 1});
    for (int s0 : {1, 2, 3})
      B.same(gk::conv_transpose_1d(B.g, kt.g, xt.g, s0, 0, 1), ggml_conv_transpose_1d(B.r, kt.r, xt.r, s0, 0, 1));
    BAD(B, gk::conv_transpose_1d(B.g, kt.g, xt.g, 1, 1, 1));  // p0 != 0
    BAD(B, gk::conv_transpose_1d(B.g, kt.g, x1.g, 1, 0, 1));  // b not a matrix / IC differs

    // depthwise: a [KW, KH, 1, C], b [W, H, C, N]; also channels-innermost b (CWHN)
    auto kd = B.leaf(t, {3, 3, 1, 6}), xd = B.leaf(t, {17, 13, 6, 2}), cwhn = B.leaf(t, {6, 17, 13, 2});
    B.same(gk::conv_2d_dw_direct(B.g, kd.g, xd.g, 1, 1, 1, 1, 1, 1), ggml_conv_2d_dw_direct(B.r, kd.r, xd.r, 1, 1, 1, 1, 1, 1));
    B.same(gk::conv_2d_dw_direct(B.g, kd.g, xd.g, 2, 1, 0, 2, 2, 1), ggml_conv_2d_dw_direct(B.r, kd.r, xd.r, 2, 1, 0, 2, 2, 1));
    auto perm = B.same(gk::permute(B.g, cwhn.g, 2, 0, 1, 3), ggml_permute(B.r, cwhn.r, 2, 0, 1, 3));
    B.same(gk::conv_2d_dw_direct(B.g, kd.g, perm.g, 1, 2, 1, 0, 1, 1),
           ggml_conv_2d_dw_direct(B.r, kd.r, perm.r, 1, 2, 1, 0, 1, 1));
    BAD(B, gk::conv_2d_dw_direct(B.g, k2.g, xd.g, 1, 1, 0, 0, 1, 1));  // kernel not [KW, KH, 1, C]

    // transposed 2D: a [KW, KH, OC, IC], b [W, H, IC, N]
    auto ktt = B.leaf(t, {3, 3, 5, 4}), xtt = B.leaf(t, {7, 6, 4, 2});
    for (int s : {1, 2, 3})
      B.same(gk::conv_transpose_2d_p0(B.g, ktt.g, xtt.g, s), ggml_conv_transpose_2d_p0(B.r, ktt.r, xtt.r, s));
    BAD(B, gk::conv_transpose_2d_p0(B.g, ktt.g, xd.g, 1));  // IC differs
  }
  report("im2col, conv", B);
}

TEST_CASE("builders: pooling") {
  both B;
  for (gk::type t : {f32, f16}) {
    auto a = B.leaf(t, {33, 3, 2, 1}), img = B.leaf(t, {17, 13, 3, 2}), one = B.leaf(t, {4, 4, 1, 1});
    B.same(gk::pool_1d(B.g, a.g, gk::pool_op::max, 3, 2, 1), ggml_pool_1d(B.r, a.r, GGML_OP_POOL_MAX, 3, 2, 1));
    B.same(gk::pool_1d(B.g, a.g, gk::pool_op::avg, 2, 2, 0), ggml_pool_1d(B.r, a.r, GGML_OP_POOL_AVG, 2, 2, 0));
    B.same(gk::pool_1d(B.g, a.g, gk::pool_op::avg, 33, 1, 0), ggml_pool_1d(B.r, a.r, GGML_OP_POOL_AVG, 33, 1, 0));
    for (float p : {0.0f, 0.5f, 0.75f, 1.0f, 0.25f}) {
      B.same(gk::pool_2d(B.g, img.g, gk::pool_op::max, 3, 3, 2, 2, p, p),
             ggml_pool_2d(B.r, img.r, GGML_OP_POOL_MAX, 3, 3, 2, 2, p, p));
      B.same(gk::pool_2d(B.g, one.g, gk::pool_op::avg, 3, 2, 2, 1, p, 1.5f),
             ggml_pool_2d(B.r, one.r, GGML_OP_POOL_AVG, 3, 2, 2, 1, p, 1.5f));
    }
    auto grad = B.leaf(f32, {9, 7, 3, 2});
    B.same(gk::pool_2d_back(B.g, grad.g, img.g, gk::pool_op::max, 3, 3, 2, 2, 1.0f, 1.0f),
           ggml_pool_2d_back(B.r, grad.r, img.r, GGML_OP_POOL_MAX, 3, 3, 2, 2, 1.0f, 1.0f));
    B.same(gk::pool_2d_back(B.g, grad.g, img.g, gk::pool_op::avg, 2, 3, 2, 1, 0.5f, 0.0f),
           ggml_pool_2d_back(B.r, grad.r, img.r, GGML_OP_POOL_AVG, 2, 3, 2, 1, 0.5f, 0.0f));
    BAD(B, gk::pool_1d(B.g, a.g, gk::pool_op::max, 40, 1, 0));                 // kernel longer than input
    BAD(B, gk::pool_2d(B.g, one.g, gk::pool_op::max, 5, 2, 1, 1, 0.0f, 0.0f)); // width too small
    BAD(B, gk::pool_2d(B.g, one.g, gk::pool_op::max, 2, 2, 0, 1, 0.0f, 0.0f)); // zero stride
  }
  report("pooling", B);
}

// ---------------------------------------------------------------------------------------
// Resampling, padding, roll, timestep embedding
// ---------------------------------------------------------------------------------------

TEST_CASE("builders: upscale, interpolate, pad, roll, timestep_embedding") {
  both B;
  auto a = B.leaf(f32, {8, 6, 3, 2}), odd = B.leaf(f32, {7, 1, 1, 1});
  B.same(gk::upscale(B.g, a.g, 2, gk::scale_mode::nearest), ggml_upscale(B.r, a.r, 2, GGML_SCALE_MODE_NEAREST));
  B.same(gk::upscale(B.g, odd.g, 3, gk::scale_mode::bicubic), ggml_upscale(B.r, odd.r, 3, GGML_SCALE_MODE_BICUBIC));
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // the reference deprecates it; compat still forwards it
  B.same(gk::upscale_ext(B.g, a.g, 13, 5, 3, 2, gk::scale_mode::bilinear),
         ggml_upscale_ext(B.r, a.r, 13, 5, 3, 2, GGML_SCALE_MODE_BILINEAR));
#pragma GCC diagnostic pop
  for (std::uint32_t mode : {0u, 1u, 2u, 1u | gk::scale_flag_align_corners, 1u | gk::scale_flag_antialias,
                             2u | gk::scale_flag_align_corners})
    B.same(gk::interpolate(B.g, a.g, 3, 11, 4, 1, mode), ggml_interpolate(B.r, a.r, 3, 11, 4, 1, mode));
  auto h = B.leaf(f16, {8, 6, 1, 1});
  BAD(B, gk::interpolate(B.g, a.g, 4, 4, 1, 1, 3));                                   // unknown mode
  BAD(B, gk::interpolate(B.g, a.g, 4, 4, 1, 1, 0 | gk::scale_flag_antialias));        // antialias needs bilinear
  BAD(B, gk::upscale(B.g, h.g, 2, gk::scale_mode::nearest));                          // not f32
  BAD(B, gk::upscale(B.g, a.g, 1, gk::scale_mode::nearest));                          // factor must be > 1

  for (gk::type t : {f32, f16}) {
    auto x = B.leaf(t, {7, 3, 2, 1});
    B.same(gk::pad(B.g, x.g, 1, 0, 2, 3), ggml_pad(B.r, x.r, 1, 0, 2, 3));
    B.same(gk::pad_circular(B.g, x.g, 2, 1, 0, 0), ggml_pad_circular(B.r, x.r, 2, 1, 0, 0));
    B.same(gk::pad_ext(B.g, x.g, 1, 2, 3, 4, 0, 1, 2, 0), ggml_pad_ext(B.r, x.r, 1, 2, 3, 4, 0, 1, 2, 0));
    B.same(gk::pad_ext_circular(B.g, x.g, 3, 3, 1, 1, 0, 0, 0, 0), ggml_pad_ext_circular(B.r, x.r, 3, 3, 1, 1, 0, 0, 0, 0));
    BAD(B, gk::pad_ext(B.g, x.g, -5, -5, 0, 0, 0, 0, 0, 0));  // negative result dimension
    auto r = B.leaf(t, {9, 4, 3, 2});
    B.same(gk::roll(B.g, r.g, 2, -3, 1, 0), ggml_roll(B.r, r.r, 2, -3, 1, 0));
    B.same(gk::roll(B.g, r.g, -8, 0, -2, 1), ggml_roll(B.r, r.r, -8, 0, -2, 1));
    BAD(B, gk::roll(B.g, r.g, 9, 0, 0, 0));                          // |shift| must be < ne
    gk::tensor* r_t = gk::transpose(B.g, r.g);
    BAD(B, gk::roll(B.g, r_t, 1, 0, 0, 0));                          // elements not packed
  }
  auto x = B.leaf(f32, {9, 3, 1, 1});
  B.same(gk::pad_reflect_1d(B.g, x.g, 2, 3), ggml_pad_reflect_1d(B.r, x.r, 2, 3));
  B.same(gk::pad_reflect_1d(B.g, x.g, 8, 0), ggml_pad_reflect_1d(B.r, x.r, 8, 0));
  BAD(B, gk::pad_reflect_1d(B.g, x.g, 9, 0));                          // padding must be < ne[0]
  gk::tensor* x_t = gk::transpose(B.g, x.g);
  BAD(B, gk::pad_reflect_1d(B.g, x_t, 1, 1));                          // not contiguous
  BAD(B, gk::pad_reflect_1d(B.g, h.g, 1, 1));                          // not f32

  for (std::int64_t n : {1, 5, 33}) {
    auto ts = B.leaf(f32, {n, 1, 1, 1});
    B.same(gk::timestep_embedding(B.g, ts.g, 64, 10000), ggml_timestep_embedding(B.r, ts.r, 64, 10000));
    B.same(gk::timestep_embedding(B.g, ts.g, 33, 100), ggml_timestep_embedding(B.r, ts.r, 33, 100));
  }
  report("resample, pad, roll, timestep", B);
}

// ---------------------------------------------------------------------------------------
// Windows and relative positions
// ---------------------------------------------------------------------------------------

TEST_CASE("builders: win_part, win_unpart, get_rel_pos, add_rel_pos") {
  both B;
  auto a = B.leaf(f32, {6, 13, 11, 1}), sq = B.leaf(f32, {4, 8, 8, 1});
  for (int w : {1, 4, 5, 14}) B.same(gk::win_part(B.g, a.g, w), ggml_win_part(B.r, a.r, w));
  B.same(gk::win_part(B.g, sq.g, 4), ggml_win_part(B.r, sq.r, 4));
  auto parts = B.leaf(f32, {6, 4, 4, 12});
  B.same(gk::win_unpart(B.g, parts.g, 13, 11, 4), ggml_win_unpart(B.r, parts.r, 13, 11, 4));
  auto h = B.leaf(f16, {6, 13, 11, 1}), a4 = B.leaf(f32, {6, 13, 11, 2});
  BAD(B, gk::win_part(B.g, h.g, 4));   // not f32
  BAD(B, gk::win_part(B.g, a4.g, 4));  // ne[3] != 1
  BAD(B, gk::win_unpart(B.g, h.g, 13, 11, 4));

  for (gk::type t : {f32, f16}) {
    auto rp = B.leaf(t, {8, 13, 1, 1});
    B.same(gk::get_rel_pos(B.g, rp.g, 7, 7), ggml_get_rel_pos(B.r, rp.r, 7, 7));
    BAD(B, gk::get_rel_pos(B.g, rp.g, 7, 6));
    BAD(B, gk::get_rel_pos(B.g, rp.g, 6, 6));
  }
  auto x = B.leaf(f32, {9, 20, 2, 1}), pw = B.leaf(f32, {3, 4, 5, 2}), ph = B.leaf(f32, {3, 4, 5, 2});
  B.same(gk::add_rel_pos(B.g, x.g, pw.g, ph.g), ggml_add_rel_pos(B.r, x.r, pw.r, ph.r));
  B.same(gk::add_rel_pos_inplace(B.g, x.g, pw.g, ph.g), ggml_add_rel_pos_inplace(B.r, x.r, pw.r, ph.r));
  auto ph2 = B.leaf(f32, {3, 5, 4, 2}), pw3 = B.leaf(f32, {3, 4, 5, 3});
  BAD(B, gk::add_rel_pos(B.g, x.g, pw.g, ph2.g));   // pw, ph shapes differ
  BAD(B, gk::add_rel_pos(B.g, x.g, pw3.g, pw3.g));  // pw->ne[3] != a->ne[2]
  report("windows, rel_pos", B);
}

// ---------------------------------------------------------------------------------------
// State-space models and linear attention
// ---------------------------------------------------------------------------------------

TEST_CASE("builders: ssm_conv, ssm_scan") {
  both B;
  for (auto [d_conv, d_inner, n_t, n_s] : std::vector<std::array<std::int64_t, 4>>{{4, 16, 5, 2}, {4, 7, 1, 1}, {3, 33, 0, 3}}) {
    auto sx = B.leaf(f32, {d_conv - 1 + n_t, d_inner, n_s, 1}), c = B.leaf(f32, {d_conv, d_inner, 1, 1});
    B.same(gk::ssm_conv(B.g, sx.g, c.g), ggml_ssm_conv(B.r, sx.r, c.r));
  }
  {
    auto sx = B.leaf(f32, {8, 16, 2, 1}), c = B.leaf(f32, {4, 15, 1, 1}), c9 = B.leaf(f32, {10, 16, 1, 1});
    BAD(B, gk::ssm_conv(B.g, sx.g, c.g));   // d_inner differs
    BAD(B, gk::ssm_conv(B.g, sx.g, c9.g));  // fewer columns than the kernel
  }
  // Mamba-2 (scalar A per head) and Mamba-1 (A per state)
  const std::int64_t d_state = 16, head_dim = 8, n_head = 4, T = 5, n_seqs = 2;
  auto s = B.leaf(f32, {d_state, head_dim, n_head, n_seqs}), x = B.leaf(f32, {head_dim, n_head, T, n_seqs});
  auto dt = B.leaf(f32, {n_head, T, n_seqs, 1}), A2 = B.leaf(f32, {1, n_head, 1, 1}), A1 = B.leaf(f32, {d_state, n_head, 1, 1});
  auto Bm = B.leaf(f32, {d_state, 1, T, n_seqs}), Cm = B.leaf(f32, {d_state, 1, T, n_seqs}), ids = B.leaf(i32, {n_seqs, 1, 1, 1});
  for (std::int64_t K : {1, 3})
    B.same(gk::ssm_scan(B.g, s.g, x.g, dt.g, A2.g, Bm.g, Cm.g, ids.g, K),
           ggml_ssm_scan(B.r, s.r, x.r, dt.r, A2.r, Bm.r, Cm.r, ids.r, K));
  B.same(gk::ssm_scan(B.g, s.g, x.g, dt.g, A1.g, Bm.g, Cm.g, ids.g, 1),
         ggml_ssm_scan(B.r, s.r, x.r, dt.r, A1.r, Bm.r, Cm.r, ids.r, 1));
  auto idsf = B.leaf(f32, {n_seqs, 1, 1, 1}), dtbad = B.leaf(f32, {n_head, T + 1, n_seqs, 1});
  BAD(B, gk::ssm_scan(B.g, s.g, x.g, dt.g, A1.g, Bm.g, Cm.g, ids.g, 2));     // Mamba-1 A needs K == 1
  BAD(B, gk::ssm_scan(B.g, s.g, x.g, dtbad.g, A2.g, Bm.g, Cm.g, ids.g, 1));  // dt token count
  BAD(B, gk::ssm_scan(B.g, s.g, x.g, dt.g, A2.g, Bm.g, Cm.g, idsf.g, 1));    // ids not i32
  BAD(B, gk::ssm_scan(B.g, s.g, x.g, dt.g, A2.g, Bm.g, Cm.g, ids.g, 0));     // K < 1
  report("ssm", B);
}

TEST_CASE("builders: rwkv_wkv6, gated_linear_attn, rwkv_wkv7, gated_delta_net, solve_tri") {
  both B;
  for (auto [S, H, T, n_seqs] : std::vector<std::array<std::int64_t, 4>>{{8, 2, 5, 3}, {64, 1, 1, 1}, {4, 3, 7, 2}}) {
    const ne4 per_token = {S, H, T, 1};  // (clang 14 cannot capture structured bindings)
    auto tok = [&] { return B.leaf(f32, per_token); };
    auto k = tok(), v = tok(), r = tok(), td = tok(), w = tok(), aa = tok(), bb = tok();
    auto tf = B.leaf(f32, {S, H, 1, 1}), state = B.leaf(f32, {S * S * H, n_seqs, 1, 1});
    B.same(gk::rwkv_wkv6(B.g, k.g, v.g, r.g, tf.g, td.g, state.g), ggml_rwkv_wkv6(B.r, k.r, v.r, r.r, tf.r, td.r, state.r));
    B.same(gk::gated_linear_attn(B.g, k.g, v.g, r.g, td.g, state.g, 0.125f),
           ggml_gated_linear_attn(B.r, k.r, v.r, r.r, td.r, state.r, 0.125f));
    B.same(gk::rwkv_wkv7(B.g, r.g, w.g, k.g, v.g, aa.g, bb.g, state.g),
           ggml_rwkv_wkv7(B.r, r.r, w.r, k.r, v.r, aa.r, bb.r, state.r));
    auto bad_state = B.leaf(f32, {S * S * H + 1, n_seqs, 1, 1}), short_v = B.leaf(f32, {S, H, T + 1, 1});
    BAD(B, gk::rwkv_wkv6(B.g, k.g, v.g, r.g, tf.g, td.g, bad_state.g));
    BAD(B, gk::rwkv_wkv6(B.g, k.g, short_v.g, r.g, tf.g, td.g, state.g));
    BAD(B, gk::gated_linear_attn(B.g, k.g, v.g, short_v.g, td.g, state.g, 1.0f));
    BAD(B, gk::rwkv_wkv7(B.g, r.g, w.g, k.g, v.g, short_v.g, bb.g, state.g));
    BAD(B, gk::rwkv_wkv7(B.g, r.g, w.g, k.g, v.g, aa.g, bb.g, bad_state.g));
  }
  for (auto [S, H, Hk, T, n_seqs] : std::vector<std::array<std::int64_t, 5>>{{8, 4, 2, 5, 2}, {16, 1, 1, 1, 1}, {4, 6, 3, 3, 3}}) {
    auto q = B.leaf(f32, {S, Hk, T, n_seqs}), k = B.leaf(f32, {S, Hk, T, n_seqs}), v = B.leaf(f32, {S, H, T, n_seqs});
    auto g1 = B.leaf(f32, {1, H, T, n_seqs}), gv = B.leaf(f32, {S, H, T, n_seqs}), beta = B.leaf(f32, {1, H, T, n_seqs});
    auto state = B.leaf(f32, {S, S, H, n_seqs});
    for (std::int64_t K : {1, 4}) {
      B.same(gk::gated_delta_net(B.g, q.g, k.g, v.g, g1.g, beta.g, state.g, K),
             ggml_gated_delta_net(B.r, q.r, k.r, v.r, g1.r, beta.r, state.r, K));
      B.same(gk::gated_delta_net(B.g, q.g, k.g, v.g, gv.g, beta.g, state.g, K),
             ggml_gated_delta_net(B.r, q.r, k.r, v.r, gv.r, beta.r, state.r, K));
    }
    BAD(B, gk::gated_delta_net(B.g, q.g, k.g, v.g, g1.g, gv.g, state.g, 1));     // beta->ne[0] != 1
    BAD(B, gk::gated_delta_net(B.g, q.g, k.g, v.g, g1.g, beta.g, v.g, 1));       // state shape
    BAD(B, gk::gated_delta_net(B.g, q.g, k.g, v.g, g1.g, beta.g, state.g, 0));   // K < 1
  }
  for (auto [n, m, b2] : std::vector<std::array<std::int64_t, 3>>{{5, 3, 2}, {1, 1, 1}, {33, 7, 3}}) {
    auto a = B.leaf(f32, {n, n, b2, 1}), b = B.leaf(f32, {m, n, b2, 1});
    B.same(gk::solve_tri(B.g, a.g, b.g, true, true, false), ggml_solve_tri(B.r, a.r, b.r, true, true, false));
    BAD(B, gk::solve_tri(B.g, a.g, b.g, false, true, false));  // only left-lower is implemented
    if (m != n) BAD(B, gk::solve_tri(B.g, b.g, b.g, true, true, false));  // a not square
  }
  report("linear attention, solve_tri", B);
}

TEST_CASE("builders: lightning_indexer, dsv4 hyper-connections") {
  both B;
  for (auto [D, nh, nb, nkv, ne3, ne33] : std::vector<std::array<std::int64_t, 6>>{{32, 4, 6, 10, 2, 1}, {32, 4, 6, 10, 2, 2}, {7, 1, 1, 1, 1, 1}}) {
    auto q = B.leaf(f32, {D, nh, nb, ne3}), k = B.leaf(f16, {D, 1, nkv, ne3}), w = B.leaf(f32, {nh, nb, 1, ne3});
    auto mask = B.leaf(f16, {nkv, nb, 1, ne33}), maskf = B.leaf(f32, {nkv, nb, 1, ne33});
    B.same(gk::lightning_indexer(B.g, q.g, k.g, w.g, mask.g), ggml_lightning_indexer(B.r, q.r, k.r, w.r, mask.r));
    BAD(B, gk::lightning_indexer(B.g, q.g, k.g, w.g, maskf.g));  // mask must be f16
    if (nh != 1) BAD(B, gk::lightning_indexer(B.g, q.g, q.g, w.g, mask.g));  // k->ne[1] != 1
  }
  for (std::int64_t T : {1, 7, 33}) {
    auto mixes = B.leaf(f32, {24, T, 1, 1}), scale = B.leaf(f32, {3, 1, 1, 1}), base = B.leaf(f32, {24, 1, 1, 1});
    B.same(gk::dsv4_hc_comb(B.g, mixes.g, scale.g, base.g, 1e-6f, 20), ggml_dsv4_hc_comb(B.r, mixes.r, scale.r, base.r, 1e-6f, 20));
    auto x = B.leaf(f32, {16, 4, T, 1}), w = B.leaf(f32, {4, T, 1, 1});
    B.same(gk::dsv4_hc_pre(B.g, x.g, w.g), ggml_dsv4_hc_pre(B.r, x.r, w.r));
    auto xo = B.leaf(f32, {16, T, 1, 1}), comb = B.leaf(f32, {4, 4, T, 1});
    B.same(gk::dsv4_hc_post(B.g, xo.g, x.g, w.g, comb.g), ggml_dsv4_hc_post(B.r, xo.r, x.r, w.r, comb.r));
    auto m15 = B.leaf(f32, {15, T, 1, 1}), b15 = B.leaf(f32, {15, 1, 1, 1});
    BAD(B, gk::dsv4_hc_comb(B.g, m15.g, scale.g, b15.g, 1e-6f, 20));    // hc == 3, only 4 is supported
    BAD(B, gk::dsv4_hc_comb(B.g, mixes.g, scale.g, base.g, 1e-6f, 0));  // n_iter must be positive
    BAD(B, gk::dsv4_hc_pre(B.g, x.g, comb.g));                           // weights not [hc, T]
    BAD(B, gk::dsv4_hc_post(B.g, xo.g, x.g, w.g, w.g));                  // comb not [hc, hc, T]
  }
  report("lightning_indexer, dsv4", B);
}

// ---------------------------------------------------------------------------------------
// Optimiser steps and custom ops
// ---------------------------------------------------------------------------------------

TEST_CASE("builders: opt_step_adamw, opt_step_sgd") {
  both B;
  for (ne4 n : {ne4{10, 7, 1, 1}, ne4{1, 1, 1, 1}, ne4{33, 2, 3, 4}}) {
    auto a = B.leaf(f32, n), grad = B.leaf(f32, n), m = B.leaf(f32, n), v = B.leaf(f32, n);
    auto p7 = B.leaf(f32, {7, 1, 1, 1}), p2 = B.leaf(f32, {2, 1, 1, 1});
    BAD(B, gk::opt_step_sgd(B.g, a.g, grad.g, p2.g));  // a is not a parameter yet
    a.g->flags |= gk::flag_param;
    ggml_set_param(a.r);
    B.same(gk::opt_step_adamw(B.g, a.g, grad.g, m.g, v.g, p7.g), ggml_opt_step_adamw(B.r, a.r, grad.r, m.r, v.r, p7.r));
    B.same(gk::opt_step_sgd(B.g, a.g, grad.g, p2.g), ggml_opt_step_sgd(B.r, a.r, grad.r, p2.r));
    BAD(B, gk::opt_step_adamw(B.g, a.g, grad.g, m.g, v.g, p2.g));  // 7 parameters
    BAD(B, gk::opt_step_sgd(B.g, a.g, grad.g, p7.g));              // 2 parameters
  }
  report("opt_step", B);
}

namespace {
int custom_calls = 0;
void c1(gk::tensor*, const gk::tensor*, int, int, void*) { ++custom_calls; }
void c2(gk::tensor*, const gk::tensor*, const gk::tensor*, int, int, void*) { ++custom_calls; }
void c3(gk::tensor*, const gk::tensor*, const gk::tensor*, const gk::tensor*, int, int, void*) { ++custom_calls; }
void c0(gk::tensor*, int, int, void*) { ++custom_calls; }
}  // namespace

TEST_CASE("builders: map_custom1/2/3, custom_4d, custom_inplace") {
  both B;
  // The same function address goes to both (gk::tensor is ggml_tensor, so the signatures
  // are one ABI). Bytes 12..15 are the padding after n_tasks: the reference leaves them
  // unspecified, gk zeroes them, so they are not compared.
  auto r1 = reinterpret_cast<ggml_custom1_op_t>(&c1);
  auto r2 = reinterpret_cast<ggml_custom2_op_t>(&c2);
  auto r3 = reinterpret_cast<ggml_custom3_op_t>(&c3);
  auto r0 = reinterpret_cast<ggml_custom_op_t>(&c0);
  int user = 0;
  for (int n_tasks : {gk::n_tasks_max, 1, 7}) {
    auto a = B.leaf(f32, {7, 3, 1, 1}), b = B.leaf(f16, {5, 1, 1, 1}), c = B.leaf(i32, {2, 2, 1, 1});
    B.same(gk::map_custom1(B.g, a.g, &c1, n_tasks, &user), ggml_map_custom1(B.r, a.r, r1, n_tasks, &user), 12, 16);
    B.same(gk::map_custom1_inplace(B.g, a.g, &c1, n_tasks, nullptr), ggml_map_custom1_inplace(B.r, a.r, r1, n_tasks, nullptr), 12, 16);
    B.same(gk::map_custom2(B.g, a.g, b.g, &c2, n_tasks, &user), ggml_map_custom2(B.r, a.r, b.r, r2, n_tasks, &user), 12, 16);
    B.same(gk::map_custom2_inplace(B.g, a.g, b.g, &c2, n_tasks, &user),
           ggml_map_custom2_inplace(B.r, a.r, b.r, r2, n_tasks, &user), 12, 16);
    B.same(gk::map_custom3(B.g, a.g, b.g, c.g, &c3, n_tasks, &user), ggml_map_custom3(B.r, a.r, b.r, c.r, r3, n_tasks, &user), 12, 16);
    B.same(gk::map_custom3_inplace(B.g, a.g, b.g, c.g, &c3, n_tasks, &user),
           ggml_map_custom3_inplace(B.r, a.r, b.r, c.r, r3, n_tasks, &user), 12, 16);
    gk::tensor* gargs[3] = {a.g, b.g, c.g};
    ggml_tensor* rargs[3] = {a.r, b.r, c.r};
    for (int n_args : {0, 1, 3}) {
      B.same(gk::custom_4d(B.g, f16, 5, 6, 7, 1, gargs, n_args, &c0, n_tasks, &user),
             ggml_custom_4d(B.r, GGML_TYPE_F16, 5, 6, 7, 1, rargs, n_args, r0, n_tasks, &user), 12, 16);
      B.same(gk::custom_inplace(B.g, a.g, gargs, n_args, &c0, n_tasks, &user),
             ggml_custom_inplace(B.r, a.r, rargs, n_args, r0, n_tasks, &user), 12, 16);
    }
    BAD(B, gk::map_custom1(B.g, a.g, &c1, 0, nullptr));           // n_tasks must be > 0 or -1
    BAD(B, gk::map_custom2(B.g, a.g, nullptr, &c2, 1, nullptr));  // missing source
    gk::tensor* many[10] = {a.g, a.g, a.g, a.g, a.g, a.g, a.g, a.g, a.g, a.g};
    BAD(B, gk::custom_4d(B.g, f32, 1, 1, 1, 1, many, 10, &c0, 1, nullptr));  // at most 9 sources
    BAD(B, gk::custom_inplace(B.g, a.g, many, 9, &c0, 1, nullptr));          // at most 8 besides a
  }

  // std::function forms: a trampoline as fun, the caller's std::function as userdata.
  auto a = B.leaf(f32, {7, 3, 1, 1}), b = B.leaf(f32, {7, 3, 1, 1}), c = B.leaf(f32, {1, 1, 1, 1});
  int seen = 0;
  gk::custom1_function f1 = [&](gk::tensor* d, const gk::tensor* x, int ith, int nth) { seen += (d && x == a.g) + ith + nth; };
  gk::custom2_function f2 = [&](gk::tensor*, const gk::tensor* x, const gk::tensor* y, int, int) { seen += 10 * (x == a.g && y == b.g); };
  gk::custom3_function f3 = [&](gk::tensor*, const gk::tensor*, const gk::tensor*, const gk::tensor* z, int, int) { seen += 100 * (z == c.g); };
  gk::custom_function f0 = [&](gk::tensor* d, int, int) { seen += 1000 * (d != nullptr); };
  gk::tensor* t1 = gk::map_custom1(B.g, a.g, f1, 2);
  gk::tensor* t2 = gk::map_custom2(B.g, a.g, b.g, f2);
  gk::tensor* t3 = gk::map_custom3(B.g, a.g, b.g, c.g, f3);
  gk::tensor* args[1] = {a.g};
  gk::tensor* t0 = gk::custom_4d(B.g, f32, 3, 1, 1, 1, args, 1, f0);
  gk::tensor* ti = gk::custom_inplace(B.g, b.g, args, 1, f0);
  CHECK((ti->view_src == b.g && ti->src[0] == b.g && ti->src[1] == a.g));
  gk::custom_params<gk::custom1_fn> p1;
  std::memcpy(&p1, t1->op_params, sizeof p1);
  CHECK(p1.n_tasks == 2);
  CHECK(p1.userdata == &f1);
  p1.fun(t1, a.g, 0, 1, p1.userdata);
  gk::custom_params<gk::custom2_fn> p2;
  std::memcpy(&p2, t2->op_params, sizeof p2);
  CHECK(p2.n_tasks == gk::n_tasks_max);
  p2.fun(t2, a.g, b.g, 0, 1, p2.userdata);
  gk::custom_params<gk::custom3_fn> p3;
  std::memcpy(&p3, t3->op_params, sizeof p3);
  p3.fun(t3, a.g, b.g, c.g, 0, 1, p3.userdata);
  gk::custom_params<gk::custom_fn> p0;
  std::memcpy(&p0, t0->op_params, sizeof p0);
  p0.fun(t0, 0, 1, p0.userdata);
  std::memcpy(&p0, ti->op_params, sizeof p0);
  p0.fun(ti, 0, 1, p0.userdata);
  CHECK(seen == 1 + 1 + 10 + 100 + 2 * 1000);
  CHECK((t0->src[0] == a.g && t0->src[1] == nullptr && t0->ne[0] == 3));
  report("custom ops", B);
}

// ---------------------------------------------------------------------------------------
// Planted controls: wrong copies of builders must fail the same comparison
// ---------------------------------------------------------------------------------------

namespace broken {
// conv_2d_direct with the two strides written to each other's op_params slot
gk::tensor* conv_2d_direct_swapped(gk::context& ctx, gk::tensor* a, gk::tensor* b, int s0, int s1, int p0, int p1, int d0, int d1) {
  gk::tensor* r = gk::conv_2d_direct(ctx, a, b, s0, s1, p0, p1, d0, d1);
  r->set_param_i32(0, s1);
  r->set_param_i32(1, s0);
  return r;
}
// pool_2d whose size rule truncates the float padding first (integer arithmetic): a wrong ne
gk::tensor* pool_2d_int_padding(gk::context& ctx, gk::tensor* a, gk::pool_op o, int k0, int k1, int s0, int s1, float p0, float p1) {
  const std::int64_t ne[4] = {(a->ne[0] + 2 * static_cast<int>(p0) - k0) / s0 + 1,
                              (a->ne[1] + 2 * static_cast<int>(p1) - k1) / s1 + 1, a->ne[2], a->ne[3]};
  gk::tensor* r = gk::detail::new_op(ctx, gk::op::pool_2d, gk::type::f32, ne, {a});
  const std::int32_t p[7] = {static_cast<std::int32_t>(o), k0, k1, s0, s1, static_cast<std::int32_t>(p0),
                             static_cast<std::int32_t>(p1)};
  r->set_params(p, sizeof p);
  return r;
}
// get_rows_back that also records c as a source
gk::tensor* get_rows_back_extra_src(gk::context& ctx, gk::tensor* a, gk::tensor* b, gk::tensor* c) {
  gk::tensor* r = gk::get_rows_back(ctx, a, b, c);
  r->src[2] = c;
  return r;
}
// repeat_back without its shape check (the BAD check must notice that it does not throw)
gk::tensor* repeat_back_unchecked(gk::context& ctx, gk::tensor* a, gk::tensor* b) {
  return gk::detail::new_op(ctx, gk::op::repeat_back, a->type, b->ne, {a});
}
// set_inplace that forgets to alias a
gk::tensor* set_inplace_not_a_view(gk::context& ctx, gk::tensor* a, gk::tensor* b, std::size_t nb1, std::size_t nb2, std::size_t nb3, std::size_t off) {
  gk::tensor* r = gk::set(ctx, a, b, nb1, nb2, nb3, off);
  r->set_param_i32(4, 1);
  return r;
}
}  // namespace broken

TEST_CASE("planted controls: wrong builders fail the parity comparison") {
  both B;
  auto k = B.leaf(f32, {3, 3, 4, 8}), x = B.leaf(f32, {17, 13, 4, 2});
  const std::string d1 = B.differences(broken::conv_2d_direct_swapped(B.g, k.g, x.g, 1, 2, 0, 0, 1, 1),
                                       ggml_conv_2d_direct(B.r, k.r, x.r, 1, 2, 0, 0, 1, 1));
  CHECK(d1.find("op_params") != std::string::npos);
  // (with equal strides the swap is invisible, as it should be)
  CHECK(B.differences(broken::conv_2d_direct_swapped(B.g, k.g, x.g, 2, 2, 0, 0, 1, 1),
                      ggml_conv_2d_direct(B.r, k.r, x.r, 2, 2, 0, 0, 1, 1)) == "");

  auto img = B.leaf(f32, {4, 4, 1, 1});
  const std::string d2 = B.differences(broken::pool_2d_int_padding(B.g, img.g, gk::pool_op::max, 3, 3, 2, 2, 0.75f, 0.75f),
                                       ggml_pool_2d(B.r, img.r, GGML_OP_POOL_MAX, 3, 3, 2, 2, 0.75f, 0.75f));
  CHECK(d2.find("ne[0]") != std::string::npos);

  auto a = B.leaf(f32, {7, 5, 1, 1}), idx = B.leaf(i32, {5, 1, 1, 1}), c = B.leaf(f32, {7, 11, 1, 1});
  const std::string d3 = B.differences(broken::get_rows_back_extra_src(B.g, a.g, idx.g, c.g),
                                       ggml_get_rows_back(B.r, a.r, idx.r, c.r));
  CHECK(d3.find("src[2]") != std::string::npos);

  auto big = B.leaf(f32, {16, 8, 2, 1}), part = B.leaf(f32, {4, 3, 1, 1});
  const std::string d4 = B.differences(
      broken::set_inplace_not_a_view(B.g, big.g, part.g, big.g->nb[1], big.g->nb[2], big.g->nb[3], 0),
      ggml_set_inplace(B.r, big.r, part.r, big.r->nb[1], big.r->nb[2], big.r->nb[3], 0));
  CHECK(d4.find("view") != std::string::npos);

  auto r8 = B.leaf(f32, {8, 6, 1, 1}), r3 = B.leaf(f32, {3, 6, 1, 1});
  CHECK_NOTHROW(broken::repeat_back_unchecked(B.g, r8.g, r3.g));  // so BAD(...) on it would go red
  CHECK_THROWS_AS(gk::repeat_back(B.g, r8.g, r3.g), gk::error);

  std::printf("builders: planted controls caught: swapped op_params [%s]; int padding [%s]; extra src [%s]; "
              "not a view [%s]\n",
              d1.c_str(), d2.c_str(), d3.c_str(), d4.c_str());
}

