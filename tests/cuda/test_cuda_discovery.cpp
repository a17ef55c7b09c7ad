// SPDX-License-Identifier: MIT
// A CUDA build runs on any machine: with no GPU (or no driver) discovery finds nothing,
// which is not an error; the CPU device stays first. With a GPU, each registered device
// names its compute capability and the architectures built for, and its backend runs.
#include <catch2/catch.hpp>

#include <string>

#include "gk/backends/cuda.hpp"
#include "gk/gk.hpp"
#include "gk/registry.hpp"

TEST_CASE("a CUDA build lists the CPU first and every usable GPU after it, never failing") {
  const auto& devs = gk::devices();
  REQUIRE(!devs.empty());
  CHECK(devs[0].type == gk::device_type::cpu);
  int gpus = 0;
  for (const auto& d : devs)
    if (d.type == gk::device_type::gpu) {
      ++gpus;
      CHECK(d.device_features.find("cc ") == 0);
      CHECK(d.device_features.find(gk::cuda::architectures_built()) != std::string::npos);
      CHECK(d.make_backend() != nullptr);
    }
  CHECK(gpus == gk::cuda::device_count());
  INFO("architectures built: " << gk::cuda::architectures_built());
  CHECK(gk::cuda::architectures_built().find("sm_") != std::string::npos);
}

TEST_CASE("asking for a device that is not there is a clear error, not a crash") {
  const int n = gk::cuda::device_count();
  try {
    (void)gk::cuda::make_backend(n);
    FAIL("make_backend(" << n << ") should throw");
  } catch (const gk::error& e) {
    CHECK(std::string(e.what()).find("not usable") != std::string::npos);
  }
}
