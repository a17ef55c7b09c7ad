// SPDX-License-Identifier: MIT
// The CPU compute pass. Every thread walks the node list in step; at each node it
// computes its share (kernels split by destination row, so which thread computes a row
// never changes its bits) and then all threads meet at one barrier. Before anything runs
// the pass checks every node has a kernel and every tensor has storage, and names the
// first one that does not.
//
// Each op family lives in its own header (cpu/<family>.hpp) exposing
// supports(node) and compute(exec, node); this file only routes ops to families.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gk/alloc.hpp"
#include "gk/cpu/attn.hpp"
#include "gk/cpu/copy.hpp"
#include "gk/cpu/elementwise.hpp"
#include "gk/cpu/matmul.hpp"
#include "gk/cpu/norm.hpp"
#include "gk/cpu/reduce.hpp"
#include "gk/cpu/rope.hpp"
#include "gk/cpu/rows.hpp"
#include "gk/cpu/softmax.hpp"
#include "gk/cpu/threadpool.hpp"
#include "gk/cpu/tiled.hpp"
#include "gk/graph.hpp"

namespace gk::cpu {

enum class family { none, view, elementwise, reduce, norm, softmax, rope, copy, attn, matmul, unsupported };

constexpr family family_of(op o) noexcept {
  switch (o) {
    case op::none: return family::none;
    case op::reshape: case op::view: case op::permute: case op::transpose: return family::view;
    case op::add: case op::sub: case op::mul: case op::div: case op::add1: case op::acc: case op::add_id:
    case op::sqr: case op::sqrt: case op::log: case op::sin: case op::cos: case op::unary: case op::glu:
    case op::scale: case op::clamp: case op::leaky_relu: case op::fill: case op::tri: case op::arange:
    case op::cumsum:
      return family::elementwise;
    case op::sum: case op::sum_rows: case op::mean: case op::argmax: case op::count_equal: case op::argsort:
    case op::top_k:
      return family::reduce;
    case op::norm: case op::rms_norm: case op::group_norm: case op::l2_norm: return family::norm;
    case op::soft_max: case op::diag_mask_inf: case op::diag_mask_zero: return family::softmax;
    case op::rope: return family::rope;
    case op::dup: case op::cpy: case op::cont: case op::get_rows: case op::set_rows: case op::repeat:
    case op::concat:
      return family::copy;
    case op::flash_attn_ext: return family::attn;
    case op::mul_mat: case op::mul_mat_id: case op::out_prod: return family::matmul;
    default: return family::unsupported;
  }
}

// The CPU has a kernel for this node (its op and its operand types).
inline bool supports(const tensor* node) {
  switch (family_of(node->op)) {
    case family::none: case family::view: return true;
    case family::elementwise: return elementwise::supports(node);
    case family::reduce: return reduce::supports(node);
    case family::norm: return norm::supports(node);
    case family::softmax: return softmax::supports(node);
    case family::rope: return rope::supports(node);
    case family::copy: return copy::supports(node);
    case family::attn: return attn::supports(node);
    case family::matmul: return matmul::supports(node);
    default: return false;
  }
}

inline void compute_node(const exec& ex, tensor* node) {
  switch (family_of(node->op)) {
    case family::none: case family::view: return;
    case family::elementwise: return elementwise::compute(ex, node);
    case family::reduce: return reduce::compute(ex, node);
    case family::norm: return norm::compute(ex, node);
    case family::softmax: return softmax::compute(ex, node);
    case family::rope: return rope::compute(ex, node);
    case family::copy: return copy::compute(ex, node);
    case family::attn: return attn::compute(ex, node);
    case family::matmul: return matmul::compute(ex, node);
    default: throw error("gk: cpu: op " + std::string(name(node->op)) + " is not supported");
  }
}

inline std::string node_label(const tensor* node) {
  std::string s = std::string(name(node->op));
  if (node->op == op::unary) s += " " + std::string(name(static_cast<unary_op>(node->op_params[0])));
  if (node->op == op::glu) s += " " + std::string(name(static_cast<glu_op>(node->op_params[0])));
  s += " -> " + describe(node);
  for (int i = 0; i < max_src && node->src[i]; ++i) s += ", src" + std::to_string(i) + " " + describe(node->src[i]);
  return s;
}

// Throws naming the first node the CPU cannot compute or the first tensor without storage.
inline void check_graph(const graph& g) {
  for (tensor* t : g.leafs())
    if (!t->data && !t->is_empty()) throw error("gk: cpu: leaf " + describe(t) + " has no data (allocate it first)");
  for (tensor* n : g.nodes()) {
    if (!supports(n)) throw error("gk: cpu: no kernel for node " + node_label(n));
    if (!n->data && !n->is_empty()) throw error("gk: cpu: node " + node_label(n) + " has no data (allocate it first)");
    if (family_of(n->op) == family::view) continue;  // re-describes bytes, reads and writes none
    if (tiled::reads_tiled(n))
      throw error("gk: cpu: node " + node_label(n) + " lives in CPU_TILED memory, which holds weights; no node writes there");
    for (int j = 0; j < max_src; ++j)
      if (!tiled::cpu_reads_in_place(n, j))
        throw error("gk: cpu: node " + node_label(n) + " reads src" + std::to_string(j) + " " + describe(n->src[j]) +
                    " from CPU_TILED memory, stored tiled; the CPU reads it there only as the weight of mul_mat or "
                    "mul_mat_id (compute through gk::sched, which copies it out for other readers)");
  }
}

// Runs graphs on a fixed set of threads. Keep one per engine: the pool and each thread's
// scratch live across calls.
class runner {
 public:
  explicit runner(int n_threads) : pool_(n_threads), scratch_(static_cast<std::size_t>(pool_.size())) {}
  int n_threads() const noexcept { return pool_.size(); }

  void compute(const graph& g) {
    check_graph(g);
    const auto nodes = g.nodes();
    counters_[0].store(0);
    counters_[1].store(0);
    std::atomic<bool> failed{false};
    pool_.run([&](int ith, int nth) {
      exec ex;
      ex.ith = ith;
      ex.nth = nth;
      ex.scr = &scratch_[static_cast<std::size_t>(ith)];
      for (std::size_t k = 0; k < nodes.size(); ++k) {
        ex.counter = &counters_[k & 1];
        if (ith == 0) counters_[(k + 1) & 1].store(0, std::memory_order_relaxed);
        try {
          if (!nodes[k]->is_empty()) compute_node(ex, nodes[k]);
        } catch (...) {
          failed.store(true);
          pool_.sync();
          throw;
        }
        pool_.sync();
        if (failed.load()) return;
      }
    });
    debug::maybe_print_node_hashes(g);  // GK_NODE_HASH=1: one hash line per node (alloc.hpp)
  }

 private:
  threadpool pool_;
  std::vector<scratch> scratch_;
  std::atomic<std::int64_t> counters_[2];
};

// One-shot convenience: compute g on n_threads threads.
inline void compute(const graph& g, int n_threads = 1) {
  runner r(n_threads);
  r.compute(g);
}

}  // namespace gk::cpu

namespace gk {

// Teaches gk a block format defined outside it (W::id = gk::user_type(k)): its geometry
// and name (core/types.hpp), its row functions (formats/format.hpp: get_rows, copies and
// casts) and its CPU matmul kernels (cpu/matmul.hpp), all instantiated here from gk's
// templates for target T, by default the best this translation unit is compiled for.
// Call it once at start-up, before graphs that use the format are built; the CPU backend
// then computes mul_mat, mul_mat_id, out_prod, get_rows, set_rows and cpy with W weights.
// examples/custom_format/ shows the whole path.
template <BlockFormat W, simd::Target T = simd::native>
void register_format(std::string_view type_name) {
  register_rows<W>(type_name);
  cpu::matmul::register_kernels<W, T>();
}

}  // namespace gk
