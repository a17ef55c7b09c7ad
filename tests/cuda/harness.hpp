// SPDX-License-Identifier: MIT
// Device tests: one graph, built twice by the same function, computed once by the CPU
// (gk::cpu::compute, the definition) and once with its inputs in CUDA memory through the
// scheduler ([CUDA, CPU]); the op under test must have been assigned to the CUDA backend
// (the harness fails the case otherwise, so a refused op cannot pass by falling back).
//
//   gk_cuda_test::pair p = gk_cuda_test::run_pair([&](gk::context& ctx) {
//     gk::tensor* a = ctx.new_tensor_2d(gk::type::f32, 67, 5);
//     return gk::rms_norm(ctx, a, 1e-6f);          // the node under test, returned
//   });
//   CHECK(p.max_abs() <= 1e-6);
//
// Leaves are filled with uniform(-1, 1) (quantized leaves: encoded from that) unless the
// builder fills them itself: a leaf whose name starts with '#' is left as the builder
// wrote it (the builder sees t->data non-null only on the CPU side; the device side gets
// the same bytes uploaded). Fresh device memory is 0xff bytes (NaN), so an output element
// a kernel never writes fails the comparison.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../common/transformer_block.hpp"
#include "gk/backends/cpu.hpp"
#include "gk/backends/cuda.hpp"
#include "gk/cpu/rows.hpp"
#include "gk/gk.hpp"
#include "gk/sched.hpp"

namespace gk_cuda_test {

// Every element of t as float (f32/f16/bf16/i32 outputs), from host bytes in t's layout.
inline std::vector<double> as_doubles(const gk::tensor* t, const unsigned char* base) {
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(t->nelements()));
  for (std::int64_t i3 = 0; i3 < t->ne[3]; ++i3)
    for (std::int64_t i2 = 0; i2 < t->ne[2]; ++i2)
      for (std::int64_t i1 = 0; i1 < t->ne[1]; ++i1)
        for (std::int64_t i0 = 0; i0 < t->ne[0]; ++i0) {
          const unsigned char* p = base + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
          switch (t->type) {
            case gk::type::f32: { float v; std::memcpy(&v, p, 4); out.push_back(v); break; }
            case gk::type::f16: { gk::f16 v; std::memcpy(&v, p, 2); out.push_back(gk::to_f32(v)); break; }
            case gk::type::bf16: { gk::bf16 v; std::memcpy(&v, p, 2); out.push_back(gk::to_f32(v)); break; }
            case gk::type::i32: { std::int32_t v; std::memcpy(&v, p, 4); out.push_back(v); break; }
            default: FAIL("as_doubles: output type " << gk::name(t->type) << " not readable as numbers");
          }
        }
  return out;
}

struct pair {
  std::vector<double> cpu, dev;     // every output element, in index order
  std::vector<unsigned char> cpu_bytes, dev_bytes;  // the raw output span
  std::string what;                 // the node, for messages

  // NaN classes must agree exactly; finite values within the returned figure
  double max_abs() const {
    double m = 0;
    for (std::size_t i = 0; i < cpu.size(); ++i) m = std::max(m, diff(i));
    return m;
  }
  // |dev - cpu| / max(|cpu|, floor)
  double max_rel(double floor = 1e-6) const {
    double m = 0;
    for (std::size_t i = 0; i < cpu.size(); ++i) m = std::max(m, diff(i) / std::max(std::fabs(cpu[i]), floor));
    return m;
  }
  bool bit_equal() const { return cpu_bytes == dev_bytes; }
  double diff(std::size_t i) const {
    const double a = cpu[i], b = dev[i];
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : std::numeric_limits<double>::infinity();
    if (std::isinf(a) || std::isinf(b)) return a == b ? 0 : std::numeric_limits<double>::infinity();
    return std::fabs(a - b);
  }
};

// Every element equal with its sign, or NaN on both sides (the first difference is logged).
inline bool same(const pair& p) {
  for (std::size_t i = 0; i < p.cpu.size(); ++i) {
    const double a = p.cpu[i], b = p.dev[i];
    if (std::isnan(a) && std::isnan(b)) continue;
    if (!(a == b) || std::signbit(a) != std::signbit(b)) {
      UNSCOPED_INFO(p.what << ": element " << i << ": cpu " << a << " device " << b);
      return false;
    }
  }
  return true;
}

using builder = std::function<gk::tensor*(gk::context&)>;

inline std::vector<gk::tensor*> leaf_bases(const gk::graph& g) {
  std::vector<gk::tensor*> out;
  for (gk::tensor* l : g.leafs()) out.push_back(l);
  return out;
}

inline gk::backend& cuda_backend() {
  static std::unique_ptr<gk::backend> b = gk::cuda::make_backend(0);
  return *b;
}

// Runs build on the CPU and on the device; seed picks the random inputs.
inline pair run_pair(const builder& build, unsigned seed = 1, std::size_t arena = 256u << 20) {
  pair p;
  // the definition: everything in context memory
  gk::context ca{gk::context_params{arena}};
  gk::tensor* out_a = build(ca);
  out_a->flags |= gk::flag_output;
  gk::graph ga;
  ga.build_forward_expand(out_a);
  std::mt19937 rng(seed);
  for (gk::tensor* l : ga.leafs())
    if (l->name[0] != '#' && !l->view_src) gk_test::fill_random(l, rng);
  // The inputs as filled, kept for the device: an in-place node writes its output over
  // its source leaf's storage, so after the CPU run that leaf holds the output.
  std::vector<std::vector<unsigned char>> inputs;
  for (gk::tensor* l : ga.leafs()) {
    const auto* d = static_cast<const unsigned char*>(l->data);
    inputs.emplace_back(d && l->nbytes() ? std::vector<unsigned char>(d, d + l->nbytes()) : std::vector<unsigned char>{});
  }
  gk::cpu::compute(ga, 2);
  p.what = gk::describe(out_a);
  p.cpu_bytes.assign(static_cast<unsigned char*>(out_a->data), static_cast<unsigned char*>(out_a->data) + out_a->nbytes());
  p.cpu = as_doubles(out_a, p.cpu_bytes.data());

  // the device: the same graph, leaves uploaded into one CUDA buffer, nodes placed by sched
  gk::context cb{gk::context_params{arena, nullptr, true}};
  gk::tensor* out_b = build(cb);
  out_b->flags |= gk::flag_output;
  gk::graph gb;
  gb.build_forward_expand(out_b);
  REQUIRE(gb.n_leafs() == ga.n_leafs());
  REQUIRE(gb.n_nodes() == ga.n_nodes());
  gk::buffer_type& dm = gk::cuda::device_buffer_type(0);
  std::size_t total = 0;
  for (gk::tensor* l : gb.leafs()) total += (dm.alloc_size(l) + dm.alignment() - 1) / dm.alignment() * dm.alignment();
  auto buf = dm.alloc_buffer(total ? total : 1);
  std::size_t off = 0;
  for (int i = 0; i < gb.n_leafs(); ++i) {
    gk::tensor* l = gb.leafs()[static_cast<std::size_t>(i)];
    const std::vector<unsigned char>& in = inputs[static_cast<std::size_t>(i)];
    if (l->view_src) continue;
    buf->init_tensor(l, off);
    off += (dm.alloc_size(l) + dm.alignment() - 1) / dm.alignment() * dm.alignment();
    if (!in.empty()) buf->set_tensor(l, in.data(), 0, in.size());
  }
  gk::cpu_backend cpu(2);
  gk::sched s({&cuda_backend(), &cpu});
  s.alloc_graph(gb);
  if (s.backend_of(out_b) != &cuda_backend())
    FAIL("the node under test ran on " << s.backend_of(out_b)->name() << ", not CUDA: " << p.what);
  s.compute(gb);
  p.dev_bytes.resize(out_b->nbytes());
  if (gk::backend_buffer* ob = gk::buffer_of(out_b)) ob->get_tensor(out_b, p.dev_bytes.data(), 0, p.dev_bytes.size());
  else std::memcpy(p.dev_bytes.data(), out_b->data, p.dev_bytes.size());
  p.dev = as_doubles(out_b, p.dev_bytes.data());
  REQUIRE(p.dev.size() == p.cpu.size());
  return p;
}

}  // namespace gk_cuda_test
