// SPDX-License-Identifier: MIT
// Data movement ops against the reference: dup, cpy, cont, get_rows, set_rows, repeat,
// concat. Moving or converting data has one right answer, so the bar is bit equality
// everywhere the reference's bits are defined by the source bits: float <-> float
// conversions, decoding a block format, byte copies. Encoding into a block format is
// gk's own search (format.hpp's encode_row<W>): there the bar is gk's bytes equal to
// encode_row<W> of the same rows, and gk's reconstruction error at most 1.02 x the
// reference's over the tensor (q8_0's max-abs rule is shared, so its bytes must agree).
#include <catch2/catch.hpp>

#include <cstdio>
#include <functional>
#include <vector>

#include "harness.hpp"

using gk_test::op_pair;
using gk_test::tpair;

namespace {

constexpr int thread_counts[] = {2, 3, 7};

bool exact(const gk_test::diff& d) { return d.mismatches == 0 && d.nan_mismatch == 0; }

void report(const std::string& what, const gk_test::diff& d) {
  std::printf("%-52s max_abs=%.3g mismatches=%lld / %lld\n", what.c_str(), d.max_abs,
              static_cast<long long>(d.mismatches), static_cast<long long>(d.n));
}

std::vector<unsigned char> bytes_of(const gk::tensor* t) {
  const auto* p = static_cast<const unsigned char*>(t->data);
  return {p, p + t->nbytes()};
}

// Runs gk at 1 thread and at 2/3/7, restoring the output's storage before each run
// (set_rows and cpy write into existing storage), and checks the output bytes agree.
void check_threads(op_pair& p, const tpair& y, const std::string& what) {
  gk::tensor* out = y.g;
  const auto before = bytes_of(out);
  auto run = [&](int nt) {
    std::memcpy(out->data, before.data(), before.size());
    p.compute_gk(y, nt);
    return bytes_of(out);
  };
  const auto one = run(1);
  for (int nt : thread_counts) {
    INFO(what << " at " << nt << " threads");
    CHECK(run(nt) == one);
  }
}

tpair permuted(op_pair& p, const tpair& t, int a0, int a1, int a2, int a3) {
  return {gk::permute(p.g, t.g, a0, a1, a2, a3), ggml_permute(p.r, t.r, a0, a1, a2, a3)};
}

const gk::type float_types[] = {gk::type::f32, gk::type::f16, gk::type::bf16};

// Formats the reference can encode on its CPU (a from_float in its CPU traits).
const gk::type encodable[] = {gk::type::q4_0, gk::type::q4_1, gk::type::q5_0,  gk::type::q5_1,   gk::type::q8_0,
                              gk::type::q8_1, gk::type::q2_K, gk::type::q3_K,  gk::type::q4_K,   gk::type::q5_K,
                              gk::type::q6_K, gk::type::q8_K, gk::type::iq4_nl, gk::type::iq4_xs, gk::type::mxfp4,
                              gk::type::nvfp4, gk::type::tq1_0, gk::type::tq2_0, gk::type::q1_0,  gk::type::q2_0};

// Every block format gk decodes that the reference decodes too (q8_1 and q8_K are
// activation formats with no to_float there).
std::vector<gk::type> decodable() {
  std::vector<gk::type> v;
  for (int i = 0; i < gk::type_count; ++i) {
    const auto t = static_cast<gk::type>(i);
    if (!gk::is_valid(t) || gk::block_size(t) == 1) continue;
    if (!gk::formats::visit(t, [](auto) {})) continue;
    if (!ggml_get_type_traits(static_cast<ggml_type>(t))->to_float) continue;
    v.push_back(t);
  }
  return v;
}

double sq_err(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
  return s;
}

// Checks an encoded output: bytes are gk's encode_row of the source rows, and the error
// against the source is at most 1.02x the reference's (bytes equal for q8_0).
void check_encoded(const tpair& y, const std::vector<float>& src, const std::string& what) {
  const gk::tensor* g = y.g;
  const std::int64_t n0 = g->ne[0];
  std::vector<unsigned char> want(g->row_bytes());
  bool bytes_ok = true;
  for (std::int64_t r = 0; r < g->nrows(); ++r) {
    gk::cpu::encode_row_any(g->type, src.data() + r * n0, want.data(), n0);
    std::int64_t i1, i2, i3;
    gk::cpu::copy::detail::row_coords(g->ne, r, i1, i2, i3);
    if (std::memcmp(g->at(i1, i2, i3), want.data(), want.size()) != 0) bytes_ok = false;
  }
  INFO(what);
  CHECK(bytes_ok);
  const double eg = sq_err(gk_test::read_all(g), src), er = sq_err(gk_test::read_all(gk_test::as_gk(y.r)), src);
  const double ratio = er > 0 ? eg / er : (eg == 0 ? 1.0 : 1e9);
  std::printf("%-52s err gk/ref=%.4f (gk %.3g ref %.3g)%s\n", what.c_str(), ratio, eg, er, bytes_ok ? "" : " BYTES DIFFER");
  CHECK(ratio <= 1.02);
  if (g->type == gk::type::q8_0) CHECK(std::memcmp(g->data, y.r->data, g->nbytes()) == 0);
}

}  // namespace

TEST_CASE("cpy between float types, any strides", "[copy][cpy]") {
  for (auto ta : float_types)
    for (auto tb : float_types) {
      op_pair p;
      // dim 0 strided source (a permuted view), strided destination (a transposed view).
      auto a0 = p.input(ta, {7, 33, 3, 2}, -3, 3);
      auto a = permuted(p, a0, 1, 0, 2, 3);  // [33, 7, 3, 2], nb0 = row stride
      auto b0 = p.input(tb, {7, 33, 3, 2});
      tpair b{gk::transpose(p.g, b0.g), ggml_transpose(p.r, b0.r)};  // [33, 7, 3, 2], strided
      auto y = p.out(gk::cpy(p.g, a.g, b.g), ggml_cpy(p.r, a.r, b.r));
      REQUIRE(gk_test::same_shape(y));
      auto d = p.run(y);
      const std::string what = "cpy " + std::string(gk::name(ta)) + " -> " + std::string(gk::name(tb)) + " strided";
      report(what, d);
      CHECK(exact(d));
      check_threads(p, y, what);

      // different shapes, same element count: flat order
      op_pair p2;
      auto c = p2.input(ta, {257, 3});
      auto e = p2.input(tb, {3, 257});
      auto y2 = p2.out(gk::cpy(p2.g, c.g, e.g), ggml_cpy(p2.r, c.r, e.r));
      auto d2 = p2.run(y2);
      report("cpy " + std::string(gk::name(ta)) + " [257,3] -> " + std::string(gk::name(tb)) + " [3,257]", d2);
      CHECK(exact(d2));
    }
}

TEST_CASE("cpy f32/f16/bf16 into block formats", "[copy][cpy][encode]") {
  for (auto tb : encodable) {
    for (auto ta : float_types) {
      op_pair p;
      const std::int64_t n0 = 2 * gk::block_size(tb);
      auto a = p.input(ta, {n0, 5, 3}, -2, 2);
      auto b = p.input(tb, {n0, 5, 3});
      auto y = p.out(gk::cpy(p.g, a.g, b.g), ggml_cpy(p.r, a.r, b.r));
      p.run(y);
      check_encoded(y, gk_test::read_all(a.g),
                    "cpy " + std::string(gk::name(ta)) + " -> " + std::string(gk::name(tb)));
      check_threads(p, y, "cpy -> " + std::string(gk::name(tb)));
    }
  }
}

TEST_CASE("cpy from block formats to f32 decodes exactly", "[copy][cpy][decode]") {
  for (auto ta : decodable()) {
    op_pair p;
    const std::int64_t n0 = 2 * gk::block_size(ta);
    auto a = p.input(ta, {n0, 3, 2}, -2, 2);
    auto b = p.input(gk::type::f32, {n0, 3, 2});
    auto y = p.out(gk::cpy(p.g, a.g, b.g), ggml_cpy(p.r, a.r, b.r));
    auto d = p.run(y);
    report("cpy " + std::string(gk::name(ta)) + " -> f32", d);
    CHECK(exact(d));
  }
}

TEST_CASE("dup and cont of strided tensors; cont_Nd reshapes", "[copy][cont]") {
  for (auto t : {gk::type::f32, gk::type::f16, gk::type::bf16, gk::type::i32}) {
    op_pair p;
    auto a0 = p.input(t, {33, 7, 5, 2}, -100, 100);
    auto a = permuted(p, a0, 2, 0, 3, 1);  // every axis moved
    auto y = p.out(gk::cont(p.g, a.g), ggml_cont(p.r, a.r));
    auto d = p.run(y);
    report("cont " + std::string(gk::name(t)) + " permuted(2,0,3,1)", d);
    CHECK(exact(d));
    check_threads(p, y, "cont");

    auto y4 = p.out(gk::cont_4d(p.g, a.g, 11, 3, 35, 2), ggml_cont_4d(p.r, a.r, 11, 3, 35, 2));
    auto d4 = p.run(y4);
    report("cont_4d " + std::string(gk::name(t)) + " -> [11,3,35,2]", d4);
    CHECK(exact(d4));
    check_threads(p, y4, "cont_4d");

    auto y1 = p.out(gk::cont_1d(p.g, a.g, a0.g->nelements()), ggml_cont_1d(p.r, a.r, a0.r->ne[0] * 70));
    CHECK(exact(p.run(y1)));
    auto y2 = p.out(gk::cont_2d(p.g, a.g, 35, 66), ggml_cont_2d(p.r, a.r, 35, 66));
    CHECK(exact(p.run(y2)));
    auto y3 = p.out(gk::cont_3d(p.g, a.g, 1, 231, 10), ggml_cont_3d(p.r, a.r, 1, 231, 10));
    CHECK(exact(p.run(y3)));

    auto yd = p.out(gk::dup(p.g, a.g), ggml_dup(p.r, a.r));
    auto dd = p.run(yd);
    report("dup " + std::string(gk::name(t)) + " permuted", dd);
    CHECK(exact(dd));
  }
  // a block format copied as bytes
  op_pair p;
  auto a = p.input(gk::type::q4_K, {512, 3, 2});
  auto y = p.out(gk::cont_2d(p.g, a.g, 256, 12), ggml_cont_2d(p.r, a.r, 256, 12));
  p.run(y);
  CHECK(std::memcmp(y.g->data, y.r->data, y.g->nbytes()) == 0);
}

TEST_CASE("get_rows from every type", "[copy][get_rows]") {
  std::vector<gk::type> types = {gk::type::f32, gk::type::f16, gk::type::bf16, gk::type::i32};
  for (auto t : decodable()) types.push_back(t);
  for (auto t : types) {
    op_pair p;
    const std::int64_t n0 = gk::block_size(t) == 1 ? 33 : 2 * gk::block_size(t);
    auto a = p.input(t, {n0, 9, 3, 2}, -50, 50);
    auto b = p.input(gk::type::i32, {5, 3, 2});
    p.set_ints(b, {0, 8, 8, 3, 1, 2, 2, 2, 0, 7, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0, 8, 7, 6, 5, 4, 1, 3, 5, 7, 2});
    auto y = p.out(gk::get_rows(p.g, a.g, b.g), ggml_get_rows(p.r, a.r, b.r));
    REQUIRE(gk_test::same_shape(y));
    auto d = p.run(y);
    report("get_rows " + std::string(gk::name(t)), d);
    CHECK(exact(d));
    check_threads(p, y, "get_rows " + std::string(gk::name(t)));
  }
}

TEST_CASE("set_rows into float and block destinations", "[copy][set_rows]") {
  std::vector<gk::type> dsts = {gk::type::f32, gk::type::f16, gk::type::bf16};
  for (auto t : encodable)
    if (t != gk::type::q8_K) dsts.push_back(t);  // q8_K has no to_float in the reference
  for (auto td : dsts)
    for (auto ti : {gk::type::i64, gk::type::i32})
      for (auto ts : {gk::type::f32, gk::type::f16}) {
        op_pair p;
        const std::int64_t n0 = gk::block_size(td) == 1 ? 37 : gk::block_size(td);
        auto a = p.input(td, {n0, 11, 4, 2});
        auto b = p.input(ts, {n0, 5, 4, 2}, -2, 2);
        auto c = p.input(ti, {5, 2, 1});  // broadcast over heads (4 % 2) and batches (2 % 1)
        const std::vector<std::int64_t> ids = {10, 0, 3, 7, 3, 1, 9, 2, 9, 5};  // duplicates: the later row wins
        p.set_ints(c, ids);
        auto id = [&](std::int64_t i, std::int64_t i2) { return ids[static_cast<std::size_t>(i + 5 * (i2 % 2))]; };
        auto y = p.out(gk::set_rows(p.g, a.g, b.g, c.g), ggml_set_rows(p.r, a.r, b.r, c.r));
        REQUIRE(gk_test::same_shape(y));
        const auto before = gk_test::read_all(a.g);
        auto d = p.run(y);
        const std::string what = "set_rows " + std::string(gk::name(ts)) + " -> " + std::string(gk::name(td)) +
                                 " idx " + std::string(gk::name(ti));
        if (gk::block_size(td) == 1) {
          report(what, d);
          CHECK(exact(d));
        } else {
          // rows written are gk's encodes of the source rows; others keep their bytes
          const auto src = gk_test::read_all(b.g);
          std::vector<unsigned char> want(y.g->row_bytes());
          bool ok = true;
          for (std::int64_t i3 = 0; i3 < 2; ++i3)
            for (std::int64_t i2 = 0; i2 < 4; ++i2)
              for (std::int64_t i = 0; i < 5; ++i) {
                const std::int64_t row = id(i, i2);
                // the later duplicate wins: skip a source row overwritten later
                bool later = false;
                for (std::int64_t j = i + 1; j < 5; ++j)
                  if (id(j, i2) == row) later = true;
                if (later) continue;
                gk::cpu::encode_row_any(td, src.data() + ((i3 * 4 + i2) * 5 + i) * n0, want.data(), n0);
                if (std::memcmp(y.g->at(row, i2, i3), want.data(), want.size()) != 0) ok = false;
              }
          INFO(what);
          CHECK(ok);
          // error over the rows the reference encoded from the same source: compare decoded
          // outputs to the expected f32 tensor (source rows scattered, others unchanged)
          std::vector<float> expect = before;
          const auto got_b = src;
          for (std::int64_t i3 = 0; i3 < 2; ++i3)
            for (std::int64_t i2 = 0; i2 < 4; ++i2)
              for (std::int64_t i = 0; i < 5; ++i) {
                const std::int64_t row = id(i, i2);
                for (std::int64_t k = 0; k < n0; ++k)
                  expect[static_cast<std::size_t>(((i3 * 4 + i2) * 11 + row) * n0 + k)] =
                      got_b[static_cast<std::size_t>(((i3 * 4 + i2) * 5 + i) * n0 + k)];
              }
          const double eg = sq_err(gk_test::read_all(y.g), expect);
          const double er = sq_err(gk_test::read_all(gk_test::as_gk(y.r)), expect);
          const double ratio = er > 0 ? eg / er : (eg == 0 ? 1.0 : 1e9);
          std::printf("%-52s err gk/ref=%.4f (gk %.3g ref %.3g)\n", what.c_str(), ratio, eg, er);
          CHECK(ratio <= 1.02);
          if (td == gk::type::q8_0) CHECK(std::memcmp(y.g->data, y.r->data, y.g->nbytes()) == 0);
        }
        check_threads(p, y, what);
      }
}

TEST_CASE("repeat", "[copy][repeat]") {
  for (auto t : {gk::type::f32, gk::type::f16, gk::type::bf16, gk::type::i32, gk::type::i16}) {
    op_pair p;
    auto a = p.input(t, {7, 1, 3, 2}, -100, 100);
    auto b = p.input(gk::type::f32, {21, 5, 6, 2});
    auto y = p.out(gk::repeat(p.g, a.g, b.g), ggml_repeat(p.r, a.r, b.r));
    auto d = p.run(y);
    report("repeat " + std::string(gk::name(t)) + " [7,1,3,2] -> [21,5,6,2]", d);
    CHECK(exact(d));
    check_threads(p, y, "repeat");
    auto a2 = permuted(p, p.input(t, {1, 33, 2, 1}), 0, 2, 1, 3);  // [1, 2, 33, 1], strided
    auto y2 = p.out(gk::repeat_4d(p.g, a2.g, 4, 4, 33, 3), ggml_repeat_4d(p.r, a2.r, 4, 4, 33, 3));
    auto d2 = p.run(y2);
    report("repeat_4d " + std::string(gk::name(t)) + " strided -> [4,4,33,3]", d2);
    CHECK(exact(d2));
  }
}

TEST_CASE("concat along every dim, strided inputs", "[copy][concat]") {
  for (auto t : {gk::type::f32, gk::type::f16, gk::type::i32, gk::type::q8_0})
    for (int dim = 0; dim < 4; ++dim) {
      op_pair p;
      const std::int64_t n0 = gk::block_size(t) == 1 ? 5 : 64;
      std::array<std::int64_t, 4> na{n0, 3, 4, 2}, nb = na;
      nb[static_cast<std::size_t>(dim)] = dim == 0 ? (gk::block_size(t) == 1 ? 3 : 32) : 1 + dim;
      auto a = p.input(t, na, -100, 100);
      tpair b;
      if (gk::block_size(t) == 1) {
        // b as a transposed view of a tensor stored the other way round
        std::array<std::int64_t, 4> nt{nb[1], nb[0], nb[2], nb[3]};
        auto bt = p.input(t, nt, -100, 100);
        b = {gk::transpose(p.g, bt.g), ggml_transpose(p.r, bt.r)};
      } else {
        b = p.input(t, nb);
      }
      auto y = p.out(gk::concat(p.g, a.g, b.g, dim), ggml_concat(p.r, a.r, b.r, dim));
      REQUIRE(gk_test::same_shape(y));
      auto d = p.run(y);
      const std::string what = "concat " + std::string(gk::name(t)) + " dim " + std::to_string(dim);
      if (gk::block_size(t) == 1) {
        report(what, d);
        CHECK(exact(d));
      } else {
        std::printf("%-52s bytes %s\n", what.c_str(),
                    std::memcmp(y.g->data, y.r->data, y.g->nbytes()) == 0 ? "equal" : "DIFFER");
        CHECK(std::memcmp(y.g->data, y.r->data, y.g->nbytes()) == 0);
      }
      check_threads(p, y, what);
    }
}

TEST_CASE("bad shapes throw gk::error", "[copy][errors]") {
  gk::context ctx({16u << 20, nullptr, false});
  auto* a = ctx.new_tensor_2d(gk::type::f32, 8, 4);
  auto* b = ctx.new_tensor_2d(gk::type::f32, 8, 5);
  auto* idx = ctx.new_tensor_1d(gk::type::i32, 3);
  auto* idx_f = ctx.new_tensor_1d(gk::type::f32, 3);
  auto* i64 = ctx.new_tensor_1d(gk::type::i64, 3);
  CHECK_THROWS_AS(gk::cpy(ctx, a, b), gk::error);
  CHECK_THROWS_AS(gk::cont_2d(ctx, a, 5, 7), gk::error);
  CHECK_THROWS_AS(gk::get_rows(ctx, a, idx_f), gk::error);
  CHECK_THROWS_AS(gk::get_rows(ctx, a, ctx.new_tensor_2d(gk::type::i32, 3, 2)), gk::error);
  CHECK_THROWS_AS(gk::set_rows(ctx, a, ctx.new_tensor_2d(gk::type::f32, 7, 3), i64), gk::error);
  CHECK_THROWS_AS(gk::set_rows(ctx, a, ctx.new_tensor_2d(gk::type::f32, 8, 2), i64), gk::error);
  CHECK_THROWS_AS(gk::set_rows(ctx, a, ctx.new_tensor_2d(gk::type::f32, 8, 3), idx_f), gk::error);
  CHECK_THROWS_AS(gk::repeat(ctx, b, a), gk::error);
  CHECK_THROWS_AS(gk::repeat_4d(ctx, a, 12, 4, 1, 1), gk::error);
  CHECK_THROWS_AS(gk::concat(ctx, a, b, 0), gk::error);
  CHECK_THROWS_AS(gk::concat(ctx, a, b, 4), gk::error);
  CHECK_THROWS_AS(gk::concat(ctx, a, ctx.new_tensor_2d(gk::type::f16, 8, 5), 1), gk::error);
  CHECK_NOTHROW(gk::concat(ctx, a, b, 1));
  // an index outside the rows fails at compute time, naming the op
  auto* bad = ctx.new_tensor_1d(gk::type::i32, 1);
  *static_cast<std::int32_t*>(bad->data) = 4;
  gk::graph g;
  g.build_forward_expand(gk::get_rows(ctx, a, bad));
  CHECK_THROWS_AS(gk::cpu::compute(g, 1), gk::error);
}

// Planted controls: broken variants written here, judged by the same comparison, must fail.
TEST_CASE("planted controls go red", "[copy][controls]") {
  op_pair p;
  auto a = p.input(gk::type::f16, {33, 9, 2, 1});
  auto b = p.input(gk::type::i32, {4, 2, 1});
  p.set_ints(b, {0, 8, 3, 3, 1, 2, 7, 5});
  auto y = p.out(gk::get_rows(p.g, a.g, b.g), ggml_get_rows(p.r, a.r, b.r));
  REQUIRE(exact(p.run(y)));
  // get_rows with an off-by-one index (idx + 1, wrapped)
  for (std::int64_t i2 = 0; i2 < 2; ++i2)
    for (std::int64_t i1 = 0; i1 < 4; ++i1) {
      const std::int32_t idx = (*reinterpret_cast<const std::int32_t*>(b.g->at(i1, i2)) + 1) % 9;
      float* dst = reinterpret_cast<float*>(y.g->at(i1, i2));
      gk::cpu::row_read(a.g, idx, i2, 0, dst);
    }
  auto dr = gk_test::compare(y.g, gk_test::as_gk(y.r));
  report("CONTROL get_rows off-by-one index", dr);
  CHECK_FALSE(exact(dr));

  // concat that drops the last slice of b along dim 2 (leaves it as it was: zero)
  op_pair q;
  auto ca = q.input(gk::type::f32, {6, 3, 2, 2});
  auto cb = q.input(gk::type::f32, {6, 3, 3, 2});
  auto cy = q.out(gk::concat(q.g, ca.g, cb.g, 2), ggml_concat(q.r, ca.r, cb.r, 2));
  REQUIRE(exact(q.run(cy)));
  for (std::int64_t i3 = 0; i3 < 2; ++i3)
    for (std::int64_t i1 = 0; i1 < 3; ++i1) std::memset(cy.g->at(i1, 4, i3), 0, 6 * sizeof(float));
  auto dc = gk_test::compare(cy.g, gk_test::as_gk(cy.r));
  report("CONTROL concat dropping the last slice", dc);
  CHECK_FALSE(exact(dc));

  // f32 -> f16 copy that drops the tail element of each row
  op_pair c;
  auto fa = c.input(gk::type::f32, {17, 4});
  auto fb = c.input(gk::type::f16, {17, 4});
  auto fy = c.out(gk::cpy(c.g, fa.g, fb.g), ggml_cpy(c.r, fa.r, fb.r));
  REQUIRE(exact(c.run(fy)));
  for (std::int64_t i1 = 0; i1 < 4; ++i1) {
    auto* h = reinterpret_cast<std::uint16_t*>(fy.g->at(i1));
    h[16] = 0;
  }
  auto df = gk_test::compare(fy.g, gk_test::as_gk(fy.r));
  report("CONTROL cpy f32->f16 dropping the tail element", df);
  CHECK_FALSE(exact(df));

  // an encoder worse than the reference's by more than 2%: q4_0 rows with one block's
  // scale nudged, judged by the same error ratio
  op_pair e;
  auto ea = e.input(gk::type::f32, {64, 8});
  auto eb = e.input(gk::type::q4_0, {64, 8});
  auto ey = e.out(gk::cpy(e.g, ea.g, eb.g), ggml_cpy(e.r, ea.r, eb.r));
  e.run(ey);
  auto* blk = static_cast<gk::formats::q4_0::block*>(ey.g->data);
  for (int i = 0; i < 16; ++i) blk[i].d = gk::to_f16(gk::to_f32(blk[i].d) * 1.25f);
  const auto src = gk_test::read_all(ea.g);
  const double ratio = sq_err(gk_test::read_all(ey.g), src) / sq_err(gk_test::read_all(gk_test::as_gk(ey.r)), src);
  std::printf("%-52s err gk/ref=%.4f\n", "CONTROL q4_0 encode with scales off by 25%", ratio);
  CHECK(ratio > 1.02);
}
