// SPDX-License-Identifier: MIT
// CPU kernels: softmax family (placeholder until its kernels land; supports() says no).
#pragma once

#include "gk/cpu/rows.hpp"
#include "gk/tensor.hpp"

namespace gk::cpu::softmax {

inline bool supports(const tensor*) noexcept { return false; }
inline void compute(const exec&, tensor* node) {
  throw error("gk: cpu: op " + std::string(name(node->op)) + " has no kernel yet");
}

}  // namespace gk::cpu::softmax
