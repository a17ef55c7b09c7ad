// SPDX-License-Identifier: MIT
// Backend doubles for the scheduler tests, no GPU needed:
//  - test_backend: the CPU kernels behind another name, with one nominated op refused and
//    a memory it addresses (host memory, or only one "device" buffer type). Before each
//    graph it checks every tensor the graph touches is in memory it addresses, so a
//    missing staging copy is an error, not a silent host read.
//  - device_buffer_type: memory that reports itself as device memory (is_host false) but
//    is backed by host RAM; it counts the host<->device copies made into and out of it,
//    and can drop the n-th host->device copy (the planted control for staging);
//  - differing_kept_nodes: the bit comparison under planned lifetimes, over the nodes
//    whose storage was never reused; print_memory_uses: each memory's peak and no-reuse size.
#pragma once

#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../common/transformer_block.hpp"
#include "gk/backend.hpp"
#include "gk/backends/cpu.hpp"
#include "gk/gk.hpp"
#include "gk/sched.hpp"

namespace gk_test {

struct device_buffer_type;

struct device_buffer : gk::host_buffer {
  device_buffer(device_buffer_type& t, std::size_t n);
  void set_tensor(gk::tensor* t, const void* src, std::size_t offset, std::size_t n) override;
  void get_tensor(const gk::tensor* t, void* dst, std::size_t offset, std::size_t n) const override;
  device_buffer_type& dev;
};

struct device_buffer_type final : gk::buffer_type {
  std::string_view name() const override { return "DEV"; }
  std::size_t alignment() const override { return 256; }  // a GPU's texture alignment, not the host's 64
  bool is_host() const override { return false; }
  std::unique_ptr<gk::backend_buffer> alloc_buffer(std::size_t size) override {
    return std::make_unique<device_buffer>(*this, size);
  }
  mutable int sets = 0, gets = 0;
  int drop_set = -1;  // the index of a set_tensor to skip (control), -1 none
};

// Fresh device memory is NaN bytes: a staging copy that never arrived must show, not
// find the bytes a previous buffer left at the same address.
inline device_buffer::device_buffer(device_buffer_type& t, std::size_t n) : gk::host_buffer(t, n, t.alignment()), dev(t) {
  clear(0xff);
}
inline void device_buffer::set_tensor(gk::tensor* t, const void* src, std::size_t offset, std::size_t n) {
  if (dev.sets++ == dev.drop_set) return;
  gk::host_buffer::set_tensor(t, src, offset, n);
}
inline void device_buffer::get_tensor(const gk::tensor* t, void* dst, std::size_t offset, std::size_t n) const {
  ++dev.gets;
  gk::host_buffer::get_tensor(t, dst, offset, n);
}

class test_backend final : public gk::backend {
 public:
  // mem: the memory it addresses (host: every is_host type; anything else: only that one)
  test_backend(std::string name, gk::buffer_type& mem, gk::op refused = gk::op::count, int n_threads = 2)
      : name_(std::move(name)), mem_(mem), refused_(refused), runner_(n_threads) {}

  std::string_view name() const override { return name_; }
  gk::buffer_type& default_buffer_type() override { return mem_; }
  bool supports_op(const gk::tensor* node) const override { return node->op != refused_ && gk::cpu::supports(node); }
  bool supports_buft(const gk::buffer_type& b) const override { return mem_.is_host() ? b.is_host() : &b == &mem_; }
  void graph_compute(const gk::graph& g) override {
    auto check = [&](const gk::tensor* t) {
      const gk::buffer_type* m = gk::memory_of(t);
      if (!m || !supports_buft(*m))
        throw gk::error("test_backend " + name_ + ": " + gk::describe(t) + " is in " +
                        std::string(m ? m->name() : "no") + " memory, which this backend cannot address");
    };
    for (const gk::tensor* n : g.nodes()) {
      if (!supports_op(n)) throw gk::error("test_backend " + name_ + " was given an op it refuses: " + gk::describe(n));
      check(n);
      for (const gk::tensor* s : n->src)
        if (s) check(s);
    }
    runner_.compute(g);
    ++graphs;
  }
  int graphs = 0;

 private:
  std::string name_;
  gk::buffer_type& mem_;
  gk::op refused_;
  gk::cpu::runner runner_;
};


// Under planned lifetimes only some nodes keep their own bytes to the end: a node whose
// storage (its view base's, for a view) was released or handed on in place (plan.reused)
// may hold a later tensor's bytes. Counts the kept nodes whose bytes differ from `want`;
// `compared` gets how many were compared. An empty plan (a place_fn) keeps every node.
inline std::int64_t differing_kept_nodes(const std::vector<std::vector<unsigned char>>& want,
                                         const std::vector<std::vector<unsigned char>>& got, const gk::graph& g,
                                         const gk::alloc_plan& plan, int* compared = nullptr) {
  if (want.size() != got.size() || want.size() != static_cast<std::size_t>(g.n_nodes())) return -1;
  std::int64_t bad = 0;
  int n = 0;
  for (int i = 0; i < g.n_nodes(); ++i) {
    const gk::tensor* t = g.node(i);
    if (plan.reused.count(t->view_src ? t->view_src : t)) continue;
    ++n;
    bad += want[static_cast<std::size_t>(i)] != got[static_cast<std::size_t>(i)];
  }
  if (compared) *compared = n;
  return bad;
}

// One line per memory: the planned buffer against one allocation per tensor.
inline void print_memory_uses(const std::string& label, const gk::sched& sc) {
  for (const auto& u : sc.memory_uses())
    std::printf("%s: %s memory peak %zu bytes (most live at once %zu), no reuse %zu bytes: %.2fx\n", label.c_str(),
                std::string(u.memory->name()).c_str(), u.peak, u.live_peak, u.separate,
                u.peak ? static_cast<double>(u.separate) / static_cast<double>(u.peak) : 0.0);
  std::fflush(stdout);
}

// Moves a tensor that has host data into a fresh buffer of `buft` (set_tensor of its bytes).
inline std::unique_ptr<gk::backend_buffer> move_to(gk::buffer_type& buft, std::vector<gk::tensor*> ts) {
  std::vector<std::vector<unsigned char>> bytes;
  for (gk::tensor* t : ts) {
    const auto* p = static_cast<const unsigned char*>(t->data);
    bytes.emplace_back(p, p + t->nbytes());
  }
  auto buf = gk::place_in_one_buffer(ts, buft);
  for (std::size_t i = 0; i < ts.size(); ++i) buf->set_tensor(ts[i], bytes[i].data(), 0, bytes[i].size());
  return buf;
}

}  // namespace gk_test
