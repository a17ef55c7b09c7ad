// SPDX-License-Identifier: MIT
// Every entry of every committed codebook (include/gk/formats/codebooks.inc) against the
// reference's tables, and a planted control: one flipped entry must be caught.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#define GGML_COMMON_DECL_CPP
#define GGML_COMMON_IMPL_CPP
#include "ggml-common.h"
#include "gk/formats/codebooks.inc"

namespace {

template <class A, class B, std::size_t N, std::size_t M>
std::int64_t mismatches(const A (&ours)[N], const B (&theirs)[M]) {
  if (N != M) return -1;
  std::int64_t bad = 0;
  for (std::size_t i = 0; i < N; ++i) bad += static_cast<std::int64_t>(ours[i]) != static_cast<std::int64_t>(theirs[i]);
  return bad;
}

}  // namespace

TEST_CASE("codebooks: every entry equals the reference's", "[codebooks]") {
  namespace cb = gk::codebooks;
  CHECK(mismatches(cb::iq2xxs_grid, iq2xxs_grid) == 0);
  CHECK(mismatches(cb::iq2xs_grid, iq2xs_grid) == 0);
  CHECK(mismatches(cb::iq2s_grid, iq2s_grid) == 0);
  CHECK(mismatches(cb::iq3xxs_grid, iq3xxs_grid) == 0);
  CHECK(mismatches(cb::iq3s_grid, iq3s_grid) == 0);
  CHECK(mismatches(cb::iq1s_grid, iq1s_grid) == 0);
  CHECK(mismatches(cb::ksigns_iq2xs, ksigns_iq2xs) == 0);
  CHECK(mismatches(cb::kvalues_iq4nl, kvalues_iq4nl) == 0);
  CHECK(cb::iq1s_delta == IQ1S_DELTA);
  CHECK(cb::iq1m_delta == IQ1M_DELTA);
}

TEST_CASE("planted: a codebook with one flipped entry is caught", "[codebooks][control]") {
  std::uint64_t copy[1024];
  for (int i = 0; i < 1024; ++i) copy[i] = gk::codebooks::iq2s_grid[i];
  CHECK(mismatches(copy, iq2s_grid) == 0);
  copy[777] ^= 1ull << 40;  // one coordinate of one grid point
  CHECK(mismatches(copy, iq2s_grid) == 1);
}
