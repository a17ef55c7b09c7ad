// SPDX-License-Identifier: MIT
// Ops against the reference: build the same graph in gk and in ggml, feed both the same
// bytes, compute, compare. Tensors are layout-identical, so one reader (gk's row_read)
// reads both outputs.
//
//   gk_test::op_pair p;                        // a gk context and a ggml context
//   auto a = p.input(gk::type::f32, {64, 3, 2});   // same random data in both
//   auto y = p.out(gk::add(p.g, a.g, b.g), ggml_add(p.r, a.r, b.r));
//   auto d = p.run(y);                         // compute both (1 thread by default)
//   CHECK(d.max_abs <= 1e-6);                 // or d.max_rel, d.ulps, d.mismatches
//
// Inputs in a block format are encoded once by gk and the same bytes are given to both.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "ggml-cpu.h"
#include "ggml.h"
#include "gk/cpu/compute.hpp"
#include "gk/ops.hpp"

namespace gk_test {

inline void init_reference_ops() {
  static const bool once = [] {
    ggml_cpu_init();
    return true;
  }();
  (void)once;
}

inline gk::tensor* as_gk(ggml_tensor* t) { return reinterpret_cast<gk::tensor*>(t); }

struct tpair {
  gk::tensor* g = nullptr;
  ggml_tensor* r = nullptr;
};

// How the output of the two libraries differs.
struct diff {
  double max_abs = 0;       // max |g - r|
  double max_rel = 0;       // max |g - r| / max(|r|, 1e-30) over elements with |r| > floor
  double max_ulps = 0;      // max distance in f32 units in the last place
  std::int64_t mismatches = 0;  // elements whose bits differ (NaN == NaN)
  std::int64_t nan_mismatch = 0;  // one side NaN/inf and the other not, or infinities differ
  std::int64_t n = 0;
  std::string where;        // first worst element, for the failure message
  std::string str() const {
    char b[256];
    std::snprintf(b, sizeof b, "n=%lld max_abs=%.3g max_rel=%.3g max_ulps=%.0f mismatches=%lld nonfinite=%lld %s",
                  static_cast<long long>(n), max_abs, max_rel, max_ulps, static_cast<long long>(mismatches),
                  static_cast<long long>(nan_mismatch), where.c_str());
    return b;
  }
};

inline double ulp_distance(float a, float b) {
  auto key = [](float f) {
    std::int32_t i;
    std::memcpy(&i, &f, 4);
    return i < 0 ? static_cast<std::int64_t>(INT32_MIN) - i : static_cast<std::int64_t>(i);
  };
  return static_cast<double>(std::llabs(key(a) - key(b)));
}

// Reads every element of a tensor (any gk-readable type, any strides) as f32, in
// i0-fastest order.
inline std::vector<float> read_all(const gk::tensor* t) {
  std::vector<float> out(static_cast<std::size_t>(t->nelements()));
  std::vector<float> buf(static_cast<std::size_t>(t->ne[0]) + 16);
  std::size_t k = 0;
  for (std::int64_t i3 = 0; i3 < t->ne[3]; ++i3)
    for (std::int64_t i2 = 0; i2 < t->ne[2]; ++i2)
      for (std::int64_t i1 = 0; i1 < t->ne[1]; ++i1) {
        const float* row = gk::cpu::row_read(t, i1, i2, i3, buf.data());
        for (std::int64_t i0 = 0; i0 < t->ne[0]; ++i0) out[k++] = row[i0];
      }
  return out;
}

inline diff compare(const gk::tensor* g, const gk::tensor* r, double rel_floor = 1e-6) {
  diff d;
  auto a = read_all(g), b = read_all(r);
  d.n = static_cast<std::int64_t>(a.size());
  double worst = -1;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const float x = a[i], y = b[i];
    const bool fx = std::isfinite(x), fy = std::isfinite(y);
    if (std::isnan(x) && std::isnan(y)) continue;
    if (std::memcmp(&x, &y, 4) != 0) ++d.mismatches;
    if (!fx || !fy) {
      if (!(x == y)) ++d.nan_mismatch;
      continue;
    }
    const double e = std::fabs(static_cast<double>(x) - y);
    d.max_abs = std::max(d.max_abs, e);
    if (std::fabs(y) > rel_floor) d.max_rel = std::max(d.max_rel, e / std::fabs(static_cast<double>(y)));
    d.max_ulps = std::max(d.max_ulps, ulp_distance(x, y));
    if (e > worst) {
      worst = e;
      char b2[96];
      std::snprintf(b2, sizeof b2, "(worst at %zu: gk %.9g ref %.9g)", i, x, y);
      d.where = b2;
    }
  }
  return d;
}

// Same shapes compared? The test should REQUIRE this before comparing values.
inline bool same_shape(const tpair& p) {
  for (int i = 0; i < 4; ++i)
    if (p.g->ne[i] != p.r->ne[i]) return false;
  return p.g->type == static_cast<gk::type>(p.r->type);
}

class op_pair {
 public:
  explicit op_pair(std::size_t mem = 256u << 20, std::uint64_t seed = 1)
      : g(gk::context_params{mem, nullptr, false}), rng(seed) {
    init_reference_ops();
    ggml_init_params ip{mem, nullptr, false};
    r = ggml_init(ip);
  }
  ~op_pair() { ggml_free(r); }
  op_pair(const op_pair&) = delete;
  op_pair& operator=(const op_pair&) = delete;

  gk::context g;
  ggml_context* r;
  std::mt19937_64 rng;

  // A new input in both libraries with identical contents: values uniform in [lo, hi]
  // (integers for integer types), encoded once by gk for block formats.
  // distinct_rows > 0: only that many rows are drawn and encoded, then repeated (for
  // benchmarks, where encoding every row of a large weight would dominate the run).
  tpair input(gk::type t, std::array<std::int64_t, 4> ne, float lo = -1.0f, float hi = 1.0f,
              std::int64_t distinct_rows = 0) {
    tpair p;
    p.g = g.new_tensor(t, 4, ne.data());
    p.r = ggml_new_tensor(r, static_cast<ggml_type>(t), 4, ne.data());
    const std::int64_t rows = p.g->nrows();
    if (distinct_rows > 0 && distinct_rows < rows) {
      gk::tensor head = *p.g;  // the first distinct_rows rows, as a tensor of their own
      head.ne[1] = distinct_rows;
      head.ne[2] = head.ne[3] = 1;
      fill_uniform(tpair{&head, p.r}, lo, hi);
      const std::size_t rb = p.g->nb[1];
      for (std::int64_t i = distinct_rows; i < rows; ++i)
        std::memcpy(static_cast<char*>(p.g->data) + static_cast<std::size_t>(i) * rb,
                    static_cast<char*>(p.g->data) + static_cast<std::size_t>(i % distinct_rows) * rb, rb);
      std::memcpy(p.r->data, p.g->data, p.g->nbytes());
      return p;
    }
    fill_uniform(p, lo, hi);
    return p;
  }
  tpair input(gk::type t, std::initializer_list<std::int64_t> ne, float lo = -1.0f, float hi = 1.0f,
              std::int64_t distinct_rows = 0) {
    std::array<std::int64_t, 4> a{1, 1, 1, 1};
    int i = 0;
    for (auto v : ne) a[static_cast<std::size_t>(i++)] = v;
    return input(t, a, lo, hi, distinct_rows);
  }

  // Fill both with the given f32 values (converted / encoded once by gk).
  void set(const tpair& p, const std::vector<float>& v) {
    const std::int64_t n0 = p.g->ne[0];
    std::vector<float> row(static_cast<std::size_t>(n0));
    std::size_t k = 0;
    for (std::int64_t i3 = 0; i3 < p.g->ne[3]; ++i3)
      for (std::int64_t i2 = 0; i2 < p.g->ne[2]; ++i2)
        for (std::int64_t i1 = 0; i1 < p.g->ne[1]; ++i1) {
          for (std::int64_t i0 = 0; i0 < n0; ++i0) row[static_cast<std::size_t>(i0)] = v[k++];
          gk::cpu::row_writer w(p.g, row.data());
          float* dst = w.begin(i1, i2, i3);
          if (dst != row.data()) std::memcpy(dst, row.data(), row.size() * 4);
          w.commit();
        }
    copy_bytes(p);
  }
  // Integer values (for index tensors), stored as the tensor's integer type.
  void set_ints(const tpair& p, const std::vector<std::int64_t>& v) {
    std::size_t k = 0;
    for (std::int64_t i3 = 0; i3 < p.g->ne[3]; ++i3)
      for (std::int64_t i2 = 0; i2 < p.g->ne[2]; ++i2)
        for (std::int64_t i1 = 0; i1 < p.g->ne[1]; ++i1)
          for (std::int64_t i0 = 0; i0 < p.g->ne[0]; ++i0) {
            char* dst = p.g->at(i1, i2, i3) + static_cast<std::size_t>(i0) * p.g->nb[0];
            const std::int64_t x = v[k++];
            if (p.g->type == gk::type::i32) { auto y = static_cast<std::int32_t>(x); std::memcpy(dst, &y, 4); }
            else if (p.g->type == gk::type::i64) std::memcpy(dst, &x, 8);
            else if (p.g->type == gk::type::i16) { auto y = static_cast<std::int16_t>(x); std::memcpy(dst, &y, 2); }
            else { auto y = static_cast<std::int8_t>(x); std::memcpy(dst, &y, 1); }
          }
    copy_bytes(p);
  }

  // Pairs the two result nodes (checks the shapes agree).
  static tpair out(gk::tensor* a, ggml_tensor* b) { return tpair{a, b}; }

  // Builds a graph on each side for `y` (and any extra roots), computes both, compares.
  diff run(const tpair& y, int n_threads = 1, std::initializer_list<tpair> extra_roots = {}) {
    compute_gk(y, n_threads, extra_roots);
    compute_ref(y, 1, extra_roots);
    return compare(y.g, as_gk(y.r));
  }
  void compute_gk(const tpair& y, int n_threads = 1, std::initializer_list<tpair> extra_roots = {}) {
    gk::graph gg;
    for (auto& e : extra_roots) gg.build_forward_expand(e.g);
    gg.build_forward_expand(y.g);
    gk::cpu::compute(gg, n_threads);
  }
  void compute_ref(const tpair& y, int n_threads = 1, std::initializer_list<tpair> extra_roots = {}) {
    ggml_cgraph* gr = ggml_new_graph_custom(r, 8192, false);
    for (auto& e : extra_roots) ggml_build_forward_expand(gr, e.r);
    ggml_build_forward_expand(gr, y.r);
    ggml_graph_compute_with_ctx(r, gr, n_threads);
  }

 private:
  void copy_bytes(const tpair& p) {
    // both tensors are fresh and contiguous with identical geometry
    std::memcpy(p.r->data, p.g->data, p.g->nbytes());
  }
  void fill_uniform(const tpair& p, float lo, float hi) {
    const auto n = static_cast<std::size_t>(p.g->nelements());
    const gk::type t = p.g->type;
    if (t == gk::type::i32 || t == gk::type::i64 || t == gk::type::i16 || t == gk::type::i8) {
      std::uniform_int_distribution<std::int64_t> d(static_cast<std::int64_t>(lo), static_cast<std::int64_t>(hi));
      std::vector<std::int64_t> v(n);
      for (auto& x : v) x = d(rng);
      set_ints(p, v);
      return;
    }
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    set(p, v);
  }
};

// Every element's bytes, i0 fastest (views and permutes included).
inline std::vector<unsigned char> raw_bytes(const gk::tensor* t) {
  std::vector<unsigned char> out;
  const std::size_t es = gk::type_size(t->type);
  for (std::int64_t i3 = 0; i3 < t->ne[3]; ++i3)
    for (std::int64_t i2 = 0; i2 < t->ne[2]; ++i2)
      for (std::int64_t i1 = 0; i1 < t->ne[1]; ++i1)
        for (std::int64_t i0 = 0; i0 < t->ne[0]; ++i0) {
          const char* p = t->at(i1, i2, i3) + static_cast<std::size_t>(i0) * t->nb[0];
          out.insert(out.end(), p, p + es);
        }
  return out;
}

}  // namespace gk_test
