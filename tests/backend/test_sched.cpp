// SPDX-License-Identifier: MIT
// The scheduler, driven by backend doubles (doubles.hpp) so every path runs without a GPU:
//  - one backend: one split, and the same bits as cpu::compute on a transformer block;
//  - a CPU wrapper that refuses one op: the exact splits a small graph is cut into;
//  - a "device" whose memory is host RAM reporting is_host false: every crossing is
//    staged (the device checks it never touches host memory), the number of copies is
//    the one worked out by hand, and the results are the CPU's bits. Planted control: a
//    device that drops one staging copy must fail the same comparison;
//  - smoothing moves a lone node and never a pinned one. Planted control: the same
//    smoothing with the pins ignored must fail the pin check;
//  - placement by lifetimes (step 5: the graph allocator's planner over the execution
//    order, staging copies included, one free list and one buffer per memory): the CPU's
//    bits on every node that keeps its bytes (the output always), each memory's peak below
//    one allocation per tensor (printed). Planted controls: a staged source released
//    before its copy runs, and a staging tensor released one reader early, must fail the
//    same bit check. On one backend, a 12-layer graph's peak is graph_allocator's.
#include <catch2/catch.hpp>

#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../common/liveness.hpp"
#include "../common/transformer_block.hpp"
#include "doubles.hpp"
#include "gk/gk.hpp"
#include "gk/sched.hpp"

using namespace gk;
using gk_test::device_buffer_type;
using gk_test::test_backend;

namespace {

using gk_test::make_block;

// A block whose weights and inputs have host data; with alloc_nodes false its nodes have
// none, so the scheduler places them.
struct block_case {
  context ctx{context_params{64u << 20}};
  gk_test::block_tensors<tensor*> w{};
  graph g;
  block_case(type wt, bool flash, bool alloc_nodes) {
    std::mt19937 rng(42);
    gk_test::block_dims bd;
    bd.tokens = 9;
    bd.n_past = 4;
    w = make_block(ctx, bd, wt, rng);
    ctx.set_no_alloc(!alloc_nodes);
    gk_test::gk_lib l{ctx};
    g.build_forward_expand(gk_test::build_block(l, bd, w, flash));
  }
};

// The definition: the same graph, everything in context memory, on cpu::compute.
std::vector<std::vector<unsigned char>> cpu_reference(type wt, bool flash) {
  block_case ref(wt, flash, true);
  cpu::compute(ref.g, 2);
  return gk_test::snapshot(ref.g);
}

// NaN-fill everything the scheduler placed, so a node it failed to compute shows.
void poison(const graph& g) {
  for (tensor* n : g.nodes())
    if (n->buffer && !n->view_src) n->buffer->memset_tensor(n, 0xff, 0, n->nbytes());
}

struct small_graph {
  context ctx{context_params{4u << 20}};
  tensor *x, *w1, *w2, *w3, *h, *s, *y, *z, *u, *out;
  graph g;
  // x [32, 4] input; h = w1 x; s = soft_max(h); y = w2 s; z = y + x[0:8]; u = w3 x; out = z + u
  explicit small_graph(bool alloc_nodes) {
    std::mt19937 rng(5);
    x = ctx.new_tensor_2d(type::f32, 32, 4);
    w1 = ctx.new_tensor_2d(type::f32, 32, 16);
    w2 = ctx.new_tensor_2d(type::f16, 16, 8);
    w3 = ctx.new_tensor_2d(type::q8_0, 32, 8);
    for (tensor* t : {x, w1, w2, w3}) gk_test::fill_random(t, rng);
    ctx.set_no_alloc(!alloc_nodes);
    // (built so: node order h s y x8 z u out)
    h = mul_mat(ctx, w1, x);
    s = soft_max(ctx, h);
    y = mul_mat(ctx, w2, s);
    tensor* x8 = view_2d(ctx, x, 8, 4, x->nb[1], 0);
    z = add(ctx, y, x8);
    u = mul_mat(ctx, w3, x);
    out = add(ctx, z, u);
    g.build_forward_expand(out);
  }
};

std::vector<std::vector<unsigned char>> small_reference() {
  small_graph ref(true);
  cpu::compute(ref.g, 2);
  return gk_test::snapshot(ref.g);
}

// The sched's bits against the definition on every node that keeps its own bytes (under
// planned lifetimes a released node's bytes are a later tensor's); the last node is always
// kept, so it is always compared.
std::int64_t differing(const std::vector<std::vector<unsigned char>>& want, const graph& g, const sched& sc) {
  int compared = 0;
  const auto d = gk_test::differing_kept_nodes(want, gk_test::snapshot(g), g, sc.storage_plan(), &compared);
  const tensor* last = g.node(g.n_nodes() - 1);
  CHECK(sc.storage_plan().reused.count(last->view_src ? last->view_src : last) == 0);
  CHECK(compared >= 1);
  return d;
}

// The two placements: lifetimes planned (reuse), and place_in_one_buffer (no reuse).
enum class placement { planned, one_buffer };
std::unique_ptr<sched> make_sched(std::vector<backend*> bs, placement pl, alloc_options o = {}) {
  if (pl == placement::one_buffer) return std::make_unique<sched>(std::move(bs), place_in_one_buffer);
  return std::make_unique<sched>(std::move(bs), o);
}
const char* label(placement pl) { return pl == placement::planned ? "lifetimes planned" : "place_in_one_buffer"; }

// Each memory's planned peak strictly below one allocation per tensor.
void check_peaks_below_separate(const sched& sc) {
  REQUIRE(!sc.memory_uses().empty());
  for (const auto& u : sc.memory_uses()) {
    INFO(u.memory->name() << " memory: peak " << u.peak << ", no reuse " << u.separate);
    CHECK(u.peak < u.separate);
    CHECK(u.live_peak <= u.peak);
  }
}

struct split_shape {
  std::string backend;
  int first, last, copies;
  bool operator==(const split_shape&) const = default;
};
std::ostream& operator<<(std::ostream& o, const split_shape& s) {
  return o << "{" << s.backend << " [" << s.first << ", " << s.last << ") " << s.copies << " copies}";
}
std::vector<split_shape> shapes(const sched& sc) {
  std::vector<split_shape> r;
  for (const auto& s : sc.splits())
    r.push_back({std::string(sc.backends()[static_cast<std::size_t>(s.backend)]->name()), s.first, s.last,
                 static_cast<int>(s.copies.size())});
  return r;
}

int node_at(const graph& g, const tensor* t) {
  for (int i = 0; i < g.n_nodes(); ++i)
    if (g.node(i) == t) return i;
  return -1;
}

}  // namespace

TEST_CASE("one backend: one split, the same bits as cpu::compute on a transformer block", "[sched]") {
  for (type wt : {type::q4_K, type::f16}) {
    for (bool flash : {true, false}) {
      INFO(name(wt) << (flash ? " flash attention" : " soft_max attention"));
      const auto want = cpu_reference(wt, flash);
      for (placement pl : {placement::planned, placement::one_buffer}) {
        INFO(label(pl));
        block_case c(wt, flash, false);
        cpu_backend cpu(2);
        auto scp = make_sched({&cpu}, pl);
        sched& sc = *scp;
        sc.alloc_graph(c.g);
        poison(c.g);
        sc.compute(c.g);
        CHECK(sc.splits().size() == 1);
        CHECK(sc.n_copies() == 0);
        CHECK(sc.buffers().size() == 1);  // one memory, one buffer
        CHECK(differing(want, c.g, sc) == 0);
        if (pl == placement::planned) check_peaks_below_separate(sc);
        else CHECK(gk_test::differing_nodes(want, gk_test::snapshot(c.g)) == 0);  // no reuse: every node
        poison(c.g);
        sc.compute(c.g);  // the plan is reused; the bits stay
        CHECK(differing(want, c.g, sc) == 0);
      }
    }
  }
  // a graph whose nodes already have context memory: all pinned there (rule 1), one split
  block_case c(type::q8_0, true, true);
  const auto want = cpu_reference(type::q8_0, true);
  cpu_backend cpu(2);
  sched sc({&cpu});
  sc.compute(c.g);
  CHECK(sc.splits().size() == 1);
  CHECK(sc.buffers().size() == 0);  // nothing to place
  CHECK(sc.pinned(c.g.node(0)) == pin::memory);
  CHECK(gk_test::differing_nodes(want, gk_test::snapshot(c.g)) == 0);  // placed by the context: all kept
}

TEST_CASE("a backend that refuses one op: the exact splits, no copies, the CPU's bits", "[sched]") {
  const auto want = small_reference();
  small_graph c(false);
  test_backend wrap("WRAP", host_buffer_type(), op::soft_max);
  cpu_backend cpu(2);
  sched sc({&wrap, &cpu});
  sc.alloc_graph(c.g);
  // node order: h s (view x8) y z u out. h: w1 is in host memory, WRAP addresses it (rule 2).
  // s: WRAP refuses soft_max, so rule 4 gives the CPU. y: rule 2 again. x8 is a view of
  // the input (rule 1, WRAP). Both address host memory: nothing to stage.
  REQUIRE(c.g.n_nodes() == 7);
  REQUIRE(node_at(c.g, c.s) == 1);
  CHECK(shapes(sc) == std::vector<split_shape>{{"WRAP", 0, 1, 0}, {"CPU", 1, 2, 0}, {"WRAP", 2, 7, 0}});
  CHECK(sc.backend_of(c.s) == &cpu);
  CHECK(sc.n_moved_by_smoothing() == 0);  // s is lone, but WRAP cannot take it
  poison(c.g);
  sc.compute(c.g);
  CHECK(wrap.graphs == 2);
  CHECK(differing(want, c.g, sc) == 0);

  // a pin set after planning re-plans the same graph from its unplaced state: y joins s
  sc.set_backend(c.y, &cpu);
  poison(c.g);
  sc.compute(c.g);
  CHECK(shapes(sc) == std::vector<split_shape>{{"WRAP", 0, 1, 0}, {"CPU", 1, 3, 0}, {"WRAP", 3, 7, 0}});
  CHECK(sc.pinned(c.z) == pin::none);  // its old placement was given back, not taken for rule 1
  CHECK(differing(want, c.g, sc) == 0);
}

TEST_CASE("device memory: every crossing is staged, counted, and gives the CPU's bits", "[sched][staging]") {
  const auto want = small_reference();
  for (placement pl : {placement::planned, placement::one_buffer})
  for (bool drop_one : {false, true}) {
    INFO(label(pl) << (drop_one ? ", planted control: the device drops its first staging write" : ", faithful device"));
    small_graph c(false);
    device_buffer_type dev_mem;
    auto weights = gk_test::move_to(dev_mem, {c.w1, c.w2, c.w3});
    dev_mem.sets = 0;
    dev_mem.drop_set = drop_one ? 0 : -1;
    test_backend dev("DEV", dev_mem, op::soft_max);
    test_backend host("HOSTCPU", host_buffer_type());  // the CPU, checking it reads host memory only
    auto scp = make_sched({&dev, &host}, pl);
    sched& sc = *scp;
    sc.alloc_graph(c.g);
    // node order h s y x8 z u out. h: w1 on DEV (rule 2). s: DEV refuses soft_max (rule 4,
    // HOSTCPU). y: w2 on DEV (rule 2). x8: a view of the host input (rule 1, HOSTCPU).
    // z: x8 in host memory (rule 2, HOSTCPU). u: w3 on DEV (rule 2). out: z's (rule 3).
    // y and u are lone, but rule 2 put them by their weights: smoothing leaves them.
    // Copies: split 0 stages x (set 1); 1 stages h (get 1); 2 stages s (set 2);
    // 3 stages y (get 2); 4 reuses x, staged already and unchanged; 5 stages u (get 3).
    CHECK(shapes(sc) == std::vector<split_shape>{{"DEV", 0, 1, 1}, {"HOSTCPU", 1, 2, 1}, {"DEV", 2, 3, 1},
                                                 {"HOSTCPU", 3, 5, 1}, {"DEV", 5, 6, 0}, {"HOSTCPU", 6, 7, 1}});
    CHECK(sc.n_moved_by_smoothing() == 0);
    CHECK(sc.backend_of(c.z) == &host);
    poison(c.g);
    sc.compute(c.g);
    CHECK(sc.n_copies_last() == 5);
    CHECK(dev_mem.sets == 2);
    CHECK(dev_mem.gets == 3);
    CHECK(dev.graphs == 3);
    CHECK(host.graphs == 3);
    CHECK(sc.buffers().size() == 2);  // one per memory
    // snapshot reads DEV nodes through get_tensor
    if (drop_one) {
      CHECK(differing(want, c.g, sc) > 0);
    } else {
      CHECK(differing(want, c.g, sc) == 0);
      if (pl == placement::planned) {
        gk_test::print_memory_uses("small graph over DEV and host", sc);
        check_peaks_below_separate(sc);
      }
    }
  }
}

TEST_CASE("a transformer block over device memory: the CPU's bits, every copy one transfer", "[sched][staging]") {
  for (bool flash : {true, false}) {
    for (op refused : {op::count, op::glu, op::rms_norm}) {  // count: refuses nothing
      for (bool drop_one : {false, true}) {
        INFO((flash ? "flash" : "soft_max") << " attention, DEV refuses "
                                            << (refused == op::count ? std::string_view("nothing") : name(refused))
                                            << (drop_one ? ", planted control: one staging write dropped" : ""));
        const auto want = cpu_reference(type::q4_K, flash);
        block_case c(type::q4_K, flash, false);
        device_buffer_type dev_mem;
        auto weights = gk_test::move_to(dev_mem, {c.w.attn_norm, c.w.wq, c.w.wk, c.w.wv, c.w.wo, c.w.ffn_norm, c.w.w_gate, c.w.w_up, c.w.w_down});
        dev_mem.sets = dev_mem.gets = 0;
        dev_mem.drop_set = drop_one ? 0 : -1;
        test_backend dev("DEV", dev_mem, refused);
        test_backend host("HOSTCPU", host_buffer_type());
        sched sc({&dev, &host}, alloc_options{});
        sc.alloc_graph(c.g);
        poison(c.g);
        sc.compute(c.g);
        const int transfers = dev_mem.sets + dev_mem.gets;
        UNSCOPED_INFO("splits " << sc.splits().size() << ", copies " << sc.n_copies() << " (" << dev_mem.sets
                                << " to DEV, " << dev_mem.gets << " from DEV)");
        CHECK(sc.splits().size() >= 3);  // host inputs, DEV weights: DEV -> HOSTCPU -> DEV at least
        CHECK(sc.n_copies_last() == sc.n_copies());
        CHECK(transfers == sc.n_copies());  // DEV<->host only: each staging copy is one transfer
        CHECK(dev.graphs >= 2);
        CHECK(sc.buffers().size() == 2);  // one per memory
        if (drop_one) {
          CHECK(differing(want, c.g, sc) > 0);
        } else {
          CHECK(differing(want, c.g, sc) == 0);
          gk_test::print_memory_uses(std::string("block over DEV and host, ") + (flash ? "flash" : "soft_max") +
                                         ", DEV refuses " +
                                         std::string(refused == op::count ? std::string_view("nothing") : name(refused)),
                                     sc);
          check_peaks_below_separate(sc);
        }
      }
    }
  }
}

namespace {

// Node order p n0 n1 n2: p = 2 hx on the host (rule 2: hx is in host memory), n0 = W1 x on
// DEV (rule 2: W1), n1 between them on the host, n2 = W2 n1 on DEV (rule 2: W2).
struct sandwich {
  context ctx{context_params{4u << 20}};
  device_buffer_type dev_mem;
  std::unique_ptr<backend_buffer> weights;
  tensor *x, *hx, *cache, *idx, *w1, *w2, *p, *n0, *n1, *n2;
  graph g;
  // n1: "add(p, n0)" inherits p's backend (rule 3, unpinned); "set_rows" writes the host
  // cache (rule 1, pinned)
  explicit sandwich(bool set_rows_in_middle) {
    std::mt19937 rng(9);
    x = ctx.new_tensor_2d(type::f32, 16, 4);
    hx = ctx.new_tensor_2d(type::f32, 16, 4);
    cache = ctx.new_tensor_2d(type::f32, 16, 6);
    idx = ctx.new_tensor_1d(type::i64, 4);
    for (int i = 0; i < 4; ++i) static_cast<std::int64_t*>(idx->data)[i] = 5 - i;
    w1 = ctx.new_tensor_2d(type::f32, 16, 16);
    w2 = ctx.new_tensor_2d(type::f32, 16, 8);
    for (tensor* t : {x, hx, cache, w1, w2}) gk_test::fill_random(t, rng);
    weights = gk_test::move_to(dev_mem, {w1, w2});
    ctx.set_no_alloc(true);
    p = scale(ctx, hx, 2.0f);
    n0 = mul_mat(ctx, w1, x);
    n1 = set_rows_in_middle ? set_rows(ctx, cache, n0, idx) : add(ctx, p, n0);
    n2 = mul_mat(ctx, w2, n1);
    g.build_forward_expand(p);
    g.build_forward_expand(n2);
  }
};

// How many pinned nodes a smoothing pass moved.
int pinned_nodes_moved(const sched_steps::assignment& before, const sched_steps::assignment& after) {
  int moved = 0;
  for (std::size_t k = 0; k < before.backend.size(); ++k)
    moved += before.pinned[k] != pin::none && before.backend[k] != after.backend[k];
  return moved;
}

}  // namespace

TEST_CASE("smoothing moves a lone node, never a pinned one", "[sched][smoothing]") {
  SECTION("unpinned: the lone host node moves to DEV, one split") {
    sandwich c(false);
    test_backend dev("DEV", c.dev_mem), host("HOSTCPU", host_buffer_type());
    sched sc({&dev, &host});
    sc.alloc_graph(c.g);
    CHECK(sc.n_moved_by_smoothing() == 1);
    CHECK(sc.backend_of(c.n1) == &dev);
    // DEV stages x and p (both host) once; without the move it would be 3 copies and 4 splits
    CHECK(shapes(sc) == std::vector<split_shape>{{"HOSTCPU", 0, 1, 0}, {"DEV", 1, 4, 2}});
    sc.compute(c.g);
  }
  SECTION("pinned by set_backend: stays, three splits") {
    sandwich c(false);
    test_backend dev("DEV", c.dev_mem), host("HOSTCPU", host_buffer_type());
    sched sc({&dev, &host});
    sc.set_backend(c.n1, &host);
    sc.alloc_graph(c.g);
    CHECK(sc.pinned(c.n1) == pin::user);
    CHECK(sc.backend_of(c.n1) == &host);
    CHECK(shapes(sc) == std::vector<split_shape>{
                            {"HOSTCPU", 0, 1, 0}, {"DEV", 1, 2, 1}, {"HOSTCPU", 2, 3, 1}, {"DEV", 3, 4, 1}});
    sc.compute(c.g);
  }
  SECTION("pinned by its memory (set_rows into a host cache): stays") {
    sandwich c(true);
    test_backend dev("DEV", c.dev_mem), host("HOSTCPU", host_buffer_type());
    sched sc({&dev, &host});
    sc.alloc_graph(c.g);
    CHECK(sc.pinned(c.n1) == pin::memory);
    CHECK(sc.backend_of(c.n1) == &host);
    CHECK(sc.splits().size() == 4);
    sc.compute(c.g);
  }
  SECTION("the pin check, on the real smoothing and on a planted one that ignores pins") {
    for (bool set_rows_in_middle : {false, true}) {
      sandwich c(set_rows_in_middle);
      test_backend dev("DEV", c.dev_mem), host("HOSTCPU", host_buffer_type());
      std::vector<backend*> bs{&dev, &host};
      sched_steps::node_index idx;
      for (int k = 0; k < c.g.n_nodes(); ++k) idx[c.g.node(k)] = k;
      std::unordered_map<const tensor*, int> user;
      if (!set_rows_in_middle) user[c.n1] = 1;
      const auto before = sched_steps::assign(c.g.nodes(), idx, bs, user);
      REQUIRE(node_at(c.g, c.n1) == 2);
      REQUIRE(before.pinned[2] != pin::none);
      REQUIRE(before.backend[2] == 1);

      auto real = before;
      sched_steps::smooth(c.g.nodes(), real, idx, bs);
      CHECK(pinned_nodes_moved(before, real) == 0);

      auto ignoring = before;  // planted control: the same pass with the pins dropped
      std::fill(ignoring.pinned.begin(), ignoring.pinned.end(), pin::none);
      sched_steps::smooth(c.g.nodes(), ignoring, idx, bs);
      CHECK(pinned_nodes_moved(before, ignoring) == 1);
    }
  }
}

TEST_CASE("the scheduler says what is wrong", "[sched][errors]") {
  cpu_backend cpu(1);
  device_buffer_type dev_mem;
  test_backend dev("DEV", dev_mem);
  CHECK_THROWS_WITH(sched(std::vector<backend*>{}), Catch::Contains("at least one backend"));
  CHECK_THROWS_WITH(sched({&cpu, &dev}), Catch::Contains("must address host memory"));
  sched sc({&dev, &cpu});
  test_backend other("OTHER", host_buffer_type());
  sandwich c(true);
  CHECK_THROWS_WITH(sc.set_backend(c.n1, &other), Catch::Contains("not one of the scheduler's"));
  // the set_rows result is a view of the host cache: DEV cannot write it
  sc.set_backend(c.n1, &dev);
  CHECK_THROWS_WITH(sc.alloc_graph(c.g), Catch::Contains("cannot address the CPU memory") && Catch::Contains("set_rows"));
}

namespace {

int liveness_conflicts(const graph& g, const sched& sc);

// The block over DEV and host memory, weights on DEV, planned with `o`; returns how many kept
// nodes differ from the CPU's bits.
std::int64_t block_over_dev(bool flash, op refused, alloc_options o, const std::vector<std::vector<unsigned char>>& want,
                            int* conflicts = nullptr) {
  block_case c(type::q4_K, flash, false);
  device_buffer_type dev_mem;
  auto weights = gk_test::move_to(dev_mem, {c.w.attn_norm, c.w.wq, c.w.wk, c.w.wv, c.w.wo, c.w.ffn_norm, c.w.w_gate,
                                            c.w.w_up, c.w.w_down});
  test_backend dev("DEV", dev_mem, refused);
  test_backend host("HOSTCPU", host_buffer_type());
  sched sc({&dev, &host}, o);
  sc.alloc_graph(c.g);
  if (conflicts) *conflicts = liveness_conflicts(c.g, sc);
  poison(c.g);
  sc.compute(c.g);
  return differing(want, c.g, sc);
}

std::int64_t small_over_dev(alloc_options o, const std::vector<std::vector<unsigned char>>& want,
                            int* conflicts = nullptr) {
  small_graph c(false);
  device_buffer_type dev_mem;
  auto weights = gk_test::move_to(dev_mem, {c.w1, c.w2, c.w3});
  test_backend dev("DEV", dev_mem, op::soft_max);
  test_backend host("HOSTCPU", host_buffer_type());
  sched sc({&dev, &host}, o);
  sc.alloc_graph(c.g);
  if (conflicts) *conflicts = liveness_conflicts(c.g, sc);
  poison(c.g);
  sc.compute(c.g);
  return differing(want, c.g, sc);
}

// Independent of the planner: the scheduler's execution order rebuilt from its splits (each
// split's copies, then its nodes reading through the swaps: a staging tensor where swapped
// in, else the source itself, proxies included), every slot's lifetime [first write, last
// read of its storage] (inputs from the start; the last node and what nothing reads to the
// end), then any two slots of one memory sharing bytes must not be alive at once, except a
// node taking its first source's slot in place at that source's last read.
// Returns the number of conflicting pairs.
int liveness_conflicts(const graph& g, const sched& sc) {
  const alloc_plan& p = sc.storage_plan();
  struct step {
    const tensor* out;
    std::vector<const tensor*> reads;
  };
  std::vector<step> order;
  for (const auto& s : sc.splits()) {
    for (const auto& c : s.copies) order.push_back({c.dst, {c.src}});
    for (int k = s.first; k < s.last; ++k) {
      const tensor* n = g.node(k);
      step st{n, {}};
      for (int j = 0; j < max_src; ++j) {
        const tensor* r = n->src[j];
        for (const auto& w : s.swaps)
          if (w.node == n && w.slot == j && p.slots.count(w.replacement)) r = w.replacement;  // staging
        st.reads.push_back(r);
      }
      order.push_back(st);
    }
  }
  const int end = static_cast<int>(order.size());
  auto base = [](const tensor* t) { return t->view_src ? t->view_src : t; };
  std::unordered_map<const tensor*, int> first, last;
  std::unordered_set<const tensor*> read;
  for (int i = 0; i < end; ++i) {
    if (!first.count(order[static_cast<std::size_t>(i)].out)) first[order[static_cast<std::size_t>(i)].out] = i;
    for (const tensor* r : order[static_cast<std::size_t>(i)].reads)
      if (r) {
        last[base(r)] = i;
        read.insert(r);
      }
  }
  for (const tensor* n : g.nodes())
    if (!read.count(n)) last[base(n)] = end;
  last[base(g.node(g.n_nodes() - 1))] = end;
  std::vector<gk_test::slot_life> lives;
  for (auto& [t, sl] : p.slots) {
    const int from = first.count(t) ? first.at(t) : -1;
    const int to = from < 0 ? end : (last.count(t) ? last.at(t) : end);
    lives.push_back({t, from, std::max(to, from), sl});
  }
  return gk_test::count_conflicts(lives, [&](const gk_test::slot_life& early, const gk_test::slot_life& late) {
    return late.from >= 0 && order[static_cast<std::size_t>(late.from)].reads[0] == early.t;
  });
}

alloc_options with_fault(planted_fault f) {
  alloc_options o;
  o.fault = f;
  return o;
}

}  // namespace

// A lifetime one step too short across memories puts a later tensor over bytes still to be
// copied or read. The same bit check that passes on the faithful plan must fail on each
// (the slots named were read off the plans):
//  - staging_one_read_early: the small graph's x is staged to DEV once and read by h
//    (split 0) and u (split 4); released after h, its slot takes s's staging copy in
//    split 2, so u = w3 s. In the block with glu refused on DEV, the gate and up matmul
//    outputs are each staged to the host for glu; each staging tensor released at its fill,
//    up's copy lands in gate's slot and glu reads up twice.
//  - copy_reads_ignored: with glu refused on DEV, the gate matmul's output is read only by
//    its staging copy to the host; released as soon as written, the up matmul (same size,
//    same split) takes its slot before the copy runs, so again glu reads up twice.
TEST_CASE("planted controls: a staged source or staging tensor released early breaks the bits", "[sched][staging][control]") {
  const auto small_want = small_reference();
  int conflicts = -1;
  CHECK(small_over_dev(alloc_options{}, small_want, &conflicts) == 0);
  CHECK(conflicts == 0);
  CHECK(small_over_dev(with_fault(planted_fault::staging_one_read_early), small_want, &conflicts) > 0);
  CHECK(conflicts > 0);  // the independent liveness check sees it too
  for (bool flash : {true, false}) {
    INFO((flash ? "flash" : "soft_max") << " attention");
    const auto want = cpu_reference(type::q4_K, flash);
    for (op refused : {op::count, op::glu, op::rms_norm, op::mul}) {
      INFO("faithful plan, DEV refuses " << (refused == op::count ? std::string_view("nothing") : name(refused)));
      CHECK(block_over_dev(flash, refused, alloc_options{}, want, &conflicts) == 0);
      CHECK(conflicts == 0);
    }
    for (auto f : {planted_fault::staging_one_read_early, planted_fault::copy_reads_ignored}) {
      INFO((f == planted_fault::copy_reads_ignored ? "copy reads ignored" : "staging released one read early"));
      CHECK(block_over_dev(flash, op::glu, with_fault(f), want, &conflicts) > 0);
      CHECK(conflicts > 0);
    }
  }
}

TEST_CASE("no reuse: each memory's buffer is one allocation per tensor, every node the CPU's bits", "[sched][staging]") {
  const auto want = cpu_reference(type::q4_K, true);
  block_case c(type::q4_K, true, false);
  device_buffer_type dev_mem;
  auto weights = gk_test::move_to(dev_mem, {c.w.attn_norm, c.w.wq, c.w.wk, c.w.wv, c.w.wo, c.w.ffn_norm, c.w.w_gate,
                                            c.w.w_up, c.w.w_down});
  test_backend dev("DEV", dev_mem, op::glu);
  test_backend host("HOSTCPU", host_buffer_type());
  alloc_options o;
  o.reuse = o.inplace = false;  // what GK_ALLOC_NO_REUSE=1 gives (alloc_options::from_env)
  sched sc({&dev, &host}, o);
  sc.alloc_graph(c.g);
  poison(c.g);
  sc.compute(c.g);
  REQUIRE(sc.memory_uses().size() == 2);
  for (const auto& u : sc.memory_uses()) CHECK(u.peak == u.separate);
  CHECK(sc.storage_plan().reused.empty());
  CHECK(gk_test::differing_nodes(want, gk_test::snapshot(c.g)) == 0);  // every node kept
}

TEST_CASE("one backend, 12 layers: the scheduler's peak is graph_allocator's, the same bits", "[sched][transformer]") {
  for (bool flash : {false, true}) {
    INFO((flash ? "flash" : "soft_max") << " attention");
    context wctx{context_params{64u << 20}};
    std::mt19937 rng(42);
    gk_test::block_dims bd;
    bd.tokens = 9;
    bd.n_past = 4;
    std::vector<gk_test::block_tensors<tensor*>> layers;
    for (int l = 0; l < 12; ++l) layers.push_back(make_block(wctx, bd, type::q8_0, rng));
    auto build = [&](context& c, graph& g) {
      gk_test::gk_lib lib{c};
      tensor* x = layers[0].x;
      for (auto w : layers) {
        w.x = x;
        x = gk_test::build_block(lib, bd, w, flash);
      }
      g.build_forward_expand(x);
      return x;
    };
    context ref_ctx{context_params{128u << 20}};
    graph ref_g;
    const tensor* ref_out = build(ref_ctx, ref_g);
    cpu::compute(ref_g, 2);
    const auto* rp = static_cast<const unsigned char*>(ref_out->data);
    const std::vector<unsigned char> want(rp, rp + ref_out->nbytes());

    context plan_ctx{context_params{16u << 20, nullptr, true}};
    graph g;
    const tensor* out = build(plan_ctx, g);
    graph_allocator ga(alloc_options{});
    const alloc_plan alone = ga.plan(g);  // plans only: g keeps no data
    cpu_backend cpu(2);
    sched sc({&cpu}, alloc_options{});
    sc.alloc_graph(g);
    REQUIRE(sc.memory_uses().size() == 1);
    const auto& u = sc.memory_uses()[0];
    std::printf("12 layers, d=256 9 tokens, %s, one CPU backend: sched peak %zu bytes, graph_allocator peak %zu "
                "bytes, no reuse %zu bytes\n",
                flash ? "flash" : "soft_max", u.peak, alone.peak[0], u.separate);
    std::fflush(stdout);
    CHECK(liveness_conflicts(g, sc) == 0);
    CHECK(u.peak == alone.peak[0]);  // the same steps, the same 64-byte alignment: the same plan
    CHECK(u.separate == alone.separate_bytes);
    sc.compute(g);
    const auto* p = static_cast<const unsigned char*>(out->data);
    CHECK(std::vector<unsigned char>(p, p + out->nbytes()) == want);
  }
}

TEST_CASE("the default placement follows GK_ALLOC_NO_REUSE", "[sched][env]") {
  block_case c(type::q8_0, true, false);
  cpu_backend cpu(2);
  sched sc({&cpu});  // alloc_options::from_env()
  sc.alloc_graph(c.g);
  REQUIRE(sc.memory_uses().size() == 1);
  const auto& u = sc.memory_uses()[0];
  std::printf("default placement (GK_ALLOC_NO_REUSE=%d): peak %zu bytes, no reuse %zu bytes\n",
              debug::env().alloc_no_reuse ? 1 : 0, u.peak, u.separate);
  if (debug::env().alloc_no_reuse) CHECK(u.peak == u.separate);
  else CHECK(u.peak < u.separate);
}

// An input with no storage goes where its first reader runs (DEV here: h = w1 x sits by its
// weight), gets a slot that is never released, and the caller fills it after alloc_graph.
TEST_CASE("an input without storage is placed in its first reader's memory and kept", "[sched][staging]") {
  std::mt19937 rng(3);
  context ctx{context_params{4u << 20}};
  tensor* w1 = ctx.new_tensor_2d(type::f32, 32, 16);
  tensor* x_data = ctx.new_tensor_2d(type::f32, 32, 4);  // the input's bytes, on the host
  gk_test::fill_random(w1, rng);
  gk_test::fill_random(x_data, rng);
  auto build = [&](context& c, tensor* x, graph& g) {
    tensor* h = mul_mat(c, w1, x);
    tensor* s = soft_max(c, h);
    tensor* t = mul_mat(c, w1, x);  // x read again after the host split: it must still be there
    g.build_forward_expand(add(c, s, t));
  };
  graph ref_g;
  build(ctx, x_data, ref_g);
  cpu::compute(ref_g, 2);
  const auto want = gk_test::snapshot(ref_g);

  device_buffer_type dev_mem;
  auto weights = gk_test::move_to(dev_mem, {w1});
  ctx.set_no_alloc(true);
  tensor* x = ctx.new_tensor_2d(type::f32, 32, 4);
  graph g;
  build(ctx, x, g);
  test_backend dev("DEV", dev_mem, op::soft_max);
  test_backend host("HOSTCPU", host_buffer_type());
  sched sc({&dev, &host}, alloc_options{});
  sc.alloc_graph(g);
  REQUIRE(memory_of(x) == &dev_mem);
  CHECK(sc.storage_plan().slots.count(x) == 1);
  CHECK(sc.storage_plan().reused.count(x) == 0);
  CHECK(liveness_conflicts(g, sc) == 0);
  buffer_of(x)->set_tensor(x, x_data->data, 0, x->nbytes());
  poison(g);
  sc.compute(g);
  CHECK(differing(want, g, sc) == 0);
}
