// SPDX-License-Identifier: MIT
// Catch2's main for the C ABI suites, which meson runs once per SIMD target with
// GK_TARGET set: a target this CPU cannot run (or whose module is not built) is a skip
// (exit 77), not a failure. Otherwise the forced target must be the one that runs.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gk/gk.h"

int main(int argc, char** argv) {
  const char* forced = std::getenv("GK_TARGET");
  if (forced && *forced && !gk_simd_target_supported(forced)) {
    std::printf("GK_TARGET=%s: this CPU cannot run it, skipped (%s)\n", forced, gk_init() ? gk_last_error() : "");
    return 77;
  }
  if (gk_init() != 0) {
    std::fprintf(stderr, "no target module loads: %s\n", gk_last_error());
    return 1;
  }
  std::printf("simd target: %s\n", gk_simd_target());
  if (forced && *forced && std::strcmp(forced, gk_simd_target()) != 0) {
    std::fprintf(stderr, "GK_TARGET=%s but %s runs\n", forced, gk_simd_target());
    return 1;
  }
  return Catch::Session().run(argc, argv);
}
