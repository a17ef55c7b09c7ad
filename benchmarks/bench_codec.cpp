// SPDX-License-Identifier: MIT
// Decode and encode rates, gk (scalar definition) beside the reference, same rows, same
// run, one thread. Each side's figure is its best time over a 0.3 s budget on a 4096-wide
// block of 64 rows; the ratio is gk's rate over the reference's. Reports, never fails.
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

namespace {

using gk_bench::best_seconds;

template <class W>
void bench() {
  constexpr int rows = 64, n = 4096;
  const auto t = static_cast<ggml_type>(W::id);
  std::mt19937 rng(1);
  std::normal_distribution<float> g;
  std::vector<float> x(rows * n), y(rows * n);
  for (auto& v : x) v = g(rng);
  std::vector<typename W::block> q(rows * n / W::block_size);
  const bool ref_encodes = t != GGML_TYPE_Q8_1 && t != GGML_TYPE_Q8_K;
  for (int r = 0; r < rows; ++r) gk::encode_row<W>(x.data() + r * n, q.data() + r * (n / W::block_size), n);

  const double dec_gk = best_seconds([&] { gk::decode_row<W>(q.data(), y.data(), rows * n); });
  double dec_ref = 0;
  if (t != GGML_TYPE_F32 && ggml_get_type_traits(t)->to_float)  // none for q8_1, q8_K
    dec_ref = best_seconds([&] { ggml_get_type_traits(t)->to_float(q.data(), y.data(), rows * n); });
  const double enc_gk = best_seconds([&] {
    for (int r = 0; r < rows; ++r) gk::encode_row<W>(x.data() + r * n, q.data() + r * (n / W::block_size), n);
  });
  double enc_ref = 0;
  // the reference cannot encode iq2_xxs, iq2_xs, iq1_s without importance: it gets uniform
  // importance there, which is what gk uses when given none
  const std::vector<float> ones(n, 1.0f);
  const float* ref_imp = ggml_quantize_requires_imatrix(t) ? ones.data() : nullptr;
  if (ref_encodes) enc_ref = best_seconds([&] { ggml_quantize_chunk(t, x.data(), q.data(), 0, rows, n, ref_imp); });
  const double mw = rows * n / 1e6;
  std::printf("%-8s decode %9.1f Mw/s ref %9.1f ratio %5.2f | encode %8.3f ms/4096-row ref %8.3f ratio %5.2f\n",
              std::string(gk::name(W::id)).c_str(), mw / dec_gk, dec_ref ? mw / dec_ref : 0.0,
              dec_ref ? dec_ref / dec_gk : 0.0, enc_gk / rows * 1e3, enc_ref / rows * 1e3,
              enc_ref ? enc_ref / enc_gk : 0.0);
}

template <class... Ws>
void bench_all(std::tuple<Ws...>*) {
  (bench<Ws>(), ...);
}

}  // namespace

int main() {
  ggml_cpu_init();
  std::printf("bench_codec: 64 rows x 4096, one thread, best of 0.3 s per side; ratio = gk rate / reference rate (encode: no importance)\n");
  std::printf("(gk runs its scalar definitions here; the SIMD paths come with the SIMD layer)\n");
  bench_all(static_cast<gk::formats::all*>(nullptr));
}
