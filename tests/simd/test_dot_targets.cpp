// SPDX-License-Identifier: MIT
// dot_kernel<W, simd::native> against the scalar definition, bit for bit, for every
// format: the build compiles this file once per target (scalar, avx2, avx512 flags), and
// each binary checks its own target when the CPU can run it. Weights are our encodings
// and random bytes (any bits a file may hold); activations are encoded once, by the
// scalar encoder, and read by both paths.
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

template <class W, class RowDot>
std::int64_t mismatches(RowDot&& kernel, int rows = 48, int n = 2048) {
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
    const float want = gk::dot_row<W>(w.data(), a.data(), n);
    const float got = kernel(w.data(), a.data(), n);
    bad += std::memcmp(&want, &got, sizeof want) != 0;
  }
  return bad;
}

// A row dot computed through a 4x2 dot_tile: the rows are w and w with its blocks
// reversed, the columns a and a reversed; every one of the 8 results must equal its own
// row dot bit for bit, and the (w, a) one is returned (NaN if any differs).
template <class W>
float tile_as_row(const typename W::block* w, const typename W::dot_type::block* a, std::int64_t n) {
  using A = typename W::dot_type;
  using K = gk::dot_kernel<W, gk::simd::native>;
  std::vector<typename W::block> wr(w, w + n / W::block_size);
  std::vector<typename A::block> ar(a, a + n / A::block_size);
  std::reverse(wr.begin(), wr.end());
  // reverse whole weight-block spans of activation blocks, so pairs stay aligned
  constexpr int per = W::block_size / A::block_size > 0 ? W::block_size / A::block_size : 1;
  for (std::size_t i = 0; i < wr.size(); ++i)
    for (int j = 0; j < per; ++j) ar[i * per + static_cast<std::size_t>(j)] = a[(wr.size() - 1 - i) * per + static_cast<std::size_t>(j)];
  const typename W::block* rows[4] = {w, wr.data(), wr.data(), w};
  const typename A::block* cols[2] = {ar.data(), a};
  float out[8];
  gk::dot_tile<W, gk::simd::native>::template run<4, 2>(rows, cols, n, out);
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 2; ++c) {
      const float want = K::row(rows[r], cols[c], n);
      if (std::memcmp(&want, &out[r * 2 + c], sizeof want) != 0) return NAN;
    }
  return out[3 * 2 + 1];
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
        if constexpr (Ws::block_size == 1)
          for (int len = 1; len <= 40; ++len) CHECK(mismatches<Ws>(&K::row, 2, len + (len == 40 ? 2007 : 0)) == 0);
        // the same dots four rows by two columns at a time (dot_tile, what the matmul calls)
        for (int len : {1, 17, 64}) CHECK(mismatches<Ws>(&tile_as_row<Ws>, 6, len * Ws::block_size) == 0);
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

TEST_CASE("planted: a tile whose columns are swapped is caught", "[simd][control]") {
  using W = gk::formats::q4_0;
  auto broken = [](const W::block* w, const W::dot_type::block* a, std::int64_t n) {
    std::vector<W::dot_type::block> other(a, a + n / 32);
    std::reverse(other.begin(), other.end());
    const W::block* rows[4] = {w, w, w, w};
    const W::dot_type::block* cols[2] = {other.data(), a};
    float out[8];
    gk::dot_tile<W, gk::simd::native>::run<4, 2>(rows, cols, n, out);
    return out[0];  // column 0 where column 1 was meant
  };
  CHECK(mismatches<W>(broken) > 0);
}

TEST_CASE("planted: a kernel that drops the last block is caught", "[simd][control]") {
  using W = gk::formats::q4_K;
  auto broken = [](const W::block* w, const W::dot_type::block* a, std::int64_t n) {
    return gk::dot_kernel<W, gk::simd::native>::row(w, a, n - W::block_size);
  };
  CHECK(mismatches<W>(broken) > 0);
}
