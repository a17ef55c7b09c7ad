// SPDX-License-Identifier: MIT
// dot_kernel<W, simd::native> against the scalar definition, bit for bit, for every
// format: the build compiles this file once per target (scalar, avx2, avx512 flags), and
// each binary checks its own target when the CPU can run it. Weights are our encodings
// and random bytes (any bits a file may hold); activations are encoded once, by the
// scalar encoder, and read by both paths, or have their quant bytes replaced by random ones
// (-128 among them, which no encoder writes). Every dot_tile shape the matmul runs
// (tile_shape below mirrors cpu/matmul.hpp's) is checked against the row dots too.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gk/formats/all.hpp"
#include "gk/simd/dot.hpp"

namespace {

// activation quant bytes: random, a quarter of them -128
template <class B>
void randomise_quants(std::vector<B>& a, std::mt19937_64& rng) {
  if constexpr (requires(B b) { b.qs[0]; }) {
    for (auto& b : a)
      for (auto& q : b.qs) {
        const auto v = rng();
        q = static_cast<std::int8_t>(v % 4 == 0 ? -128 : static_cast<int>((v >> 8) & 0xff) - 128);
      }
  }
}

template <class W, class RowDot>
std::int64_t mismatches(RowDot&& kernel, int rows = 48, int n = 2048, bool random_act = false) {
  using A = typename W::dot_type;
  std::mt19937_64 rng(42);
  std::normal_distribution<float> g;
  std::vector<float> x(n), xa(n);
  std::vector<typename W::block> w(n / W::block_size);
  std::vector<typename A::block> a(n / A::block_size);
  std::int64_t bad = 0;
  for (int r = 0; r < rows; ++r) {
    for (auto& v : x) v = g(rng) * (r % 3 == 0 ? 100.0f : 1.0f);
    for (auto& v : xa) v = g(rng);
    if (r % 4 == 3 && W::id != gk::type::f32 && W::id != gk::type::f16 && W::id != gk::type::bf16) {
      auto* bytes = reinterpret_cast<unsigned char*>(w.data());  // any bits a file may hold
      for (std::size_t i = 0; i < w.size() * sizeof(typename W::block); ++i) bytes[i] = static_cast<unsigned char>(rng());
      std::vector<float> probe(n);
      gk::decode_row<W>(w.data(), probe.data(), n);
      bool finite = true;
      for (float v : probe) finite &= std::isfinite(v);
      if (!finite) gk::encode_row<W>(x.data(), w.data(), n);  // NaN scales compare unequal to themselves
    } else {
      gk::encode_row<W>(x.data(), w.data(), n);
    }
    gk::encode_row<A>(xa.data(), a.data(), n);
    if (random_act) randomise_quants(a, rng);
    const float want = gk::dot_row<W>(w.data(), a.data(), n);
    const float got = kernel(w.data(), a.data(), n);
    bad += std::memcmp(&want, &got, sizeof want) != 0;
  }
  return bad;
}

// The tile shape cpu/matmul.hpp runs for W: dot_tile's rows x cols where it names them,
// else 4 x 2; then leftover columns 4, 2 and 1 at a time.
template <class D>
struct tile_shape {
  static constexpr int rows = 4, cols = 2;
};
template <class D>
  requires requires { D::rows; D::cols; }
struct tile_shape<D> {
  static constexpr int rows = D::rows, cols = D::cols;
};

// A row dot computed through an R x C dot_tile: the rows are w and variants of it, its
// blocks reversed or rotated by a different amount for each row (v = 0: reversed, 1:
// rotated by one, 2: reversed after rotating by one, ...), so that rows a tile mixes up
// give different sums; the columns are a and its variants the same way (w and a last).
// Every one of the R * C results must equal its own row dot bit for bit, and the (w, a)
// one is returned (NaN if any differs).
template <class W, int R, int C>
float tile_as_row(const typename W::block* w, const typename W::dot_type::block* a, std::int64_t n) {
  using A = typename W::dot_type;
  using K = gk::dot_kernel<W, gk::simd::native>;
  const std::size_t nb = static_cast<std::size_t>(n / W::block_size);
  // whole weight-block spans of activation blocks move together, so pairs stay aligned
  constexpr int per = W::block_size / A::block_size > 0 ? W::block_size / A::block_size : 1;
  constexpr int nv = R > C ? R : C;
  std::vector<typename W::block> wv[nv];
  std::vector<typename A::block> av[nv];
  for (int v = 0; v < nv; ++v) {
    wv[v].resize(nb);
    av[v].resize(nb * per);
    const std::size_t turn = static_cast<std::size_t>(v / 2 + v % 2);
    for (std::size_t i = 0; i < nb; ++i) {
      const std::size_t src = v % 2 == 0 ? nb - 1 - (i + turn) % nb : (i + turn) % nb;
      wv[v][i] = w[src];
      for (int j = 0; j < per; ++j) av[v][i * per + static_cast<std::size_t>(j)] = a[src * per + static_cast<std::size_t>(j)];
    }
  }
  const typename W::block* rows[R];
  const typename A::block* cols[C];
  for (int r = 0; r < R; ++r) rows[r] = r == R - 1 ? w : wv[r].data();
  for (int c = 0; c < C; ++c) cols[c] = c == C - 1 ? a : av[(c + 1) % nv].data();
  float out[R * C];
  gk::dot_tile<W, gk::simd::native>::template run<R, C>(rows, cols, n, out);
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      const float want = K::row(rows[r], cols[c], n);
      if (std::memcmp(&want, &out[r * C + c], sizeof want) != 0) return NAN;
    }
  return out[R * C - 1];
}

// every shape the matmul runs for W, and the 4 x 2 of the primary template
template <class W>
void check_tiles(int len) {
  using S = tile_shape<gk::dot_tile<W, gk::simd::native>>;
  const int n = len * W::block_size;
  for (bool ra : {false, true}) {
    INFO("tile rows of " << len << " blocks, random activation bytes " << ra);
    CHECK(mismatches<W>(&tile_as_row<W, S::rows, S::cols>, 4, n, ra) == 0);
    if constexpr (S::cols > 4) CHECK(mismatches<W>(&tile_as_row<W, S::rows, 4>, 4, n, ra) == 0);
    if constexpr (S::cols > 2) CHECK(mismatches<W>(&tile_as_row<W, S::rows, 2>, 4, n, ra) == 0);
    CHECK(mismatches<W>(&tile_as_row<W, S::rows, 1>, 4, n, ra) == 0);
    CHECK(mismatches<W>(&tile_as_row<W, 4, 2>, 2, n, ra) == 0);
  }
}

template <class... Ws>
void check_all(std::tuple<Ws...>*) {
  (
      [] {
        using K = gk::dot_kernel<Ws, gk::simd::native>;
        INFO(gk::name(Ws::id) << " served by " << K::served_by);
        CHECK(mismatches<Ws>(&K::row) == 0);
        // short rows and tails (1, 2, 3, 5 blocks, and 21 = 16 + 5), and for the float rows every
        // length up to 40 plus a long odd one (lanes that are not a multiple of the vector)
        for (int len : {1, 2, 3, 5, 21}) CHECK(mismatches<Ws>(&K::row, 6, len * Ws::block_size) == 0);
        CHECK(mismatches<Ws>(&K::row, 6, 5 * Ws::block_size, true) == 0);
        if constexpr (Ws::block_size == 1)
          for (int len = 1; len <= 40; ++len) CHECK(mismatches<Ws>(&K::row, 2, len + (len == 40 ? 2007 : 0)) == 0);
        // the same dots through every dot_tile shape the matmul calls
        for (int len : {1, 2, 3, 5, 21, 64}) check_tiles<Ws>(len);
        if constexpr (Ws::block_size == 1) check_tiles<Ws>(2048 + 5);  // long float rows, with a tail
      }(),
      ...);
}

}  // namespace

TEST_CASE("every format's dot on this build's target equals the scalar definition bit for bit", "[simd]") {
  if (!gk::simd::native::available()) {
    WARN("this CPU cannot run " << gk::simd::native::name << "; nothing to check");
    return;
  }
  std::printf("target %s\n", std::string(gk::simd::native::name).c_str());
  check_all(static_cast<gk::formats::all*>(nullptr));
}

// A tile whose two columns are swapped; W's own shape with two columns, so the control
// runs through the specialised tile where there is one.
template <class W>
float swapped_tile(const typename W::block* w, const typename W::dot_type::block* a, std::int64_t n) {
  using A = typename W::dot_type;
  constexpr int R = tile_shape<gk::dot_tile<W, gk::simd::native>>::rows;
  std::vector<typename A::block> other(a, a + n / A::block_size);
  std::reverse(other.begin(), other.end());
  const typename W::block* rows[R];
  for (auto& r : rows) r = w;
  const typename A::block* cols[2] = {other.data(), a};
  float out[R * 2];
  gk::dot_tile<W, gk::simd::native>::template run<R, 2>(rows, cols, n, out);
  return out[0];  // column 0 where column 1 was meant
}

TEST_CASE("planted: a tile whose columns are swapped is caught", "[simd][control]") {
  CHECK(mismatches<gk::formats::q4_0>(&swapped_tile<gk::formats::q4_0>) > 0);
  CHECK(mismatches<gk::formats::iq2_xxs>(&swapped_tile<gk::formats::iq2_xxs>, 8) > 0);
  CHECK(mismatches<gk::formats::q4_K>(&swapped_tile<gk::formats::q4_K>, 8) > 0);
  CHECK(mismatches<gk::formats::q5_K>(&swapped_tile<gk::formats::q5_K>, 8) > 0);
  CHECK(mismatches<gk::formats::f16>(&swapped_tile<gk::formats::f16>, 8) > 0);
  CHECK(mismatches<gk::formats::f32>(&swapped_tile<gk::formats::f32>, 8) > 0);
  // the tiles of avx512/dot_tile_legacy.hpp (q4_0's above)
  CHECK(mismatches<gk::formats::q8_0>(&swapped_tile<gk::formats::q8_0>, 8) > 0);
  CHECK(mismatches<gk::formats::q5_0>(&swapped_tile<gk::formats::q5_0>, 8) > 0);
  CHECK(mismatches<gk::formats::q4_1>(&swapped_tile<gk::formats::q4_1>, 8) > 0);
  CHECK(mismatches<gk::formats::q5_1>(&swapped_tile<gk::formats::q5_1>, 8) > 0);
  CHECK(mismatches<gk::formats::iq4_nl>(&swapped_tile<gk::formats::iq4_nl>, 8) > 0);
  CHECK(mismatches<gk::formats::mxfp4>(&swapped_tile<gk::formats::mxfp4>, 8) > 0);
  CHECK(mismatches<gk::formats::nvfp4>(&swapped_tile<gk::formats::nvfp4>, 8) > 0);
  CHECK(mismatches<gk::formats::q1_0>(&swapped_tile<gk::formats::q1_0>, 8) > 0);
  CHECK(mismatches<gk::formats::q2_0>(&swapped_tile<gk::formats::q2_0>, 8) > 0);
  CHECK(mismatches<gk::formats::tq1_0>(&swapped_tile<gk::formats::tq1_0>, 8) > 0);
  CHECK(mismatches<gk::formats::tq2_0>(&swapped_tile<gk::formats::tq2_0>, 8) > 0);
  CHECK(mismatches<gk::formats::iq4_xs>(&swapped_tile<gk::formats::iq4_xs>, 8) > 0);
  // the tiles of avx512/dot_tile_iq16.hpp (iq2_xxs's above)
  CHECK(mismatches<gk::formats::iq2_xs>(&swapped_tile<gk::formats::iq2_xs>, 8) > 0);
  CHECK(mismatches<gk::formats::iq2_s>(&swapped_tile<gk::formats::iq2_s>, 8) > 0);
  CHECK(mismatches<gk::formats::iq3_xxs>(&swapped_tile<gk::formats::iq3_xxs>, 8) > 0);
  CHECK(mismatches<gk::formats::iq3_s>(&swapped_tile<gk::formats::iq3_s>, 8) > 0);
  CHECK(mismatches<gk::formats::iq1_s>(&swapped_tile<gk::formats::iq1_s>, 8) > 0);
  CHECK(mismatches<gk::formats::iq1_m>(&swapped_tile<gk::formats::iq1_m>, 8) > 0);
  CHECK(mismatches<gk::formats::q2_K>(&swapped_tile<gk::formats::q2_K>, 8) > 0);
  CHECK(mismatches<gk::formats::q3_K>(&swapped_tile<gk::formats::q3_K>, 8) > 0);
  CHECK(mismatches<gk::formats::q6_K>(&swapped_tile<gk::formats::q6_K>, 8) > 0);
}

TEST_CASE("planted: a kernel that drops the last block is caught", "[simd][control]") {
  using W = gk::formats::q4_K;
  auto broken = [](const W::block* w, const W::dot_type::block* a, std::int64_t n) {
    return gk::dot_kernel<W, gk::simd::native>::row(w, a, n - W::block_size);
  };
  CHECK(mismatches<W>(broken) > 0);
}
