// SPDX-License-Identifier: MIT
// run_on_target TARGET PROGRAM [ARGS...]: runs PROGRAM when this CPU can run TARGET's
// instructions, else exits 77 (meson's "skipped"). Built for the baseline ISA, so it never
// executes an instruction the CPU lacks; the program it guards is compiled whole with the
// target's flags (the compiler may use them anywhere, static initialisers included), so
// the check cannot live inside it.
#include <gk/simd/target.hpp>

#include <cstdio>
#include <string_view>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: run_on_target scalar|avx2|avx512 PROGRAM [ARGS...]\n");
    return 2;
  }
  const std::string_view target = argv[1];
  bool ok = false;
  if (target == gk::simd::scalar::name) ok = gk::simd::scalar::available();
  else if (target == gk::simd::avx2::name) ok = gk::simd::avx2::available();
  else if (target == gk::simd::avx512::name) ok = gk::simd::avx512::available();
  else {
    std::fprintf(stderr, "run_on_target: unknown target %s\n", argv[1]);
    return 2;
  }
  if (!ok) {
    std::printf("this CPU cannot run %s; %s skipped\n", argv[1], argv[2]);
    return 77;
  }
  execv(argv[2], argv + 2);
  std::perror("run_on_target: execv");
  return 2;
}
