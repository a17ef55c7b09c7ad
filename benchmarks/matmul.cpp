// SPDX-License-Identifier: MIT
// mul_mat, gk against the reference, every weight format: a 4096x4096 weight times f32
// activations, decode (N = 1) and prompt (N = 64), on 1 and 2 threads. The reference runs
// both its plain CPU path and its repacked weight layouts (the CPU backend's extra buffer
// types, which llama.cpp uses by default) where one accepts the format; its figure is the
// better of the two. A second table decodes from weights that do not fit in the last-level
// cache (>= 1 GiB of 4096x4096 matrices, one mul_mat per matrix), as GB/s of weight read
// against this machine's read bandwidth measured in the same run (GK_BENCH_MEM_N=2 times
// it with 2 activation columns instead of 1, and so on).
// gk runs both ordinary memory and, for the formats it stores tiled, CPU_TILED memory
// (cpu/tiled.hpp, its own repacked layout); gk/ref compares the better of each side.
//
// Timing: best of a time budget (GK_BENCH_BUDGET s, default 0.3) per side per round, three
// rounds alternating gk and the reference, best over rounds. Weights are 64 encoded rows
// tiled to 4096 (speed does not depend on the values; encoding 4096 rows of the slow
// formats would take minutes). GK_BENCH_FORMATS=q4_0,q4_K restricts the formats.
// A third table: mul_mat_id prompt, 8 experts of 4096x4096, 2 of them per token, 64 tokens
// (128 columns), against the reference's plain CPU path; GK_BENCH_MOE=only runs only it,
// GK_BENCH_MOE_TOKENS=2,4,8,64 sets the token counts; GK_BENCH_NS=1,2,64 the first table's
// column counts (default 1 and 64).
// Reports, never fails.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "best_of.hpp"
#include "weights.hpp"
#include "cpu_name.hpp"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "gk/gk.hpp"

using namespace gk;

namespace {

double budget = 0.3;
constexpr std::int64_t K = 4096, M = 4096;

std::vector<unsigned char> weight_bytes(type t, std::int64_t rows) { return gk_bench::weight_bytes(t, K, rows); }

// A table cell of a figure that may be missing (x <= 0): "%.2f", or "-".
std::string cell(double x) {
  char b[32];
  if (x > 0) std::snprintf(b, sizeof b, "%.2f", x);
  else std::snprintf(b, sizeof b, "-");
  return b;
}

std::vector<float> activations(std::int64_t n) {
  std::vector<float> v(static_cast<std::size_t>(K * n));
  std::mt19937 rng(2);
  std::normal_distribution<float> g;
  for (auto& x : v) x = g(rng);
  return v;
}

// The reference's CPU backend and its extra (repacking) buffer types.
struct ref_backend {
  ggml_backend_t be = ggml_backend_cpu_init();
  ggml_backend_dev_t dev = ggml_backend_get_device(be);
  std::vector<ggml_backend_buffer_type_t> extra;
  ref_backend() {
    auto reg = ggml_backend_dev_backend_reg(dev);
    auto fn = reinterpret_cast<ggml_backend_dev_get_extra_bufts_t>(
        ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts"));
    if (fn)
      for (auto* b = fn(dev); b && *b; ++b) extra.push_back(*b);
  }
  ~ref_backend() { ggml_backend_free(be); }
};

// n_mats weights (copies of the same bytes) and one activation; y_i = w_i^T x for each.
// tiled: the weights in CPU_TILED memory (cpu/tiled.hpp), gk's own repacked layout.
struct gk_side {
  context ctx;
  context wctx{context_params{std::size_t{1} << 20, nullptr, true}};
  std::unique_ptr<backend_buffer> wbuf;
  graph g;
  gk_side(type t, const std::vector<unsigned char>& wb, const std::vector<float>& x, std::int64_t n, int n_mats,
          bool tiled = false)
      : ctx({static_cast<std::size_t>(n_mats) * ((tiled ? 0 : wb.size()) + static_cast<std::size_t>(M * n) * 4 + 8192) +
             x.size() * 4 + (std::size_t{1} << 20)}) {
    tensor* xt = ctx.new_tensor_2d(type::f32, K, n);
    std::memcpy(xt->data, x.data(), x.size() * 4);
    std::vector<tensor*> ws;
    for (int i = 0; i < n_mats; ++i) ws.push_back((tiled ? wctx : ctx).new_tensor_2d(t, K, M));
    if (tiled) wbuf = place_in_one_buffer(ws, cpu_tiled_buffer_type());
    for (tensor* w : ws) {
      if (tiled) wbuf->set_tensor(w, wb.data(), 0, wb.size());
      else std::memcpy(w->data, wb.data(), wb.size());
      g.build_forward_expand(mul_mat(ctx, w, xt));
    }
  }
};

struct ref_side {
  ggml_context* ctx = nullptr;     // activations, results (and the weights on the plain path)
  ggml_context* wctx = nullptr;    // weights on the repacked path
  ggml_backend_buffer_t buf = nullptr;
  ggml_cgraph* gf = nullptr;
  bool ok = true;
  ref_side(ref_backend* rb, ggml_backend_buffer_type_t buft, type t, const std::vector<unsigned char>& wb,
           const std::vector<float>& x, std::int64_t n, int n_mats) {
    const std::size_t meta = static_cast<std::size_t>(n_mats + 8) * ggml_tensor_overhead() * 2 + ggml_graph_overhead();
    const std::size_t data = buft ? 0 : static_cast<std::size_t>(n_mats) * (wb.size() + 64);
    ctx = ggml_init({meta + data + (x.size() * 4 + M * n * 4 * n_mats) + (std::size_t{64} << 20), nullptr, false});  // + its work buffer
    std::vector<ggml_tensor*> ws;
    if (buft) {
      wctx = ggml_init({meta, nullptr, true});
      for (int i = 0; i < n_mats; ++i) ws.push_back(ggml_new_tensor_2d(wctx, static_cast<ggml_type>(t), K, M));
      buf = ggml_backend_alloc_ctx_tensors_from_buft(wctx, buft);
      if (!buf) {
        ok = false;
        return;
      }
    } else {
      for (int i = 0; i < n_mats; ++i) {
        ws.push_back(ggml_new_tensor_2d(ctx, static_cast<ggml_type>(t), K, M));
        std::memcpy(ws.back()->data, wb.data(), wb.size());
      }
    }
    ggml_tensor* xt = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, n);
    std::memcpy(xt->data, x.data(), x.size() * 4);
    gf = ggml_new_graph_custom(ctx, n_mats + 8, false);
    for (auto* w : ws) {
      ggml_tensor* y = ggml_mul_mat(ctx, w, xt);
      // the repacking buffer only takes the formats it has a layout for: ask before
      // handing it bytes (its set_tensor assumes a supported type)
      if (buft && !ggml_backend_dev_supports_op(rb->dev, y)) {
        ok = false;
        return;
      }
      ggml_build_forward_expand(gf, y);
    }
    if (buft)
      for (auto* w : ws) ggml_backend_tensor_set(w, wb.data(), 0, wb.size());
  }
  ~ref_side() {
    if (buf) ggml_backend_buffer_free(buf);
    if (wctx) ggml_free(wctx);
    ggml_free(ctx);
  }
  void compute(ref_backend* rb, bool backend, int nth) {
    if (backend) {
      ggml_backend_cpu_set_n_threads(rb->be, nth);
      ggml_backend_graph_compute(rb->be, gf);
    } else {
      ggml_graph_compute_with_ctx(ctx, gf, nth);
    }
  }
};

// Cells where a repacked path of the reference dies (seen: its AMX buffer type, prompt
// shapes, SIGILL on a tile instruction, on a KVM guest whose own AMX test program runs):
// each (buffer type, format, N) is first run once in a child process on 2 threads, before
// this process starts any thread, and a path whose child died is left out of the table
// (named on stdout) instead of taking the benchmark down.
struct broken_cell {
  ggml_backend_buffer_type_t buft;
  type t;
  std::int64_t n;
};
std::vector<broken_cell> g_broken;
bool is_broken(ggml_backend_buffer_type_t b, type t, std::int64_t n) {
  for (const auto& c : g_broken)
    if (c.buft == b && c.t == t && c.n == n) return true;
  return false;
}

struct result {
  double gk = 0, tiled = 0, plain = 0, repack = 0;  // seconds (0: not run)
  double gk_best() const { return tiled > 0 ? std::min(gk, tiled) : gk; }
  std::string repack_name;
};

result measure(ref_backend& rb, type t, std::int64_t n, int nth, int n_mats) {
  const auto wb = weight_bytes(t, M);
  const auto x = activations(n);
  result r;
  gk_side g(t, wb, x, n, n_mats);
  std::unique_ptr<gk_side> gt;
  if (cpu::tiled::tiles_format(t)) gt = std::make_unique<gk_side>(t, wb, x, n, n_mats, true);
  cpu::runner run(nth);
  ref_side plain(&rb, nullptr, t, wb, x, n, n_mats);
  std::vector<std::unique_ptr<ref_side>> repacked;
  std::vector<std::string> names;
  for (auto* b : rb.extra) {
    if (is_broken(b, t, n)) continue;
    auto s = std::make_unique<ref_side>(&rb, b, t, wb, x, n, n_mats);
    if (s->ok) {
      repacked.push_back(std::move(s));
      names.push_back(ggml_backend_buft_name(b));
    }
  }
  double bg = 1e30, bt = 1e30, bp = 1e30;
  std::vector<double> brp(repacked.size(), 1e30);
  for (int round = 0; round < 3; ++round) {
    bg = std::min(bg, gk_bench::best_seconds([&] { run.compute(g.g); }, budget));
    if (gt) bt = std::min(bt, gk_bench::best_seconds([&] { run.compute(gt->g); }, budget));
    bp = std::min(bp, gk_bench::best_seconds([&] { plain.compute(&rb, false, nth); }, budget));
    for (std::size_t i = 0; i < repacked.size(); ++i)
      brp[i] = std::min(brp[i], gk_bench::best_seconds([&] { repacked[i]->compute(&rb, true, nth); }, budget));
  }
  r.gk = bg;
  if (gt) r.tiled = bt;
  r.plain = bp;
  for (std::size_t i = 0; i < repacked.size(); ++i)
    if (r.repack == 0 || brp[i] < r.repack) {
      r.repack = brp[i];
      r.repack_name = names[i];
    }
  return r;
}

// Read bandwidth: nth threads summing disjoint halves of a 1 GiB buffer, best of 8 (a single
// pass on this VM can read 20-30% low).
double read_bandwidth(int nth) {
  const std::size_t n = (std::size_t{1} << 30) / sizeof(float);
  std::vector<float> buf(n, 1.0f);
  double best = 1e30;
  volatile float sink = 0;
  for (int rep = 0; rep < 8; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> th;
    std::vector<float> part(static_cast<std::size_t>(nth));
    for (int t = 0; t < nth; ++t)
      th.emplace_back([&, t] {
        float acc[16] = {};
        const std::size_t b = n * static_cast<std::size_t>(t) / static_cast<std::size_t>(nth);
        const std::size_t e = n * static_cast<std::size_t>(t + 1) / static_cast<std::size_t>(nth);
        for (std::size_t i = b; i + 16 <= e; i += 16)
          for (int j = 0; j < 16; ++j) acc[j] += buf[i + static_cast<std::size_t>(j)];
        float s = 0;
        for (float v : acc) s += v;
        part[static_cast<std::size_t>(t)] = s;
      });
    for (auto& t : th) t.join();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    sink = sink + part[0];
  }
  return static_cast<double>(n * sizeof(float)) / best / 1e9;
}

// A comma-separated list of positive integers from environment variable name, or fallback.
std::vector<std::int64_t> positive_list(const char* name, std::vector<std::int64_t> fallback) {
  std::vector<std::int64_t> v;
  if (const char* e = std::getenv(name)) {
    for (const char* p = e; *p;) {
      char* end = nullptr;
      const long long x = std::strtoll(p, &end, 10);
      if (end == p) break;
      if (x > 0) v.push_back(x);
      p = *end == ',' ? end + 1 : end;
    }
  }
  return v.empty() ? fallback : v;
}

// mul_mat_id prompt: seconds for gk and the reference's plain path on nth threads
std::pair<double, double> measure_moe(type t, int nth, std::int64_t n_tok) {
  constexpr std::int64_t n_as = 8, n_used = 2;
  const auto wb = weight_bytes(t, M);
  const auto x = activations(n_tok);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n_used * n_tok));
  std::mt19937 rng(5);
  for (std::int64_t i = 0; i < n_tok; ++i) {
    const auto a = static_cast<std::int32_t>(rng() % n_as), c = static_cast<std::int32_t>(rng() % (n_as - 1));
    ids[static_cast<std::size_t>(2 * i)] = a;
    ids[static_cast<std::size_t>(2 * i + 1)] = c >= a ? c + 1 : c;
  }
  context ctx({static_cast<std::size_t>(n_as) * wb.size() + x.size() * 4 + (std::size_t{8} << 20)});
  tensor* as = ctx.new_tensor_3d(t, K, M, n_as);
  tensor* xt = ctx.new_tensor_3d(type::f32, K, 1, n_tok);
  tensor* it = ctx.new_tensor_2d(type::i32, n_used, n_tok);
  for (std::int64_t e = 0; e < n_as; ++e) std::memcpy(static_cast<char*>(as->data) + e * wb.size(), wb.data(), wb.size());
  std::memcpy(xt->data, x.data(), x.size() * 4);
  std::memcpy(it->data, ids.data(), ids.size() * 4);
  graph g;
  g.build_forward_expand(mul_mat_id(ctx, as, xt, it));
  cpu::runner run(nth);

  const std::size_t meta = 16 * ggml_tensor_overhead() + ggml_graph_overhead();
  ggml_context* rc = ggml_init({meta + static_cast<std::size_t>(n_as) * wb.size() + x.size() * 4 + ids.size() * 4 +
                                    static_cast<std::size_t>(M * n_used * n_tok) * 4 + (std::size_t{64} << 20),
                                nullptr, false});
  ggml_tensor* ras = ggml_new_tensor_3d(rc, static_cast<ggml_type>(t), K, M, n_as);
  ggml_tensor* rx = ggml_new_tensor_3d(rc, GGML_TYPE_F32, K, 1, n_tok);
  ggml_tensor* rids = ggml_new_tensor_2d(rc, GGML_TYPE_I32, n_used, n_tok);
  for (std::int64_t e = 0; e < n_as; ++e) std::memcpy(static_cast<char*>(ras->data) + e * wb.size(), wb.data(), wb.size());
  std::memcpy(rx->data, x.data(), x.size() * 4);
  std::memcpy(rids->data, ids.data(), ids.size() * 4);
  ggml_cgraph* gf = ggml_new_graph(rc);
  ggml_build_forward_expand(gf, ggml_mul_mat_id(rc, ras, rx, rids));
  double bg = 1e30, br = 1e30;
  for (int round = 0; round < 3; ++round) {
    bg = std::min(bg, gk_bench::best_seconds([&] { run.compute(g); }, budget));
    br = std::min(br, gk_bench::best_seconds([&] { ggml_graph_compute_with_ctx(rc, gf, nth); }, budget));
  }
  ggml_free(rc);
  return {bg, br};
}

std::vector<type> formats_to_run() {
  std::vector<type> v;
  const char* only = std::getenv("GK_BENCH_FORMATS");
  for (int i = 0; i < type_count; ++i) {
    const auto t = static_cast<type>(i);
    if (!is_valid(t) || t == type::q8_1 || t == type::q8_K || !formats::visit(t, [](auto) {})) continue;
    if (only && std::string(",") + only + "," == std::string(",") + only + ",") {
      const std::string list = std::string(",") + only + ",";
      if (list.find("," + std::string(gk::name(t)) + ",") == std::string::npos) continue;
    }
    v.push_back(t);
  }
  return v;
}

void decode_table(ref_backend& rb, const std::vector<type>& fmts);

// The probe of g_broken (see there); must run before any thread of this process starts.
void probe_repacked(ref_backend& rb, const std::vector<type>& fmts, const std::vector<std::int64_t>& ns) {
  for (auto* b : rb.extra)
    for (type t : fmts)
      for (std::int64_t n : ns) {
        std::fflush(stdout);
        const pid_t pid = fork();
        if (pid == 0) {
          ref_side s(&rb, b, t, weight_bytes(t, M), activations(n), n, 1);
          if (s.ok) s.compute(&rb, true, 2);
          _exit(0);
        }
        int st = 0;
        if (pid < 0 || waitpid(pid, &st, 0) != pid) continue;
        if (WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) != 0)) {
          g_broken.push_back({b, t, n});
          std::printf("# the reference's %s path died on %s at N %lld (%s): left out\n", ggml_backend_buft_name(b),
                      std::string(gk::name(t)).c_str(), static_cast<long long>(n),
                      WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "exit status not 0");
        }
      }
}

}  // namespace

int main() {
  if (const char* e = std::getenv("GK_BENCH_BUDGET")) budget = std::atof(e);
  ggml_cpu_init();
  ref_backend rb;
  std::printf("# benchmarks/matmul: %s; gk target %s; best of %.2f s x 3 rounds per side\n",
              gk_bench::cpu_name().c_str(), std::string(simd::native::name).c_str(), budget);
  std::printf("# reference extra buffer types:");
  for (auto* b : rb.extra) std::printf(" %s", ggml_backend_buft_name(b));
  std::printf("\n");
  const auto fmts = formats_to_run();
  const char* moe = std::getenv("GK_BENCH_MOE");
  const bool moe_only = moe && std::string(moe) == "only";
  const std::vector<std::int64_t> ns = positive_list("GK_BENCH_NS", {1, 64});
  if (!moe_only) {  // N 1 too: the decode table's
    std::vector<std::int64_t> probe_ns = ns;
    if (std::find(ns.begin(), ns.end(), 1) == ns.end()) probe_ns.push_back(1);
    probe_repacked(rb, fmts, probe_ns);
  }
  std::printf("\n## 4096x4096 weight, GFLOP/s (ref = better of plain and repacked; gk/ref: gk's better of\n"
              "## ordinary memory and CPU_TILED, its own repacked layout, against that)\n");
  std::printf("%-8s %4s %3s %9s %9s %9s %9s %7s  %s\n", "format", "N", "thr", "gk", "gk tiled", "ref", "repack",
              "gk/ref", "repacked by");
  for (type t : fmts)
    for (std::int64_t n : ns)
      for (int nth : {1, 2}) {
        if (moe_only) break;
        const result r = measure(rb, t, n, nth, 1);
        const double flop = 2.0 * K * M * static_cast<double>(n) / 1e9;
        const double ref_best = r.repack > 0 ? std::min(r.plain, r.repack) : r.plain;
        std::printf("%-8s %4lld %3d %9.2f %9s %9.2f %9s %7.2f  %s\n", std::string(gk::name(t)).c_str(),
                    static_cast<long long>(n), nth, flop / r.gk,
                    cell(r.tiled > 0 ? flop / r.tiled : 0).c_str(), flop / r.plain,
                    cell(r.repack > 0 ? flop / r.repack : 0).c_str(), ref_best / r.gk_best(),
                    r.repack > 0 ? r.repack_name.c_str() : "");
        std::fflush(stdout);
      }

  if (!moe_only) decode_table(rb, fmts);
  const std::vector<std::int64_t> moe_tokens = positive_list("GK_BENCH_MOE_TOKENS", {64});
  std::printf("\n## mul_mat_id: 8 experts of 4096x4096, 2 per token, GFLOP/s (ref: plain path)\n");
  std::printf("%-8s %6s %3s %9s %9s %7s\n", "format", "tokens", "thr", "gk", "ref", "gk/ref");
  for (type t : fmts)
    for (std::int64_t n_tok : moe_tokens)
      for (int nth : {1, 2}) {
        const auto [g, r] = measure_moe(t, nth, n_tok);
        const double flop = 2.0 * K * M * 2 * static_cast<double>(n_tok) / 1e9;
        std::printf("%-8s %6lld %3d %9.2f %9.2f %7.2f\n", std::string(gk::name(t)).c_str(),
                    static_cast<long long>(n_tok), nth, flop / g, flop / r, r / g);
        std::fflush(stdout);
      }
  return 0;
}

namespace {
void decode_table(ref_backend& rb, const std::vector<type>& fmts) {
  const std::int64_t nb = positive_list("GK_BENCH_MEM_N", {1})[0];
  std::printf("\n## decode from >= 1 GiB of weights (N = %lld), GB/s of weight read\n", static_cast<long long>(nb));
  // measured once: the figures printed are the ones the %bw columns divide by
  const double bw[3] = {0, read_bandwidth(1), read_bandwidth(2)};
  for (int nth : {1, 2}) std::printf("# read bandwidth, %d thread(s): %.2f GB/s\n", nth, bw[nth]);
  std::printf("%-8s %3s %5s %9s %9s %9s %7s %9s %9s\n", "format", "thr", "mats", "gk GB/s", "tiled", "ref GB/s",
              "gk/ref", "gk %bw", "ref %bw");
  for (type t : fmts) {
    const double mat_bytes = static_cast<double>(gk::row_size(t, K)) * M;
    const int n_mats = static_cast<int>(std::ceil((1u << 30) / mat_bytes));
    for (int nth : {1, 2}) {
      const result r = measure(rb, t, nb, nth, n_mats);
      const double bytes = mat_bytes * n_mats / 1e9;
      const double ref_best = r.repack > 0 ? std::min(r.plain, r.repack) : r.plain;
      std::printf("%-8s %3d %5d %9.2f %9s %9.2f %7.2f %8.0f%% %8.0f%%\n", std::string(gk::name(t)).c_str(), nth, n_mats,
                  bytes / r.gk, cell(r.tiled > 0 ? bytes / r.tiled : 0).c_str(),
                  bytes / ref_best, ref_best / r.gk_best(), 100 * bytes / r.gk_best() / bw[nth],
                  100 * bytes / ref_best / bw[nth]);
      std::fflush(stdout);
    }
  }
}

}  // namespace
