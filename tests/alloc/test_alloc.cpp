// SPDX-License-Identifier: MIT
// The graph allocator. The main check: a 12-layer transformer graph built in a no_alloc
// context and placed by graph_allocator computes bit-identical output to the same graph
// built in an allocating context (every node its own storage), at 1 and 3 threads. A
// lifetime one read too short puts a later node's result over bytes still to be read, which
// this catches; two planted faults (release one read early, views not holding their base)
// must make it fail. An independent liveness check (recomputed here from the node list)
// also verifies that no two slots sharing bytes are alive at once. Prints the memory factor:
// the slots' sizes summed (one allocation per tensor) over the planned peak.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../common/transformer_block.hpp"
#include "gk/alloc.hpp"
#include "../common/liveness.hpp"
#include "gk/gk.hpp"

using namespace gk;

namespace {

using gk_test::fill_random;

std::vector<unsigned char> bytes_of(const tensor* t) {
  const auto* p = static_cast<const unsigned char*>(t->data);
  return {p, p + t->nbytes()};
}

// Weights, caches and inputs of an n-layer stack, allocated in their own (normal) context.
struct stack_model {
  gk_test::block_dims bd;
  context ctx{{256u << 20}};
  std::vector<gk_test::block_tensors<tensor*>> layers;
  tensor* x0 = nullptr;

  stack_model(int n_layers, type wt, std::int64_t tokens, std::uint32_t seed = 42) {
    bd.tokens = tokens;
    bd.n_past = 4;
    std::mt19937 rng(seed);
    const std::int64_t kvd = bd.hd() * bd.kv_heads;
    x0 = ctx.new_tensor_2d(type::f32, bd.d, bd.tokens);
    fill_random(x0, rng);
    tensor* pos = ctx.new_tensor_1d(type::i32, bd.tokens);
    tensor* kv_idx = ctx.new_tensor_1d(type::i64, bd.tokens);
    for (std::int64_t i = 0; i < bd.tokens; ++i) {
      static_cast<std::int32_t*>(pos->data)[i] = static_cast<std::int32_t>(bd.n_past + i);
      static_cast<std::int64_t*>(kv_idx->data)[i] = bd.n_past + i;
    }
    tensor* mask = ctx.new_tensor_2d(type::f16, bd.n_kv(), bd.tokens);
    const auto m = gk_test::causal_mask(bd);
    for (std::size_t i = 0; i < m.size(); ++i) static_cast<std::uint16_t*>(mask->data)[i] = f32_to_f16(m[i]);
    for (int l = 0; l < n_layers; ++l) {
      gk_test::block_tensors<tensor*> w{};
      auto weight = [&](std::int64_t k, std::int64_t n) {
        tensor* t = ctx.new_tensor_2d(wt, k, n);
        fill_random(t, rng, -0.1f, 0.1f);
        return t;
      };
      auto vec = [&](std::int64_t n) {
        tensor* t = ctx.new_tensor_1d(type::f32, n);
        fill_random(t, rng, 0.5f, 1.5f);
        return t;
      };
      w.attn_norm = vec(bd.d);
      w.ffn_norm = vec(bd.d);
      w.wq = weight(bd.d, bd.d);
      w.wk = weight(bd.d, kvd);
      w.wv = weight(bd.d, kvd);
      w.wo = weight(bd.d, bd.d);
      w.w_gate = weight(bd.d, bd.ffn);
      w.w_up = weight(bd.d, bd.ffn);
      w.w_down = weight(bd.ffn, bd.d);
      w.pos = pos;
      w.kv_idx = kv_idx;
      w.mask = mask;
      w.k_cache = ctx.new_tensor_2d(type::f16, kvd, bd.n_kv());
      w.v_cache = ctx.new_tensor_2d(type::f16, kvd, bd.n_kv());
      fill_random(w.k_cache, rng);
      fill_random(w.v_cache, rng);
      layers.push_back(w);
    }
  }

  // The stack's graph in ctx: layer l's output is layer l+1's x. layer_out[l] is layer l's.
  tensor* build(context& c, graph& g, bool flash, std::vector<tensor*>* layer_out = nullptr) {
    gk_test::gk_lib lib{c};
    tensor* x = x0;
    for (auto w : layers) {
      w.x = x;
      x = gk_test::build_block(lib, bd, w, flash);
      if (layer_out) layer_out->push_back(x);
    }
    g.build_forward_expand(x);
    return x;
  }
};

// The same stack twice: `ref` in an allocating context (each node its own storage from the
// context arena), `planned` in a no_alloc context for the allocator.
struct two_graphs {
  stack_model& m;
  context ref_ctx{{128u << 20}};
  context plan_ctx{{16u << 20, nullptr, true}};
  graph ref_g, plan_g;
  std::vector<tensor*> ref_layers, plan_layers;
  tensor* ref_out;
  tensor* plan_out;
  two_graphs(stack_model& model, bool flash) : m(model) {
    ref_out = m.build(ref_ctx, ref_g, flash, &ref_layers);
    plan_out = m.build(plan_ctx, plan_g, flash, &plan_layers);
  }
};

// Independent of the allocator: every slot's lifetime [first node, last node] recomputed from
// the node list (reads through views count on the base; outputs, flagged tensors, inputs and
// nodes nobody reads live to the end), then any two slots sharing bytes must not be alive at
// once, except a node taking its source's slot in place at the source's last read.
// Returns the number of conflicting pairs.
int liveness_conflicts(const graph& g, const alloc_plan& p) {
  const auto nodes = g.nodes();
  const int end = static_cast<int>(nodes.size());
  std::unordered_map<const tensor*, int> first, last, readers;
  auto base = [](const tensor* t) { return t->view_src ? t->view_src : t; };
  for (int i = 0; i < end; ++i) {
    const tensor* n = nodes[static_cast<std::size_t>(i)];
    if (!first.count(n)) first[n] = i;
    for (const tensor* s : n->src)
      if (s) {
        last[base(s)] = std::max(last.count(base(s)) ? last[base(s)] : -1, i);
        ++readers[s];
      }
  }
  for (int i = 0; i < end; ++i) {
    const tensor* n = nodes[static_cast<std::size_t>(i)];
    if (i == end - 1 || (n->flags & (flag_input | flag_output)) || !readers.count(n)) last[base(n)] = end;
  }
  std::vector<gk_test::slot_life> lives;
  for (auto& [t, s] : p.slots) {
    const int from = first.count(t) ? first.at(t) : -1;  // inputs: before the first node
    const int to = first.count(t) ? (last.count(t) ? last.at(t) : end) : end;
    lives.push_back({t, from, std::max(to, from), s});
  }
  return gk_test::count_conflicts(lives, [](const gk_test::slot_life& early, const gk_test::slot_life& late) {
    return late.t->src[0] == early.t;
  });
}

double factor(const alloc_plan& p) {
  return static_cast<double>(p.separate_bytes) / static_cast<double>(p.peak[0]);
}

void run(const graph& g, int threads) {
  cpu::runner r(threads);
  r.compute(g);
}

}  // namespace

TEST_CASE("free list: best fit, coalescing, peak", "[alloc]") {
  free_list fl(64);
  const auto a = fl.allocate(100);  // 128
  const auto b = fl.allocate(64);
  const auto c = fl.allocate(256);
  const auto d = fl.allocate(64);
  CHECK(a == 0);
  CHECK(b == 128);
  CHECK(c == 192);
  CHECK(d == 448);
  CHECK(fl.peak() == 512);
  fl.release(a, 100);
  fl.release(c, 256);
  CHECK(fl.n_free_blocks() == 2);
  CHECK(fl.allocate(200) == c);  // best fit: the 256 block, not the 128 one first in order
  fl.release(c, 200);
  fl.release(b, 64);  // joins a (0..128) and c (192..448) into one block 0..448
  CHECK(fl.n_free_blocks() == 1);
  CHECK(fl.allocate(448) == 0);
  CHECK(fl.peak() == 512);
  fl.release(0, 448);
  fl.release(d, 64);  // everything free: the list is empty and the end is back at 0
  CHECK(fl.n_free_blocks() == 0);
  CHECK(fl.in_use() == 0);
  CHECK(fl.allocate(1) == 0);
  CHECK_THROWS_WITH(fl.release(64, 64), Catch::Contains("outside"));
  fl.allocate(64);
  fl.release(0, 64);
  CHECK_THROWS_WITH(fl.release(0, 64), Catch::Contains("released twice"));
}

TEST_CASE("a 12-layer transformer graph: planned peak vs one allocation per node, same bits", "[alloc][transformer]") {
  for (bool flash : {false, true}) {
    stack_model m(12, type::q8_0, 9);
    two_graphs gs(m, flash);
    graph_allocator ga(alloc_options{});
    const auto& p = ga.allocate(gs.plan_g);
    INFO((flash ? "flash attention" : "soft_max attention") << ", " << gs.plan_g.n_nodes() << " nodes");
    std::printf("12 layers, d=256 ffn=512 9 tokens, %s: %d nodes, %zu slots, %d in place; one allocation per "
                "tensor %zu bytes, planned peak %zu bytes (most live at once %zu): factor %.1fx\n",
                flash ? "flash attention" : "soft_max attention", gs.plan_g.n_nodes(), p.slots.size(), p.n_inplace,
                p.separate_bytes, p.peak[0], p.live_peak[0], factor(p));
    CHECK(liveness_conflicts(gs.plan_g, p) == 0);
    CHECK(factor(p) > 22.0);  // the bar set for this allocator
    for (int threads : {1, 3}) {
      INFO(threads << " threads");
      run(gs.ref_g, threads);
      const auto want = bytes_of(gs.ref_out);
      std::memset(ga.buffer(), 0xff, ga.buffer_size());  // NaN everywhere: a missed write shows
      run(gs.plan_g, threads);
      CHECK(bytes_of(gs.plan_out) == want);
    }
  }
}

TEST_CASE("memory factor at more tokens (activations larger against the weights)", "[alloc][transformer]") {
  for (std::int64_t tokens : {9, 64, 256}) {
    stack_model m(12, type::q8_0, tokens);
    context c({16u << 20, nullptr, true});
    graph g;
    m.build(c, g, false);
    graph_allocator ga(alloc_options{});
    const auto& p = ga.plan(g);
    std::printf("12 layers, %lld tokens, soft_max attention: one allocation per tensor %zu bytes, peak %zu "
                "(most live at once %zu): factor %.1fx\n",
                static_cast<long long>(tokens), p.separate_bytes, p.peak[0], p.live_peak[0], factor(p));
    CHECK(liveness_conflicts(g, p) == 0);
    CHECK(factor(p) > 22.0);
  }
}

TEST_CASE("planted controls: lifetimes cut short break the bits; no reuse gives factor 1", "[alloc][control]") {
  stack_model m(12, type::q8_0, 9);
  two_graphs gs(m, false);
  run(gs.ref_g, 1);
  const auto want = bytes_of(gs.ref_out);
  for (auto fault : {planted_fault::release_one_read_early, planted_fault::ignore_view_refs}) {
    INFO((fault == planted_fault::release_one_read_early ? "release one read early" : "views do not hold their base"));
    alloc_options o;
    o.fault = fault;
    graph_allocator ga(o);
    const auto& p = ga.allocate(gs.plan_g);
    CHECK(liveness_conflicts(gs.plan_g, p) > 0);  // the independent liveness check sees it
    for (int threads : {1, 3}) {
      INFO(threads << " threads");
      std::memset(ga.buffer(), 0xff, ga.buffer_size());
      run(gs.plan_g, threads);
      CHECK(bytes_of(gs.plan_out) != want);  // and so does the bit-identity check
    }
    ga.forget(gs.plan_g);  // the next allocator plans the graph afresh
  }
  SECTION("no reuse: every tensor its own storage") {
    alloc_options o;
    o.reuse = o.inplace = false;
    graph_allocator ga(o);
    const auto& p = ga.allocate(gs.plan_g);
    std::printf("no reuse: one allocation per tensor %zu bytes, peak %zu: factor %.2fx\n", p.separate_bytes,
                p.peak[0], factor(p));
    CHECK(p.peak[0] == p.separate_bytes);
    CHECK(p.n_inplace == 0);
    CHECK(p.reused.empty());
    run(gs.plan_g, 3);
    CHECK(bytes_of(gs.plan_out) == want);
  }
}

TEST_CASE("a tensor flagged output keeps its bytes; unflagged, the same tensor is overwritten", "[alloc]") {
  stack_model m(12, type::q8_0, 9);
  for (bool flagged : {true, false}) {
    two_graphs gs(m, false);
    // layer 5's output is read last by layer 6's residual add, which may take its slot in
    // place; flag_output forbids that and any reuse
    tensor* mid = gs.plan_layers[5];
    if (flagged) mid->flags |= flag_output;
    graph_allocator ga(alloc_options{});
    const auto& p = ga.allocate(gs.plan_g);
    CHECK(liveness_conflicts(gs.plan_g, p) == 0);
    run(gs.ref_g, 3);
    run(gs.plan_g, 3);
    CHECK(bytes_of(gs.plan_out) == bytes_of(gs.ref_out));
    if (flagged) {
      CHECK(bytes_of(mid) == bytes_of(gs.ref_layers[5]));
      CHECK(!p.reused.count(mid));
    } else {
      // the planted control: without the flag the check above must fail
      CHECK(bytes_of(mid) != bytes_of(gs.ref_layers[5]));
    }
  }
}

TEST_CASE("edge cases: a view as the output, in-place chains, inputs without data", "[alloc]") {
  std::mt19937 rng(5);
  context wctx({16u << 20});
  tensor* w = wctx.new_tensor_2d(type::f32, 64, 48);
  tensor* bias = wctx.new_tensor_1d(type::f32, 48);
  fill_random(w, rng);
  fill_random(bias, rng);

  // x [64, 16] is an input leaf without data. y's transposed view yv is read once, early
  // (by cont), and then y's last reader may take y's slot in place: unless yv is flagged
  // output, its bytes are gone by the end.
  auto make = [&](context& c, graph& g, tensor* x, bool flag_view) -> std::pair<tensor*, tensor*> {
    tensor* y = mul_mat(c, w, x);  // [48, 16]
    tensor* yv = transpose(c, y);  // a view of y: [16, 48]
    if (flag_view) yv->flags |= flag_output;
    tensor* yc = cont(c, yv);
    g.build_forward_expand(yc);
    tensor* z = scale(c, silu(c, add(c, y, bias)), 0.5f);  // add, silu, scale may each take the previous slot
    z = soft_max(c, mul(c, z, z));                        // mul(z, z) reads z twice: not in place
    z = rms_norm(c, z, 1e-5f);
    tensor* z2 = add(c, mul_mat(c, w, x), bias);
    tensor* z3 = sub(c, z2, z);
    tensor* out = add(c, cont(c, transpose(c, z3)), yc);
    out = reshape_2d(c, out, 16 * 48, 1);  // the graph's last node is a view
    g.build_forward_expand(out);
    return {yv, out};
  };

  for (bool flag_view : {true, false}) {
    INFO("transposed view of y flagged output: " << flag_view);
    context ref_c({16u << 20});
    graph ref_g;
    tensor* ref_x = ref_c.new_tensor_2d(type::f32, 64, 16);
    auto [ref_yv, ref_out] = make(ref_c, ref_g, ref_x, flag_view);

    context c({16u << 20, nullptr, true});
    graph g;
    tensor* x = c.new_tensor_2d(type::f32, 64, 16);
    auto [yv, out] = make(c, g, x, flag_view);
    REQUIRE(x->data == nullptr);
    REQUIRE(out->view_src != nullptr);
    graph_allocator ga(alloc_options{});
    const auto& p = ga.allocate(g);
    CHECK(x->data != nullptr);  // the leaf without data got storage
    CHECK(p.slots.count(x) == 1);
    CHECK(!p.reused.count(x));
    CHECK(p.n_inplace >= 3);  // silu on add, scale on silu, rms_norm on soft_max (at least)
    CHECK(liveness_conflicts(g, p) == 0);
    std::printf("edge-case graph: %d nodes, %d in place, factor %.2fx\n", g.n_nodes(), p.n_inplace, factor(p));

    fill_random(ref_x, rng);
    std::memcpy(x->data, ref_x->data, x->nbytes());
    const auto x_bytes = bytes_of(x);
    for (int threads : {1, 3}) {
      run(ref_g, threads);
      run(g, threads);
      CHECK(bytes_of(out) == bytes_of(ref_out));
      CHECK(bytes_of(x) == x_bytes);  // inputs are never overwritten
      if (flag_view) CHECK(bytes_of(yv) == bytes_of(ref_yv));
    }
    // the planted control for the flagged view: without the flag y's slot is reused
    if (!flag_view) CHECK(bytes_of(yv) != bytes_of(ref_yv));
  }
}

TEST_CASE("builder in-place ops write through views of a planned node", "[alloc]") {
  std::mt19937 rng(9);
  context wctx({4u << 20});
  tensor* b = wctx.new_tensor_1d(type::f32, 40);
  fill_random(b, rng);
  auto make = [&](context& c, graph& g, tensor* x) {
    tensor* y = add(c, x, b);
    tensor* v = scale_inplace(c, add_inplace(c, y, b), 2.0f);  // views of y, written in place
    tensor* r = mul(c, v, y);                                  // reads y's storage after the writes
    g.build_forward_expand(r);
    return r;
  };
  context ref_c({4u << 20});
  graph ref_g;
  tensor* rx = ref_c.new_tensor_2d(type::f32, 40, 7);
  fill_random(rx, rng);
  tensor* ref_r = make(ref_c, ref_g, rx);
  context c({4u << 20, nullptr, true});
  graph g;
  tensor* x = c.new_tensor_2d(type::f32, 40, 7);
  tensor* r = make(c, g, x);
  graph_allocator ga(alloc_options{});
  const auto& p = ga.allocate(g);
  CHECK(liveness_conflicts(g, p) == 0);
  std::memcpy(x->data, rx->data, x->nbytes());
  run(ref_g, 1);
  run(g, 1);
  CHECK(bytes_of(r) == bytes_of(ref_r));
}

TEST_CASE("node hashes name the first node where two runs diverge", "[alloc][hash]") {
  stack_model m(12, type::q8_0, 9);
  context c({16u << 20, nullptr, true});
  graph g;
  m.build(c, g, false);
  alloc_options o;
  o.reuse = o.inplace = false;  // as GK_NODE_HASH=1 makes it: every node's bytes its own
  graph_allocator ga(o);
  ga.allocate(g);
  auto lines = [&]() {
    std::FILE* f = std::tmpfile();
    REQUIRE(f);
    run(g, 3);
    debug::print_node_hashes(g, f, &ga.last_plan());
    std::rewind(f);
    std::vector<std::string> out;
    char buf[512];
    while (std::fgets(buf, sizeof buf, f)) out.emplace_back(buf);
    std::fclose(f);
    return out;
  };
  const auto a = lines();
  const auto b = lines();
  REQUIRE(a.size() == static_cast<std::size_t>(g.n_nodes()));
  CHECK(a == b);
  CHECK(a[0].find("reused") == std::string::npos);
  // perturb layer 7's w_up: the first differing line must be the first node reading it
  tensor* w_up = m.layers[7].w_up;
  static_cast<unsigned char*>(w_up->data)[0] ^= 0x40;
  const auto d = lines();
  int first_diff = -1, first_reader = -1;
  for (int i = 0; i < g.n_nodes(); ++i) {
    if (first_diff < 0 && a[static_cast<std::size_t>(i)] != d[static_cast<std::size_t>(i)]) first_diff = i;
    if (first_reader < 0 && g.node(i)->src[0] == w_up) first_reader = i;
  }
  std::printf("hash divergence: first differing node #%d, first reader of layer 7 w_up #%d: %s", first_diff,
              first_reader, d[static_cast<std::size_t>(first_diff)].c_str());
  CHECK(first_diff == first_reader);
  static_cast<unsigned char*>(w_up->data)[0] ^= 0x40;
}

TEST_CASE("environment switches are read once and map to the options", "[alloc][env]") {
  const bool no_reuse = debug::env_flag("GK_ALLOC_NO_REUSE") || debug::env_flag("GK_NODE_HASH");
  CHECK(alloc_options::from_env().reuse == !no_reuse);
  CHECK(alloc_options::from_env().inplace == !no_reuse);
  CHECK(debug::env().node_hash == debug::env_flag("GK_NODE_HASH"));
  // under GK_ALLOC_NO_REUSE=1 (the second meson test) the default allocator gives factor 1
  stack_model m(2, type::q8_0, 9);
  context c({4u << 20, nullptr, true});
  graph g;
  m.build(c, g, false);
  graph_allocator ga;  // options from the environment
  const auto& p = ga.plan(g);
  if (no_reuse) CHECK(p.peak[0] == p.separate_bytes);
  else CHECK(p.peak[0] < p.separate_bytes);
}
