// SPDX-License-Identifier: MIT
// gk-contract-cpu: gates 1-4 of the kernel contract on the CPU kernels (gk::cpu), with the
// CPU's planted controls. Gate 2's five runs go at 2, 1, 3, 4 and 7 threads, so "same
// bytes" also means "at every thread count".
//
//   gk-contract-cpu [--only TEXT] [--repro] [--verbose] [--known known.txt]
#include <cstdio>
#include <map>
#include <memory>

#include "cpu_controls.hpp"
#include "gk/backends/cpu.hpp"
#include "harness.hpp"
#include "specs.hpp"

#ifndef GK_CONTRACT_KNOWN
#define GK_CONTRACT_KNOWN "tests/contract/known.txt"
#endif

int main(int argc, char** argv) {
  using namespace gk_contract;
  std::string known = GK_CONTRACT_KNOWN;
  const options opt = parse_args(argc, argv, known);
  static const int threads[] = {2, 1, 3, 4, 7};
  std::map<int, std::unique_ptr<gk::cpu_backend>> pool;
  backend_hooks be;
  be.name = "CPU";
  be.memory = []() -> gk::buffer_type& { return gk::host_buffer_type(); };
  be.compute = [&](const gk::graph& g, int run) {
    const int n = threads[run % 5];
    auto& b = pool[n];
    if (!b) b = std::make_unique<gk::cpu_backend>(n);
    b->graph_compute(g);
  };
  be.supports = [](const gk::tensor* t) { return gk::cpu::supports(t); };
  harness h("gk-contract-cpu", be, opt);
  read_known(h, "cpu", known);
  profile p;  // cpu/matmul.hpp: 16 x 8 output tiles; row loops step by vectors of up to 16 floats, unrolled 4x
  add_all_ops(h, p);
  add_controls(h, cpu_controls(), "CPU");
  try {
    return h.run_all();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gk-contract-cpu: %s\n", e.what());
    return 1;
  }
}
