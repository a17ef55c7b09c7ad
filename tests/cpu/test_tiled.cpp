// SPDX-License-Identifier: MIT
// CPU_TILED memory (cpu/tiled.hpp) on trial.
//  - The layout is the documented one (checked byte by byte against its own statement, not
//    against the converter), and every byte range, view and memset comes back as written,
//    with tail rows and more than one matrix.
//  - mul_mat and mul_mat_id read a tiled weight in place and give the bits of the same
//    weight in ordinary memory, decode and prompt shapes, one and two threads. Built for
//    the baseline target (groups converted back to rows) and for this machine's (the
//    AVX-512 tiles load groups directly).
//  - The scheduler reads the weight in place for mul_mat and stages it, through
//    get_tensor, for any other reader; the runner alone refuses such a read.
//  - Planted control: the weight's plain bytes written raw into CPU_TILED memory (no
//    conversion) must give other numbers, so the equality above is not vacuous.
#include <algorithm>
#include <catch2/catch.hpp>

#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "gk/gk.hpp"

using namespace gk;

namespace {

const type tiled_types[] = {type::q4_0,  type::q4_1, type::q5_0,   type::q5_1, type::q8_0, type::iq4_nl,
                            type::mxfp4, type::nvfp4, type::q4_K, type::q5_K, type::iq4_xs, type::q2_K,
                            type::q3_K,  type::q6_K, type::tq1_0, type::tq2_0, type::iq2_s, type::iq3_s};
// formats whose blocks go in 4-byte units throughout
bool dword_units(type t) { return t == type::q4_K || t == type::q5_K || t == type::iq4_xs || t == type::nvfp4; }
// formats in 4-byte units but for their f16 scales at the end (2-byte units)
bool dword_units_but_scale(type t) {
  return t == type::q2_K || t == type::q3_K || t == type::q6_K || t == type::tq1_0 || t == type::tq2_0;
}

std::vector<unsigned char> random_bytes(std::size_t n, std::mt19937& rng) {
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  return v;
}

// Valid blocks (finite scales) for weight tensor t's rows, from normal values.
std::vector<unsigned char> random_weights(const tensor* t, std::mt19937& rng) {
  std::vector<unsigned char> out(t->nbytes());
  std::normal_distribution<float> g;
  std::vector<float> row(static_cast<std::size_t>(t->ne[0]));
  const std::size_t rs = t->row_bytes();
  for (std::int64_t r = 0; r < t->nrows(); ++r) {
    for (auto& v : row) v = g(rng);
    formats::visit(t->type, [&]<class W>(std::type_identity<W>) {
      encode_row<W>(row.data(), reinterpret_cast<typename W::block*>(out.data() + static_cast<std::size_t>(r) * rs),
                    t->ne[0], nullptr);
    });
  }
  return out;
}

void fill_f32(tensor* t, std::mt19937& rng) {
  std::normal_distribution<float> g;
  auto* f = static_cast<float*>(t->data);
  for (std::int64_t i = 0; i < t->nelements(); ++i) f[i] = g(rng);
}

// A weight of random valid blocks in ctx's memory, and the same bytes set (so converted)
// into a tensor of meta in CPU_TILED memory, which buf holds.
struct weight_pair {
  tensor *plain, *tiled;
  std::vector<unsigned char> bytes;
  std::unique_ptr<backend_buffer> buf;
};
weight_pair weight_in_both(context& ctx, context& meta, type t, std::int64_t k, std::int64_t m, std::int64_t mats,
                           std::mt19937& rng) {
  weight_pair p;
  p.plain = ctx.new_tensor_3d(t, k, m, mats);
  p.bytes = random_weights(p.plain, rng);
  std::memcpy(p.plain->data, p.bytes.data(), p.bytes.size());
  p.tiled = meta.new_tensor_3d(t, k, m, mats);
  p.buf = place_in_one_buffer(std::vector<tensor*>{p.tiled}, cpu_tiled_buffer_type());
  p.buf->set_tensor(p.tiled, p.bytes.data(), 0, p.bytes.size());
  return p;
}

}  // namespace

TEST_CASE("CPU_TILED: the documented layout, and every byte range back as written", "[cpu][tiled]") {
  std::mt19937 rng(7);
  struct geo {
    std::int64_t k, m, e;
  };
  for (type t : {type::q4_0, type::q4_1, type::q8_0, type::iq4_nl, type::q4_K, type::q5_K, type::iq4_xs, type::q2_K,
                 type::q3_K, type::q6_K, type::tq1_0, type::tq2_0, type::iq2_s, type::iq3_s, type::q5_0, type::q5_1,
                 type::nvfp4, type::mxfp4, type::iq2_xs,
                 type::f32})
    for (geo g0 : {geo{64, 16, 1}, geo{256, 37, 2}, geo{32, 5, 1}, geo{96, 48, 3}}) {
      const geo g{g0.k * std::max<std::int64_t>(1, static_cast<std::int64_t>(block_size(t)) / 32), g0.m, g0.e};
      INFO(type_label(t) << " k " << g.k << " m " << g.m << " matrices " << g.e);
      context meta({1u << 20, nullptr, true});
      tensor* w = meta.new_tensor_3d(t, g.k, g.m, g.e);
      auto buf = place_in_one_buffer(std::vector<tensor*>{w}, cpu_tiled_buffer_type());
      CHECK(memory_of(w) == &cpu_tiled_buffer_type());
      const std::size_t n = w->nbytes();
      std::vector<unsigned char> mirror = random_bytes(n, rng), got(n);
      buf->set_tensor(w, mirror.data(), 0, n);
      buf->get_tensor(w, got.data(), 0, n);
      REQUIRE(got == mirror);

      // the layout as cpu/tiled.hpp states it: in group q of matrix x, block i of row r, the
      // unit at block offset o (2 bytes before qs, mxfp4's e 1, 4 from qs on; 4 throughout a q4_K, q5_K,
      // iq4_xs or nvfp4 block; 4 in a q2_K, q3_K, q6_K, tq1_0 or tq2_0 block but for its f16
      // scales at the end, 2; iq2_s and iq3_s as the 32-weight formats, qs and all after it
      // in 4-byte units) is at group start + 16 i sizeof(block) + 16 o + r * unit size
      const bool tiled = t == type::q4_0 || t == type::q4_1 || t == type::q5_0 || t == type::q5_1 || t == type::q8_0 ||
                         t == type::iq4_nl || t == type::mxfp4 || dword_units(t) ||
                         dword_units_but_scale(t) || t == type::iq2_s || t == type::iq3_s;
      CHECK(cpu::tiled::is_tiled(w) == tiled);
      const auto* phys = static_cast<const unsigned char*>(w->data);
      const std::size_t bs = type_size(t), rs = w->row_bytes();
      const std::size_t qs_at = t == type::q4_1    ? 4
                                : t == type::q5_0  ? 6
                                : t == type::q5_1  ? 8
                                : t == type::mxfp4 ? 1
                                : dword_units(t) || dword_units_but_scale(t) ? 0
                                                                            : 2;
      const std::size_t head = t == type::mxfp4 ? 1 : 2;  // the unit before qs
      const std::size_t qs_end = dword_units_but_scale(t) ? bs - (t == type::q2_K ? 4 : 2) : bs;
      const std::int64_t nb = g.k / block_size(t);
      std::size_t mismatched = 0, checked = 0;
      for (std::int64_t x = 0; x < g.e; ++x)
        for (std::int64_t r = 0; r < g.m; ++r)
          for (std::int64_t i = 0; i < nb; ++i)
            for (std::size_t o = 0; o < bs; ++o) {
              const std::size_t logical = static_cast<std::size_t>(x * g.m + r) * rs + static_cast<std::size_t>(i) * bs + o;
              std::size_t at = logical;
              if (tiled && r < g.m / 16 * 16) {
                const std::size_t unit = o < qs_at ? head : o >= qs_end ? 2 : 4;
                const std::size_t u0 = o < qs_at ? o / head * head : unit == 2 ? o / 2 * 2 : qs_at + (o - qs_at) / 4 * 4;
                at = static_cast<std::size_t>(x * g.m + r / 16 * 16) * rs + static_cast<std::size_t>(i) * 16 * bs +
                     16 * u0 + static_cast<std::size_t>(r % 16) * unit + (o - u0);
              }
              ++checked;
              mismatched += phys[at] != mirror[logical];
            }
      CHECK(checked == n);
      CHECK(mismatched == 0);
      if (tiled && g.m >= 16) CHECK(std::memcmp(phys, mirror.data(), n) != 0);

      // random ranges written and read back, memsets, and views
      for (int trial = 0; trial < 60; ++trial) {
        const std::size_t a = rng() % n, len = 1 + rng() % (n - a);
        if (trial % 3 == 2) {
          const auto v = static_cast<std::uint8_t>(rng());
          buf->memset_tensor(w, v, a, len);
          std::memset(mirror.data() + a, v, len);
        } else {
          const auto src = random_bytes(len, rng);
          buf->set_tensor(w, src.data(), a, len);
          std::memcpy(mirror.data() + a, src.data(), len);
        }
        const std::size_t b0 = rng() % n, blen = 1 + rng() % (n - b0);
        std::vector<unsigned char> part(blen);
        buf->get_tensor(w, part.data(), b0, blen);
        CHECK(std::memcmp(part.data(), mirror.data() + b0, blen) == 0);
      }
      buf->get_tensor(w, got.data(), 0, n);
      CHECK(got == mirror);
      // a view of rows 3 .. m-1 of matrix 0, read and written through the buffer
      tensor* v = view_2d(meta, w, g.k, g.m - 3, w->nb[1], 3 * w->nb[1]);
      v->data = static_cast<char*>(w->data) + 3 * w->nb[1];
      v->buffer = w->buffer;
      std::vector<unsigned char> vb(v->nbytes());
      buf->get_tensor(v, vb.data(), 0, vb.size());
      CHECK(std::memcmp(vb.data(), mirror.data() + 3 * rs, vb.size()) == 0);
      const auto src = random_bytes(vb.size(), rng);
      buf->set_tensor(v, src.data(), 0, src.size());
      std::memcpy(mirror.data() + 3 * rs, src.data(), src.size());
      buf->get_tensor(w, got.data(), 0, n);
      CHECK(got == mirror);
      buf->clear(0x5a);
      buf->get_tensor(w, got.data(), 0, n);
      CHECK(got == std::vector<unsigned char>(n, 0x5a));
    }
}

namespace {

// y = mul_mat(w, x) with w in ordinary memory and again in CPU_TILED memory (and the planted
// control: w's plain bytes copied raw into CPU_TILED memory); the results' bytes.
struct matmul_case {
  std::int64_t k, m, n, ne2, a2;
};

struct results {
  std::vector<unsigned char> plain, tiled, raw;
};

results run_mul_mat(type t, const matmul_case& c, int threads, std::mt19937& rng) {
  context ctx({64u << 20, nullptr, false});
  tensor* x = ctx.new_tensor_3d(type::f32, c.k, c.n, c.ne2);
  fill_f32(x, rng);
  context meta({1u << 20, nullptr, true});
  const auto [w, wt, bytes, buf] = weight_in_both(ctx, meta, t, c.k, c.m, c.a2, rng);
  tensor* wr = meta.new_tensor_3d(t, c.k, c.m, c.a2);
  auto buf_raw = place_in_one_buffer(std::vector<tensor*>{wr}, cpu_tiled_buffer_type());
  std::memcpy(wr->data, bytes.data(), bytes.size());  // no conversion: the planted control

  results out;
  cpu::runner run(threads);
  for (tensor* weight : {w, wt, wr}) {
    tensor* y = mul_mat(ctx, weight, x);
    graph g;
    g.build_forward_expand(y);
    run.compute(g);
    const auto* p = static_cast<const unsigned char*>(y->data);
    (weight == w ? out.plain : weight == wt ? out.tiled : out.raw).assign(p, p + y->nbytes());
  }
  return out;
}

}  // namespace

TEST_CASE("mul_mat reads a CPU_TILED weight in place: the same bits as ordinary memory", "[cpu][tiled][matmul]") {
  std::mt19937 rng(11);
  const matmul_case cases[] = {
      {64, 16, 1, 1, 1},   {256, 37, 1, 1, 1},   {256, 48, 3, 1, 1},     {512, 33, 8, 1, 1},
      {4096, 64, 1, 1, 1}, {256, 40, 19, 1, 1},  {256, 32, 2, 3, 1},     {256, 32, 5, 4, 2},
      {2048, 80, 64, 1, 1}, {32, 16, 7, 1, 1},
  };
  for (type t : tiled_types)
    for (const matmul_case& c : cases)
      for (int threads : {1, 2}) {
        if (c.k % block_size(t) != 0) continue;
        INFO(type_label(t) << " k " << c.k << " m " << c.m << " n " << c.n << " slabs " << c.ne2 << " weight matrices "
                           << c.a2 << ", " << threads << " thread(s)");
        const results r = run_mul_mat(t, c, threads, rng);
        CHECK(r.tiled == r.plain);
        if (c.m >= 16) CHECK(r.raw != r.plain);  // planted control
      }
}

TEST_CASE("mul_mat_id reads CPU_TILED experts in place: the same bits as ordinary memory", "[cpu][tiled][matmul]") {
  std::mt19937 rng(13);
  struct moe {
    std::int64_t k, m, n_as, n_used, n_tok;
  };
  for (type t : tiled_types)
    for (moe c : {moe{256, 32, 4, 2, 1}, moe{512, 40, 3, 2, 5}, moe{256, 48, 4, 2, 12}, moe{256, 16, 2, 1, 3},
                  moe{256, 32, 2, 2, 50}})
      for (int threads : {1, 2}) {
        INFO(type_label(t) << " k " << c.k << " m " << c.m << " experts " << c.n_as << " tokens " << c.n_tok << ", "
                           << threads << " thread(s)");
        context ctx({64u << 20, nullptr, false});
        tensor* x = ctx.new_tensor_3d(type::f32, c.k, 1, c.n_tok);
        tensor* ids = ctx.new_tensor_2d(type::i32, c.n_used, c.n_tok);
        fill_f32(x, rng);
        auto* id = static_cast<std::int32_t*>(ids->data);
        for (std::int64_t i = 0; i < ids->nelements(); ++i) id[i] = static_cast<std::int32_t>(rng() % c.n_as);
        context meta({1u << 20, nullptr, true});
        const auto [w, wt, bytes, buf] = weight_in_both(ctx, meta, t, c.k, c.m, c.n_as, rng);
        cpu::runner run(threads);
        std::vector<unsigned char> got[2];
        for (int j = 0; j < 2; ++j) {
          tensor* y = mul_mat_id(ctx, j ? wt : w, x, ids);
          graph g;
          g.build_forward_expand(y);
          run.compute(g);
          got[j].assign(static_cast<const unsigned char*>(y->data), static_cast<const unsigned char*>(y->data) + y->nbytes());
        }
        CHECK(got[1] == got[0]);
      }
}

TEST_CASE("the scheduler reads a CPU_TILED weight in place for mul_mat and stages it for other readers",
          "[cpu][tiled][sched]") {
  std::mt19937 rng(17);
  for (type t : tiled_types) {
    INFO(type_label(t));
    const std::int64_t k = 256, m = 40, n = 3;
    context ctx({16u << 20, nullptr, false});
    context meta({1u << 20, nullptr, true});
    const auto [w, wt, bytes, buf] = weight_in_both(ctx, meta, t, k, m, 1, rng);

    std::vector<unsigned char> want, got;
    int copies[2] = {0, 0};
    for (int j = 0; j < 2; ++j) {
      context gctx({16u << 20, nullptr, true});
      tensor* x = gctx.new_tensor_2d(type::f32, k, n);
      tensor* rows = gctx.new_tensor_1d(type::i32, 4);
      tensor* weight = j ? wt : w;
      tensor* y = mul_mat(gctx, weight, x);      // reads the weight in place
      tensor* e = get_rows(gctx, weight, rows);  // staged out of CPU_TILED through get_tensor
      tensor* out = add(gctx, y, mul_mat(gctx, e, x));
      graph g;
      g.build_forward_expand(out);
      cpu_backend cpu(2);
      sched sc({&cpu});
      sc.alloc_graph(g);
      std::mt19937 in(5);
      fill_f32(x, in);
      const std::int32_t r[4] = {0, 17, 39, 16};
      std::memcpy(rows->data, r, sizeof r);
      sc.compute(g);
      copies[j] = sc.n_copies_last();
      (j ? got : want).assign(static_cast<const unsigned char*>(out->data),
                              static_cast<const unsigned char*>(out->data) + out->nbytes());
    }
    CHECK(copies[0] == 0);
    CHECK(copies[1] == 1);  // get_rows's weight; mul_mat reads it in place
    CHECK(got == want);
  }
}

TEST_CASE("the CPU runner alone refuses any read of the tiled layout but a matmul weight's", "[cpu][tiled]") {
  std::mt19937 rng(19);
  context ctx({16u << 20, nullptr, false});
  context meta({1u << 20, nullptr, true});
  tensor* wt = meta.new_tensor_2d(type::q4_0, 64, 32);
  tensor* wf = meta.new_tensor_2d(type::f32, 64, 32);  // another format: stored plain, read by anything
  auto buf = place_in_one_buffer(std::vector<tensor*>{wt, wf}, cpu_tiled_buffer_type());
  const auto bytes = random_weights(wt, rng);
  buf->set_tensor(wt, bytes.data(), 0, bytes.size());
  buf->memset_tensor(wf, 0, 0, wf->nbytes());
  tensor* rows = ctx.new_tensor_1d(type::i32, 2);
  std::memset(rows->data, 0, rows->nbytes());
  cpu::runner run(1);
  {
    graph g;
    g.build_forward_expand(get_rows(ctx, wt, rows));
    CHECK_THROWS_WITH(run.compute(g), Catch::Contains("from CPU_TILED memory, stored tiled"));
  }
  {
    graph g;
    g.build_forward_expand(mul_mat(ctx, view_2d(ctx, wt, 64, 16, wt->nb[1], 0), ctx.new_tensor_2d(type::f32, 64, 1)));
    for (tensor* n : g.nodes())
      if (n->view_src && !n->data) {
        n->data = static_cast<char*>(n->view_src->data) + n->view_offs;
        n->buffer = n->view_src->buffer;
      }
    CHECK_THROWS_WITH(run.compute(g), Catch::Contains("from CPU_TILED memory, stored tiled"));  // a view of it
  }
  {
    graph g;
    tensor* y = get_rows(ctx, wf, rows);
    g.build_forward_expand(y);
    run.compute(g);
    CHECK(static_cast<const float*>(y->data)[0] == 0.0f);
  }
}
