// SPDX-License-Identifier: MIT
// mul_mat on the CUDA backend: mat-vec (N = 1) and prompt (N = 512) at 4096x4096 and
// 4096x14336 (K = 4096 inputs, M outputs) for the formats an engine runs on a GPU, gk
// beside the reference's CUDA backend in the same run when built with it
// (-Dreference-cuda=PREFIX; see tools/cuda_device.sh).
//
// Decode reads weights that do not fit in the card's L2: each graph multiplies one
// activation by R different matrices (R * matrix bytes >= 1 GiB), so every weight byte
// comes from device memory; reported as GB/s of weight read and as a fraction of the
// device-to-device copy bandwidth measured at the start of the run (bytes read + written).
// Prompt: TFLOP/s = 2*M*K*N / time. Both sides get the same weight bytes (64 rows encoded
// by gk, tiled) and the same activations.
//
// mul_mat_id prompt (a second table): a Mixtral-shaped expert layer, n_as = 8 experts of
// M x K = 14336 x 4096, 2 used per token, 512 tokens (1024 columns; experts drawn at random,
// each pair distinct), one activation column per token; TFLOP/s = 2 * M * K * 1024 / time.
// GK_BENCH_MOE=0 skips it, GK_BENCH_MOE=only runs only it.
//
// Timing: best of a time budget (GK_BENCH_BUDGET s, default 0.3) per side per round, two
// rounds alternating gk and the reference, best over rounds; a graph's time is divided by
// its R matmuls. GK_BENCH_FORMATS=q4_0,q4_K restricts the formats, GK_BENCH_N=1 and
// GK_BENCH_M=14336 the shapes. Reports, never fails.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../best_of.hpp"
#include "../weights.hpp"
#include "gk/backends/cuda.hpp"
#include "gk/gk.hpp"
#include "gk/sched.hpp"

#ifdef GK_BENCH_REF_CUDA
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cuda.h"
#include "ggml.h"
#endif

using namespace gk;

namespace {

double budget = 0.3;
constexpr std::int64_t K = 4096;

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                            \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

double copy_bandwidth() {
  const std::size_t n = std::size_t{2} << 30;
  void *a = nullptr, *b = nullptr;
  CK(cudaMalloc(&a, n));
  CK(cudaMalloc(&b, n));
  CK(cudaMemset(a, 1, n));
  CK(cudaMemset(b, 2, n));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  float best = 1e30f;
  for (int i = 0; i < 20; ++i) {
    cudaEventRecord(e0);
    CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice));
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    best = std::min(best, ms);
  }
  cudaFree(a);
  cudaFree(b);
  return 2.0 * static_cast<double>(n) / (best * 1e-3) / 1e9;
}

std::vector<unsigned char> weight_bytes(type t, std::int64_t rows) { return gk_bench::weight_bytes(t, K, rows); }

int mats_for(type t, std::int64_t M, std::int64_t N) {
  if (N > 1) return 2;
  const double bytes = static_cast<double>(gk::row_size(t, K)) * static_cast<double>(M);
  return static_cast<int>(std::clamp(std::ceil(double(1u << 30) / bytes), 2.0, 256.0));
}

// What gk's sides share: the CUDA backend beside the CPU's, the weights' device buffer, and
// the graph of the outputs, planned by the scheduler (ok: every node on CUDA).
struct graph_side {
  std::unique_ptr<backend> cuda = gk::cuda::make_backend(0);
  cpu_backend cpu{1};
  std::unique_ptr<backend_buffer> buf;
  graph g;
  std::unique_ptr<sched> s;
  bool ok = true;
  std::string why;
  void plan(const std::vector<tensor*>& outs, const char* not_on_cuda) {
    for (tensor* y : outs) {
      y->flags |= flag_output;
      g.build_forward_expand(y);
    }
    s = std::make_unique<sched>(std::vector<backend*>{cuda.get(), &cpu});
    s->alloc_graph(g);
    for (tensor* n : g.nodes())
      if (s->backend_of(n) != cuda.get()) {
        ok = false;
        why = not_on_cuda;
      }
  }
  void run() { s->compute(g); }
};

// gk: R matmuls of one activation in one graph on the CUDA backend.
struct gk_side {
  context ctx{context_params{std::size_t{4} << 20, nullptr, true}};
  graph_side side;

  gk_side(type t, std::int64_t M, std::int64_t N, int R, const std::vector<unsigned char>& wb,
          const std::vector<float>& x) {
    std::vector<tensor*> ws;
    for (int r = 0; r < R; ++r) ws.push_back(ctx.new_tensor_2d(t, K, M));
    tensor* a = ctx.new_tensor_2d(type::f32, K, N);
    buffer_type& dm = gk::cuda::device_buffer_type(0);
    std::size_t total = 0;
    auto pad = [&](std::size_t n) { return (n + 255) / 256 * 256; };
    for (auto* w : ws) total += pad(w->nbytes());
    total += pad(a->nbytes());
    auto& buf = side.buf;
    buf = dm.alloc_buffer(total);
    std::size_t off = 0;
    for (auto* w : ws) {
      buf->init_tensor(w, off);
      off += pad(w->nbytes());
      buf->set_tensor(w, wb.data(), 0, wb.size());
    }
    buf->init_tensor(a, off);
    buf->set_tensor(a, x.data(), 0, x.size() * 4);
    std::vector<tensor*> ys;
    for (auto* w : ws) ys.push_back(mul_mat(ctx, w, a));
    side.plan(ys, "mul_mat not on CUDA");
  }
  bool ok() const { return side.ok; }
  const std::string& why() const { return side.why; }
  void run() { side.run(); }
};

// the expert layer: as [K, M, n_as], b [K, 1, T], ids [n_used, T]
constexpr std::int64_t moe_experts = 8, moe_used = 2, moe_tokens = 512, moe_m = 14336;
std::vector<std::int32_t> moe_ids() {
  std::vector<std::int32_t> id(static_cast<std::size_t>(moe_used * moe_tokens));
  std::mt19937 rng(11);
  for (std::int64_t t = 0; t < moe_tokens; ++t) {
    const auto a = static_cast<std::int32_t>(rng() % moe_experts);
    auto b = static_cast<std::int32_t>(rng() % (moe_experts - 1));
    id[2 * t] = a;
    id[2 * t + 1] = b >= a ? b + 1 : b;
  }
  return id;
}

struct gk_moe_side {
  context ctx{context_params{std::size_t{1} << 20, nullptr, true}};
  graph_side side;
  gk_moe_side(type t, const std::vector<unsigned char>& wb, const std::vector<float>& x) {
    tensor* as = ctx.new_tensor_3d(t, K, moe_m, moe_experts);
    tensor* b = ctx.new_tensor_3d(type::f32, K, 1, moe_tokens);
    tensor* ids = ctx.new_tensor_2d(type::i32, moe_used, moe_tokens);
    auto pad = [&](std::size_t n) { return (n + 255) / 256 * 256; };
    auto& buf = side.buf;
    buf = gk::cuda::device_buffer_type(0).alloc_buffer(pad(as->nbytes()) + pad(b->nbytes()) + pad(ids->nbytes()));
    buf->init_tensor(as, 0);
    buf->init_tensor(b, pad(as->nbytes()));
    buf->init_tensor(ids, pad(as->nbytes()) + pad(b->nbytes()));
    for (std::int64_t e = 0; e < moe_experts; ++e) buf->set_tensor(as, wb.data(), e * wb.size(), wb.size());
    buf->set_tensor(b, x.data(), 0, x.size() * 4);
    const std::vector<std::int32_t> id = moe_ids();
    buf->set_tensor(ids, id.data(), 0, id.size() * 4);
    side.plan({mul_mat_id(ctx, as, b, ids)}, "mul_mat_id not on CUDA");
  }
  bool ok() const { return side.ok; }
  const std::string& why() const { return side.why; }
  void run() { side.run(); }
};

#ifdef GK_BENCH_REF_CUDA
// what both reference sides hold: its CUDA backend, one graph
struct ref_graph {
  ggml_backend_t be = nullptr;
  ggml_context* ctx = nullptr;
  ggml_backend_buffer_t buf = nullptr;
  ggml_cgraph* gf = nullptr;
  bool ok = true;
  ref_graph() = default;
  ref_graph(const ref_graph&) = delete;
  ~ref_graph() {
    if (buf) ggml_backend_buffer_free(buf);
    if (ctx) ggml_free(ctx);
    if (be) ggml_backend_free(be);
  }
  void run() {
    ggml_backend_graph_compute(be, gf);
    ggml_backend_synchronize(be);
  }
};

struct ref_moe_side : ref_graph {
  ref_moe_side(type t, const std::vector<unsigned char>& wb, const std::vector<float>& x) {
    be = ggml_backend_cuda_init(0);
    ctx = ggml_init({ggml_tensor_overhead() * 8 + ggml_graph_overhead(), nullptr, true});
    ggml_tensor* as = ggml_new_tensor_3d(ctx, static_cast<ggml_type>(t), K, moe_m, moe_experts);
    ggml_tensor* b = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, K, 1, moe_tokens);
    ggml_tensor* ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, moe_used, moe_tokens);
    gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, ggml_mul_mat_id(ctx, as, b, ids));
    buf = ggml_backend_alloc_ctx_tensors(ctx, be);
    if (!buf) {
      ok = false;
      return;
    }
    for (std::int64_t e = 0; e < moe_experts; ++e) ggml_backend_tensor_set(as, wb.data(), e * wb.size(), wb.size());
    ggml_backend_tensor_set(b, x.data(), 0, x.size() * 4);
    const std::vector<std::int32_t> id = moe_ids();
    ggml_backend_tensor_set(ids, id.data(), 0, id.size() * 4);
    for (int i = 0; i < ggml_graph_n_nodes(gf); ++i)
      if (!ggml_backend_supports_op(be, ggml_graph_node(gf, i))) ok = false;
  }
};

struct ref_side : ref_graph {
  ref_side(type t, std::int64_t M, std::int64_t N, int R, const std::vector<unsigned char>& wb,
           const std::vector<float>& x) {
    be = ggml_backend_cuda_init(0);
    const std::size_t meta = ggml_tensor_overhead() * (2 * R + 8) + ggml_graph_overhead_custom(2 * R + 8, false);
    ctx = ggml_init({meta, nullptr, true});
    std::vector<ggml_tensor*> ws;
    for (int r = 0; r < R; ++r) ws.push_back(ggml_new_tensor_2d(ctx, static_cast<ggml_type>(t), K, M));
    ggml_tensor* a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, N);
    gf = ggml_new_graph_custom(ctx, 2 * R + 8, false);
    for (auto* w : ws) ggml_build_forward_expand(gf, ggml_mul_mat(ctx, w, a));
    buf = ggml_backend_alloc_ctx_tensors(ctx, be);
    if (!buf) {
      ok = false;
      return;
    }
    for (auto* w : ws) ggml_backend_tensor_set(w, wb.data(), 0, wb.size());
    ggml_backend_tensor_set(a, x.data(), 0, x.size() * 4);
    for (int i = 0; i < ggml_graph_n_nodes(gf); ++i)
      if (!ggml_backend_supports_op(be, ggml_graph_node(gf, i))) ok = false;
  }
};

#else
struct ref_side {  // not built: the sides below are never made
  template <class... A>
  explicit ref_side(A&&...) {}
};
using ref_moe_side = ref_side;
#endif

struct timed {
  double t_gk = 1e30, t_ref = 1e30;
  bool gk_ok = true, ref_ok = false;
  std::string why;
};
// Both sides built from the same arguments; two rounds alternating gk and the reference,
// best of the budget per side per round, best over rounds.
template <class GkSide, class RefSide, class... Args>
timed time_both(const Args&... args) {
  timed r;
  try {
    GkSide gs(args...);
    r.gk_ok = gs.ok();
    r.why = gs.why();
#ifdef GK_BENCH_REF_CUDA
    RefSide rs(args...);
    r.ref_ok = rs.ok;
#endif
    for (int round = 0; round < 2; ++round) {
      if (r.gk_ok) {
        gs.run();
        r.t_gk = std::min(r.t_gk, gk_bench::best_seconds([&] { gs.run(); }, budget));
      }
#ifdef GK_BENCH_REF_CUDA
      if (r.ref_ok) {
        rs.run();
        r.t_ref = std::min(r.t_ref, gk_bench::best_seconds([&] { rs.run(); }, budget));
      }
#endif
    }
  } catch (const std::exception& e) {
    r.gk_ok = false;
    r.why = e.what();
  }
  return r;
}

}  // namespace

int main() {
  if (const char* b = std::getenv("GK_BENCH_BUDGET")) budget = std::atof(b);
  std::int64_t only_n = 0;  // GK_BENCH_N=1 or 512: only decode or only prompt
  if (const char* n = std::getenv("GK_BENCH_N")) only_n = std::atoll(n);
  std::int64_t only_m = 0;  // GK_BENCH_M=4096 or 14336: one weight shape
  if (const char* m = std::getenv("GK_BENCH_M")) only_m = std::atoll(m);
  std::vector<type> formats = {type::f16,  type::bf16,  type::q8_0,   type::q4_0,    type::q4_K,
                               type::q5_K, type::q6_K,  type::q2_K,   type::q3_K,    type::iq4_xs,
                               type::iq2_xxs, type::iq3_s, type::mxfp4, type::nvfp4};
  if (const char* f = std::getenv("GK_BENCH_FORMATS")) {
    formats.clear();
    std::string s = f;
    for (std::size_t p = 0; p <= s.size();) {
      std::size_t q = s.find(',', p);
      if (q == std::string::npos) q = s.size();
      const std::string n = s.substr(p, q - p);
      for (int i = 0; i < 64; ++i)
        if (is_valid(static_cast<type>(i)) && name(static_cast<type>(i)) == n) formats.push_back(static_cast<type>(i));
      p = q + 1;
    }
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  const double bw = copy_bandwidth();
  std::printf("# %s, %d SMs, L2 %d MiB; device-to-device copy %.0f GB/s (read + write); budget %.2f s, 2 rounds\n",
              prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20, bw, budget);
#ifdef GK_BENCH_REF_CUDA
  std::printf("# reference: its CUDA backend, same weights and activations\n");
#else
  std::printf("# reference: not built (-Dreference-cuda)\n");
#endif
  std::printf("| format | M | N | R | gk | gk %%copy | ref | ref %%copy | gk/ref |\n|---|---|---|---|---|---|---|---|---|\n");
  std::fflush(stdout);
  if (std::getenv("GK_BENCH_PROBE")) {
    // where a decode graph's time goes: wall time of a compute against the time between
    // two events on the legacy stream around it (gk's stream is a blocking one, so they
    // bracket its kernels), for graphs of R = 1 .. 10 matmuls of the first format, M 14336
    const type t = formats.front();
    const std::int64_t M = only_m > 0 ? only_m : 14336;
    const std::vector<unsigned char> wb = weight_bytes(t, M);
    const std::vector<float> x(static_cast<std::size_t>(K), 0.5f);
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int R : {1, 2, 4, 10}) {
      gk_side gs(t, M, 1, R, wb, x);
      double wall = 1e30, gpu = 1e30;
      for (int i = 0; i < 30; ++i) {
        CK(cudaDeviceSynchronize());
        const auto t0 = std::chrono::steady_clock::now();
        CK(cudaEventRecord(e0, 0));
        gs.run();
        CK(cudaEventRecord(e1, 0));
        const double w = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        wall = std::min(wall, w);
        gpu = std::min(gpu, ms * 1e-3);
      }
#ifdef GK_BENCH_REF_CUDA
      ref_side rs(t, M, 1, R, wb, x);
      double rwall = 1e30;
      for (int i = 0; i < 30; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        rs.run();
        rwall = std::min(rwall, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
#else
      const double rwall = 0;
#endif
      std::printf("probe %s M %lld R %d: gk wall %.1f us (%.1f a matmul), events %.1f us; ref wall %.1f us (%.1f a matmul)\n",
                  std::string(name(t)).c_str(), static_cast<long long>(M), R, wall * 1e6, wall * 1e6 / R, gpu * 1e6,
                  rwall * 1e6, rwall * 1e6 / R);
    }
    return 0;
  }
  const char* moe_env = std::getenv("GK_BENCH_MOE");
  const bool moe_only = moe_env && std::strcmp(moe_env, "only") == 0;
  for (type t : formats) {
    if (moe_only) break;
    for (std::int64_t M : {std::int64_t{4096}, std::int64_t{14336}}) {
      if (only_m > 0 && M != only_m) continue;
      const std::vector<unsigned char> wb = weight_bytes(t, M);
      for (std::int64_t N : {std::int64_t{1}, std::int64_t{512}}) {
        if (only_n > 0 && N != only_n) continue;
        const int R = mats_for(t, M, N);
        std::vector<float> x(static_cast<std::size_t>(K * N));
        std::mt19937 rng(7);
        std::uniform_real_distribution<float> u(-1, 1);
        for (auto& v : x) v = u(rng);
        const timed tb = time_both<gk_side, ref_side>(t, M, N, R, wb, x);
        const bool gk_ok = tb.gk_ok, ref_ok = tb.ref_ok;
        const std::string& why = tb.why;
        const double t_gk = tb.t_gk / R, t_ref = tb.t_ref / R;
        const double bytes = static_cast<double>(gk::row_size(t, K)) * static_cast<double>(M);
        auto rate = [&](double s) {
          char b[48];
          if (s >= 1e29) return std::string("-");
          if (N == 1) std::snprintf(b, sizeof b, "%.0f GB/s", bytes / s / 1e9);
          else std::snprintf(b, sizeof b, "%.1f TFLOP/s", 2.0 * M * K * N / s / 1e12);
          return std::string(b);
        };
        auto frac = [&](double s) {
          char b[16];
          if (N != 1 || s >= 1e29) return std::string("");
          std::snprintf(b, sizeof b, "%.0f%%", 100.0 * bytes / s / 1e9 / bw);
          return std::string(b);
        };
        char ratio[16] = "-";
        if (gk_ok && ref_ok) std::snprintf(ratio, sizeof ratio, "%.2f", t_ref / t_gk);
        std::printf("| %s | %lld | %lld | %d | %s | %s | %s | %s | %s |%s%s\n", std::string(name(t)).c_str(),
                    static_cast<long long>(M), static_cast<long long>(N), R, gk_ok ? rate(t_gk).c_str() : "n/a",
                    frac(t_gk).c_str(), ref_ok ? rate(t_ref).c_str() : "n/a", frac(t_ref).c_str(), ratio,
                    why.empty() ? "" : " ", why.c_str());
        std::fflush(stdout);
      }
    }
  }

  if ((moe_env && std::strcmp(moe_env, "0") == 0) || only_n == 1) return 0;
  std::printf("\n# mul_mat_id prompt: %lld experts of %lld x %lld, %lld used per token, %lld tokens\n",
              static_cast<long long>(moe_experts), static_cast<long long>(moe_m), static_cast<long long>(K),
              static_cast<long long>(moe_used), static_cast<long long>(moe_tokens));
  std::printf("| format | gk | ref | gk/ref |\n|---|---|---|---|\n");
  std::fflush(stdout);
  for (type t : formats) {
    const std::vector<unsigned char> wb = weight_bytes(t, moe_m);
    std::vector<float> x(static_cast<std::size_t>(K * moe_tokens));
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1, 1);
    for (auto& v : x) v = u(rng);
    const timed tb = time_both<gk_moe_side, ref_moe_side>(t, wb, x);
    const bool gk_ok = tb.gk_ok, ref_ok = tb.ref_ok;
    const std::string& why = tb.why;
    const double t_gk = tb.t_gk, t_ref = tb.t_ref;
    const double flop = 2.0 * moe_m * K * moe_used * moe_tokens;
    auto rate = [&](double s) {
      char b[48];
      std::snprintf(b, sizeof b, "%.1f TFLOP/s", flop / s / 1e12);
      return std::string(b);
    };
    char ratio[16] = "-";
    if (gk_ok && ref_ok) std::snprintf(ratio, sizeof ratio, "%.2f", t_ref / t_gk);
    std::printf("| %s | %s | %s | %s |%s%s\n", std::string(name(t)).c_str(), gk_ok ? rate(t_gk).c_str() : "n/a",
                ref_ok ? rate(t_ref).c_str() : "n/a", ratio, why.empty() ? "" : " ", why.c_str());
    std::fflush(stdout);
  }
  return 0;
}
