// SPDX-License-Identifier: MIT
// The norm, softmax and rope families on CUDA against the CPU definition (harness.hpp).
//
// Bars, per op (ulps of the f32 output; NaN classes must agree exactly):
//   norm rms_norm l2_norm group_norm   1 ulp  (the device sums in double in another order;
//                                              expected 0, a sum near a float rounding
//                                              boundary could move the statistic 1 ulp)
//   soft_max (all forms)               1 ulp  (same reason; exp is the CPU's bits)
//   diag_mask_inf/zero                 0      (a select)
//   rope f32                           abs 4e-7 for |x| < 1: cos/sin are libm's on the CPU and
//                                      double-rounded on the device, 1 ulp of the table apart
//   rope f16                           abs 1e-3 (that ulp can flip one f16 rounding: 2^-10)
// Odd row lengths (1, 31, 33, 129, 4097), several rows in dims 1-3, strided views, in
// place, NaN/Inf in inputs and masks, fully masked rows with and without a sink.
#include "harness.hpp"

#include <bit>
#include <cstdint>
#include <limits>

namespace {

using gk_cuda_test::run_pair;

// ulps between the CPU's and the device's f32 outputs (NaN == NaN, inf must match)
std::int64_t max_ulps(const gk_cuda_test::pair& p) {
  auto ordered = [](float f) {
    const auto b = static_cast<std::int64_t>(std::bit_cast<std::uint32_t>(f));
    return b & 0x80000000 ? 0x80000000 - b : b + 0x80000000;  // monotone in f, +0 == -0 - 1
  };
  std::int64_t m = 0;
  for (std::size_t i = 0; i < p.cpu.size(); ++i) {
    const float a = static_cast<float>(p.cpu[i]), b = static_cast<float>(p.dev[i]);
    if (std::isnan(a) || std::isnan(b)) {
      if (std::isnan(a) != std::isnan(b)) return std::numeric_limits<std::int64_t>::max();
      continue;
    }
    if (a == b) continue;
    m = std::max(m, std::abs(ordered(a) - ordered(b)));
  }
  return m;
}

// a '#' leaf the builder fills itself (CPU side only; the device gets the same bytes)
template <class F>
void fill(gk::tensor* t, F&& value_at) {
  if (!t->data) return;
  const std::int64_t n = t->nelements();
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = value_at(i);
    if (t->type == gk::type::f32) static_cast<float*>(t->data)[i] = v;
    else if (t->type == gk::type::f16) static_cast<gk::f16*>(t->data)[i] = gk::to_f16(v);
    else static_cast<std::int32_t*>(t->data)[i] = static_cast<std::int32_t>(v);
  }
}

float uniform(std::uint32_t i, std::uint32_t seed) {  // deterministic (-1, 1)
  std::uint32_t x = i * 2654435761u ^ seed * 40503u;
  x ^= x >> 15;
  x *= 2246822519u;
  x ^= x >> 13;
  return static_cast<float>(x & 0xffffff) / 8388608.0f - 1.0f;
}

constexpr std::int64_t lengths[] = {1, 31, 33, 129, 4097};
constexpr float inf = std::numeric_limits<float>::infinity();
constexpr float qnan = std::numeric_limits<float>::quiet_NaN();

}  // namespace

TEST_CASE("norm, rms_norm, l2_norm on CUDA: odd rows, strided, in place, NaN/Inf") {
  for (gk::op o : {gk::op::norm, gk::op::rms_norm, gk::op::l2_norm})
    for (std::int64_t n : lengths) {
      auto apply = [&](gk::context& ctx, gk::tensor* a, bool inplace) {
        const float eps = o == gk::op::l2_norm ? 1e-12f : 1e-5f;
        if (o == gk::op::norm) return inplace ? gk::norm_inplace(ctx, a, eps) : gk::norm(ctx, a, eps);
        if (o == gk::op::rms_norm) return inplace ? gk::rms_norm_inplace(ctx, a, eps) : gk::rms_norm(ctx, a, eps);
        return inplace ? gk::l2_norm_inplace(ctx, a, eps) : gk::l2_norm(ctx, a, eps);
      };
      INFO(gk::name(o) << " n=" << n);
      auto p = run_pair([&](gk::context& ctx) { return apply(ctx, ctx.new_tensor_4d(gk::type::f32, n, 3, 2, 2), false); });
      CHECK(max_ulps(p) <= 1);
      // rows strided: the transpose of [5, n, 3]
      p = run_pair([&](gk::context& ctx) {
        return apply(ctx, gk::transpose(ctx, ctx.new_tensor_3d(gk::type::f32, 5, n, 3)), false);
      });
      CHECK(max_ulps(p) <= 1);
      p = run_pair([&](gk::context& ctx) { return apply(ctx, ctx.new_tensor_2d(gk::type::f32, n, 4), true); });
      CHECK(max_ulps(p) <= 1);
      // row 1 has a NaN, row 2 an Inf, row 3 is zeros
      p = run_pair([&](gk::context& ctx) {
        gk::tensor* a = ctx.new_tensor_2d(gk::type::f32, n, 4)->set_name("#a");
        fill(a, [&](std::int64_t i) {
          const std::int64_t r = i / n, c = i % n;
          if (r == 1 && c == n / 2) return qnan;
          if (r == 2 && c == n - 1) return inf;
          if (r == 3) return 0.0f;
          return uniform(static_cast<std::uint32_t>(i), 7);
        });
        return apply(ctx, a, false);
      });
      CHECK(max_ulps(p) <= 1);
    }
}

TEST_CASE("group_norm on CUDA: groups that split dim 2 unevenly, empty groups, strided") {
  for (int groups : {1, 3, 4, 7})
    for (std::int64_t n0 : {1, 33, 129}) {
      INFO("groups=" << groups << " n0=" << n0);
      auto p = run_pair([&](gk::context& ctx) {
        return gk::group_norm(ctx, ctx.new_tensor_4d(gk::type::f32, n0, 5, 6, 2), groups, 1e-6f);
      });
      CHECK(max_ulps(p) <= 1);
      p = run_pair([&](gk::context& ctx) {
        gk::tensor* a = gk::permute(ctx, ctx.new_tensor_4d(gk::type::f32, 5, n0, 6, 2), 1, 0, 2, 3);
        return gk::group_norm(ctx, a, groups, 1e-6f);
      });
      CHECK(max_ulps(p) <= 1);
    }
}

TEST_CASE("soft_max on CUDA: plain, scale, f32/f16 mask broadcast, ALiBi, sinks") {
  for (std::int64_t n : lengths)
    for (gk::type mt : {gk::type::f32, gk::type::f16})
      for (int variant = 0; variant < 5; ++variant) {
        INFO("n=" << n << " mask " << gk::name(mt) << " variant " << variant);
        auto p = run_pair([&](gk::context& ctx) {
          gk::tensor* a = ctx.new_tensor_4d(gk::type::f32, n, 5, 4, 2);
          if (variant == 0) return gk::soft_max(ctx, a);
          // mask rows past a's 5 are padding; dims 2 and 3 broadcast
          gk::tensor* mask = ctx.new_tensor_4d(mt, n, 7, 2, 1)->set_name("#mask");
          fill(mask, [&](std::int64_t i) {
            const std::int64_t c = i % n, r = (i / n) % 7;
            if (c > r + n / 2) return -inf;  // a causal-ish band of -inf
            return 2.0f * uniform(static_cast<std::uint32_t>(i), 3);
          });
          // 1 mask and scale, 2 + ALiBi, 3 + ALiBi and sinks, 4 sinks without ALiBi
          gk::tensor* r = gk::soft_max_ext(ctx, a, mask, 0.37f, variant == 2 || variant == 3 ? 8.0f : 0.0f);
          if (variant >= 3) gk::soft_max_add_sinks(r, ctx.new_tensor_1d(gk::type::f32, 4));
          return r;
        });
        CHECK(max_ulps(p) <= 1);
      }
}

TEST_CASE("soft_max on CUDA: fully masked rows (NaN, or zeros with a sink), NaN/Inf inputs, in place") {
  for (std::int64_t n : {1, 33, 4097})
    for (bool with_sink : {false, true}) {
      INFO("n=" << n << " sink " << with_sink);
      auto p = run_pair([&](gk::context& ctx) {
        gk::tensor* a = ctx.new_tensor_3d(gk::type::f32, n, 4, 3)->set_name("#a");
        fill(a, [&](std::int64_t i) {
          const std::int64_t r = i / n, c = i % n;
          if (r == 5 && c == 0) return qnan;
          if (r == 6 && c == n / 2) return inf;
          if (r == 7 && c == n / 3) return -inf;
          return 3.0f * uniform(static_cast<std::uint32_t>(i), 11);
        });
        gk::tensor* mask = ctx.new_tensor_2d(gk::type::f16, n, 4)->set_name("#mask");
        fill(mask, [&](std::int64_t i) {
          const std::int64_t r = i / n, c = i % n;
          if (r == 1) return -inf;                       // row 1 fully masked
          if (r == 2 && c == n - 1) return qnan;         // a NaN in the mask
          return c % 3 == 1 ? -inf : 0.0f;
        });
        gk::tensor* r = gk::soft_max_ext_inplace(ctx, a, mask, 1.0f, 0.0f);
        if (with_sink) gk::soft_max_add_sinks(r, ctx.new_tensor_1d(gk::type::f32, 3));
        return r;
      });
      CHECK(max_ulps(p) <= 1);
    }
}

TEST_CASE("diag_mask_inf and diag_mask_zero on CUDA: exact, strided input") {
  for (std::int64_t n : lengths)
    for (int n_past : {0, 2}) {
      INFO("n=" << n << " n_past=" << n_past);
      auto p = run_pair([&](gk::context& ctx) {
        return gk::diag_mask_inf(ctx, ctx.new_tensor_3d(gk::type::f32, n, 6, 2), n_past);
      });
      CHECK(p.bit_equal());
      p = run_pair([&](gk::context& ctx) {
        return gk::diag_mask_zero(ctx, gk::transpose(ctx, ctx.new_tensor_2d(gk::type::f32, 6, n)), n_past);
      });
      CHECK(max_ulps(p) == 0);
    }
}

namespace {

// positions: one per token (4 per token in the multi modes), up to 5000
gk::tensor* positions(gk::context& ctx, std::int64_t n, unsigned seed) {
  gk::tensor* b = ctx.new_tensor_1d(gk::type::i32, n)->set_name("#pos");
  fill(b, [&](std::int64_t i) { return static_cast<float>(static_cast<int>((uniform(static_cast<std::uint32_t>(i), seed) + 1.0f) * 2500.0f)); });
  return b;
}

gk::tensor* freq_factors(gk::context& ctx, std::int64_t n) {
  gk::tensor* c = ctx.new_tensor_1d(gk::type::f32, n)->set_name("#ff");
  fill(c, [&](std::int64_t i) { return 1.0f + 3.0f * (uniform(static_cast<std::uint32_t>(i), 5) + 1.0f); });
  return c;
}

struct rope_case {
  const char* what;
  int mode;
  std::int64_t n0, n_dims;
  bool ff, yarn;
  int offs;
};

}  // namespace

TEST_CASE("rope on CUDA: every mode, partial rotation, freq_factors, YaRN, f32 and f16") {
  const int sections[4] = {3, 2, 2, 1};
  const rope_case cases[] = {
      {"normal", gk::rope_type_normal, 64, 64, false, false, 0},
      {"normal partial", gk::rope_type_normal, 66, 32, false, false, 0},
      {"normal offset", gk::rope_type_normal, 70, 32, false, false, 6},
      {"neox", gk::rope_type_neox, 128, 128, false, false, 0},
      {"neox partial ff", gk::rope_type_neox, 80, 48, true, false, 0},
      {"neox yarn", gk::rope_type_neox, 64, 64, false, true, 0},
      {"normal yarn ff", gk::rope_type_normal, 34, 34, true, true, 0},
      {"mrope", gk::rope_type_mrope, 40, 32, false, false, 0},
      {"mrope yarn ff", gk::rope_type_mrope, 32, 32, true, true, 0},
      {"imrope", gk::rope_type_imrope, 48, 32, false, false, 0},
      {"vision", gk::rope_type_vision, 32, 16, false, false, 0},
      {"vision ff", gk::rope_type_vision, 36, 18, true, false, 0},
  };
  for (const rope_case& rc : cases)
    for (gk::type t : {gk::type::f32, gk::type::f16})
      for (int layout = 0; layout < 3; ++layout) {
        INFO(rc.what << " " << gk::name(t) << " layout " << layout);
        auto p = run_pair([&](gk::context& ctx) {
          const std::int64_t heads = 3, tokens = 5;
          gk::tensor* a;
          if (layout == 1)  // [n0, tokens, heads] permuted to [n0, heads, tokens]: strided rows
            a = gk::permute(ctx, ctx.new_tensor_4d(t, rc.n0, tokens, heads, 2), 0, 2, 1, 3);
          else
            a = ctx.new_tensor_4d(t, rc.n0, heads, tokens, 2);
          const bool multi = (rc.mode & gk::rope_type_mrope) != 0;
          gk::tensor* b = positions(ctx, multi ? 4 * tokens : tokens, 9);
          const std::int64_t pairs = rc.mode == gk::rope_type_vision ? rc.n_dims : rc.n_dims / 2;
          gk::tensor* c = rc.ff ? freq_factors(ctx, pairs) : nullptr;
          const float freq_scale = rc.yarn ? 0.25f : 1.0f, ext = rc.yarn ? 1.0f : 0.0f;
          const float attn_factor = rc.yarn ? 1.1f : 1.0f;
          gk::tensor* r;
          if (multi)
            r = layout == 2 ? gk::rope_multi_inplace(ctx, a, b, c, static_cast<int>(rc.n_dims), sections, rc.mode, 4096,
                                                     10000.0f, freq_scale, ext, attn_factor, 32.0f, 1.0f)
                            : gk::rope_multi(ctx, a, b, c, static_cast<int>(rc.n_dims), sections, rc.mode, 4096,
                                             10000.0f, freq_scale, ext, attn_factor, 32.0f, 1.0f);
          else
            r = layout == 2 ? gk::rope_ext_inplace(ctx, a, b, c, static_cast<int>(rc.n_dims), rc.mode, 4096, 500000.0f,
                                                   freq_scale, ext, attn_factor, 32.0f, 1.0f)
                            : gk::rope_ext(ctx, a, b, c, static_cast<int>(rc.n_dims), rc.mode, 4096, 500000.0f,
                                           freq_scale, ext, attn_factor, 32.0f, 1.0f);
          if (rc.offs) gk::rope_set_offset(r, rc.offs);
          return r;
        });
        CHECK(p.max_abs() <= (t == gk::type::f32 ? 4e-7 : 1e-3));
      }
}

TEST_CASE("rope on CUDA: NaN and Inf pass through as on the CPU; plain rope") {
  for (gk::type t : {gk::type::f32, gk::type::f16}) {
    auto p = run_pair([&](gk::context& ctx) {
      gk::tensor* a = ctx.new_tensor_3d(t, 31 + 1, 2, 3)->set_name("#a");
      fill(a, [&](std::int64_t i) {
        if (i == 5) return qnan;
        if (i == 40) return inf;
        return uniform(static_cast<std::uint32_t>(i), 13);
      });
      return gk::rope(ctx, a, positions(ctx, 3, 4), 32, gk::rope_type_neox);
    });
    CHECK(p.max_abs() <= (t == gk::type::f32 ? 4e-7 : 1e-3));
  }
}
