// SPDX-License-Identifier: MIT
// CUDA copy and reduce families against the CPU definition (harness.hpp).
// copy: dup/cpy/cont between f32/f16/bf16 with permuted, transposed and reshaped sides,
// same-type copies (i32 too), float -> q8_0/q4_0/q5_0/q4_1/q5_1/iq4_nl (encoded bytes
// compared), set_rows (i64/i32 indices broadcast over heads, duplicates, f32/f16 sources
// into f32/f16/bf16 and those formats), repeat, concat along every dim. reduce: sum, sum_rows, mean (f32, f16, bf16 sources,
// views), argmax (ties, NaN runs), argsort asc/desc and top_k (ties, NaN, -0/+0, rows past
// the 4096-key shared-memory chunk).
//
// Bars: everything bit-identical (NaN matching any NaN). Sums too: the device adds in the
// CPU's order (double, 8 lanes, the same lane tree, row sums in row order).
#include "harness.hpp"

namespace {

using gk_cuda_test::pair;
using gk_cuda_test::run_pair;
using gk_cuda_test::same;


void fill_leaf(gk::tensor* t, unsigned seed, float lo, float hi, bool specials, int levels = 0) {
  if (!t->data) return;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  const float sp[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f};
  std::vector<float> row(static_cast<std::size_t>(t->ne[0]));
  std::size_t k = 0;
  for (std::int64_t i3 = 0; i3 < t->ne[3]; ++i3)
    for (std::int64_t i2 = 0; i2 < t->ne[2]; ++i2)
      for (std::int64_t i1 = 0; i1 < t->ne[1]; ++i1) {
        for (auto& v : row) {
          v = u(rng);
          if (levels) v = std::floor(v * levels) / levels;  // few distinct values: ties
          if (specials && ++k % 11 == 0) v = sp[(k / 11) % (sizeof sp / sizeof sp[0])];
        }
        gk::cpu::row_writer w(t, row.data());
        float* d = w.begin(i1, i2, i3);
        if (d != row.data()) std::memcpy(d, row.data(), row.size() * 4);
        w.commit();
      }
}

gk::tensor* leaf(gk::context& ctx, gk::type t, std::int64_t ne0, std::int64_t ne1, std::int64_t ne2, std::int64_t ne3,
                 unsigned seed, bool specials = true, int levels = 0) {
  gk::tensor* x = ctx.new_tensor_4d(t, ne0, ne1, ne2, ne3);
  x->set_name("#leaf");
  fill_leaf(x, seed, -1.0f, 1.0f, specials, levels);
  return x;
}

// run_pair for results harness.hpp cannot read as numbers (block formats): the raw bytes,
// with the same placement check.
std::pair<std::vector<unsigned char>, std::vector<unsigned char>> run_bytes(const gk_cuda_test::builder& build) {
  gk::context ca{gk::context_params{64u << 20}};
  gk::tensor* out_a = build(ca);
  out_a->flags |= gk::flag_output;
  gk::graph ga;
  ga.build_forward_expand(out_a);
  std::mt19937 rng(1);
  for (gk::tensor* l : ga.leafs())
    if (l->name[0] != '#' && !l->view_src) gk_test::fill_random(l, rng);
  gk::cpu::compute(ga, 2);
  std::vector<unsigned char> cpu(static_cast<unsigned char*>(out_a->data),
                                 static_cast<unsigned char*>(out_a->data) + out_a->nbytes());
  gk::context cb{gk::context_params{64u << 20, nullptr, true}};
  gk::tensor* out_b = build(cb);
  out_b->flags |= gk::flag_output;
  gk::graph gb;
  gb.build_forward_expand(out_b);
  REQUIRE(gb.n_leafs() == ga.n_leafs());
  gk::buffer_type& dm = gk::cuda::device_buffer_type(0);
  auto rounded = [&](gk::tensor* l) { return (dm.alloc_size(l) + dm.alignment() - 1) / dm.alignment() * dm.alignment(); };
  std::size_t total = 0;
  for (gk::tensor* l : gb.leafs()) total += rounded(l);
  auto buf = dm.alloc_buffer(total ? total : 1);
  std::size_t off = 0;
  for (int i = 0; i < gb.n_leafs(); ++i) {
    gk::tensor* l = gb.leafs()[static_cast<std::size_t>(i)];
    const gk::tensor* la = ga.leafs()[static_cast<std::size_t>(i)];
    if (l->view_src) continue;
    buf->init_tensor(l, off);
    off += rounded(l);
    if (la->nbytes()) buf->set_tensor(l, la->data, 0, la->nbytes());
  }
  gk::cpu_backend cpub(2);
  gk::sched s({&gk_cuda_test::cuda_backend(), &cpub});
  s.alloc_graph(gb);
  if (s.backend_of(out_b) != &gk_cuda_test::cuda_backend()) FAIL("the node under test did not run on CUDA: " << gk::describe(out_b));
  s.compute(gb);
  std::vector<unsigned char> dev(out_b->nbytes());
  if (gk::backend_buffer* ob = gk::buffer_of(out_b)) ob->get_tensor(out_b, dev.data(), 0, dev.size());
  else std::memcpy(dev.data(), out_b->data, dev.size());
  return {cpu, dev};
}

}  // namespace

TEST_CASE("cuda cpy/dup/cont between float types, any strides", "[cuda][copy]") {
  using gk::type;
  const type ts[] = {type::f32, type::f16, type::bf16};
  for (const type from : ts)
    for (const type to : ts)
      for (const std::int64_t n0 : {1, 31, 257, 4097}) {
        // permuted source into a fresh tensor of another shape (flat order spans rows)
        CHECK(same(run_pair([&](gk::context& ctx) {
          gk::tensor* a = gk::permute(ctx, leaf(ctx, from, n0, 3, 2, 1, 1), 2, 0, 1, 3);  // [3, 2, n0]
          gk::tensor* b = ctx.new_tensor_2d(to, 6, n0);
          return gk::cpy(ctx, a, b);
        })));
        CHECK(same(run_pair([&](gk::context& ctx) { return gk::cast(ctx, leaf(ctx, from, n0, 5, 1, 1, 2), to); })));
      }
  // cont of a transpose, cont_4d reshaping, dup of a window
  CHECK(same(run_pair([](gk::context& ctx) { return gk::cont(ctx, gk::transpose(ctx, leaf(ctx, type::f16, 33, 17, 3, 1, 3))); })));
  CHECK(same(run_pair([](gk::context& ctx) {
    return gk::cont_4d(ctx, gk::permute(ctx, leaf(ctx, type::f32, 7, 6, 5, 4, 4), 3, 2, 1, 0), 12, 35, 2, 1);
  })));
  CHECK(same(run_pair([](gk::context& ctx) {
    gk::tensor* big = leaf(ctx, type::bf16, 40, 9, 2, 1, 5);
    return gk::dup(ctx, gk::view_3d(ctx, big, 31, 9, 2, big->nb[1], big->nb[2], 6));
  })));
  // same-type i32 (bytes)
  CHECK(same(run_pair([](gk::context& ctx) {
    gk::tensor* a = ctx.new_tensor_2d(gk::type::i32, 37, 5);
    a->set_name("#i");
    if (a->data)
      for (int i = 0; i < 37 * 5; ++i) static_cast<std::int32_t*>(a->data)[i] = i * 7919 - 100000;
    return gk::cont(ctx, gk::transpose(ctx, a));
  })));
}

const gk::type encoded[] = {gk::type::q8_0, gk::type::q4_0, gk::type::q5_0, gk::type::q4_1, gk::type::q5_1,
                            gk::type::iq4_nl};

TEST_CASE("cuda cpy into q8_0 q4_0 q5_0 q4_1 q5_1 iq4_nl equals the CPU's encoded bytes", "[cuda][copy][encode]") {
  for (const gk::type q : encoded) {
    INFO("into " << gk::name(q));
    for (const std::int64_t n0 : {32, 96, 4096})
      for (const gk::type from : {gk::type::f32, gk::type::f16, gk::type::bf16}) {
        auto [cpu, dev] = run_bytes([&](gk::context& ctx) {
          // a transposed source: each block gathers from strided elements
          gk::tensor* a = gk::transpose(ctx, leaf(ctx, from, 5, n0, 1, 1, 7, false));
          return gk::cast(ctx, a, q);
        });
        CHECK(cpu == dev);
      }
    // heavy tails (a few large weights per block), zero, constant and tiny blocks
    auto [cpu, dev] = run_bytes([&](gk::context& ctx) {
      gk::tensor* a = ctx.new_tensor_2d(gk::type::f32, 64, 40);
      a->set_name("#c");
      if (a->data) {
        std::mt19937 rng(5);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        auto* v = static_cast<float*>(a->data);
        for (int i = 0; i < 64 * 40; ++i) {
          const float g = nd(rng);
          v[i] = i < 32 ? 0.0f : i < 64 ? -0.3f : i < 96 ? 1e-30f * static_cast<float>(i) : g * g * g;
        }
      }
      return gk::cast(ctx, a, q);
    });
    CHECK(cpu == dev);
  }
}

TEST_CASE("cuda set_rows: i64/i32 ids, broadcast, duplicates, every destination type", "[cuda][copy][set_rows]") {
  using gk::type;
  for (const type dt : {type::f32, type::f16, type::bf16, type::q8_0, type::q4_0, type::q5_0, type::q4_1, type::q5_1,
                        type::iq4_nl})
    for (const type st : {type::f32, type::f16})
      for (const type it : {type::i64, type::i32}) {
        const bool blocks = gk::block_size(dt) > 1;
        const std::int64_t n0 = blocks ? 64 : 33;
        auto build = [&](gk::context& ctx) {
          gk::tensor* dst = leaf(ctx, blocks ? type::f32 : dt, n0, 10, 4, 2, 8, false);
          if (blocks) {
            gk::tensor* q = ctx.new_tensor_4d(dt, n0, 10, 4, 2);
            q->set_name("#q");
            if (q->data) gk::cpu::encode_row_any(dt, static_cast<float*>(dst->data), q->data, n0 * 80);
            dst = q;
          }
          gk::tensor* src = leaf(ctx, st, n0, 5, 4, 2, 9, false);
          gk::tensor* ids = ctx.new_tensor_3d(it, 5, 2, 1);  // broadcast over dim 2 (4 = 2 x 2) and dim 3
          ids->set_name("#ids");
          if (ids->data)
            for (int i = 0; i < 10; ++i) {
              const int v = i == 1 || i == 3 ? 9 : (i * 3) % 10;  // slice 0: 0 9 6 9 2 (row 9 twice)
              if (it == type::i64) static_cast<std::int64_t*>(ids->data)[i] = v;
              else static_cast<std::int32_t*>(ids->data)[i] = v;
            }
          return gk::set_rows(ctx, dst, src, ids);
        };
        if (blocks) {
          auto [cpu, dev] = run_bytes(build);
          CHECK(cpu == dev);
        } else {
          CHECK(same(run_pair(build)));
        }
      }
}

TEST_CASE("cuda repeat and concat", "[cuda][copy]") {
  for (const gk::type t : {gk::type::f32, gk::type::f16}) {
    CHECK(same(run_pair([&](gk::context& ctx) { return gk::repeat_4d(ctx, leaf(ctx, t, 3, 1, 2, 1, 10), 9, 4, 2, 3); })));
    CHECK(same(run_pair([&](gk::context& ctx) {
      return gk::repeat_4d(ctx, gk::transpose(ctx, leaf(ctx, t, 5, 31, 1, 1, 11)), 62, 10, 3, 1);
    })));
    for (int dim = 0; dim < 4; ++dim) {
      CHECK(same(run_pair([&](gk::context& ctx) {
        std::int64_t na[4] = {33, 4, 3, 2}, nb[4] = {33, 4, 3, 2};
        nb[dim] = dim == 0 ? 5 : 1;
        gk::tensor* a = leaf(ctx, t, na[0], na[1], na[2], na[3], 12);
        gk::tensor* b = leaf(ctx, t, nb[0], nb[1], nb[2], nb[3], 13);
        return gk::concat(ctx, a, b, dim);
      })));
    }
    // a permuted operand
    CHECK(same(run_pair([&](gk::context& ctx) {
      gk::tensor* a = gk::permute(ctx, leaf(ctx, t, 6, 33, 1, 1, 14), 1, 0, 2, 3);  // [33, 6]
      return gk::concat(ctx, a, leaf(ctx, t, 33, 3, 1, 1, 15), 1);
    })));
  }
}

TEST_CASE("cuda sum, sum_rows, mean: the CPU's bits", "[cuda][reduce]") {
  for (const gk::type t : {gk::type::f32, gk::type::f16, gk::type::bf16})
    for (const std::int64_t n0 : {1, 7, 31, 33, 257, 4097}) {
      CHECK(same(run_pair([&](gk::context& ctx) { return gk::sum_rows(ctx, leaf(ctx, t, n0, 5, 3, 2, 20, false)); })));
      CHECK(same(run_pair([&](gk::context& ctx) { return gk::mean(ctx, leaf(ctx, t, n0, 5, 3, 2, 21, false)); })));
      CHECK(same(run_pair([&](gk::context& ctx) { return gk::sum(ctx, leaf(ctx, t, n0, 5, 3, 2, 22, false)); })));
    }
  // views, and NaN / inf in rows
  CHECK(same(run_pair([](gk::context& ctx) {
    return gk::sum_rows(ctx, gk::permute(ctx, leaf(ctx, gk::type::f32, 9, 300, 2, 1, 23, false), 1, 0, 2, 3));
  })));
  CHECK(same(run_pair([](gk::context& ctx) { return gk::sum_rows(ctx, leaf(ctx, gk::type::f32, 100, 40, 1, 1, 24, true)); })));
  CHECK(same(run_pair([](gk::context& ctx) {
    return gk::sum(ctx, gk::transpose(ctx, leaf(ctx, gk::type::f16, 65, 1000, 1, 1, 25, false)));
  })));
}

TEST_CASE("cuda argmax: last index of ties, NaN runs", "[cuda][reduce]") {
  for (const std::int64_t n0 : {1, 31, 33, 257, 4097, 70000}) {
    CHECK(same(run_pair([&](gk::context& ctx) { return gk::argmax(ctx, leaf(ctx, gk::type::f32, n0, 6, 1, 1, 30, false, 4)); })));
    CHECK(same(run_pair([&](gk::context& ctx) { return gk::argmax(ctx, leaf(ctx, gk::type::f16, n0, 6, 1, 1, 31, true, 4)); })));
  }
  // rows ending in NaN, all NaN, NaN first
  CHECK(same(run_pair([](gk::context& ctx) {
    gk::tensor* a = ctx.new_tensor_2d(gk::type::f32, 5, 4);
    a->set_name("#a");
    const float v[20] = {1, 3, 3, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, 2, 0, 2, -1, 5, NAN, 1, NAN, 1};
    if (a->data) std::memcpy(a->data, v, sizeof v);
    return gk::argmax(ctx, a);
  })));
}

TEST_CASE("cuda argsort and top_k: the CPU's order with ties, NaN and -0", "[cuda][reduce][sort]") {
  for (const std::int64_t n0 : {1, 2, 31, 33, 257, 4096, 4097, 20000})
    for (const gk::type t : {gk::type::f32, gk::type::f16}) {
      for (const gk::sort_order o : {gk::sort_order::asc, gk::sort_order::desc})
        CHECK(same(run_pair([&](gk::context& ctx) { return gk::argsort(ctx, leaf(ctx, t, n0, 3, 2, 1, 40, true, 8), o); })));
      for (const int k : {1, 5, 40})
        if (k <= n0)
          CHECK(same(run_pair([&](gk::context& ctx) { return gk::top_k(ctx, leaf(ctx, t, n0, 3, 2, 1, 41, true, 8), k); })));
    }
  // a transposed source
  CHECK(same(run_pair([](gk::context& ctx) {
    return gk::argsort(ctx, gk::transpose(ctx, leaf(ctx, gk::type::f32, 7, 300, 1, 1, 42, true, 16)), gk::sort_order::desc);
  })));
}
