// SPDX-License-Identifier: MIT
// CUDA matmul family on trial: get_rows, mul_mat, mul_mat_id for every weight format.
//
// get_rows is a pure decode, so it must equal the CPU bit for bit. mul_mat cannot: the CPU
// encodes activations to q8_0/q8_1/q8_K for integer formats (f16 for f16 weights); the
// dp4a mat-vec (matvec_q8.cu, N <= 8, the formats matvec_q8_serves) does the same with the
// CPU's bytes, the float paths keep them f32. All are measured against the truth (weights
// decoded on the host by gk's own W::decode, activations as stored, sums in double), each
// output's error divided by sum_k |w_k x_k| (the size float rounding scales with):
//   - the fast path:      err <= 2 * (the CPU's err) + 4e-6
//   - the reference path: err <= 1.2e-7 (bit-exact decode, double sum, one final rounding:
//                         2^-24 |y| <= 6e-8 sum |w x|, doubled for slack)
//   - fast vs reference:  matvec (f32 operands): <= 4e-6 (f32 sums of K <= 4352 products;
//                         random data lands near 1e-7, the bound leaves room for unlucky
//                         cancellation); tensor-core path (f16 operands, more than 8
//                         columns, weights not f32/bf16): <= 1.1e-3 (each operand rounded
//                         once to f16, relative 2^-11 at worst, so a product is off by at
//                         most 2^-10 ~ 9.8e-4 of |w x|, plus f32 sums); matvec_q8 (q8
//                         activations, as the CPU): <= 2 * (the CPU's err) + 4.2e-6 (the
//                         two bars above added: the difference is the CPU's own error)
//   - matvec_q8 vs the CPU: <= 4e-6. Same activation bytes, same block terms bit for bit;
//                         only the order in which the K / 32 (or K / 256) block terms are
//                         added in f32 differs, the f32 matvec's bar.
// The fast path is also run with the reference kernel (gk::cuda::matmul_set_path(1)) on
// the same inputs, so a wrong fast kernel cannot hide behind a loose truth bar; formats
// matvec_q8 serves are run with the float mat-vec too (matmul_set_path(3)), so both stay
// checked. Planted controls (tag [.control], run on purpose, must fail): an activation
// encoder that truncates, and a mat-vec that drops each row's last block.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "harness.hpp"

namespace gk::cuda {
void matmul_set_path(int path);  // matmul.cu: 0 auto, 1 reference, 2 matvec for every N, 3 float matvec, 4 f16 prompts
bool matvec_q8_serves(gk::type w);  // matvec_q8.cu: w has a dp4a block dot
// matvec_q8.cu: 1 the encoder truncates, 2 each row's last block dropped, 3 mul_mat_id's
// int8 prompt path leaves each expert's last column out (mmq.cu), 4 mmq.cu's weights
// unpacked first take each row's first chunk's fields (its scales) from the second, 5
// encoded-activation claims keyed by address alone and kept across writes (matmul.cu)
void matvec_q8_plant(int control);
// mmq.cu: 0 never unpacks mul_mat's weights once before the int8 prompt kernel, 1 always
// where it may (the formats that measured faster so), -1 as GK_CUDA_MMQ_PRE says (unset:
// from enough columns)
void mmq_pre_mode(int mode);
// matvec_q8.cu: rows x k floats encoded on the device to act's CPU blocks
void matvec_q8_encode_rows(gk::type act, const float* x, std::int64_t k, std::int64_t rows, void* out);
}

namespace {

using gk::type;
using gk_cuda_test::pair;

// Weight rows encoded once per (format, k, rows) from normal(0, 1) values.
const std::vector<unsigned char>& weight_bytes(type t, std::int64_t k, std::int64_t rows) {
  static std::map<std::tuple<int, std::int64_t, std::int64_t>, std::vector<unsigned char>> cache;
  auto key = std::make_tuple(static_cast<int>(t), k, rows);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  std::vector<unsigned char> bytes(gk::row_size(t, k) * static_cast<std::size_t>(rows));
  std::mt19937 rng(static_cast<unsigned>(1000 + static_cast<int>(t) * 7 + k));
  std::normal_distribution<float> g;
  std::vector<float> row(static_cast<std::size_t>(k));
  gk::formats::visit(t, [&]<class W>(std::type_identity<W>) {
    for (std::int64_t r = 0; r < rows; ++r) {
      for (auto& v : row) v = g(rng);
      gk::encode_row<W>(row.data(), reinterpret_cast<typename W::block*>(bytes.data() + r * gk::row_size(t, k)), k,
                        nullptr);
    }
  });
  return cache.emplace(key, std::move(bytes)).first->second;
}

// Host decode of weight row r (gk's CPU definition).
std::vector<float> decode_rows(type t, const unsigned char* bytes, std::int64_t k, std::int64_t rows) {
  std::vector<float> out(static_cast<std::size_t>(k * rows));
  gk::formats::visit(t, [&]<class W>(std::type_identity<W>) {
    for (std::int64_t r = 0; r < rows; ++r)
      gk::decode_row<W>(reinterpret_cast<const typename W::block*>(bytes + r * gk::row_size(t, k)), out.data() + r * k, k);
  });
  return out;
}

float load_act(const gk::tensor* b, std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3) {
  const char* p = static_cast<const char*>(b->data) + i0 * b->nb[0] + i1 * b->nb[1] + i2 * b->nb[2] + i3 * b->nb[3];
  return gk::cpu::load_f32(b->type, p);
}

void fill_act(gk::tensor* t, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const std::int64_t n = t->nelements();
  for (std::int64_t i = 0; i < n; ++i)
    gk::cpu::store_f32(t->type, static_cast<char*>(t->data) + i * static_cast<std::int64_t>(gk::type_size(t->type)), u(rng));
}

std::int64_t k_for(type t) {
  const std::int64_t bs = gk::block_size(t);
  return bs == 1 ? 67 : bs == 256 ? 512 : 5 * bs;
}

// Truth per output and the error scale sum |w x|.
struct truth {
  std::vector<double> y, scale;
};

struct errors {
  double cpu = 0, fast = 0, ref = 0, fast_vs_ref = 0, fast_vs_cpu = 0;
};

errors measure(const pair& fast, const pair& ref, const truth& t) {
  errors e;
  REQUIRE(fast.cpu.size() == t.y.size());
  for (std::size_t i = 0; i < t.y.size(); ++i) {
    const double s = t.scale[i] > 0 ? t.scale[i] : 1e-30;
    e.cpu = std::max(e.cpu, std::fabs(fast.cpu[i] - t.y[i]) / s);
    const double df = std::fabs(fast.dev[i] - t.y[i]) / s, dr = std::fabs(ref.dev[i] - t.y[i]) / s;
    e.fast = std::max(e.fast, std::isnan(df) ? INFINITY : df);
    e.ref = std::max(e.ref, std::isnan(dr) ? INFINITY : dr);
    const double d = std::fabs(fast.dev[i] - ref.dev[i]) / s;
    e.fast_vs_ref = std::max(e.fast_vs_ref, std::isnan(d) ? INFINITY : d);
    const double dc = std::fabs(fast.dev[i] - fast.cpu[i]) / s;
    e.fast_vs_cpu = std::max(e.fast_vs_cpu, std::isnan(dc) ? INFINITY : dc);
  }
  return e;
}

// matmul.cu's rule: mul_mat (not _id) with more than 64 columns per slab goes to cuBLAS
// (gemm.cuh): f16 operands (weights decoded to f16) except bf16 weights, whose activations
// are rounded to bf16 as the CPU's bf16 dot does, and f32 weights (fp32 GEMM, no rounding).
// 9..64 columns and weights other than f32/bf16: the mma.sync kernel, f16 operands.
// 0: f32 sums of f32 operands; 1: f16 operands; 2: bf16 activations.
// 3: matvec_q8 (N <= 8, or any N with the matvec forced, for the formats it serves).
// Since mmq.cu, mul_mat of the formats matvec_q8 serves at more than 8 columns takes the
// int8 tensor cores on the same q8 activations (compute capability >= 8.0, as the H200):
// the same bars as matvec_q8 (path 3), and GK_CUDA_MATMUL=f16 (matmul_set_path(4)) keeps
// the f16 tensor-core paths above reachable for them (f16_path).
constexpr int q8_path = 3;
int f16_path(type wt, std::int64_t n_per_slab, bool id = false) {
  if (!id && n_per_slab > 64) return wt == type::f32 ? 0 : wt == type::bf16 ? 2 : 1;
  if (n_per_slab > 8 && wt != type::f32 && wt != type::bf16) return 1;
  return gk::cuda::matvec_q8_serves(wt) ? q8_path : 0;
}
int uses_mma(type wt, std::int64_t n_per_slab, bool id = false) {
  if (!id && n_per_slab > 8 && gk::cuda::matvec_q8_serves(wt)) return q8_path;
  return f16_path(wt, n_per_slab, id);
}
// the path of a run with the matvec forced (matmul_set_path(2))
int forced_matvec(type wt) { return gk::cuda::matvec_q8_serves(wt) ? q8_path : 0; }

void check(const errors& e, const std::string& what, int mma = 0) {
  INFO(what << (mma == 1   ? " (tensor cores, f16)"
                : mma == 2 ? " (tensor cores, bf16)"
                : mma == 3 ? " (q8 activations: matvec_q8 or mmq)"
                           : " (matvec)")
            << ": error / sum|wx|: cpu " << e.cpu << ", fast " << e.fast << ", reference " << e.ref
            << ", fast vs reference " << e.fast_vs_ref << ", fast vs cpu " << e.fast_vs_cpu);
  CHECK(e.fast <= 2 * e.cpu + 4e-6);
  CHECK(e.ref <= 1.2e-7);
  // f16 operands: each rounded once (2^-11 relative); bf16 activations: 2^-9 (4e-3 allows
  // both roundings at their worst); q8 activations: the CPU's own error, twice, plus the
  // f32 and reference bars
  CHECK(e.fast_vs_ref <= (mma == 1 ? 1.1e-3 : mma == 2 ? 4e-3 : mma == 3 ? 2 * e.cpu + 4.2e-6 : 4e-6));
  if (mma == 3) CHECK(e.fast_vs_cpu <= 4e-6);
}

// Runs build twice on the device (fast path, then the reference kernel) and once on the CPU.
// fast_path: 0 what matmul.cu picks, 2 the matvec kernel whatever N is (matvec_q8 where it
// serves the format), 3 the float matvec whatever N is.
template <class Build>
errors run_both(Build&& build, truth& t, int fast_path = 0) {
  gk::cuda::matmul_set_path(fast_path);
  pair fast = gk_cuda_test::run_pair(build);
  gk::cuda::matmul_set_path(1);
  pair ref = gk_cuda_test::run_pair(build);
  gk::cuda::matmul_set_path(0);
  return measure(fast, ref, t);
}

struct mm_shape {
  std::int64_t k, m, n, a2 = 1, a3 = 1, b2 = 1, b3 = 1;
  type act = type::f32;
  bool transposed = false;  // b is transpose(base) with base [n, k, b2, b3]
};

errors run_mul_mat(type wt, const mm_shape& s, int fast_path = 0) {
  truth t;
  auto build = [&](gk::context& ctx) {
    gk::tensor* a = ctx.new_tensor_4d(wt, s.k, s.m, s.a2, s.a3);
    a->set_name("#w");
    gk::tensor* base = s.transposed ? ctx.new_tensor_4d(s.act, s.n, s.k, s.b2, s.b3)
                                    : ctx.new_tensor_4d(s.act, s.k, s.n, s.b2, s.b3);
    base->set_name("#x");
    gk::tensor* b = s.transposed ? gk::transpose(ctx, base) : base;
    gk::tensor* y = gk::mul_mat(ctx, a, b);
    if (a->data) {  // the CPU-side build: fill, and work out the truth
      const auto& wb = weight_bytes(wt, s.k, s.m * s.a2 * s.a3);
      std::memcpy(a->data, wb.data(), wb.size());
      std::mt19937 rng(7);
      fill_act(base, rng);
      const std::vector<float> w = decode_rows(wt, wb.data(), s.k, s.m * s.a2 * s.a3);
      const std::int64_t r2 = s.b2 / s.a2, r3 = s.b3 / s.a3;
      t.y.clear();
      t.scale.clear();
      for (std::int64_t i3 = 0; i3 < s.b3; ++i3)
        for (std::int64_t i2 = 0; i2 < s.b2; ++i2)
          for (std::int64_t i1 = 0; i1 < s.n; ++i1)
            for (std::int64_t m = 0; m < s.m; ++m) {
              const float* wr = w.data() + (((i3 / r3) * s.a2 + i2 / r2) * s.m + m) * s.k;
              double sum = 0, sc = 0;
              for (std::int64_t k = 0; k < s.k; ++k) {
                const double x = load_act(b, k, i1, i2, i3);
                sum += wr[k] * x;
                sc += std::fabs(wr[k] * x);
              }
              t.y.push_back(sum);
              t.scale.push_back(sc);
            }
    }
    return y;
  };
  return run_both(build, t, fast_path);
}

// mul_mat_id of n_as experts [k, m] on f32 activations [k, nb1, n_tok], n_used per token;
// leaves named '#' for the builder to fill
struct moe_tensors {
  gk::tensor *as, *b, *ids, *y;
};
moe_tensors moe_node(gk::context& ctx, type wt, std::int64_t k, std::int64_t m, std::int64_t n_as, std::int64_t nb1,
                     std::int64_t n_used, std::int64_t n_tok) {
  gk::tensor* as = ctx.new_tensor_3d(wt, k, m, n_as);
  as->set_name("#w");
  gk::tensor* b = ctx.new_tensor_3d(type::f32, k, nb1, n_tok);
  b->set_name("#x");
  gk::tensor* ids = ctx.new_tensor_2d(type::i32, n_used, n_tok);
  ids->set_name("#ids");
  return {as, b, ids, gk::mul_mat_id(ctx, as, b, ids)};
}

template <class F>
void each_weight_format(F&& f) {
  std::apply([&](auto... w) { (f(decltype(w){}), ...); },
             std::tuple<std::type_identity<gk::formats::f32>, std::type_identity<gk::formats::f16>,
                        std::type_identity<gk::formats::bf16>, std::type_identity<gk::formats::q4_0>,
                        std::type_identity<gk::formats::q4_1>, std::type_identity<gk::formats::q5_0>,
                        std::type_identity<gk::formats::q5_1>, std::type_identity<gk::formats::q8_0>,
                        std::type_identity<gk::formats::q8_1>, std::type_identity<gk::formats::q2_K>,
                        std::type_identity<gk::formats::q3_K>, std::type_identity<gk::formats::q4_K>,
                        std::type_identity<gk::formats::q5_K>, std::type_identity<gk::formats::q6_K>,
                        std::type_identity<gk::formats::tq1_0>, std::type_identity<gk::formats::tq2_0>,
                        std::type_identity<gk::formats::mxfp4>, std::type_identity<gk::formats::nvfp4>,
                        std::type_identity<gk::formats::q1_0>, std::type_identity<gk::formats::q2_0>,
                        std::type_identity<gk::formats::iq1_s>, std::type_identity<gk::formats::iq1_m>,
                        std::type_identity<gk::formats::iq2_xxs>, std::type_identity<gk::formats::iq2_xs>,
                        std::type_identity<gk::formats::iq2_s>, std::type_identity<gk::formats::iq3_xxs>,
                        std::type_identity<gk::formats::iq3_s>, std::type_identity<gk::formats::iq4_nl>,
                        std::type_identity<gk::formats::iq4_xs>>{});
}

}  // namespace

TEST_CASE("cuda get_rows: every format decodes bit-identical to the CPU", "[cuda][matmul][get_rows]") {
  auto one = [&](type t) {
    const std::int64_t k = k_for(t);
    pair p = gk_cuda_test::run_pair([&](gk::context& ctx) {
      gk::tensor* a = ctx.new_tensor_4d(t, k, 9, 2, 1);
      a->set_name("#a");
      gk::tensor* idx = ctx.new_tensor_3d(type::i32, 5, 2, 1);
      idx->set_name("#i");
      if (a->data) {
        const auto& wb = weight_bytes(t, k, 18);
        std::memcpy(a->data, wb.data(), wb.size());
        const std::int32_t v[10] = {0, 8, 3, 3, 7, 1, 0, 5, 8, 2};
        std::memcpy(idx->data, v, sizeof v);
      }
      return gk::get_rows(ctx, a, idx);
    });
    INFO("format " << gk::name(t) << ": " << p.what);
    CHECK(p.bit_equal());
  };
  each_weight_format([&]<class W>(std::type_identity<W>) { one(W::id); });
  one(type::q8_K);
}

TEST_CASE("cuda mul_mat: every format at N = 1, 3, 8, 17, 64, 130 against the truth and the reference kernel",
          "[cuda][matmul]") {
  each_weight_format([&]<class W>(std::type_identity<W>) {
    for (std::int64_t n : {1, 3, 8, 17, 64, 130}) {
      const mm_shape s{k_for(W::id), 67, n};
      const errors e = run_mul_mat(W::id, s);
      std::printf("mul_mat %-8s k %4lld n %3lld: err/sum|wx| cpu %.2e fast %.2e ref %.2e fast-ref %.2e\n",
                  std::string(gk::name(W::id)).c_str(), static_cast<long long>(s.k), static_cast<long long>(n), e.cpu,
                  e.fast, e.ref, e.fast_vs_ref);
      check(e, std::string(gk::name(W::id)) + " n " + std::to_string(n), uses_mma(W::id, n));
      if (f16_path(W::id, n) != uses_mma(W::id, n))  // the f16 tensor-core paths too (GK_CUDA_MATMUL=f16)
        check(run_mul_mat(W::id, s, 4), std::string(gk::name(W::id)) + " f16 tensor cores, n " + std::to_string(n),
              f16_path(W::id, n));
      if (f16_path(W::id, n) == 1 || f16_path(W::id, n) == 2)  // the matvec at this N too (GK_CUDA_MATMUL=matvec)
        check(run_mul_mat(W::id, s, 2), std::string(gk::name(W::id)) + " matvec forced, n " + std::to_string(n),
              forced_matvec(W::id));
      if (gk::cuda::matvec_q8_serves(W::id) && n <= 8)  // the float mat-vec it replaced (GK_CUDA_MATMUL=matvec_f)
        check(run_mul_mat(W::id, s, 3), std::string(gk::name(W::id)) + " float matvec, n " + std::to_string(n));
    }
  });
}

// One column with k a multiple of 256 takes matvec_wide or matvec_stream (matvec_q8.cu), as
// the format's default says, on 16-byte aligned rows. matvec_stream by bulk copies needs a
// row's live bytes of every task in multiples of 16: at k 2048 (8 groups of 256) every
// format has them; at k 4352 (17 groups: a last step of one live group of eight, the bytes
// past it stale, not zero-filled) and at k 256 and 512 only those whose group is a multiple
// of 16 bytes (the 32-weight formats but mxfp4, q4_K, q5_K); the others fall back to the
// cp.async stream or matvec_wide. 67 rows: a last row group of one row and a partial last
// grid-stride round. (GK_CUDA_MQ_STREAM=0 runs matvec_wide for them all, 1 the cp.async
// stream, 2 bulk copies wherever allowed.)
TEST_CASE("cuda mul_mat: one column through the wide mat-vec, every format it serves", "[cuda][matmul][q8]") {
  for (type t : {type::q4_0, type::q4_1, type::q5_0, type::q5_1, type::q8_0, type::iq4_nl, type::mxfp4, type::nvfp4,
                 type::q4_K, type::q5_K, type::q6_K, type::q2_K, type::q3_K, type::iq4_xs, type::iq2_xxs,
                 type::iq3_s, type::iq3_xxs, type::iq2_xs, type::iq2_s, type::iq1_s, type::iq1_m,
                 type::tq1_0, type::tq2_0})
    for (std::int64_t k : {256, 512, 2048, 4352}) {
      const errors e = run_mul_mat(t, mm_shape{k, 67, 1});
      check(e, std::string(gk::name(t)) + " wide, k " + std::to_string(k), forced_matvec(t));
    }
}

TEST_CASE("cuda mul_mat: rows longer than one shared-memory slab (k = 4352)", "[cuda][matmul]") {
  for (type t : {type::f32, type::f16, type::q4_0, type::q8_0, type::q4_K, type::q6_K, type::iq2_xxs, type::iq4_xs})
    for (std::int64_t n : {1, 5, 9}) {
      const errors e = run_mul_mat(t, mm_shape{4352, 40, n});
      check(e, std::string(gk::name(t)) + " k 4352 n " + std::to_string(n), uses_mma(t, n));
    }
}

TEST_CASE("cuda mul_mat: weight broadcast over dims 2 and 3", "[cuda][matmul]") {
  for (type t : {type::f16, type::q4_0, type::q5_1, type::q3_K, type::iq3_s, type::nvfp4})
    for (std::int64_t n : {1, 2, 6, 19}) {
      mm_shape s{k_for(t), 35, n};
      s.a2 = 2;
      s.a3 = 1;
      s.b2 = 4;
      s.b3 = 3;
      check(run_mul_mat(t, s), std::string(gk::name(t)) + " broadcast n " + std::to_string(n), uses_mma(t, n));
    }
}

TEST_CASE("cuda mul_mat: transposed (non-contiguous) and f16/bf16 activations", "[cuda][matmul]") {
  for (type t : {type::f32, type::bf16, type::q4_K, type::iq2_s, type::mxfp4})
    for (type act : {type::f32, type::f16, type::bf16})
      for (std::int64_t n : {1, 7, 33}) {
        mm_shape s{k_for(t), 21, n};
        s.act = act;
        s.transposed = true;
        s.b2 = 2;
        check(run_mul_mat(t, s), std::string(gk::name(t)) + " transposed " + std::string(gk::name(act)) + " n " +
                                     std::to_string(n), uses_mma(t, n));
        s.transposed = false;
        check(run_mul_mat(t, s), std::string(gk::name(t)) + " " + std::string(gk::name(act)) + " n " +
                                     std::to_string(n), uses_mma(t, n));
      }
}

namespace {

// mul_mat_id of n_as = 5 experts [k, 45], n_used 2 of them per token, against the truth
// and the reference kernel
errors run_moe(type wt, std::int64_t nb1, std::int64_t n_tok) {
  const std::int64_t k = k_for(wt), m = 45, n_as = 5, n_used = 2;
  truth t;
  auto build = [&](gk::context& ctx) {
    auto [as, b, ids, y] = moe_node(ctx, wt, k, m, n_as, nb1, n_used, n_tok);
    if (as->data) {
      const auto& wb = weight_bytes(wt, k, m * n_as);
      std::memcpy(as->data, wb.data(), wb.size());
      std::mt19937 rng(11);
      fill_act(b, rng);
      auto* id = static_cast<std::int32_t*>(ids->data);
      for (std::int64_t tok = 0; tok < n_tok; ++tok)
        for (std::int64_t e = 0; e < n_used; ++e) id[tok * n_used + e] = static_cast<std::int32_t>((3 * tok + 2 * e) % n_as);
      const std::vector<float> w = decode_rows(wt, wb.data(), k, m * n_as);
      t.y.clear();
      t.scale.clear();
      for (std::int64_t tok = 0; tok < n_tok; ++tok)
        for (std::int64_t e = 0; e < n_used; ++e)
          for (std::int64_t r = 0; r < m; ++r) {
            const float* wr = w.data() + (id[tok * n_used + e] * m + r) * k;
            double sum = 0, sc = 0;
            for (std::int64_t i = 0; i < k; ++i) {
              const double x = load_act(b, i, e % nb1, tok, 0);
              sum += wr[i] * x;
              sc += std::fabs(wr[i] * x);
            }
            t.y.push_back(sum);
            t.scale.push_back(sc);
          }
    }
    return y;
  };
  return run_both(build, t);
}

}  // namespace

TEST_CASE("cuda mul_mat_id: experts chosen per token, against the truth and the reference kernel", "[cuda][matmul]") {
  for (type wt : {type::f32, type::bf16, type::q4_0, type::q8_0, type::q4_K, type::q6_K, type::iq3_xxs, type::iq1_m,
                  type::mxfp4, type::tq2_0})
    for (std::int64_t nb1 : {1, 2})
      check(run_moe(wt, nb1, 6), std::string("mul_mat_id ") + std::string(gk::name(wt)) + " nb1 " + std::to_string(nb1),
            forced_matvec(wt));
}

// From more than 8 tokens, float weights take cuBLAS per expert (gemm::prompt_id): f16
// operands for f16 weights, bf16 activations for bf16 weights, fp32 for f32 weights
TEST_CASE("cuda mul_mat_id: float weights from many tokens, one GEMM per expert", "[cuda][matmul]") {
  for (type wt : {type::f32, type::f16, type::bf16})
    for (std::int64_t nb1 : {1, 2})
      for (std::int64_t n_tok : {9, 40})
        check(run_moe(wt, nb1, n_tok),
              std::string("mul_mat_id ") + std::string(gk::name(wt)) + " nb1 " + std::to_string(nb1) + " tokens " +
                  std::to_string(n_tok),
              wt == type::f32 ? 0 : wt == type::f16 ? 1 : 2);
}

namespace {

// Rows that stress the activation encoders: random at several scales, zeros, one huge
// value (f16 d overflows for q8_0/q8_1), a signed pair of equal largest magnitudes (q8_K
// takes the first), exact ties of x / d (rounded to even), subnormals, a NaN beside an inf.
std::vector<float> encoder_rows(std::int64_t k, std::int64_t rows) {
  std::vector<float> x(static_cast<std::size_t>(k * rows));
  std::mt19937 rng(29);
  std::normal_distribution<float> g;
  for (std::int64_t r = 0; r < rows; ++r) {
    float* row = x.data() + r * k;
    const float scale = std::ldexp(1.0f, static_cast<int>(r % 7) * 6 - 18);
    for (std::int64_t i = 0; i < k; ++i) row[i] = g(rng) * scale;
    switch (r % 8) {
      case 0: std::fill(row, row + k, 0.0f); break;
      case 1: row[5] = 1e30f; row[300] = -3e38f; break;
      case 2: row[3] = 5.0f; row[100] = -5.0f; row[40] = -7.0f; row[41] = 7.0f; break;
      case 3:  // max 127 in each 32-block: d = 1, and halves land on ties
        for (std::int64_t i = 0; i < k; ++i) row[i] = i % 32 == 0 ? 127.0f : static_cast<float>(static_cast<int>(i % 13) - 6) + 0.5f;
        break;
      case 4:  // q8_K's xm = -127: iscale = 1, the same ties
        for (std::int64_t i = 0; i < k; ++i) row[i] = i % 256 == 7 ? -127.0f : static_cast<float>(static_cast<int>(i % 11) - 5) + 0.5f;
        break;
      case 5: for (std::int64_t i = 0; i < k; i += 3) row[i] = 1e-40f * static_cast<float>(i % 5); break;
      case 6: std::fill(row + 32, row + 64, 0.0f); std::fill(row + 256, row + 512, 0.0f); break;
      default:  // a NaN and an inf: q8_K's 0 * inf and NaN codes read the CPU's NaN bits
        row[10] = std::numeric_limits<float>::quiet_NaN();
        row[600] = r % 16 == 7 ? INFINITY : -INFINITY;
        break;
    }
  }
  return x;
}

// The device encoder's bytes against encode_row<A> on the CPU; counts rows that differ.
template <class A>
int encoder_mismatches(std::int64_t k, std::int64_t rows) {
  const std::vector<float> x = encoder_rows(k, rows);
  const std::size_t rb = gk::row_size(A::id, k);
  std::vector<unsigned char> cpu(rb * static_cast<std::size_t>(rows)), dev(cpu.size());
  for (std::int64_t r = 0; r < rows; ++r)
    gk::encode_row<A>(x.data() + r * k, reinterpret_cast<typename A::block*>(cpu.data() + r * rb), k, nullptr);
  gk::cuda::matvec_q8_encode_rows(A::id, x.data(), k, rows, dev.data());
  int bad = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::size_t o = static_cast<std::size_t>(r) * rb;
    if (std::memcmp(cpu.data() + o, dev.data() + o, rb) == 0) continue;
    std::size_t i = 0;
    while (cpu[o + i] == dev[o + i]) ++i;
    if (bad++ < 3)
      UNSCOPED_INFO(gk::name(A::id) << " row " << r << ": first difference at byte " << i << " of " << rb << " (block "
                                    << i / sizeof(typename A::block) << ", byte " << i % sizeof(typename A::block)
                                    << "): cpu " << int(cpu[o + i]) << ", device " << int(dev[o + i]));
  }
  return bad;
}

void encoders_equal_cpu() {
  CHECK(encoder_mismatches<gk::formats::q8_0>(1024, 40) == 0);
  CHECK(encoder_mismatches<gk::formats::q8_1>(1024, 40) == 0);
  CHECK(encoder_mismatches<gk::formats::q8_K>(1024, 40) == 0);
}

void q8_matvec_formats(std::int64_t k, std::int64_t n) {
  for (type t : {type::q4_0, type::q8_0, type::q4_K, type::q6_K, type::q2_K, type::nvfp4}) {
    check(run_mul_mat(t, mm_shape{k, 40, n}), std::string(gk::name(t)) + " k " + std::to_string(k) + " n " +
                                                    std::to_string(n), forced_matvec(t));
  }
}

// Outputs of pr's device run that differ in their bits from expect; the first three are
// described by where(i).
template <class Where>
int bit_mismatches(const pair& pr, const std::vector<float>& expect, Where&& where) {
  REQUIRE(pr.dev_bytes.size() == expect.size() * sizeof(float));
  int bad = 0;
  for (std::size_t i = 0; i < expect.size(); ++i) {
    float got;
    std::memcpy(&got, pr.dev_bytes.data() + i * sizeof(float), sizeof got);
    if (std::memcmp(&got, &expect[i], sizeof got) == 0) continue;
    if (bad++ < 3) UNSCOPED_INFO(where(i) << ": dot_row " << expect[i] << ", device " << got);
  }
  return bad;
}

// mmq.cu's claim: with more than 8 columns, every output is gk::dot_row<W> of the weight
// row and the column encoded by encode_row<W::dot_type>, bit for bit (the same integers,
// the same float operations per block, the same running sum in block order). b2 slabs of n
// columns; column 0 is scaled by 1e4 and column 1 is zero (encoder edge cases inside a
// tile). Extreme (formats whose blocks start with an f16 scale d): every block's d replaced
// by one of f16's edge values (subnormals, the least normal, the greatest, both zeros,
// negatives), and columns 2, 3, 4 of each 5 scaled by 1e-6, 3e-8 and 1e3 (activation scales
// down to f16 subnormals), so that mmq_dmma's f16 products d(w) x d(a) meet every range.
// Returns the number of outputs that differ.
template <class W>
int mmq_mismatches(std::int64_t k, std::int64_t m, std::int64_t n, std::int64_t b2, bool extreme = false) {
  using A = typename W::dot_type;
  std::vector<float> expect;
  const pair pr = gk_cuda_test::run_pair([&](gk::context& ctx) {
    gk::tensor* a = ctx.new_tensor_2d(W::id, k, m);
    a->set_name("#w");
    gk::tensor* b = ctx.new_tensor_3d(type::f32, k, n, b2);
    b->set_name("#x");
    gk::tensor* y = gk::mul_mat(ctx, a, b);
    if (a->data) {
      std::vector<unsigned char> wb = weight_bytes(W::id, k, m);
      if (extreme) {
        static constexpr std::uint16_t edge[] = {0x0001, 0x03ff, 0x0400, 0x7bff, 0x0000, 0x8000, 0x8001,
                                                 0xfbff, 0x3c00, 0x0200, 0x8400, 0x2e66, 0x1001};
        const std::size_t nb = wb.size() / sizeof(typename W::block);
        for (std::size_t i = 0; i < nb; ++i) {
          const std::uint16_t d = edge[(i * 7 + i / 5) % std::size(edge)];
          std::memcpy(wb.data() + i * sizeof(typename W::block), &d, 2);
        }
      }
      std::memcpy(a->data, wb.data(), wb.size());
      std::mt19937 rng(static_cast<unsigned>(k + 3 * n));
      fill_act(b, rng);
      float* x = static_cast<float*>(b->data);
      for (std::int64_t i = 0; i < k; ++i) {
        x[i] *= 1e4f;
        x[k + i] = 0.0f;
      }
      if (extreme)
        for (std::int64_t col = 2; col < n * b2; ++col) {
          const float f = col % 5 == 2 ? 1e-6f : col % 5 == 3 ? 3e-8f : col % 5 == 4 ? 1e3f : 1.0f;
          for (std::int64_t i = 0; i < k; ++i) x[col * k + i] *= f;
        }
      expect.clear();
      std::vector<typename A::block> enc(static_cast<std::size_t>(k / A::block_size));
      for (std::int64_t col = 0; col < n * b2; ++col) {
        gk::encode_row<A>(x + col * k, enc.data(), k, nullptr);
        for (std::int64_t r = 0; r < m; ++r)
          expect.push_back(gk::dot_row<W>(
              reinterpret_cast<const typename W::block*>(wb.data() + r * gk::row_size(W::id, k)), enc.data(), k));
      }
    }
    return y;
  });
  return bit_mismatches(pr, expect, [&](std::size_t i) {
    return std::string(gk::name(W::id)) + " k " + std::to_string(k) + " n " + std::to_string(n) + ": output " +
           std::to_string(i) + " (row " + std::to_string(i % m) + ", column " + std::to_string(i / m) + ")";
  });
}

// The same claim for mul_mat_id from more than 8 tokens (mmq.cu groups the columns by
// expert first): every output is dot_row<W> of its expert's weight row and its column.
// n_as 6 experts, n_used 2 slots, 150 tokens: expert 0 takes slot 0 of 135 tokens (more
// than the widest block's 128 columns, so it spans groups), experts 1-4 the rest, expert 5
// none; nb1 1 (every slot reads the token's one column) or 2.
template <class W>
int mmq_id_mismatches(std::int64_t k, std::int64_t m, std::int64_t nb1) {
  using A = typename W::dot_type;
  constexpr std::int64_t n_as = 6, n_used = 2, n_tok = 150;
  std::vector<float> expect;
  const pair pr = gk_cuda_test::run_pair([&](gk::context& ctx) {
    auto [as, b, ids, y] = moe_node(ctx, W::id, k, m, n_as, nb1, n_used, n_tok);
    if (as->data) {
      const auto& wb = weight_bytes(W::id, k, m * n_as);
      std::memcpy(as->data, wb.data(), wb.size());
      std::mt19937 rng(static_cast<unsigned>(k + 5 * nb1));
      fill_act(b, rng);
      auto* id = static_cast<std::int32_t*>(ids->data);
      for (std::int64_t tok = 0; tok < n_tok; ++tok) {
        id[tok * n_used] = tok % 10 == 9 ? 4 : 0;
        id[tok * n_used + 1] = static_cast<std::int32_t>(1 + (tok * 7) % 4);
      }
      expect.clear();
      std::vector<typename A::block> enc(static_cast<std::size_t>(k / A::block_size));
      const float* x = static_cast<const float*>(b->data);
      for (std::int64_t tok = 0; tok < n_tok; ++tok)
        for (std::int64_t e = 0; e < n_used; ++e) {
          gk::encode_row<A>(x + (tok * nb1 + e % nb1) * k, enc.data(), k, nullptr);
          const unsigned char* slab = wb.data() + id[tok * n_used + e] * m * gk::row_size(W::id, k);
          for (std::int64_t r = 0; r < m; ++r)
            expect.push_back(gk::dot_row<W>(
                reinterpret_cast<const typename W::block*>(slab + r * gk::row_size(W::id, k)), enc.data(), k));
        }
    }
    return y;
  });
  return bit_mismatches(pr, expect, [&](std::size_t i) {
    return std::string(gk::name(W::id)) + " mul_mat_id k " + std::to_string(k) + " nb1 " + std::to_string(nb1) +
           ": output " + std::to_string(i) + " (row " + std::to_string(i % m) + ", token " +
           std::to_string(i / m / n_used) + ", slot " + std::to_string(i / m % n_used) + ")";
  });
}

}  // namespace

TEST_CASE("cuda mmq: mul_mat_id prompts equal the CPU's dot_row bit for bit, every integer format",
          "[cuda][matmul][mmq]") {
  each_weight_format([&]<class W>(std::type_identity<W>) {
    if (!gk::cuda::matvec_q8_serves(W::id)) return;
    for (std::int64_t nb1 : {1, 2}) {
      INFO(gk::name(W::id) << " nb1 " << nb1);
      CHECK(mmq_id_mismatches<W>(k_for(W::id), 67, nb1) == 0);
    }
  });
}

TEST_CASE("cuda mmq: int8 tensor-core prompts equal the CPU's dot_row bit for bit, every integer format",
          "[cuda][matmul][mmq]") {
  // both ways of reading mul_mat's weights: in place, and unpacked once first (the formats
  // of mmq.cu's mmq_pre_fmt; n 9 has two slabs, which always read in place)
  for (int pre : {0, 1}) {
    gk::cuda::mmq_pre_mode(pre);
    each_weight_format([&]<class W>(std::type_identity<W>) {
      if (!gk::cuda::matvec_q8_serves(W::id)) return;
      for (std::int64_t k : {k_for(W::id), std::int64_t{4352}})
        for (std::int64_t n : {9, 64, 130}) {
          INFO(gk::name(W::id) << " k " << k << " n " << n << (pre ? " (weights unpacked first)" : ""));
          CHECK(mmq_mismatches<W>(k, 67, n, n == 9 ? 2 : 1) == 0);
        }
      // long rows unpacked first: 312 chunks (78 piped k-steps of 4, 39 of q3_K's 8)
      if (pre == 1) {
        INFO(gk::name(W::id) << " k 9984 n 64 (weights unpacked first)");
        CHECK(mmq_mismatches<W>(9984, 67, 64, 1) == 0);
      }
    });
  }
  gk::cuda::mmq_pre_mode(-1);
}

TEST_CASE("cuda mmq: f16 scales at their edges (subnormal, greatest, zero, negative) keep the bits",
          "[cuda][matmul][mmq]") {
  for (int pre : {0, 1}) {
    gk::cuda::mmq_pre_mode(pre);
    auto run = [&]<class W>(std::type_identity<W>) {
      for (std::int64_t n : {20, 130}) {
        INFO(gk::name(W::id) << " n " << n << (pre ? " (weights unpacked first)" : ""));
        CHECK(mmq_mismatches<W>(k_for(W::id), 67, n, 1, true) == 0);
      }
    };
    run(std::type_identity<gk::formats::q8_0>{});
    run(std::type_identity<gk::formats::q5_0>{});
    run(std::type_identity<gk::formats::iq4_nl>{});
    run(std::type_identity<gk::formats::q4_0>{});
  }
  gk::cuda::mmq_pre_mode(-1);
}

TEST_CASE("cuda matvec_q8: device-encoded activations equal the CPU's encode_row (q8_0, q8_1, q8_K)",
          "[cuda][matmul][q8]") {
  encoders_equal_cpu();
}

// The encoded-activation claims (common.cuh, exec::claim): one graph on the device,
//   h1 = x * 2;  y1 = w1 h1;  y1b = w1' h1 (w1' the same bytes as w1: reads h1's claim);
//   h2 = x * -0.5 (placed by the allocator on h1's storage, released after y1b);
//   y2 = w2 h2 (w2 another format with w1's activation format);
// computed with h1 free to be reused and again with h1 pinned (flag_output: nothing placed
// on it). Every output must be bit-equal between the two runs, and y1b equal to y1. Returns
// the number of differing outputs; REQUIREs that the first run did share the address.
template <class W1, class W2>
int claim_mismatches(std::int64_t k, std::int64_t m, std::int64_t n) {
  auto run = [&](bool pin_h1) {
    gk::context ctx{gk::context_params{64u << 20, nullptr, true}};
    gk::tensor* w1 = ctx.new_tensor_2d(W1::id, k, m);
    gk::tensor* w1b = ctx.new_tensor_2d(W1::id, k, m);
    gk::tensor* w2 = ctx.new_tensor_2d(W2::id, k, m);
    gk::tensor* x = ctx.new_tensor_2d(type::f32, k, n);
    x->flags |= gk::flag_input;
    gk::tensor* h1 = gk::scale(ctx, x, 2.0f);
    if (pin_h1) h1->flags |= gk::flag_output;
    gk::tensor* y1 = gk::mul_mat(ctx, w1, h1);
    gk::tensor* y1b = gk::mul_mat(ctx, w1b, h1);
    gk::tensor* h2 = gk::scale(ctx, x, -0.5f);
    gk::tensor* y2 = gk::mul_mat(ctx, w2, h2);
    gk::graph g;
    for (gk::tensor* y : {y1, y1b, y2}) {
      y->flags |= gk::flag_output;
      g.build_forward_expand(y);
    }
    gk::buffer_type& dm = gk::cuda::device_buffer_type(0);
    const auto pad = [&](gk::tensor* t) { return (dm.alloc_size(t) + dm.alignment() - 1) / dm.alignment() * dm.alignment(); };
    auto buf = dm.alloc_buffer(pad(w1) + pad(w1b) + pad(w2) + pad(x));
    std::size_t off = 0;
    for (gk::tensor* t : {w1, w1b, w2, x}) {
      buf->init_tensor(t, off);
      off += pad(t);
    }
    const auto& b1 = weight_bytes(W1::id, k, m);
    const auto& b2 = weight_bytes(W2::id, k, m);
    buf->set_tensor(w1, b1.data(), 0, b1.size());
    buf->set_tensor(w1b, b1.data(), 0, b1.size());
    buf->set_tensor(w2, b2.data(), 0, b2.size());
    std::vector<float> xs(static_cast<std::size_t>(k * n));
    std::mt19937 rng(static_cast<unsigned>(k + n));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (float& v : xs) v = u(rng);
    buf->set_tensor(x, xs.data(), 0, xs.size() * sizeof(float));
    gk::cpu_backend cpu(2);
    gk::sched s({&gk_cuda_test::cuda_backend(), &cpu});
    s.alloc_graph(g);
    for (gk::tensor* t : {h1, y1, y1b, h2, y2}) REQUIRE(s.backend_of(t) == &gk_cuda_test::cuda_backend());
    if (pin_h1) REQUIRE(h1->data != h2->data);
    else REQUIRE(h1->data == h2->data);  // else this case tests nothing
    s.compute(g);
    std::vector<float> out;
    for (gk::tensor* y : {y1, y1b, y2}) {
      std::vector<float> v(static_cast<std::size_t>(m * n));
      gk::buffer_of(y)->get_tensor(y, v.data(), 0, v.size() * sizeof(float));
      out.insert(out.end(), v.begin(), v.end());
    }
    return out;
  };
  const std::vector<float> shared = run(false), pinned = run(true);
  const std::size_t per = static_cast<std::size_t>(m * n);
  int bad = 0;
  for (std::size_t i = 0; i < shared.size(); ++i)
    if (std::memcmp(&shared[i], &pinned[i], sizeof(float)) != 0 && bad++ < 3)
      UNSCOPED_INFO("output " << i % per << " of y" << (i / per == 0 ? "1" : i / per == 1 ? "1b" : "2") << ": "
                              << shared[i] << " with h1's storage reused, " << pinned[i] << " with h1 pinned");
  for (std::size_t i = 0; i < per; ++i)
    if (std::memcmp(&shared[i], &shared[per + i], sizeof(float)) != 0 && bad++ < 3)
      UNSCOPED_INFO("output " << i << ": y1 " << shared[i] << ", y1b " << shared[per + i] << " (the same weight bytes)");
  return bad;
}

TEST_CASE("cuda mul_mat: encoded activations claimed by tensor, not address (one graph, h1 reused and pinned)",
          "[cuda][matmul][q8]") {
  namespace F = gk::formats;
  for (std::int64_t n : {1, 3, 20}) {  // the wide mat-vec, matvec_q8, the int8 prompt path
    INFO("n " << n);
    CHECK(claim_mismatches<F::q4_0, F::q8_0>(4096, 67, n) == 0);
    CHECK(claim_mismatches<F::q4_K, F::q6_K>(512, 67, n) == 0);
  }
}

// Planted controls: each must fail when run on purpose (test_cuda_matmul "[control]").
TEST_CASE("cuda matvec_q8 control: an encoder that truncates must fail the byte and CPU checks", "[.control]") {
  gk::cuda::matvec_q8_plant(1);
  encoders_equal_cpu();
  q8_matvec_formats(512, 1);
  gk::cuda::matvec_q8_plant(0);
}
TEST_CASE("cuda matvec_q8 control: a mat-vec that drops each row's last block must fail", "[.control]") {
  gk::cuda::matvec_q8_plant(2);
  q8_matvec_formats(4352, 1);
  q8_matvec_formats(512, 3);
  CHECK(mmq_mismatches<gk::formats::q4_K>(512, 67, 20, 1) == 0);  // mmq drops it too
  CHECK(mmq_mismatches<gk::formats::q4_0>(160, 67, 20, 1) == 0);
  CHECK(mmq_mismatches<gk::formats::iq1_m>(512, 67, 20, 1) == 0);  // scaled codes and mins by mma
  gk::cuda::mmq_pre_mode(1);  // and with the weights unpacked first
  CHECK(mmq_mismatches<gk::formats::q8_0>(160, 67, 20, 1) == 0);
  CHECK(mmq_mismatches<gk::formats::q6_K>(512, 67, 20, 1) == 0);
  gk::cuda::mmq_pre_mode(-1);
  CHECK(mmq_id_mismatches<gk::formats::q4_K>(512, 67, 2) == 0);  // and mul_mat_id's grouped columns
  gk::cuda::matvec_q8_plant(0);
}
TEST_CASE("cuda mmq control: weights unpacked first with a chunk's scales from the next chunk must fail", "[.control]") {
  gk::cuda::matvec_q8_plant(4);
  gk::cuda::mmq_pre_mode(1);
  CHECK(mmq_mismatches<gk::formats::q8_0>(160, 67, 20, 1) == 0);
  CHECK(mmq_mismatches<gk::formats::q6_K>(512, 67, 130, 1) == 0);
  gk::cuda::mmq_pre_mode(-1);
  gk::cuda::matvec_q8_plant(0);
}
TEST_CASE("cuda matvec_q8 control: claims keyed by address alone, kept across writes, must fail", "[.control]") {
  gk::cuda::matvec_q8_plant(5);
  CHECK(claim_mismatches<gk::formats::q4_0, gk::formats::q8_0>(4096, 67, 1) == 0);
  CHECK(claim_mismatches<gk::formats::q4_K, gk::formats::q6_K>(512, 67, 20) == 0);
  gk::cuda::matvec_q8_plant(0);
}
TEST_CASE("cuda mmq control: mul_mat_id grouping that leaves out each expert's last column must fail", "[.control]") {
  gk::cuda::matvec_q8_plant(3);
  CHECK(mmq_id_mismatches<gk::formats::q8_0>(160, 67, 1) == 0);
  CHECK(mmq_id_mismatches<gk::formats::iq2_xxs>(512, 67, 2) == 0);
  gk::cuda::matvec_q8_plant(0);
}
