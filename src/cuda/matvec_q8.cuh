// SPDX-License-Identifier: MIT
// Device pieces of the dp4a mat-vec (matvec_q8.cu): the activation encoders to q8_0, q8_1
// and q8_K, and per weight format the block dot against its activation format.
//
// The CPU's dot of a weight row (dot_row<W>, include/gk/formats) encodes the activation
// column to W::dot_type and sums W::dot of each block in order: per block integer sums of
// code x activation code, then a few float operations. Here the same happens per block:
//   - encode_q8_32 / encode_q8_K restate q8_0/q8_1/q8_K::encode for a warp (a lane per
//     value, a max and a sum by shuffles: both exact), so the bytes equal the CPU's;
//   - q8dot<W> splits a weight block into 32-weight chunks (a lane each), unpacks a
//     chunk's codes into 8 words of 4 signed bytes, takes its integer sums against the
//     activation's bytes with __dp4a, adds the chunks' sums of one block across lanes
//     (integers: exact in any order), and one lane then applies the CPU's float operations
//     in the CPU's order (__fmul_rn and friends: nvcc would otherwise fuse a*b+c).
// So each block term equals the CPU's bit for bit; only the order in which block terms are
// added differs (lanes, then a warp tree, instead of one running sum).
//
// q8dot<W> interface:
//   ch            32-weight chunks per weight block
//   np            ints in a chunk's part (the block's parts are summed across its lanes)
//   wc            one chunk unpacked: q[8] (weights 4i .. 4i + 3 in word i) plus what the
//                 part and the term need
//   unpack(b, c, u)          b: the block's bytes (shared memory, any alignment)
//   part(u, x, a, kc, p)     x: the activation bytes of the chunk as 8 words; a: the
//                            activation column; kc: the chunk's index in the row
//   term(u, a, kc, p)        the block term from the summed parts (lane of chunk 0)
#pragma once

#include <cstdint>
#include <type_traits>

// GK_Q8_HOST: the block dots (not the encoders) compiled as host code against emulated
// intrinsics, so tests/cuda/test_cuda_q8_dots.cpp can check them bit for bit against
// W::dot on any machine, with no GPU.
#if defined(GK_Q8_HOST)
#define GK_Q8_FN inline
#define GK_Q8_MEMBER
#define GK_Q8_UNROLL
#else
#define GK_Q8_FN __device__ __forceinline__
#define GK_Q8_MEMBER __device__
#define GK_Q8_UNROLL _Pragma("unroll")
#include "device_math.cuh"
#include "formats.cuh"
#endif

namespace gk::cuda::q8 {

namespace F = gk::formats;

// ---- the activation columns as the mat-vec reads them ---------------------------------
// One column: kp code bytes (16-byte aligned, chunk kc at 32 kc), then one float d per
// activation block (q8_0/q8_1: the f16 d widened, exact), then for q8_K the 16 bsums of
// each block as int16. The byte test (test_cuda_matmul.cpp, [q8]) reads the CPU's layout
// instead, written by the same kernel (matvec_q8.cu, enc_args::cpu).
struct act_cols {
  const char* base;
  std::int64_t col_stride;  // bytes, a multiple of 16
  std::int64_t d_off;       // bytes from a column's start to its d array
  std::int64_t bs_off;      // q8_K: bytes to its bsums
};
struct act_col {
  const char* c;
  std::int64_t d_off, bs_off;
  GK_Q8_FN const float* d_at(std::int64_t blk) const {  // where d(blk) lies (mmq.cu copies it)
    return reinterpret_cast<const float*>(c + d_off) + blk;
  }
  GK_Q8_FN float d(std::int64_t blk) const { return *d_at(blk); }
  GK_Q8_FN const short* bsums(std::int64_t blk) const {
    return reinterpret_cast<const short*>(c + bs_off) + 16 * blk;
  }
};

// ---- reading block bytes at any alignment ------------------------------------------------
// Weight blocks are 17, 18, 22, 110 ... bytes, so their fields sit at any offset in the
// staged row. Four bytes at p: the two aligned words around them and a funnel shift (the
// word after the last byte is read too: the staging buffers have slack for it).
template <int N>
GK_Q8_FN void ld_words(const unsigned char* p, unsigned (&o)[N]) {
  const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(p);
  const unsigned* w = reinterpret_cast<const unsigned*>(a & ~std::uintptr_t{3});
  const unsigned sh = static_cast<unsigned>(a & 3) * 8;
  unsigned v[N + 1];
GK_Q8_UNROLL
  for (int i = 0; i <= N; ++i) v[i] = w[i];
GK_Q8_UNROLL
  for (int i = 0; i < N; ++i) o[i] = __funnelshift_r(v[i], v[i + 1], sh);
}
GK_Q8_FN unsigned ld_u32(const unsigned char* p) {
  unsigned o[1];
  ld_words<1>(p, o);
  return o[0];
}
GK_Q8_FN float ld_f16(const unsigned char* p) {
  return fmt::h2f(static_cast<std::uint16_t>(ld_u32(p) & 0xffffu));
}

// Where the 32-weight and lattice formats' unpack reads a block's bytes from (unpack_from):
// memory at any alignment (the chunk kernels' staged rows, mmq's shared memory), or words
// already in registers (matvec_wide.cuh's wide32, a lane's two blocks loaded once, and its
// lattice lanes' lane_src). Offsets are bytes
// from the block's start; words<N>(off, o) is the N words from off, u32(off) one.
struct ptr_src {
  const unsigned char* b;
  template <int N>
  GK_Q8_FN void words(int off, unsigned (&o)[N]) const { ld_words<N>(b + off, o); }
  GK_Q8_FN unsigned u32(int off) const { return ld_u32(b + off); }
};
// Bytes base .. of the words v (word i holds bytes 4 i .. 4 i + 3). Every offset must be
// a constant once unrolled and inlined, or v would go to local memory.
template <int NV>
struct reg_src {
  const unsigned (&v)[NV];
  int base;
  GK_Q8_FN unsigned at(int off) const {
    const int a = base + off, i = a >> 2, sh = 8 * (a & 3);
    if (sh == 0) return v[i];
    return __funnelshift_r(v[i], i + 1 < NV ? v[i + 1] : 0u, static_cast<unsigned>(sh));
  }
  template <int N>
  GK_Q8_FN void words(int off, unsigned (&o)[N]) const {
GK_Q8_UNROLL
    for (int i = 0; i < N; ++i) o[i] = at(off + 4 * i);
  }
  GK_Q8_FN unsigned u32(int off) const { return at(off); }
};
template <class Src>
GK_Q8_FN float src_f16(const Src& b, int off) {
  return fmt::h2f(static_cast<std::uint16_t>(b.u32(off) & 0xffffu));
}

GK_Q8_FN int dot8(const unsigned* q, const int* x, int from, int n) {
  int s = 0;
GK_Q8_UNROLL
  for (int i = 0; i < n; ++i) s = __dp4a(static_cast<int>(q[from + i]), x[from + i], s);
  return s;
}
// sum over the 8 words of (q's bytes + off's bytes) times x's bytes, each byte product signed
GK_Q8_FN int dot8_offset(const unsigned* q, const int* x, unsigned off) {
  int s = 0;
GK_Q8_UNROLL
  for (int i = 0; i < 8; ++i) s = __dp4a(static_cast<int>(off), x[i], __dp4a(static_cast<int>(q[i]), x[i], s));
  return s;
}
// dot8 of words from .. from + 4 with off's bytes added to q's (the wide K-quant dots)
GK_Q8_FN int dot4_offset(const unsigned* q, const int* x, int from, unsigned off) {
  int s = 0;
GK_Q8_UNROLL
  for (int i = from; i < from + 4; ++i) s = __dp4a(static_cast<int>(off), x[i], __dp4a(static_cast<int>(q[i]), x[i], s));
  return s;
}
// sum of the activation bytes of words from .. from + n
GK_Q8_FN int sum8(const int* x, int from, int n) {
  int s = 0;
GK_Q8_UNROLL
  for (int i = 0; i < n; ++i) s = __dp4a(0x01010101, x[from + i], s);
  return s;
}
GK_Q8_FN float i2f_rn(int v) { return __int2float_rn(v); }
using fmt::add;
using fmt::mul;
using fmt::sub;
// v as a float, exactly, for |v| < 2^22: 1.5 * 2^23 + v has an ulp of 1, so its bits are
// the magic's plus v, and taking the magic back off is exact. Two full-rate instructions
// where I2F issues at 16 a clock per SM (an eighth of FADD's rate): the block sums of the
// 32-weight formats (at most 32 * 127 * 127) and of tq1_0/tq2_0 (256 * 127) use it; the
// K-quants' and lattice formats' scaled sums can be larger and keep i2f_rn. From sm_90
// __int2float_rn is one I2FP.F32.S32 (seen in the SASS), and the int8 prompt measured
// faster with it on the H200 (N 512, M 4096, TFLOP/s: q8_0 90 -> 95, q4_0 93 -> 100, q4_1
// 52 -> 64, q5_0 91 -> 99, iq4_nl 87 -> 92, mxfp4 87 -> 91). Both are exact: same float.
#if !defined(GK_Q8_HOST) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
GK_Q8_FN float i2f_small(int v) { return __int2float_rn(v); }
#else
GK_Q8_FN float i2f_small(int v) { return sub(__int_as_float(0x4B400000 + v), 12582912.0f); }
#endif
// d(a) of activation block kc times s, the sum of its codes (q4_1 and q5_1's second term),
// as mul(d, i2f_small(s)); an activation view that has it at hand per column (mmq.cu's
// mma_act) overloads it, found by argument-dependent lookup.
template <class A>
GK_Q8_FN float d_times_sum(const A& a, std::int64_t kc, int s) {
  return mul(a.d(kc), i2f_small(s));
}
// The q8_K sums of the 16-value groups 2 (kc % 8) and 2 (kc % 8) + 1 of activation block
// kc / 8: chunk kc's two halves (q2_K, q4_K, q5_K, iq1_s); mmq.cu's mma_act overloads it
// with the pair read once per column.
struct bs_pair {
  int lo, hi;
};
template <class A>
GK_Q8_FN bs_pair bsums_of(const A& a, std::int64_t kc) {
  const short* bs = a.bsums(kc / 8) + 2 * (kc % 8);
  return {bs[0], bs[1]};
}

// A 16-entry table of signed bytes applied to the eight 4-bit codes of a word w (byte i's
// low nibble and high nibble): lo gets the values of the four low nibbles, hi those of the
// four high ones. PRMT reads only the low 16 bits of its selector, four nibbles, so w's
// codes are selectors as they lie: for nibbles 0-3, then w >> 16 for nibbles 4-7, two PRMTs
// each pick from table entries 0-7 and 8-15 by a code's low 3 bits, a third chooses by bit
// 3, and two more sort nibble order (lo, hi, lo, hi ...) into the low and the high codes.
// 13 instructions for eight codes, where masking each half to bytes and looking those up
// took about 23.
struct lut16 {
  unsigned t0, t1, t2, t3;
};
template <class T>
constexpr lut16 make_lut(const T* v) {
  auto word = [&](int i) {
    return static_cast<unsigned>(static_cast<std::uint8_t>(v[i])) |
           static_cast<unsigned>(static_cast<std::uint8_t>(v[i + 1])) << 8 |
           static_cast<unsigned>(static_cast<std::uint8_t>(v[i + 2])) << 16 |
           static_cast<unsigned>(static_cast<std::uint8_t>(v[i + 3])) << 24;
  };
  return lut16{word(0), word(4), word(8), word(12)};
}
constexpr lut16 lut_iq4nl = make_lut(gk::codebooks::kvalues_iq4nl);
// fp4.hpp's fp4_doubled of codes 0 .. 15
constexpr lut16 lut_fp4 = [] {
  std::int8_t v[16] = {};
  for (int c = 0; c < 16; ++c) v[c] = static_cast<std::int8_t>(F::detail::fp4_doubled(static_cast<std::uint8_t>(c)));
  return make_lut(v);
}();
// the tables as scalar constants (device code reads those, not a host constexpr object)
template <bool Fp4>
GK_Q8_FN void lookup8(unsigned w, unsigned& lo, unsigned& hi) {
  constexpr unsigned t0 = Fp4 ? lut_fp4.t0 : lut_iq4nl.t0, t1 = Fp4 ? lut_fp4.t1 : lut_iq4nl.t1;
  constexpr unsigned t2 = Fp4 ? lut_fp4.t2 : lut_iq4nl.t2, t3 = Fp4 ? lut_fp4.t3 : lut_iq4nl.t3;
  const unsigned s = w & 0x77777777u;                         // nibble k: code k's low 3 bits
  const unsigned pick = ((w >> 1) & 0x44444444u) | 0x32103210u;  // byte k of the low or the high pick
  const unsigned a = __byte_perm(__byte_perm(t0, t1, s), __byte_perm(t2, t3, s), pick);  // nibbles 0-3
  const unsigned b = __byte_perm(__byte_perm(t0, t1, s >> 16), __byte_perm(t2, t3, s >> 16), pick >> 16);
  lo = __byte_perm(a, b, 0x6420);
  hi = __byte_perm(a, b, 0x7531);
}

// Byte-wise x - c for bytes of x in 0 .. 127 and of c in 0 .. 128: x + (128 - c) stays in
// each byte, and the XOR takes the 128 back off mod 256. Two instructions; __vsub4, the
// general byte-wise subtraction, is several since sm_50.
GK_Q8_FN unsigned sub_bytes(unsigned x, unsigned c) { return (x + (0x80808080u - c)) ^ 0x80808080u; }
// Byte-wise x - y mod 256 for any bytes: the high bits kept out of the subtraction, so no
// borrow crosses a byte, then put back.
GK_Q8_FN unsigned sub4(unsigned x, unsigned y) {
  return ((x | 0x80808080u) - (y & 0x7f7f7f7fu)) ^ ((x ^ ~y) & 0x80808080u);
}

// Bytes of q in {-1, 0, 1} times s (1 .. 15), byte-wise. The 32-bit product q s is that
// but where a byte is -1: its 255 s = (s - 1) 256 + (256 - s) leaves the right byte and
// carries s - 1 into the next one, so (s - 1) is taken back off at the bytes after the -1
// ones ((q << 1) & 0x01010100 marks them). Exact mod 2^32 for any such q: the carries are
// linear. An IMUL, a shift, an AND and an IMAD.
GK_Q8_FN unsigned trits_times(unsigned q, unsigned s) { return q * s - ((q << 1) & 0x01010100u) * (s - 1); }

// Four 5th bits (bits 0-3 of h) as bit 4 of four bytes.
GK_Q8_FN unsigned spread4(unsigned h) { return ((h & 0xfu) * 0x00204081u & 0x01010101u) << 4; }

template <class W>
struct q8dot;  // no dp4a dot for W: it keeps the float mat-vec

// ---- 32-weight formats: one chunk per block, activation block kc ---------------------------

template <>
struct q8dot<F::q4_0> {
  static constexpr int ch = 1, np = 1;
  struct wc { unsigned q[8]; float d; };
  GK_Q8_MEMBER static void unpack(const unsigned char* b, int c, wc& u) { unpack_from(ptr_src{b}, c, u); }
  template <class Src>
  GK_Q8_MEMBER static void unpack_from(const Src& b, int c, wc& u) {  // signed codes q - 8
    unpack_raw(b, c, u);
GK_Q8_UNROLL
    for (int i = 0; i < 8; ++i) u.q[i] = sub_bytes(u.q[i], 0x08080808u);
  }
  template <class X, class A>
  GK_Q8_MEMBER static void part(const wc& u, const X& x, const A&, std::int64_t, int* p) { p[0] = dot8(u.q, x, 0, 8); }
  // The decode's cheaper pair (wide32::term; not the prompt path, whose mma takes signed
  // codes): the codes left as they are stored (0..15, non-negative as signed bytes too) and
  // the offset dotted on its own, sum (q - 8) a = sum q a + sum (-8) a, the same integer,
  // without the 8 byte-wise subtractions (__vsub4 then, several instructions each since sm_50;
  // unpack_from now subtracts by sub_bytes, two).
  // Nsight Compute had matvec_wide q4_0 at 5.07 M instructions where q4_1, more bytes and a
  // min term, took 3.85 M. H200, bench_cuda N 1, % of the copy bandwidth at M 4096 / 14336,
  // two rounds alternating with the old headers: q4_0 39 / 60 -> 44-45 / 68-69, q5_0 44-45 /
  // 65 -> 47 / 69 (q4_1, untouched, 47-48 / 73 on both).
  template <class Src>
  GK_Q8_MEMBER static void unpack_raw(const Src& b, int, wc& u) {
    unsigned w[4];
    b.words(2, w);
GK_Q8_UNROLL
    for (int i = 0; i < 4; ++i) {
      u.q[i] = w[i] & 0x0f0f0f0fu;
      u.q[4 + i] = (w[i] >> 4) & 0x0f0f0f0fu;
    }
    u.d = src_f16(b, 0);
  }
  GK_Q8_MEMBER static void part_raw(const wc& u, const int* x, int* p) { p[0] = dot8_offset(u.q, x, 0xf8f8f8f8u); }
  // sum * d(w) * d(a)
  template <class A>
  GK_Q8_MEMBER static float term(const wc& u, const A& a, std::int64_t kc, const int* p) {
    return mul(mul(i2f_small(p[0]), u.d), a.d(kc));
  }
};

template <>
struct q8dot<F::q4_1> {
  static constexpr int ch = 1, np = 2;
  struct wc { unsigned q[8]; float d, m; };
  GK_Q8_MEMBER static void unpack(const unsigned char* b, int c, wc& u) { unpack_from(ptr_src{b}, c, u); }
  template <class Src>
  GK_Q8_MEMBER static void unpack_from(const Src& b, int, wc& u) {
    unsigned w[4];
    b.words(4, w);
GK_Q8_UNROLL
    for (int i = 0; i < 4; ++i) {
      u.q[i] = w[i] & 0x0f0f0f0fu;
      u.q[4 + i] = (w[i] >> 4) & 0x0f0f0f0fu;
    }
    u.d = src_f16(b, 0);
    u.m = src_f16(b, 2);
  }
  template <class X, class A>
  GK_Q8_MEMBER static void part(const wc& u, const X& x, const A&, std::int64_t, int* p) {
    p[0] = dot8(u.q, x, 0, 8);
    p[1] = sum8(x, 0, 8);
  }
  // d(w) * da * sum + m * (da * sa)
  template <class A>
  GK_Q8_MEMBER static float term(const wc& u, const A& a, std::int64_t kc, const int* p) {
    const float da = a.d(kc);
    return add(mul(mul(u.d, da), i2f_small(p[0])), mul(u.m, d_times_sum(a, kc, p[1])));
  }
};

template <>
struct q8dot<F::q5_0> {
  static constexpr int ch = 1, np = 1;
  struct wc { unsigned q[8]; float d; };
  GK_Q8_MEMBER static void unpack(const unsigned char* b, int c, wc& u) { unpack_from(ptr_src{b}, c, u); }
  template <class Src>
  GK_Q8_MEMBER static void unpack_from(const Src& b, int c, wc& u) {  // signed codes q - 16
    unpack_raw(b, c, u);
GK_Q8_UNROLL
    for (int i = 0; i < 8; ++i) u.q[i] = sub_bytes(u.q[i], 0x10101010u);
  }
  template <class X, class A>
  GK_Q8_MEMBER static void part(const wc& u, const X& x, const A&, std::int64_t, int* p) { p[0] = dot8(u.q, x, 0, 8); }
  // the decode's pair, as q4_0's: codes 0..31, the offset -16 dotted on its own
  template <class Src>
  GK_Q8_MEMBER static void unpack_raw(const Src& b, int, wc& u) {
    unsigned w[4];
    b.words(6, w);
    const unsigned h = b.u32(2);
GK_Q8_UNROLL
    for (int i = 0; i < 4; ++i) {
      u.q[i] = (w[i] & 0x0f0f0f0fu) | spread4(h >> (4 * i));
      u.q[4 + i] = ((w[i] >> 4) & 0x0f0f0f0fu) | spread4(h >> (16 + 4 * i));
    }
    u.d = src_f16(b, 0);
  }
  GK_Q8_MEMBER static void part_raw(const wc& u, const int* x, int* p) { p[0] = dot8_offset(u.q, x, 0xf0f0f0f0u); }
  // d(w) * d(a) * sum; term_d as q8dot_q8's
  GK_Q8_MEMBER static float term_d(float dd, const int* p) { return mul(dd, i2f_small(p[0])); }
  template <class A>
  GK_Q8_MEMBER static float term(const wc& u, const A& a, std::int64_t kc, const int* p) {
    return term_d(mul(u.d, a.d(kc)), p);
  }
};

template <>
struct q8dot<F::q5_1> {
  static constexpr int ch = 1, np = 2;
  struct wc { unsigned q[8]; float d, m; };
  GK_Q8_MEMBER static void unpack(const unsigned char* b, int c, wc& u) { unpack_from(ptr_src{b}, c, u); }
  template <class Src>
  GK_Q8_MEMBER static void unpack_from(const Src& b, int, wc& u) {
    unsigned w[4];
    b.words(8, w);
    const unsigned h = b.u32(4);
GK_Q8_UNROLL
    for (int i = 0; i < 4; ++i) {
      u.q[i] = (w[i] & 0x0f0f0f0fu) | spread4(h >> (4 * i));
      u.q[4 + i] = ((w[i] >> 4) & 0x0f0f0f0fu) | spread4(h >> (16 + 4 * i));
    }
    u.d = src_f16(b, 0);
    u.m = src_f16(b, 2);
  }
  template <class X, class A>
  GK_Q8_MEMBER static void part(const wc& u, const X& x, const A&, std::int64_t, int* p) {
    p[0] = dot8(u.q, x, 0, 8);
    p[1] = sum8(x, 0, 8);
  }
  template <class A>
  GK_Q8_MEMBER static float term(const wc& u, const A& a, std::int64_t kc, const int* p) {
    const float da = a.d(kc);
    return add(mul(mul(u.d, da), i2f_small(p[0])), mul(u.m, d_times_sum(a, kc, p[1])));
  }
};

// q8_0 (against q8_0) and q8_1 (against q8_1): codes at byte Off
template <int Off>
struct q8dot_q8 {
  static constexpr int ch = 1, np = 1;
  struct wc { unsigned q[8]; float d; };
  GK_Q8_MEMBER static void unpack(const unsigned char* b, int c, wc& u) { unpack_from(ptr_src{b}, c, u); }
  template <class Src>
  GK_Q8_MEMBER static void unpack_from(const Src& b, int, wc& u) {
    b.words(Off, u.q);
    u.d = src_f16(b, 0);
  }
  template <class X, class A>
  GK_Q8_MEMBER static void part(const wc& u, const X& x, const A&, std::int64_t, int* p) { p[0] = dot8(u.q, x, 0, 8); }
  // sum * (d(w) * d(a)); term_d takes the product dd = mul(d(w), d(a)) formed elsewhere
  // (mmq.cu's prompt kernel forms it by an f16 mma: exact, both being f16 values)
  GK_Q8_MEMBER static float term_d(float dd, const int* p) { return mul(i2f_small(p[0]), dd); }
  template <class A>
  GK_Q8_MEMBER static float term(const wc& u, const A& a, std::int64_t kc, const int* p) {
    return term_d(mul(u.d, a.d(kc)), p);
  }
};
template <>
struct q8dot<F::q8_0> : q8dot_q8<2> {};
template <>
struct q8dot<F::q8_1> : q8dot_q8<4> {};

template <>
struct q8dot<F::iq4_nl> {
  static constexpr int ch = 1, np = 1;
  struct wc { unsigned q[8]; float d; };
  GK_Q8_MEMBER static void unpack(const unsigned char* b, int c, wc& u) { unpack_from(ptr_src{b}, c, u); }
  template <class Src>
  GK_Q8_MEMBER static void unpack_from(const Src& b, int, wc& u) {
    unsigned w[4];
    b.words(2, w);
GK_Q8_UNROLL
    for (int i = 0; i < 4; ++i) {
      lookup8<false>(w[i], u.q[i], u.q[4 + i]);
    }
    u.d = src_f16(b, 0);
  }
  template <class X, class A>
  GK_Q8_MEMBER static void part(const wc& u, const X& x, const A&, std::int64_t, int* p) { p[0] = dot8(u.q, x, 0, 8); }
  // sum * (d(w) * d(a)); term_d as q8dot_q8's
  GK_Q8_MEMBER static float term_d(float dd, const int* p) { return mul(i2f_small(p[0]), dd); }
  template <class A>
  GK_Q8_MEMBER static float term(const wc& u, const A& a, std::int64_t kc, const int* p) {
    return term_d(mul(u.d, a.d(kc)), p);
  }
};

template <>
struct q8dot<F::mxfp4> {
  static constexpr int ch = 1, np = 1;
  struct wc { unsigned q[8]; float h; };
  GK_Q8_MEMBER static void unpack(const unsigned char* b, int c, wc& u) { unpack_from(ptr_src{b}, c, u); }
  template <class Src>
  GK_Q8_MEMBER static void unpack_from(const Src& b, int, wc& u) {
    unsigned w[4];
    b.words(1, w);
GK_Q8_UNROLL
    for (int i = 0; i < 4; ++i) {
      lookup8<true>(w[i], u.q[i], u.q[4 + i]);
    }
    u.h = fmt::e8m0_half(static_cast<std::uint8_t>(b.u32(0) & 0xffu));
  }
  template <class X, class A>
  GK_Q8_MEMBER static void part(const wc& u, const X& x, const A&, std::int64_t, int* p) { p[0] = dot8(u.q, x, 0, 8); }
  // d(a) * e8m0_half(e) * sum
  template <class A>
  GK_Q8_MEMBER static float term(const wc& u, const A& a, std::int64_t kc, const int* p) {
    return mul(mul(a.d(kc), u.h), i2f_small(p[0]));
  }
};

// nvfp4: 64 weights, four 16-weight sub-blocks with their own scales, two q8_0 blocks.
// Chunk c holds sub-blocks 2c and 2c + 1 (bytes 16c ..), activation block kc. The CPU adds
// the four sub-block terms in float, in order; so the parts are the four integer sums
// (each chunk fills its two, zeros the others) and the term adds them as the CPU does.
template <>
struct q8dot<F::nvfp4> {
  static constexpr int ch = 2, np = 4;
  struct wc { unsigned q[8]; float hs[4]; int c; };
  GK_Q8_MEMBER static void unpack(const unsigned char* b, int c, wc& u) { unpack_from(ptr_src{b}, c, u); }
  template <class Src>
  GK_Q8_MEMBER static void unpack_from(const Src& b, int c, wc& u) {
    unsigned w[4];
    b.words(4 + 16 * c, w);
    // sub-block 2c + s: bytes 8s .. 8s + 7 = words 2s, 2s + 1; low nibbles are its weights
    // 0 .. 7 (activation bytes 16s .. 16s + 7), high nibbles its weights 8 .. 15
GK_Q8_UNROLL
    for (int s = 0; s < 2; ++s) {
      lookup8<true>(w[2 * s], u.q[4 * s + 0], u.q[4 * s + 2]);
      lookup8<true>(w[2 * s + 1], u.q[4 * s + 1], u.q[4 * s + 3]);
    }
    const unsigned scales = b.u32(0);
GK_Q8_UNROLL
    for (int k = 0; k < 4; ++k) u.hs[k] = mul(fmt::ue4m3(static_cast<std::uint8_t>(scales >> (8 * k))), 0.5f);
    u.c = c;
  }
  template <class X, class A>
  GK_Q8_MEMBER static void part(const wc& u, const X& x, const A&, std::int64_t, int* p) {
    const int s0 = dot8(u.q, x, 0, 4), s1 = dot8(u.q, x, 4, 4);
    p[0] = u.c == 0 ? s0 : 0;
    p[1] = u.c == 0 ? s1 : 0;
    p[2] = u.c == 0 ? 0 : s0;
    p[3] = u.c == 0 ? 0 : s1;
  }
  // sum over k of d(a[k / 2]) * half_scale(d[k]) * s_k, from 0, in order
  template <class A>
  GK_Q8_MEMBER static float term(const wc& u, const A& a, std::int64_t kc, const int* p) {
    float sum = 0.0f;
GK_Q8_UNROLL
    for (int k = 0; k < 4; ++k) {
      sum = add(sum, mul(mul(a.d(kc + k / 2), u.hs[k]), i2f_small(p[k])));
    }
    return sum;
  }
  // The same sum taken a chunk at a time (mmq.cu): chunk u.c (activation block kc) adds its
  // two terms k = 2c, 2c + 1 to run, which starts each block at 0.0f; after the block's
  // second chunk run is term's value bit for bit (the same operations in the same order).
  // One float a output instead of four integer parts held across the chunks.
  static constexpr bool running = true;
  template <class A>
  GK_Q8_MEMBER static void run_chunk(const wc& u, const A& a, std::int64_t kc, const int* p, float& run) {
    const float d = a.d(kc);
    const bool c0 = u.c == 0;  // selects, not an index: an indexed hs would live in local memory
    run = add(run, mul(mul(d, c0 ? u.hs[0] : u.hs[2]), i2f_small(c0 ? p[0] : p[2])));
    run = add(run, mul(mul(d, c0 ? u.hs[1] : u.hs[3]), i2f_small(c0 ? p[1] : p[3])));
  }
};

// ---- 256-weight formats against q8_K: eight chunks per block, activation block kc / 8 ------

// q2_K: chunk c is sub-blocks 2c, 2c + 1 (16 weights each), codes at qs[32 (c / 4) + l]
// bits 2 (c % 4); parts: sum of (sc & 15) s_j, sum of (sc >> 4) bsums_j.
template <>
struct q8dot<F::q2_K> {
  static constexpr int ch = 8, np = 2;
  struct wc { unsigned q[8]; unsigned sc; float d, dmin; };
  GK_Q8_MEMBER static void unpack(const unsigned char* b, int c, wc& u) {
    unsigned w[8];
    ld_words<8>(b + 16 + 32 * (c / 4), w);
    const int sh = 2 * (c % 4);
GK_Q8_UNROLL
    for (int i = 0; i < 8; ++i) u.q[i] = (w[i] >> sh) & 0x03030303u;
    u.sc = ld_u32(b + 2 * c) & 0xffffu;
    u.d = ld_f16(b + 80);
    u.dmin = ld_f16(b + 82);
  }
  template <class X, class A>
  GK_Q8_MEMBER static void part(const wc& u, const X& x, const A& a, std::int64_t kc, int* p) {
    const int s0 = dot8(u.q, x, 0, 4), s1 = dot8(u.q, x, 4, 4);
    const int sc0 = static_cast<int>(u.sc & 0xffu), sc1 = static_cast<int>(u.sc >> 8);
    const bs_pair bs = bsums_of(a, kc);
    p[0] = (sc0 & 0xf) * s0 + (sc1 & 0xf) * s1;
    p[1] = bs.lo * (sc0 >> 4) + bs.hi * (sc1 >> 4);
  }
  // the integer min of word w's 16-weight half (w / 4) as four equal bytes: mmq.cu forms
  // part mins_at (sum of min x activation code) by an mma of these with the codes instead
  static constexpr int mins_at = 1;
  GK_Q8_MEMBER static unsigned min_bytes(const wc& u, int w) { return ((u.sc >> (8 * (w >> 2) + 4)) & 0xfu) * 0x01010101u; }
  // mmq.cu: the codes times their half's scale (at most 3 x 15: a word's bytes multiply
  // without carries), so one mma a chunk forms part 0 whole, summed over the block in its
  // own registers
  static constexpr int scaled_sign = 1;
  GK_Q8_MEMBER static void scale_codes(wc& u) {
    const unsigned s0 = u.sc & 0xfu, s1 = (u.sc >> 8) & 0xfu;
GK_Q8_UNROLL
    for (int i = 0; i < 4; ++i) {
      u.q[i] *= s0;
      u.q[4 + i] *= s1;
    }
  }
  // (d(a) * d) * isum - (d(a) * dmin) * summs
  template <class A>
  GK_Q8_MEMBER static float term(const wc& u, const A& a, std::int64_t kc, const int* p) {
    const float ad = a.d(kc / 8);
    return sub(mul(mul(ad, u.d), i2f_rn(p[0])), mul(mul(ad, u.dmin), i2f_rn(p[1])));
  }
};

// q3_K: low 2 bits as q2_K, the third bit at bit c of hmask[l] (clear: minus 4).
template <>
struct q8dot<F::q3_K> {
  static constexpr int ch = 8, np = 1;
  struct wc { unsigned q[8]; int s0, s1; float d; };
  GK_Q8_MEMBER static int scale(const unsigned char* b, int j) {
    const unsigned lo = ld_u32(b + 96 + (j % 8)) & 0xffu, hi = ld_u32(b + 104 + j % 4) & 0xffu;
    const int low = static_cast<int>(j < 8 ? lo & 0xF : lo >> 4);
    const int high = static_cast<int>((hi >> (2 * (j / 4))) & 3);
    return (low | (high << 4)) - 32;
  }
  GK_Q8_MEMBER static void unpack(const unsigned char* b, int c, wc& u) {
    unsigned w[8], h[8];
    ld_words<8>(b + 32 + 32 * (c / 4), w);
    ld_words<8>(b, h);
    const int sh = 2 * (c % 4);
GK_Q8_UNROLL
    for (int i = 0; i < 8; ++i)
      u.q[i] = sub_bytes(((w[i] >> sh) & 0x03030303u) | (((h[i] >> c) & 0x01010101u) << 2), 0x04040404u);
    u.s0 = scale(b, 2 * c);
    u.s1 = scale(b, 2 * c + 1);
    u.d = ld_f16(b + 108);
  }
  template <class X, class A>
  GK_Q8_MEMBER static void part(const wc& u, const X& x, const A&, std::int64_t, int* p) {
    p[0] = u.s0 * dot8(u.q, x, 0, 4) + u.s1 * dot8(u.q, x, 4, 4);
  }
  // mmq.cu, as q2_K's: the codes times their half's scale, negated: -s q lies in [-128,
  // 124] where s q (s in -32 .. 31, q in -4 .. 3) reaches 128. Byte-wise: t = |s| (q + 4)
  // (at most 32 x 7, no carries), then 4 |s| - t (s >= 0) or t - 4 |s| (s < 0), each byte
  // mod 256 (sub4).
  static constexpr int scaled_sign = -1;
  GK_Q8_MEMBER static void scale_codes(wc& u) {
GK_Q8_UNROLL
    for (int h = 0; h < 2; ++h) {
      const int s = h ? u.s1 : u.s0;
      const unsigned a = static_cast<unsigned>(s < 0 ? -s : s), c = 4 * a * 0x01010101u;
GK_Q8_UNROLL
      for (int i = 4 * h; i < 4 * h + 4; ++i) {
        const unsigned t = ((u.q[i] ^ 0x04040404u) & 0x07070707u) * a;
        u.q[i] = s >= 0 ? sub4(c, t) : sub4(t, c);
      }
    }
  }
  // (d * d(a)) * isum
  template <class A>
  GK_Q8_MEMBER static float term(const wc& u, const A& a, std::int64_t kc, const int* p) {
    return mul(mul(u.d, a.d(kc / 8)), i2f_rn(p[0]));
  }
};

// q4_K / q5_K: chunk c is sub-block c; parts: sc s, m (bsums 2c + 2c + 1).
template <bool Five>
struct q8dot_k45 {
  static constexpr int ch = 8, np = 2;
  static constexpr int qs_at = Five ? 48 : 16;
  struct wc { unsigned q[8]; int sc, m; float d, dmin; };
  GK_Q8_MEMBER static void unpack(const unsigned char* b, int c, wc& u) {
    unsigned w[8];
    ld_words<8>(b + qs_at + 32 * (c / 2), w);
    const int sh = 4 * (c & 1);
GK_Q8_UNROLL
    for (int i = 0; i < 8; ++i) u.q[i] = (w[i] >> sh) & 0x0f0f0f0fu;
    if constexpr (Five) {
      unsigned h[8];
      ld_words<8>(b + 16, h);
GK_Q8_UNROLL
      for (int i = 0; i < 8; ++i) u.q[i] |= ((h[i] >> c) & 0x01010101u) << 4;
    }
    // kquants.hpp's get_scale_min over the 12 bytes at 4 (read at a runtime offset:
    // indexing three loaded words by c / 4 put them in local memory)
    const auto byte = [&](int i) { return static_cast<int>(ld_u32(b + 4 + i) & 0xffu); };
    if (c < 4) {
      u.sc = byte(c) & 63;
      u.m = byte(c + 4) & 63;
    } else {
      u.sc = (byte(c + 4) & 0xf) | ((byte(c - 4) >> 6) << 4);
      u.m = (byte(c + 4) >> 4) | ((byte(c) >> 6) << 4);
    }
    u.d = ld_f16(b);
    u.dmin = ld_f16(b + 2);
  }
  template <class X, class A>
  GK_Q8_MEMBER static void part(const wc& u, const X& x, const A& a, std::int64_t kc, int* p) {
    const bs_pair bs = bsums_of(a, kc);
    p[0] = u.sc * dot8(u.q, x, 0, 8);
    p[1] = u.m * (bs.lo + bs.hi);
  }
  // as q2_K's: the chunk's min (every word) as four equal bytes, for mmq.cu's mma
  static constexpr int mins_at = 1;
  GK_Q8_MEMBER static unsigned min_bytes(const wc& u, int) { return static_cast<unsigned>(u.m) * 0x01010101u; }
  // d * d(a) * sum_q - dmin * d(a) * sum_m
  template <class A>
  GK_Q8_MEMBER static float term(const wc& u, const A& a, std::int64_t kc, const int* p) {
    const float ad = a.d(kc / 8);
    return sub(mul(mul(u.d, ad), i2f_rn(p[0])), mul(mul(u.dmin, ad), i2f_rn(p[1])));
  }
};
template <>
struct q8dot<F::q4_K> : q8dot_k45<false> {};
template <>
struct q8dot<F::q5_K> : q8dot_k45<true> {};

// q6_K: chunk c = 32 weights of half h = c / 4, k = c % 4; low 4 bits in ql, top 2 in qh.
template <>
struct q8dot<F::q6_K> {
  static constexpr int ch = 8, np = 1;
  struct wc { unsigned q[8]; int s0, s1; float d; };
  GK_Q8_MEMBER static void unpack(const unsigned char* b, int c, wc& u) {
    const int h = c / 4, k = c % 4;
    unsigned lo[8], hi[8];
    ld_words<8>(b + 64 * h + 32 * (k & 1), lo);
    ld_words<8>(b + 128 + 32 * h, hi);
    const int ls = 4 * (k >> 1), hs = 2 * k;
GK_Q8_UNROLL
    for (int i = 0; i < 8; ++i)
      u.q[i] = sub_bytes(((lo[i] >> ls) & 0x0f0f0f0fu) | (((hi[i] >> hs) & 0x03030303u) << 4), 0x20202020u);
    const unsigned sc = ld_u32(b + 192 + 2 * c);
    u.s0 = static_cast<int>(static_cast<std::int8_t>(sc & 0xffu));
    u.s1 = static_cast<int>(static_cast<std::int8_t>((sc >> 8) & 0xffu));
    u.d = ld_f16(b + 208);
  }
  template <class X, class A>
  GK_Q8_MEMBER static void part(const wc& u, const X& x, const A&, std::int64_t, int* p) {
    p[0] = u.s0 * dot8(u.q, x, 0, 4) + u.s1 * dot8(u.q, x, 4, 4);
  }
  // d * d(a) * sum
  template <class A>
  GK_Q8_MEMBER static float term(const wc& u, const A& a, std::int64_t kc, const int* p) {
    return mul(mul(u.d, a.d(kc / 8)), i2f_rn(p[0]));
  }
};

// iq4_xs: chunk c is group c: codes qs[16c ..] as iq4_nl, scale ls - 32.
template <>
struct q8dot<F::iq4_xs> {
  static constexpr int ch = 8, np = 1;
  struct wc { unsigned q[8]; int ls; float d; };
  GK_Q8_MEMBER static void unpack(const unsigned char* b, int c, wc& u) {
    unsigned w[4];
    ld_words<4>(b + 8 + 16 * c, w);
GK_Q8_UNROLL
    for (int i = 0; i < 4; ++i) {
      lookup8<false>(w[i], u.q[i], u.q[4 + i]);
    }
    const unsigned hdr = ld_u32(b);  // d, scales_h
    const unsigned sl = ld_u32(b + 4 + c / 2) & 0xffu;
    u.ls = static_cast<int>(((sl >> (4 * (c % 2))) & 0xf) | (((hdr >> (16 + 2 * c)) & 3) << 4)) - 32;
    u.d = fmt::h2f(static_cast<std::uint16_t>(hdr & 0xffffu));
  }
  template <class X, class A>
  GK_Q8_MEMBER static void part(const wc& u, const X& x, const A&, std::int64_t, int* p) { p[0] = u.ls * dot8(u.q, x, 0, 8); }
  // d * d(a) * total
  template <class A>
  GK_Q8_MEMBER static float term(const wc& u, const A& a, std::int64_t kc, const int* p) {
    return mul(mul(u.d, a.d(kc / 8)), i2f_rn(p[0]));
  }
};

// ---- lattice formats: a codebook point per 8 (iq2) or 4 (iq3) weights, signs per weight ----

// Lattice grid entry i: from the shared-memory copy the source carries (Src::tab: matvec_wide's
// lanes, matvec_wide.cuh), else from global memory through L1.
template <class Src, class Tab>
GK_Q8_FN auto grid_at(const Src& b, const Tab& t, unsigned i) {
  using T = std::remove_cv_t<std::remove_reference_t<decltype(t.v[0])>>;
  if constexpr (requires { b.tab; })
    return static_cast<const T*>(b.tab)[i];
  else
    return __ldg(&t.v[i]);
}

// ksigns_iq2xs[k] as arithmetic: the 7 stored sign bits and an eighth that makes their
// count even (test_cuda_q8_dots checks all 128 entries), so no table load.
GK_Q8_FN unsigned ksign(unsigned k) { return k | (static_cast<unsigned>(__popc(k)) & 1u) << 7; }

// Four sign bits (bits 0-3 of s) as bit 0 of four bytes, and codebook bytes negated where
// it is set: -v = (v ^ 0xff) + 1 in each byte, as one 32-bit add, since no byte of any grid
// is 0 (test_cuda_q8_dots checks every entry) and so no +1 carries into the next byte; 3
// instructions a word where __vsub4(v ^ m, m) took several more.
GK_Q8_FN unsigned sign_bits4(unsigned s) { return (s & 0xfu) * 0x00204081u & 0x01010101u; }
GK_Q8_FN unsigned apply_sign(unsigned v, unsigned s1) { return (v ^ (s1 * 0xffu)) + s1; }

// iq2_xxs: chunk k holds 4 groups of 8: grid indices in the word at 2 + 8k, sign indices and
// the 4-bit scale s in the next; part: sum * (2s + 1).
template <>
struct q8dot<F::iq2_xxs> {
  static constexpr int ch = 8, np = 1;
  struct wc { unsigned q[8]; int ls; float d; };
  GK_Q8_MEMBER static void unpack(const unsigned char* b, int c, wc& u) { unpack_from(ptr_src{b}, c, u); }
  template <class Src>
  GK_Q8_MEMBER static void unpack_from(const Src& b, int c, wc& u) {
    unsigned w[2];
    b.words(2 + 8 * c, w);
GK_Q8_UNROLL
    for (int l = 0; l < 4; ++l) {
      const std::uint64_t pt = grid_at(b, fmt::iq2xxs_grid, (w[0] >> (8 * l)) & 0xffu);
      const unsigned s = ksign((w[1] >> (7 * l)) & 127u);
      u.q[2 * l] = apply_sign(static_cast<unsigned>(pt), sign_bits4(s));
      u.q[2 * l + 1] = apply_sign(static_cast<unsigned>(pt >> 32), sign_bits4(s >> 4));
    }
    u.ls = static_cast<int>(2 * (w[1] >> 28) + 1);
    u.d = src_f16(b, 0);
  }
  template <class X, class A>
  GK_Q8_MEMBER static void part(const wc& u, const X& x, const A&, std::int64_t, int* p) { p[0] = dot8(u.q, x, 0, 8) * u.ls; }
  // (d * d(a)) * bsum * 0.125
  template <class A>
  GK_Q8_MEMBER static float term(const wc& u, const A& a, std::int64_t kc, const int* p) {
    return mul(mul(mul(u.d, a.d(kc / 8)), i2f_rn(p[0])), 0.125f);
  }
};

// iq2_xs / iq2_s: chunk c is 16-weight sub-groups 2c, 2c + 1 (two groups of 8 each) with
// 4-bit scales s in the byte at Scales + c; part: the sub-groups' sums times 2s + 1.
template <class X>
GK_Q8_FN int iq2_part16(const unsigned* q, const X& x, unsigned sc) {
  return dot8(q, x, 0, 4) * static_cast<int>(2 * (sc & 0xfu) + 1) +
         dot8(q, x, 4, 4) * static_cast<int>(2 * ((sc >> 4) & 0xfu) + 1);
}
// iq2_xs: group g is the u16 at 2 + 2g: a 9-bit grid index and a 7-bit sign index.
template <>
struct q8dot<F::iq2_xs> {
  static constexpr int ch = 8, np = 1;
  struct wc { unsigned q[8]; unsigned sc; float d; };
  GK_Q8_MEMBER static void unpack(const unsigned char* b, int c, wc& u) { unpack_from(ptr_src{b}, c, u); }
  template <class Src>
  GK_Q8_MEMBER static void unpack_from(const Src& b, int c, wc& u) {
    unsigned w[2];
    b.words(2 + 8 * c, w);
GK_Q8_UNROLL
    for (int l = 0; l < 4; ++l) {
      const unsigned g = (w[l / 2] >> (16 * (l % 2))) & 0xffffu;
      const std::uint64_t pt = grid_at(b, fmt::iq2xs_grid, g & 511u);
      const unsigned s = ksign(g >> 9);
      u.q[2 * l] = apply_sign(static_cast<unsigned>(pt), sign_bits4(s));
      u.q[2 * l + 1] = apply_sign(static_cast<unsigned>(pt >> 32), sign_bits4(s >> 4));
    }
    u.sc = b.u32(66 + c) & 0xffu;
    u.d = src_f16(b, 0);
  }
  template <class X, class A>
  GK_Q8_MEMBER static void part(const wc& u, const X& x, const A&, std::int64_t, int* p) { p[0] = iq2_part16(u.q, x, u.sc); }
  // (d * d(a)) * bsum * 0.125
  template <class A>
  GK_Q8_MEMBER static float term(const wc& u, const A& a, std::int64_t kc, const int* p) {
    return mul(mul(mul(u.d, a.d(kc / 8)), i2f_rn(p[0])), 0.125f);
  }
};
// iq2_s: group g: grid index qs[g] | bits 2 (g % 4) of qh[g / 4] << 8, signs the byte qs[32 + g].
template <>
struct q8dot<F::iq2_s> {
  static constexpr int ch = 8, np = 1;
  struct wc { unsigned q[8]; unsigned sc; float d; };
  GK_Q8_MEMBER static void unpack(const unsigned char* b, int c, wc& u) { unpack_from(ptr_src{b}, c, u); }
  template <class Src>
  GK_Q8_MEMBER static void unpack_from(const Src& b, int c, wc& u) {
    const unsigned idx = b.u32(2 + 4 * c), sg = b.u32(34 + 4 * c), qh = b.u32(66 + c) & 0xffu;
GK_Q8_UNROLL
    for (int l = 0; l < 4; ++l) {
      const unsigned g = ((idx >> (8 * l)) & 0xffu) | (((qh >> (2 * l)) & 3u) << 8);
      const std::uint64_t pt = grid_at(b, fmt::iq2s_grid, g);
      const unsigned s = (sg >> (8 * l)) & 0xffu;
      u.q[2 * l] = apply_sign(static_cast<unsigned>(pt), sign_bits4(s));
      u.q[2 * l + 1] = apply_sign(static_cast<unsigned>(pt >> 32), sign_bits4(s >> 4));
    }
    u.sc = b.u32(74 + c) & 0xffu;
    u.d = src_f16(b, 0);
  }
  template <class X, class A>
  GK_Q8_MEMBER static void part(const wc& u, const X& x, const A&, std::int64_t, int* p) { p[0] = iq2_part16(u.q, x, u.sc); }
  // (d * d(a)) * bsum * 0.125
  template <class A>
  GK_Q8_MEMBER static float term(const wc& u, const A& a, std::int64_t kc, const int* p) {
    return mul(mul(mul(u.d, a.d(kc / 8)), i2f_rn(p[0])), 0.125f);
  }
};

// iq3_xxs: chunk j: 8 grid indices (4 weights each) at 2 + 8j; at 66 + 4j a word of four
// 7-bit sign indices (one per 8 weights) and the scale s in bits 28-31; part: sum * (2s + 1).
template <>
struct q8dot<F::iq3_xxs> {
  static constexpr int ch = 8, np = 1;
  struct wc { unsigned q[8]; int ls; float d; };
  GK_Q8_MEMBER static void unpack(const unsigned char* b, int c, wc& u) { unpack_from(ptr_src{b}, c, u); }
  template <class Src>
  GK_Q8_MEMBER static void unpack_from(const Src& b, int c, wc& u) {
    unsigned qs[2];
    b.words(2 + 8 * c, qs);
    const unsigned aux = b.u32(66 + 4 * c);
GK_Q8_UNROLL
    for (int l = 0; l < 4; ++l) {
      const unsigned s = ksign((aux >> (7 * l)) & 127u);
GK_Q8_UNROLL
      for (int h = 0; h < 2; ++h) {
        const int k = 2 * l + h;
        const unsigned g = grid_at(b, fmt::iq3xxs_grid, (qs[k / 4] >> (8 * (k % 4))) & 0xffu);
        u.q[k] = apply_sign(g, sign_bits4(s >> (4 * h)));
      }
    }
    u.ls = static_cast<int>(2 * (aux >> 28) + 1);
    u.d = src_f16(b, 0);
  }
  template <class X, class A>
  GK_Q8_MEMBER static void part(const wc& u, const X& x, const A&, std::int64_t, int* p) { p[0] = dot8(u.q, x, 0, 8) * u.ls; }
  // d * d(a) * sum * 0.25
  template <class A>
  GK_Q8_MEMBER static float term(const wc& u, const A& a, std::int64_t kc, const int* p) {
    return mul(mul(mul(u.d, a.d(kc / 8)), i2f_rn(p[0])), 0.25f);
  }
};

// iq3_s: chunk j holds 8 points of 4: 8-bit indices at 2 + 8j, their ninth bits in qh[j],
// 32 sign bits at 74 + 4j, the 4-bit scale s in nibble j % 2 of scales[j / 2]; part:
// sum * (1 + 2s).
template <>
struct q8dot<F::iq3_s> {
  static constexpr int ch = 8, np = 1;
  struct wc { unsigned q[8]; int ls; float d; };
  GK_Q8_MEMBER static void unpack(const unsigned char* b, int c, wc& u) { unpack_from(ptr_src{b}, c, u); }
  template <class Src>
  GK_Q8_MEMBER static void unpack_from(const Src& b, int c, wc& u) {
    unsigned qs[2];
    b.words(2 + 8 * c, qs);
    const unsigned qh = b.u32(66 + c) & 0xffu, sg = b.u32(74 + 4 * c);
GK_Q8_UNROLL
    for (int k = 0; k < 8; ++k) {
      const unsigned idx = ((qs[k / 4] >> (8 * (k % 4))) & 0xffu) | (((qh >> k) & 1u) << 8);
      u.q[k] = apply_sign(grid_at(b, fmt::iq3s_grid, idx), sign_bits4(sg >> (4 * k)));
    }
    u.ls = static_cast<int>(1 + 2 * ((b.u32(106 + c / 2) >> (4 * (c & 1))) & 0xfu));
    u.d = src_f16(b, 0);
  }
  template <class X, class A>
  GK_Q8_MEMBER static void part(const wc& u, const X& x, const A&, std::int64_t, int* p) { p[0] = dot8(u.q, x, 0, 8) * u.ls; }
  // d * d(a) * sum
  template <class A>
  GK_Q8_MEMBER static float term(const wc& u, const A& a, std::int64_t kc, const int* p) {
    return mul(mul(u.d, a.d(kc / 8)), i2f_rn(p[0]));
  }
};

// iq1_s: chunk ib: 4 points of iq1s_grid (coordinates -1, 0, 1 as signed bytes), indices
// qs[4 ib + l] | 3 bits of the u16 qh[ib] (at 34 + 2 ib) << 8; bits 12-14 the scale s,
// bit 15 the delta's sign. Part: 8 (2s + 1) sum + (2s + 1) (+-1) (bsums 2ib + 2ib+1), the
// CPU's 8 * sum + sum_shift (integer: summed in any order).
template <>
struct q8dot<F::iq1_s> {
  static constexpr int ch = 8, np = 1;
  struct wc { unsigned q[8]; int ls, neg; float d; };
  GK_Q8_MEMBER static void unpack(const unsigned char* b, int c, wc& u) { unpack_from(ptr_src{b}, c, u); }
  template <class Src>
  GK_Q8_MEMBER static void unpack_from(const Src& b, int c, wc& u) {
    const unsigned idx = b.u32(2 + 4 * c), qh = b.u32(34 + 2 * c) & 0xffffu;
GK_Q8_UNROLL
    for (int l = 0; l < 4; ++l) {
      const unsigned k = ((idx >> (8 * l)) & 0xffu) | (((qh >> (3 * l)) & 7u) << 8);
      const std::uint64_t pt = __ldg(&fmt::iq1s_grid.v[k]);
      u.q[2 * l] = static_cast<unsigned>(pt);
      u.q[2 * l + 1] = static_cast<unsigned>(pt >> 32);
    }
    u.ls = static_cast<int>(2 * ((qh >> 12) & 7) + 1);
    u.neg = (qh & 0x8000u) ? 1 : 0;
    u.d = src_f16(b, 0);
  }
  template <class X, class A>
  GK_Q8_MEMBER static void part(const wc& u, const X& x, const A& a, std::int64_t kc, int* p) {
    const bs_pair bs = bsums_of(a, kc);
    const int sa = bs.lo + bs.hi;
    p[0] = 8 * u.ls * dot8(u.q, x, 0, 8) + u.ls * (u.neg ? -sa : sa);
  }
  // mmq.cu: the codes times ls (at most 15: a signed byte) and the delta's +-ls as the min
  // bytes, so part 0 = 8 x the scaled codes' mma sum + the mins' (scaled_mul, mins_at 0):
  // the CPU's 8 sum + sum_shift, the same integer
  static constexpr int scaled_sign = 1, scaled_mul = 8, mins_at = 0;
  GK_Q8_MEMBER static void scale_codes(wc& u) {
GK_Q8_UNROLL
    for (int i = 0; i < 8; ++i) u.q[i] = trits_times(u.q[i], static_cast<unsigned>(u.ls));
  }
  GK_Q8_MEMBER static unsigned min_bytes(const wc& u, int) {
    return (static_cast<unsigned>(u.neg ? -u.ls : u.ls) & 0xffu) * 0x01010101u;
  }
  // d * d(a) * (float(total) * delta)
  template <class A>
  GK_Q8_MEMBER static float term(const wc& u, const A& a, std::int64_t kc, const int* p) {
    return mul(mul(u.d, a.d(kc / 8)), mul(i2f_rn(p[0]), gk::codebooks::iq1s_delta));
  }
};

// iq1_m: chunk c is sub-blocks 2c, 2c + 1, two groups of 8 each: grid indices qs[4c + g]
// | 3 bits of qh[2c + g / 2] << 8, the next bit the group's delta sign; 3-bit scales s in
// the four u16 at 48 (their top nibbles make the f16 d). Part: per group
// (2s + 1) (8 sum + (+-1) sum of its activations), the CPU's 8 * sum + sum_shift.
template <>
struct q8dot<F::iq1_m> {
  static constexpr int ch = 8, np = 1;
  struct wc { unsigned q[8]; int ls0, ls1; unsigned neg; float d; };
  GK_Q8_MEMBER static void unpack(const unsigned char* b, int c, wc& u) { unpack_from(ptr_src{b}, c, c, u); }
  template <class Src>
  GK_Q8_MEMBER static void unpack_from(const Src& b, int c, wc& u) { unpack_from(b, c, c, u); }
  // chunk c's codes read as chunk cb's (matvec_wide.cuh's lane view: cb = c % 2), its scales
  // from the scale words (all four: they hold d) as chunk c's
  template <class Src>
  GK_Q8_MEMBER static void unpack_from(const Src& b, int cb, int c, wc& u) {
    const unsigned idx = b.u32(4 * cb), qh = b.u32(32 + 2 * cb) & 0xffffu;
    unsigned sw[2];
    b.words(48, sw);  // the four scale words
GK_Q8_UNROLL
    for (int g = 0; g < 4; ++g) {
      const unsigned h = (qh >> (8 * (g / 2) + 4 * (g % 2))) & 0xfu;
      const unsigned k = ((idx >> (8 * g)) & 0xffu) | ((h & 7u) << 8);
      const std::uint64_t pt = __ldg(&fmt::iq1s_grid.v[k]);
      u.q[2 * g] = static_cast<unsigned>(pt);
      u.q[2 * g + 1] = static_cast<unsigned>(pt >> 32);
    }
    u.neg = (qh >> 3) & 1u | ((qh >> 7) & 1u) << 1 | ((qh >> 11) & 1u) << 2 | ((qh >> 15) & 1u) << 3;
    const unsigned word = ((c < 4 ? sw[0] : sw[1]) >> (16 * ((c / 2) % 2))) & 0xffffu;  // scale word (2c) / 4 = c / 2
    u.ls0 = static_cast<int>(2 * ((word >> (3 * ((2 * c) % 4))) & 7) + 1);
    u.ls1 = static_cast<int>(2 * ((word >> (3 * ((2 * c + 1) % 4))) & 7) + 1);
    const unsigned dbits = (sw[0] & 0xffffu) >> 12 | ((sw[0] >> 16) >> 8 & 0x00f0u) | ((sw[1] & 0xffffu) >> 4 & 0x0f00u) |
                           ((sw[1] >> 16) & 0xf000u);
    u.d = fmt::h2f(static_cast<std::uint16_t>(dbits));
  }
  template <class X, class A>
  GK_Q8_MEMBER static void part(const wc& u, const X& x, const A&, std::int64_t, int* p) {
    // per half h (sub-block 2c + h, scale ls_h): ls_h (8 sum + the signed sums of its two
    // groups' activations); the integers of the per-group form, grouped by half, so the
    // tensor-core path (16-weight sums) can use it too
    int sg[4];
GK_Q8_UNROLL
    for (int g = 0; g < 4; ++g) {
      const int sa = sum8(x, 2 * g, 2);
      sg[g] = (u.neg >> g) & 1u ? -sa : sa;
    }
    p[0] = u.ls0 * (8 * dot8(u.q, x, 0, 4) + sg[0] + sg[1]) + u.ls1 * (8 * dot8(u.q, x, 4, 4) + sg[2] + sg[3]);
  }
  // mmq.cu, as iq1_s's: the codes times their half's ls, and as the min byte of word w
  // (group w / 2 of 8 codes, half w / 4) its group's +-ls: part 0 = 8 x the first mma's sum +
  // the second's, with no group sums of the activations
  static constexpr int scaled_sign = 1, scaled_mul = 8, mins_at = 0;
  GK_Q8_MEMBER static void scale_codes(wc& u) {
GK_Q8_UNROLL
    for (int i = 0; i < 8; ++i) u.q[i] = trits_times(u.q[i], static_cast<unsigned>(i < 4 ? u.ls0 : u.ls1));
  }
  GK_Q8_MEMBER static unsigned min_bytes(const wc& u, int w) {
    const int ls = w < 4 ? u.ls0 : u.ls1;
    return (static_cast<unsigned>((u.neg >> (w >> 1)) & 1u ? -ls : ls) & 0xffu) * 0x01010101u;
  }
  // d * d(a) * (float(total) * delta)
  template <class A>
  GK_Q8_MEMBER static float term(const wc& u, const A& a, std::int64_t kc, const int* p) {
    return mul(mul(u.d, a.d(kc / 8)), mul(i2f_rn(p[0]), gk::codebooks::iq1m_delta));
  }
};

// tq1_0: trits packed five to a byte (ternary.hpp's for_each_trit): weights 32k + m of the
// first 160 are trit k of qs[m], the next 80 trit k of qs[32 + m] (16 per k), the last 16
// trit k of qh[j] (4 per k); w/d = t - 1.
template <>
struct q8dot<F::tq1_0> {
  static constexpr int ch = 8, np = 1;
  struct wc { unsigned q[8]; float d; };
  GK_Q8_MEMBER static void unpack(const unsigned char* b, int c, wc& u) {
GK_Q8_UNROLL
    for (int i = 0; i < 8; ++i) {
      unsigned v = 0;
GK_Q8_UNROLL
      for (int m = 0; m < 4; ++m) {
        const int j = 4 * i + m, r = 32 * (c - 5) + j;  // r: weight 160 + r when c >= 5
        const int at = c < 5 ? j : r < 80 ? 32 + r % 16 : 48 + (r - 80) % 4;
        const int k = c < 5 ? c : r < 80 ? r / 16 : (r - 80) / 4;
        v |= (static_cast<unsigned>(fmt::trit(b[at], k) - 1) & 0xffu) << (8 * m);
      }
      u.q[i] = v;
    }
    u.d = ld_f16(b + 52);
  }
  template <class X, class A>
  GK_Q8_MEMBER static void part(const wc& u, const X& x, const A&, std::int64_t, int* p) { p[0] = dot8(u.q, x, 0, 8); }
  // mmq.cu: part 0 is the block's code sum, so the chunks' mmas sum it in their registers
  static constexpr int scaled_sign = 1;
  GK_Q8_MEMBER static void scale_codes(wc&) {}
  // sum * (d * d(a))
  template <class A>
  GK_Q8_MEMBER static float term(const wc& u, const A& a, std::int64_t kc, const int* p) {
    return mul(i2f_small(p[0]), mul(u.d, a.d(kc / 8)));
  }
};

// tq2_0: 2-bit codes q laid out as q2_K's, w/d = q - 1; d at 64.
template <>
struct q8dot<F::tq2_0> {
  static constexpr int ch = 8, np = 1;
  struct wc { unsigned q[8]; float d; };
  GK_Q8_MEMBER static void unpack(const unsigned char* b, int c, wc& u) {
    unsigned w[8];
    ld_words<8>(b + 32 * (c / 4), w);
    const int sh = 2 * (c % 4);
GK_Q8_UNROLL
    for (int i = 0; i < 8; ++i) u.q[i] = sub_bytes((w[i] >> sh) & 0x03030303u, 0x01010101u);
    u.d = ld_f16(b + 64);
  }
  template <class X, class A>
  GK_Q8_MEMBER static void part(const wc& u, const X& x, const A&, std::int64_t, int* p) { p[0] = dot8(u.q, x, 0, 8); }
  // mmq.cu: part 0 is the block's code sum, so the chunks' mmas sum it in their registers
  static constexpr int scaled_sign = 1;
  GK_Q8_MEMBER static void scale_codes(wc&) {}
  // sum * (d(a) * d)
  template <class A>
  GK_Q8_MEMBER static float term(const wc& u, const A& a, std::int64_t kc, const int* p) {
    return mul(i2f_small(p[0]), mul(a.d(kc / 8), u.d));
  }
};

// q1_0 (128 weights, 4 q8_0 blocks) and q2_0 (64, 2): the CPU adds d(a_k) * s_k over the
// activation blocks in float, then scales by d; so the parts are the integer sums, one
// slot per chunk (others zero), and the term adds them in the CPU's order.
template <>
struct q8dot<F::q1_0> {
  static constexpr int ch = 4, np = 4;
  struct wc { unsigned q[8]; float d; int c; };
  GK_Q8_MEMBER static void unpack(const unsigned char* b, int c, wc& u) {
    const unsigned bits = ld_u32(b + 2 + 4 * c);
GK_Q8_UNROLL
    for (int i = 0; i < 8; ++i) u.q[i] = sub_bytes(spread4(bits >> (4 * i)) >> 3, 0x01010101u);  // 2 * bit - 1
    u.d = ld_f16(b);
    u.c = c;
  }
  template <class X, class A>
  GK_Q8_MEMBER static void part(const wc& u, const X& x, const A&, std::int64_t, int* p) {
    const int s = dot8(u.q, x, 0, 8);
GK_Q8_UNROLL
    for (int k = 0; k < 4; ++k) p[k] = u.c == k ? s : 0;
  }
  // d * (sum over k of d(a_k) * s_k, from 0, in order)
  template <class A>
  GK_Q8_MEMBER static float term(const wc& u, const A& a, std::int64_t kc, const int* p) {
    float sum = 0.0f;
GK_Q8_UNROLL
    for (int k = 0; k < 4; ++k) sum = add(sum, mul(a.d(kc + k), i2f_small(p[k])));
    return mul(u.d, sum);
  }
};
template <>
struct q8dot<F::q2_0> {
  static constexpr int ch = 2, np = 2;
  struct wc { unsigned q[8]; float d; int c; };
  GK_Q8_MEMBER static void unpack(const unsigned char* b, int c, wc& u) {
    unsigned w[2];
    ld_words<2>(b + 2 + 8 * c, w);
    // byte j holds weights 4j .. 4j + 3, two bits each: word i of the chunk is byte 4c' + i
GK_Q8_UNROLL
    for (int i = 0; i < 8; ++i) {
      const unsigned v = (w[i / 4] >> (8 * (i % 4))) & 0xffu;
      const unsigned spread = (v & 3u) | ((v >> 2) & 3u) << 8 | ((v >> 4) & 3u) << 16 | ((v >> 6) & 3u) << 24;
      u.q[i] = sub_bytes(spread, 0x01010101u);
    }
    u.d = ld_f16(b);
    u.c = c;
  }
  template <class X, class A>
  GK_Q8_MEMBER static void part(const wc& u, const X& x, const A&, std::int64_t, int* p) {
    const int s = dot8(u.q, x, 0, 8);
    p[0] = u.c == 0 ? s : 0;
    p[1] = u.c == 0 ? 0 : s;
  }
  // d * ((0 + d(a_0) s_0) + d(a_1) s_1)
  template <class A>
  GK_Q8_MEMBER static float term(const wc& u, const A& a, std::int64_t kc, const int* p) {
    float sum = 0.0f;
GK_Q8_UNROLL
    for (int k = 0; k < 2; ++k) sum = add(sum, mul(a.d(kc + k), i2f_small(p[k])));
    return mul(u.d, sum);
  }
};

template <class W>
concept has_q8dot = requires { q8dot<W>::ch; };

// mmq.cu's factor on a block's scaled codes' sum (q8dot::scaled_mul, iq1_s / iq1_m: 8);
// 1 where the format has none
template <class Q>
constexpr int scaled_mul_of() {
  if constexpr (requires { Q::scaled_mul; }) return Q::scaled_mul;
  else return 1;
}

#if !defined(GK_Q8_HOST)
// ---- activation encoders: W::encode restated for a warp ----------------------------------

// q8_0 / q8_1 of one 32-value block, lane j holding value j: d = max|x| / 127 (f16),
// q = nearest(x / d) by 1 / d, the CPU's operations (legacy.hpp). Returns q; dbits the f16
// of d; sum the block's code sum (q8_1's s = f16(d * sum)).
__device__ __forceinline__ int encode_q8_32(float v, std::uint16_t& dbits, int& sum, float& d_out) {
  float amax = fabsf(v);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const float d = __fdiv_rn(amax, 127.0f);
  const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
  const int q = __float2int_rn(__fmul_rn(v, id));
  int s = q;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  dbits = dm::f16_bits(d);
  sum = s;
  d_out = d;
  return q;
}

// kquants.hpp's kq::nearest_clamped(v, -127, 127)
__device__ __forceinline__ int nearest_clamped127(float v) {
  v = v < -127.0f ? -127.0f : v;
  v = v > 127.0f ? 127.0f : v;
  const int q = static_cast<int>(__float_as_uint(__fadd_rn(v, 12582912.0f)) & 0x7fffffu) - 0x400000;
  return q < -127 ? -127 : (q > 127 ? 127 : q);
}
// The q8_K code of v, nearest_clamped(iscale * v, -127, 127) as the CPU computes it, NaN
// included. The CPU's product keeps v's NaN, quieted (x86 and Linux aarch64 propagate the
// payload), or for 0 * inf is the default NaN (x86 0xffc00000, aarch64 0x7fc00000), and
// nearest_clamped reads the low mantissa bits: v's payload & 0x3fffff capped at 127, or 0.
// The device's NaN is canonical (0x7fffffff) and would read 127: an inf activation made a
// block's codes 0 and one 127 instead of all 0, so outputs came out +-inf where the CPU's
// are NaN (kernel contract, gate 1).
__device__ __forceinline__ int q8k_code(float iscale, float v) {
  const float pr = __fmul_rn(iscale, v);
  if (pr != pr) return v != v ? min(127, static_cast<int>(__float_as_uint(v) & 0x3fffffu)) : 0;
  return nearest_clamped127(pr);
}

#endif  // !GK_Q8_HOST

}  // namespace gk::cuda::q8
