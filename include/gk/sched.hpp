// SPDX-License-Identifier: MIT
// The scheduler: runs one graph over several backends (in priority order, the CPU last as
// the fallback). Planning a graph takes five steps:
//
//  1. assign  each node a backend, by the first rule that applies:
//       (1) the memory the node already lives in (its buffer, or its view base's): the
//           first backend that addresses that memory and supports the op. A view of
//           another node follows that node. Such nodes are pinned;
//       (2) the memory a source lives in (a matmul goes where its weight src[0] is): the
//           first backend that reads that source there (backend::reads_in_place) and
//           supports the op;
//       (3) the backend of its first source that is a node, if that one supports the op;
//       (4) the first backend that supports the op.
//     set_backend(node, b) pins a node by hand and overrides all four.
//  2. smooth  a lone node on A between two neighbours on B that B supports moves to B: it
//     saves two split boundaries (and their copies) for one op. Pinned nodes never move.
//  3. cut     the node list into splits where the backend changes.
//  4. stage   every input a split reads from memory its backend cannot read it in (cannot
//     address, or, as CPU_TILED for any reader but a matmul's weight, cannot read in that
//     layout) gets a staging tensor (same type, shape and strides) in memory it can,
//     filled by a copy (copy_tensor: the buffers' get/set_tensor) just before the split runs. A staged copy is reused by later splits on the same
//     memory until a node writes the original's storage again.
//  5. place   node outputs, inputs without storage and staging tensors get storage from the
//     graph allocator's planner (alloc.hpp plan_steps), given the execution order as steps:
//     each split's staging copies (read the source, write the staging tensor), then its
//     nodes (reading staging tensors where swapped). One free list per memory (buffer
//     type), so storage is released after its last reader in any memory: a staged source
//     lives until its copy has run, a staging tensor from its first fill to its last
//     reader. Then one buffer per memory of the planned peak (alloc_buffer) and every
//     tensor placed with init_tensor. Kept to the end: the last node, flagged tensors and
//     nodes nothing reads (the caller's outputs). A place_fn given instead (such as
//     place_in_one_buffer: every tensor its own slice, no reuse) is called once per buffer
//     type; GK_ALLOC_NO_REUSE=1 makes the planner keep every tensor to the end.
//     Views are pointed into their bases.
//
// With one backend this is one split, no staging, and the same kernels in the same order
// as cpu::compute: the results are the same bits.
//
// A split runs as its own graph: for its duration its nodes' sources that live outside it
// are swapped for the staging tensor or for a leaf header that aliases the source (a
// "proxy", so the graph walk stops there), and restored afterwards. The caller's graph
// and tensors are left as they were, except for the storage step 5 gave them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "gk/alloc.hpp"
#include "gk/backend.hpp"
#include "gk/graph.hpp"

namespace gk {

// Placement without lifetimes: give every tensor in `ts` storage in memory of type `buft`
// (init_tensor into buffers it allocates) and return the buffer that holds them; the
// scheduler keeps it alive while the plan stands. `ts` lists tensors in the order they are
// first written. The scheduler's own placement (no place_fn) plans lifetimes instead.
using place_fn = std::function<std::unique_ptr<backend_buffer>(std::span<tensor* const> ts, buffer_type& buft)>;

// The minimal placement: every tensor its own aligned slice of one buffer, no reuse.
inline std::unique_ptr<backend_buffer> place_in_one_buffer(std::span<tensor* const> ts, buffer_type& buft) {
  const std::size_t align = buft.alignment();
  std::vector<std::size_t> offs(ts.size());
  std::size_t total = 0;
  for (std::size_t i = 0; i < ts.size(); ++i) {
    offs[i] = total;
    total += (buft.alloc_size(ts[i]) + align - 1) / align * align;
  }
  auto buf = buft.alloc_buffer(total);
  for (std::size_t i = 0; i < ts.size(); ++i) buf->init_tensor(ts[i], offs[i]);
  return buf;
}

// Why a node is where it is; anything but none is never moved by smoothing.
enum class pin : std::uint8_t {
  none,
  memory,    // rule 1: the node's storage already exists in some memory
  follower,  // a view of another node: its storage is that node's, so it goes with it
  user,      // set_backend
};

namespace sched_steps {

using node_index = std::unordered_map<const tensor*, int>;

struct assignment {
  std::vector<int> backend;  // per node, an index into the backend list
  std::vector<pin> pinned;
  std::vector<std::uint8_t> rule;  // the rule (1-4) that placed it; 0 for set_backend
};

inline std::string where(const tensor* n) {
  return "node " + std::string(name(n->op)) + " -> " + describe(n);
}

// The first backend that reads the node's source `slot` in `mem` in place and supports the
// node; -1 if none.
inline int backend_reading(const std::vector<backend*>& bs, const buffer_type& mem, const tensor* node, int slot) {
  for (std::size_t i = 0; i < bs.size(); ++i)
    if (bs[i]->reads_in_place(node, slot, mem) && bs[i]->supports_op(node)) return static_cast<int>(i);
  return -1;
}

// The first backend that addresses `mem` and supports the node; -1 if none.
inline int backend_for_memory(const std::vector<backend*>& bs, const buffer_type& mem, const tensor* node) {
  for (std::size_t i = 0; i < bs.size(); ++i)
    if (bs[i]->supports_buft(mem) && bs[i]->supports_op(node)) return static_cast<int>(i);
  return -1;
}

// The index of the node a follower's storage belongs to, or -1.
inline int follower_base(const tensor* n, const node_index& idx) {
  if (!n->view_src) return -1;
  auto it = idx.find(n->view_src);
  return it == idx.end() ? -1 : it->second;
}

// A follower goes with its base; if the base's backend has no kernel for it, any backend
// that addresses the base's memory will do. -1: none can.
inline int follower_backend(const std::vector<backend*>& bs, const tensor* n, int base_backend) {
  if (bs[static_cast<std::size_t>(base_backend)]->supports_op(n)) return base_backend;
  return backend_for_memory(bs, bs[static_cast<std::size_t>(base_backend)]->default_buffer_type(), n);
}

// Step 1.
inline assignment assign(std::span<tensor* const> nodes, const node_index& idx, const std::vector<backend*>& bs,
                         const std::unordered_map<const tensor*, int>& user_pins) {
  assignment a;
  a.backend.assign(nodes.size(), -1);
  a.pinned.assign(nodes.size(), pin::none);
  a.rule.assign(nodes.size(), 0);
  for (std::size_t k = 0; k < nodes.size(); ++k) {
    const tensor* n = nodes[k];
    int& b = a.backend[k];
    if (auto it = user_pins.find(n); it != user_pins.end()) {
      b = it->second;
      a.pinned[k] = pin::user;
      continue;
    }
    if (const buffer_type* mem = memory_of(n)) {  // rule 1
      b = backend_for_memory(bs, *mem, n);
      if (b < 0)
        throw error("gk: sched: " + where(n) + " lives in " + std::string(mem->name()) +
                    " memory, and no backend both addresses that memory and supports the op");
      a.pinned[k] = pin::memory;
      a.rule[k] = 1;
      continue;
    }
    if (int base = follower_base(n, idx); base >= 0) {  // rule 1 for a view of a node
      b = follower_backend(bs, n, a.backend[static_cast<std::size_t>(base)]);
      if (b < 0)
        throw error("gk: sched: " + where(n) + " is a view of " + describe(n->view_src) +
                    ", and no backend that addresses its memory supports the op");
      a.pinned[k] = pin::follower;
      a.rule[k] = 1;
      continue;
    }
    for (int j = 0; j < max_src && b < 0; ++j)  // rule 2
      if (const tensor* s = n->src[j])
        if (const buffer_type* mem = memory_of(s)) b = backend_reading(bs, *mem, n, j);
    a.rule[k] = 2;
    if (b >= 0) continue;
    a.rule[k] = 3;
    for (int j = 0; j < max_src; ++j) {  // rule 3
      const tensor* s = n->src[j];
      if (!s) continue;
      auto it = idx.find(s);
      if (it == idx.end()) continue;
      const int sb = a.backend[static_cast<std::size_t>(it->second)];
      if (bs[static_cast<std::size_t>(sb)]->supports_op(n)) b = sb;
      break;
    }
    if (b >= 0) continue;
    a.rule[k] = 4;
    for (std::size_t i = 0; i < bs.size() && b < 0; ++i)  // rule 4
      if (bs[i]->supports_op(n)) b = static_cast<int>(i);
    if (b < 0) throw error("gk: sched: no backend supports " + where(n));
  }
  return a;
}

// Step 2. Returns how many nodes moved. Followers of a moved node go with it. A node rule 2
// placed stays too, though unpinned: it sits where a source already lives (a matmul by
// its weight), and moving it would stage that source, usually the largest tensor it
// reads (a 4096 x 4096 q4_K weight is 9.4 MB against a 16 KB activation row), on every run.
inline int smooth(std::span<tensor* const> nodes, assignment& a, const node_index& idx,
                  const std::vector<backend*>& bs) {
  std::vector<std::vector<int>> followers(nodes.size());
  for (std::size_t k = 0; k < nodes.size(); ++k)
    if (a.pinned[k] == pin::follower)
      followers[static_cast<std::size_t>(follower_base(nodes[k], idx))].push_back(static_cast<int>(k));
  int moved = 0;
  for (std::size_t k = 1; k + 1 < nodes.size(); ++k) {
    if (a.pinned[k] != pin::none || a.rule[k] == 2) continue;
    const int from = a.backend[k], to = a.backend[k - 1];
    if (to == from || a.backend[k + 1] != to) continue;
    if (!bs[static_cast<std::size_t>(to)]->supports_op(nodes[k])) continue;
    bool followers_fit = true;
    for (int f : followers[k]) followers_fit &= follower_backend(bs, nodes[static_cast<std::size_t>(f)], to) >= 0;
    if (!followers_fit) continue;
    a.backend[k] = to;
    for (int f : followers[k])
      a.backend[static_cast<std::size_t>(f)] = follower_backend(bs, nodes[static_cast<std::size_t>(f)], to);
    ++moved;
  }
  return moved;
}

}  // namespace sched_steps

class sched {
 public:
  struct copy_step {
    const tensor* src;
    tensor* dst;  // the staging tensor
  };
  struct swap_step {
    tensor* node;
    int slot;
    tensor* replacement;  // staging tensor or proxy
  };
  struct split {
    int backend;      // index into backends()
    int first, last;  // node range [first, last) of the planned graph
    std::vector<copy_step> copies;
    std::vector<swap_step> swaps;
    graph g;  // the split's nodes, in order, as built with the swaps applied
  };

  // backends in priority order; the last one is the fallback and must address host
  // memory (the CPU). Storage is planned by lifetimes with `opt` (by default as the
  // environment says: GK_ALLOC_NO_REUSE=1 keeps every tensor to the end), or given by
  // `place` (place_in_one_buffer: no reuse).
  explicit sched(std::vector<backend*> backends, alloc_options opt = alloc_options::from_env())
      : sched(std::move(backends), place_fn{}, opt) {}
  sched(std::vector<backend*> backends, place_fn place) : sched(std::move(backends), std::move(place), {}) {}

 private:
  sched(std::vector<backend*> backends, place_fn place, alloc_options opt)
      : backends_(std::move(backends)), place_(std::move(place)), alloc_opt_(opt) {
    if (backends_.empty()) throw error("gk: sched: needs at least one backend (the CPU, last)");
    for (backend* b : backends_)
      if (!b) throw error("gk: sched: a backend in the list is null");
    if (!backends_.back()->supports_buft(host_buffer_type()))
      throw error("gk: sched: the last backend (" + std::string(backends_.back()->name()) +
                  ") must address host memory: it is the fallback for every op the others refuse");
  }

 public:
  sched(const sched&) = delete;
  sched& operator=(const sched&) = delete;

  const std::vector<backend*>& backends() const noexcept { return backends_; }

  // Pins node to backend b (which must be in the list) for every later plan.
  void set_backend(const tensor* node, backend* b) {
    auto it = std::find(backends_.begin(), backends_.end(), b);
    if (it == backends_.end())
      throw error("gk: sched: set_backend on " + describe(node) + ": that backend is not one of the scheduler's");
    user_pins_[node] = static_cast<int>(it - backends_.begin());
    stale_ = true;  // the next compute re-plans
  }

  // Plans g and gives storage to every node, input and staging tensor that has none. A
  // graph planned before (by this scheduler) is first given back its unplaced state.
  void alloc_graph(const graph& g) {
    if (planned_ == &g) release_placements();
    drop_plan();
    plan(g);
    planned_ = &g;
    planned_nodes_ = g.n_nodes();
    stale_ = false;
  }

  void compute(const graph& g) {
    if (stale_ || planned_ != &g || planned_nodes_ != g.n_nodes()) alloc_graph(g);
    copies_last_ = 0;
    for (split& s : splits_) {
      for (const copy_step& c : s.copies) {
        copy_tensor(c.src, c.dst);
        ++copies_last_;
      }
      swapped on(s.swaps);
      backend* b = backends_[static_cast<std::size_t>(s.backend)];
      b->graph_compute(s.g);
      b->synchronize();
    }
  }

  // Forgets the plan, gives back all storage and clears the data pointers the scheduler
  // set (the graph's context must still be alive).
  void reset() {
    release_placements();
    drop_plan();
  }

  // ---- what the last plan decided ----
  const std::vector<split>& splits() const noexcept { return splits_; }
  backend* backend_of(const tensor* node) const {
    auto it = index_.find(node);
    return it == index_.end() ? nullptr : backends_[static_cast<std::size_t>(assigned_.backend[static_cast<std::size_t>(it->second)])];
  }
  pin pinned(const tensor* node) const {
    auto it = index_.find(node);
    return it == index_.end() ? pin::none : assigned_.pinned[static_cast<std::size_t>(it->second)];
  }
  int n_moved_by_smoothing() const noexcept { return moved_; }
  // Staging copies a compute() makes (the plan's count) and the last compute() made.
  int n_copies() const noexcept {
    int n = 0;
    for (const split& s : splits_) n += static_cast<int>(s.copies.size());
    return n;
  }
  int n_copies_last() const noexcept { return copies_last_; }
  const std::vector<std::unique_ptr<backend_buffer>>& buffers() const noexcept { return buffers_; }

  // Bytes per memory the last plan used: `peak` is the buffer allocated; `separate` is one
  // allocation per tensor (what place_in_one_buffer would take, in-place results counted
  // too); `live_peak` the most bytes live at once (peak's floor). With a place_fn all three
  // are the buffers' sizes.
  struct memory_use {
    const buffer_type* memory;
    std::size_t peak, separate, live_peak;
  };
  const std::vector<memory_use>& memory_uses() const noexcept { return uses_; }
  // The planner's result (empty with a place_fn): slots per tensor, reused storage.
  const alloc_plan& storage_plan() const noexcept { return plan_; }

 private:
  // Applies a split's source swaps for its lifetime.
  struct swapped {
    explicit swapped(std::vector<swap_step>& s) : steps(s) {
      for (swap_step& w : steps) std::swap(w.node->src[w.slot], w.replacement);
    }
    ~swapped() {
      for (swap_step& w : steps) std::swap(w.node->src[w.slot], w.replacement);
    }
    std::vector<swap_step>& steps;
  };

  buffer_type& memory_of_backend(int b) const { return backends_[static_cast<std::size_t>(b)]->default_buffer_type(); }

  // Where t will live once placed: its storage now, else its base's planned memory.
  buffer_type* planned_memory(const tensor* t) const {
    if (buffer_type* m = memory_of(t)) return m;
    const tensor* base = t->view_src ? t->view_src : t;
    if (auto it = index_.find(base); it != index_.end())
      return &memory_of_backend(assigned_.backend[static_cast<std::size_t>(it->second)]);
    if (auto it = leaf_backend_.find(base); it != leaf_backend_.end()) return &memory_of_backend(it->second);
    return nullptr;
  }

  void plan(const graph& g) {
    const auto nodes = g.nodes();
    for (std::size_t k = 0; k < nodes.size(); ++k) index_[nodes[k]] = static_cast<int>(k);

    assigned_ = sched_steps::assign(nodes, index_, backends_, user_pins_);
    moved_ = sched_steps::smooth(nodes, assigned_, index_, backends_);

    // inputs with no storage go where their first reader runs
    for (std::size_t k = 0; k < nodes.size(); ++k)
      for (int j = 0; j < max_src; ++j) {
        const tensor* s = nodes[k]->src[j];
        if (s && !index_.count(s) && !memory_of(s) && !s->view_src && !leaf_backend_.count(s)) {
          leaf_backend_[s] = assigned_.backend[k];
          unplaced_leafs_.push_back(nodes[k]->src[j]);
        }
      }

    // every node must end up in memory its backend addresses (a pin that breaks this is
    // a caller's set_backend or a bug in the rules; either way, say which node)
    for (std::size_t k = 0; k < nodes.size(); ++k) {
      backend* b = backends_[static_cast<std::size_t>(assigned_.backend[k])];
      const buffer_type* mem = planned_memory(nodes[k]);
      if (mem && !b->supports_buft(*mem))
        throw error("gk: sched: " + sched_steps::where(nodes[k]) + " is assigned to " + std::string(b->name()) +
                    ", which cannot address the " + std::string(mem->name()) + " memory it lives in");
    }

    // step 3: cut
    for (int k = 0; k < static_cast<int>(nodes.size()); ++k) {
      const int b = assigned_.backend[static_cast<std::size_t>(k)];
      if (splits_.empty() || splits_.back().backend != b) splits_.push_back(split{b, k, k, {}, {}, {}});
      splits_.back().last = k + 1;
    }

    // step 4: stage. version[base] counts the nodes that have written base's storage so
    // far; a staged copy taken at an older version is refreshed.
    struct staged {
      tensor* copy = nullptr;
      std::uint64_t version = 0;
    };
    std::map<std::pair<const tensor*, const buffer_type*>, staged> stages;
    std::unordered_map<const tensor*, std::uint64_t> version;
    std::vector<std::pair<split*, std::pair<tensor*, int>>> proxied;  // filled with proxies after placement
    for (split& s : splits_) {
      backend* b = backends_[static_cast<std::size_t>(s.backend)];
      buffer_type& target = b->default_buffer_type();
      for (int k = s.first; k < s.last; ++k) {
        tensor* n = nodes[static_cast<std::size_t>(k)];
        for (int j = 0; j < max_src; ++j) {
          tensor* src = n->src[j];
          if (!src) continue;
          auto it = index_.find(src);
          const bool is_node = it != index_.end();
          if (is_node && it->second >= s.first && it->second < s.last) continue;
          const buffer_type* mem = planned_memory(src);
          if (!mem) throw error("gk: sched: " + describe(src) + ", a source of " + sched_steps::where(n) + ", has no storage and no plan for any");
          if (b->reads_in_place(n, j, *mem)) {
            if (is_node) proxied.push_back({&s, {n, j}});
            continue;
          }
          staged& st = stages[{src, &target}];
          const std::uint64_t v = version[src->view_src ? src->view_src : src];
          if (!st.copy) {
            st.copy = &headers_.emplace_back();
            staging_.insert(st.copy);
            make_staging_header(src, st.copy, target);
            to_place_[&target].push_back(st.copy);
          } else if (st.version == v) {
            s.swaps.push_back({n, j, st.copy});
            continue;
          }
          st.version = v;
          s.copies.push_back({src, st.copy});
          s.swaps.push_back({n, j, st.copy});
        }
      }
      for (int k = s.first; k < s.last; ++k) {
        const tensor* n = nodes[static_cast<std::size_t>(k)];
        if (!is_pure_view(n->op)) ++version[n->view_src ? n->view_src : n];
      }
    }

    // step 5: place
    if (place_) {
      place_each_buffer_type(nodes);
    } else {
      place_planned(g, nodes);
    }
    for (tensor* n : nodes) point_view(n);
    for (tensor* l : g.leafs()) point_view(l);

    // proxies: leaf headers aliasing sources a split reads from another split's output
    std::unordered_map<const tensor*, tensor*> proxies;
    for (auto& [s, at] : proxied) {
      tensor* src = at.first->src[at.second];
      tensor*& p = proxies[src];
      if (!p) {
        p = &headers_.emplace_back(*src);
        p->op = op::none;
        for (tensor*& ps : p->src) ps = nullptr;
      }
      s->swaps.push_back({at.first, at.second, p});
    }
    for (split& s : splits_) {
      swapped on(s.swaps);
      for (int k = s.first; k < s.last; ++k) s.g.build_forward_expand(nodes[static_cast<std::size_t>(k)]);
    }
  }

  // step 5 with a place_fn: staging headers were queued in step 4; node outputs and inputs now.
  void place_each_buffer_type(std::span<tensor* const> nodes) {
    auto queue = [&](buffer_type& bt, tensor* t) { to_place_[&bt].push_back(t); };
    for (std::size_t k = 0; k < nodes.size(); ++k) {
      tensor* n = nodes[k];
      if (!n->view_src && !n->data) queue(memory_of_backend(assigned_.backend[k]), n);
    }
    for (tensor* leaf : unplaced_leafs_) queue(memory_of_backend(leaf_backend_[leaf]), leaf);
    for (auto& [bt, ts] : to_place_) {
      // outputs and inputs first, staging after: the order tensors are first written in
      std::stable_partition(ts.begin(), ts.end(), [&](tensor* t) { return !is_header(t); });
      buffers_.push_back(place_(ts, *bt));
      uses_.push_back({bt, buffers_.back()->size, buffers_.back()->size, buffers_.back()->size});
      for (tensor* t : ts)
        if (!is_header(t)) placed_.push_back(t);
    }
    to_place_.clear();
  }

  // step 5 by lifetimes: the execution order as steps for plan_steps (see the top).
  void place_planned(const graph& g, std::span<tensor* const> nodes) {
    to_place_.clear();  // step 4's queue is for a place_fn; the steps below say the same
    std::vector<buffer_type*> mems;                 // memory index -> buffer type
    std::unordered_map<const tensor*, int> where;   // tensor to place -> memory index
    auto index_of = [&](buffer_type& bt) {
      auto it = std::find(mems.begin(), mems.end(), &bt);
      if (it != mems.end()) return static_cast<int>(it - mems.begin());
      mems.push_back(&bt);
      return static_cast<int>(mems.size()) - 1;
    };
    std::vector<tensor*> to_place;  // every tensor the scheduler gives storage to
    for (std::size_t k = 0; k < nodes.size(); ++k)
      if (!nodes[k]->view_src && !nodes[k]->data) {
        where[nodes[k]] = index_of(memory_of_backend(assigned_.backend[k]));
        to_place.push_back(nodes[k]);
      }
    for (tensor* leaf : unplaced_leafs_) {
      where[leaf] = index_of(memory_of_backend(leaf_backend_[leaf]));
      to_place.push_back(leaf);
    }

    alloc_sequence seq;
    seq.steps.reserve(nodes.size() + static_cast<std::size_t>(n_copies()));
    std::map<std::pair<const tensor*, int>, tensor*> staged_read;  // (node, src slot) -> staging tensor
    for (const split& s : splits_) {
      const int m = index_of(memory_of_backend(s.backend));
      for (const copy_step& c : s.copies) {
        if (!where.count(c.dst)) to_place.push_back(c.dst);
        where[c.dst] = m;
        alloc_step st;
        st.out = c.dst;
        st.reads[0] = const_cast<tensor*>(c.src);  // read only; the planner counts, never writes
        st.copy = true;
        seq.steps.push_back(st);
      }
      for (const swap_step& w : s.swaps) staged_read[{w.node, w.slot}] = w.replacement;  // staging only so far
      for (int k = s.first; k < s.last; ++k) {
        tensor* n = nodes[static_cast<std::size_t>(k)];
        alloc_step st;
        st.out = n;
        for (int j = 0; j < max_src; ++j) {
          auto it = staged_read.find({n, j});
          st.reads[static_cast<std::size_t>(j)] = it != staged_read.end() ? it->second : n->src[j];
        }
        st.inplace = inplace_safe(n);
        seq.steps.push_back(st);
      }
    }
    seq.inputs = unplaced_leafs_;
    if (!nodes.empty()) seq.keep.push_back(nodes.back());
    for (tensor* t : g.leafs())
      if (t->flags & (flag_input | flag_output)) seq.keep.push_back(t);
    for (tensor* n : nodes)
      if (n->flags & (flag_input | flag_output)) seq.keep.push_back(n);

    memory_layout layout;
    auto memory = [&](const tensor* t) {
      auto it = where.find(t);
      if (it == where.end())
        throw error("gk: sched: the planner asked for the memory of " + describe(t) +
                    ", which the scheduler does not place (a bug in the scheduler's steps)");
      return it->second;
    };
    layout.memory_of = memory;
    layout.size_of = [&](const tensor* t) { return mems[static_cast<std::size_t>(memory(t))]->alloc_size(t); };
    for (buffer_type* bt : mems) layout.alignment.push_back(bt->alignment());
    plan_ = plan_steps(seq, alloc_opt_, layout, nullptr);

    // one buffer per memory, the planned peak; an empty tensor (no slot) goes at its start
    std::vector<backend_buffer*> bufs(mems.size(), nullptr);
    auto buffer = [&](std::size_t m) {
      if (!bufs[m]) {
        const std::size_t bytes = m < plan_.peak.size() ? plan_.peak[m] : 0;
        buffers_.push_back(mems[m]->alloc_buffer(bytes));
        bufs[m] = buffers_.back().get();
        uses_.push_back({mems[m], bytes, m < plan_.separate.size() ? plan_.separate[m] : 0,
                         m < plan_.live_peak.size() ? plan_.live_peak[m] : 0});
      }
      return bufs[m];
    };
    for (std::size_t m = 0; m < mems.size(); ++m)
      if (m < plan_.peak.size() && plan_.peak[m]) buffer(m);
    for (tensor* t : to_place) {
      auto s = plan_.slots.find(t);
      if (s != plan_.slots.end()) {
        buffer(static_cast<std::size_t>(s->second.memory))->init_tensor(t, s->second.offset);
      } else if (t->is_empty()) {
        buffer(static_cast<std::size_t>(where.at(t)))->init_tensor(t, 0);
      } else {
        throw error("gk: sched: the planner gave no storage to " + describe(t));
      }
      if (!is_header(t)) placed_.push_back(t);
    }
  }

  // Ops that only re-describe their source's bytes and write none.
  static bool is_pure_view(op o) noexcept {
    return o == op::view || o == op::reshape || o == op::permute || o == op::transpose || o == op::none;
  }

  void make_staging_header(const tensor* src, tensor* h, buffer_type& target) {
    *h = tensor{};
    h->type = src->type;
    for (int i = 0; i < max_dims; ++i) {
      h->ne[i] = src->ne[i];
      h->nb[i] = src->nb[i];
    }
    h->op = op::none;
    h->set_name(std::string(src->get_name()).substr(0, 40) + "#" + std::string(target.name()));
  }

  bool is_header(const tensor* t) const { return staging_.count(t) != 0; }

  void point_view(tensor* t) {
    if (!t->view_src || t->data) return;
    if (!t->view_src->data) throw error("gk: sched: the view " + describe(t) + " has a base without storage");
    t->data = static_cast<char*>(t->view_src->data) + t->view_offs;
    t->buffer = t->view_src->buffer;
    placed_.push_back(t);
  }

  void release_placements() {
    for (tensor* t : placed_) {
      t->data = nullptr;
      t->buffer = nullptr;
    }
    placed_.clear();
  }

  void drop_plan() {
    splits_.clear();
    headers_.clear();
    buffers_.clear();
    index_.clear();
    leaf_backend_.clear();
    unplaced_leafs_.clear();
    staging_.clear();
    assigned_ = {};
    plan_ = {};
    uses_.clear();
    moved_ = 0;
    planned_ = nullptr;
    planned_nodes_ = -1;
  }

  std::vector<backend*> backends_;
  place_fn place_;  // empty: plan lifetimes with alloc_opt_
  alloc_options alloc_opt_;
  std::unordered_map<const tensor*, int> user_pins_;

  const graph* planned_ = nullptr;
  int planned_nodes_ = -1;
  bool stale_ = false;
  sched_steps::node_index index_;
  sched_steps::assignment assigned_;
  int moved_ = 0;
  std::unordered_map<const tensor*, int> leaf_backend_;
  std::vector<tensor*> unplaced_leafs_;  // inputs without storage, in first-read order
  std::unordered_set<const tensor*> staging_;
  std::vector<split> splits_;
  std::deque<tensor> headers_;  // staging tensors and proxies; a deque keeps their addresses
  std::map<buffer_type*, std::vector<tensor*>> to_place_;
  std::vector<std::unique_ptr<backend_buffer>> buffers_;
  std::vector<tensor*> placed_;  // caller's tensors given storage here
  alloc_plan plan_;
  std::vector<memory_use> uses_;
  int copies_last_ = 0;
};

}  // namespace gk
