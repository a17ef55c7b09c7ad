// SPDX-License-Identifier: MIT
// The format checks against the reference, written once over BlockFormat:
//   interop  - decoding is a pure function of the bits: on blocks we encode, blocks the
//              reference encodes and random bytes, our decode equals the reference's
//              bit for bit (NaN matches NaN);
//   quality  - importance-weighted reconstruction error over many rows of several
//              distributions, ours over the reference's, with and without importance;
//   dot      - our scalar dot against the truth (both rows decoded, dotted in double).
// Each check returns a report instead of asserting, so a planted control (a broken
// decoder, encoder or dot run through the same check) can assert that it goes red.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "ggml.h"
#include "ggml-cpu.h"
#include "gk/formats/all.hpp"

namespace gk_test {

using namespace gk;

inline void init_reference() {
  static const bool once = [] {
    ggml_cpu_init();  // the CPU backend's own f16 tables: without this every dot is 0
    return true;
  }();
  (void)once;
}

template <class W> constexpr ggml_type ggml_of() { return static_cast<ggml_type>(W::id); }

// ---- inputs ------------------------------------------------------------------------

enum class dist { gaussian, uniform, heavy, zeros, constant };
inline constexpr dist all_dists[] = {dist::gaussian, dist::uniform, dist::heavy, dist::zeros, dist::constant};
inline const char* dist_name(dist d) {
  switch (d) {
    case dist::gaussian: return "gaussian";
    case dist::uniform: return "uniform";
    case dist::heavy: return "heavy";
    case dist::zeros: return "zeros";
    case dist::constant: return "constant";
  }
  return "?";
}

// rows x n values of distribution d; every row gets its own magnitude (1e-3 .. 1e2).
inline std::vector<float> make_rows(dist d, int rows, int n, std::uint64_t seed) {
  std::mt19937_64 rng(seed * 7919 + static_cast<int>(d));
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f), u01(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(rows) * n);
  for (int r = 0; r < rows; ++r) {
    const float mag = std::pow(10.0f, -3.0f + 5.0f * u01(rng));
    float* row = x.data() + static_cast<std::size_t>(r) * n;
    const float c = g(rng);
    for (int i = 0; i < n; ++i) {
      float v = 0.0f;
      switch (d) {
        case dist::gaussian: v = g(rng); break;
        case dist::uniform: v = u(rng); break;
        case dist::heavy: v = g(rng) * (u01(rng) < 0.02f ? 8.0f + 12.0f * u01(rng) : 1.0f); break;
        case dist::zeros: v = (u01(rng) < 0.5f || (i / 64) % 4 == 1) ? 0.0f : g(rng); break;
        case dist::constant: v = c; break;
      }
      row[i] = v * mag;
    }
  }
  return x;
}

// Per-column importance (as an imatrix is): exp(gaussian), so weights span ~50x.
inline std::vector<float> make_importance(int n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> w(n);
  for (auto& v : w) v = std::exp(g(rng));
  return w;
}

inline bool same_bits(float a, float b) {
  if (std::isnan(a) && std::isnan(b)) return true;
  std::uint32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return x == y;
}

// ---- the reference's codecs ----------------------------------------------------------

inline bool reference_chunk_encodes(ggml_type t) {
  return t != GGML_TYPE_Q8_1 && t != GGML_TYPE_Q8_K;
}

// Encode rows with the reference: its quantize (with imatrix) where it has one, else the
// CPU trait's from_float (q8_1, q8_K: activation formats). The formats the reference
// cannot encode without importance (iq2_xxs, iq2_xs, iq1_s) get uniform importance from
// it when the caller has none, which is what gk's encoders use in that case.
inline void ref_encode(ggml_type t, const float* x, void* dst, int rows, int n, const float* imp) {
  init_reference();
  if (reference_chunk_encodes(t)) {
    std::vector<float> ones;
    if (!imp && ggml_quantize_requires_imatrix(t)) {
      ones.assign(n, 1.0f);
      imp = ones.data();
    }
    ggml_quantize_chunk(t, x, dst, 0, rows, n, imp);
  } else {
    const std::size_t rs = ggml_row_size(t, n);
    for (int r = 0; r < rows; ++r)
      ggml_get_type_traits_cpu(t)->from_float(x + static_cast<std::size_t>(r) * n,
                                              static_cast<char*>(dst) + r * rs, n);
  }
}

// The reference's decoder. It has none for its activation formats q8_1 and q8_K (they
// are only ever consumed inside its dots); those are decoded here from the GGUF layout
// as its dots read them, d * q, with d the leading f16 (q8_1) or f32 (q8_K).
inline void ref_decode(ggml_type t, const void* src, float* dst, std::int64_t n) {
  init_reference();
  const auto* bytes = static_cast<const unsigned char*>(src);
  if (t == GGML_TYPE_F32) {
    std::memcpy(dst, src, n * sizeof(float));
  } else if (ggml_get_type_traits(t)->to_float) {
    ggml_get_type_traits(t)->to_float(src, dst, n);
  } else if (t == GGML_TYPE_Q8_1 || t == GGML_TYPE_Q8_K) {
    const int bs = static_cast<int>(ggml_blck_size(t));
    const std::size_t ts = ggml_type_size(t);
    const int qs_at = 4;  // q8_1: f16 d, f16 s; q8_K: f32 d
    for (std::int64_t b = 0; b < n / bs; ++b) {
      const unsigned char* blk = bytes + b * ts;
      float d;
      if (t == GGML_TYPE_Q8_1) {
        ggml_fp16_t h;
        std::memcpy(&h, blk, 2);
        d = ggml_fp16_to_fp32(h);
      } else {
        std::memcpy(&d, blk, 4);
      }
      for (int j = 0; j < bs; ++j) dst[b * bs + j] = d * static_cast<float>(static_cast<std::int8_t>(blk[qs_at + j]));
    }
  } else {
    std::fprintf(stderr, "harness: the reference has no decoder for %s\n", ggml_type_name(t));
    std::abort();
  }
}

// ---- interop -----------------------------------------------------------------------

struct interop_report {
  std::int64_t compared = 0, mismatched = 0;
  std::string first;  // the first mismatch, described
  bool ok() const { return compared > 0 && mismatched == 0; }
};

template <BlockFormat W>
void compare_decode(const std::vector<typename W::block>& blocks, std::int64_t n, interop_report& rep,
                    const char* what) {
  std::vector<float> ours(n, std::nanf("1")), theirs(n, std::nanf("2"));
  decode_row<W>(blocks.data(), ours.data(), n);
  ref_decode(ggml_of<W>(), blocks.data(), theirs.data(), n);
  for (std::int64_t i = 0; i < n; ++i) {
    ++rep.compared;
    if (!same_bits(ours[i], theirs[i])) {
      if (rep.mismatched++ == 0) {
        char buf[256];
        std::snprintf(buf, sizeof buf, "%s: element %lld: gk %.9g, reference %.9g", what,
                      static_cast<long long>(i), ours[i], theirs[i]);
        rep.first = buf;
      }
    }
  }
}

template <BlockFormat W>
interop_report check_interop(int rows = 64, int n = 1024) {
  using B = typename W::block;
  interop_report rep;
  const std::int64_t nb = static_cast<std::int64_t>(rows) * n / W::block_size;
  const auto imp = make_importance(n, 11);
  for (dist d : all_dists) {
    const auto x = make_rows(d, rows, n, 3);
    for (int with_imp = 0; with_imp < 2; ++with_imp) {
      const float* im = with_imp ? imp.data() : nullptr;
      std::vector<B> blocks(nb);
      for (int r = 0; r < rows; ++r)  // ours encodes, both decode
        encode_row<W>(x.data() + static_cast<std::size_t>(r) * n, blocks.data() + r * (n / W::block_size), n, im);
      compare_decode<W>(blocks, static_cast<std::int64_t>(rows) * n, rep, "gk-encoded");
      ref_encode(ggml_of<W>(), x.data(), blocks.data(), rows, n, im);  // the reference encodes
      compare_decode<W>(blocks, static_cast<std::int64_t>(rows) * n, rep, "reference-encoded");
    }
  }
  // Random bytes: every bit pattern the format can hold, scales included.
  std::mt19937_64 rng(99);
  std::vector<B> blocks(nb);
  auto* bytes = reinterpret_cast<unsigned char*>(blocks.data());
  for (std::size_t i = 0; i < blocks.size() * sizeof(B); ++i) bytes[i] = static_cast<unsigned char>(rng());
  compare_decode<W>(blocks, nb * W::block_size, rep, "random bytes");
  return rep;
}

// ---- quality -----------------------------------------------------------------------

struct quality_row {
  dist d;
  bool importance;
  double err_gk, err_ref, ratio;
};

// err = sum imp_i (x_i - decoded_i)^2 over all rows; ratio = sqrt(err_gk / err_ref), with
// errors under 1e-14 of the signal counted as equal (both exact, to float rounding).
template <BlockFormat W>
std::vector<quality_row> check_quality(int rows, int n = 1024) {
  using B = typename W::block;
  std::vector<quality_row> out;
  const auto imp = make_importance(n, 5);
  const std::size_t nbr = n / W::block_size;
  std::vector<B> ours(rows * nbr), theirs(rows * nbr);
  std::vector<float> yo(static_cast<std::size_t>(rows) * n), yr(static_cast<std::size_t>(rows) * n);
  for (dist d : all_dists) {
    const auto x = make_rows(d, rows, n, 17);
    for (int with_imp = 0; with_imp < 2; ++with_imp) {
      const float* im = with_imp ? imp.data() : nullptr;
      for (int r = 0; r < rows; ++r)
        encode_row<W>(x.data() + static_cast<std::size_t>(r) * n, ours.data() + r * nbr, n, im);
      ref_encode(ggml_of<W>(), x.data(), theirs.data(), rows, n, im);
      decode_row<W>(ours.data(), yo.data(), static_cast<std::int64_t>(rows) * n);
      ref_decode(ggml_of<W>(), theirs.data(), yr.data(), static_cast<std::int64_t>(rows) * n);
      double eo = 0, er = 0, sig = 0;
      for (std::size_t i = 0; i < x.size(); ++i) {
        const double w = im ? im[i % n] : 1.0;
        eo += w * (double(x[i]) - yo[i]) * (double(x[i]) - yo[i]);
        er += w * (double(x[i]) - yr[i]) * (double(x[i]) - yr[i]);
        sig += w * double(x[i]) * x[i];
      }
      const double floor = 1e-14 * sig + 1e-300;
      out.push_back({d, with_imp != 0, eo, er, std::sqrt((eo + floor) / (er + floor))});
    }
  }
  return out;
}

template <class W>
void print_quality(const std::vector<quality_row>& q) {
  for (const auto& r : q)
    std::printf("quality %-8s %-9s %-6s rmse gk %.4e ref %.4e ratio %.4f\n", std::string(name(W::id)).c_str(),
                dist_name(r.d), r.importance ? "imp" : "plain", std::sqrt(r.err_gk), std::sqrt(r.err_ref), r.ratio);
}

// ---- dot ---------------------------------------------------------------------------

// Whether the reference's f16 row dot accumulates in f16: its native build takes the
// AVX-512 FP16 instructions (fused multiply-adds into f16 lanes) where the CPU has them
// (CPUID leaf 7, EDX bit 23; tools/reference.sh builds for this machine).
inline bool reference_f16_dot_in_f16() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 23));
#else
  return false;
#endif
}

struct dot_report {
  double worst = 0;       // max |dot - truth| / bound over rows
  double worst_ref = 0;   // the same for the reference's vec_dot on the same blocks
  bool ok() const { return worst <= 1.0; }
};

// Bound: (blocks + 4) * 2^-24 * sum |w_i a_i| - float accumulation of exact block sums.
template <BlockFormat W>
float plain_row_dot(const typename W::block* w, const typename W::dot_type::block* a, std::int64_t n) {
  return dot_row<W>(w, a, n);
}

template <BlockFormat W, class RowDot = decltype(&plain_row_dot<W>)>
dot_report check_dot(int rows = 64, int n = 1024, RowDot row_dot = &plain_row_dot<W>) {
  using A = typename W::dot_type;
  dot_report rep;
  const std::size_t nbw = n / W::block_size, nba = n / A::block_size;
  std::vector<typename W::block> w(nbw);
  std::vector<typename A::block> a(nba);
  std::vector<float> wd(n), ad(n);
  for (dist d : {dist::gaussian, dist::heavy, dist::zeros}) {
    const auto xw = make_rows(d, rows, n, 21);
    const auto xa = make_rows(dist::gaussian, rows, n, 22);
    for (int r = 0; r < rows; ++r) {
      encode_row<W>(xw.data() + static_cast<std::size_t>(r) * n, w.data(), n);
      encode_row<A>(xa.data() + static_cast<std::size_t>(r) * n, a.data(), n);
      decode_row<W>(w.data(), wd.data(), n);
      decode_row<A>(a.data(), ad.data(), n);
      double truth = 0, mag = 0;
      for (int i = 0; i < n; ++i) {
        truth += double(wd[i]) * ad[i];
        mag += std::fabs(double(wd[i]) * ad[i]);
      }
      const double bound = (double(n / W::block_size) + 4) * std::ldexp(1.0, -24) * mag + 1e-30;
      const float got = row_dot(w.data(), a.data(), n);
      rep.worst = std::max(rep.worst, std::fabs(got - truth) / bound);
      init_reference();
      const auto* cpu = ggml_get_type_traits_cpu(ggml_of<W>());
      if (ggml_of<W>() != GGML_TYPE_Q8_K && cpu->vec_dot) {
        float s = 0;
        cpu->vec_dot(n, &s, 0, w.data(), 0, a.data(), 0, 1);
        rep.worst_ref = std::max(rep.worst_ref, std::fabs(s - truth) / bound);
      }
    }
  }
  return rep;
}

// ---- planted controls ----------------------------------------------------------------

// A decoder that drops the block's last weight.
template <BlockFormat W> struct tail_dropped : W {
  static void decode(const typename W::block& b, float* out) {
    W::decode(b, out);
    out[W::block_size - 1] = 0.0f;
  }
};
// A decoder that swaps two weights (a wrong index).
template <BlockFormat W> struct swapped_pair : W {
  static void decode(const typename W::block& b, float* out) {
    W::decode(b, out);
    std::swap(out[0], out[W::block_size / 2 + 1]);
  }
};
// An encoder whose scale is 3% off.
template <BlockFormat W> struct skewed_encoder : W {
  static void encode_row(const float* x, typename W::block* out, std::int64_t n, const float* imp) {
    std::vector<float> y(x, x + n);
    for (auto& v : y) v *= 1.03f;
    gk::encode_row<W>(y.data(), out, n, imp);
  }
};
// A row dot that drops the row's last block.
template <BlockFormat W>
float short_row_dot(const typename W::block* w, const typename W::dot_type::block* a, std::int64_t n) {
  return dot_row<W>(w, a, n - W::block_size);
}

}  // namespace gk_test

// Runs interop, quality and dot for W and asserts each bar; prints the quality table.
#define GK_CHECK_FORMAT(W, quality_rows)                                                     \
  do {                                                                                       \
    const auto rep = gk_test::check_interop<W>();                                            \
    INFO(#W " interop: " << rep.first);                                                      \
    CHECK(rep.compared > 0);                                                                 \
    CHECK(rep.mismatched == 0);                                                              \
    const auto q = gk_test::check_quality<W>(quality_rows);                                  \
    gk_test::print_quality<W>(q);                                                            \
    for (const auto& r : q) {                                                                \
      INFO(#W " quality " << gk_test::dist_name(r.d) << (r.importance ? " imp" : " plain")); \
      CHECK(r.ratio <= 1.02);                                                                \
    }                                                                                        \
    const auto dr = gk_test::check_dot<W>();                                                 \
    std::printf("dot %-8s worst |err|/bound gk %.3f reference %.3f\n",                       \
                std::string(gk::name(W::id)).c_str(), dr.worst, dr.worst_ref);               \
    CHECK(dr.ok());                                                                          \
    /* the reference's dot reads gk's blocks to the same truth. Its SIMD dots round more */ \
    /* often than the scalar definition (measured up to 2.1x the bound, tq1_0), hence 4; */ \
    /* its q4_1/q5_1 dots use q8_1's f16-rounded block sum s (~130x): not held here.    */ \
    /* Its f16 dot with AVX-512 FP16 adds in f16 (8.6x the bound on an Intel Xeon): there */ \
    /* the bound's unit roundoff is f16's, 2^-11 where f32's is 2^-24.                   */ \
    if (W::dot_type::id != gk::type::q8_1 && W::id != gk::type::q8_K) {                      \
      const bool f16_lanes = W::id == gk::type::f16 && gk_test::reference_f16_dot_in_f16(); \
      CHECK(dr.worst_ref <= (f16_lanes ? 4.0 * 8192 : 4.0));                                 \
    }                                                                                        \
  } while (0)
