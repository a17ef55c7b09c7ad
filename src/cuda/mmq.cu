// SPDX-License-Identifier: MIT
// The prompt path of the integer weight formats (more than 8 columns per weight slab, or
// mul_mat_id from more than 8 tokens): int8 tensor cores on the CPU's 8-bit activations.
// mul_mat_id's columns are first grouped by expert on the device (mmq_group_ids), so a
// block's columns share one weight slab as mul_mat's do; the kernel reads its columns from
// the group's list (H200, 8 experts of 14336 x 4096, 2 of them per token, 512 tokens:
// 0.36-0.97 of the reference's TFLOP/s, where the mat-vec per column ran before).
//
// The CPU's definition of a row dot (formats::dot_row) encodes the activation column to
// W::dot_type (q8_0, q8_1 or q8_K) and adds W::dot of each block to a running f32 sum from
// 0, in block order; W::dot is integer sums of codes x activation codes per 16 or 32
// weights, combined in integers with the block's scales, then a few float operations. Here:
//   - the columns are encoded once per node by matvec_q8.cu's encoder (the CPU's bytes);
//   - per k-step of 256 weights, 64 weight rows are unpacked once into signed bytes in
//     shared memory (q8dot<W>::unpack, the mat-vec's unpacker) and the activation codes of
//     up to 64 columns copied beside them; on weights unpacked first (mmq_pipe), k-steps of
//     128 weights (q3_K: 256) copied one step ahead into a second stage;
//   - mma.sync m16n8k32 (s8 x s8 -> s32) gives each (row, column) the integer sum of a
//     32-weight chunk, or two m16n8k16 its two 16-weight halves for the formats whose
//     block dot works in halves (q2_K, q3_K, q6_K, iq2_xs, iq2_s, nvfp4);
//   - the thread holding a (row, column) sum then runs the mat-vec's q8dot<W>::part and
//     ::term on it, with the sums standing in for the dp4a ones (mma_x below), and adds the
//     block term to its running sum, blocks in order;
//   - except where a block's integer parts can be summed by the mmas themselves: the min
//     part of q2_K / q4_K / q5_K (and iq1_s / iq1_m's delta part) by a second mma of the
//     rows' mins (mmq_mins), and part 0 of the formats whose codes unpack already times
//     their scale (mmq_scaled: q2_K, q3_K, tq1_0, tq2_0, iq1_s, iq1_m): those
//     accumulate in the mma's registers, and only the block's end runs ::term.
// So every output is the CPU's dot_row bit for bit: the same integers, the same float
// operations per block (__fmul_rn and friends, no contraction), the same order of adding
// block terms. The tests (test_cuda_matmul.cpp, [mmq]) require equality.
//
// A block: 128 threads, 4 warps as 2 x 2, a warp 32 rows x 8 NI columns (NI = 4, or 2
// for formats with 3-4 integer parts per block, which would otherwise hold 128 part
// registers). Shared rows of codes are 256 + 16 bytes (68 words), or 128 + 16 (36 words) in
// the two-stage kernels on weights unpacked first (mmq_pipe): the fragment loads of a warp
// (ldmatrix: 8 rows of 16 bytes a matrix) land in 32 different banks.
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "matvec.cuh"
#include "matvec_q8.cuh"

namespace gk::cuda::q8 {

// What q8dot<W>::part reads in place of a chunk's activation words: the chunk's integer
// sums from the mma (s0 + s1 the whole chunk; for formats in halves, s0 and s1 the
// halves) and the sums of its activation codes per group of 8 (gs[0 .. 3]; only for the
// formats that ask: q4_1, q5_1). Found by argument-dependent lookup.
struct mma_x {
  int s0, s1;
  int4 gs;  // one 16-byte shared load per (column, chunk) instead of four
};
__device__ __forceinline__ int dot8(const unsigned*, const mma_x& x, int from, int n) {
  return n == 8 ? x.s0 + x.s1 : (from == 0 ? x.s0 : x.s1);
}
__device__ __forceinline__ int sum8(const mma_x& x, int from, int n) {
  const int g[4] = {x.gs.x, x.gs.y, x.gs.z, x.gs.w};
  int s = 0;
#pragma unroll
  for (int i = from / 2; i < (from + n) / 2; ++i) s += g[i];
  return s;
}
// A column's activation scales (and q8_K's 16-value sums) of one k-step in shared memory,
// indexed by the activation block's index in the row, as q8dot's act_col is; a column's
// scales lie ld floats apart (the scales of one block for all columns are adjacent).
// Cached: the one activation scale the block term asks for, already in a register (the
// formats whose term reads only its own block's d: every 32-weight format, and every q8_K
// format, whose k-step is one activation block).
template <bool Cached>
struct mma_act {
  const float* dd;
  const short* bs;
  std::int64_t blk0;
  float dc;
  int ld;
  float ds;     // Cached, q4_1 and q5_1: mul(dc, the chunk's code sum as a float)
  bs_pair bp;  // Cached, q8_K activations: the chunk's two 16-value sums
  __device__ __forceinline__ float d(std::int64_t blk) const {
    if constexpr (Cached) return dc;
    else return dd[(blk - blk0) * ld];
  }
  __device__ __forceinline__ const short* bsums(std::int64_t blk) const { return bs + 16 * (blk - blk0); }
};
// q4_1 and q5_1's d(a) * sum(a), the same for the column's 4 outputs of a chunk: once per
// column (mmq_body) instead of once per output
__device__ __forceinline__ float d_times_sum(const mma_act<true>& a, std::int64_t, int) { return a.ds; }
// and the K-quants' pair of q8_K sums: one 4-byte shared load per column and chunk instead
// of two 2-byte loads per output
__device__ __forceinline__ bs_pair bsums_of(const mma_act<true>& a, std::int64_t) { return a.bp; }

}  // namespace gk::cuda::q8

namespace gk::cuda {

namespace {

namespace F = gk::formats;
using mv::mm_args;

// the controls of test_cuda_matmul: 2 every row's last block dropped, 3 mul_mat_id's
// grouping leaves out each expert's last column (never written), 4 mmq_unpack writes each
// row's first chunk's fields from its second chunk
int g_plant = 0;

// formats whose block dot takes 16-weight sums
template <class W>
constexpr bool mmq_halves = W::id == type::q2_K || W::id == type::q3_K || W::id == type::q6_K ||
                            W::id == type::iq2_xs || W::id == type::iq2_s || W::id == type::nvfp4;
// formats whose block dot adds up activation codes
template <class W>
constexpr bool mmq_gsums = W::id == type::q4_1 || W::id == type::q5_1;
// of those, the formats whose term takes d(a) times the whole chunk's code sum (d_times_sum)
template <class W>
constexpr bool mmq_dsum = W::id == type::q4_1 || W::id == type::q5_1;
// Formats whose min part (part mins_at: a block's integer mins times the q8_K sums of their
// activation codes, q2_K, q4_K, q5_K) is formed by a second mma per chunk instead: the A
// operand is each row's min repeated over its 16 or 32 weights (q8dot::min_bytes), the B
// operand the chunk's activation codes, and the product accumulates in the mma's own
// registers over the block's chunks. The same integer (sum over j of m_j x sum of codes of
// j), without the 4-8 integer multiply-adds a lane per output and chunk and without the
// q8_K sums in shared memory; the tensor pipe had room (7% busy, Nsight Compute, q4_K).
template <class W>
constexpr bool mmq_mins = requires { q8::q8dot<W>::mins_at; };
// Formats whose codes are unpacked already times their scale (q8dot::scale_codes: q2_K,
// q3_K negated, and tq1_0 / tq2_0 with no scale), where that still fits a signed byte: part
// 0 of a block is then the sum of its chunks' mmas as they come, accumulated in the mma's
// registers, and a chunk costs no integer arithmetic per output at all.
template <class W>
constexpr bool mmq_scaled = requires(typename q8::q8dot<W>::wc& u) { q8::q8dot<W>::scale_codes(u); };
// Part 0 = scaled_mul x scaled_sign x the scaled codes' sum (q8::scaled_mul_of), plus the
// mins' sum where mins_at is 0: iq1_s and iq1_m (codes times their scale, at most 15; the
// delta's signed scale as the min bytes of each word; the CPU's 8 sum + sum_shift). It took
// iq1_m from the 16-weight sums and the activations' group sums (254 registers) to two mmas
// a chunk.
// Measured and not kept (H200, N 512, M 4096 / 14336, TFLOP/s): q4_K and q5_K split the same
// way (scale = 8 hi + lo, two tiles of codes times hi and times lo, two unsigned-A mmas a
// chunk, part 0 = 8 x the first + the second): q4_K 109 / 114 -> 100 / 105, q5_K 102 / 106
// -> 95 / 98 (191 registers; the second tile's fragment loads and mmas cost more than the
// 32 multiply-adds a lane they replace); capped at 128 registers, 87 / 81.
template <class W>
constexpr int mmq_mins_at() {
  if constexpr (mmq_mins<W>) return q8::q8dot<W>::mins_at;
  else return -1;
}

// A block is 2 x WN warps: 64 rows by WN * 8 * NI columns.
constexpr int mmq_wm = 2, mmq_bm = 32 * mmq_wm, mmq_ks = 256;
template <int WN>
constexpr int mmq_threads = 32 * mmq_wm * WN;
// Formats whose block term mmq_body takes a chunk at a time (q8dot<W>::run_chunk): one
// float a output held across a block's chunks instead of np integer parts, so the warp
// takes 4 column groups (NI) where 4 integer parts held it to 2. nvfp4 (two 32-weight
// chunks a block, four scaled 16-weight parts): H200, N 512, TFLOP/s at M 4096 / 14336,
// 34 / 34 -> 62 / 68 (0.28 -> 0.50 / 0.55 of the reference; with NI 2, 79 registers instead
// of 144, 56 / 63); mul_mat_id prompt (bench_cuda's MoE table) 30 -> 53.
template <class W>
constexpr bool mmq_running = requires { requires q8::q8dot<W>::running; };
// NI = 2 for every format with q8_K activations or 2 parts (warp 32 x 16, 96-160 registers
// instead of 150-226, so 3-4 blocks an SM instead of 2) was measured slower on the H200
// (N 512: q4_K 67 -> 62, q5_K 61 -> 54, q6_K 92 -> 71, iq2_xxs 125 -> 105 TFLOP/s at M
// 14336; only q2_K gained, 64 -> 73): the A fragments then serve half as many mmas.
template <class W>
constexpr int mmq_ni = q8::q8dot<W>::np >= 3 && !mmq_running<W> ? 2 : 4;
// mul_mat_id's kernel (IDS) of the 8-warp formats: NI 2 on the capped 8-warp kernel, 64
// columns a block. An expert's columns are a few groups with a partial last one, which the
// narrower block wastes less of (H200, 8 experts of 14336 x 4096, 2 a token, 512 tokens,
// TFLOP/s: q4_K 69 -> 83, q5_K 62 -> 75; later iq4_xs 86 -> 98, iq2_xxs 91 -> 101, iq3_s
// 84 -> 92, iq2_xs 76 -> 87, iq1_s 82 -> 95, iq1_m 74 -> 90); on mul_mat NI 2 lost (q4_K
// 121 / 125 -> 103 / 111, q5_K 102 / 106 -> 92 / 99 at M 4096 / 14336).
template <class W>
constexpr bool mmq_ids_narrow = W::id == type::q4_K || W::id == type::q5_K || W::id == type::iq4_xs ||
                                W::id == type::iq2_xxs || W::id == type::iq2_xs || W::id == type::iq2_s ||
                                W::id == type::iq3_xxs || W::id == type::iq3_s || W::id == type::iq1_s ||
                                W::id == type::iq1_m;
template <class W, bool IDS>
constexpr int mmq_ni_of = IDS && mmq_ids_narrow<W> ? 2 : mmq_ni<W>;
template <class W, int WN, bool IDS = false>
constexpr int mmq_bn = 8 * WN * mmq_ni_of<W, IDS>;
// WN = 4 (8 warps, each weight tile unpacked for twice the columns) where it measured
// faster on the H200 (N 512, M 4096 / 14336, TFLOP/s, WN 2 -> 4, one run each):
// iq2_xxs 116 / 119 -> 142 / 140, iq3_xxs 111 / 108 -> 139 / 135, iq3_s 84 / 114 -> 130 /
// 124, iq4_xs 117 / 108 -> 143 / 143, q4_K 67 / 67 -> 72 / 74, q5_K 61 / 59 -> 67 / 70,
// iq1_m 37 / 37 -> 40 / 40; mixed but kept: iq2_xs 78 / 104 -> 93 / 94, iq2_s 81 / 103 ->
// 92 / 95, iq1_s 67 / 92 -> 81 / 83. Mixed or worse, so 4 warps: q8_0 (79 / 86 -> 86 / 78),
// q4_0, q5_0, mxfp4, q6_K (66 / 92 -> 79 / 84), q3_K; equal: q2_K, q4_1, nvfp4.
template <class W>
constexpr int mmq_wn_default = (W::id == type::q4_K || W::id == type::q5_K || W::id == type::iq4_xs ||
                                W::id == type::iq2_xxs || W::id == type::iq2_xs || W::id == type::iq2_s ||
                                W::id == type::iq3_xxs || W::id == type::iq3_s || W::id == type::iq1_s ||
                                W::id == type::iq1_m)
                                   ? 4
                                   : 2;

// Per format, as measured on the H200 (N 512, M 4096 / 14336, TFLOP/s; budget 0.03 s):
// mmq_cached: a column's activation scale read once per chunk for its 4 outputs (mma_act)
// instead of per output. Nsight Compute (q8_0, M 4096): shared memory was the busiest unit
// (L1 82% of peak, 13.6 M shared loads, 1.6-way conflicts), and the per-output scale loads
// were 46% of those loads. It costs registers (q8_0 96 -> 134), so the 4-warp kernel of the
// cached 32-weight formats and q3_K/q6_K is capped for 4 blocks an SM (mmq_occ, 128
// registers): q8_0 79 / 86 -> 93 / 99, q4_0 83 / 92 -> 96 / 104, q4_1 42 / 36 -> 49 / 44,
// q5_0 80 / 90 -> 91 / 101, iq4_nl 79 / 89 -> 87 / 101, mxfp4 80 / 91 -> 88 / 101, q6_K 67 /
// 92 -> 91 / 91, q3_K 77 / 94 -> 85 / 90; q4_K 72 / 74 -> 77 / 80 and q5_K 67 / 70 -> 72 /
// 75 (8 warps, uncapped), q2_K 62 / 64 -> 64 / 67 (uncapped; capped it fell to 37 / 38).
// The 8-warp lattice formats lost with it (iq4_xs 143 / 143 -> 108 / 114, iq2_xxs 142 / 140
// -> 110 / 117, iq3_s 130 / 124 -> 107 / 112: 150 registers, one block an SM instead of
// two): they, and the formats not measured with it (q5_1, q8_1, q1_0, q2_0, tq1_0, tq2_0),
// keep the per-output loads, as does nvfp4 (its term reads two blocks' scales; the cap alone
// left it at 33 / 34).
template <class W>
constexpr bool mmq_cached = W::id == type::q8_0 || W::id == type::q4_0 || W::id == type::q4_1 || W::id == type::q5_1 ||
                            W::id == type::q5_0 || W::id == type::iq4_nl || W::id == type::mxfp4 ||
                            W::id == type::q2_K || W::id == type::q3_K || W::id == type::q4_K ||
                            W::id == type::q5_K || W::id == type::q6_K;
template <class W>
constexpr bool mmq_occ = mmq_cached<W> && W::id != type::q2_K && W::id != type::q4_K && W::id != type::q5_K;
// Formats whose block term is the sum times d(w) x d(a), both f16 values on q8_0
// activations (q8dot::term_d: q8_0, q5_0, iq4_nl), among the cached ones: the products
// d(w) x d(a) of a chunk's 16 x 8 outputs come from one f16 mma (A the rows' d(w) in
// column 0, B the columns' d(a) in row 0, zero elsewhere) instead of an FMUL per output.
// The product of two f16 values has at most 22 significant bits, so the mma's f32 sum
// of it and zeros is mul(d(w), d(a)) itself (its sign of zero aside, which no sum sees:
// the running sum starts at +0).
// Measured with the ldmatrix fragments below (an H100, bench_cuda N 512, GK_BENCH_FORMATS=
// q8_0,q5_0,iq4_nl,q4_0, two rounds alternating the binaries before and after, TFLOP/s at
// M 4096 / 14336): q8_0 126.6-126.7 / 152.7-152.9 -> 128.3-128.7 / 154.9-155.2, q5_0
// 127.1-127.2 / 154.9-155.0 -> 129.9-130.2 / 157.4-157.5, iq4_nl 129.4-129.6 / 156.3-156.7
// -> 131.8-132.5 / 158.2-158.3, q4_0 (unchanged, the control) 128.7-129.4 / 155.6 the same.
// Only about 2%. Static SASS counts (sm_90, the 4-warp PRE kernel) of q8_0 on this path
// against q4_0 on the old one, the same loop otherwise: 7888 against 7992 instructions, FMUL
// 256 / 512, LDS 159 / 271 (+ 32 LDSM), but HMMA 64, F2FP 64 and FSEL 32 more and IMAD 2131
// / 1944; IMAD, IADD3 and MOV (about 3600 together) outnumber the float epilogue.
template <class W>
constexpr bool mmq_dmma = mmq_cached<W> && W::dot_type::block_size == 32 && requires(const int* p) {
  q8::q8dot<W>::term_d(0.0f, p);
};
// Fragments by ldmatrix (four 4-byte shared loads a lane in one instruction): the mmq_dmma
// formats. Elsewhere it cost registers: ptxas (sm_90) had the capped 4-warp kernels of
// q4_0, q4_1, q5_1, mxfp4 and q6_K, 0-12 bytes of spill stores before, spill 24-72 with
// it, and the 8-warp capped kernels of the lattice formats and q4_K more than before.
template <class W>
constexpr bool mmq_ldsm = mmq_dmma<W>;

// Weights staged (mmq_body): each k-step's weight bytes copied whole into shared memory by
// coalesced cp.async one step ahead, and unpacked from there, instead of a thread per (row,
// chunk) reading its fields from global memory. The global reads touched 11 times the
// sectors they used (Nsight Compute, q8_0 M 4096: 4.3 of 32 bytes a sector; 10.2 M of the
// kernel's 22 M L1 wavefronts). Measured on the H200 (N 512, M 4096 / 14336, TFLOP/s,
// direct -> staged), it pays for the 8-warp kernels: q4_K 75 / 79 -> 78 / 82, q5_K 72 / 75
// -> 75 / 78, iq1_m 40 / 40 -> 49 / 50, iq2_s 92 / 95 -> 92 / 98, and with the 2-blocks cap
// of mmq_wide_occ iq2_xs 93 / 94 -> 113 / 121, iq1_s 81 / 83 -> 92 / 97, iq3_s 130 / 124 ->
// 135 / 146, iq3_xxs 139 / 135 -> 139 / 151, iq2_xxs 145 / 150 -> 147 / 160, iq4_xs 142 /
// 147 -> 142 / 154. The 4-warp kernels lost at M 4096 (q8_0 89 / 95 -> 82 / 93, q6_K 92 /
// 93 -> 74 / 93, q4_1 52 / 49 -> 32 / 41): the copy loop's instructions and the step's extra
// exposed latency cost more than the loads saved; they read global memory directly.
template <class W>
constexpr bool mmq_staged = mmq_wn_default<W> == 4;
// The 8-warp kernel capped at 128 registers for 2 blocks an SM (matmul_mmq_wide_occ): the
// staged formats that measured faster with it (above; iq2_s 92 / 98 -> 111 / 119). Capped,
// q4_K (221 registers uncapped) fell 79 / 83 -> 74 / 68, q5_K 74 / 77 -> 71 / 65, iq1_m 49 /
// 50 -> 47 / 48: they stayed at one block an SM. Since mmq_mins (183 registers uncapped),
// q4_K gains from the cap despite 272 bytes of spills (109 / 114 -> 121 / 126, mul_mat_id
// 66 -> 70); q5_K does not (102 / 106 -> 102 / 96) and stays uncapped. iq1_m, at 157
// registers since its codes are scaled (scale_codes), gains too: 124 / 135 -> 145 / 158.
template <class W>
constexpr bool mmq_wide_occ = W::id == type::q4_K || W::id == type::iq4_xs || W::id == type::iq2_xxs || W::id == type::iq3_xxs ||
                              W::id == type::iq3_s || W::id == type::iq2_xs || W::id == type::iq1_s ||
                              W::id == type::iq2_s || W::id == type::iq1_m;

// words of a chunk's fields past its codes (q8dot<W>::wc after unsigned q[8])
template <class W>
constexpr int mmq_meta_words = (static_cast<int>(sizeof(typename q8::q8dot<W>::wc)) - 32) / 4;

// Pipe (mmq_pipe): the kernels on weights unpacked first (PRE), whose k-step is only copies.
// Two stages: step s + 1's tiles are copied (cp.async, one commit group a step) into one
// while step s's mmas read the other, one barrier a step; a k-step is mmq_pipe_kc chunks.
// Otherwise a k-step is 8 chunks in one stage, and its tiles' copies are waited for before
// its mmas (two barriers a step), their latency hidden only by the SM's other blocks.
// Measured on an H100 (bench_cuda N 512, TFLOP/s at M 4096 / 14336, two rounds each of the
// four binaries alternating; "one of 8" is main before, de83c04):
//   format   one stage of 8          two of 4                two of 8     three of 4
//   q8_0     127.1-127.7 / 152.2-152.7  144.9-145.0 / 168.9-169.0  127-128 / 145-146  125 / 159
//   q4_0     126.5-126.7 / 152.5-153.1  146.2-146.3 / 170.2-170.5  126 / 142-145      126-128 / 161-162
//   q5_0     127.4-127.6 / 154.4-154.9  145.6-146.6 / 170.9-171.1  128 / 146-148      125-126 / 162
//   iq4_nl   129.8-130.5 / 156.3-156.6  148.1-148.4 / 171.0-171.4  130-131 / 148      128 / 162-164
//   mxfp4    126.1-126.5 / 153.5-153.6  144.4-146.2 / 169.0-169.1  127-128 / 146-147  125-126 / 160
//   nvfp4    68.0-68.9 / 89.6-89.7      78.6 / 93.2-93.4           78-79 / 83-84      77-78 / 94
//   q6_K     111.0-112.0 / 120.2        115.1-115.6 / 132.5-134.2  82 / 83            101 / 111
//   q3_K     131.0-131.6 / 128.1-128.5  142.5-143.6 / 152.6        147.6-149.2 / 163.9-165.2  106 / 131
// (two of 8 chunks: 81-88 KB of tiles, two blocks an SM; three of 4: three.) Nsight Compute on
// q8_0 two of 4, M 4096: the kernel alone 92.6 us (about 185 TFLOP/s; the rest of bench's
// 118 us is the activations' encoder and mmq_unpack), 24.6 instructions an int8 mma, issue
// slots 60% busy, stalls per issue: wait 0.75, math pipe throttle 0.55, short scoreboard
// 0.47, barrier 0.33, long scoreboard 0.32.
// Not q4_1 / q5_1 (mmq_gsums: their code sums take a second barrier a step; piped, ptxas
// spilled 52 bytes in the capped kernel and q4_1 measured the same, 88-89 / 99-100).
template <class W, bool PRE>
constexpr bool mmq_pipe = PRE && !mmq_gsums<W>;
// q3_K takes two stages of 8 chunks (88 KB of tiles, two blocks an SM): bench_cuda N 512 on
// an H100, TFLOP/s at M 4096 / 14336, two rounds alternating binaries, 4 -> 8 chunks: q3_K
// 144.0-144.9 / 153.1-153.7 -> 150.6-151.2 / 164.1-164.6 (q6_K and the 32-weight formats
// measured worse with 8 in the 33rd session: q8_0 145 / 169 -> 127-128 / 145-146).
template <class W>
constexpr int mmq_pipe_kc = W::id == type::q3_K ? 8 : 4;

template <class W, int WN, bool Raw = mmq_staged<W>, bool IDS = false, bool Pipe = false>
struct mmq_smem {
  static constexpr int bn = mmq_bn<W, WN, IDS>;
  static constexpr bool k_act = W::dot_type::block_size == 256;
  static constexpr int kc = Pipe ? mmq_pipe_kc<W> : 8;  // chunks a k-step
  static constexpr int stages = Pipe ? 2 : 1;
  // a row of codes: the step's 32 kc bytes and 16 of slack (68 or 36 words: the 8 rows of
  // an ldmatrix land in 32 different banks)
  static constexpr int ld = 32 * kc + 16;
  static_assert(kc * 32 <= mmq_ks);
  // One stage:
  static constexpr int a = 0;                // [bm][ld] weight codes
  static constexpr int b = a + mmq_bm * ld;  // [bn][ld] activation codes
  // activation scales: q8_K [bn]; else [bn][d_ld], a column's kc scales of the k-step
  // copied whole (16-byte pieces) and slack where 8 floats would conflict, so the 4 lanes of
  // a fragment group, which read 4 column pairs, hit 8 different banks
  static constexpr int d_ld = kc == 8 ? 12 : 4;
  static constexpr int d = b + bn * ld;
  static constexpr int bs = d + bn * (k_act ? 1 : d_ld) * 4;  // [bn][16] q8_K sums
  static constexpr int gs = bs + (k_act ? bn * 16 * 2 : 0);  // [kc chunks][bn][4] code sums
  // [bm][kc chunks] the unpacked chunk's fields after its codes (scales, ...), rows of an
  // odd number of words: the 8 rows of a warp's fragment groups read different banks
  static constexpr int meta_words = mmq_meta_words<W>;
  static constexpr int meta_row = kc * meta_words + 1;
  static constexpr int meta = gs + (mmq_gsums<W> ? bn * kc * 4 * 4 : 0);
  static constexpr int stage = (meta + mmq_bm * meta_row * 4 + 15) / 16 * 16;
  // [bm][raw_ld] the next k-step's weight bytes as stored, each row from the aligned piece
  // holding its first byte (raw_piece bytes a copy), plus 16 bytes: ld_words reads the word
  // after a field's last byte
  static constexpr int step_bytes = 256 / W::block_size * static_cast<int>(sizeof(typename W::block));
  static constexpr int raw_piece = step_bytes > 256 ? 8 : 16;
  static constexpr int raw_ld = (step_bytes + raw_piece - 1) / raw_piece * raw_piece + raw_piece;
  static constexpr int raw = stages * stage;
  // [bn] the block's columns (mmq_body's col): shared, not registers held through the
  // k-loop; then [bn] their byte offsets in the encoded activations
  static constexpr int cols = raw + (Raw ? mmq_bm * raw_ld + 16 : 0);
  static constexpr int col_off = cols + bn * 8;
  static constexpr int bytes = col_off + bn * 8;
  static_assert(raw % 16 == 0 && raw_ld % raw_piece == 0 && cols % 8 == 0 && !(Raw && Pipe));
};

// A chunk's fields past its codes, as words (std::bit_cast: the fields are 4-byte ints and
// floats after unsigned q[8]).
template <class W>
__device__ __forceinline__ void store_meta(const typename q8::q8dot<W>::wc& u, unsigned* dst) {
  using wc = typename q8::q8dot<W>::wc;
  static_assert(sizeof(wc) % 4 == 0 && offsetof(wc, q) == 0 && sizeof(wc) > 32);
  const auto w = std::bit_cast<std::array<unsigned, sizeof(wc) / 4>>(u);
#pragma unroll
  for (int i = 8; i < static_cast<int>(sizeof(wc) / 4); ++i) dst[i - 8] = w[i];
}
template <class W>
__device__ __forceinline__ typename q8::q8dot<W>::wc load_meta(const unsigned* src) {
  using wc = typename q8::q8dot<W>::wc;
  std::array<unsigned, sizeof(wc) / 4> w{};
#pragma unroll
  for (int i = 8; i < static_cast<int>(sizeof(wc) / 4); ++i) w[i] = src[i - 8];
  return std::bit_cast<wc>(w);  // codes zero: mma_x's part and term never read them
}

__device__ __forceinline__ void mma_k32(int* c, const unsigned* a, const unsigned* b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};\n"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(0));
#else
  __trap();  // the host picks this path only for compute capability >= 8.0
#endif
}
// c += a x b (the accumulating form: mmq_mins's parts)
__device__ __forceinline__ void mma_k32_acc(int* c, const unsigned* a, const unsigned* b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  __trap();
#endif
}
__device__ __forceinline__ void mma_k16(int* c, unsigned a0, unsigned a1, unsigned b0) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%7,%7,%7};\n"
               : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
               : "r"(a0), "r"(a1), "r"(b0), "r"(0));
#else
  __trap();
#endif
}

// Four 8 x 8 matrices of 16-bit elements (here: 8 rows x 16 bytes of codes each) from
// shared memory; lane i gives the address of row i % 8 of matrix i / 8, and gets in r[m]
// matrix m's row lane / 4, bytes 4 (lane % 4) ..: the mma fragments' layout. One
// instruction for four 4-byte loads a lane. Volatile: kept after the barrier that orders
// the tile's stores.
__device__ __forceinline__ void ldsm_x4(unsigned* r, const unsigned char* row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const auto a = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
#else
  __trap();
#endif
}
// d = a x b for f16 a (16 x 8) and b (8 x 8), f32 out (mmq_dmma's scale products)
__device__ __forceinline__ void mma_f16_k8(float* d, unsigned a0, unsigned a1, unsigned b0) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%7,%7,%7};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a0), "r"(a1), "r"(b0), "f"(0.0f));
#else
  __trap();
#endif
}
// an f16x2 register holding x (exactly an f16 value) in its low half, 0 in its high half
__device__ __forceinline__ unsigned half_lo(float x) {
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(0.0f), "f"(x));
  return r;
}

// mul_mat_id's columns grouped by expert (mmq_group_ids): group g is count = groups[g].z
// columns of expert groups[g].x, listed at perm[groups[g].y ...]; a block's columns are one
// group, so they share one weight slab as mul_mat's do. perm == nullptr: mul_mat, whose
// group g is BN consecutive columns of one slab.
struct mmq_ids {
  const int* perm;
  const int4* groups;
  const int* n_groups;  // written by mmq_group_ids, read by every block of the mmq kernel
};

// The weights unpacked once per node (mmq_unpack), for PRE kernels: chunk c of row r is
// its 32 signed codes at codes + 32 (r chunks + c) and its fields past the codes (what
// store_meta writes) at meta + (r chunks + c) meta_words.
struct mmq_pre {
  const unsigned char* codes;
  const unsigned* meta;
};

// f(i) for i = tid, tid + NT, ... below N, unrolled; the bound tested only where NT does not
// divide N (a strided loop compiled to some 90 instructions for one copy a thread)
template <int N, int NT, class F>
__device__ __forceinline__ void spread(int tid, F&& f) {
#pragma unroll
  for (int it = 0; it < (N + NT - 1) / NT; ++it) {
    const int i = tid + it * NT;
    if (N % NT == 0 || i < N) f(i);
  }
}

template <class W, int WN, bool PRE, bool IDS>
__device__ __forceinline__ void mmq_body(mm_args p, q8::act_cols act, mmq_ids ids, mmq_pre pre, int plant) {
  using Q = q8::q8dot<W>;
  using L = mmq_smem<W, WN, mmq_staged<W> && !PRE, IDS, mmq_pipe<W, PRE>>;
  constexpr int CH = Q::ch, NP = Q::np, S = sizeof(typename W::block), NI = mmq_ni_of<W, IDS>, BN = mmq_bn<W, WN, IDS>;
  constexpr int NT = mmq_threads<WN>;
  constexpr bool K_ACT = L::k_act;  // q8_K: one activation block per step
  constexpr bool D_CACHED = mmq_cached<W>;  // see mma_act and mmq_cached
  constexpr bool DMMA = mmq_dmma<W>, LDSM = mmq_ldsm<W>;
  constexpr bool STAGED = mmq_staged<W> && !PRE;
  constexpr bool PIPE = mmq_pipe<W, PRE>;  // two stages of k-steps (mmq_smem's Pipe)
  constexpr int KC = L::kc, LD = L::ld, LKC = std::bit_width(static_cast<unsigned>(KC)) - 1;
  static_assert(KC == 1 << LKC);
  extern __shared__ __align__(16) unsigned char sm[];
  // stage st's tiles (st = 0 without PIPE), as offsets from one base: one register
  struct tiles {
    unsigned char* base;
    __device__ unsigned char* at() const { return base + L::a; }  // weight codes
    __device__ unsigned char* bt() const { return base + L::b; }  // activation codes
    __device__ float* sd() const { return reinterpret_cast<float*>(base + L::d); }  // activation scales
    __device__ short* sbs() const { return reinterpret_cast<short*>(base + L::bs); }  // q8_K sums
    __device__ int* sgs() const { return reinterpret_cast<int*>(base + L::gs); }  // code sums
    __device__ unsigned* smeta() const { return reinterpret_cast<unsigned*>(base + L::meta); }  // per-chunk fields
  };
  auto tiles_of = [&](int st) { return tiles{sm + st * L::stage}; };
  unsigned char* const sraw = sm + L::raw;
  std::int64_t* const scol = reinterpret_cast<std::int64_t*>(sm + L::cols);
  std::int64_t* const soff = reinterpret_cast<std::int64_t*>(sm + L::col_off);
  constexpr int DLD = L::d_ld;
  constexpr int PIECE = L::raw_piece, MAXP = L::raw_ld / PIECE;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / WN, wn = warp % WN, g = lane >> 2, t = lane & 3;
  const std::int64_t row0 = blockIdx.x * static_cast<std::int64_t>(mmq_bm);
  const mv::col_groups<BN> groups(p);
  const std::int64_t n_groups = ids.perm ? *ids.n_groups : groups.count;
  const std::int64_t chunks = p.kp / 32, nblk = p.kp / W::block_size;
  const std::int64_t dropped = plant == 2 ? nblk - 1 : -1;

  for (std::int64_t grp = blockIdx.y; grp < n_groups; grp += gridDim.y) {
    // the block's columns: mul_mat's BN consecutive ones of a slab, or a group of
    // mul_mat_id's, all of one expert; scol[j] is column j (columns past the end read the
    // last one; never written). The k-loop's first barrier orders these stores.
    const char* w;
    int nc;
    if (ids.perm) {
      const int4 gr = ids.groups[grp];
      w = p.w + static_cast<std::int64_t>(gr.x) * p.w_nb2;
      nc = gr.z;
      if (tid < BN) {
        scol[tid] = ids.perm[gr.y + (tid < nc ? tid : nc - 1)];
        soff[tid] = scol[tid] * act.col_stride;
      }
    } else {
      const std::int64_t q0 = groups.first(p, grp, nc);
      float* y0;
      mv::column_of(p, q0, w, y0);
      if (tid < BN) {
        scol[tid] = q0 + (tid < nc ? tid : nc - 1);
        soff[tid] = scol[tid] * act.col_stride;
      }
    }
    auto col = [&](int j) { return scol[j]; };
    // column j's encoded activations (codes, scales, q8_K sums) in global memory
    auto act_of = [&](int j) { return q8::act_col{act.base + soff[j], act.d_off, act.bs_off}; };

    // A row's weight bytes of the k-step at chunk kcs, copied whole into sraw: coalesced
    // pieces, where a thread per (row, chunk) reading its own fields from global memory
    // touched 11 times the sectors it used (Nsight Compute, q8_0: 4.3 of 32 bytes a sector).
    // Rows past the end read the last row (never written).
    auto row_bytes = [&](int r, std::int64_t kcs) {
      const std::int64_t row = row0 + r < p.m ? row0 + r : p.m - 1;
      return reinterpret_cast<const unsigned char*>(w + row * p.w_nb1) + (kcs / CH) * S;
    };
    auto stage = [&](std::int64_t kcs) {
      if constexpr (!STAGED) return;
      const int n = static_cast<int>(chunks - kcs < 8 ? chunks - kcs : 8) / CH * S;
#pragma unroll 1
      for (int i = tid; i < mmq_bm * MAXP; i += NT) {
        const int r = i / MAXP, pc = i % MAXP;
        const auto s0 = reinterpret_cast<std::uintptr_t>(row_bytes(r, kcs));
        const std::uintptr_t a0 = s0 & ~static_cast<std::uintptr_t>(PIECE - 1);
        if (a0 + static_cast<std::uintptr_t>(PIECE * pc) < s0 + n)
          mv::copy_async<PIECE>(sraw + r * L::raw_ld + PIECE * pc, reinterpret_cast<const void*>(a0 + PIECE * pc));
      }
      mv::copy_async_commit();
    };
    stage(0);
    // the low address bits of the rows of this thread's unpack jobs (32 bits suffice)
    unsigned row_mis[mmq_bm * KC / NT];
#pragma unroll
    for (int it = 0; it < mmq_bm * KC / NT; ++it)
      row_mis[it] = STAGED ? static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(row_bytes((tid + it * NT) >> LKC, 0))) : 0u;

    constexpr bool RUN = mmq_running<W>;
    constexpr int NPT = RUN ? 1 : NP;  // integer parts held across a block's chunks
    constexpr bool MINS = mmq_mins<W>, SCALED = mmq_scaled<W>;
    constexpr int MP = mmq_mins_at<W>();  // the part the min mmas form (pm), not pt
    float acc[2][NI][4], rn[2][NI][4];
    int pt[2][NI][4][NPT], pm[2][NI][4], ps[2][NI][4];  // pm, ps: the mmas' accumulators
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < NI; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          acc[i][j][e] = 0.0f;
          rn[i][j][e] = 0.0f;
          pm[i][j][e] = 0;
          ps[i][j][e] = 0;
#pragma unroll
          for (int k = 0; k < NPT; ++k) pt[i][j][e][k] = 0;
        }

    // A k-step's tiles (chunks kc0 .. kc0 + nch - 1) into stage T: the columns' codes and
    // scales by cp.async, the weights unpacked (PRE: copied by cp.async) and q8_K's scales
    // and sums by plain loads and stores (PIPE: by cp.async). Two commit groups, or one
    // (PIPE: the wait at a step's top counts one group a step).
    auto load_step = [&](std::int64_t kc0, const tiles& T) {
      const int nch = static_cast<int>(chunks - kc0 < KC ? chunks - kc0 : KC);  // whole blocks
      // the columns' codes, in flight while the weights are unpacked (columns past the end
      // read the last one; never written): a thread's 16-byte piece is the same in every
      // column it copies (NT is a multiple of 2 KC), its columns NT / (2 KC) apart
      {
        constexpr int PC = 2 * KC, LPC = std::bit_width(static_cast<unsigned>(PC)) - 1;  // 16-byte pieces a column
        const int piece = tid & (PC - 1);
        const char* src = act.base + 32 * kc0 + 16 * piece;
        unsigned char* dst = T.bt() + 16 * piece;
        if (piece < 2 * nch) {
#pragma unroll
          for (int it = 0; it < BN * PC / NT; ++it) {
            const int j = (tid >> LPC) + it * (NT / PC);
            mv::copy16_async(dst + j * LD, src + soff[j]);
          }
        }
      }
      // and their scales of the step (q8_0, q8_1 activations): KC floats a column, 16-byte
      // pieces at 16-byte boundaries (the d array starts at kp, kc0 is a multiple of KC); a
      // piece only where the step has chunks in it (the last may read past the row's last
      // block, inside the column's 16-byte-rounded stride)
      if constexpr (!K_ACT) {
        constexpr int PD = KC / 4;  // pieces a column
        spread<BN * PD, NT>(tid, [&](int i) {
          const int j = i >> (LKC - 2), h = i & (PD - 1);
          if (4 * h < nch)
            mv::copy16_async(T.sd() + DLD * j + 4 * h, act_of(j).d_at(kc0 + 4 * h));
        });
      }
      if constexpr (!PIPE) mv::copy_async_commit();  // PIPE: one group a step
      // unpack (from the staged bytes, or straight from global memory): a thread per (row,
      // chunk), the KC chunks of 32 / KC rows in a warp. Rows past the end read the last row
      // (never written). ld_words reads the aligned word holding a field's last byte: from
      // global memory at most 3 bytes past the tensor, never past its allocation's granule
      // (the mat-vec's direct kernel does the same); staged, the 16 bytes after sraw.
      auto job = [&](int it) {
        const int i = tid + it * NT, r = i >> LKC, c = i & (KC - 1);
        if (c >= nch) return;
        if constexpr (PRE) {  // the unpacked chunk copied whole: KC threads a row's step
          const std::int64_t row = row0 + r < p.m ? row0 + r : p.m - 1, rc = row * chunks + kc0 + c;
          unsigned char* dst = T.at() + r * LD + 32 * c;
          mv::copy16_async(dst, pre.codes + 32 * rc);
          mv::copy16_async(dst + 16, pre.codes + 32 * rc + 16);
#pragma unroll
          for (int v = 0; v < L::meta_words; ++v)
            mv::copy_async<4>(T.smeta() + r * L::meta_row + c * L::meta_words + v, pre.meta + rc * L::meta_words + v);
          return;
        }
        const unsigned char* b;
        if constexpr (STAGED) {
          const int mis = static_cast<int>((row_mis[it] + static_cast<unsigned>(kc0 / CH) * S) & (PIECE - 1));
          b = sraw + r * L::raw_ld + mis + (c / CH) * S;
        } else {
          b = row_bytes(r, kc0) + (c / CH) * S;
        }
        typename Q::wc u;
        Q::unpack(b, c % CH, u);
        if constexpr (mmq_scaled<W>) Q::scale_codes(u);
        uint4* dst = reinterpret_cast<uint4*>(T.at() + r * LD + 32 * c);
        dst[0] = make_uint4(u.q[0], u.q[1], u.q[2], u.q[3]);
        dst[1] = make_uint4(u.q[4], u.q[5], u.q[6], u.q[7]);
        store_meta<W>(u, T.smeta() + r * L::meta_row + c * L::meta_words);
      };
      if constexpr (W::id == type::tq1_0) {  // its trit unpacker unrolled 4 times spills
        for (int it = 0; it < mmq_bm * KC / NT; ++it) job(it);
      } else {  // unrolled: the loads of all the jobs in flight at once
#pragma unroll
        for (int it = 0; it < mmq_bm * KC / NT; ++it) job(it);
      }
      // q8_K activations: the columns' scales and sums of the activation block (no sums
      // where the mmas form the min part); PIPE: by cp.async, which a plain load's wait
      // would otherwise expose at every k-step
      if constexpr (K_ACT && PIPE) {
        spread<BN, NT>(tid, [&](int j) {
          mv::copy_async<4>(T.sd() + j, act_of(j).d_at(kc0 / 8));
        });
        if constexpr (!MINS) {
          spread<BN * 8, NT>(tid, [&](int i) {
            const int j = i >> 3, k = i & 7;
            mv::copy_async<4>(T.sbs() + 16 * j + 2 * k, act_of(j).bsums(kc0 / 8) + 2 * k);
          });
        }
      } else if constexpr (K_ACT && MINS) {
        for (int j = tid; j < BN; j += NT) T.sd()[j] = act_of(j).d(kc0 / 8);
      } else if constexpr (K_ACT) {
        for (int i = tid; i < BN * 8; i += NT) {
          const int j = i >> 3, k = i & 7;
          const q8::act_col ac = act_of(j);
          if (k == 0) T.sd()[j] = ac.d(kc0 / 8);
          reinterpret_cast<int*>(T.sbs() + 16 * j)[k] = reinterpret_cast<const int*>(ac.bsums(kc0 / 8))[k];
        }
      }
      mv::copy_async_commit();  // the unpack's copies (PRE)
    };

    constexpr int ST = L::stages;
    if constexpr (PIPE) {  // steps 0 .. ST - 2 in flight, one commit group each (empty past the end)
      __syncthreads();  // scol and soff written
#pragma unroll
      for (int st = 0; st < ST - 1; ++st) {
        if (st * KC < chunks) load_step(st * KC, tiles_of(st));
        else mv::copy_async_commit();
      }
    }
    for (std::int64_t kc0 = 0; kc0 < chunks; kc0 += KC) {
      const int nch = static_cast<int>(chunks - kc0 < KC ? chunks - kc0 : KC);  // whole blocks
      const int step = static_cast<int>(kc0 / KC);
      const tiles T = tiles_of(PIPE ? step % ST : 0);
      if constexpr (PIPE) {
        mv::copy_async_wait<ST - 2>();  // this step's group (the ST - 2 after it may be in flight)
        __syncthreads();  // every thread's copies landed; the stage of step - 1 is read
        const std::int64_t next = kc0 + (ST - 1) * KC;  // into step - 1's stage
        if (next < chunks) load_step(next, tiles_of((step + ST - 1) % ST));
        else mv::copy_async_commit();
      } else {
        if constexpr (STAGED) mv::copy_async_wait<0>();  // this step's weight bytes
        __syncthreads();  // the previous step's tiles are read; every thread's bytes landed
        load_step(kc0, T);
        mv::copy_async_wait<0>();
        __syncthreads();  // the tiles are written; sraw is free
        if (kc0 + KC < chunks) stage(kc0 + KC);  // in flight during this step's mmas
      }
      if constexpr (mmq_gsums<W>) {
        for (int i = tid; i < BN * 4 * KC; i += NT) {
          const int j = i >> (LKC + 2), grp8 = i & (4 * KC - 1);  // group of 8 codes: chunk grp8 / 4
          if (grp8 >= 4 * nch) continue;
          const int* x = reinterpret_cast<const int*>(T.bt() + j * LD + 8 * grp8);
          T.sgs()[((grp8 >> 2) * BN + j) * 4 + (grp8 & 3)] = __dp4a(0x01010101, x[0], __dp4a(0x01010101, x[1], 0));
        }
        __syncthreads();
      }

      // the step's first chunk within its 8 (a q8_K activation block; KC divides 8, and
      // CH divides 8 or is 8)
      const int kin = PIPE ? static_cast<int>(kc0 & 7) : 0;
#pragma unroll
      for (int c = 0; c < KC; ++c) {
        if (c >= nch) break;
        const std::int64_t kc = kc0 + c;
        unsigned af[2][4], bf[NI][2];
        if constexpr (LDSM) {
          // by ldmatrix: matrix m of A is rows 8 (m % 2) .. of the 16, bytes 16 (m / 2) ..
          // of the chunk (a[0 .. 3] of the mma); of B, tile ni + m / 2, bytes 16 (m % 2) ..
          const int lm = lane >> 3, lr = lane & 7;
#pragma unroll
          for (int mi = 0; mi < 2; ++mi)
            ldsm_x4(af[mi], T.at() + (wm * 32 + mi * 16 + 8 * (lm & 1) + lr) * LD + 32 * c + 16 * (lm >> 1));
          static_assert(NI % 2 == 0);
#pragma unroll
          for (int ni = 0; ni < NI; ni += 2) {
            unsigned r4[4];
            ldsm_x4(r4, T.bt() + (wn * 8 * NI + (ni + (lm >> 1)) * 8 + lr) * LD + 32 * c + 16 * (lm & 1));
            bf[ni][0] = r4[0];
            bf[ni][1] = r4[1];
            bf[ni + 1][0] = r4[2];
            bf[ni + 1][1] = r4[3];
          }
        } else {
          const unsigned* aw = reinterpret_cast<const unsigned*>(T.at());
          const unsigned* bw = reinterpret_cast<const unsigned*>(T.bt());
          constexpr int ldw = LD / 4;
#pragma unroll
          for (int mi = 0; mi < 2; ++mi) {
            const int base = (wm * 32 + mi * 16 + g) * ldw + 8 * c + t;
            af[mi][0] = aw[base];
            af[mi][1] = aw[base + 8 * ldw];
            af[mi][2] = aw[base + 4];
            af[mi][3] = aw[base + 8 * ldw + 4];
          }
#pragma unroll
          for (int ni = 0; ni < NI; ++ni) {
            const int base = (wn * 8 * NI + ni * 8 + g) * ldw + 8 * c + t;
            bf[ni][0] = bw[base];
            bf[ni][1] = bw[base + 4];
          }
        }
        // every mma of the chunk first, then the block arithmetic on their sums
        int s0[2][NI][4], s1[2][NI][4];
#pragma unroll
        for (int mi = 0; mi < 2; ++mi)
#pragma unroll
          for (int ni = 0; ni < NI; ++ni) {
            if constexpr (SCALED) {  // the scaled codes' sums go straight into part 0
              mma_k32_acc(ps[mi][ni], af[mi], bf[ni]);
            } else if constexpr (mmq_halves<W>) {
              mma_k16(s0[mi][ni], af[mi][0], af[mi][1], bf[ni][0]);
              mma_k16(s1[mi][ni], af[mi][2], af[mi][3], bf[ni][1]);
            } else {
              mma_k32(s0[mi][ni], af[mi], bf[ni]);
#pragma unroll
              for (int e = 0; e < 4; ++e) s1[mi][ni][e] = 0;
            }
          }
        typename Q::wc u[2][2];
#pragma unroll
        for (int mi = 0; mi < 2; ++mi)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int r = wm * 32 + mi * 16 + g + 8 * h;
            u[mi][h] = load_meta<W>(T.smeta() + r * L::meta_row + c * L::meta_words);
          }
        // mmq_dmma: the chunk's d(w) x d(a), by output as the sums lie (lane t == 0 holds
        // column 0 of A, rows g and g + 8, and row 0 of B, column g; every other lane zeros)
        float dm[2][NI][4];
        if constexpr (DMMA) {
          unsigned ah[2][2], bh[NI];
#pragma unroll
          for (int mi = 0; mi < 2; ++mi)
#pragma unroll
            for (int h = 0; h < 2; ++h) ah[mi][h] = half_lo(t == 0 ? u[mi][h].d : 0.0f);
#pragma unroll
          for (int ni = 0; ni < NI; ++ni) bh[ni] = half_lo(t == 0 ? T.sd()[DLD * (wn * 8 * NI + ni * 8 + g) + c] : 0.0f);
#pragma unroll
          for (int mi = 0; mi < 2; ++mi)
#pragma unroll
            for (int ni = 0; ni < NI; ++ni) mma_f16_k8(dm[mi][ni], ah[mi][0], ah[mi][1], bh[ni]);
        }
        if constexpr (MINS) {  // the chunk's min part: the rows' mins (A) x the codes (B)
#pragma unroll
          for (int mi = 0; mi < 2; ++mi) {
            // A's registers: rows g and g + 8, words t and t + 4 of the chunk
            const unsigned am[4] = {Q::min_bytes(u[mi][0], t), Q::min_bytes(u[mi][1], t), Q::min_bytes(u[mi][0], t + 4),
                                    Q::min_bytes(u[mi][1], t + 4)};
#pragma unroll
            for (int ni = 0; ni < NI; ++ni) mma_k32_acc(pm[mi][ni], am, bf[ni]);
          }
        }
        const bool block_end = (kin + c) % CH == CH - 1;
        const std::int64_t kb = kc - (CH - 1);  // the block's first chunk
        auto output = [&](int mi, int ni, int e, int h, int j, float dcol, const int4& gcol, float dsum,
                          q8::bs_pair bp) {
          const q8::mma_x x{s0[mi][ni][e], s1[mi][ni][e], gcol};
          const q8::mma_act<D_CACHED> a{T.sd() + (K_ACT ? j : DLD * j), T.sbs() + 16 * j, K_ACT ? kc0 / 8 : kc0, dcol, K_ACT ? BN : 1,
                                        dsum, bp};
          if constexpr (SCALED) {  // the parts are in the mmas' registers: only the block's end
            if (block_end) {
              int tp[NP];
#pragma unroll
              for (int k = 0; k < NP; ++k) tp[k] = k == MP ? pm[mi][ni][e] : 0;
              // part 0 (with the mins' where MP is 0); any other is the mins' (MP)
              tp[0] = q8::scaled_mul_of<Q>() * Q::scaled_sign * ps[mi][ni][e] + (MP == 0 ? pm[mi][ni][e] : 0);
              if (kb / CH != dropped) acc[mi][ni][e] += Q::term(u[mi][h], a, kb, tp);
              ps[mi][ni][e] = 0;
              pm[mi][ni][e] = 0;
            }
            return;
          }
          int pp[NP];
          Q::part(u[mi][h], x, a, kc, pp);
          if constexpr (RUN) {
            Q::run_chunk(u[mi][h], a, kc, pp, rn[mi][ni][e]);
            if (block_end) {
              if (kb / CH != dropped) acc[mi][ni][e] += rn[mi][ni][e];
              rn[mi][ni][e] = 0.0f;
            }
          } else {
#pragma unroll
            for (int k = 0; k < NP; ++k)
              if (k != MP) pt[mi][ni][e][k] += pp[k];  // MP's pp[k] is dead code: pm holds it
            if (block_end) {
              if constexpr (MINS) pt[mi][ni][e][MP] = pm[mi][ni][e];
              if (kb / CH != dropped) {
                if constexpr (DMMA) acc[mi][ni][e] += Q::term_d(dm[mi][ni][e], pt[mi][ni][e]);
                else acc[mi][ni][e] += Q::term(u[mi][h], a, kb, pt[mi][ni][e]);
              }
#pragma unroll
              for (int k = 0; k < NP; ++k) pt[mi][ni][e][k] = 0;
              pm[mi][ni][e] = 0;
            }
          }
        };
        if constexpr (D_CACHED) {
          // a thread's 2 NI columns one pair at a time: the pair's scales (and code sums)
          // read from shared memory once for their 8 outputs of the chunk (see mmq_cached)
#pragma unroll
          for (int ni = 0; ni < NI; ++ni) {
            const int j0 = wn * 8 * NI + ni * 8 + 2 * t;
            const float2 dpair = K_ACT ? *reinterpret_cast<const float2*>(T.sd() + j0)
                                       : make_float2(T.sd()[DLD * j0 + c], T.sd()[DLD * (j0 + 1) + c]);
#pragma unroll
            for (int e1 = 0; e1 < 2; ++e1) {
              const int j = j0 + e1;
              const float dcol = e1 == 0 ? dpair.x : dpair.y;
              const int4 gcol = mmq_gsums<W> ? *reinterpret_cast<const int4*>(T.sgs() + (c * BN + j) * 4) : int4{};
              const float dsum = mmq_dsum<W> ? q8::mul(dcol, q8::i2f_small(gcol.x + gcol.y + gcol.z + gcol.w)) : 0.0f;
              q8::bs_pair bp{0, 0};
              if constexpr (K_ACT && !MINS) {  // unused (and dropped) by the formats that take no sums
                const unsigned v = *reinterpret_cast<const unsigned*>(T.sbs() + 16 * j + 2 * (kin + c));
                bp = {static_cast<short>(v & 0xffffu), static_cast<short>(v >> 16)};
              }
#pragma unroll
              for (int mi = 0; mi < 2; ++mi)
#pragma unroll
                for (int h = 0; h < 2; ++h) output(mi, ni, 2 * h + e1, h, j, dcol, gcol, dsum, bp);
            }
          }
        } else {
#pragma unroll
          for (int mi = 0; mi < 2; ++mi)
#pragma unroll
            for (int ni = 0; ni < NI; ++ni)
#pragma unroll
              for (int e = 0; e < 4; ++e) {
                const int j = wn * 8 * NI + ni * 8 + 2 * t + (e & 1);
                output(mi, ni, e, e >> 1, j, 0.0f,
                       mmq_gsums<W> ? *reinterpret_cast<const int4*>(T.sgs() + (c * BN + j) * 4) : int4{}, 0.0f,
                       q8::bs_pair{0, 0});
              }
        }
      }
    }
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const std::int64_t r = row0 + wm * 32 + mi * 16 + g + (e >= 2 ? 8 : 0);
          const int j = wn * 8 * NI + ni * 8 + 2 * t + (e & 1);
          if (r >= p.m || j >= nc) continue;
          const char* wc;
          float* y;
          mv::column_of(p, col(j), wc, y);
          y[r] = acc[mi][ni][e];
        }
    __syncthreads();  // scol read by every thread before the next group writes it
  }
}

// Kernel names, so each has its own launch record (src/cuda/launches/mmq.txt). PRE: on
// weights unpacked once per node (mmq_pre, mmq_unpack); IDS: mul_mat_id's own shape
// (mmq_ids_narrow), where it differs.
template <class W, bool PRE, bool IDS = false>
__global__ __launch_bounds__(mmq_threads<2>) void matmul_mmq(mm_args p, q8::act_cols act, mmq_ids ids, mmq_pre pre,
                                                             int plant) {
  mmq_body<W, 2, PRE, IDS>(p, act, ids, pre, plant);
}
template <class W, bool PRE, bool IDS = false>
__global__ __launch_bounds__(mmq_threads<2>, 4) void matmul_mmq_occ(mm_args p, q8::act_cols act, mmq_ids ids,
                                                                     mmq_pre pre, int plant) {
  mmq_body<W, 2, PRE, IDS>(p, act, ids, pre, plant);
}
template <class W, bool PRE, bool IDS = false>
__global__ __launch_bounds__(mmq_threads<4>) void matmul_mmq_wide(mm_args p, q8::act_cols act, mmq_ids ids,
                                                                  mmq_pre pre, int plant) {
  mmq_body<W, 4, PRE, IDS>(p, act, ids, pre, plant);
}
template <class W, bool PRE, bool IDS = false>
__global__ __launch_bounds__(mmq_threads<4>, 2) void matmul_mmq_wide_occ(mm_args p, q8::act_cols act, mmq_ids ids,
                                                                          mmq_pre pre, int plant) {
  mmq_body<W, 4, PRE, IDS>(p, act, ids, pre, plant);
}

// Every chunk of the m weight rows unpacked once (q8dot<W>::unpack, as mmq_body's job) into
// mmq_pre's layout: a thread a chunk, consecutive threads consecutive chunks of a row.
constexpr int unpack_threads = 256;
template <class W>
__global__ __launch_bounds__(unpack_threads) void mmq_unpack(const char* w, std::int64_t w_nb1, std::int64_t m,
                                                             std::int64_t chunks, unsigned char* codes,
                                                             unsigned* meta, int plant) {
  using Q = q8::q8dot<W>;
  constexpr int MW = mmq_meta_words<W>;
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(unpack_threads) + threadIdx.x;
  if (i >= m * chunks) return;
  const std::int64_t row = i / chunks, c = i - row * chunks;
  typename Q::wc u;
  if (plant == 4 && c == 0 && chunks > 1) {
    Q::unpack(reinterpret_cast<const unsigned char*>(w + row * w_nb1) + (1 / Q::ch) * sizeof(typename W::block),
              1 % Q::ch, u);
    store_meta<W>(u, meta + MW * i);
  }
  Q::unpack(reinterpret_cast<const unsigned char*>(w + row * w_nb1) + (c / Q::ch) * sizeof(typename W::block),
            static_cast<int>(c % Q::ch), u);
  if constexpr (mmq_scaled<W>) Q::scale_codes(u);
  uint4* dst = reinterpret_cast<uint4*>(codes + 32 * i);
  dst[0] = make_uint4(u.q[0], u.q[1], u.q[2], u.q[3]);
  dst[1] = make_uint4(u.q[4], u.q[5], u.q[6], u.q[7]);
  if (plant != 4 || c != 0 || chunks == 1) store_meta<W>(u, meta + MW * i);
}

// Groups mul_mat_id's columns by expert for mmq_body (one block): counts per expert, the
// experts' first column and first group by prefix sums, then each column's place. The order
// of columns within an expert follows the atomics, and does not matter: every output is
// its own (row, column) dot, whatever columns share its block. A column whose expert id is
// out of range gets NaN outputs here (as the other paths give) and joins no group.
constexpr int ids_threads = 1024;
__global__ __launch_bounds__(ids_threads) void mmq_group_ids(mm_args p, int bn, int* perm, int4* groups,
                                                             int* n_groups, int plant) {
  extern __shared__ int ish[];
  const int n_as = static_cast<int>(p.n_as);
  int* const cnt = ish;           // columns per expert
  int* const cur = ish + n_as;    // the expert's next place in perm
  int* const gst = cur + n_as;    // the expert's first group
  const int tid = threadIdx.x, lane = tid & 31;
  auto expert = [&](std::int64_t q) {
    return *reinterpret_cast<const int*>(p.ids + (q % p.n_used) * p.ids_nb0 + (q / p.n_used) * p.ids_nb1);
  };
  for (int e = tid; e < n_as; e += ids_threads) cnt[e] = 0;
  __syncthreads();
  for (std::int64_t q = tid; q < p.ncols; q += ids_threads) {
    const int ex = expert(q);
    if (ex >= 0 && ex < n_as) {
      atomicAdd(&cnt[ex], 1);
    } else {
      const char* w;
      float* y;
      mv::column_of(p, q, w, y);
      for (std::int64_t r = 0; r < p.m; ++r) y[r] = __int_as_float(0x7fc00000);
    }
  }
  __syncthreads();
  if (tid < 32) {  // exclusive prefix sums over the experts, 32 at a time
    int run_c = 0, run_g = 0;
    for (int e0 = 0; e0 < n_as; e0 += 32) {
      const int e = e0 + lane, c = e < n_as ? cnt[e] : 0, ng = (c + bn - 1) / bn;
      int ic = c, ig = ng;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int uc = __shfl_up_sync(0xffffffffu, ic, o), ug = __shfl_up_sync(0xffffffffu, ig, o);
        if (lane >= o) {
          ic += uc;
          ig += ug;
        }
      }
      if (e < n_as) {
        cur[e] = run_c + ic - c;
        gst[e] = run_g + ig - ng;
      }
      run_c += __shfl_sync(0xffffffffu, ic, 31);
      run_g += __shfl_sync(0xffffffffu, ig, 31);
    }
    if (lane == 0) *n_groups = run_g;
  }
  __syncthreads();
  for (int e = tid; e < n_as; e += ids_threads)
    for (int g = 0, c = cnt[e]; g * bn < c; ++g) {
      int n = c - g * bn < bn ? c - g * bn : bn;
      if (plant == 3 && (g + 1) * bn >= c && n > 1) --n;
      groups[gst[e] + g] = make_int4(e, cur[e] + g * bn, n, 0);
    }
  __syncthreads();  // the groups read cur before the places move it
  for (std::int64_t q = tid; q < p.ncols; q += ids_threads) {
    const int ex = expert(q);
    if (ex >= 0 && ex < n_as) perm[atomicAdd(&cur[ex], 1)] = static_cast<int>(q);
  }
}

// The groups mul_mat_id's columns can need: each expert's last group may be partial.
std::int64_t ids_groups_max(const mm_args& p, int bn) {
  return (p.ncols + bn - 1) / bn + (p.n_as < p.ncols ? p.n_as : p.ncols);
}
struct ids_layout {
  std::size_t perm, groups, count, bytes;
};
ids_layout ids_layout_of(const mm_args& p, int bn) {
  ids_layout l;
  l.perm = 0;
  l.groups = (static_cast<std::size_t>(p.ncols) * 4 + 15) / 16 * 16;
  l.count = l.groups + static_cast<std::size_t>(ids_groups_max(p, bn)) * 16;
  l.bytes = l.count + 16;
  return l;
}

// mmq_pre's scratch: the codes (m x kp bytes), then the fields (m x kp / 32 x meta_words words)
template <class W>
std::size_t pre_bytes(const mm_args& p) {
  const std::size_t chunks = static_cast<std::size_t>(p.kp / 32), m = static_cast<std::size_t>(p.m);
  return m * chunks * (32 + 4 * static_cast<std::size_t>(mmq_meta_words<W>));
}
// Formats whose prompt kernel measured faster on weights unpacked once per node (mmq_pre,
// mmq_unpack) than unpacking them in each block: the 4-warp kernels, whose blocks read a
// chunk's fields straight from global memory (H200, N 512, M 4096 / 14336, TFLOP/s, in
// place -> unpacked first, one run each, after the cheaper activation copies): q8_0 111 /
// 122 -> 118 / 151, q4_0 118 / 130 -> 120 / 154, q5_0 112 / 128 -> 120 / 152, iq4_nl 108 /
// 130 -> 121 / 155, mxfp4 109 / 133 -> 122 / 155, q6_K 104 / 105 -> 115 / 135, q3_K 103 /
// 107 -> 117 / 138, nvfp4 56 / 68 -> 67 / 90, q4_1 82 / 91 -> 83 / 97 (q5_1 goes with q4_1,
// not measured). Not q2_K (69 / 72 -> 71 / 63), nor the 8-warp kernels, which stage their
// weight bytes already and lost (q4_K 84 / 90 -> 76 / 79, iq4_xs 155 / 172 -> 149 / 144,
// iq2_xxs 159 / 176 -> 148 / 146); the formats not measured read in place.
template <class W>
constexpr bool mmq_pre_fmt = W::id == type::q8_0 || W::id == type::q4_0 || W::id == type::q4_1 ||
                             W::id == type::q5_0 || W::id == type::q5_1 || W::id == type::iq4_nl ||
                             W::id == type::mxfp4 || W::id == type::q6_K || W::id == type::q3_K ||
                             W::id == type::nvfp4;
// GK_CUDA_MMQ_PRE (read once; the tests' mmq_pre_mode overrides it), for the formats above:
// 0 never unpacks the weights first, 1 always, unset: where a slab's columns take at least
// pre_min_groups blocks (each block unpacks its rows' weights for its own columns, so with
// G groups every weight is unpacked G times; first, once). Not measured below N 512.
int g_pre = -2;
constexpr std::int64_t pre_min_groups = 4;
int pre_mode() {
  if (g_pre == -2) {
    const char* e = std::getenv("GK_CUDA_MMQ_PRE");
    g_pre = e && *e ? std::atoi(e) : -1;
  }
  return g_pre;
}
// mul_mat of one slab (p.flat): mul_mat_id and batched slabs read the weights in place
template <class W>
bool use_pre(const mm_args& p) {
  if (!mmq_pre_fmt<W> || p.ids || !p.flat) return false;
  const int mode = pre_mode();
  if (mode >= 0) return mode == 1;
  constexpr int bn = mmq_bn<W, mmq_wn_default<W>>;
  return (p.n + bn - 1) / bn >= pre_min_groups;
}

template <class W, int WN, bool PRE, bool IDS = false>
void run_wn(const mm_args& p, const q8::act_cols& a, void* scratch, exec& x) {
  constexpr std::size_t smem = mmq_smem<W, WN, mmq_staged<W> && !PRE, IDS, mmq_pipe<W, PRE>>::bytes;
  static_assert(smem <= 99 * 1024, "matmul_mmq: more shared memory than sm_86/89/120 give a block");
  static_assert(!IDS || (mmq_ids_narrow<W> && WN == 4 && !PRE), "IDS: the narrow mul_mat_id kernel, measured as such");
  constexpr auto kernel = [] {
    if constexpr (IDS) return matmul_mmq_wide_occ<W, PRE, true>;  // as measured: capped, 2 blocks an SM
    else if constexpr (WN == 4 && mmq_wide_occ<W>) return matmul_mmq_wide_occ<W, PRE>;
    else if constexpr (WN == 4) return matmul_mmq_wide<W, PRE>;
    else if constexpr (mmq_occ<W>) return matmul_mmq_occ<W, PRE>;
    else return matmul_mmq<W, PRE>;
  }();
  mv::allow_smem<kernel>(smem, x.props.device);
  constexpr int bn = mmq_bn<W, WN, IDS>;
  mmq_ids ids{};
  mmq_pre pre{};
  std::int64_t n_groups = p.ncols / p.n * ((p.n + bn - 1) / bn);
  if constexpr (PRE) {
    const std::int64_t chunks = p.kp / 32, jobs = p.m * chunks;
    auto* codes = static_cast<unsigned char*>(scratch);
    auto* meta = reinterpret_cast<unsigned*>(codes + 32 * jobs);
    mmq_unpack<W><<<static_cast<unsigned>((jobs + unpack_threads - 1) / unpack_threads), unpack_threads, 0, x.stream>>>(
        p.w, p.w_nb1, p.m, chunks, codes, meta, g_plant);
    GK_CUDA_LAUNCHED();
    pre = {codes, meta};
  }
  if (p.ids) {
    if (p.n_as > mmq_max_experts) throw error("gk: CUDA: mmq: more experts than mmq_max_experts");
    const ids_layout l = ids_layout_of(p, bn);
    char* s = static_cast<char*>(scratch);
    ids.perm = reinterpret_cast<const int*>(s + l.perm);
    ids.groups = reinterpret_cast<const int4*>(s + l.groups);
    ids.n_groups = reinterpret_cast<const int*>(s + l.count);
    const std::size_t ish = static_cast<std::size_t>(p.n_as) * 3 * sizeof(int);  // <= 48 KiB
    mmq_group_ids<<<1, ids_threads, ish, x.stream>>>(p, bn, reinterpret_cast<int*>(s + l.perm),
                                                     reinterpret_cast<int4*>(s + l.groups),
                                                     reinterpret_cast<int*>(s + l.count), g_plant);
    GK_CUDA_LAUNCHED();
    n_groups = ids_groups_max(p, bn);  // an upper bound: blocks past the count do nothing
  }
  const dim3 grid(blocks_for(p.m, mmq_bm), mv::grid_y(n_groups));
  kernel<<<grid, mmq_threads<WN>, smem, x.stream>>>(p, a, ids, pre, g_plant);
  GK_CUDA_LAUNCHED();
}

// Each format compiles its one shape (mmq_wn_default): a run-time switch between both
// (GK_CUDA_MMQ_WN while they were measured) doubled this file's compile time. The formats
// of mmq_pre_fmt compile it twice, in place and on weights unpacked first.
template <class W>
void run(const mm_args& p, const q8::act_cols& a, void* scratch, exec& x) {
  if constexpr (mmq_pre_fmt<W>) {
    if (use_pre<W>(p)) return run_wn<W, mmq_wn_default<W>, true>(p, a, scratch, x);
  }
  if constexpr (mmq_ids_narrow<W>) {
    if (p.ids) return run_wn<W, mmq_wn_default<W>, false, true>(p, a, scratch, x);
  }
  run_wn<W, mmq_wn_default<W>, false>(p, a, scratch, x);
}

}  // namespace

void mmq_plant(int control) { g_plant = control; }
void mmq_pre_mode(int mode) { g_pre = mode; }

std::size_t mmq_scratch(type w, const mv::mm_args& p) {
  std::size_t n = 0;
  formats::visit(w, [&]<class W>(std::type_identity<W>) {
    if constexpr (q8::has_q8dot<W>) {
      if (p.ids) n = ids_layout_of(p, mmq_bn<W, mmq_wn_default<W>, mmq_ids_narrow<W>>).bytes;
      else if (use_pre<W>(p)) n = pre_bytes<W>(p);
    }
  });
  return n;
}

void mmq_run(type w, const mv::mm_args& p, const q8::act_cols& a, void* scratch, exec& x) {
  const bool done = formats::visit(w, [&]<class W>(std::type_identity<W>) {
    if constexpr (q8::has_q8dot<W>) run<W>(p, a, scratch, x);
    else throw error("gk: CUDA: the int8 prompt path has no block dot for " + std::string(gk::name(w)));
  });
  if (!done) throw error("gk: CUDA: mmq: unknown weight type");
}

}  // namespace gk::cuda
