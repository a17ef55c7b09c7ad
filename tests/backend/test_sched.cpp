// SPDX-License-Identifier: MIT
// The scheduler, driven by backend doubles (doubles.hpp) so every path runs without a GPU:
//  - one backend: one split, and the same bits as cpu::compute on a transformer block;
//  - a CPU wrapper that refuses one op: the exact splits a small graph is cut into;
//  - a "device" whose memory is host RAM reporting is_host false: every crossing is
//    staged (the device checks it never touches host memory), the number of copies is
//    the one worked out by hand, and the results are the CPU's bits. Planted control: a
//    device that drops one staging copy must fail the same comparison;
//  - smoothing moves a lone node and never a pinned one. Planted control: the same
//    smoothing with the pins ignored must fail the pin check.
#include <catch2/catch.hpp>

#include <memory>
#include <random>
#include <vector>

#include "../common/transformer_block.hpp"
#include "doubles.hpp"
#include "gk/gk.hpp"
#include "gk/sched.hpp"

using namespace gk;
using gk_test::device_buffer_type;
using gk_test::test_backend;

namespace {

gk_test::block_tensors<tensor*> make_block(context& ctx, const gk_test::block_dims& bd, type wt, std::mt19937& rng) {
  gk_test::block_tensors<tensor*> w{};
  auto weight = [&](std::int64_t k, std::int64_t m) {
    tensor* t = ctx.new_tensor_2d(wt, k, m);
    gk_test::fill_random(t, rng, -0.1f, 0.1f);
    return t;
  };
  auto vec = [&](std::int64_t n) {
    tensor* t = ctx.new_tensor_1d(type::f32, n);
    gk_test::fill_random(t, rng, 0.5f, 1.5f);
    return t;
  };
  const std::int64_t kvd = bd.hd() * bd.kv_heads;
  w.attn_norm = vec(bd.d);
  w.ffn_norm = vec(bd.d);
  w.wq = weight(bd.d, bd.d);
  w.wk = weight(bd.d, kvd);
  w.wv = weight(bd.d, kvd);
  w.wo = weight(bd.d, bd.d);
  w.w_gate = weight(bd.d, bd.ffn);
  w.w_up = weight(bd.d, bd.ffn);
  w.w_down = weight(bd.ffn, bd.d);
  w.x = ctx.new_tensor_2d(type::f32, bd.d, bd.tokens);
  gk_test::fill_random(w.x, rng);
  w.pos = ctx.new_tensor_1d(type::i32, bd.tokens);
  w.kv_idx = ctx.new_tensor_1d(type::i64, bd.tokens);
  for (std::int64_t i = 0; i < bd.tokens; ++i) {
    static_cast<std::int32_t*>(w.pos->data)[i] = static_cast<std::int32_t>(bd.n_past + i);
    static_cast<std::int64_t*>(w.kv_idx->data)[i] = bd.n_past + i;
  }
  w.mask = ctx.new_tensor_2d(type::f16, bd.n_kv(), bd.tokens);
  const auto m = gk_test::causal_mask(bd);
  for (std::size_t i = 0; i < m.size(); ++i) static_cast<std::uint16_t*>(w.mask->data)[i] = f32_to_f16(m[i]);
  w.k_cache = ctx.new_tensor_2d(type::f16, kvd, bd.n_kv());
  w.v_cache = ctx.new_tensor_2d(type::f16, kvd, bd.n_kv());
  gk_test::fill_random(w.k_cache, rng);
  gk_test::fill_random(w.v_cache, rng);
  return w;
}

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
      block_case c(wt, flash, false);
      cpu_backend cpu(2);
      sched sc({&cpu});
      sc.alloc_graph(c.g);
      poison(c.g);
      sc.compute(c.g);
      CHECK(sc.splits().size() == 1);
      CHECK(sc.n_copies() == 0);
      CHECK(gk_test::differing_nodes(want, gk_test::snapshot(c.g)) == 0);
      poison(c.g);
      sc.compute(c.g);  // the plan is reused; the bits stay
      CHECK(gk_test::differing_nodes(want, gk_test::snapshot(c.g)) == 0);
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
  CHECK(gk_test::differing_nodes(want, gk_test::snapshot(c.g)) == 0);
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
  CHECK(gk_test::differing_nodes(want, gk_test::snapshot(c.g)) == 0);

  // a pin set after planning re-plans the same graph from its unplaced state: y joins s
  sc.set_backend(c.y, &cpu);
  poison(c.g);
  sc.compute(c.g);
  CHECK(shapes(sc) == std::vector<split_shape>{{"WRAP", 0, 1, 0}, {"CPU", 1, 3, 0}, {"WRAP", 3, 7, 0}});
  CHECK(sc.pinned(c.z) == pin::none);  // its old placement was given back, not taken for rule 1
  CHECK(gk_test::differing_nodes(want, gk_test::snapshot(c.g)) == 0);
}

TEST_CASE("device memory: every crossing is staged, counted, and gives the CPU's bits", "[sched][staging]") {
  const auto want = small_reference();
  for (bool drop_one : {false, true}) {
    INFO((drop_one ? "planted control: the device drops its first staging write" : "faithful device"));
    small_graph c(false);
    device_buffer_type dev_mem;
    auto weights = gk_test::move_to(dev_mem, {c.w1, c.w2, c.w3});
    dev_mem.sets = 0;
    dev_mem.drop_set = drop_one ? 0 : -1;
    test_backend dev("DEV", dev_mem, op::soft_max);
    test_backend host("HOSTCPU", host_buffer_type());  // the CPU, checking it reads host memory only
    sched sc({&dev, &host});
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
    const auto got = gk_test::snapshot(c.g);  // snapshot reads DEV nodes through get_tensor
    if (drop_one) {
      CHECK(gk_test::differing_nodes(want, got) > 0);
    } else {
      CHECK(gk_test::differing_nodes(want, got) == 0);
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
        sched sc({&dev, &host});
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
        const auto got = gk_test::snapshot(c.g);
        if (drop_one) CHECK(gk_test::differing_nodes(want, got) > 0);
        else CHECK(gk_test::differing_nodes(want, got) == 0);
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
