// SPDX-License-Identifier: MIT
// mul_mat's tiling on trial. The check is a naive in-test matmul that calls the same dot
// kernel and the same activation encoder per output element, so the two must agree bit
// for bit and only the index arithmetic (tiles, tails, slabs, broadcast, the panel cache)
// is being tested. Shapes include ragged row and column tails, one column block spanning
// several slabs (where a panel cached on the column block alone goes stale), weight
// broadcast over dims 2 and 3, and one column (decode, through the 16-row tiles where a
// format has them) with ragged rows; from 8 columns the lattice formats' and q3_K's row
// blocks go decoded once per task (avx2; avx512: the lattice formats from 16 columns, q3_K
// and q6_K from 32, q2_K from 48), whole ones, the ragged last through the tile. Three
// planted tiling faults must each fail the check.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

#include "gk/gk.hpp"
#include "gk/simd/fma_range.hpp"

using namespace gk;

namespace {

struct shape {
  std::int64_t k, m, n, ne2, ne3, a2, a3;  // a2/a3: the weight's dims 2/3 (broadcast)
};

const shape shapes[] = {
    {64, 16, 8, 1, 1, 1, 1},    // exactly one tile
    {64, 37, 5, 1, 1, 1, 1},    // ragged rows and columns
    {256, 33, 19, 1, 1, 1, 1},  // several column blocks, ragged
    {64, 20, 3, 3, 2, 1, 1},    // one column block, six slabs, weight broadcast to all
    {64, 17, 9, 4, 2, 2, 1},    // broadcast r2 = 2
    {256, 5, 1, 2, 3, 1, 3},    // decode-shaped, broadcast r2 = 2, r3 = 1
    {256, 37, 1, 1, 1, 1, 1},   // decode through 16-row tiles, ragged rows
    {512, 67, 1, 3, 1, 1, 1},   // the same over three slabs of one weight
    {4096, 200, 19, 2, 1, 1, 1},  // rows long enough for several super-blocks of rows (task_order)
    {512, 48, 13, 2, 2, 2, 1},    // whole row blocks only, two column blocks, broadcast r3 = 2 (decoded rows)
    {352, 32, 16, 1, 1, 1, 1},    // the 32-weight formats only: decoded rows over a chunk of 8 blocks and a tail of 3
    {256, 37, 49, 1, 1, 1, 1},    // decoded rows from 48 columns (avx512 q2_K), a ragged row block and column
    // the float formats only (k not a multiple of 32): a tail of k past 16-element steps and
    // past the f16/bf16 task tile's 256-element chunks
    {300, 35, 11, 1, 1, 1, 1},
    {1000, 48, 17, 2, 1, 1, 1},
};

struct fixture {
  context ctx{context_params{64u << 20}};
  tensor *a, *b, *y;
  fixture(type wt, const shape& s, std::uint64_t seed) {
    a = ctx.new_tensor_4d(wt, s.k, s.m, s.a2, s.a3);
    b = ctx.new_tensor_4d(type::f32, s.k, s.n, s.ne2, s.ne3);
    std::mt19937 rng(static_cast<unsigned>(seed));
    std::normal_distribution<float> g;
    std::vector<float> row(static_cast<std::size_t>(s.k));
    for (std::int64_t r = 0; r < a->nrows(); ++r) {
      for (auto& v : row) v = g(rng);
      formats::visit(wt, [&]<class W>(std::type_identity<W>) {
        encode_row<W>(row.data(), reinterpret_cast<typename W::block*>(static_cast<char*>(a->data) + r * a->nb[1]),
                      s.k, nullptr);
      });
    }
    auto* bf = static_cast<float*>(b->data);
    for (std::int64_t i = 0; i < b->nelements(); ++i) bf[i] = g(rng);
    y = mul_mat(ctx, a, b);
  }
};

// The definition: every element on its own, the same encoder and dot.
template <class W>
std::vector<float> naive(const tensor* a, const tensor* b, const tensor* y) {
  using A = typename W::dot_type;
  const std::int64_t k = a->ne[0];
  std::vector<float> out(static_cast<std::size_t>(y->nelements()));
  std::vector<typename A::block> enc(gk::row_size(A::id, k) / sizeof(typename A::block));
  for (std::int64_t i3 = 0; i3 < y->ne[3]; ++i3)
    for (std::int64_t i2 = 0; i2 < y->ne[2]; ++i2)
      for (std::int64_t c = 0; c < y->ne[1]; ++c) {
        encode_row<A>(reinterpret_cast<const float*>(b->at(c, i2, i3)), enc.data(), k, nullptr);
        for (std::int64_t r = 0; r < y->ne[0]; ++r) {
          const auto* w = reinterpret_cast<const typename W::block*>(
              a->at(r, i2 / (y->ne[2] / a->ne[2]), i3 / (y->ne[3] / a->ne[3])));
          out[static_cast<std::size_t>(((i3 * y->ne[2] + i2) * y->ne[1] + c) * y->ne[0] + r)] =
              dot_kernel<W, simd::native>::row(w, enc.data(), k);
        }
      }
  return out;
}

// Runs one mul_mat kernel instantiation (possibly faulty) on nth threads.
template <class W, cpu::matmul::fault F>
void run_kernel(tensor* y, int nth) {
  cpu::threadpool pool(nth);
  std::vector<cpu::scratch> scr(static_cast<std::size_t>(nth));
  std::atomic<std::int64_t> counter{0};
  pool.run([&](int ith, int n) {
    cpu::exec ex;
    ex.ith = ith;
    ex.nth = n;
    ex.scr = &scr[static_cast<std::size_t>(ith)];
    ex.counter = &counter;
    cpu::matmul::mul_mat<W, simd::native, F>(ex, y);
  });
}

std::int64_t bit_mismatches(const tensor* y, const std::vector<float>& want) {
  std::int64_t bad = 0;
  const auto* got = static_cast<const float*>(y->data);
  for (std::size_t i = 0; i < want.size(); ++i) bad += std::memcmp(&got[i], &want[i], 4) != 0;
  return bad;
}

template <class W>
void check_format() {
  int si = 0;
  for (const shape& s : shapes) {
    if (s.k % W::block_size) continue;
    fixture f(W::id, s, 100 + si++);
    const auto want = naive<W>(f.a, f.b, f.y);
    for (int nth : {1, 2, 3, 4, 5, 7, 8, 16, 64}) {
      std::memset(f.y->data, 0xff, f.y->nbytes());  // NaN poison
      graph g;
      g.build_forward_expand(f.y);
      cpu::compute(g, nth);
      INFO(name(W::id) << " shape k=" << s.k << " m=" << s.m << " n=" << s.n << " slabs=" << s.ne2 << "x" << s.ne3
                       << " threads=" << nth);
      CHECK(bit_mismatches(f.y, want) == 0);
    }
  }
}

template <class W, cpu::matmul::fault F>
std::int64_t fault_mismatches() {
  std::int64_t total = 0;
  int si = 0;
  for (const shape& s : shapes) {
    if (s.k % W::block_size) continue;
    fixture f(W::id, s, 100 + si++);
    const auto want = naive<W>(f.a, f.b, f.y);
    for (int nth : {1, 3}) {
      std::memset(f.y->data, 0, f.y->nbytes());
      run_kernel<W, F>(f.y, nth);
      total += bit_mismatches(f.y, want);
    }
  }
  return total;
}

}  // namespace

TEST_CASE("mul_mat tiling equals the per-element definition at every thread count", "[cpu][matmul]") {
  check_format<formats::f32>();
  check_format<formats::f16>();
  check_format<formats::bf16>();
  check_format<formats::q4_0>();
  check_format<formats::q8_0>();
  check_format<formats::q5_0>();
  check_format<formats::q4_K>();
  check_format<formats::q5_K>();
  check_format<formats::iq4_nl>();
  check_format<formats::iq4_xs>();
  check_format<formats::mxfp4>();
  // the 16-row tiles of avx512/dot_tile_iq16.hpp (prompt; decode where the tile says so)
  check_format<formats::iq2_xxs>();
  check_format<formats::iq3_xxs>();
  check_format<formats::iq3_s>();
  check_format<formats::iq2_xs>();
  check_format<formats::iq2_s>();
  check_format<formats::iq1_s>();
  check_format<formats::iq1_m>();
  check_format<formats::q6_K>();
  check_format<formats::q3_K>();
  check_format<formats::q2_K>();
  // ternary: one or two columns split the decode tile's integer sum four ways
  check_format<formats::tq1_0>();
  check_format<formats::tq2_0>();
}

TEST_CASE("the unfaulted kernel passes the direct check (the controls' baseline)", "[cpu][matmul][control]") {
  CHECK(fault_mismatches<formats::q4_0, cpu::matmul::fault::none>() == 0);
}

TEST_CASE("planted control: a wrong tile offset fails", "[cpu][matmul][control]") {
  CHECK(fault_mismatches<formats::q4_0, cpu::matmul::fault::tile_offset>() > 0);
}

TEST_CASE("planted control: a dropped tail fails", "[cpu][matmul][control]") {
  CHECK(fault_mismatches<formats::q4_0, cpu::matmul::fault::dropped_tail>() > 0);
}

TEST_CASE("planted control: a panel cached on the column block alone fails", "[cpu][matmul][control]") {
  CHECK(fault_mismatches<formats::q4_0, cpu::matmul::fault::panel_key_cb_only>() > 0);
}

// bf16 products outside float's normal range: there a product rounds (or overflows) in the
// definition's mul and not in an FMA, so the task tiles (avx512/, avx2/dot_tile_float.hpp) must
// prove its products exact before it adds by FMA. Odd rows take the case's weights, even
// rows plain ones, so a row block of 16 holds both. Cases: 0 every product normal; 1 tiny
// (weights and activations scaled by 2^-66 and 2^-64: products near 2^-130, subnormal);
// 2 huge (activations 2^64, weights by 16-element group -0.875, 1.25, -1.25, 1.25, ... times
// 2^64: by mul every lane meets +inf and -inf, NaN; by FMA the lanes stay finite); 3 as 1 but
// the tiny weights' first 256 elements zero (the avx512 task decides by chunk of 256 where it
// checks the rows itself: the first chunk's products are exact, the second's not); 4 k 268
// (256 + a tail of 12, read under a mask), activations 2^63, weights 1.5 * 2^63 at element 0
// and -1.25 * 2^65 at element 256 (the tail), zero elsewhere: by mul lane 0 meets -inf, by FMA
// it ends at -1.75 * 2^127, so a range that misses the tail shows. Cases 5 and 6 are exact
// by FMA but not by the AVX512_BF16 pair dot (avx512 2-8 columns, where the CPU has it):
// 5 subnormal weights (g * 2^-130) against activations g * 2^100 (the pair dot reads the
// weights as zero); 6 weights 1.5 * 2^-63 at elements 0-15 and -1.125 * 2^-63 at 16-31,
// zero elsewhere, activations 1.25 * 2^-63: each lane's sum goes 1.875 * 2^-126, then
// 0.46875 * 2^-126, subnormal, which the pair dot flushes to zero. n: 9
// columns are two column blocks (the row block's range worked out once and kept), 2 to 8 one
// (on avx512 5-8 columns, and 2-4 by pairs, prove each chunk's products exact as they read
// it; 2-4 otherwise add by mul, add). Returns the mismatches against the definition over 1
// and 3 threads of the kernel with fault F.
template <cpu::matmul::fault F>
std::int64_t bf16_range_mismatches(int which, std::int64_t n = 9) {
  context ctx{context_params{16u << 20}};
  const std::int64_t k = which == 4 ? 268 : 300, m = 40;
  tensor* a = ctx.new_tensor_2d(type::bf16, k, m);
  tensor* b = ctx.new_tensor_2d(type::f32, k, n);
  std::mt19937 rng(11);
  std::normal_distribution<float> g;
  std::vector<float> row(static_cast<std::size_t>(k));
  for (std::int64_t r = 0; r < m; ++r) {
    for (std::int64_t i = 0; i < k; ++i) {
      float v = g(rng);
      if (r % 2 && which == 3 && i < 256) v = 0.0f;
      if (r % 2 && (which == 1 || which == 3)) v *= 0x1p-66f;
      if (r % 2 && which == 5) v *= 0x1p-130f;
      if (r % 2 && which == 6) v = i < 16 ? 1.5f * 0x1p-63f : i < 32 ? -1.125f * 0x1p-63f : 0.0f;
      if (r % 2 && which == 2) v = (i < 16 ? -0.875f : (i / 16) % 2 ? 1.25f : -1.25f) * 0x1p64f;
      if (r % 2 && which == 4) v = i == 0 ? 1.5f * 0x1p63f : i == 256 ? -1.25f * 0x1p65f : 0.0f;
      row[static_cast<std::size_t>(i)] = v;
    }
    encode_row<formats::bf16>(row.data(), reinterpret_cast<formats::bf16::block*>(a->at(r)), k);
  }
  for (std::int64_t i = 0; i < b->nelements(); ++i)
    static_cast<float*>(b->data)[i] = which == 2   ? 0x1p64f
                                      : which == 4 ? 0x1p63f
                                      : which == 5 ? g(rng) * 0x1p100f
                                      : which == 6 ? 1.25f * 0x1p-63f
                                      : which % 2  ? g(rng) * 0x1p-64f
                                                   : g(rng);
  tensor* y = mul_mat(ctx, a, b);
  const auto want = naive<formats::bf16>(a, b, y);
  std::int64_t bad = 0;
  for (int nth : {1, 3}) {
    std::memset(y->data, 0xff, y->nbytes());
    run_kernel<formats::bf16, F>(y, nth);
    bad += bit_mismatches(y, want);
  }
  return bad;
}

TEST_CASE("bf16 products outside float's normal range keep the definition's rounding", "[cpu][matmul]") {
  using cpu::matmul::fault;
  for (int which : {0, 1, 2, 3, 4, 5, 6})
    for (std::int64_t n : {2, 3, 4, 6, 8, 9, 17}) {
      INFO("case " << which << ", " << n << " columns");
      CHECK(bf16_range_mismatches<fault::none>(which, n) == 0);
    }
}

// The pair dot's condition (simd/fma_range.hpp pair_exact) against the FMA one, on the
// ranges of cases 5 and 6 above and at its edge: fields 71 + 71 pass, 70 + 71 do not.
TEST_CASE("bf16 pair-dot condition refuses what the pair dot would flush", "[cpu][matmul]") {
  auto range = [](std::initializer_list<std::uint16_t> codes) {
    std::uint32_t lo = 0xffff, hi = 0;
    for (std::uint16_t c : codes) {
      const std::uint32_t mag = c & 0x7fffu, m1 = (mag - 1) & 0xffffu;
      lo = m1 < lo ? m1 : lo;
      hi = mag > hi ? mag : hi;
    }
    return lo << 16 | hi;
  };
  using simd::fma_range::exact, simd::fma_range::pair_exact;
  const std::uint32_t subnormal = range({0x0001, 0x3f80}), big = range({0x7180});  // 2^-133, 1; 2^100
  CHECK(exact(subnormal, big));
  CHECK_FALSE(pair_exact(subnormal, big));
  const std::uint32_t w6 = range({0x2040, 0xa010, 0x0000}), a6 = range({0x2020});  // case 6
  CHECK(exact(w6, a6));
  CHECK_FALSE(pair_exact(w6, a6));
  CHECK(pair_exact(range({0x23c0}), range({0x23c0})));       // 1.5 * 2^-56 twice: fields 71 + 71
  CHECK_FALSE(pair_exact(range({0x2380}), range({0x23c0})));  // 2^-56: (magnitude - 1)'s field is 70
  CHECK(pair_exact(range({0x3f80, 0x0000, 0x8000}), range({0x3fc0})));  // zeros drop out
  CHECK_FALSE(pair_exact(range({0x7f00}), range({0x7f00})));            // 2^127 squared overflows
}

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
// Only the task tiles (avx512/ and avx2/dot_tile_float.hpp) add bf16 by FMA; elsewhere the
// fault changes nothing.
TEST_CASE("planted control: bf16 by FMA without the range proof fails", "[cpu][matmul][control]") {
  using cpu::matmul::fault;
  for (std::int64_t n : {3, 6, 9}) {
    INFO(n << " columns");
    CHECK(bf16_range_mismatches<fault::unguarded_fma>(1, n) > 0);
    CHECK(bf16_range_mismatches<fault::unguarded_fma>(2, n) > 0);
    CHECK(bf16_range_mismatches<fault::unguarded_fma>(3, n) > 0);
    CHECK(bf16_range_mismatches<fault::unguarded_fma>(4, n) > 0);
  }
}
#endif

// m rows of k per expert: 16-row tiles where the format has a decode tile, then single rows.
// More than 8 tokens take the grouped path (pairs by expert, mul_mat's tiles): n_tok 41
// gives each expert about 20 pairs, so whole and partial column blocks. So do 2 to 8 tokens
// of the formats without a decode tile (q6_K on avx512, and q8_0, q5_K, f16, bf16 unless on
// an Intel CPU or GK_CPU_DECODE_TILES=1; every format on the other targets); one token
// always goes pair by pair.
template <class W>
void check_mul_mat_id(std::int64_t k, std::int64_t m, std::int64_t n_tok = 5) {
  context ctx{context_params{16u << 20}};
  const std::int64_t n_as = 4, n_used = 2;
  tensor* as = ctx.new_tensor_3d(W::id, k, m, n_as);
  tensor* b = ctx.new_tensor_3d(type::f32, k, 1, n_tok);
  tensor* ids = ctx.new_tensor_2d(type::i32, n_used, n_tok);
  std::mt19937 rng(7);
  std::normal_distribution<float> g;
  std::vector<float> row(static_cast<std::size_t>(k));
  for (std::int64_t r = 0; r < as->nrows(); ++r) {
    for (auto& v : row) v = g(rng);
    encode_row<W>(row.data(), reinterpret_cast<typename W::block*>(as->at(r % m, r / m)), k);
  }
  for (std::int64_t i = 0; i < b->nelements(); ++i) static_cast<float*>(b->data)[i] = g(rng);
  for (std::int64_t i = 0; i < ids->nelements(); ++i) static_cast<std::int32_t*>(ids->data)[i] = (i * 3 + 1) % n_as;
  tensor* y = mul_mat_id(ctx, as, b, ids);
  using A = typename W::dot_type;
  std::vector<typename A::block> enc(static_cast<std::size_t>(k / A::block_size));
  for (int nth : {1, 2, 7}) {
    std::memset(y->data, 0xff, y->nbytes());  // NaN poison
    graph gr;
    gr.build_forward_expand(y);
    cpu::compute(gr, nth);
    std::int64_t bad = 0;
    for (std::int64_t t = 0; t < n_tok; ++t) {
      encode_row<A>(reinterpret_cast<const float*>(b->at(0, t)), enc.data(), k);
      for (std::int64_t e = 0; e < n_used; ++e) {
        const auto ex = static_cast<std::int32_t*>(ids->data)[t * n_used + e];
        for (std::int64_t r = 0; r < m; ++r) {
          const float want = dot_kernel<W, simd::native>::row(
              reinterpret_cast<const typename W::block*>(as->at(r, ex)), enc.data(), k);
          const float got = reinterpret_cast<const float*>(y->at(e, t))[r];
          bad += std::memcmp(&want, &got, 4) != 0;
        }
      }
    }
    INFO(name(W::id) << " k=" << k << " m=" << m << " threads=" << nth);
    CHECK(bad == 0);
  }
  static_cast<std::int32_t*>(ids->data)[ids->nelements() - 1] = 9;  // not an expert
  graph gr;
  gr.build_forward_expand(y);
  CHECK_THROWS_AS(cpu::compute(gr, 2), gk::error);
}

TEST_CASE("mul_mat_id picks each token's experts", "[cpu][matmul]") {
  check_mul_mat_id<formats::q8_0>(64, 19);
  check_mul_mat_id<formats::q4_0>(64, 37);
  check_mul_mat_id<formats::q4_K>(256, 37);
  check_mul_mat_id<formats::iq2_xxs>(256, 37);
  check_mul_mat_id<formats::iq3_s>(512, 37);
  check_mul_mat_id<formats::iq1_m>(256, 37);
  check_mul_mat_id<formats::q6_K>(256, 37);
  check_mul_mat_id<formats::q3_K>(256, 37);
  check_mul_mat_id<formats::q2_K>(256, 37);
  check_mul_mat_id<formats::tq1_0>(256, 37);
  check_mul_mat_id<formats::tq2_0>(512, 37);
  check_mul_mat_id<formats::q8_0>(64, 19, 41);
  check_mul_mat_id<formats::q4_0>(96, 37, 41);
  check_mul_mat_id<formats::q4_K>(256, 37, 41);
  check_mul_mat_id<formats::iq2_xxs>(256, 21, 41);
  // the lattice formats' decoded rows (avx2): experts of about 20 pairs; of 8, 8, 7, 7 (15
  // tokens: decoded and not side by side); iq1_s, whose one column goes row by row, grouped
  // from 2 tokens
  check_mul_mat_id<formats::iq3_s>(512, 37, 41);
  check_mul_mat_id<formats::iq1_m>(256, 48, 41);
  check_mul_mat_id<formats::iq2_xs>(256, 37, 15);
  check_mul_mat_id<formats::iq1_s>(256, 37, 5);
  check_mul_mat_id<formats::q3_K>(512, 37, 41);
  check_mul_mat_id<formats::q6_K>(256, 37, 41);
  check_mul_mat_id<formats::tq1_0>(256, 37, 41);
  check_mul_mat_id<formats::tq2_0>(256, 21, 41);
  check_mul_mat_id<formats::f16>(64, 37, 41);
  check_mul_mat_id<formats::f16>(300, 37, 41);
  check_mul_mat_id<formats::bf16>(300, 37, 41);
  check_mul_mat_id<formats::bf16>(300, 37, 15);  // experts of 8 and 7 pairs: avx512's pair tasks, not decoded rows
  check_mul_mat_id<formats::q8_0>(64, 19, 1);
  check_mul_mat_id<formats::q8_0>(64, 19, 2);
  check_mul_mat_id<formats::q5_K>(256, 37, 8);
  check_mul_mat_id<formats::f16>(64, 37, 3);
  check_mul_mat_id<formats::q4_K>(256, 37, 8);
  // the 16-bit decoded rows (avx2/dot_tile_wide.hpp): experts of 16 or more pairs decoded
  // (31 tokens: 16, 16, 15, 15 pairs, decoded and pair tile side by side)
  check_mul_mat_id<formats::iq4_xs>(512, 37, 41);
  check_mul_mat_id<formats::iq4_nl>(96, 37, 41);
  check_mul_mat_id<formats::q5_0>(352, 48, 31);
  // avx512's decoded K-quant rows: experts of 50 pairs (q2_K decodes from 48, q3_K and q6_K
  // from 32)
  check_mul_mat_id<formats::q2_K>(256, 37, 100);
  check_mul_mat_id<formats::q3_K>(256, 37, 100);
  check_mul_mat_id<formats::q6_K>(256, 37, 100);
}
