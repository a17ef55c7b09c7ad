// SPDX-License-Identifier: MIT
// gk-contract-cuda: gates 1-4 of the kernel contract on the CUDA backend, driven through
// graphs exactly as an engine drives it (inputs in device memory of gk::cuda's buffer type,
// gk::cuda::make_backend(0)->graph_compute), with the CUDA controls (cuda_controls.cu). A
// node the backend's supports_op refuses is reported NOT SERVED, never run on the CPU.
// Gate 5 for these kernels is limits.py (contract-limits), which needs no GPU.
//
//   gk-contract-cuda [--only TEXT] [--repro] [--verbose] [--known known.txt]
#include <cstdio>
#include <memory>

#include "cuda_controls.hpp"
#include "gk/backends/cuda.hpp"
#include "harness.hpp"
#include "specs.hpp"

#ifndef GK_CONTRACT_KNOWN
#define GK_CONTRACT_KNOWN "tests/contract/known.txt"
#endif

int main(int argc, char** argv) {
  using namespace gk_contract;
  std::string known = GK_CONTRACT_KNOWN;
  const options opt = parse_args(argc, argv, known);
  if (gk::cuda::device_count() == 0) {
    std::printf("gk-contract-cuda: no usable CUDA device: gates 1-4 need a GPU (gate 5 is contract-limits)\n");
    return 77;  // meson: skipped
  }
  std::unique_ptr<gk::backend> cuda;
  try {
    cuda = gk::cuda::make_backend(0);
  } catch (const std::exception& e) {
    std::printf("gk-contract-cuda: %s\n", e.what());
    return 1;
  }
  backend_hooks be;
  be.name = "CUDA";
  be.memory = []() -> gk::buffer_type& { return gk::cuda::device_buffer_type(0); };
  be.compute = [&](const gk::graph& g, int) { cuda->graph_compute(g); };
  be.supports = [&](const gk::tensor* t) { return cuda->supports_op(t); };
  be.sync = [&] { cuda->synchronize(); };
  harness h("gk-contract-cuda", be, opt);
  read_known(h, "cuda", known);
  profile p;
  // src/cuda: rows ops stride a row with a block of 256 threads (norm, softmax, argmax);
  // matmul takes the mat-vec path (32 rows per block, K in slabs of 2112) below 8
  // columns and 64 x 64 x 64 mma tiles from 8 on
  p.row_tile = 256;
  p.row_largest = 8192;
  p.mm_tiles_m = {32, 64};
  p.mm_tiles_n = {8, 64};
  p.mm_tiles_k = {64, 2112};
  // attn.cu: 8 query rows per block, keys in tiles of 32 (split over grid.y when long)
  p.attn_tile_kv = 32;
  p.attn_tile_q = 8;
  add_all_ops(h, p);

  namespace cc = cuda_controls;
  control_kernels k;
  k.row_max_fmax = [](const std::vector<void*>& in, void* out, const dims& d) {
    cc::row_max_fmax(static_cast<const float*>(in[0]), static_cast<float*>(out), static_cast<int>(d[0]), static_cast<int>(d[1]));
  };
  k.row_sum_atomic = [](const std::vector<void*>& in, void* out, const dims& d) {
    cc::row_sum_atomic(static_cast<const float*>(in[0]), static_cast<float*>(out), static_cast<int>(d[0]), static_cast<int>(d[1]));
  };
  k.row_sum_inplace = [](const std::vector<void*>& in, void* out, const dims& d) {
    cc::row_sum_inplace(static_cast<float*>(in[0]), static_cast<float*>(out), static_cast<int>(d[0]), static_cast<int>(d[1]));
  };
  k.row_sum_tail_drop = [](const std::vector<void*>& in, void* out, const dims& d) {
    cc::row_sum_tail_drop(static_cast<const float*>(in[0]), static_cast<float*>(out), static_cast<int>(d[0]),
                          static_cast<int>(d[1]));
  };
  k.dot_half = [](const std::vector<void*>& in, void* out, const dims& d) {
    cc::dot_half(static_cast<const float*>(in[0]), static_cast<const float*>(in[1]), static_cast<float*>(out),
                 static_cast<int>(d[0]), static_cast<int>(d[1]));
  };
  add_controls(h, k, "CUDA");
  try {
    return h.run_all();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gk-contract-cuda: %s\n", e.what());
    return 1;
  }
}
