// SPDX-License-Identifier: MIT
// The per-case driver the norm/softmax and rope suites share (Catch2 assertions inside, so
// it stays out of harness.hpp, which the benchmarks include too).
#pragma once

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "harness.hpp"

namespace gk_test {

// Builds a case into a fresh pair per thread count (same seed, so same inputs), computes
// it at each count, checks the gk outputs are bit-identical across counts and returns the
// comparison at the first count, after printing it with the bar and checking the bar.
// Bar: holds(diff) and str(). Use from a Catch2 test (it CHECKs and REQUIREs).
template <class Bar>
diff run_case_at_thread_counts(const std::string& name, const std::function<tpair(op_pair&)>& make, const Bar& b,
                               std::uint64_t seed, std::span<const int> thread_counts, int name_width) {
  diff first;
  std::vector<float> v1;
  bool have_first = false;
  for (int nt : thread_counts) {
    op_pair p(64u << 20, seed);
    const tpair y = make(p);
    REQUIRE(same_shape(y));
    const auto d = p.run(y, nt);
    const auto v = read_all(y.g);
    if (!have_first) {
      first = d;
      v1 = v;
      have_first = true;
    } else {
      INFO(name << ": " << nt << " threads differ from " << *thread_counts.begin() << " thread(s)");
      CHECK(std::memcmp(v.data(), v1.data(), v.size() * sizeof(float)) == 0);
    }
  }
  std::printf("%-*s %s  [bar %s]\n", name_width, name.c_str(), first.str().c_str(), b.str().c_str());
  INFO(name << ": " << first.str() << " bar " << b.str());
  CHECK(b.holds(first));
  return first;
}

}  // namespace gk_test
