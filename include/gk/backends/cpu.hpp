// SPDX-License-Identifier: MIT
// The CPU as a backend: gk::cpu::runner behind the backend interface. It addresses any
// host memory (every buffer type with is_host), so it is the scheduler's fallback and
// always comes last in its list.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "gk/backend.hpp"
#include "gk/cpu/compute.hpp"
#include "gk/cpu/tiled.hpp"

namespace gk {

class cpu_backend final : public backend {
 public:
  // n_threads <= 0: one per hardware thread.
  explicit cpu_backend(int n_threads = 0) { set_n_threads(n_threads); }

  void set_n_threads(int n) {
    if (n <= 0) n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    if (runner_ && runner_->n_threads() == n) return;
    runner_ = std::make_unique<cpu::runner>(n);
  }
  int n_threads() const noexcept { return runner_->n_threads(); }

  std::string_view name() const override { return "CPU"; }
  buffer_type& default_buffer_type() override { return host_buffer_type(); }
  void graph_compute(const graph& g) override { runner_->compute(g); }
  bool supports_op(const tensor* node) const override { return cpu::supports(node); }
  bool supports_buft(const buffer_type& buft) const override { return buft.is_host(); }
  bool reads_in_place(const tensor* node, int slot, const buffer_type& mem) const override {
    if (mem.is_host()) return true;
    return &mem == &cpu_tiled_buffer_type() && cpu::tiled::cpu_reads_in_place(node, slot);
  }

 private:
  std::unique_ptr<cpu::runner> runner_;
};

}  // namespace gk
