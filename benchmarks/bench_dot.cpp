// SPDX-License-Identifier: MIT
// Row dots, gk beside the reference, same blocks, same run, one thread: for every format,
// 4096-wide rows (a 4096x4096 weight streamed once per pass, activations encoded once),
// best time of a 0.3 s budget per side; GB/s of weight bytes and the ratio gk / reference.
// Built with -march=native: gk runs dot_kernel<W, simd::native> (which names the target
// that serves it, falling back where no kernel exists yet); the reference runs its
// native build. Reports, never fails.
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "best_of.hpp"
#include "ggml-cpu.h"
#include "ggml.h"
#include "gk/formats/all.hpp"
#include "gk/simd/dot.hpp"

namespace {

using gk_bench::best_seconds;

volatile float sink;

template <class W>
void bench() {
  using A = typename W::dot_type;
  constexpr int rows = 1024, n = 4096;
  const auto t = static_cast<ggml_type>(W::id);
  const auto* cpu = ggml_get_type_traits_cpu(t);
  if (!cpu->vec_dot || W::id == gk::type::q8_K) return;
  std::mt19937 rng(1);
  std::normal_distribution<float> g;
  std::vector<float> x(n);
  std::vector<typename W::block> w(static_cast<std::size_t>(rows) * n / W::block_size);
  for (int r = 0; r < rows; ++r) {
    for (auto& v : x) v = g(rng);
    gk::encode_row<W>(x.data(), w.data() + static_cast<std::size_t>(r) * (n / W::block_size), n);
  }
  for (auto& v : x) v = g(rng);
  std::vector<typename A::block> a(n / A::block_size);
  gk::encode_row<A>(x.data(), a.data(), n);
  using K = gk::dot_kernel<W, gk::simd::native>;
  const double t_gk = best_seconds([&] {
    float s = 0;
    for (int r = 0; r < rows; ++r) s += K::row(w.data() + static_cast<std::size_t>(r) * (n / W::block_size), a.data(), n);
    sink = s;
  });
  const double t_ref = best_seconds([&] {
    float s = 0, out;
    for (int r = 0; r < rows; ++r) {
      cpu->vec_dot(n, &out, 0, w.data() + static_cast<std::size_t>(r) * (n / W::block_size), 0, a.data(), 0, 1);
      s += out;
    }
    sink = s;
  });
  const double gb = static_cast<double>(w.size() * sizeof(typename W::block)) / 1e9;
  std::printf("%-8s %-7s gk %7.2f GB/s  ref %7.2f GB/s  ratio %5.2f\n", std::string(gk::name(W::id)).c_str(),
              std::string(K::served_by).c_str(), gb / t_gk, gb / t_ref, t_ref / t_gk);
}

template <class... Ws>
void bench_all(std::tuple<Ws...>*) {
  (bench<Ws>(), ...);
}

}  // namespace

int main() {
  ggml_cpu_init();
  std::printf("bench_dot: 1024 rows x 4096, one thread, best of 0.3 s per side, target %s\n",
              std::string(gk::simd::native::name).c_str());
  bench_all(static_cast<gk::formats::all*>(nullptr));
}
