// SPDX-License-Identifier: MIT
// gk::graph_allocator: storage for every node of a graph out of one buffer per memory.
//
// A graph is built in a no_alloc context (data == nullptr everywhere), then planned in one
// forward pass over the nodes, as the compute pass will run them:
//   - every tensor that owns storage (not a view) gets a slot from its memory's free list
//     when its node comes up; a leaf without data is an input and gets a slot that is
//     never released; a tensor that already has data (weights, caches) is left alone;
//   - a tensor's storage is released right after the last node that reads it has been
//     placed, so a consumer never gets its own source's bytes (unless in place, below).
//     Reads are counted on the storage owner: a read of a view is a read of its base
//     (view_src), so a base stays alive while any view of it is still to be read;
//   - views get no slot: data = base data + view_offs once the base is placed;
//   - graph outputs keep their storage to the end: the last node, every tensor flagged
//     flag_output or flag_input, and every node no other node reads (the caller built it,
//     so the caller may read it). What they alias is kept too.
//   - in place: a node of an op in inplace_safe() whose first source is a planned,
//     unpinned, non-view node read for the last time by this node (and through no other
//     source of it), with the same type, shape and packed strides, takes that source's
//     slot instead of a new one.
// The free list is best-fit over blocks sorted by offset, coalescing neighbours on release,
// every size rounded up to 64 bytes (context::data_align: a cache line, and the widest SIMD
// row load). Its high-water mark is the plan's peak; allocate() makes one buffer that size.
// On the 12-layer llama-shaped graph of tests/alloc (d=256, 9 tokens) the peak is 1/40 of
// one allocation per tensor, and equals the most bytes live at once (no fragmentation).
// "Already has data" means data outside this allocator's buffer: to re-plan a graph that
// another allocator placed, call that one's forget(g) first.
//
// Memories: plan() takes memory_of(tensor) -> index (default: everything in memory 0, the
// host), keeps one free list per index and records one peak per index; place() sets data
// from one base pointer per memory, so a scheduler can hand in device buffers. allocate()
// owns host memory only and says so if a plan needs another.
//
// Steps: plan_steps plans any execution order given as steps, each writing one tensor and
// reading some; plan_graph is a graph's nodes as steps. The scheduler (sched.hpp) hands in
// its own order, where a staging copy between splits is a step that reads the source and
// writes the staging tensor, with one memory per buffer type and that memory's alignment
// and alloc_size.
//
// Debug switches, read once from the environment at first use, off unless set to 1:
//   GK_ALLOC_NO_REUSE=1  every tensor keeps its own storage: no release, no in place
//                        (the plan's peak then equals the sum of the slots).
//   GK_NODE_HASH=1       gk::debug::maybe_print_node_hashes(g) prints one line per node with
//                        a 64-bit hash of its output bytes (diff two runs' logs to find the
//                        first node that diverges). It implies GK_ALLOC_NO_REUSE, so every
//                        node's bytes are still its own output when the hashes are taken.
//                        Hook: call it right after cpu::compute(g) / runner::compute(g).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "gk/context.hpp"
#include "gk/core/error.hpp"
#include "gk/graph.hpp"
#include "gk/tensor.hpp"

namespace gk {

// ---- the environment switches ----

namespace debug {

struct env_switches {
  bool alloc_no_reuse = false;
  bool node_hash = false;
};

inline bool env_flag(const char* name) noexcept {
  const char* v = std::getenv(name);
  return v && v[0] == '1' && v[1] == 0;
}

// Read once (a function-local static: the first call reads, later changes to the
// environment are not seen), so one run plans every graph the same way.
inline const env_switches& env() noexcept {
  static const env_switches e{env_flag("GK_ALLOC_NO_REUSE"), env_flag("GK_NODE_HASH")};
  return e;
}

}  // namespace debug

// ---- the free list of one memory ----

class free_list {
 public:
  explicit free_list(std::size_t alignment = context::data_align) : align_(alignment) {
    if (alignment == 0 || (alignment & (alignment - 1)))
      throw error("gk: free_list: alignment " + std::to_string(alignment) + " is not a power of two");
  }

  std::size_t aligned(std::size_t bytes) const noexcept { return (bytes + align_ - 1) / align_ * align_; }

  // Offset of a block of at least `bytes`: the smallest free block that fits (the lowest
  // such on a tie), else the end of the memory in use, which grows the high-water mark.
  std::size_t allocate(std::size_t bytes) {
    const std::size_t need = aligned(bytes);
    std::size_t best = blocks_.size();
    for (std::size_t i = 0; i < blocks_.size(); ++i)
      if (blocks_[i].size >= need && (best == blocks_.size() || blocks_[i].size < blocks_[best].size)) best = i;
    std::size_t off;
    if (best < blocks_.size()) {
      off = blocks_[best].offset;
      blocks_[best].offset += need;
      blocks_[best].size -= need;
      if (blocks_[best].size == 0) blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(best));
    } else {
      off = end_;
      end_ += need;
      peak_ = std::max(peak_, end_);
    }
    in_use_ += need;
    live_peak_ = std::max(live_peak_, in_use_);
    return off;
  }

  // Returns [offset, offset + bytes) to the list, merged with free neighbours; a free block
  // that reaches the end of the memory in use shrinks it instead.
  void release(std::size_t offset, std::size_t bytes) {
    const std::size_t size = aligned(bytes);
    if (offset % align_ || offset + size > end_)
      throw error("gk: free_list: releasing [" + std::to_string(offset) + ", " + std::to_string(offset + size) +
                  ") outside the " + std::to_string(end_) + " bytes in use");
    auto it = std::lower_bound(blocks_.begin(), blocks_.end(), offset,
                               [](const block& b, std::size_t o) { return b.offset < o; });
    if ((it != blocks_.end() && it->offset < offset + size) ||
        (it != blocks_.begin() && std::prev(it)->offset + std::prev(it)->size > offset))
      throw error("gk: free_list: [" + std::to_string(offset) + ", " + std::to_string(offset + size) +
                  ") released twice (it overlaps a free block)");
    it = blocks_.insert(it, block{offset, size});
    if (std::next(it) != blocks_.end() && it->offset + it->size == std::next(it)->offset) {
      it->size += std::next(it)->size;
      blocks_.erase(std::next(it));
    }
    if (it != blocks_.begin() && std::prev(it)->offset + std::prev(it)->size == it->offset) {
      std::prev(it)->size += it->size;
      it = std::prev(blocks_.erase(it));
    }
    if (it->offset + it->size == end_) {
      end_ = it->offset;
      blocks_.erase(it);
    }
    in_use_ -= size;
  }

  std::size_t peak() const noexcept { return peak_; }
  std::size_t in_use() const noexcept { return in_use_; }
  // The most bytes ever allocated at once: the peak with no fragmentation, a lower bound.
  std::size_t live_peak() const noexcept { return live_peak_; }
  std::size_t n_free_blocks() const noexcept { return blocks_.size(); }

 private:
  struct block {
    std::size_t offset, size;
  };
  std::size_t align_;
  std::vector<block> blocks_;  // free blocks below end_, sorted by offset, never adjacent
  std::size_t end_ = 0;        // one past the highest byte in use
  std::size_t peak_ = 0;
  std::size_t in_use_ = 0;
  std::size_t live_peak_ = 0;
};

// ---- planning ----

// For the test suite only: lifetimes made deliberately wrong, so the suite can show that its
// bit-identity check catches them. Never set outside tests.
enum class planted_fault {
  none,
  release_one_read_early,  // release at the second-to-last read (a one-read tensor before its reader)
  ignore_view_refs,        // a read of a view does not hold its base
  // the two ways a scheduler's staging can be planned wrong (steps with copy set):
  copy_reads_ignored,      // a staging copy's read of its source is not counted: a source read
                           // only by copies is released as soon as it is written, before they run
  staging_one_read_early,  // a staging tensor is released at its second-to-last reader
};

struct alloc_options {
  bool reuse = true;    // release storage after the last read (false: GK_ALLOC_NO_REUSE)
  bool inplace = true;  // let a node take its dying first source's storage
  std::size_t alignment = context::data_align;
  planted_fault fault = planted_fault::none;

  static alloc_options from_env() {
    alloc_options o;
    if (debug::env().alloc_no_reuse || debug::env().node_hash) o.reuse = o.inplace = false;
    return o;
  }
};

// Which memory a tensor's storage lives in (an index into the plan's peaks).
using memory_fn = std::function<int(const tensor*)>;

// The ops whose CPU kernel may write its result over its first source: each destination
// row is computed from the same row of src0 (and rows of other tensors), and every element
// of that row is read before it is written (cpu/elementwise.hpp map_rows and binary,
// cpu/norm.hpp "may alias x", cpu/softmax.hpp "x is not read again"), and threads split by
// destination row, so no thread reads a row another thread writes. glu in its split form
// (two sources) computes act(x) into scratch before it writes y, except geglu and
// geglu_quick, which use the destination row as that scratch: those two are left out, with
// rope (pairs of elements), group_norm (blocks of rows), cumsum, acc, set and every op
// whose result is not shaped like its first source.
constexpr bool inplace_safe(const tensor* n) noexcept {
  switch (n->op) {
    case op::glu: {
      // the split form only (a result shaped like src0); geglu and geglu_quick excluded
      const auto g = static_cast<glu_op>(n->op_params[0]);
      return n->src[1] != nullptr && g != glu_op::geglu && g != glu_op::geglu_quick;
    }
    case op::add: case op::sub: case op::mul: case op::div: case op::add1:
    case op::sqr: case op::sqrt: case op::log: case op::sin: case op::cos: case op::unary:
    case op::scale: case op::clamp: case op::leaky_relu:
    case op::norm: case op::rms_norm: case op::l2_norm:
    case op::soft_max: case op::diag_mask_inf: case op::diag_mask_zero:
      return true;
    default:
      return false;
  }
}

struct alloc_plan {
  struct slot {
    int memory = 0;
    std::size_t offset = 0;
    std::size_t size = 0;  // bytes reserved (aligned)
  };
  std::unordered_map<const tensor*, slot> slots;  // every tensor given storage, inputs included
  std::vector<std::size_t> peak;                  // bytes per memory
  std::vector<std::size_t> live_peak;             // most bytes live at once, per memory (peak's floor)
  std::vector<std::size_t> separate;              // per memory: separate_bytes' share
  std::size_t separate_bytes = 0;                 // every planned tensor's aligned size summed
                                                  // (in-place ones too): one allocation each
  int n_inplace = 0;                              // nodes that took their source's slot
  // Tensors whose storage was released or handed on: after compute their bytes may be a
  // later tensor's (node hashes mark them).
  std::unordered_set<const tensor*> reused;

  std::size_t total_peak() const noexcept {
    std::size_t s = 0;
    for (auto p : peak) s += p;
    return s;
  }
};

// ---- the planner over steps ----
//
// A graph's nodes are one execution order; a scheduler's is another: between the splits it
// runs copies that fill staging tensors in another memory. Both are planned the same way, as
// a sequence of steps, each writing one tensor and reading some (a copy reads its source and
// writes the staging tensor), so a source that is staged lives until its copy has run and a
// staging tensor lives from its first fill to its last reader.

struct alloc_step {
  tensor* out = nullptr;             // written here; given storage the first time a step writes it
  std::array<tensor*, max_src> reads{};  // what it reads; reads[0] is what an in-place op overwrites
  bool inplace = false;              // out may take reads[0]'s slot (inplace_safe(out) for a node)
  bool copy = false;                 // a staging copy reads[0] -> out (only planted faults look)
};

struct alloc_sequence {
  std::vector<alloc_step> steps;
  std::vector<tensor*> inputs;  // given storage before the first step and kept to the end
  std::vector<tensor*> keep;    // kept to the end (their storage owners): outputs
};

// How each memory lays tensors out; empty members take the defaults (every tensor in
// memory 0, opt.alignment, nbytes()).
struct memory_layout {
  memory_fn memory_of;
  std::vector<std::size_t> alignment;                // per memory index
  std::function<std::size_t(const tensor*)> size_of;  // bytes t needs in its memory
};

namespace detail::alloc {

inline tensor* owner(tensor* t) noexcept { return t->view_src ? t->view_src : t; }

struct info {
  int reads = 0;         // pending reads of this storage (its own and its views')
  int direct_reads = 0;  // steps with this tensor itself as a read
  bool pinned = false;   // kept to the end
  bool released = false;
  bool handed_on = false;  // an in-place node took the slot
};

}  // namespace detail::alloc

// Plans storage for the steps of seq in order. A tensor with storage is planned when it owns
// its storage (not a view), is not empty, and has no data, or data for which
// `is_own(data)` says it is the caller's earlier placement; others are left alone.
inline alloc_plan plan_steps(const alloc_sequence& seq, const alloc_options& opt, const memory_layout& layout,
                             const std::function<bool(const void*)>& is_own) {
  using detail::alloc::owner;
  alloc_plan p;
  std::vector<free_list> lists;
  std::unordered_map<const tensor*, detail::alloc::info> inf;

  auto managed = [&](const tensor* t) {
    return !t->view_src && !t->is_empty() && (t->data == nullptr || (is_own && is_own(t->data)));
  };
  auto mem = [&](const tensor* t) {
    const int m = layout.memory_of ? layout.memory_of(t) : 0;
    if (m < 0) throw error("gk: alloc: memory_of(" + describe(t) + ") returned " + std::to_string(m));
    const auto um = static_cast<std::size_t>(m);
    while (lists.size() <= um) {
      const std::size_t k = lists.size();
      lists.emplace_back(k < layout.alignment.size() ? layout.alignment[k] : opt.alignment);
    }
    return m;
  };
  auto bytes = [&](const tensor* t) { return layout.size_of ? layout.size_of(t) : t->nbytes(); };
  auto give_slot = [&](const tensor* t) {
    const int m = mem(t);
    auto& fl = lists[static_cast<std::size_t>(m)];
    const std::size_t size = fl.aligned(bytes(t));
    p.slots[t] = {m, fl.allocate(size), size};
    p.separate_bytes += size;
    if (p.separate.size() <= static_cast<std::size_t>(m)) p.separate.resize(static_cast<std::size_t>(m) + 1);
    p.separate[static_cast<std::size_t>(m)] += size;
  };
  auto release = [&](const tensor* t) {
    auto& i = inf[t];
    auto s = p.slots.find(t);
    if (i.pinned || i.released || i.handed_on || s == p.slots.end()) return;
    i.released = true;
    lists[static_cast<std::size_t>(s->second.memory)].release(s->second.offset, s->second.size);
    p.reused.insert(t);
  };
  // the tensor whose read is counted: the storage owner (the planted fault counts the view)
  auto counted = [&](tensor* s) { return opt.fault == planted_fault::ignore_view_refs ? s : owner(s); };
  auto read_counts = [&](const alloc_step& st) { return !(st.copy && opt.fault == planted_fault::copy_reads_ignored); };

  // 1. reads
  for (const alloc_step& st : seq.steps)
    for (tensor* s : st.reads)
      if (s) {
        ++inf[s].direct_reads;
        if (read_counts(st)) ++inf[counted(s)].reads;
      }
  if (opt.fault == planted_fault::release_one_read_early)
    for (auto& [t, i] : inf) i.reads = std::max(i.reads - 1, 0);
  if (opt.fault == planted_fault::staging_one_read_early) {
    std::unordered_set<const tensor*> staging;
    for (const alloc_step& st : seq.steps)
      if (st.copy && st.out && staging.insert(st.out).second) inf[st.out].reads = std::max(inf[st.out].reads - 1, 0);
  }

  // 2. what stays to the end: what the caller keeps, and what no step reads
  auto pin = [&](tensor* t) { inf[owner(t)].pinned = true; };
  for (tensor* t : seq.keep) pin(t);
  for (const alloc_step& st : seq.steps)
    if (st.out && inf[st.out].direct_reads == 0) pin(st.out);

  // 3. inputs
  for (tensor* t : seq.inputs) {
    if (!managed(t) || p.slots.count(t)) continue;
    give_slot(t);
    inf[t].pinned = true;
  }

  // 4. the forward pass
  auto inplace_donor = [&](const alloc_step& st) -> tensor* {
    tensor* n = st.out;
    if (!opt.inplace || !opt.reuse || !st.inplace) return nullptr;
    tensor* s = st.reads[0];
    if (!s || s->view_src || !managed(s) || !p.slots.count(s)) return nullptr;
    const auto& i = inf[s];
    if (i.pinned || i.released || i.handed_on || i.reads != 1) return nullptr;
    for (int k = 1; k < max_src; ++k)
      if (st.reads[static_cast<std::size_t>(k)] && owner(st.reads[static_cast<std::size_t>(k)]) == s) return nullptr;
    if (s->type != n->type || !s->same_shape(*n) || !s->same_strides(*n) || !n->is_contiguous()) return nullptr;
    if (mem(s) != mem(n) || p.slots[s].size < lists[static_cast<std::size_t>(mem(n))].aligned(bytes(n)))
      return nullptr;
    return s;
  };
  const bool early_fault =
      opt.fault == planted_fault::release_one_read_early || opt.fault == planted_fault::copy_reads_ignored ||
      opt.fault == planted_fault::staging_one_read_early;
  for (const alloc_step& st : seq.steps) {
    tensor* n = st.out;
    if (n && managed(n) && !p.slots.count(n)) {
      if (tensor* d = inplace_donor(st)) {
        p.slots[n] = p.slots[d];
        p.separate_bytes += p.slots[n].size;  // one allocation per tensor would give it its own
        p.separate[static_cast<std::size_t>(p.slots[n].memory)] += p.slots[n].size;
        inf[d].handed_on = true;
        p.reused.insert(d);
        ++p.n_inplace;
      } else {
        give_slot(n);
      }
      if (!opt.reuse) inf[n].pinned = true;
      // the planted faults' tensors left with no counted read: released before any reader runs
      if (early_fault && inf[n].reads == 0) release(n);
    }
    if (!read_counts(st)) continue;
    for (tensor* s : st.reads)
      if (s) {
        tensor* c = counted(s);
        if (--inf[c].reads == 0) release(c);
      }
  }

  p.peak.resize(std::max<std::size_t>(lists.size(), 1));
  p.live_peak.resize(p.peak.size());
  p.separate.resize(p.peak.size());
  for (std::size_t m = 0; m < lists.size(); ++m) {
    p.peak[m] = lists[m].peak();
    p.live_peak[m] = lists[m].live_peak();
  }
  return p;
}

// Plans storage for g, its nodes in order as the compute pass runs them:
//   - inputs: leaves without data, and bases outside the graph that views here alias;
//   - kept to the end: the last node, every tensor flagged flag_input or flag_output, and
//     every node no other node reads.
// `is_own(data)` says a data pointer is the caller's earlier placement (so the tensor is
// planned again) rather than storage someone else gave it.
inline alloc_plan plan_graph(const graph& g, const alloc_options& opt, const memory_fn& memory_of,
                             const std::function<bool(const void*)>& is_own) {
  using detail::alloc::owner;
  alloc_sequence seq;
  const auto nodes = g.nodes();
  seq.steps.reserve(nodes.size());
  for (tensor* n : nodes) {
    alloc_step st;
    st.out = n;
    std::copy(std::begin(n->src), std::end(n->src), st.reads.begin());
    st.inplace = inplace_safe(n);
    seq.steps.push_back(st);
  }
  if (!nodes.empty()) seq.keep.push_back(nodes.back());
  for (tensor* t : g.leafs())
    if (t->flags & (flag_input | flag_output)) seq.keep.push_back(t);
  for (tensor* n : nodes)
    if (n->flags & (flag_input | flag_output)) seq.keep.push_back(n);
  for (tensor* t : g.leafs()) seq.inputs.push_back(owner(t));
  for (tensor* n : nodes)
    if (n->view_src && !g.contains(n->view_src)) seq.inputs.push_back(n->view_src);
  memory_layout layout;
  layout.memory_of = memory_of;
  return plan_steps(seq, opt, layout, is_own);
}

// Sets data for every slot of the plan (base[memory] + offset) and for every view in g
// whose base has data (base data + view_offs).
inline void place(const graph& g, const alloc_plan& p, std::span<void* const> bases) {
  for (auto& [t, s] : p.slots) {
    if (static_cast<std::size_t>(s.memory) >= bases.size() || (!bases[static_cast<std::size_t>(s.memory)] && s.size))
      throw error("gk: alloc: no buffer given for memory " + std::to_string(s.memory) + ", which " + describe(t) +
                  " is planned in");
    const_cast<tensor*>(t)->data = static_cast<char*>(bases[static_cast<std::size_t>(s.memory)]) + s.offset;
  }
  auto view = [](tensor* t) {
    if (t->view_src && t->view_src->data) t->data = static_cast<char*>(t->view_src->data) + t->view_offs;
  };
  for (tensor* t : g.leafs()) view(t);
  for (tensor* t : g.nodes()) view(t);
}

// ---- the allocator: plans, owns one host buffer, places ----

class graph_allocator {
 public:
  explicit graph_allocator(alloc_options opt = alloc_options::from_env(), memory_fn memory_of = {})
      : opt_(opt), memory_of_(std::move(memory_of)) {}

  // Plans g (nothing is written to g). Tensors placed by this allocator before are planned
  // again; others with data are left alone.
  const alloc_plan& plan(const graph& g) {
    plan_ = plan_graph(g, opt_, memory_of_, [this](const void* d) { return owns(d); });
    return plan_;
  }
  // Host bytes g needs (memory 0's peak).
  std::size_t plan_size(const graph& g) { return plan(g).peak[0]; }

  // Plans g, grows the host buffer to the peak if needed, sets every tensor's data.
  const alloc_plan& allocate(const graph& g) {
    plan(g);
    for (std::size_t m = 1; m < plan_.peak.size(); ++m)
      if (plan_.peak[m])
        throw error("gk: graph_allocator: the plan needs " + std::to_string(plan_.peak[m]) + " bytes in memory " +
                    std::to_string(m) + "; this allocator owns host memory (0) only: plan() and place() with "
                    "the other memories' buffers");
    reserve(plan_.peak[0]);
    void* base = buf_.get();
    place(g, plan_, std::span<void* const>(&base, 1));
    return plan_;
  }

  // Sets data back to nullptr for every tensor of g this allocator placed (views of them
  // included), so g can be planned afresh by another allocator. Needed because a tensor
  // with data that is not in this allocator's buffer counts as placed by someone else: a
  // second allocator would otherwise leave g pointing into the first one's buffer.
  void forget(const graph& g) {
    for (auto& [t, s] : plan_.slots) const_cast<tensor*>(t)->data = nullptr;
    auto view = [this](tensor* t) {
      if (t->view_src && plan_.slots.count(t->view_src)) t->data = nullptr;
    };
    for (tensor* t : g.leafs()) view(t);
    for (tensor* t : g.nodes()) view(t);
  }

  const alloc_plan& last_plan() const noexcept { return plan_; }
  std::size_t buffer_size() const noexcept { return size_; }
  void* buffer() const noexcept { return buf_.get(); }
  bool owns(const void* d) const noexcept {
    const auto* c = static_cast<const char*>(d);
    return buf_ && c >= buf_.get() && c < buf_.get() + size_;
  }
  const alloc_options& options() const noexcept { return opt_; }

 private:
  struct aligned_delete {
    std::size_t align;
    void operator()(char* p) const noexcept { ::operator delete(p, std::align_val_t{align}); }
  };

  void reserve(std::size_t bytes) {
    if (bytes <= size_) return;
    const std::size_t align = std::max<std::size_t>(opt_.alignment, alignof(std::max_align_t));
    auto* p = static_cast<char*>(::operator new(bytes, std::align_val_t{align}, std::nothrow));
    if (!p) throw error("gk: graph_allocator: cannot allocate a buffer of " + std::to_string(bytes) + " bytes");
    buf_ = std::unique_ptr<char, aligned_delete>(p, aligned_delete{align});
    size_ = bytes;
  }

  alloc_options opt_;
  memory_fn memory_of_;
  alloc_plan plan_;
  std::unique_ptr<char, aligned_delete> buf_{nullptr, aligned_delete{context::data_align}};
  std::size_t size_ = 0;
};

// ---- node hashes: finding the first node where two runs diverge ----

namespace debug {

// 64-bit hash of bytes: 8-byte words through a multiply-xorshift mix (splitmix64's
// finaliser), the length folded in so a zero tail still counts.
inline std::uint64_t hash_bytes(const void* data, std::size_t n) noexcept {
  auto mix = [](std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = mix(h ^ w) + 0x9e3779b97f4a7c15ull;
  }
  if (i < n) {
    std::uint64_t w = 0;
    std::memcpy(&w, p + i, n - i);
    h = mix(h ^ w ^ 0xff00000000000000ull);
  }
  return mix(h);
}

// One line per node: "#index op name [ne0, ne1, ne2, ne3] hash", plus a note where the
// hash may not be the node's own output: its storage was reused (pass the plan), or a
// later node writes into the same storage in place. Views hash the bytes they span.
inline void print_node_hashes(const graph& g, std::FILE* out, const alloc_plan* plan = nullptr) {
  const auto nodes = g.nodes();
  std::unordered_map<const tensor*, int> last_writer;  // storage -> last node writing into it
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
    const tensor* n = nodes[static_cast<std::size_t>(i)];
    const op o = n->op;
    if (o != op::view && o != op::reshape && o != op::permute && o != op::transpose && o != op::none)
      last_writer[n->view_src ? n->view_src : n] = i;
  }
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
    const tensor* n = nodes[static_cast<std::size_t>(i)];
    std::string label(name(n->op));
    if (n->op == op::unary) label.append("/").append(name(static_cast<unary_op>(n->op_params[0])));
    if (n->op == op::glu) label.append("/").append(name(static_cast<glu_op>(n->op_params[0])));
    const std::uint64_t h = n->data ? hash_bytes(n->data, n->nbytes()) : 0;
    std::string note;
    const tensor* base = n->view_src ? n->view_src : n;
    if (plan && plan->reused.count(base)) note = " (storage reused later: run with GK_ALLOC_NO_REUSE=1)";
    auto w = last_writer.find(base);
    if (w != last_writer.end() && w->second > i) note += " (overwritten in place by #" + std::to_string(w->second) + ")";
    std::fprintf(out, "#%d %s '%s' %s %016llx%s\n", i, label.c_str(), std::string(n->get_name()).c_str(),
                 shape_string(n->ne).c_str(), static_cast<unsigned long long>(h), note.c_str());
  }
  std::fflush(out);
}

// The hook: prints to stderr when GK_NODE_HASH=1, else does nothing. Call after compute.
inline void maybe_print_node_hashes(const graph& g, const alloc_plan* plan = nullptr) {
  if (env().node_hash) print_node_hashes(g, stderr, plan);
}

}  // namespace debug

}  // namespace gk
