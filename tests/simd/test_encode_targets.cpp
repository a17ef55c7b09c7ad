// SPDX-License-Identifier: MIT
// encode_kernel<A, simd::native> against the scalar encoders, byte for byte, for the
// activation formats q8_0, q8_1 and q8_K: the build compiles this file once per target
// (scalar, avx2, avx512 flags, and aarch64 under qemu), and each binary checks its own
// target when the CPU can run it. Rows: random (several scales, 1, 2, 3 and 7 blocks),
// random float bits (every class of value), zeros and all-zero blocks, huge values, exact
// rounding ties, equal +/- largest magnitudes, subnormals and tiny normals (1 / d
// overflows), NaN (quiet, signalling, payloads) and Inf. Each output buffer is prefilled
// with a different byte, so a byte the kernel leaves unwritten is a mismatch.
//
// [control] (hidden; run with "[control]"): planted encoders, ties away from zero for
// q8_0 and the last rather than the first largest magnitude for q8_K, checked with the
// same assertion as the real kernels: it must fail. The visible "planted" case checks
// that they are caught. [bench] (hidden): scalar and native encode rates in MB of floats/s.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gk/formats/all.hpp"
#include "gk/simd/encode.hpp"

namespace {

using gk::formats::q8_0;
using gk::formats::q8_1;
using gk::formats::q8_K;

template <class A>
using encoder = std::function<void(const float*, typename A::block*, std::int64_t)>;

float bits(std::uint32_t u) { return std::bit_cast<float>(u); }

// The test rows for block size B: each a whole number of blocks.
std::vector<std::vector<float>> rows_for(int B) {
  std::vector<std::vector<float>> rows;
  std::mt19937_64 rng(7);
  std::normal_distribution<float> g;
  const float inf = std::numeric_limits<float>::infinity(), qnan = std::numeric_limits<float>::quiet_NaN();
  // random rows, several lengths and scales
  for (int nb : {1, 2, 3, 7})
    for (float scale : {1.0f, 100.0f, 1e-3f, 1e20f, 1e-30f})
      for (int rep = 0; rep < 4; ++rep) {
        std::vector<float> r(nb * B);
        for (auto& v : r) v = g(rng) * scale;
        rows.push_back(r);
      }
  // random float bits: NaN, Inf, subnormals, huge and tiny, all mixed
  for (int rep = 0; rep < 64; ++rep) {
    std::vector<float> r(3 * B);
    for (auto& v : r) v = bits(static_cast<std::uint32_t>(rng()));
    rows.push_back(r);
  }
  // random bits but finite and sparse specials
  for (int rep = 0; rep < 64; ++rep) {
    std::vector<float> r(2 * B);
    for (auto& v : r) {
      v = g(rng);
      const auto u = rng() % 64;
      if (u == 0) v = qnan;
      if (u == 1) v = inf;
      if (u == 2) v = -inf;
      if (u == 3) v = bits(0x7f800001u);  // signalling NaN
      if (u == 4) v = bits(0xffc01234u);  // negative NaN with a payload
      if (u == 5) v = bits(static_cast<std::uint32_t>(rng() % 0x800000u));  // subnormal
      if (u == 6) v = 0.0f;
      if (u == 7) v = -0.0f;
    }
    rows.push_back(r);
  }
  // zeros: an all-zero row, -0, a zero block between random ones, isolated zeros
  rows.push_back(std::vector<float>(2 * B, 0.0f));
  rows.push_back(std::vector<float>(B, -0.0f));
  {
    std::vector<float> r(3 * B);
    for (auto& v : r) v = g(rng);
    std::fill(r.begin() + B, r.begin() + 2 * B, 0.0f);
    for (int i = 0; i < 3 * B; i += 5) r[i] = 0.0f;
    rows.push_back(r);
  }
  // huge values
  for (float h : {1e30f, -3e38f, 3.4028235e38f, -3.4028235e38f}) {
    std::vector<float> r(2 * B);
    for (auto& v : r) v = g(rng);
    r[3] = h;
    r[B + B / 2] = -h;
    rows.push_back(r);
    std::vector<float> all(B, h);
    for (int i = 0; i < B; i += 3) all[i] = -h;
    rows.push_back(all);
  }
  // exact ties: max 127 makes d = 1 (q8_0/q8_1) and iscale = -+1 (q8_K), so k + 0.5 ties
  for (float top : {127.0f, -127.0f, 254.0f}) {
    std::vector<float> r(B);
    for (int i = 0; i < B; ++i) r[i] = (top / 127.0f) * (static_cast<float>((i * 37) % 254) - 126.5f);
    r[0] = top;
    rows.push_back(r);
    std::vector<float> s(B);
    for (int i = 0; i < B; ++i) s[i] = (top / 127.0f) * ((i % 2 ? 0.5f : -0.5f) + static_cast<float>(i % 4) * (i % 8 < 4 ? 1.0f : -1.0f));
    s[B - 1] = top;
    rows.push_back(s);
  }
  // equal +/- largest magnitudes, in both orders, with others smaller
  for (float first : {5.0f, -5.0f}) {
    std::vector<float> r(2 * B);
    for (auto& v : r) v = g(rng);
    r[3] = first;
    r[10] = -first;
    r[B + 7] = -first;
    r[B + B - 1] = first;
    r[B + 8] = first;
    rows.push_back(r);
  }
  // subnormals alone, with zeros, and tiny normals where 1 / d overflows
  for (float t : {1e-40f, -3e-42f, bits(1u), 1e-38f, 2e-37f, 1e-36f, 5e-39f}) {
    std::vector<float> r(2 * B);
    for (int i = 0; i < 2 * B; ++i) r[i] = t * g(rng);
    r[5] = 0.0f;
    r[B + 1] = t;
    rows.push_back(r);
    std::vector<float> s(B, 0.0f);
    s[B / 2] = t;
    s[B / 3] = -t * 0.5f;
    rows.push_back(s);
  }
  // normals mixed with subnormals
  {
    std::vector<float> r(B);
    for (int i = 0; i < B; ++i) r[i] = i % 2 ? bits(static_cast<std::uint32_t>(rng() % 0x800000u)) : g(rng);
    rows.push_back(r);
  }
  // NaN and Inf at chosen places
  for (float special : {std::numeric_limits<float>::quiet_NaN(), bits(0x7f800001u), bits(0xffc01234u),
                        std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()})
    for (int pos : {0, 1, B / 2, B - 1}) {
      std::vector<float> r(2 * B);
      for (auto& v : r) v = g(rng);
      r[pos] = special;
      r[B + pos] = special;
      r[B + (pos + 1) % B] = 1e30f;  // a large value next to it
      rows.push_back(r);
    }
  rows.push_back(std::vector<float>(B, std::numeric_limits<float>::quiet_NaN()));
  rows.push_back(std::vector<float>(B, std::numeric_limits<float>::infinity()));
  {
    std::vector<float> r(B, 0.0f);
    r[2] = std::numeric_limits<float>::quiet_NaN();
    r[9] = -std::numeric_limits<float>::infinity();
    r[11] = std::numeric_limits<float>::infinity();
    rows.push_back(r);
    std::vector<float> s(B, 0.0f);
    s[4] = std::numeric_limits<float>::quiet_NaN();
    s[6] = 1e-40f;
    rows.push_back(s);
  }
  return rows;
}

// Rows on which `kernel` writes bytes other than the scalar encoder's.
template <class A>
int mismatches(const encoder<A>& kernel, std::string* first = nullptr) {
  int bad = 0;
  const auto rows = rows_for(A::block_size);
  for (std::size_t ri = 0; ri < rows.size(); ++ri) {
    const auto& x = rows[ri];
    const std::int64_t n = static_cast<std::int64_t>(x.size());
    const std::size_t nb = x.size() / A::block_size, bytes = nb * sizeof(typename A::block);
    std::vector<typename A::block> want(nb), got(nb);
    std::memset(want.data(), 0xa5, bytes);
    std::memset(got.data(), 0x5a, bytes);
    gk::encode_row<A>(x.data(), want.data(), n);
    kernel(x.data(), got.data(), n);
    if (std::memcmp(want.data(), got.data(), bytes) != 0) {
      if (bad++ == 0 && first) {
        const auto* w = reinterpret_cast<const unsigned char*>(want.data());
        const auto* o = reinterpret_cast<const unsigned char*>(got.data());
        std::size_t i = 0;
        while (w[i] == o[i]) ++i;
        *first = "row " + std::to_string(ri) + " byte " + std::to_string(i) + ": scalar " + std::to_string(w[i]) +
                 ", kernel " + std::to_string(o[i]);
      }
    }
  }
  return bad;
}

template <class A>
void check_native() {
  std::string first;
  const int bad = mismatches<A>(&gk::encode_kernel<A, gk::simd::native>::row, &first);
  const std::string_view by = gk::encode_kernel<A, gk::simd::native>::served_by;
  INFO(gk::name(A::id) << " served by " << by << ": " << first);
  CHECK(bad == 0);
}

// planted: q8_0 with ties rounded away from zero (std::round, not nearbyint)
void q8_0_ties_away(const float* x, q8_0::block* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n / 32; ++i) {
    const float* xb = x + 32 * i;
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; ++j) out[i].qs[j] = static_cast<std::int8_t>(std::round(xb[j] * id));
    out[i].d = gk::to_f16(d);
  }
}

// planted: q8_K keeping the last of equal largest magnitudes (>= instead of >)
void q8_K_last_max(const float* x, q8_K::block* out, std::int64_t n) {
  constexpr int qk = gk::qk_k;
  for (std::int64_t i = 0; i < n / qk; ++i) {
    const float* xb = x + qk * i;
    float amax = 0.0f, xm = 0.0f;
    for (int j = 0; j < qk; ++j)
      if (std::fabs(xb[j]) >= amax && std::fabs(xb[j]) > 0.0f) { amax = std::fabs(xb[j]); xm = xb[j]; }
    // encode with the scalar rule, then redo it if the chosen value differs
    q8_K::encode(xb, out[i], nullptr);
    if (amax > 0.0f) {
      const float iscale = -127.0f / xm;
      for (int j = 0; j < qk; ++j)
        out[i].qs[j] = static_cast<std::int8_t>(gk::formats::kq::nearest_clamped(iscale * xb[j], -127, 127));
      for (int k = 0; k < qk / 16; ++k) {
        int sum = 0;
        for (int j = 0; j < 16; ++j) sum += out[i].qs[16 * k + j];
        out[i].bsums[k] = static_cast<std::int16_t>(sum);
      }
      out[i].d = 1.0f / iscale;
    }
  }
}

}  // namespace

TEST_CASE("activation encoders on this build's target equal the scalar encoders byte for byte", "[simd]") {
  if (!gk::simd::native::available()) {
    WARN("this CPU cannot run " << gk::simd::native::name << "; nothing to check");
    return;
  }
  std::printf("target %s: q8_0 by %s, q8_1 by %s, q8_K by %s\n", std::string(gk::simd::native::name).c_str(),
              std::string(gk::encode_kernel<q8_0, gk::simd::native>::served_by).c_str(),
              std::string(gk::encode_kernel<q8_1, gk::simd::native>::served_by).c_str(),
              std::string(gk::encode_kernel<q8_K, gk::simd::native>::served_by).c_str());
  check_native<q8_0>();
  check_native<q8_1>();
  check_native<q8_K>();
}

TEST_CASE("planted: ties away from zero and the last largest magnitude are caught", "[simd]") {
  CHECK(mismatches<q8_0>(&q8_0_ties_away) > 0);
  CHECK(mismatches<q8_K>(&q8_K_last_max) > 0);
}

// Must fail: the same assertion as the real kernels' with the planted encoders.
TEST_CASE("control: planted encoders checked like the kernels (must go red)", "[.][control]") {
  std::string first;
  const int bad0 = mismatches<q8_0>(&q8_0_ties_away, &first);
  INFO("q8_0 ties away: " << first);
  CHECK(bad0 == 0);
  const int badK = mismatches<q8_K>(&q8_K_last_max, &first);
  INFO("q8_K last max: " << first);
  CHECK(badK == 0);
}

TEST_CASE("bench: scalar and native encode rates", "[.][bench]") {
  auto rate = [](auto&& f, std::int64_t n) {
    double best = 1e30;
    for (int rep = 0; rep < 20; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      f();
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return static_cast<double>(n) * sizeof(float) / best / 1e6;
  };
  constexpr std::int64_t n = 1 << 20;
  std::vector<float> x(n);
  std::mt19937 rng(1);
  std::normal_distribution<float> g;
  for (auto& v : x) v = g(rng);
  auto one = [&](auto tag) {
    using A = decltype(tag);
    std::vector<typename A::block> out(n / A::block_size);
    const double s = rate([&] { gk::encode_row<A>(x.data(), out.data(), n); }, n);
    const double v = rate([&] { gk::encode_kernel<A, gk::simd::native>::row(x.data(), out.data(), n); }, n);
    std::printf("%-5s scalar %8.0f MB/s  %-6s %8.0f MB/s  x%.1f\n", std::string(gk::name(A::id)).c_str(), s,
                std::string(gk::simd::native::name).c_str(), v, v / s);
  };
  one(q8_0{});
  one(q8_1{});
  one(q8_K{});
}
