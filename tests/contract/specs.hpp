// SPDX-License-Identifier: MIT
// The specs of gk's kernels, one per (op, type), shared by every backend's program: the
// float64 reference is the op's own formula (ops/*.hpp comments) evaluated in double, with
// IEEE semantics deciding what a NaN or an infinity becomes. What differs by backend (the
// tiles each kernel's work unit ends at) comes in as a profile.
//
// Magnitudes: a sum's is the sum of |terms|; a normalised row's is |y| (a relative error of
// the row's statistic is one of every output); an elementwise f's is |f(x)| + |x f'(x)|
// (a relative error of x, or of an inner step, moves f by that). Depths count the sum's
// terms plus the fp32 operations and library ulps after it.
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "gk/cpu/rows.hpp"
#include "gk/formats/all.hpp"
#include "gk/gk.hpp"
#include "harness.hpp"

namespace gk_contract {

// Per backend: where each kind of kernel's work unit ends.
struct profile {
  std::int64_t row_tile = 64;     // rows ops: elements one step of the row loop covers
  std::int64_t row_largest = 4096;
  // matmul: where a work unit (or the path taken) ends, on each axis
  std::vector<std::int64_t> mm_tiles_m = {16};   // weight rows per tile
  std::vector<std::int64_t> mm_tiles_n = {8};    // activation columns per tile
  std::vector<std::int64_t> mm_tiles_k = {256};  // K per step of the inner loop (a K-quant superblock)
  std::string launch_prefix;      // CUDA kernel name prefix per family, for gate 5's records
  // flash attention: keys per tile and query rows per work unit
  std::int64_t attn_tile_kv = 32;
  std::int64_t attn_tile_q = 8;
};

namespace detail {

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double qnan = std::numeric_limits<double>::quiet_NaN();

inline input_decl f32_rows(std::int64_t n, std::int64_t rows, double lo = -1, double hi = 1, bool nonfinite = true) {
  input_decl d;
  d.ne = {n, rows, 1, 1};
  d.lo = lo;
  d.hi = hi;
  d.nonfinite = nonfinite;
  return d;
}

inline tile_decl row_tiles(const profile& p) { return {0, p.row_tile, 1, 1, p.row_largest, "row length"}; }

// rows of a [n, rows] input: calls f(row pointer, n) per row
template <class F>
void per_row(const host_input& h, F&& f) {
  const std::int64_t n = h.d.ne[0], rows = h.n() / n;
  for (std::int64_t r = 0; r < rows; ++r) f(h.v.data() + r * n, n, r);
}

// Elementwise functions in double, as the CPU kernels state them (cpu/elementwise.hpp).
inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
inline double gelu_tanh(double x) {
  if (x <= -10.0) return 0.0;  // the stated cut: tanh is +-1 to f32 precision there
  if (x >= 10.0) return x;
  return 0.5 * x * (1.0 + std::tanh(0.79788456080286535588 * x * (1.0 + 0.044715 * x * x)));
}
// silu and the erf GELU raise x to -FLT_MAX where it multiplies a factor that may be 0, so
// that -Inf gives -0 (simd/math.hpp states it); the reference does what it states
constexpr double f32_lowest = -3.40282346638528859812e+38;
inline double raise_lowest(double x) { return f32_lowest > x ? f32_lowest : x; }
inline double gelu_erf(double x) { return 0.5 * raise_lowest(x) * (1.0 + std::erf(x * 0.70710678118654752440)); }
inline double gelu_quick(double x) { return x / (1.0 + std::exp(-1.702 * x)); }
inline double silu(double x) {
  const double e = std::exp(-std::fabs(x));
  return (x < 0 ? raise_lowest(x) * e : x) / (1.0 + e);
}
inline double nan_or(double x, double v) { return std::isnan(x) ? x : v; }

struct unary_def {
  gk::unary_op op;
  double (*f)(double);
  bool exact;  // the result is x itself or an integer: no rounding beyond the output's
  double inner = 0;  // the GELUs' x/2 (1 +- t): t's rounding, of size |x|/2, survives the cancellation
};

inline const std::vector<unary_def>& unary_defs() {
  static const std::vector<unary_def> v = {
      {gk::unary_op::abs, [](double x) { return std::fabs(x); }, true},
      {gk::unary_op::sgn, [](double x) { return nan_or(x, x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0); }, true},
      {gk::unary_op::neg, [](double x) { return -x; }, true},
      {gk::unary_op::step, [](double x) { return nan_or(x, x > 0 ? 1.0 : 0.0); }, true},
      {gk::unary_op::tanh, [](double x) { return std::tanh(x); }, false},
      {gk::unary_op::elu, [](double x) { return x > 0 ? x : std::expm1(x); }, false},
      {gk::unary_op::relu, [](double x) { return nan_or(x, x > 0 ? x : 0.0); }, true},
      {gk::unary_op::sigmoid, sigmoid, false},
      {gk::unary_op::gelu, gelu_tanh, false, 0.5},
      {gk::unary_op::gelu_quick, gelu_quick, false},
      {gk::unary_op::silu, silu, false},
      {gk::unary_op::hardswish, [](double x) { return nan_or(x, x * std::min(1.0, std::max(0.0, (x + 3.0) / 6.0))); }, false},
      {gk::unary_op::hardsigmoid, [](double x) { return nan_or(x, std::min(1.0, std::max(0.0, (x + 3.0) / 6.0))); }, false},
      {gk::unary_op::exp, [](double x) { return std::exp(x); }, false},
      {gk::unary_op::expm1, [](double x) { return std::expm1(x); }, false},
      {gk::unary_op::softplus, [](double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }, false},
      {gk::unary_op::gelu_erf, gelu_erf, false, 0.5},
      {gk::unary_op::floor, [](double x) { return std::floor(x); }, true},
      {gk::unary_op::ceil, [](double x) { return std::ceil(x); }, true},
      {gk::unary_op::round, [](double x) { return std::round(x); }, true},
      {gk::unary_op::trunc, [](double x) { return std::trunc(x); }, true},
  };
  return v;
}

// |f(x)| + |x f'(x)| by a central difference (finite x only)
inline double elem_mag(double (*f)(double), double x) {
  const double fx = f(x);
  if (!std::isfinite(fx) || !std::isfinite(x)) return 0;
  const double h = 1e-6 * std::max(1.0, std::fabs(x));
  const double df = (f(x + h) - f(x - h)) / (2 * h);
  return std::fabs(fx) + std::fabs(x * df) + 1e-30;
}

}  // namespace detail

// ---- the op specs ----

inline void add_norms(harness& h, const profile& p) {
  using namespace detail;
  struct nd {
    const char* name;
    gk::op o;
  };
  for (nd k : {nd{"norm", gk::op::norm}, nd{"rms_norm", gk::op::rms_norm}, nd{"l2_norm", gk::op::l2_norm}}) {
    spec s;
    s.name = std::string(k.name) + " f32";
    s.inputs = [](const dims& d) { return std::vector<input_decl>{f32_rows(d[0], d[1])}; };
    const gk::op o = k.o;
    s.build = [o](gk::context& c, const std::vector<gk::tensor*>& in, const dims&) -> gk::tensor* {
      if (o == gk::op::norm) return gk::norm(c, in[0], 1e-5f);
      if (o == gk::op::rms_norm) return gk::rms_norm(c, in[0], 1e-6f);
      return gk::l2_norm(c, in[0], 1e-12f);
    };
    s.ref = [o](const input_set& in, const dims&, reference& r) {
      per_row(in[0], [&](const double* x, std::int64_t n, std::int64_t) {
        if (o == gk::op::norm) {
          double sum = 0, sabs = 0;
          for (std::int64_t i = 0; i < n; ++i) sum += x[i], sabs += std::fabs(x[i]);
          const double mu = sum / n;
          double var = 0;
          for (std::int64_t i = 0; i < n; ++i) var += (x[i] - mu) * (x[i] - mu);
          const double sc = 1.0 / std::sqrt(var / n + 1e-5f);
          for (std::int64_t i = 0; i < n; ++i) {
            const double y = (x[i] - mu) * sc;
            r.push(y, (std::fabs(x[i]) + sabs / n) * sc + std::fabs(y));
          }
        } else {
          double ss = 0;
          for (std::int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
          const double sc = o == gk::op::rms_norm ? 1.0 / std::sqrt(ss / n + 1e-6f) : 1.0 / std::max(std::sqrt(ss), 1e-12);
          for (std::int64_t i = 0; i < n; ++i) r.push(x[i] * sc, std::fabs(x[i] * sc));
        }
      });
    };
    s.served = {{4096, 6}, {128, 33}, {5120, 4}};
    s.tiles = {row_tiles(p)};
    s.depth = [](const dims& d) { return static_cast<double>(d[0]) + 8; };
    s.launch = "norm";
    h.add(std::move(s));
  }
  // group_norm: [n0, n1, channels] in groups of ceil(channels / groups) channels
  spec s;
  s.name = "group_norm f32";
  s.inputs = [](const dims& d) {
    input_decl i = f32_rows(d[0], d[1]);
    i.ne = {d[0], d[1], d[2], 1};
    return std::vector<input_decl>{i};
  };
  s.build = [](gk::context& c, const std::vector<gk::tensor*>& in, const dims& d) {
    return gk::group_norm(c, in[0], static_cast<int>(d[3]), 1e-6f);
  };
  s.ref = [](const input_set& in, const dims& d, reference& r) {
    const host_input& x = in[0];
    const std::int64_t n0 = d[0], n1 = d[1], ch = d[2], per = (ch + d[3] - 1) / d[3];
    std::vector<double> want(static_cast<std::size_t>(x.n())), mag(want.size());
    for (std::int64_t c0 = 0; c0 < ch; c0 += per) {
      const std::int64_t c1 = std::min(ch, c0 + per), m = (c1 - c0) * n0 * n1;
      double sum = 0, sabs = 0, var = 0;
      for (std::int64_t c = c0; c < c1; ++c)
        for (std::int64_t j = 0; j < n0 * n1; ++j) sum += x.v[c * n0 * n1 + j], sabs += std::fabs(x.v[c * n0 * n1 + j]);
      const double mu = sum / m;
      for (std::int64_t c = c0; c < c1; ++c)
        for (std::int64_t j = 0; j < n0 * n1; ++j) var += (x.v[c * n0 * n1 + j] - mu) * (x.v[c * n0 * n1 + j] - mu);
      const double sc = 1.0 / std::sqrt(var / m + 1e-6f);
      for (std::int64_t c = c0; c < c1; ++c)
        for (std::int64_t j = 0; j < n0 * n1; ++j) {
          const std::size_t i = static_cast<std::size_t>(c * n0 * n1 + j);
          want[i] = (x.v[i] - mu) * sc;
          mag[i] = (std::fabs(x.v[i]) + sabs / m) * sc + std::fabs(want[i]);
        }
    }
    r.want = want;
    r.mag = mag;
  };
  s.served = {{64, 4, 8, 4}, {33, 3, 10, 4}};
  s.tiles = {{0, p.row_tile, 1, 1, 512, "row length"}};
  s.depth = [](const dims& d) { return static_cast<double>(d[0] * d[1] * ((d[2] + d[3] - 1) / d[3])) + 8; };
  s.launch = "group_norm";
  h.add(std::move(s));
}

inline void add_softmax(harness& h, const profile& p) {
  using namespace detail;
  for (int with_mask : {0, 1}) {
    spec s;
    s.name = with_mask ? "soft_max_ext f32 (f32 mask, scale 0.5)" : "soft_max f32";
    s.inputs = [with_mask](const dims& d) {
      std::vector<input_decl> v{f32_rows(d[0], d[1], -4, 4)};
      if (with_mask) v.push_back(f32_rows(d[0], d[1], -1, 1, false));
      return v;
    };
    s.build = [with_mask](gk::context& c, const std::vector<gk::tensor*>& in, const dims&) {
      return with_mask ? gk::soft_max_ext(c, in[0], in[1], 0.5f, 0.0f) : gk::soft_max(c, in[0]);
    };
    s.ref = [with_mask](const input_set& in, const dims&, reference& r) {
      const std::int64_t n = in[0].d.ne[0];
      per_row(in[0], [&](const double* x, std::int64_t, std::int64_t row) {
        std::vector<double> w(static_cast<std::size_t>(n));
        double m = -inf;
        bool nan = false;
        for (std::int64_t i = 0; i < n; ++i) {
          w[i] = with_mask ? x[i] * static_cast<double>(0.5f) + in[1].v[static_cast<std::size_t>(row * n + i)] : x[i];
          nan |= std::isnan(w[i]);
          m = std::max(m, w[i]);
        }
        if (nan) m = qnan;
        double sum = 0;
        for (std::int64_t i = 0; i < n; ++i) sum += std::exp(w[i] - m);
        for (std::int64_t i = 0; i < n; ++i) {
          const double y = std::exp(w[i] - m) / sum;
          r.push(y, std::fabs(y) * (2 + std::fabs(w[i]) + std::fabs(m)));
        }
      });
    };
    s.served = {{4096, 5}, {32, 40}, {1000, 7}};
    s.tiles = {row_tiles(p)};
    s.depth = [](const dims& d) { return static_cast<double>(d[0]) + 16; };
    s.launch = "soft_max";
    h.add(std::move(s));
  }
}

inline void add_rope(harness& h, const profile& p) {
  using namespace detail;
  (void)p;
  for (int mode : {0, 2}) {
    spec s;
    s.name = mode == 0 ? "rope f32 (normal)" : "rope f32 (neox)";
    s.inputs = [](const dims& d) {
      input_decl a = f32_rows(d[0], d[1]);
      a.ne = {d[0], d[1], d[2], 1};
      input_decl pos;
      pos.type = gk::type::i32;
      pos.ne = {d[2], 1, 1, 1};
      pos.r = role::index;
      pos.range = 512;
      return std::vector<input_decl>{a, pos};
    };
    s.build = [mode](gk::context& c, const std::vector<gk::tensor*>& in, const dims& d) {
      return gk::rope(c, in[0], in[1], static_cast<int>(d[0]), mode);
    };
    s.ref = [mode](const input_set& in, const dims& d, reference& r) {
      const std::int64_t hd = d[0], heads = d[1], toks = d[2];
      std::vector<double> want(static_cast<std::size_t>(in[0].n())), mag(want.size());
      for (std::int64_t t = 0; t < toks; ++t)
        for (std::int64_t hh = 0; hh < heads; ++hh) {
          const std::size_t base = static_cast<std::size_t>((t * heads + hh) * hd);
          const double pos = in[1].v[static_cast<std::size_t>(t)];
          for (std::int64_t k = 0; k < hd / 2; ++k) {
            const double th = pos * std::pow(10000.0, -2.0 * k / hd);
            const std::size_t i0 = base + static_cast<std::size_t>(mode == 0 ? 2 * k : k);
            const std::size_t i1 = base + static_cast<std::size_t>(mode == 0 ? 2 * k + 1 : k + hd / 2);
            const double x0 = in[0].v[i0], x1 = in[0].v[i1];
            want[i0] = x0 * std::cos(th) - x1 * std::sin(th);
            want[i1] = x0 * std::sin(th) + x1 * std::cos(th);
            mag[i0] = mag[i1] = (std::fabs(x0) + std::fabs(x1)) * (1 + std::fabs(th));
          }
        }
      r.want = want;
      r.mag = mag;
    };
    s.served = {{128, 8, 5}, {64, 32, 3}, {256, 2, 2}};
    s.tiles = {{0, 64, 2, 2, 512, "head dim"}};
    s.depth = [](const dims& d) { return static_cast<double>(d[0]) / 2 + 16; };
    s.launch = "rope";
    h.add(std::move(s));
  }
}

inline void add_unary(harness& h, const profile& p) {
  using namespace detail;
  for (const unary_def& u : unary_defs()) {
    spec s;
    s.name = std::string("unary ") + std::string(gk::name(u.op)) + " f32";
    s.inputs = [](const dims& d) { return std::vector<input_decl>{f32_rows(d[0], d[1], -6, 6)}; };
    const gk::unary_op op = u.op;
    s.build = [op](gk::context& c, const std::vector<gk::tensor*>& in, const dims&) { return gk::unary(c, in[0], op); };
    auto f = u.f;
    const bool ex = u.exact;
    const double inner = u.inner;
    s.ref = [f, ex, inner](const input_set& in, const dims&, reference& r) {
      for (double x : in[0].v) r.push(f(x), ex ? 0.0 : elem_mag(f, x) + inner * std::fabs(x));
    };
    s.served = {{1000, 7}, {4096, 2}};
    s.tiles = {row_tiles(p)};
    s.depth = [](const dims&) { return 10.0; };
    s.launch = "unary";
    h.add(std::move(s));
  }
}

inline void add_glu(harness& h, const profile& p) {
  using namespace detail;
  struct gd {
    gk::glu_op op;
    double (*f)(double);
    double inner;
  };
  const gd defs[] = {{gk::glu_op::reglu, [](double x) { return nan_or(x, x > 0 ? x : 0.0); }, 0},
                     {gk::glu_op::geglu, gelu_tanh, 0.5},
                     {gk::glu_op::swiglu, silu, 0},
                     {gk::glu_op::geglu_erf, gelu_erf, 0.5},
                     {gk::glu_op::geglu_quick, gelu_quick, 0}};
  for (const gd& g : defs)
    for (int split : {0, 1}) {
      if (split && g.op != gk::glu_op::swiglu) continue;
      spec s;
      s.name = std::string("glu ") + std::string(gk::name(g.op)) + (split ? " f32 (split)" : " f32");
      s.inputs = [split](const dims& d) {
        if (split) return std::vector<input_decl>{f32_rows(d[0], d[1], -4, 4), f32_rows(d[0], d[1], -4, 4, false)};
        return std::vector<input_decl>{f32_rows(2 * d[0], d[1], -4, 4)};
      };
      const gk::glu_op op = g.op;
      s.build = [op, split](gk::context& c, const std::vector<gk::tensor*>& in, const dims&) {
        return split ? gk::glu_split(c, in[0], in[1], op) : gk::glu(c, in[0], op, false);
      };
      auto f = g.f;
      const double inner = g.inner;
      s.ref = [f, split, inner](const input_set& in, const dims& d, reference& r) {
        const std::int64_t n = d[0];
        for (std::int64_t row = 0; row < d[1]; ++row)
          for (std::int64_t i = 0; i < n; ++i) {
            const double x = split ? in[0].v[row * n + i] : in[0].v[row * 2 * n + i];
            const double gv = split ? in[1].v[row * n + i] : in[0].v[row * 2 * n + n + i];
            const double y = f(x) * gv;
            r.push(y, (elem_mag(f, x) + inner * std::fabs(x)) * std::fabs(gv) + std::fabs(y));
          }
      };
      s.served = {{1000, 7}, {4096, 3}};
      s.tiles = {row_tiles(p)};
      s.depth = [](const dims&) { return 12.0; };
      s.launch = "glu";
      h.add(std::move(s));
    }
}

inline void add_reduce(harness& h, const profile& p) {
  using namespace detail;
  // sum_rows and mean
  for (int is_mean : {0, 1}) {
    spec s;
    s.name = is_mean ? "mean f32" : "sum_rows f32";
    s.inputs = [](const dims& d) { return std::vector<input_decl>{f32_rows(d[0], d[1])}; };
    s.build = [is_mean](gk::context& c, const std::vector<gk::tensor*>& in, const dims&) {
      return is_mean ? gk::mean(c, in[0]) : gk::sum_rows(c, in[0]);
    };
    s.ref = [is_mean](const input_set& in, const dims&, reference& r) {
      per_row(in[0], [&](const double* x, std::int64_t n, std::int64_t) {
        double sum = 0, sabs = 0;
        for (std::int64_t i = 0; i < n; ++i) sum += x[i], sabs += std::fabs(x[i]);
        r.push(is_mean ? sum / n : sum, is_mean ? sabs / n : sabs);
      });
    };
    s.served = {{4096, 6}, {100, 20}, {65, 3}};
    s.tiles = {row_tiles(p)};
    s.depth = [is_mean](const dims& d) { return static_cast<double>(d[0]) + is_mean + 1; };
    // integers 1..2048 in the first half, mirrored (negated, +-1) in the second: the first
    // half sums to about 2^20, everything stays below 2^24, the row sums to a few dozen
    s.gate4_dims = {2048, 4};
    s.gate4_fill = [](input_set& in, const dims& d, std::mt19937& rng) {
      std::uniform_int_distribution<int> u(1, 2048), e(-1, 1);
      const std::int64_t n = d[0], half = n / 2;
      for (std::int64_t r = 0; r < d[1]; ++r)
        for (std::int64_t i = 0; i < half; ++i) {
          const double v = u(rng);
          in[0].v[r * n + i] = v;
          in[0].v[r * n + half + i] = -v + e(rng);
        }
    };
    s.gate4_terms = [](const input_set& in, const dims& d) {
      std::vector<std::vector<double>> t;
      for (std::int64_t r = 0; r < d[1]; ++r) t.emplace_back(in[0].v.begin() + r * d[0], in[0].v.begin() + (r + 1) * d[0]);
      return t;
    };
    s.gate4_post = is_mean;
    s.gate4_scale = is_mean ? 1.0 / 2048 : 1.0;  // a power of two: the division is exact
    s.launch = is_mean ? "mean" : "sum_rows";
    h.add(std::move(s));
  }
  // argmax: the reference's rule, stated
  {
    spec s;
    s.name = "argmax f32";
    s.inputs = [](const dims& d) { return std::vector<input_decl>{f32_rows(d[0], d[1])}; };
    s.build = [](gk::context& c, const std::vector<gk::tensor*>& in, const dims&) { return gk::argmax(c, in[0]); };
    s.ref = [](const input_set& in, const dims&, reference& r) {
      per_row(in[0], [&](const double* x, std::int64_t n, std::int64_t) {
        double m = -inf;
        std::int64_t idx = 0;
        for (std::int64_t i = 0; i < n; ++i) {
          m = m > x[i] ? m : x[i];
          if (m == x[i]) idx = i;
        }
        r.push(static_cast<double>(idx), 0);
      });
    };
    s.exact = true;
    s.nan_rule = "running max m = (m > x ? m : x), index of the last x == m: ties to the last index, a NaN restarts the run";
    s.served = {{4096, 6}, {32000, 2}, {7, 9}};
    s.tiles = {row_tiles(p)};
    s.launch = "argmax";
    h.add(std::move(s));
  }
  // top_k: largest first, equal values by index, NaN after every number
  {
    spec s;
    s.name = "top_k f32";
    s.inputs = [](const dims& d) { return std::vector<input_decl>{f32_rows(d[0], d[1])}; };
    s.build = [](gk::context& c, const std::vector<gk::tensor*>& in, const dims& d) {
      return gk::top_k(c, in[0], static_cast<int>(d[2]));
    };
    s.ref = [](const input_set& in, const dims& d, reference& r) {
      per_row(in[0], [&](const double* x, std::int64_t n, std::int64_t) {
        std::vector<std::int64_t> idx(static_cast<std::size_t>(n));
        std::iota(idx.begin(), idx.end(), 0);
        std::stable_sort(idx.begin(), idx.end(), [&](std::int64_t a, std::int64_t b) {
          if (std::isnan(x[a])) return false;
          if (std::isnan(x[b])) return true;
          return x[a] > x[b];
        });
        for (std::int64_t k = 0; k < d[2]; ++k) r.push(static_cast<double>(idx[static_cast<std::size_t>(k)]), 0);
      });
    };
    s.exact = true;
    s.nan_rule = "by value, largest first; equal values by index; NaN after every number";
    s.served = {{1000, 6, 8}, {32000, 2, 40}, {64, 5, 64}};
    s.tiles = {{0, p.row_tile, 1, 8, p.row_largest, "row length"}};
    s.launch = "top_k";
    h.add(std::move(s));
  }
}

inline void add_rows_copy(harness& h, const profile& p) {
  using namespace detail;
  (void)p;
  // get_rows: [n, R] of type t, i32 indices [m] -> f32 [n, m]
  for (gk::type t : {gk::type::f32, gk::type::f16, gk::type::bf16, gk::type::q4_0, gk::type::q8_0, gk::type::q4_K,
                     gk::type::q6_K}) {
    spec s;
    s.name = std::string("get_rows ") + std::string(gk::name(t));
    s.family = is_float(t) ? "rows" : "quantized";
    s.inputs = [t](const dims& d) {
      input_decl a = f32_rows(d[0], d[1]);
      a.type = t;
      input_decl idx;
      idx.type = gk::type::i32;
      idx.ne = {d[2], 1, 1, 1};
      idx.r = role::index;
      idx.range = d[1];
      return std::vector<input_decl>{a, idx};
    };
    s.build = [](gk::context& c, const std::vector<gk::tensor*>& in, const dims&) { return gk::get_rows(c, in[0], in[1]); };
    s.ref = [](const input_set& in, const dims& d, reference& r) {
      for (std::int64_t m = 0; m < d[2]; ++m) {
        const auto row = static_cast<std::int64_t>(in[1].v[static_cast<std::size_t>(m)]);
        double mx = 0;
        for (std::int64_t i = 0; i < d[0]; ++i) mx = std::max(mx, std::fabs(in[0].v[row * d[0] + i]));
        for (std::int64_t i = 0; i < d[0]; ++i) r.push(in[0].v[row * d[0] + i], mx);
      }
    };
    const std::int64_t bs = gk::block_size(t);
    s.served = {{std::max<std::int64_t>(256, bs), 40, 7}, {4096, 8, 3}};
    s.tiles = {{0, 256, bs, bs, 4096, "row length"}};
    s.depth = [](const dims&) { return 3.0; };  // a decode is at most a few fp32 operations
    s.launch = "get_rows";
    h.add(std::move(s));
  }
  // set_rows: a [n, R] (f32 or f16) gets rows b[:, i] at c[i] (i64, distinct); the result is a view of a
  for (gk::type t : {gk::type::f32, gk::type::f16}) {
    spec s;
    s.name = std::string("set_rows ") + std::string(gk::name(t)) + " <- f32";
    s.inputs = [t](const dims& d) {
      input_decl a = f32_rows(d[0], d[1], -1, 1, false);
      a.type = t;
      input_decl b = f32_rows(d[0], d[2]);
      input_decl c;
      c.type = gk::type::i64;
      c.ne = {d[2], 1, 1, 1};
      c.r = role::index;
      c.range = d[1];
      c.distinct = true;
      return std::vector<input_decl>{a, b, c};
    };
    s.build = [](gk::context& c, const std::vector<gk::tensor*>& in, const dims&) { return gk::set_rows(c, in[0], in[1], in[2]); };
    s.ref = [](const input_set& in, const dims& d, reference& r) {
      std::vector<double> out = in[0].v;
      for (std::int64_t i = 0; i < d[2]; ++i) {
        const auto row = static_cast<std::int64_t>(in[2].v[static_cast<std::size_t>(i)]);
        for (std::int64_t k = 0; k < d[0]; ++k) out[static_cast<std::size_t>(row * d[0] + k)] = in[1].v[i * d[0] + k];
      }
      r.want = out;
      r.mag.assign(out.size(), 0.0);
    };
    s.in_place = true;
    s.served = {{128, 64, 9}, {4096, 16, 3}};
    s.tiles = {row_tiles(p)};
    s.launch = "set_rows";
    h.add(std::move(s));
  }
}

// mul_mat per weight format: [K, M] weights x [K, N] f32 activations -> [M, N]. The float
// reference is the kernel's formula: activations encoded to the format's dot type (q8_0,
// q8_1, q8_K or the float type itself) and decoded, dotted with the decoded weight in double.
inline void add_matmul(harness& h, const profile& p, const std::vector<gk::type>& types) {
  using namespace detail;
  for (gk::type t : types) {
    bool float_path = false, q8_1 = false;
    std::int64_t dot_bs = 1;
    gk::formats::visit(t, [&]<class W>(std::type_identity<W>) {
      using A = typename W::dot_type;
      float_path = is_float(A::id);
      q8_1 = A::id == gk::type::q8_1;
      dot_bs = A::block_size;
    });
    const std::int64_t bs = gk::block_size(t);
    spec s;
    s.name = std::string("mul_mat ") + std::string(gk::name(t)) + " x f32";
    s.family = "dense";
    s.inputs = [t](const dims& d) {
      input_decl w = f32_rows(d[0], d[1], -1, 1, false);
      w.type = t;
      return std::vector<input_decl>{w, f32_rows(d[0], d[2], -1, 1, true)};
    };
    s.build = [](gk::context& c, const std::vector<gk::tensor*>& in, const dims&) { return gk::mul_mat(c, in[0], in[1]); };
    s.ref = [t, float_path, q8_1, bs](const input_set& in, const dims& d, reference& r) {
      const std::int64_t K = d[0], M = d[1], N = d[2];
      std::vector<double> xq(static_cast<std::size_t>(K * N));
      gk::formats::visit(t, [&]<class W>(std::type_identity<W>) {
        using A = typename W::dot_type;
        std::vector<float> row(static_cast<std::size_t>(K)), back(static_cast<std::size_t>(K));
        std::vector<typename A::block> blocks(static_cast<std::size_t>(K / A::block_size));
        for (std::int64_t n = 0; n < N; ++n) {
          for (std::int64_t k = 0; k < K; ++k) row[k] = static_cast<float>(in[1].v[n * K + k]);
          gk::encode_row<A>(row.data(), blocks.data(), K);
          gk::decode_row<A>(blocks.data(), back.data(), K);
          for (std::int64_t k = 0; k < K; ++k) xq[n * K + k] = back[k];
        }
      });
      std::vector<double> want(static_cast<std::size_t>(M * N)), mag(want.size()), extra(want.size());
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t m = 0; m < M; ++m) {
          const double* w = in[0].v.data() + m * K;
          const double* x = xq.data() + n * K;
          double sum = 0, ma = 0, narrow = 0;
          for (std::int64_t k0 = 0; k0 < K; k0 += bs) {
            double wmax = 0, xs = 0;
            for (std::int64_t k = k0; k < k0 + bs; ++k) wmax = std::max(wmax, std::fabs(w[k])), xs += x[k];
            for (std::int64_t k = k0; k < k0 + bs; ++k) {
              sum += w[k] * x[k];
              ma += (std::fabs(w[k]) + (float_path ? 0.0 : wmax)) * std::fabs(x[k]);
            }
            // q8_1 carries d * sum(q) as f16: the weight's offset meets it rounded
            if (q8_1) narrow += wmax * std::fabs(xs) * std::ldexp(1.0, -11);
          }
          want[static_cast<std::size_t>(n * M + m)] = sum;
          mag[static_cast<std::size_t>(n * M + m)] = ma;
          extra[static_cast<std::size_t>(n * M + m)] = narrow;
        }
      r.want = want;
      r.mag = mag;
      r.narrow = extra;
    };
    const std::int64_t kstep = std::max<std::int64_t>(bs, dot_bs);
    auto kround = [kstep](std::int64_t k) { return std::max(kstep, (k + kstep - 1) / kstep * kstep); };
    s.served = {{4096, 48, 1}, {kround(p.mm_tiles_k[0]) * 4, 33, 9}};
    for (std::int64_t k : p.mm_tiles_k) s.tiles.push_back({0, kround(k), kstep, kstep, 8192, "K"});
    for (std::int64_t m : p.mm_tiles_m) s.tiles.push_back({1, m, 1, 1, 256, "weight rows"});
    for (std::int64_t n : p.mm_tiles_n) s.tiles.push_back({2, n, 1, 1, 64, "activation columns"});
    s.accumulator = float_path ? "f32" : "i32 per block, f32 across blocks";
    s.depth = [float_path, kstep](const dims& d) {
      return float_path ? static_cast<double>(d[0]) + 4 : static_cast<double>(d[0] / kstep) * 2 + 16;
    };
    if (float_path) {
      // integer weights and activations, the second half mirrored: exact in f32 sums only
      s.gate4_dims = {2048, 4, 2};
      s.gate4_fill = [t](input_set& in, const dims& d, std::mt19937& rng) {
        const int top = t == gk::type::bf16 ? 128 : 64;
        std::uniform_int_distribution<int> u(1, top), e(-1, 1);
        const std::int64_t K = d[0], half = K / 2;
        for (std::int64_t m = 0; m < d[1]; ++m)
          for (std::int64_t k = 0; k < half; ++k) in[0].v[m * K + k] = in[0].v[m * K + half + k] = u(rng);
        for (std::int64_t n = 0; n < d[2]; ++n)
          for (std::int64_t k = 0; k < half; ++k) {
            in[1].v[n * K + k] = u(rng);
            in[1].v[n * K + half + k] = -in[1].v[n * K + k] + e(rng);
          }
      };
      s.gate4_terms = [](const input_set& in, const dims& d) {
        std::vector<std::vector<double>> out;
        for (std::int64_t n = 0; n < d[2]; ++n)
          for (std::int64_t m = 0; m < d[1]; ++m) {
            std::vector<double> t;
            for (std::int64_t k = 0; k < d[0]; ++k) t.push_back(in[0].v[m * d[0] + k] * in[1].v[n * d[0] + k]);
            out.push_back(t);
          }
        return out;
      };
    }
    s.launch = "mul_mat";
    h.add(std::move(s));
  }
}

inline std::vector<gk::type> matmul_types() {
  using gk::type;
  // every weight format gk decodes (each has a CPU dot and a CUDA mat-vec/tile path)
  return {type::f32,    type::f16,     type::bf16,  type::q4_0,  type::q4_1,   type::q5_0,   type::q5_1,
          type::q8_0,   type::q2_K,    type::q3_K,  type::q4_K,  type::q5_K,   type::q6_K,   type::iq4_nl,
          type::iq4_xs, type::mxfp4,   type::nvfp4, type::tq1_0, type::tq2_0,  type::q1_0,   type::q2_0,
          type::iq2_xxs, type::iq2_xs, type::iq2_s, type::iq3_xxs, type::iq3_s, type::iq1_s,  type::iq1_m};
}

inline void add_attn(harness& h, const profile& p);  // specs_attn.hpp

inline void add_all_ops(harness& h, const profile& p) {
  add_norms(h, p);
  add_softmax(h, p);
  add_rope(h, p);
  add_unary(h, p);
  add_glu(h, p);
  add_reduce(h, p);
  add_rows_copy(h, p);
  add_matmul(h, p, matmul_types());
  add_attn(h, p);
}

// ---- the planted controls, given each backend's raw kernels ----

struct control_kernels {
  std::function<void(const std::vector<void*>&, void*, const dims&)> row_max_fmax, row_sum_atomic, row_sum_inplace,
      row_sum_tail_drop, dot_half;
};

inline void add_controls(harness& h, const control_kernels& k, const std::string& where) {
  using namespace detail;
  auto rows_spec = [&](std::string name, int gate, auto kernel) {
    spec s;
    s.name = "control " + name + " (" + where + ")";  // e.g. "control fmax row max (CPU)"
    s.control_gate = gate;
    s.inputs = [](const dims& d) { return std::vector<input_decl>{f32_rows(d[0], d[1])}; };
    s.raw = kernel;
    s.raw_out = [](const dims& d) { return shape4{1, d[1], 1, 1}; };
    s.ref = [](const input_set& in, const dims&, reference& r) {
      per_row(in[0], [&](const double* x, std::int64_t n, std::int64_t) {
        double sum = 0, sabs = 0;
        for (std::int64_t i = 0; i < n; ++i) sum += x[i], sabs += std::fabs(x[i]);
        r.push(sum, sabs);
      });
    };
    s.depth = [](const dims& d) { return static_cast<double>(d[0]) + 1; };
    s.served = {{1000, 16}};
    return s;
  };
  {
    spec s = rows_spec("fmax row max", 1, k.row_max_fmax);
    s.ref = [](const input_set& in, const dims&, reference& r) {
      per_row(in[0], [&](const double* x, std::int64_t n, std::int64_t) {
        double m = -inf;
        for (std::int64_t i = 0; i < n; ++i) m = std::isnan(x[i]) || std::isnan(m) ? qnan : std::max(m, x[i]);
        r.push(m, 0);
      });
    };
    h.add(std::move(s));
  }
  {
    // mixed magnitudes, so the order of the adds shows in the low bits
    spec s = rows_spec("atomic-add row sum", 2, k.row_sum_atomic);
    s.inputs = [](const dims& d) { return std::vector<input_decl>{f32_rows(d[0], d[1], -1000, 1000)}; };
    h.add(std::move(s));
  }
  h.add(rows_spec("in-place row sum", 2, k.row_sum_inplace));
  {
    spec s = rows_spec("tail-dropping row sum", 3, k.row_sum_tail_drop);
    s.served = {{256, 8}};
    s.tiles = {{0, 32, 1, 1, 1000, "row length"}};
    h.add(std::move(s));
  }
  {
    spec s;
    s.name = "control half-precision dot (" + where + ")";
    s.control_gate = 4;
    s.inputs = [](const dims& d) { return std::vector<input_decl>{f32_rows(d[0], d[1]), f32_rows(d[0], 1)}; };
    s.raw = k.dot_half;
    s.raw_out = [](const dims& d) { return shape4{1, d[1], 1, 1}; };
    s.ref = [](const input_set& in, const dims& d, reference& r) {
      for (std::int64_t m = 0; m < d[1]; ++m) {
        double sum = 0, sabs = 0;
        for (std::int64_t k2 = 0; k2 < d[0]; ++k2) {
          sum += in[0].v[m * d[0] + k2] * in[1].v[k2];
          sabs += std::fabs(in[0].v[m * d[0] + k2] * in[1].v[k2]);
        }
        r.push(sum, sabs);
      }
    };
    s.served = {{2048, 4}};
    s.gate4_dims = {2048, 4};
    s.gate4_fill = [](input_set& in, const dims& d, std::mt19937& rng) {
      std::uniform_int_distribution<int> u(1, 64), e(-1, 1);
      const std::int64_t K = d[0], half = K / 2;
      for (std::int64_t m = 0; m < d[1]; ++m)
        for (std::int64_t k2 = 0; k2 < half; ++k2) in[0].v[m * K + k2] = in[0].v[m * K + half + k2] = u(rng);
      for (std::int64_t k2 = 0; k2 < half; ++k2) {
        in[1].v[k2] = u(rng);
        in[1].v[half + k2] = -in[1].v[k2] + e(rng);
      }
    };
    s.gate4_terms = [](const input_set& in, const dims& d) {
      std::vector<std::vector<double>> out;
      for (std::int64_t m = 0; m < d[1]; ++m) {
        std::vector<double> t;
        for (std::int64_t k2 = 0; k2 < d[0]; ++k2) t.push_back(in[0].v[m * d[0] + k2] * in[1].v[k2]);
        out.push_back(t);
      }
      return out;
    };
    h.add(std::move(s));
  }
}

}  // namespace gk_contract

#include "specs_attn.hpp"
