// SPDX-License-Identifier: MIT
// gk-demo: the main job of gk so far, shown on every format it carries. For each: bits
// per weight, the relative RMS error of encoding a fixed gaussian row, and how fast rows
// decode (best of a 0.2 s budget, one thread, the scalar definition).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gk/formats/all.hpp"
#include "gk/registry.hpp"

namespace {

template <class W>
void show() {
  constexpr int n = 4096;
  using B = typename W::block;
  std::mt19937 rng(2024);
  std::normal_distribution<float> g;
  std::vector<float> x(n), y(n);
  for (auto& v : x) v = g(rng);
  std::vector<B> q(n / W::block_size);
  gk::encode_row<W>(x.data(), q.data(), n);
  gk::decode_row<W>(q.data(), y.data(), n);
  double err = 0, sig = 0;
  for (int i = 0; i < n; ++i) {
    err += double(x[i] - y[i]) * (x[i] - y[i]);
    sig += double(x[i]) * x[i];
  }
  using clock = std::chrono::steady_clock;
  double best = 1e30, sink = 0;
  const auto start = clock::now();
  while (std::chrono::duration<double>(clock::now() - start).count() < 0.2) {
    const auto t0 = clock::now();
    for (int r = 0; r < 16; ++r) gk::decode_row<W>(q.data(), y.data(), n);
    best = std::min(best, std::chrono::duration<double>(clock::now() - t0).count() / 16);
    sink += y[n / 2];
  }
  std::printf("%-8s %7.4f %12.3e %12.1f\n", std::string(gk::name(W::id)).c_str(),
              8.0 * sizeof(B) / W::block_size, std::sqrt(err / sig), n / best / 1e6 + sink * 0);
}

template <class... Ws>
void show_all(std::tuple<Ws...>*) {
  (show<Ws>(), ...);
}

}  // namespace

int main() {
  gk::devices();  // the device banner: one line per device on stderr (GK_QUIET=1 hides it)
  std::printf("gk-demo: every format gk carries, on one gaussian row of 4096 weights\n");
  std::printf("%-8s %7s %12s %12s\n", "format", "bits/w", "rel. RMSE", "decode Mw/s");
  show_all(static_cast<gk::formats::all*>(nullptr));
  return 0;
}
