// SPDX-License-Identifier: MIT
// One transformer block at hidden size 4096 (llama-2-7B's shapes: 32 heads, FFN 11008),
// gk against the reference in the same run: prompt (64 new tokens) and decode (1 new
// token after 256 cached), weights q4_K or q8_0, f16 KV cache, flash attention, on 1 and
// 2 threads. The block is built by the same code on both sides
// (tests/common/transformer_block.hpp) from the same bytes.
//
// Timing: best of a time budget (GK_BENCH_BUDGET seconds per side per round, default
// 1.0), three rounds alternating gk and the reference; the figure is the best over all
// rounds. Weights repeat 64 encoded rows (encoding all of them with gk's searches would
// take minutes; speed does not depend on the values). The reference computes on its plain CPU path (ggml_graph_compute_with_ctx);
// its repacked weight layouts are compared in benchmarks/matmul.
// Prints tokens/s for both and gk/ref (> 1: gk faster).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "../tests/vs_ggml/ops/block_pair.hpp"
#include "best_of.hpp"
#include "cpu_name.hpp"

using namespace gk;
using gk_test::tpair;

int main() {
  const char* env = std::getenv("GK_BENCH_BUDGET");
  const double budget = env ? std::atof(env) : 1.0;
  std::printf("# benchmarks/block: %s, gk target %s, budget %.1f s x 3 rounds per side\n",
              gk_bench::cpu_name().c_str(), std::string(simd::native::name).c_str(), budget);
  std::printf("%-5s %-7s %3s %12s %12s %7s\n", "wt", "case", "thr", "gk tok/s", "ref tok/s", "gk/ref");
  for (type wt : {type::q4_K, type::q8_0}) {
    for (bool prompt : {true, false}) {
      gk_test::block_dims bd;
      bd.d = 4096;
      bd.heads = 32;
      bd.kv_heads = 32;
      bd.ffn = 11008;
      bd.tokens = prompt ? 64 : 1;
      bd.n_past = prompt ? 0 : 256;
      gk_test::block_pair bp(wt, bd, type::f16, 0.05f, std::size_t{1} << 30, 64);
      auto& p = bp.p;
      auto& g = bp.g;
      auto& r = bp.r;
      gk_test::gk_lib gl{p.g};
      gk_test::ggml_lib rl{p.r};
      tensor* yg = gk_test::build_block(gl, bd, g, true);
      ggml_tensor* yr = gk_test::build_block(rl, bd, r, true);
      graph gg;
      gg.build_forward_expand(yg);
      ggml_cgraph* gr = ggml_new_graph_custom(p.r, 4096, false);
      ggml_build_forward_expand(gr, yr);
      for (int nth : {1, 2}) {
        cpu::runner run(nth);
        double best_g = 1e30, best_r = 1e30;
        for (int round = 0; round < 3; ++round) {
          best_g = std::min(best_g, gk_bench::best_seconds([&] { run.compute(gg); }, budget));
          best_r = std::min(best_r, gk_bench::best_seconds([&] { ggml_graph_compute_with_ctx(p.r, gr, nth); }, budget));
        }
        const double tg = static_cast<double>(bd.tokens) / best_g, tr = static_cast<double>(bd.tokens) / best_r;
        std::printf("%-5s %-7s %3d %12.2f %12.2f %7.2f\n", std::string(name(wt)).c_str(),
                    prompt ? "prompt" : "decode", nth, tg, tr, tg / tr);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
