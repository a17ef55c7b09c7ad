// SPDX-License-Identifier: MIT
// The dp4a mat-vec's block dots (src/cuda/matvec_q8.cuh) against the CPU definition W::dot,
// bit for bit, on the host: the header compiled as host code (GK_Q8_HOST) with the few CUDA
// intrinsics it uses emulated here from their PTX definitions (dp4a: four signed byte
// products plus c; vsub4: bytewise subtraction mod 256; prmt default mode; funnel shift
// right). No GPU is needed, so this runs wherever CUDA is configured; the device suite
// (test_cuda_matmul, [q8]) checks the compiled kernels end to end.
//
// Per format: random weight blocks (encoded by W::encode from normal values, some tiny),
// random activation blocks (encode_row of W::dot_type, some with zeros), the activation in
// the mat-vec's layout (codes, d as float, q8_K's bsums); each chunk unpacked from a copy
// of the block at every offset mod 4 (weights sit at any alignment in the staged rows),
// its integer part taken, the parts summed as the lanes' shuffles do, and the term compared
// with W::dot(block, act) by bits. Planted control (tag [.control], must fail): a q4_0 dot
// whose codes are off by one.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gk/core/exact_fp.hpp"
#include "gk/core/narrow.hpp"
#include "gk/formats/all.hpp"

// the products and sums below are the device's __fmul_rn / __fadd_rn: never fused
GK_EXACT_FP_BEGIN

// ---- the intrinsics, as PTX defines them ----
namespace {
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned sh) {
  return static_cast<unsigned>(((static_cast<std::uint64_t>(hi) << 32) | lo) >> (sh & 31));
}
inline int __dp4a(int a, int b, int c) {
  for (int i = 0; i < 4; ++i) c += static_cast<std::int8_t>(a >> (8 * i)) * static_cast<std::int8_t>(b >> (8 * i));
  return c;
}
inline unsigned __vsub4(unsigned a, unsigned b) {
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) r |= (((a >> (8 * i)) - (b >> (8 * i))) & 0xffu) << (8 * i);
  return r;
}
// prmt.b32 default mode; selector nibbles here never set bit 3 (sign replication)
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const std::uint64_t v = (static_cast<std::uint64_t>(y) << 32) | x;
  unsigned r = 0;
  for (int n = 0; n < 4; ++n) r |= static_cast<unsigned>((v >> (8 * ((s >> (4 * n)) & 7))) & 0xff) << (8 * n);
  return r;
}
inline int __popc(unsigned v) { return std::popcount(v); }
inline float __int2float_rn(int v) { return static_cast<float>(v); }
inline float __int_as_float(int v) { return std::bit_cast<float>(v); }
template <class T>
T __ldg(const T* p) { return *p; }
}  // namespace

// ---- formats.cuh's pieces the dots use, from gk's own definitions ----
namespace gk::cuda::fmt {
inline float mul(float a, float b) { return a * b; }
inline float add(float a, float b) { return a + b; }
inline float sub(float a, float b) { return a - b; }
inline float h2f(std::uint16_t h) { return gk::f16_to_f32(h); }
inline float e8m0_half(std::uint8_t e) { return gk::e8m0_to_f32_half(e); }
inline float ue4m3(std::uint8_t x) { return gk::ue4m3_to_f32(x); }
inline int trit(unsigned b, int k) { return gk::formats::detail::trit(static_cast<std::uint8_t>(b), k); }
template <class T>
struct table_view { const T* v; };
inline const table_view<std::uint64_t> iq2xxs_grid{gk::codebooks::iq2xxs_grid}, iq2xs_grid{gk::codebooks::iq2xs_grid},
    iq2s_grid{gk::codebooks::iq2s_grid}, iq1s_grid{gk::codebooks::iq1s_grid};
inline const table_view<std::uint32_t> iq3xxs_grid{gk::codebooks::iq3xxs_grid}, iq3s_grid{gk::codebooks::iq3s_grid};
inline const table_view<std::uint8_t> ksigns_iq2xs{gk::codebooks::ksigns_iq2xs};
}  // namespace gk::cuda::fmt

#define GK_Q8_HOST 1
#include "../../src/cuda/matvec_q8.cuh"
#include "../../src/cuda/matvec_wide.cuh"

namespace {

namespace F = gk::formats;
namespace q8 = gk::cuda::q8;

// the control's dot: q4_0 with every code one too high
struct q4_0_off_by_one : q8::q8dot<F::q4_0> {
  static void unpack(const unsigned char* b, int c, wc& u) {
    q8::q8dot<F::q4_0>::unpack(b, c, u);
    for (auto& q : u.q) q = __vsub4(q, 0xffffffffu);
  }
};

// Trial t's weights (some tiny) and activations (some large, some with zeros).
void trial_values(int t, std::mt19937& rng, std::vector<float>& w, std::vector<float>& x) {
  std::normal_distribution<float> g;
  for (auto& v : w) v = g(rng) * (t % 3 == 0 ? 0.01f : 1.0f);
  for (auto& v : x) v = g(rng) * (t % 5 == 0 ? 100.0f : 1.0f);
  if (t % 7 == 1)
    for (std::size_t i = 0; i < x.size(); i += 3) x[i] = 0.0f;
}

// Trial t of format W: one weight block, its activation blocks, W::dot of them (want), and
// the activation column as encode_act lays it out (codes, d as float, q8_K's bsums).
template <class W>
struct block_trial {
  using A = typename W::dot_type;
  static constexpr int B = W::block_size, nblk = B / A::block_size;
  typename W::block wb;
  std::vector<typename A::block> ab = std::vector<typename A::block>(nblk);
  float want = 0.0f;
  std::vector<char> col = std::vector<char>(B + 4 * nblk + 32 * nblk, 0);
  block_trial(int t, std::mt19937& rng) {
    std::vector<float> w(B), x(B);
    trial_values(t, rng, w, x);
    W::encode(w.data(), wb, nullptr);
    gk::encode_row<A>(x.data(), ab.data(), B, nullptr);
    want = W::dot(wb, ab.data());
    for (int i = 0; i < nblk; ++i) {
      float d;
      if constexpr (A::id == gk::type::q8_K) {
        d = ab[i].d;
        std::memcpy(col.data() + B + 4 * nblk + 32 * i, ab[i].bsums, 32);
      } else {
        d = gk::to_f32(ab[i].d);
      }
      std::memcpy(col.data() + A::block_size * i, ab[i].qs, A::block_size);
      std::memcpy(col.data() + B + 4 * i, &d, 4);
    }
  }
  q8::act_col act() const { return {col.data(), B, B + 4 * nblk}; }
};

// Blocks whose device term differs from W::dot in bits (Q: the dot under test).
template <class W, class Q = q8::q8dot<W>>
int mismatches(int trials) {
  constexpr int S = sizeof(typename W::block);
  std::mt19937 rng(5 + static_cast<int>(W::id));
  int bad = 0;
  for (int t = 0; t < trials; ++t) {
    const block_trial<W> tr(t, rng);
    const auto& wb = tr.wb;
    const auto& col = tr.col;
    const float want = tr.want;
    const q8::act_col ac = tr.act();
    for (int off = 0; off < 4; ++off) {
      alignas(16) unsigned char buf[S + 16] = {};
      std::memcpy(buf + off, &wb, S);
      int total[Q::np] = {};
      typename Q::wc lead{};
      for (int c = 0; c < Q::ch; ++c) {
        typename Q::wc u;
        Q::unpack(buf + off, c, u);
        if (c == 0) lead = u;
        int xw[8];
        std::memcpy(xw, col.data() + 32 * c, 32);
        int p[Q::np];
        Q::part(u, xw, ac, c, p);
        for (int i = 0; i < Q::np; ++i) total[i] += p[i];
      }
      const float got = Q::term(lead, ac, 0, total);
      if (std::memcmp(&got, &want, 4) != 0) {
        if (bad < 3)
          UNSCOPED_INFO(gk::name(W::id) << " trial " << t << " offset " << off << ": cpu " << want << ", device dot " << got);
        ++bad;
      }
    }
  }
  return bad;
}

// the wide control's dot: q4_K with the two 16-byte halves of each lane's codes swapped
struct q4_K_halves_swapped : q8::wide<F::q4_K> {
  template <class A>
  static void parts(const unsigned (&v)[words], int l, const int* x, const A& a, std::int64_t blk, int* p,
                    typename Q::wc& h) {
    unsigned u[words];
    for (int i = 0; i < words; ++i) u[i] = v[i];
    for (int i = 0; i < 4; ++i) std::swap(u[at + i], u[at + 4 + i]);
    q8::wide<F::q4_K>::parts(u, l, x, a, blk, p, h);
  }
};

// the lattice control: iq3_s with each lane's two chunks' sign words swapped
struct iq3_s_signs_swapped : q8::wide<F::iq3_s> {
  template <class A>
  static void parts(const unsigned (&v)[words], int l, const int* x, const A& a, std::int64_t blk, int* p,
                    typename Q::wc& h) {
    unsigned u[words];
    for (int i = 0; i < words; ++i) u[i] = v[i];
    std::swap(u[4], u[5]);
    q8::wide<F::iq3_s>::parts(u, l, x, a, blk, p, h);
  }
};

// matvec_wide's lattice dot with the grid read from a table (the kernel's shared-memory copy;
// here a copy of the codebook in a buffer), through parts_tab
template <class W>
struct wide_with_tab : q8::wide<W> {
  using base = q8::wide<W>;
  template <class A>
  static void parts(const unsigned (&v)[base::words], int l, const int* x, const A& a, std::int64_t blk, int* p,
                    typename base::Q::wc& h) {
    static const std::vector<unsigned char> tab = [] {
      std::vector<unsigned char> t(base::tab_bytes);
      std::memcpy(t.data(), q8::lattice_grid<W>::get().v, t.size());
      return t;
    }();
    base::parts_tab(v, l, x, a, blk, p, h, tab.data());
  }
};

// Blocks whose wide-dot term (V's lanes' parts summed, q8dot<W>::term) differs from W::dot.
template <class W, class V = q8::wide<W>>
int wide_mismatches(int trials) {
  using A = typename W::dot_type;
  using Q = q8::q8dot<W>;
  constexpr int B = W::block_size, S = sizeof(typename W::block);
  static_assert(A::block_size == B, "wide dots are for the 256-weight formats");
  std::mt19937 rng(11 + static_cast<int>(W::id));
  int bad = 0;
  for (int t = 0; t < trials; ++t) {
    std::vector<float> w(B), x(B);
    trial_values(t, rng, w, x);
    typename W::block wb;
    W::encode(w.data(), wb, nullptr);
    if (t % 4 == 3) {  // any bits a file may hold, but finite scales
      auto* bytes = reinterpret_cast<unsigned char*>(&wb);
      for (int i = 4; i < S; ++i) bytes[i] = static_cast<unsigned char>(rng());
    }
    typename A::block ab;
    gk::encode_row<A>(x.data(), &ab, B, nullptr);
    const float want = W::dot(wb, &ab);
    if (!std::isfinite(want)) continue;  // random bytes made a scale inf or NaN (NaN bits may differ)
    std::vector<char> col(B + 4 + 32, 0);
    std::memcpy(col.data(), ab.qs, B);
    std::memcpy(col.data() + B, &ab.d, 4);
    std::memcpy(col.data() + B + 4, ab.bsums, 32);
    const q8::act_col ac{col.data(), B, B + 4};
    // the block at every offset mod 16 its loads allow
    for (int off = 0; off < 16; off += V::align) {
      alignas(16) unsigned char buf[S + 32] = {};
      std::memcpy(buf + off, &wb, S);
      int total[Q::np] = {};
      typename Q::wc lead{};
      for (int l = 0; l < V::lanes; ++l) {
        unsigned v[V::words];
        V::load(buf + off, l, v);
        int xw[16];
        std::memcpy(xw, col.data() + 32 * V::chunk(l, 0), 32);
        std::memcpy(xw + 8, col.data() + 32 * V::chunk(l, 1), 32);
        int p[Q::np];
        typename Q::wc h{};
        V::parts(v, l, xw, ac, 0, p, h);
        if (l == 0) lead = h;
        for (int i = 0; i < Q::np; ++i) total[i] += p[i];
      }
      const float got = Q::term(lead, ac, 0, total);
      if (std::memcmp(&got, &want, 4) != 0) {
        if (bad < 3)
          UNSCOPED_INFO(gk::name(W::id) << " trial " << t << " offset " << off << ": cpu " << want << ", wide dot " << got);
        ++bad;
      }
    }
  }
  return bad;
}

// the whole-block control: q8_0 with a lane's two blocks' bytes swapped
struct q8_0_blocks_swapped : q8::wide<F::q8_0> {
  template <class A>
  static float term(const unsigned (&v)[words], int l, int j, const int* x, const A& a, std::int64_t g) {
    int xs[16];  // the activation halves swapped too, so only the weight bytes are wrong
    for (int i = 0; i < 16; ++i) xs[i] = x[(i + 8) % 16];
    return q8::wide<F::q8_0>::term(v, l, 1 - j, xs, a, g);
  }
};

// Blocks whose whole-block wide term (wide32: a lane's blocks from its registers) differs
// from W::dot: a group of 256 weights at every offset mod 16 its loads allow, each lane's
// each block.
template <class W, class V = q8::wide<W>>
int wide32_mismatches(int trials) {
  using A = typename W::dot_type;
  constexpr int B = W::block_size, S = sizeof(typename W::block), nw = 256 / B, na = 256 / A::block_size;
  static_assert(A::block_size == 32, "whole-block wide dots are for the 32- and 64-weight formats");
  std::mt19937 rng(13 + static_cast<int>(W::id));
  int bad = 0, seen = 0;
  for (int t = 0; t < trials; ++t) {
    std::vector<float> w(256), x(256);
    trial_values(t, rng, w, x);
    std::vector<typename W::block> wb(nw);
    for (int i = 0; i < nw; ++i) W::encode(w.data() + B * i, wb[i], nullptr);
    if (t % 4 == 3) {  // any bits a file may hold past the first two bytes of a block
      for (auto& blk : wb) {
        auto* bytes = reinterpret_cast<unsigned char*>(&blk);
        for (int i = 2; i < S; ++i) bytes[i] = static_cast<unsigned char>(rng());
      }
    }
    std::vector<typename A::block> ab(na);
    gk::encode_row<A>(x.data(), ab.data(), 256, nullptr);
    // the activation column as encode_act lays it out: codes, then a float d per block
    std::vector<char> col(256 + 4 * na, 0);
    for (int i = 0; i < na; ++i) {
      const float d = gk::to_f32(ab[i].d);
      std::memcpy(col.data() + 32 * i, ab[i].qs, 32);
      std::memcpy(col.data() + 256 + 4 * i, &d, 4);
    }
    const q8::act_col ac{col.data(), 256, 0};
    for (int off = 0; off < 16; off += V::align) {
      alignas(16) unsigned char buf[nw * S + 32] = {};
      std::memcpy(buf + off, wb.data(), nw * S);
      for (int l = 0; l < V::lanes; ++l) {
        unsigned v[V::words];
        V::load(buf + off, l, v);
        int xw[16];
        std::memcpy(xw, col.data() + 32 * V::chunk(l, 0), 32);
        std::memcpy(xw + 8, col.data() + 32 * V::chunk(l, 1), 32);
        for (int j = 0; j < V::blocks; ++j) {
          const int blk = V::blocks * l + j;
          const float want = W::dot(wb[blk], &ab[blk * (B / 32)]);
          if (!std::isfinite(want)) continue;  // random bytes made a scale inf or NaN
          ++seen;
          const float got = V::term(v, l, j, xw, ac, 0);
          if (std::memcmp(&got, &want, 4) != 0) {
            if (bad < 3)
              UNSCOPED_INFO(gk::name(W::id) << " trial " << t << " offset " << off << " lane " << l << " block " << j
                                            << ": cpu " << want << ", wide dot " << got);
            ++bad;
          }
        }
      }
    }
  }
  return seen == 0 ? -1 : bad;
}

}  // namespace

TEST_CASE("matvec_wide block dots equal W::dot bit for bit (host emulation)", "[cuda][q8]") {
  int served = 0, tabbed = 0;
  std::apply(
      [&](auto... w) {
        (
            [&]<class W>(W) {
              if constexpr (q8::has_wide<W>) {
                INFO("format " << gk::name(W::id));
                if constexpr (q8::wide_whole<W>)
                  CHECK(wide32_mismatches<W>(200) == 0);
                else
                  CHECK(wide_mismatches<W>(200) == 0);
                if constexpr (requires { q8::wide<W>::tab_bytes; }) {
                  if constexpr (q8::wide<W>::tab_bytes > 0) {
                    CHECK(wide_mismatches<W, wide_with_tab<W>>(200) == 0);
                    ++tabbed;
                  }
                }
                ++served;
              }
            }(w),
            ...);
      },
      gk::formats::all{});
  // q4_K, q5_K, q6_K, q2_K, q3_K, iq4_xs; iq2_xxs, iq3_s, iq3_xxs, iq2_xs, iq2_s, iq1_s, iq1_m,
  // tq1_0, tq2_0; q4_0, q4_1, q5_0, q5_1, q8_0, iq4_nl, mxfp4, nvfp4
  CHECK(served == 23);
  CHECK(tabbed == 3);  // iq2_xxs, iq3_xxs, iq3_s also with the grid from a table
}

TEST_CASE("matvec_wide block dots control: codes of the wrong half must fail", "[.control]") {
  CHECK(wide_mismatches<F::q4_K, q4_K_halves_swapped>(50) == 0);
}

TEST_CASE("matvec_wide lattice control: the other chunk's signs must fail", "[.control]") {
  CHECK(wide_mismatches<F::iq3_s, iq3_s_signs_swapped>(50) == 0);
}

// the table control: iq2_xxs reading its grid from a table shifted by one entry
struct iq2_xxs_tab_shifted : q8::wide<F::iq2_xxs> {
  using base = q8::wide<F::iq2_xxs>;
  template <class A>
  static void parts(const unsigned (&v)[base::words], int l, const int* x, const A& a, std::int64_t blk, int* p,
                    typename base::Q::wc& h) {
    static const std::vector<std::uint64_t> tab = [] {
      std::vector<std::uint64_t> t(257);
      for (int i = 0; i < 256; ++i) t[i + 1] = gk::codebooks::iq2xxs_grid[i];
      t[0] = gk::codebooks::iq2xxs_grid[255];
      return t;
    }();
    base::parts_tab(v, l, x, a, blk, p, h, tab.data());
  }
};

TEST_CASE("matvec_wide lattice table control: a grid off by one entry must fail", "[.control]") {
  CHECK(wide_mismatches<F::iq2_xxs, iq2_xxs_tab_shifted>(50) == 0);
}

TEST_CASE("matvec_wide whole-block control: a lane's blocks swapped must fail", "[.control]") {
  CHECK(wide32_mismatches<F::q8_0, q8_0_blocks_swapped>(50) == 0);
}

TEST_CASE("matvec_q8 block dots equal W::dot bit for bit (host emulation)", "[cuda][q8]") {
  int served = 0;
  std::apply(
      [&](auto... w) {
        (
            [&]<class W>(W) {
              if constexpr (q8::has_q8dot<W>) {
                INFO("format " << gk::name(W::id));
                CHECK(mismatches<W>(W::block_size == 256 ? 60 : 300) == 0);
                ++served;
              }
            }(w),
            ...);
      },
      gk::formats::all{});
  CHECK(served == 26);  // every integer weight format (all but f32, f16, bf16 and q8_K)
}

TEST_CASE("matvec_q8 block dots control: codes off by one must fail", "[.control]") {
  CHECK(mismatches<F::q4_0, q4_0_off_by_one>(50) == 0);
}

// ---- the int8 prompt's way of summing a block's integer parts (src/cuda/mmq.cu) ----
// mmq_mins: the min part (part mins_at) as the sum over the block's chunks and words of
// the s8 x s8 products of q8dot::min_bytes(u, word) with the activation words, as the
// second mma forms it. mmq_scaled: part 0 as the same sum with the codes after
// q8dot::scale_codes, times scaled_sign and scaled_mul (iq1_s, iq1_m: 8), plus the min part
// where mins_at is 0. The other parts as part() gives them; the term
// from the last chunk's fields, as the kernel reads them at a block's end. Compared with
// W::dot by bits (the device suite checks the kernels themselves).
namespace {
template <class Q>
constexpr bool q_mins = requires { Q::mins_at; };
template <class Q>
constexpr bool q_scaled = requires(typename Q::wc& u) { Q::scale_codes(u); };

template <class W, class Q = q8::q8dot<W>>
int mmq_sum_mismatches(int trials) {
  static_assert(W::dot_type::block_size == W::block_size, "the formats of mmq_mins / mmq_scaled take one q8_K block a block");
  std::mt19937 rng(11 + static_cast<int>(W::id));
  int bad = 0;
  for (int t = 0; t < trials; ++t) {
    const block_trial<W> tr(t, rng);
    const auto& col = tr.col;
    const float want = tr.want;
    const q8::act_col ac = tr.act();
    alignas(16) unsigned char buf[sizeof(typename W::block) + 16] = {};
    std::memcpy(buf, &tr.wb, sizeof(tr.wb));
    int total[Q::np] = {}, ps = 0, pm = 0;
    typename Q::wc last{};
    for (int c = 0; c < Q::ch; ++c) {
      typename Q::wc u;
      Q::unpack(buf, c, u);
      int xw[8];
      std::memcpy(xw, col.data() + 32 * c, 32);
      int p[Q::np];
      Q::part(u, xw, ac, c, p);  // before scale_codes: part reads the plain codes
      for (int i = 0; i < Q::np; ++i) total[i] += p[i];
      if constexpr (q_scaled<Q>) {
        Q::scale_codes(u);
        for (int i = 0; i < 8; ++i) ps = __dp4a(static_cast<int>(u.q[i]), xw[i], ps);
      }
      if constexpr (q_mins<Q>)
        for (int i = 0; i < 8; ++i) pm = __dp4a(static_cast<int>(Q::min_bytes(u, i)), xw[i], pm);
      last = u;
    }
    if constexpr (q_mins<Q>) total[Q::mins_at] = pm;
    if constexpr (q_scaled<Q>) {
      int mins0 = 0;
      if constexpr (q_mins<Q>) mins0 = Q::mins_at == 0 ? pm : 0;
      total[0] = q8::scaled_mul_of<Q>() * Q::scaled_sign * ps + mins0;
    }
    const float got = Q::term(last, ac, 0, total);
    if (std::memcmp(&got, &want, 4) != 0) {
      if (bad < 3) UNSCOPED_INFO(gk::name(W::id) << " trial " << t << ": cpu " << want << ", mmq's sums " << got);
      ++bad;
    }
  }
  return bad;
}

// controls: q2_K's mins of the other half; q3_K's scaled codes taken with the wrong sign;
// iq1_m's delta signs of the neighbouring group
struct q2_K_mins_other_half : q8::q8dot<F::q2_K> {
  static unsigned min_bytes(const wc& u, int w) { return q8::q8dot<F::q2_K>::min_bytes(u, w ^ 4); }
};
struct iq1_m_mins_other_group : q8::q8dot<F::iq1_m> {
  static unsigned min_bytes(const wc& u, int w) { return q8::q8dot<F::iq1_m>::min_bytes(u, w ^ 2); }
};
struct q3_K_scaled_unsigned : q8::q8dot<F::q3_K> {
  static constexpr int scaled_sign = 1;
};
}  // namespace

TEST_CASE("mmq's block sums by mma (mins, scaled codes) equal W::dot bit for bit (host emulation)", "[cuda][q8]") {
  int served = 0;
  std::apply(
      [&](auto... w) {
        (
            [&]<class W>(W) {
              if constexpr (q8::has_q8dot<W>) {
                using Q = q8::q8dot<W>;
                if constexpr (q_mins<Q> || q_scaled<Q>) {
                  INFO("format " << gk::name(W::id));
                  CHECK(mmq_sum_mismatches<W>(200) == 0);
                  ++served;
                }
              }
            }(w),
            ...);
      },
      gk::formats::all{});
  CHECK(served == 8);  // q2_K, q3_K, q4_K, q5_K, iq1_s, iq1_m (mins or scaled), tq1_0, tq2_0 (scaled)
}

TEST_CASE("mmq block sums control: q2_K's mins of the other half must fail", "[.control]") {
  CHECK(mmq_sum_mismatches<F::q2_K, q2_K_mins_other_half>(50) == 0);
}

TEST_CASE("mmq block sums control: q3_K's scaled codes with the wrong sign must fail", "[.control]") {
  CHECK(mmq_sum_mismatches<F::q3_K, q3_K_scaled_unsigned>(50) == 0);
}

TEST_CASE("mmq block sums control: iq1_m's delta signs of the neighbouring group must fail", "[.control]") {
  CHECK(mmq_sum_mismatches<F::iq1_m, iq1_m_mins_other_group>(50) == 0);
}

// ---- the byte tricks, against their plain definitions ----
namespace {
// words of every grid apply_sign is used on (iq2_xxs, iq2_xs, iq2_s: 8 bytes a point; iq3_xxs,
// iq3_s: 4)
std::vector<unsigned> lattice_grid_words() {
  std::vector<unsigned> v;
  for (const auto& g : {std::pair{gk::codebooks::iq2xxs_grid, std::size(gk::codebooks::iq2xxs_grid)},
                        std::pair{gk::codebooks::iq2xs_grid, std::size(gk::codebooks::iq2xs_grid)},
                        std::pair{gk::codebooks::iq2s_grid, std::size(gk::codebooks::iq2s_grid)}})
    for (std::size_t i = 0; i < g.second; ++i) {
      v.push_back(static_cast<unsigned>(g.first[i]));
      v.push_back(static_cast<unsigned>(g.first[i] >> 32));
    }
  for (unsigned x : gk::codebooks::iq3xxs_grid) v.push_back(x);
  for (unsigned x : gk::codebooks::iq3s_grid) v.push_back(x);
  return v;
}
// apply_sign(v, s) against the byte-wise definition, every sign nibble: the words that differ
template <class Sign>
int sign_mismatches(const std::vector<unsigned>& words, Sign apply) {
  int bad = 0;
  for (unsigned v : words)
    for (unsigned s = 0; s < 16; ++s) {
      const unsigned m = q8::sign_bits4(s) * 0xffu;
      if (apply(v, q8::sign_bits4(s)) != __vsub4(v ^ m, m)) ++bad;
    }
  return bad;
}
}  // namespace

TEST_CASE("apply_sign negates each grid byte exactly (no byte of any lattice grid is 0)", "[cuda][q8]") {
  const auto words = lattice_grid_words();
  REQUIRE(words.size() == 2 * (256 + 512 + 1024) + 256 + 512);
  CHECK(sign_mismatches(words, [](unsigned v, unsigned s) { return q8::apply_sign(v, s); }) == 0);
}

TEST_CASE("apply_sign control: a 0 byte carries into the next and must fail", "[.control]") {
  // the one input the grids never hold; planted to show the comparison sees the carry
  CHECK(sign_mismatches({0x08000819u}, [](unsigned v, unsigned s) { return q8::apply_sign(v, s); }) == 0);
}

TEST_CASE("ksign is the iq2 sign table", "[cuda][q8]") {
  int bad = 0;
  for (unsigned k = 0; k < 128; ++k) bad += q8::ksign(k) != gk::codebooks::ksigns_iq2xs[k];
  CHECK(bad == 0);
}

TEST_CASE("sub_bytes is the byte-wise subtraction for codes below 128", "[cuda][q8]") {
  // every byte value 0..127 in every position, against each constant the unpackers subtract
  for (unsigned c : {0x01u, 0x04u, 0x08u, 0x10u, 0x20u, 0x80u}) {
    const unsigned cw = c * 0x01010101u;
    int bad = 0;
    for (unsigned x = 0; x < 128; ++x)
      for (unsigned y : {0u, 1u, 63u, 127u}) {
        const unsigned w = x | y << 8 | x << 16 | (127u - x) << 24;
        const unsigned v = (127u - x) | x << 8 | y << 16 | x << 24;
        if (q8::sub_bytes(w, cw) != __vsub4(w, cw) || q8::sub_bytes(v, cw) != __vsub4(v, cw)) ++bad;
      }
    INFO("constant " << c);
    CHECK(bad == 0);
  }
}

namespace {
// trits_times against s x byte, each byte's product mod 256: every word of bytes in {-1, 0,
// 1} (81) and every scale 1 .. 15; the words that differ
template <class F>
int trit_mismatches(F times) {
  int bad = 0;
  for (int k = 0; k < 81; ++k)
    for (unsigned s = 1; s <= 15; ++s) {
      unsigned q = 0, want = 0;
      for (int i = 0, r = k; i < 4; ++i, r /= 3) {
        const int t = r % 3 - 1;
        q |= (static_cast<unsigned>(t) & 0xffu) << (8 * i);
        want |= (static_cast<unsigned>(t * static_cast<int>(s)) & 0xffu) << (8 * i);
      }
      bad += times(q, s) != want;
    }
  return bad;
}
}  // namespace

TEST_CASE("trits_times multiplies bytes of -1, 0, 1 by a scale byte-wise", "[cuda][q8]") {
  CHECK(trit_mismatches([](unsigned q, unsigned s) { return q8::trits_times(q, s); }) == 0);
}

TEST_CASE("trits_times control: the plain product (a -1 byte carries) must fail", "[.control]") {
  CHECK(trit_mismatches([](unsigned q, unsigned s) { return q * s; }) == 0);
}

TEST_CASE("lookup8 gives each nibble's table entry, low nibbles then high", "[cuda][q8]") {
  auto check = [](auto table, auto lookup) {
    std::mt19937 rng(3);
    int bad = 0;
    for (int t = 0; t < (1 << 17); ++t) {
      // the low 16 bits through every value, the high ones random
      const unsigned w = static_cast<unsigned>(t & 0xffff) | static_cast<unsigned>(rng()) << 16;
      unsigned lo = 0, hi = 0, want_lo = 0, want_hi = 0;
      lookup(w, lo, hi);
      for (int i = 0; i < 4; ++i) {
        want_lo |= static_cast<unsigned>(static_cast<std::uint8_t>(table((w >> (8 * i)) & 0xf))) << (8 * i);
        want_hi |= static_cast<unsigned>(static_cast<std::uint8_t>(table((w >> (8 * i + 4)) & 0xf))) << (8 * i);
      }
      if (lo != want_lo || hi != want_hi) ++bad;
    }
    return bad;
  };
  CHECK(check([](unsigned c) { return gk::codebooks::kvalues_iq4nl[c]; },
              [](unsigned w, unsigned& lo, unsigned& hi) { q8::lookup8<false>(w, lo, hi); }) == 0);
  CHECK(check([](unsigned c) { return F::detail::fp4_doubled(static_cast<std::uint8_t>(c)); },
              [](unsigned w, unsigned& lo, unsigned& hi) { q8::lookup8<true>(w, lo, hi); }) == 0);
}

GK_EXACT_FP_END
