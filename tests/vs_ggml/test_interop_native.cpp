// SPDX-License-Identifier: MIT
// Decoding stays bit-exact when a user includes gk with -march=native and GCC's default
// -ffp-contract=fast (FMA available): built with exactly those flags, this runs the
// interop check for every format. Without GK_EXACT_FP_BEGIN in the format headers the
// affine formats (q4_1, q5_1, q2_K, q4_K, q5_K) would fuse d*q - m and fail here.
#include <catch2/catch.hpp>

#include "harness.hpp"

namespace {
template <class... Ws>
void all_interop(std::tuple<Ws...>*) {
  (
      [] {
        const auto rep = gk_test::check_interop<Ws>(16);
        INFO(gk::name(Ws::id) << ": " << rep.first);
        CHECK(rep.ok());
      }(),
      ...);
}
}  // namespace

TEST_CASE("every format decodes bit-exactly under -march=native -ffp-contract=fast", "[vs_ggml][native]") {
  all_interop(static_cast<gk::formats::all*>(nullptr));
}
