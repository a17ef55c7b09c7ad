// SPDX-License-Identifier: MIT
// Wide block dots for the decode mat-vec (matvec_q8.cu, matvec_wide): a lane takes two
// 32-weight chunks of a 256-weight block (four lanes a block), chosen so that they share
// their code bytes, and reads the bytes once, with the widest loads the block's alignment
// allows (q4_K, q5_K: 16 bytes; iq4_xs, iq1_m: 8; q2_K: 4; q3_K, q6_K: any, by ld_words;
// the other lattice formats and tq1_0, tq2_0: 2, by ld_words and 2-byte loads). The
// formats of 32- and 64-weight blocks take whole blocks a lane instead (wide32, below).
//
// Why: the chunk dots of matvec_q8.cuh take 32 weights a lane and read any alignment
// (q8_0's 34-byte blocks): a field of 4 bytes costs two 4-byte loads and a funnel shift,
// every lane re-reads its block's header, and chunks that share code bytes (q4_K's low and
// high nibbles, q6_K's ql and qh, q2_K's four 2-bit planes) read them once each. Nsight
// Compute on the H200 (decode, q4_K, 14336 x 4096): the chunk kernel ran 14.3 M warp
// instructions, about 250 per 32 weights and row, and issued on 58% of cycles: bound by
// instructions, not by memory. q4_K here: three 16-byte loads for 64 weights, both
// sub-blocks' scales from the one header, two shuffle levels instead of three: 6.0 M.
//
// Exactness is the chunk dots': the integer parts are the same sums (in another order,
// which integers do not see), and the term is q8dot<W>::term itself, on the same parts and
// the same header values. So every block term equals the CPU's W::dot bit for bit
// (tests/cuda/test_cuda_q8_dots.cpp checks it on the host, at every alignment the format
// allows, as for the chunk dots).
//
// wide<W> interface:
//   lanes          lanes a block (4: 64 weights each)
//   words          4-byte words a lane loads per block
//   align          the block alignment (bytes) load needs; the launch checks the weight
//                  pointer and strides
//   chunk(l, j)    the 32-weight chunk of the block that is lane l's j-th (j = 0, 1)
//   load(b, l, v)  lane l's words of block b
//   parts(v, l, x, a, blk, p, h)
//                  x: the activation codes of chunk(l, 0) then chunk(l, 1), 16 words; a:
//                  the column; blk: the block's index in the row; p: the lane's share of
//                  q8dot<W>'s parts; h: the header values q8dot<W>::term reads
// The term: q8dot<W>::term(h, a, blk * q8dot<W>::ch, summed parts).
#pragma once

#include <cstdint>
#if defined(GK_Q8_HOST)
#include <cstdlib>
#include <cstring>
#endif

#include "matvec_q8.cuh"

namespace gk::cuda::q8 {

GK_Q8_FN unsigned byte_at(unsigned w, int i) { return (w >> (8 * i)) & 0xffu; }

// n words from b (16-byte aligned), as n / 4 16-byte loads
template <int N>
GK_Q8_FN void ld_vec16(const unsigned char* b, unsigned* o) {
GK_Q8_UNROLL
  for (int i = 0; i < N / 4; ++i) {
#if defined(GK_Q8_HOST)
    std::memcpy(o + 4 * i, b + 16 * i, 16);
#else
    const uint4 t = reinterpret_cast<const uint4*>(b)[i];
    o[4 * i] = t.x;
    o[4 * i + 1] = t.y;
    o[4 * i + 2] = t.z;
    o[4 * i + 3] = t.w;
#endif
  }
}
// n words from b (8-byte aligned), as n / 2 8-byte loads
template <int N>
GK_Q8_FN void ld_vec8(const unsigned char* b, unsigned* o) {
GK_Q8_UNROLL
  for (int i = 0; i < N / 2; ++i) {
#if defined(GK_Q8_HOST)
    std::memcpy(o + 2 * i, b + 8 * i, 8);
#else
    const uint2 t = reinterpret_cast<const uint2*>(b)[i];
    o[2 * i] = t.x;
    o[2 * i + 1] = t.y;
#endif
  }
}
// n words from b (4-byte aligned)
template <int N>
GK_Q8_FN void ld_vec4(const unsigned char* b, unsigned* o) {
GK_Q8_UNROLL
  for (int i = 0; i < N; ++i) {
#if defined(GK_Q8_HOST)
    std::memcpy(o + i, b + 4 * i, 4);
#else
    o[i] = reinterpret_cast<const unsigned*>(b)[i];
#endif
  }
}

template <class W>
struct wide;  // none: the chunk kernel

// q4_K / q5_K: lane l holds code bytes 32 l .. 32 l + 31, i.e. chunks 2 l (low nibbles)
// and 2 l + 1 (high nibbles). Words: header (d, dmin, 12 scale bytes), [q5_K: qh], codes.
template <bool Five>
struct wide_k45 {
  using Q = q8dot_k45<Five>;
  static constexpr int lanes = 4, align = 16, words = Five ? 20 : 12, at = Five ? 12 : 4;
  GK_Q8_FN static int chunk(int l, int j) { return 2 * l + j; }
  GK_Q8_MEMBER static void load(const unsigned char* b, int l, unsigned (&v)[words]) {
    ld_vec16<4>(b, v);
    if constexpr (Five) ld_vec16<8>(b + 16, v + 4);  // qh: bit c of byte i is weight 32 c + i's fifth bit
    ld_vec16<8>(b + Q::qs_at + 32 * l, v + at);
  }
  template <class A>
  GK_Q8_MEMBER static void parts(const unsigned (&v)[words], int l, const int* x, const A& a, std::int64_t blk, int* p,
                                 typename Q::wc& h) {
    h.d = fmt::h2f(static_cast<std::uint16_t>(v[0] & 0xffffu));
    h.dmin = fmt::h2f(static_cast<std::uint16_t>(v[0] >> 16));
    const unsigned s0 = v[1], s1 = v[2], s2 = v[3];
    const short* bs = a.bsums(blk) + 4 * l;
    int sp = 0, mp = 0;
GK_Q8_UNROLL
    for (int k = 0; k < 2; ++k) {
      const int c = 2 * l + k;
      unsigned q[8];
GK_Q8_UNROLL
      for (int i = 0; i < 8; ++i) q[i] = (v[at + i] >> (4 * k)) & 0x0f0f0f0fu;
      if constexpr (Five) {
GK_Q8_UNROLL
        for (int i = 0; i < 8; ++i) q[i] |= ((v[4 + i] >> c) & 0x01010101u) << 4;
      }
      // kquants.hpp's get_scale_min(c), without branching the four lanes apart
      const int i = c & 3;
      const unsigned b0 = byte_at(s0, i), b1 = byte_at(s1, i), b2 = byte_at(s2, i);
      const bool low = c < 4;
      const int sc = static_cast<int>(low ? (b0 & 63u) : ((b2 & 0xfu) | ((b0 >> 6) << 4)));
      const int m = static_cast<int>(low ? (b1 & 63u) : ((b2 >> 4) | ((b1 >> 6) << 4)));
      sp += sc * dot8(q, x + 8 * k, 0, 8);
      mp += m * (bs[2 * k] + bs[2 * k + 1]);
    }
    p[0] = sp;
    p[1] = mp;
  }
};
template <>
struct wide<F::q4_K> : wide_k45<false> {};
template <>
struct wide<F::q5_K> : wide_k45<true> {};

// q6_K: lane l = 2 h + k (k = 0, 1) takes chunks 4 h + k (low nibbles of ql bytes
// 64 h + 32 k ..) and 4 h + k + 2 (their high nibbles), both with the qh bytes 32 h ..
// (bits 2 k and 2 k + 4). Words: ql 8, qh 8, the two chunks' scale pairs 2, d 1.
template <>
struct wide<F::q6_K> {
  using Q = q8dot<F::q6_K>;
  static constexpr int lanes = 4, align = 1, words = 19;
  GK_Q8_FN static int chunk(int l, int j) { return 4 * (l >> 1) + (l & 1) + 2 * j; }
  GK_Q8_MEMBER static void load(const unsigned char* b, int l, unsigned (&v)[words]) {
    const int h = l >> 1, k = l & 1;
    ld_words<8>(b + 64 * h + 32 * k, *reinterpret_cast<unsigned(*)[8]>(v));
    ld_words<8>(b + 128 + 32 * h, *reinterpret_cast<unsigned(*)[8]>(v + 8));
    ld_words<2>(b + 192 + 8 * h + 2 * k, *reinterpret_cast<unsigned(*)[2]>(v + 16));
    v[18] = ld_u32(b + 208);
  }
  template <class A>
  GK_Q8_MEMBER static void parts(const unsigned (&v)[words], int l, const int* x, const A&, std::int64_t, int* p,
                                 typename Q::wc& h) {
    const int k = l & 1;
    h.d = fmt::h2f(static_cast<std::uint16_t>(v[18] & 0xffffu));
    int sp = 0;
GK_Q8_UNROLL
    for (int j = 0; j < 2; ++j) {
      const int hs = 2 * k + 4 * j;
      // the codes as stored (0..63) and their offset -32 dotted apart (dot4_offset): the same
      // integers as (q - 32) by __vsub4, with fewer instructions (see q8dot<q4_0>::part_raw).
      // H200, bench_cuda N 1, % of the copy bandwidth at M 4096 / 14336 (matvec_stream), against
      // the sixteenth session's final figures (not one session): q6_K 38 / 52 -> 39 / 54, q3_K
      // 22 / 30 -> 24 / 32.
      unsigned q[8];
GK_Q8_UNROLL
      for (int i = 0; i < 8; ++i) q[i] = ((v[i] >> (4 * j)) & 0x0f0f0f0fu) | (((v[8 + i] >> hs) & 0x03030303u) << 4);
      const unsigned sc = v[16 + j];
      const int s0 = static_cast<int>(static_cast<std::int8_t>(sc & 0xffu));
      const int s1 = static_cast<int>(static_cast<std::int8_t>((sc >> 8) & 0xffu));
      sp += s0 * dot4_offset(q, x + 8 * j, 0, 0xe0e0e0e0u) + s1 * dot4_offset(q, x + 8 * j, 4, 0xe0e0e0e0u);
    }
    p[0] = sp;
  }
};

// q2_K: lane l takes chunks 2 l, 2 l + 1: the 2-bit planes 2 (l % 2) and 2 (l % 2) + 1 of
// code bytes 32 (l / 2) .., sub-blocks 4 l .. 4 l + 3 (scale bytes 4 l ..). Words: codes
// 8, scales 1, d and dmin 1.
template <>
struct wide<F::q2_K> {
  using Q = q8dot<F::q2_K>;
  static constexpr int lanes = 4, align = 4, words = 10;
  GK_Q8_FN static int chunk(int l, int j) { return 2 * l + j; }
  GK_Q8_MEMBER static void load(const unsigned char* b, int l, unsigned (&v)[words]) {
    ld_vec4<8>(b + 16 + 32 * (l >> 1), v);
    ld_vec4<1>(b + 4 * l, v + 8);
    ld_vec4<1>(b + 80, v + 9);
  }
  template <class A>
  GK_Q8_MEMBER static void parts(const unsigned (&v)[words], int l, const int* x, const A& a, std::int64_t blk, int* p,
                                 typename Q::wc& h) {
    h.d = fmt::h2f(static_cast<std::uint16_t>(v[9] & 0xffffu));
    h.dmin = fmt::h2f(static_cast<std::uint16_t>(v[9] >> 16));
    const short* bs = a.bsums(blk) + 4 * l;
    int sp = 0, mp = 0;
GK_Q8_UNROLL
    for (int j = 0; j < 2; ++j) {
      const int sh = 2 * (2 * (l & 1) + j);
      unsigned q[8];
GK_Q8_UNROLL
      for (int i = 0; i < 8; ++i) q[i] = (v[i] >> sh) & 0x03030303u;
      const int s0 = dot8(q, x + 8 * j, 0, 4), s1 = dot8(q, x + 8 * j, 4, 4);
      const int sc0 = static_cast<int>(byte_at(v[8], 2 * j)), sc1 = static_cast<int>(byte_at(v[8], 2 * j + 1));
      sp += (sc0 & 0xf) * s0 + (sc1 & 0xf) * s1;
      mp += bs[2 * j] * (sc0 >> 4) + bs[2 * j + 1] * (sc1 >> 4);
    }
    p[0] = sp;
    p[1] = mp;
  }
};

// q3_K: lane l takes chunks 2 l, 2 l + 1 as q2_K, plus their third bits (bits 2 l, 2 l + 1
// of hmask's 32 bytes) and their four 6-bit scales (12 scale bytes at 96). Words: codes 8,
// hmask 8, scale bytes 3, d 1.
template <>
struct wide<F::q3_K> {
  using Q = q8dot<F::q3_K>;
  static constexpr int lanes = 4, align = 1, words = 20;
  GK_Q8_FN static int chunk(int l, int j) { return 2 * l + j; }
  GK_Q8_MEMBER static void load(const unsigned char* b, int l, unsigned (&v)[words]) {
    ld_words<8>(b + 32 + 32 * (l >> 1), *reinterpret_cast<unsigned(*)[8]>(v));
    ld_words<8>(b, *reinterpret_cast<unsigned(*)[8]>(v + 8));
    ld_words<3>(b + 96, *reinterpret_cast<unsigned(*)[3]>(v + 16));
    v[19] = ld_u32(b + 108);
  }
  // q8dot<q3_K>::scale(b, j) from the 12 scale bytes in words s
  GK_Q8_FN static int scale(const unsigned* s, int j) {
    // word (j % 8) / 4 by selects: indexing s at run time would put it in local memory
    const int li = j % 8;
    const unsigned lo = byte_at(li < 4 ? s[0] : s[1], li % 4), hi = byte_at(s[2], j % 4);
    const int low = static_cast<int>(j < 8 ? lo & 0xF : lo >> 4);
    const int high = static_cast<int>((hi >> (2 * (j / 4))) & 3);
    return (low | (high << 4)) - 32;
  }
  template <class A>
  GK_Q8_MEMBER static void parts(const unsigned (&v)[words], int l, const int* x, const A&, std::int64_t, int* p,
                                 typename Q::wc& h) {
    h.d = fmt::h2f(static_cast<std::uint16_t>(v[19] & 0xffffu));
    int sp = 0;
GK_Q8_UNROLL
    for (int j = 0; j < 2; ++j) {
      const int c = 2 * l + j, sh = 2 * (c % 4);
      unsigned q[8];  // codes 0..7, their offset -4 dotted apart, as q6_K's
GK_Q8_UNROLL
      for (int i = 0; i < 8; ++i) q[i] = ((v[i] >> sh) & 0x03030303u) | (((v[8 + i] >> c) & 0x01010101u) << 2);
      sp += scale(v + 16, 2 * c) * dot4_offset(q, x + 8 * j, 0, 0xfcfcfcfcu) +
            scale(v + 16, 2 * c + 1) * dot4_offset(q, x + 8 * j, 4, 0xfcfcfcfcu);
    }
    p[0] = sp;
  }
};

// iq4_xs: lane l takes groups 2 l, 2 l + 1 (code bytes 8 + 32 l ..). Words: header (d,
// scales_h, the four scales_l bytes) 2, codes 8.
template <>
struct wide<F::iq4_xs> {
  using Q = q8dot<F::iq4_xs>;
  static constexpr int lanes = 4, align = 8, words = 10;
  GK_Q8_FN static int chunk(int l, int j) { return 2 * l + j; }
  GK_Q8_MEMBER static void load(const unsigned char* b, int l, unsigned (&v)[words]) {
    ld_vec8<2>(b, v);
    ld_vec8<8>(b + 8 + 32 * l, v + 2);
  }
  template <class A>
  GK_Q8_MEMBER static void parts(const unsigned (&v)[words], int l, const int* x, const A&, std::int64_t, int* p,
                                 typename Q::wc& h) {
    h.d = fmt::h2f(static_cast<std::uint16_t>(v[0] & 0xffffu));
    int sp = 0;
GK_Q8_UNROLL
    for (int j = 0; j < 2; ++j) {
      const int c = 2 * l + j;
      unsigned q[8];
GK_Q8_UNROLL
      for (int i = 0; i < 4; ++i) {
        lookup8<false>(v[2 + 4 * j + i], q[i], q[4 + i]);
      }
      const unsigned sl = byte_at(v[1], c / 2);
      const int ls = static_cast<int>(((sl >> (4 * (c % 2))) & 0xf) | (((v[0] >> (16 + 2 * c)) & 3) << 4)) - 32;
      sp += ls * dot8(q, x + 8 * j, 0, 8);
    }
    p[0] = sp;
  }
};

// ---- lattice formats: four lanes a block, the chunk dot's unpack on a lane's registers ------
// Lane l takes chunks 2 l, 2 l + 1, whose bytes lie in a few short runs (codes, signs,
// high index bits, scales, at offsets linear in the chunk), and loads them once, with the
// block's d. The blocks are 50 .. 110 bytes, even, so rows are 2-byte aligned: runs of a
// word or more by ld_words, shorter fields by 2- or 1-byte loads. The chunks are unpacked
// by q8dot<W>::unpack_from itself, through lane_src: it is called for chunk j (0, 1) as if
// of a block whose chunk j is the lane's j-th, and Lay::pos maps each byte offset that
// unpack reads for chunk j onto the lane's words, a constant once unrolled (v stays in
// registers). That serves the unpacks whose reads depend on the chunk only through offsets
// linear in it and through c % 2 (iq3_s's scale nibble), which c = 2 l + j and j share;
// iq1_m picks its scales from words it reads whole by c itself, so its unpack takes both
// (split). Then q8dot<W>::part of each chunk (kc: the real chunk), summed: the same
// integers, the same header values, so the same term. tq1_0 and tq2_0, whose chunks read
// the same bytes at different trits or bit planes, unpack in their own parts (below).
//
// Lay (the layout of a format's lane words):
//   align, words     as wide<W>
//   load(b, l, v)    lane l's runs of block b
//   pos(off)         where in v (a byte index) the byte off of chunk j's view lies
//   split            (optional) unpack_from(src, j, c, u): offsets by j, scales by c

// the u16 at p (2-byte aligned) and the byte at p
GK_Q8_FN unsigned ld_u16(const unsigned char* p) {
#if defined(GK_Q8_HOST)
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
#else
  return *reinterpret_cast<const unsigned short*>(p);
#endif
}
GK_Q8_FN unsigned ld_u8(const unsigned char* p) { return *p; }

template <int NV, class Lay>
struct lane_src {
  const unsigned (&v)[NV];
  GK_Q8_FN unsigned at(int off) const {
    const int a = Lay::pos(off), i = a >> 2, sh = 8 * (a & 3);
#if defined(GK_Q8_HOST)
    if (a < 0) std::abort();  // an offset the layout does not hold
#endif
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

// lane_src with the format's grid copied into shared memory (tab), which q8dot's
// grid_at then reads instead of global memory. The grids are gathered at a random entry
// per 4 or 8 weights; through L1 a warp's 32 gathers touch up to 32 cache lines, so
// Nsight Compute had L1 at 73% of its peak in iq2_xxs decode (M 14336) with DRAM at 17%.
template <int NV, class Lay>
struct lane_src_tab : lane_src<NV, Lay> {
  const void* tab;
};

// The lattice grid matvec_wide copies into shared memory for a format. None for iq2_xs and
// iq2_s (4 and 8 KiB): copying them at each block's start lost at M 4096 (iq2_xs 16 -> 15%,
// iq2_s 17 -> 14%) for at most a point at M 14336; nor iq1_s / iq1_m (16 KiB, not tried).
template <class W>
struct lattice_grid;
template <>
struct lattice_grid<F::iq2_xxs> {
  static constexpr const auto& host = gk::codebooks::iq2xxs_grid;  // host copy, for the size
  GK_Q8_FN static const auto& get() { return fmt::iq2xxs_grid; }
};
template <>
struct lattice_grid<F::iq3_xxs> {
  static constexpr const auto& host = gk::codebooks::iq3xxs_grid;  // host copy, for the size
  GK_Q8_FN static const auto& get() { return fmt::iq3xxs_grid; }
};
template <>
struct lattice_grid<F::iq3_s> {
  static constexpr const auto& host = gk::codebooks::iq3s_grid;  // host copy, for the size
  GK_Q8_FN static const auto& get() { return fmt::iq3s_grid; }
};

template <class W, class Lay>
struct wide_lattice {
  using Q = q8dot<W>;
  static constexpr int lanes = 4, align = Lay::align, words = Lay::words;
  GK_Q8_FN static int chunk(int l, int j) { return 2 * l + j; }
  GK_Q8_MEMBER static void load(const unsigned char* b, int l, unsigned (&v)[words]) { Lay::load(b, l, v); }
  // parts with the chunks unpacked from src (a lane_src or lane_src_tab of v)
  template <class A, class Src>
  GK_Q8_MEMBER static void parts_from(const Src& src, int l, const int* x, const A& a, std::int64_t blk, int* p,
                                      typename Q::wc& h) {
    int s[Q::np] = {};
GK_Q8_UNROLL
    for (int j = 0; j < 2; ++j) {
      typename Q::wc u;
      if constexpr (requires { Lay::split; })
        Q::unpack_from(src, j, 2 * l + j, u);
      else
        Q::unpack_from(src, j, u);
      const std::int64_t kc = blk * Q::ch + 2 * l + j;  // the chunk's index in the row
      int pc[Q::np];
      Q::part(u, x + 8 * j, a, kc, pc);
GK_Q8_UNROLL
      for (int i = 0; i < Q::np; ++i) s[i] += pc[i];
      if (j == 0) h = u;
    }
GK_Q8_UNROLL
    for (int i = 0; i < Q::np; ++i) p[i] = s[i];
  }
  template <class A>
  GK_Q8_MEMBER static void parts(const unsigned (&v)[words], int l, const int* x, const A& a, std::int64_t blk, int* p,
                                 typename Q::wc& h) {
    parts_from(lane_src<words, Lay>{v}, l, x, a, blk, p, h);
  }
  // the same with the grid read from tab, a copy of lattice_grid<W>'s table (tab_bytes bytes)
  template <class A>
  GK_Q8_MEMBER static void parts_tab(const unsigned (&v)[words], int l, const int* x, const A& a, std::int64_t blk,
                                     int* p, typename Q::wc& h, const void* tab)
    requires requires { lattice_grid<W>::get(); }
  {
    parts_from(lane_src_tab<words, Lay>{{v}, tab}, l, x, a, blk, p, h);
  }
  static constexpr int tab_bytes = [] {
    if constexpr (requires { lattice_grid<W>::host; })
      return static_cast<int>(sizeof(lattice_grid<W>::host));
    else
      return 0;
  }();
};

// iq2_xxs (66 bytes): codes and sign words 2 + 16 l .. (v 0-3), d (v 4)
struct lay_iq2_xxs {
  static constexpr int align = 2, words = 5;
  GK_Q8_MEMBER static void load(const unsigned char* b, int l, unsigned (&v)[words]) {
    ld_words<4>(b + 2 + 16 * l, *reinterpret_cast<unsigned(*)[4]>(v));
    v[4] = ld_u16(b);
  }
  GK_Q8_FN static constexpr int pos(int off) { return off < 2 ? 16 + off : off < 18 ? off - 2 : -1; }
};
template <>
struct wide<F::iq2_xxs> : wide_lattice<F::iq2_xxs, lay_iq2_xxs> {};

// iq3_s (110 bytes): indices 2 + 16 l .. (v 0-3), signs 74 + 8 l .. (v 4-5), d and qh
// 66 + 2 l, 67 + 2 l (v 6), the scale byte 106 + l (v 7)
struct lay_iq3_s {
  static constexpr int align = 2, words = 8;
  GK_Q8_MEMBER static void load(const unsigned char* b, int l, unsigned (&v)[words]) {
    ld_words<4>(b + 2 + 16 * l, *reinterpret_cast<unsigned(*)[4]>(v));
    ld_words<2>(b + 74 + 8 * l, *reinterpret_cast<unsigned(*)[2]>(v + 4));
    v[6] = ld_u16(b) | ld_u16(b + 66 + 2 * l) << 16;
    v[7] = ld_u8(b + 106 + l);
  }
  GK_Q8_FN static constexpr int pos(int off) {
    return off < 2 ? 24 + off : off < 18 ? off - 2 : off == 66 || off == 67 ? 26 + off - 66
           : off >= 74 && off < 82 ? 16 + off - 74 : off == 106 ? 28 : -1;
  }
};
template <>
struct wide<F::iq3_s> : wide_lattice<F::iq3_s, lay_iq3_s> {};

// iq3_xxs (98 bytes): indices 2 + 16 l .. (v 0-3), sign and scale words 66 + 8 l .. (v 4-5), d (v 6)
struct lay_iq3_xxs {
  static constexpr int align = 2, words = 7;
  GK_Q8_MEMBER static void load(const unsigned char* b, int l, unsigned (&v)[words]) {
    ld_words<4>(b + 2 + 16 * l, *reinterpret_cast<unsigned(*)[4]>(v));
    ld_words<2>(b + 66 + 8 * l, *reinterpret_cast<unsigned(*)[2]>(v + 4));
    v[6] = ld_u16(b);
  }
  GK_Q8_FN static constexpr int pos(int off) {
    return off < 2 ? 24 + off : off < 18 ? off - 2 : off >= 66 && off < 74 ? 16 + off - 66 : -1;
  }
};
template <>
struct wide<F::iq3_xxs> : wide_lattice<F::iq3_xxs, lay_iq3_xxs> {};

// iq2_xs (74 bytes): groups 2 + 16 l .. (v 0-3), d and the scale bytes 66 + 2 l, 67 + 2 l (v 4)
struct lay_iq2_xs {
  static constexpr int align = 2, words = 5;
  GK_Q8_MEMBER static void load(const unsigned char* b, int l, unsigned (&v)[words]) {
    ld_words<4>(b + 2 + 16 * l, *reinterpret_cast<unsigned(*)[4]>(v));
    v[4] = ld_u16(b) | ld_u16(b + 66 + 2 * l) << 16;
  }
  GK_Q8_FN static constexpr int pos(int off) {
    return off < 2 ? 16 + off : off < 18 ? off - 2 : off == 66 || off == 67 ? 18 + off - 66 : -1;
  }
};
template <>
struct wide<F::iq2_xs> : wide_lattice<F::iq2_xs, lay_iq2_xs> {};

// iq2_s (82 bytes): indices 2 + 8 l .. (v 0-1), signs 34 + 8 l .. (v 2-3), d and qh 66 + 2 l,
// 67 + 2 l (v 4), the scale bytes 74 + 2 l, 75 + 2 l (v 5)
struct lay_iq2_s {
  static constexpr int align = 2, words = 6;
  GK_Q8_MEMBER static void load(const unsigned char* b, int l, unsigned (&v)[words]) {
    ld_words<2>(b + 2 + 8 * l, *reinterpret_cast<unsigned(*)[2]>(v));
    ld_words<2>(b + 34 + 8 * l, *reinterpret_cast<unsigned(*)[2]>(v + 2));
    v[4] = ld_u16(b) | ld_u16(b + 66 + 2 * l) << 16;
    v[5] = ld_u16(b + 74 + 2 * l);
  }
  GK_Q8_FN static constexpr int pos(int off) {
    return off < 2 ? 16 + off : off < 10 ? off - 2 : off >= 34 && off < 42 ? 8 + off - 34
           : off == 66 || off == 67 ? 18 + off - 66 : off == 74 || off == 75 ? 20 + off - 74 : -1;
  }
};
template <>
struct wide<F::iq2_s> : wide_lattice<F::iq2_s, lay_iq2_s> {};

// iq1_s (50 bytes): indices 2 + 8 l .. (v 0-1), the u16 qh 34 + 4 l, 36 + 4 l (v 2), d (v 3)
struct lay_iq1_s {
  static constexpr int align = 2, words = 4;
  GK_Q8_MEMBER static void load(const unsigned char* b, int l, unsigned (&v)[words]) {
    ld_words<2>(b + 2 + 8 * l, *reinterpret_cast<unsigned(*)[2]>(v));
    v[2] = ld_u32(b + 34 + 4 * l);
    v[3] = ld_u16(b);
  }
  GK_Q8_FN static constexpr int pos(int off) {
    return off < 2 ? 12 + off : off < 10 ? off - 2 : off >= 34 && off < 38 ? 8 + off - 34 : -1;
  }
};
template <>
struct wide<F::iq1_s> : wide_lattice<F::iq1_s, lay_iq1_s> {};

// iq1_m (56 bytes, so rows are 8-byte aligned): indices 8 l .. (v 0-1), qh 32 + 4 l .. (v 2),
// the four scale words 48 .. (v 3-4, d among them). Its unpack picks chunk c's scales from
// those words by c itself (split: unpack_from(src, j, c, u)), its codes by offsets.
struct lay_iq1_m {
  static constexpr bool split = true;
  static constexpr int align = 8, words = 5;
  GK_Q8_MEMBER static void load(const unsigned char* b, int l, unsigned (&v)[words]) {
    ld_vec8<2>(b + 8 * l, v);
    ld_vec4<1>(b + 32 + 4 * l, v + 2);
    ld_vec8<2>(b + 48, v + 3);
  }
  GK_Q8_FN static constexpr int pos(int off) {
    return off < 8 ? off : off >= 32 && off < 36 ? 8 + off - 32 : off >= 48 && off < 56 ? 12 + off - 48 : -1;
  }
};
template <>
struct wide<F::iq1_m> : wide_lattice<F::iq1_m, lay_iq1_m> {};

// tq2_0 (66 bytes): lane l's chunks 2 l, 2 l + 1 are the 2-bit planes 2 (l % 2), 2 (l % 2) + 1
// of code bytes 32 (l / 2) .. (v 0-7), as q8dot<tq2_0>::unpack reads them; d at 64 (v 8).
template <>
struct wide<F::tq2_0> {
  using Q = q8dot<F::tq2_0>;
  static constexpr int lanes = 4, align = 2, words = 9;
  GK_Q8_FN static int chunk(int l, int j) { return 2 * l + j; }
  GK_Q8_MEMBER static void load(const unsigned char* b, int l, unsigned (&v)[words]) {
    ld_words<8>(b + 32 * (l >> 1), *reinterpret_cast<unsigned(*)[8]>(v));
    v[8] = ld_u16(b + 64);
  }
  template <class A>
  GK_Q8_MEMBER static void parts(const unsigned (&v)[words], int l, const int* x, const A&, std::int64_t, int* p,
                                 typename Q::wc& h) {
    h.d = fmt::h2f(static_cast<std::uint16_t>(v[8]));
    int s = 0;
GK_Q8_UNROLL
    for (int j = 0; j < 2; ++j) {
      const int sh = 2 * (2 * (l & 1) + j);
      unsigned q[8];
GK_Q8_UNROLL
      // 0..2, the offset -1 dotted apart (as q6_K's). H200, % of the copy bandwidth at M 4096 /
      // 14336, against the same session's earlier run: tq2_0 22 / 30 -> 23 / 33, tq1_0 12 /
      // 14 -> 13 / 16
      for (int i = 0; i < 8; ++i) q[i] = (v[i] >> sh) & 0x03030303u;
      s += dot4_offset(q, x + 8 * j, 0, 0xffffffffu) + dot4_offset(q, x + 8 * j, 4, 0xffffffffu);
    }
    p[0] = s;
  }
};

// tq1_0 (54 bytes): chunk c's word i (weights 32 c + 4 i ..) is trit k of four bytes of qs
// or qh (ternary.hpp's layout, as q8dot<tq1_0>::unpack reads it byte by byte):
//   c < 5:    qs word i, k = c
//   c = 5, 6: qs word 8 + i % 4, k = 2 (c - 5) + i / 4
//   c = 7:    i < 4: qs word 8 + i, k = 4; i >= 4: qh, k = i - 4
// Lanes 0-2 load qs words 0-7 (v 0-7), lanes 2-3 qs words 8-11 and qh (v 8-12), all d (v 13);
// the four trits of a word at once in 16-bit halves (a byte times 3^k, mod 256, times 3,
// over 256: below 2^16, so the halves never carry into each other).
template <>
struct wide<F::tq1_0> {
  using Q = q8dot<F::tq1_0>;
  static constexpr int lanes = 4, align = 2, words = 14;
  GK_Q8_FN static int chunk(int l, int j) { return 2 * l + j; }
  GK_Q8_MEMBER static void load(const unsigned char* b, int l, unsigned (&v)[words]) {
    if (l < 3) {
      ld_words<8>(b, *reinterpret_cast<unsigned(*)[8]>(v));
    } else {
GK_Q8_UNROLL
      for (int i = 0; i < 8; ++i) v[i] = 0;
    }
    if (l >= 2) {
      ld_words<5>(b + 32, *reinterpret_cast<unsigned(*)[5]>(v + 8));
    } else {
GK_Q8_UNROLL
      for (int i = 8; i < 13; ++i) v[i] = 0;
    }
    v[13] = ld_u16(b + 52);
  }
  // trit k of each byte of w (0..2; parts dots the offset -1 apart, as q6_K's); p = 3^k
  GK_Q8_FN static unsigned trits(unsigned w, unsigned p) {
    const unsigned e = ((w & 0x00ff00ffu) * p) & 0x00ff00ffu, o = (((w >> 8) & 0x00ff00ffu) * p) & 0x00ff00ffu;
    return (((e * 3u) >> 8) & 0x00ff00ffu) | ((((o * 3u) >> 8) & 0x00ff00ffu) << 8);
  }
  GK_Q8_FN static unsigned pow3(int k) { return k == 0 ? 1u : k == 1 ? 3u : k == 2 ? 9u : k == 3 ? 27u : 81u; }
  template <class A>
  GK_Q8_MEMBER static void parts(const unsigned (&v)[words], int l, const int* x, const A&, std::int64_t, int* p,
                                 typename Q::wc& h) {
    h.d = fmt::h2f(static_cast<std::uint16_t>(v[13]));
    int s = 0;
GK_Q8_UNROLL
    for (int j = 0; j < 2; ++j) {
      const int c = 2 * l + j;
      unsigned q[8];
GK_Q8_UNROLL
      for (int i = 0; i < 8; ++i) {
        const unsigned w = c < 5 ? v[i] : c < 7 || i < 4 ? v[8 + i % 4] : v[12];
        const int k = c < 5 ? c : c < 7 ? 2 * (c - 5) + i / 4 : i < 4 ? 4 : i - 4;
        q[i] = trits(w, pow3(k));
      }
      s += dot4_offset(q, x + 8 * j, 0, 0xffffffffu) + dot4_offset(q, x + 8 * j, 4, 0xffffffffu);
    }
    p[0] = s;
  }
};

// ---- the formats of 32- and 64-weight blocks: whole blocks a lane -------------------------
// A group of 256 weights (8 blocks; nvfp4: 4) is four lanes' work as for the K-quants, but
// a lane's 64 weights are whole blocks (2; nvfp4: 1), so it needs no other lane: it loads
// its blocks' bytes once, as aligned words (2 S bytes from the lane's start; 4-byte
// aligned for every format here but mxfp4, whose odd lanes start 2 bytes into a word and
// are realigned by funnel shifts in registers), unpacks each block from the registers with
// the chunk dot's own unpack (q8dot<W>::unpack_from, reg_src), and computes each block's
// term as the chunk dot does: the same integers and float operations, so each term equals
// W::dot bit for bit.
//
// wide32<W> interface (whole == true):
//   lanes, align, words, chunk(l, j)   as wide<W>
//   bytes          weight bytes of a 256-weight group (the load's stride)
//   blocks         weight blocks a lane (2, nvfp4 1)
//   load(g, l, v)  lane l's words of the group at g
//   term(v, l, j, x, a, g)
//                  lane l's j-th block's term; x: its 16 activation words (chunk(l, 0),
//                  then chunk(l, 1)); a: the column; g: the group's index in the row
template <class W>
struct wide32 {
  using Q = q8dot<W>;
  static constexpr bool whole = true;
  static constexpr int S = static_cast<int>(sizeof(typename W::block));
  static constexpr int blocks = 64 / W::block_size, lanes = 4, bytes = 4 * blocks * S;
  static constexpr int span = blocks * S;  // a lane's bytes
  // mxfp4 (span 34): on 4-aligned rows a lane starts at 0 or 2 mod 4, and the 9 aligned
  // words from its start rounded down hold its bytes; they never pass the row's end (a row
  // is whole groups of 136 bytes, and a lane at 0 mod 4 is never the last)
  static constexpr bool shifted = span % 4 != 0;
  static_assert(!shifted || span % 4 == 2);
  static constexpr int words = (span + (shifted ? 2 : 0) + 3) / 4;
  static constexpr int align = span % 16 == 0 ? 16 : span % 8 == 0 ? 8 : 4;
  GK_Q8_FN static int chunk(int l, int j) { return 2 * l + j; }
  GK_Q8_MEMBER static void load(const unsigned char* g, int l, unsigned (&v)[words]) {
    const unsigned char* b = g + span * l;
    if constexpr (shifted) {
      // the aligned words around the lane's bytes, then shifted down by the lane's offset
      const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(b);
      const unsigned sh = static_cast<unsigned>(a & 3) * 8;
      ld_vec4<words>(reinterpret_cast<const unsigned char*>(a & ~std::uintptr_t{3}), v);
GK_Q8_UNROLL
      for (int i = 0; i < words; ++i) v[i] = __funnelshift_r(v[i], i + 1 < words ? v[i + 1] : 0u, sh);
    } else if constexpr (align == 16) {
      ld_vec16<words>(b, v);
    } else if constexpr (align == 8) {
      ld_vec8<words>(b, v);
    } else {
      ld_vec4<words>(b, v);
    }
  }
  // the activation scales of a lane's blocks as q8dot<W>::term reads them (a.d(kc)), from
  // one 8-byte load: kc0 is even
  struct pair_act {
    float d0, d1;
    std::int64_t kc0;
    GK_Q8_FN float d(std::int64_t kc) const { return kc == kc0 ? d0 : d1; }
  };
  template <class A>
  GK_Q8_MEMBER static float term(const unsigned (&v)[words], int l, int j, const int* x, const A& a, std::int64_t g) {
    typename Q::wc u[Q::ch];
    int p[Q::np] = {};
GK_Q8_UNROLL
    for (int c = 0; c < Q::ch; ++c) {
      int pc[Q::np];
      if constexpr (requires { Q::part_raw(u[c], x, pc); }) {  // q4_0, q5_0: the offset dotted apart
        Q::unpack_raw(reg_src<words>{v, S * j}, c, u[c]);
        Q::part_raw(u[c], x + 8 * (j + c), pc);
      } else {
        Q::unpack_from(reg_src<words>{v, S * j}, c, u[c]);
        Q::part(u[c], x + 8 * (j + c), a, 0, pc);
      }
GK_Q8_UNROLL
      for (int i = 0; i < Q::np; ++i) p[i] += pc[i];
    }
    const std::int64_t kc0 = 8 * g + 2 * l;  // the lane's first activation block
#if defined(GK_Q8_HOST)
    const pair_act pa{a.d(kc0), a.d(kc0 + 1), kc0};
#else
    const float2 dd = *reinterpret_cast<const float2*>(&reinterpret_cast<const float*>(a.c + a.d_off)[kc0]);
    const pair_act pa{dd.x, dd.y, kc0};
#endif
    return Q::term(u[0], pa, kc0 + j, p);
  }
};
template <>
struct wide<F::q4_0> : wide32<F::q4_0> {};
template <>
struct wide<F::q4_1> : wide32<F::q4_1> {};
template <>
struct wide<F::q5_0> : wide32<F::q5_0> {};
template <>
struct wide<F::q5_1> : wide32<F::q5_1> {};
template <>
struct wide<F::q8_0> : wide32<F::q8_0> {};
template <>
struct wide<F::iq4_nl> : wide32<F::iq4_nl> {};
template <>
struct wide<F::mxfp4> : wide32<F::mxfp4> {};
template <>
struct wide<F::nvfp4> : wide32<F::nvfp4> {};

template <class W>
concept has_wide = requires { wide<W>::lanes; };
// wide<W>::whole: a lane's blocks are whole (wide32); otherwise four lanes share a block
template <class W>
constexpr bool wide_whole = requires { requires wide<W>::whole; };

}  // namespace gk::cuda::q8
