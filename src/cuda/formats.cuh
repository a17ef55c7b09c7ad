// SPDX-License-Identifier: MIT
// Device decode of every weight format gk carries: the CPU's W::decode (include/gk/formats)
// restated for a GPU thread, 32 weights at a time.
//
// dev<W>::decode(b, c, out) writes weights 32c .. 32c + 31 of block b, c < dev<W>::chunks.
// Every format's block splits into whole 32-weight chunks whose scales are local to the
// chunk, so a thread (or lane) can own one chunk and nothing is decoded twice.
// Bit-identity with the CPU: the same float operations in the same order. nvcc contracts
// a*b+c into one FMA by default (the CPU headers are compiled with fp-contract off), so
// every product and sum that the CPU rounds separately is written with __fmul_rn /
// __fadd_rn / __fsub_rn, which are never fused. Products by 0.25, 0.5 and -1 are exact
// and are kept anyway where the CPU has them, so the NaN/inf behaviour follows too.
//
// Codebooks are __device__ arrays constant-initialised from gk's own constexpr tables
// (formats/codebooks.inc): global memory, L1-cached, so the divergent lookups of lattice
// formats do not serialise as they would in __constant__ memory.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "gk/formats/all.hpp"

namespace gk::cuda::fmt {

// ---- scalar pieces -----------------------------------------------------------------------

__device__ __forceinline__ float mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float sub(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ float h2f(std::uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ float h2f(gk::f16 h) { return h2f(h.bits); }
__device__ __forceinline__ float bf2f(std::uint16_t h) { return __uint_as_float(static_cast<unsigned>(h) << 16); }
// An int of magnitude < 2^22 as float, exactly (what static_cast<float> gives), as an integer
// add and a float subtract: both full rate, where I2F runs at a quarter of it on sm_80/90.
__device__ __forceinline__ float i2f(int v) { return __fsub_rn(__int_as_float(0x4B400000 + v), 12582912.0f); }
// e8m0_to_f32_half (core/narrow.hpp)
__device__ __forceinline__ float e8m0_half(std::uint8_t e) {
  return __uint_as_float(e < 2 ? (0x00200000u << e) : static_cast<unsigned>(e - 1) << 23);
}
// ue4m3_to_f32 (core/narrow.hpp)
__device__ __forceinline__ float ue4m3(std::uint8_t x) {
  if (x == 0 || x == 0x7f) return 0.0f;
  const unsigned exp = (x >> 3) & 0xfu, man = x & 0x7u;
  if (exp == 0) return mul(static_cast<float>(man), __uint_as_float(0x3b000000u));
  return __uint_as_float(((exp + 120) << 23) | (man << 20));
}
// fp4.hpp's fp4_doubled: twice the e2m1 value of a code
__device__ __forceinline__ int fp4_doubled(unsigned c) {
  constexpr unsigned pos = 0xC8643210u;  // 0 1 2 3 4 6 8 12 as nibbles (12 = 0xC)
  const int v = static_cast<int>((pos >> (4 * (c & 7u))) & 0xfu);
  return (c & 8u) ? -v : v;
}
// ternary.hpp's trit(b, k)
__device__ __forceinline__ int trit(unsigned b, int k) {
  constexpr unsigned pow3 = 1u | 3u << 8 | 9u << 16 | 27u << 24;
  const unsigned p = k == 4 ? 81u : (pow3 >> (8 * k)) & 0xffu;
  const unsigned shifted = (b * p) & 0xffu;
  return static_cast<int>((shifted * 3) >> 8);
}

// ---- codebooks ---------------------------------------------------------------------------

template <class T, int N>
struct table { T v[N]; };
template <class T, int N>
constexpr table<T, N> tabulate(const T (&a)[N]) {
  table<T, N> t{};
  for (int i = 0; i < N; ++i) t.v[i] = a[i];
  return t;
}
__device__ const table<std::uint64_t, 256> iq2xxs_grid = tabulate(gk::codebooks::iq2xxs_grid);
__device__ const table<std::uint64_t, 512> iq2xs_grid = tabulate(gk::codebooks::iq2xs_grid);
__device__ const table<std::uint64_t, 1024> iq2s_grid = tabulate(gk::codebooks::iq2s_grid);
__device__ const table<std::uint32_t, 256> iq3xxs_grid = tabulate(gk::codebooks::iq3xxs_grid);
__device__ const table<std::uint32_t, 512> iq3s_grid = tabulate(gk::codebooks::iq3s_grid);
__device__ const table<std::uint64_t, 2048> iq1s_grid = tabulate(gk::codebooks::iq1s_grid);
__device__ const table<std::uint8_t, 128> ksigns_iq2xs = tabulate(gk::codebooks::ksigns_iq2xs);
__device__ const table<std::int8_t, 16> kvalues_iq4nl = tabulate(gk::codebooks::kvalues_iq4nl);

// ---- the decoders --------------------------------------------------------------------------

template <class W>
struct dev;  // no device decode for W: add a specialisation below

namespace F = gk::formats;

// 5-bit codes of q5_0/q5_1: legacy.hpp's unpack_5bit
__device__ __forceinline__ int code5(const std::uint8_t* qs, unsigned h, int j) {
  return j < 16 ? (qs[j] & 0x0f) | static_cast<int>(((h >> j) & 1u) << 4)
                : (qs[j - 16] >> 4) | static_cast<int>(((h >> j) & 1u) << 4);
}
__device__ __forceinline__ unsigned word_le(const std::uint8_t* p) {
  return p[0] | (static_cast<unsigned>(p[1]) << 8) | (static_cast<unsigned>(p[2]) << 16) |
         (static_cast<unsigned>(p[3]) << 24);
}

template <>
struct dev<F::q4_0> {
  static constexpr int chunks = 1;
  __device__ static void decode(const F::q4_0::block& b, int, float* o) {
    const float d = h2f(b.d);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      o[j] = mul(i2f(static_cast<int>((b.qs[j] & 0x0f) - 8)), d);
      o[j + 16] = mul(i2f(static_cast<int>((b.qs[j] >> 4) - 8)), d);
    }
  }
};
template <>
struct dev<F::q4_1> {
  static constexpr int chunks = 1;
  __device__ static void decode(const F::q4_1::block& b, int, float* o) {
    const float d = h2f(b.d), m = h2f(b.m);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      o[j] = add(mul(i2f(static_cast<int>(b.qs[j] & 0x0f)), d), m);
      o[j + 16] = add(mul(i2f(static_cast<int>(b.qs[j] >> 4)), d), m);
    }
  }
};
template <>
struct dev<F::q5_0> {
  static constexpr int chunks = 1;
  __device__ static void decode(const F::q5_0::block& b, int, float* o) {
    const float d = h2f(b.d);
    const unsigned h = word_le(b.qh);
#pragma unroll
    for (int j = 0; j < 32; ++j) o[j] = mul(i2f(static_cast<int>(code5(b.qs, h, j) - 16)), d);
  }
};
template <>
struct dev<F::q5_1> {
  static constexpr int chunks = 1;
  __device__ static void decode(const F::q5_1::block& b, int, float* o) {
    const float d = h2f(b.d), m = h2f(b.m);
    const unsigned h = word_le(b.qh);
#pragma unroll
    for (int j = 0; j < 32; ++j) o[j] = add(mul(i2f(static_cast<int>(code5(b.qs, h, j))), d), m);
  }
};
template <>
struct dev<F::q8_0> {
  static constexpr int chunks = 1;
  __device__ static void decode(const F::q8_0::block& b, int, float* o) {
    const float d = h2f(b.d);
#pragma unroll
    for (int j = 0; j < 32; ++j) o[j] = mul(d, i2f(static_cast<int>(b.qs[j])));
  }
};
template <>
struct dev<F::q8_1> {
  static constexpr int chunks = 1;
  __device__ static void decode(const F::q8_1::block& b, int, float* o) {
    const float d = h2f(b.d);
#pragma unroll
    for (int j = 0; j < 32; ++j) o[j] = mul(d, i2f(static_cast<int>(b.qs[j])));
  }
};
template <>
struct dev<F::q1_0> {
  static constexpr int chunks = 4;
  __device__ static void decode(const F::q1_0::block& b, int c, float* o) {
    const float d = h2f(b.d), nd = -d;
    const unsigned bits = word_le(b.qs + 4 * c);
#pragma unroll
    for (int j = 0; j < 32; ++j) o[j] = ((bits >> j) & 1u) ? d : nd;
  }
};
template <>
struct dev<F::q2_0> {
  static constexpr int chunks = 2;
  __device__ static void decode(const F::q2_0::block& b, int c, float* o) {
    const float d = h2f(b.d);
#pragma unroll
    for (int j = 0; j < 32; ++j)
      o[j] = mul(i2f(static_cast<int>(((b.qs[8 * c + j / 4] >> (2 * (j % 4))) & 3) - 1)), d);
  }
};
template <>
struct dev<F::mxfp4> {
  static constexpr int chunks = 1;
  __device__ static void decode(const F::mxfp4::block& b, int, float* o) {
    const float h = e8m0_half(b.e);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      o[j] = mul(i2f(static_cast<int>(fp4_doubled(b.qs[j] & 0x0f))), h);
      o[j + 16] = mul(i2f(static_cast<int>(fp4_doubled(b.qs[j] >> 4))), h);
    }
  }
};
template <>
struct dev<F::nvfp4> {
  static constexpr int chunks = 2;
  __device__ static void decode(const F::nvfp4::block& b, int c, float* o) {
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
      const int k = 2 * c + kk;
      const float h = mul(ue4m3(b.d[k]), 0.5f);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        o[16 * kk + j] = mul(i2f(static_cast<int>(fp4_doubled(b.qs[8 * k + j] & 0x0f))), h);
        o[16 * kk + j + 8] = mul(i2f(static_cast<int>(fp4_doubled(b.qs[8 * k + j] >> 4))), h);
      }
    }
  }
};

// kquants_low.hpp's code2: weight i of a block at byte 32*(i/128) + i%32, bit 2*((i/32)%4)
__device__ __forceinline__ int code2(const std::uint8_t* qs, int i) {
  return (qs[32 * (i / 128) + i % 32] >> (2 * ((i / 32) % 4))) & 3;
}

template <>
struct dev<F::q2_K> {
  static constexpr int chunks = 8;
  __device__ static void decode(const F::q2_K::block& b, int c, float* o) {
    const float d = h2f(b.d), dmin = h2f(b.dmin);
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const int j = 2 * c + s;
      const float dl = mul(d, i2f(static_cast<int>(b.scales[j] & 0xF)));
      const float ml = mul(dmin, i2f(static_cast<int>(b.scales[j] >> 4)));
      const float twice = add(dl, dl);
      const float l0 = mul(dl, 0.0f), l3 = add(twice, dl);
#pragma unroll
      for (int l = 0; l < 16; ++l) {
        const int q = code2(b.qs, 16 * j + l);
        const float lv = q == 0 ? l0 : q == 1 ? dl : q == 2 ? twice : l3;
        o[16 * s + l] = sub(lv, ml);
      }
    }
  }
};
template <>
struct dev<F::q3_K> {
  static constexpr int chunks = 8;
  __device__ static int scale(const F::q3_K::block& b, int j) {
    const int low = j < 8 ? b.scales[j] & 0xF : b.scales[j - 8] >> 4;
    const int high = (b.scales[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (low | (high << 4)) - 32;
  }
  __device__ static void decode(const F::q3_K::block& b, int c, float* o) {
    const float d = h2f(b.d);
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const int j = 2 * c + s;
      const float dl = mul(d, i2f(static_cast<int>(scale(b, j))));
#pragma unroll
      for (int l = 0; l < 16; ++l) {
        const int i = 16 * j + l;
        const int q = code2(b.qs, i) - ((b.hmask[i % 32] >> (i / 32)) & 1 ? 0 : 4);
        o[16 * s + l] = mul(dl, i2f(static_cast<int>(q)));
      }
    }
  }
};

// kquants.hpp's get_scale_min
__device__ __forceinline__ void scale_min_k4(const std::uint8_t* p, int j, int& sc, int& m) {
  if (j < 4) {
    sc = p[j] & 63;
    m = p[j + 4] & 63;
  } else {
    sc = (p[j + 4] & 0xf) | ((p[j - 4] >> 6) << 4);
    m = (p[j + 4] >> 4) | ((p[j] >> 6) << 4);
  }
}
template <>
struct dev<F::q4_K> {
  static constexpr int chunks = 8;
  __device__ static void decode(const F::q4_K::block& b, int c, float* o) {
    const float d = h2f(b.d), dmin = h2f(b.dmin);
    int sc, m;
    scale_min_k4(b.scales, c, sc, m);
    const float dl = mul(d, i2f(static_cast<int>(sc))), ml = mul(dmin, i2f(static_cast<int>(m)));
    const std::uint8_t* q = b.qs + 32 * (c / 2);
    const int shift = 4 * (c & 1);
#pragma unroll
    for (int l = 0; l < 32; ++l) o[l] = sub(mul(dl, i2f(static_cast<int>((q[l] >> shift) & 0xf))), ml);
  }
};
template <>
struct dev<F::q5_K> {
  static constexpr int chunks = 8;
  __device__ static void decode(const F::q5_K::block& b, int c, float* o) {
    const float d = h2f(b.d), dmin = h2f(b.dmin);
    int sc, m;
    scale_min_k4(b.scales, c, sc, m);
    const float dl = mul(d, i2f(static_cast<int>(sc))), ml = mul(dmin, i2f(static_cast<int>(m)));
    const std::uint8_t* q = b.qs + 32 * (c / 2);
    const int shift = 4 * (c & 1);
#pragma unroll
    for (int l = 0; l < 32; ++l) {
      const int code = ((q[l] >> shift) & 0xf) | (((b.qh[l] >> c) & 1) << 4);
      o[l] = sub(mul(dl, i2f(static_cast<int>(code))), ml);
    }
  }
};
template <>
struct dev<F::q6_K> {
  static constexpr int chunks = 8;
  __device__ static void decode(const F::q6_K::block& b, int c, float* o) {
    const float d = h2f(b.d);
    // chunk c is weights 32c .. 32c + 31: half h = c / 4, k = c % 4
    const int h = c / 4, k = c % 4;
    const std::uint8_t* ql = b.ql + 64 * h + 32 * (k & 1);
    const std::uint8_t* qh = b.qh + 32 * h;
    const int lshift = 4 * (k >> 1), hshift = 2 * k;
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const float dl = mul(d, i2f(static_cast<int>(b.scales[2 * c + s])));
#pragma unroll
      for (int l = 16 * s; l < 16 * s + 16; ++l) {
        const int code = (((ql[l] >> lshift) & 0xf) | (((qh[l] >> hshift) & 3) << 4)) - 32;
        o[l] = mul(dl, i2f(static_cast<int>(code)));
      }
    }
  }
};
template <>
struct dev<F::q8_K> {
  static constexpr int chunks = 8;
  __device__ static void decode(const F::q8_K::block& b, int c, float* o) {
#pragma unroll
    for (int j = 0; j < 32; ++j) o[j] = mul(b.d, i2f(static_cast<int>(b.qs[32 * c + j])));
  }
};
template <>
struct dev<F::tq1_0> {
  static constexpr int chunks = 8;
  __device__ static void decode(const F::tq1_0::block& b, int c, float* o) {
    const float d = h2f(b.d);
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      const int i = 32 * c + j;
      int t;
      if (i < 160) t = trit(b.qs[i % 32], i / 32);
      else if (i < 240) t = trit(b.qs[32 + (i - 160) % 16], (i - 160) / 16);
      else t = trit(b.qh[(i - 240) % 4], (i - 240) / 4);
      o[j] = mul(i2f(static_cast<int>(t - 1)), d);
    }
  }
};
template <>
struct dev<F::tq2_0> {
  static constexpr int chunks = 8;
  __device__ static void decode(const F::tq2_0::block& b, int c, float* o) {
    const float d = h2f(b.d);
    const std::uint8_t* q = b.qs + 32 * (c / 4);
    const int shift = 2 * (c % 4);
#pragma unroll
    for (int j = 0; j < 32; ++j) o[j] = mul(i2f(static_cast<int>(((q[j] >> shift) & 3) - 1)), d);
  }
};

// iq1.hpp's coord: coordinate j (-1, 0, 1) of iq1s_grid point k
__device__ __forceinline__ float iq1_coord(int k, int j) {
  return i2f(static_cast<int>(static_cast<std::int8_t>(__ldg(&iq1s_grid.v[k]) >> (8 * j))));
}
template <>
struct dev<F::iq1_s> {
  static constexpr int chunks = 8;
  __device__ static void decode(const F::iq1_s::block& b, int ib, float* o) {
    const float d = h2f(b.d);
    const unsigned qh = b.qh[ib];
    const float dl = mul(d, i2f(static_cast<int>(2 * ((qh >> 12) & 7) + 1)));
    const float delta = (qh & 0x8000) ? -gk::codebooks::iq1s_delta : gk::codebooks::iq1s_delta;
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const int k = b.qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8);
      const std::uint64_t p = __ldg(&iq1s_grid.v[k]);
#pragma unroll
      for (int j = 0; j < 8; ++j)
        o[8 * l + j] = mul(dl, add(i2f(static_cast<int>(static_cast<std::int8_t>(p >> (8 * j)))), delta));
    }
  }
};
template <>
struct dev<F::iq1_m> {
  static constexpr int chunks = 8;
  __device__ static unsigned word(const F::iq1_m::block& b, int k) {
    return b.scales[2 * k] | (static_cast<unsigned>(b.scales[2 * k + 1]) << 8);
  }
  __device__ static void decode(const F::iq1_m::block& b, int c, float* o) {
    const unsigned u = (word(b, 0) >> 12) | ((word(b, 1) >> 8) & 0x00f0) | ((word(b, 2) >> 4) & 0x0f00) |
                       (word(b, 3) & 0xf000);
    const float d = h2f(static_cast<std::uint16_t>(u));
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const int j = 2 * c + s;
      const float dl = mul(d, i2f(static_cast<int>(2 * ((word(b, j / 4) >> (3 * (j % 4))) & 7) + 1)));
#pragma unroll
      for (int l = 0; l < 2; ++l) {
        const float delta = ((b.qh[j] >> (4 * l + 3)) & 1) ? -gk::codebooks::iq1m_delta : gk::codebooks::iq1m_delta;
        const int k = b.qs[2 * j + l] | (((b.qh[j] >> (4 * l)) & 7) << 8);
        const std::uint64_t p = __ldg(&iq1s_grid.v[k]);
#pragma unroll
        for (int i = 0; i < 8; ++i)
          o[16 * s + 8 * l + i] = mul(dl, add(i2f(static_cast<int>(static_cast<std::int8_t>(p >> (8 * i)))), delta));
      }
    }
  }
};

// iq2.hpp's decode_group and sub_scale
__device__ __forceinline__ void iq2_group(float db, std::uint64_t point, unsigned signs, float* o) {
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float v = mul(db, i2f(static_cast<int>((point >> (8 * j)) & 0xffu)));
    o[j] = (signs >> j) & 1u ? -v : v;
  }
}
__device__ __forceinline__ float iq2_sub_scale(float d, int s) { return mul(mul(d, add(0.5f, i2f(static_cast<int>(s)))), 0.25f); }

template <>
struct dev<F::iq2_xxs> {
  static constexpr int chunks = 8;
  __device__ static void decode(const F::iq2_xxs::block& b, int k, float* o) {
    const float d = h2f(b.d);
    const unsigned idx = b.qs[4 * k] | (static_cast<unsigned>(b.qs[4 * k + 1]) << 16);
    const unsigned aux = b.qs[4 * k + 2] | (static_cast<unsigned>(b.qs[4 * k + 3]) << 16);
    const float db = iq2_sub_scale(d, static_cast<int>(aux >> 28));
#pragma unroll
    for (int l = 0; l < 4; ++l)
      iq2_group(db, __ldg(&iq2xxs_grid.v[(idx >> (8 * l)) & 0xffu]), ksigns_iq2xs.v[(aux >> (7 * l)) & 127u], o + 8 * l);
  }
};
template <>
struct dev<F::iq2_xs> {
  static constexpr int chunks = 8;
  __device__ static void decode(const F::iq2_xs::block& b, int c, float* o) {
    const float d = h2f(b.d);
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const int h = 2 * c + s;
      const float db = iq2_sub_scale(d, (b.scales[h / 2] >> (4 * (h & 1))) & 0xf);
#pragma unroll
      for (int l = 0; l < 2; ++l) {
        const unsigned q = b.qs[2 * h + l];
        iq2_group(db, __ldg(&iq2xs_grid.v[q & 511u]), ksigns_iq2xs.v[(q >> 9) & 127u], o + 16 * s + 8 * l);
      }
    }
  }
};
template <>
struct dev<F::iq2_s> {
  static constexpr int chunks = 8;
  __device__ static void decode(const F::iq2_s::block& b, int c, float* o) {
    const float d = h2f(b.d);
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const int h = 2 * c + s;
      const float db = iq2_sub_scale(d, (b.scales[h / 2] >> (4 * (h & 1))) & 0xf);
#pragma unroll
      for (int l = 0; l < 2; ++l) {
        const int g = 2 * h + l;
        const unsigned ix = b.qs[g] | (((b.qh[g / 4] >> (2 * (g % 4))) & 3u) << 8);
        iq2_group(db, __ldg(&iq2s_grid.v[ix]), b.qs[32 + g], o + 16 * s + 8 * l);
      }
    }
  }
};
template <>
struct dev<F::iq3_xxs> {
  static constexpr int chunks = 8;
  __device__ static void decode(const F::iq3_xxs::block& b, int j, float* o) {
    const float d = h2f(b.d);
    const unsigned aux = word_le(b.qs + 64 + 4 * j);
    const float db = mul(mul(d, add(0.5f, i2f(static_cast<int>(aux >> 28)))), 0.5f);
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const unsigned signs = ksigns_iq2xs.v[(aux >> (7 * l)) & 127u];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const unsigned g = __ldg(&iq3xxs_grid.v[b.qs[8 * j + 2 * l + h]]);
#pragma unroll
        for (int mm = 0; mm < 4; ++mm) {
          const int m = 4 * h + mm;
          const float v = i2f(static_cast<int>((g >> (8 * mm)) & 0xffu));
          o[8 * l + m] = mul(mul(db, v), (signs >> m) & 1u ? -1.0f : 1.0f);
        }
      }
    }
  }
};
template <>
struct dev<F::iq3_s> {
  static constexpr int chunks = 8;
  __device__ static void decode(const F::iq3_s::block& b, int j, float* o) {
    const float d = h2f(b.d);
    const float db = mul(d, i2f(static_cast<int>(1 + 2 * ((b.scales[j / 2] >> (4 * (j & 1))) & 0xf))));
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const unsigned p = __ldg(&iq3s_grid.v[b.qs[8 * j + k] | (((b.qh[j] >> k) & 1u) << 8)]);
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        const int i = 4 * k + m;
        const float v = i2f(static_cast<int>((p >> (8 * m)) & 0xffu));
        o[i] = mul(mul(db, v), (b.signs[4 * j + i / 8] >> (i % 8)) & 1u ? -1.0f : 1.0f);
      }
    }
  }
};
template <>
struct dev<F::iq4_nl> {
  static constexpr int chunks = 1;
  __device__ static void decode(const F::iq4_nl::block& b, int, float* o) {
    const float d = h2f(b.d);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      o[j] = mul(d, i2f(static_cast<int>(kvalues_iq4nl.v[b.qs[j] & 0xf])));
      o[j + 16] = mul(d, i2f(static_cast<int>(kvalues_iq4nl.v[b.qs[j] >> 4])));
    }
  }
};
template <>
struct dev<F::iq4_xs> {
  static constexpr int chunks = 8;
  __device__ static void decode(const F::iq4_xs::block& b, int g, float* o) {
    const float d = h2f(b.d);
    const int ls = (((b.scales_l[g / 2] >> (4 * (g % 2))) & 0xf) | (((b.scales_h >> (2 * g)) & 3) << 4)) - 32;
    const float dl = mul(d, i2f(static_cast<int>(ls)));
    const std::uint8_t* qs = b.qs + 16 * g;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      o[j] = mul(dl, i2f(static_cast<int>(kvalues_iq4nl.v[qs[j] & 0xf])));
      o[j + 16] = mul(dl, i2f(static_cast<int>(kvalues_iq4nl.v[qs[j] >> 4])));
    }
  }
};

// The float formats: a "block" of one element; decode_n reads n (<= 32) consecutive ones.
template <class W>
__device__ __forceinline__ float load_elem(const typename W::block* p, std::int64_t i) {
  if constexpr (W::id == gk::type::f32) return p[i].v;
  else if constexpr (W::id == gk::type::f16) return h2f(p[i].bits);
  else return bf2f(p[i].bits);
}

template <class W>
inline constexpr bool is_float = W::block_size == 1;

// Weights [32 q, 32 q + 32) of a row of n weights starting at row (block formats: n is whole
// blocks; float formats: elements at or past n read as 0).
template <class W>
__device__ __forceinline__ void decode_chunk(const typename W::block* row, std::int64_t q, std::int64_t n, float* o) {
  if constexpr (is_float<W>) {
    const std::int64_t i0 = 32 * q;
    if (i0 + 32 <= n) {
#pragma unroll
      for (int j = 0; j < 32; ++j) o[j] = load_elem<W>(row, i0 + j);
    } else {
#pragma unroll
      for (int j = 0; j < 32; ++j) o[j] = i0 + j < n ? load_elem<W>(row, i0 + j) : 0.0f;
    }
  } else {
    constexpr int c = dev<W>::chunks;
    (void)n;
    dev<W>::decode(row[q / c], static_cast<int>(q % c), o);
  }
}

}  // namespace gk::cuda::fmt
