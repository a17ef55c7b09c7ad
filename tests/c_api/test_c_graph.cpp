// SPDX-License-Identifier: MIT
// libgk.so's graph ABI, through gk.h only: contexts, tensors, builders (and the errors
// they give instead of exceptions), graphs computed on the CPU at several thread counts,
// devices, backends, buffers, the graph allocator and the scheduler. meson runs it once
// per SIMD target (GK_TARGET); every check must hold on each.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gk/gk.h"

namespace {

std::vector<float> gaussian(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g;
  std::vector<float> x(n);
  for (auto& v : x) v = g(rng);
  return x;
}

bool error_names(const std::string& what) { return std::string(gk_last_error()).find(what) != std::string::npos; }

struct ctx_guard {
  gk_context* c;
  ~ctx_guard() { gk_context_free(c); }
};

// Encodes rows of x (rows x k) into a tensor of type t.
void fill_quantized(gk_tensor* w, const std::vector<float>& x) {
  const gk_type t = gk_tensor_type(w);
  const int64_t k = gk_tensor_ne(w, 0), rows = gk_tensor_nrows(w);
  std::vector<unsigned char> q(gk_row_size(t, k) * static_cast<std::size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    REQUIRE(gk_quantize_row(t, x.data() + r * k, q.data() + static_cast<std::size_t>(r) * gk_row_size(t, k), k,
                            nullptr) == 0);
  REQUIRE(gk_tensor_set_bytes(w, q.data(), 0, q.size()) == 0);
}

std::vector<float> read_f32(const gk_tensor* t) {
  std::vector<float> v(static_cast<std::size_t>(gk_tensor_nelements(t)));
  REQUIRE(gk_tensor_get_bytes(t, v.data(), 0, v.size() * sizeof(float)) == 0);
  return v;
}

// y = softmax(rms_norm(x) * g) over a quantized projection: the graph every section uses.
struct mlp {
  static constexpr int64_t k = 256, m = 64, n = 5;
  gk_tensor *w, *x, *g, *y;
  void build(gk_context* c, gk_type wt) {
    w = gk_new_tensor_2d(c, wt, k, m);
    x = gk_new_tensor_2d(c, GK_TYPE_F32, k, n);
    g = gk_new_tensor_1d(c, GK_TYPE_F32, m);
    REQUIRE((w && x && g));
    gk_tensor_set_name(w, "w");
    gk_tensor_set_name(x, "x");
    gk_set_input(x);
    gk_tensor* h = gk_mul_mat(c, w, x);
    REQUIRE(h);
    gk_tensor* nrm = gk_rms_norm(c, h, 1e-6f);
    gk_tensor* s = gk_mul(c, nrm, g);
    y = gk_soft_max(c, gk_silu(c, s));
    REQUIRE(y);
    gk_set_output(y);
  }
  void fill() {
    fill_quantized(w, gaussian(static_cast<std::size_t>(k * m), 1));
    auto xv = gaussian(static_cast<std::size_t>(k * n), 2);
    REQUIRE(gk_tensor_set_bytes(x, xv.data(), 0, xv.size() * sizeof(float)) == 0);
    auto gv = gaussian(static_cast<std::size_t>(m), 3);
    REQUIRE(gk_tensor_set_bytes(g, gv.data(), 0, gv.size() * sizeof(float)) == 0);
  }
};

}  // namespace

TEST_CASE("the chosen target is reported", "[c_graph]") {
  REQUIRE(gk_init() == 0);
  const char* t = gk_simd_target();
  REQUIRE(t);
  if (const char* forced = std::getenv("GK_TARGET"); forced && *forced) CHECK(std::string(t) == forced);
  REQUIRE(gk_device_count() >= 1);
  CHECK(std::string(gk_device_name(0)) == "CPU");
  CHECK(std::string(gk_device_features(0)).find(std::string("simd ") + t) != std::string::npos);
  CHECK(gk_simd_target_supported(t) == 1);
  CHECK(gk_simd_target_supported("no-such-target") == 0);
}

TEST_CASE("contexts and tensors", "[c_graph]") {
  ctx_guard cg{gk_context_new(1 << 20, false)};
  gk_context* c = cg.c;
  REQUIRE(c);
  CHECK(gk_context_size(c) == (1u << 20));
  const size_t used0 = gk_context_used(c);
  gk_tensor* a = gk_new_tensor_3d(c, GK_TYPE_Q4_K, 512, 3, 2);
  REQUIRE(a);
  CHECK(gk_context_used(c) >= used0 + gk_tensor_overhead() - 64 + gk_tensor_nbytes(a));
  CHECK(gk_tensor_type(a) == GK_TYPE_Q4_K);
  CHECK(gk_tensor_ne(a, 0) == 512);
  CHECK(gk_tensor_ne(a, 2) == 2);
  CHECK(gk_tensor_ne(a, 3) == 1);
  CHECK(gk_tensor_nb(a, 1) == gk_row_size(GK_TYPE_Q4_K, 512));
  CHECK(gk_tensor_n_dims(a) == 3);
  CHECK(gk_tensor_nelements(a) == 512 * 6);
  CHECK(gk_tensor_nrows(a) == 6);
  CHECK(gk_tensor_nbytes(a) == 6 * gk_row_size(GK_TYPE_Q4_K, 512));
  CHECK(gk_tensor_data(a) != nullptr);
  CHECK(gk_tensor_is_contiguous(a));
  CHECK(gk_tensor_op(a) == 0);
  CHECK(std::string(gk_op_name(29)) == "mul_mat");
  CHECK(gk_op_name(1000) == nullptr);
  REQUIRE(gk_tensor_set_name(a, "weights") == 0);
  CHECK(std::string(gk_tensor_name(a)) == "weights");
  CHECK(gk_context_find(c, "weights") == a);
  CHECK(gk_context_n_tensors(c) == 1);
  CHECK(gk_context_tensor(c, 0) == a);
  CHECK(gk_context_tensor(c, 1) == nullptr);
  REQUIRE(gk_set_input(a) == 0);
  REQUIRE(gk_set_output(a) == 0);
  CHECK(gk_tensor_flags(a) == (GK_TENSOR_FLAG_INPUT | GK_TENSOR_FLAG_OUTPUT));

  const int64_t ne[4] = {4, 3, 2, 1};
  gk_tensor* b = gk_new_tensor(c, GK_TYPE_F32, 4, ne);
  REQUIRE(b);
  CHECK(gk_tensor_n_dims(b) == 3);
  gk_tensor* t = gk_transpose(c, b);
  REQUIRE(t);
  CHECK(gk_tensor_ne(t, 0) == 3);
  CHECK(!gk_tensor_is_contiguous(t));
  CHECK(gk_tensor_src(t, 0) == b);
  CHECK(gk_new_tensor_4d(c, GK_TYPE_F16, 2, 2, 2, 2) != nullptr);
  CHECK(gk_dup_tensor(c, b) != nullptr);
  CHECK(gk_view_tensor(c, b) != nullptr);

  // bytes in and out, with the range checked
  std::vector<float> v(24), back(24);
  for (int i = 0; i < 24; ++i) v[static_cast<std::size_t>(i)] = static_cast<float>(i);
  REQUIRE(gk_tensor_set_bytes(b, v.data(), 0, 96) == 0);
  REQUIRE(gk_tensor_get_bytes(b, back.data(), 0, 96) == 0);
  CHECK(back == v);
  CHECK(gk_tensor_set_bytes(b, v.data(), 8, 96) != 0);
  CHECK(error_names("run past"));
}

TEST_CASE("failures return NULL or non-zero with a message, never throw", "[c_graph]") {
  ctx_guard cg{gk_context_new(64 * 1024, false)};
  gk_context* c = cg.c;
  REQUIRE(c);
  // the arena runs out: NULL, the context stays usable
  CHECK(gk_new_tensor_1d(c, GK_TYPE_F32, 1 << 20) == nullptr);
  CHECK(error_names("arena exhausted"));
  gk_tensor* a = gk_new_tensor_2d(c, GK_TYPE_F32, 64, 4);
  gk_tensor* b = gk_new_tensor_2d(c, GK_TYPE_F32, 63, 4);
  REQUIRE((a && b));
  CHECK(gk_mul_mat(c, a, b) == nullptr);
  CHECK(error_names("mul_mat"));
  CHECK(gk_add(c, b, a) == nullptr);
  CHECK(error_names("broadcast"));
  CHECK(gk_add(c, a, nullptr) == nullptr);
  CHECK(error_names("null"));
  CHECK(gk_add(nullptr, a, a) == nullptr);
  CHECK(error_names("context is NULL"));
  CHECK(gk_new_tensor_1d(c, GK_TYPE_Q4_0, 33) == nullptr);
  CHECK(error_names("block size"));
  CHECK(gk_new_tensor_1d(c, static_cast<gk_type>(5), 32) == nullptr);
  CHECK(gk_permute(c, a, 0, 0, 1, 2) == nullptr);
  CHECK(error_names("permutation"));
  CHECK(gk_rope_set_offset(a, 2) == nullptr);
  CHECK(gk_mul_mat_set_prec(a, GK_PREC_F32) != 0);
  CHECK(gk_sched_new(nullptr, 0) == nullptr);
  CHECK(error_names("at least one backend"));
  CHECK(gk_device_name(1000) == nullptr);
  CHECK(error_names("does not exist"));
  CHECK(gk_backend_from_device(-1) == nullptr);

  // a node with no storage cannot be computed
  ctx_guard ng{gk_context_new(64 * 1024, true)};
  gk_tensor* x = gk_new_tensor_1d(ng.c, GK_TYPE_F32, 16);
  gk_tensor* y = gk_relu(ng.c, x);
  gk_graph* g = gk_graph_new();
  REQUIRE(gk_build_forward_expand(g, y) == 0);
  CHECK(gk_graph_compute(g, 2) != 0);
  CHECK(error_names("no data"));
  gk_graph_free(g);
}

TEST_CASE("a graph of many op families computes on the CPU, the same bits at any thread count", "[c_graph]") {
  ctx_guard cg{gk_context_new(16 << 20, false)};
  gk_context* c = cg.c;
  REQUIRE(c);
  gk_tensor* x = gk_new_tensor_3d(c, GK_TYPE_F32, 64, 6, 4);  // [head_dim, tokens, heads]
  gk_tensor* pos = gk_new_tensor_1d(c, GK_TYPE_I32, 6);  // one per token
  gk_tensor* emb = gk_new_tensor_2d(c, GK_TYPE_Q8_0, 64, 10);
  gk_tensor* ids = gk_new_tensor_1d(c, GK_TYPE_I32, 3);
  REQUIRE((x && pos && emb && ids));
  auto xv = gaussian(64 * 6 * 4, 7);
  gk_tensor_set_bytes(x, xv.data(), 0, xv.size() * 4);
  const int32_t p[6] = {0, 1, 2, 7, 8, 100}, id[3] = {9, 0, 4};
  gk_tensor_set_bytes(pos, p, 0, sizeof p);
  gk_tensor_set_bytes(ids, id, 0, sizeof id);
  fill_quantized(emb, gaussian(640, 8));

  gk_tensor* xp = gk_cont(c, gk_permute(c, x, 0, 2, 1, 3));  // [64, 4 heads, 6 tokens]
  REQUIRE(xp);
  gk_tensor* r = gk_rope_ext(c, xp, pos, nullptr, 64, GK_ROPE_TYPE_NEOX, 4096, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
  INFO(gk_last_error());
  REQUIRE(r);
  gk_tensor* rows = gk_get_rows(c, emb, ids);  // f32 [64, 3]
  REQUIRE(rows);
  gk_tensor* sum = gk_sum_rows(c, gk_gelu(c, gk_scale(c, r, 0.5f)));
  gk_tensor* glu = gk_swiglu(c, gk_reshape_2d(c, gk_cont(c, r), 128, 12));
  gk_tensor* nrm = gk_norm(c, rows, 1e-5f);
  REQUIRE((sum && glu && nrm));

  std::vector<std::vector<float>> runs;
  for (int threads : {1, 3, 4}) {
    gk_graph* g = gk_graph_new();
    for (gk_tensor* out : {sum, glu, nrm}) REQUIRE(gk_build_forward_expand(g, out) == 0);
    CHECK(gk_graph_n_nodes(g) >= 10);
    CHECK(gk_graph_node(g, -1) == nrm);
    CHECK(gk_graph_node(g, 1000) == nullptr);
    CHECK(gk_graph_n_leafs(g) == 4);
    REQUIRE(gk_graph_compute(g, threads) == 0);
    std::vector<float> all;
    for (gk_tensor* out : {sum, glu, nrm}) {
      auto v = read_f32(out);
      all.insert(all.end(), v.begin(), v.end());
    }
    runs.push_back(all);
    gk_graph_free(g);
  }
  CHECK(std::memcmp(runs[0].data(), runs[1].data(), runs[0].size() * 4) == 0);
  CHECK(std::memcmp(runs[0].data(), runs[2].data(), runs[0].size() * 4) == 0);

  // get_rows decodes: row 0 of the result is row 9 of the dequantized table
  std::vector<unsigned char> q(gk_row_size(GK_TYPE_Q8_0, 64));
  gk_tensor_get_bytes(emb, q.data(), 9 * q.size(), q.size());
  std::vector<float> want(64);
  gk_dequantize_row(GK_TYPE_Q8_0, q.data(), want.data(), 64);
  auto got = read_f32(rows);
  CHECK(std::memcmp(got.data(), want.data(), 64 * 4) == 0);
}

TEST_CASE("quantized matmul lands on the truth", "[c_graph]") {
  for (gk_type wt : {GK_TYPE_Q4_0, GK_TYPE_Q8_0, GK_TYPE_Q4_K, GK_TYPE_Q6_K, GK_TYPE_IQ4_XS, GK_TYPE_F16}) {
    INFO(gk_type_name(wt));
    ctx_guard cg{gk_context_new(8 << 20, false)};
    mlp net;
    net.build(cg.c, wt);
    net.fill();
    gk_tensor* h = gk_tensor_src(gk_tensor_src(net.y, 0), 0);  // soft_max <- silu <- mul: walk to the matmul
    while (h && gk_tensor_op(h) != 29) h = gk_tensor_src(h, 0);
    REQUIRE(h);
    gk_graph* g = gk_graph_new();
    gk_build_forward_expand(g, net.y);
    REQUIRE(gk_graph_compute(g, 2) == 0);
    gk_graph_free(g);
    // truth: the decoded weight dotted with x in double
    std::vector<unsigned char> q(static_cast<std::size_t>(gk_tensor_nbytes(net.w)));
    gk_tensor_get_bytes(net.w, q.data(), 0, q.size());
    std::vector<float> wd(static_cast<std::size_t>(mlp::k * mlp::m)), xv = read_f32(net.x), hv = read_f32(h);
    for (int64_t r = 0; r < mlp::m; ++r)
      gk_dequantize_row(wt, q.data() + r * gk_row_size(wt, mlp::k), wd.data() + r * mlp::k, mlp::k);
    double err = 0, ref = 0;
    for (int64_t j = 0; j < mlp::n; ++j)
      for (int64_t i = 0; i < mlp::m; ++i) {
        double t = 0;
        for (int64_t l = 0; l < mlp::k; ++l) t += double(wd[i * mlp::k + l]) * xv[j * mlp::k + l];
        err += (hv[j * mlp::m + i] - t) * (hv[j * mlp::m + i] - t);
        ref += t * t;
      }
    // 8-bit activations put integer-path formats near 4e-3 relative; f16 rounds the
    // activations to f16 (as the reference does), 11 bits: near 3e-4
    const double rel = std::sqrt(err / ref);
    UNSCOPED_INFO(gk_type_name(wt) << " matmul relative error " << rel);
    CHECK(rel < (wt == GK_TYPE_F16 ? 2e-3 : 1e-2));
    auto y = read_f32(net.y);
    double s = 0;
    for (int64_t i = 0; i < mlp::m; ++i) s += y[static_cast<std::size_t>(i)];
    CHECK(std::fabs(s - 1.0) < 1e-5);
  }
}

TEST_CASE("backends, buffers, the graph allocator and the scheduler give the same bits", "[c_graph]") {
  // reference: a context that owns its data, computed directly
  ctx_guard dg{gk_context_new(8 << 20, false)};
  mlp direct;
  direct.build(dg.c, GK_TYPE_Q4_K);
  direct.fill();
  gk_graph* g0 = gk_graph_new();
  gk_build_forward_expand(g0, direct.y);
  REQUIRE(gk_graph_compute(g0, 2) == 0);
  const auto want = read_f32(direct.y);
  gk_graph_free(g0);

  gk_backend* cpu = gk_backend_cpu_new(2);
  REQUIRE(cpu);
  CHECK(gk_backend_is_cpu(cpu));
  CHECK(std::string(gk_backend_name(cpu)) == "CPU");
  CHECK(gk_backend_cpu_set_n_threads(cpu, 3) == 0);
  gk_buffer_type* host = gk_backend_buffer_type(cpu);
  REQUIRE(host == gk_cpu_buffer_type());
  CHECK(gk_buffer_type_is_host(host));
  CHECK(gk_buffer_type_alignment(host) >= 32);
  CHECK(std::string(gk_buffer_type_name(host)) == "CPU");
  CHECK(gk_backend_supports_op(cpu, direct.y));

  SECTION("weights in a buffer, nodes from the graph allocator, computed by the backend") {
    ctx_guard wc{gk_context_new(1 << 20, true)};
    mlp net;
    net.build(wc.c, GK_TYPE_Q4_K);
    // weights and inputs: one buffer for the leaves (the nodes are still unplaced)
    gk_buffer* wb = gk_buffer_alloc(host, 1 << 20);
    REQUIRE(wb);
    size_t off = 0;
    for (gk_tensor* t : {net.w, net.x, net.g}) {
      REQUIRE(gk_buffer_place_tensor(wb, t, off) == 0);
      off += (gk_buffer_type_alloc_size(host, t) + 63) / 64 * 64;
    }
    CHECK(gk_buffer_place_tensor(wb, net.y, 1) != 0);  // misaligned
    CHECK(error_names("alignment"));
    net.fill();
    gk_graph* g = gk_graph_new();
    gk_build_forward_expand(g, net.y);
    gk_gallocr* ga = gk_gallocr_new();
    REQUIRE(gk_gallocr_alloc_graph(ga, g) == 0);
    CHECK(gk_gallocr_buffer_size(ga) > 0);
    REQUIRE(gk_backend_graph_compute(cpu, g) == 0);
    CHECK(read_f32(net.y) == want);
    gk_gallocr_free(ga);
    gk_graph_free(g);
    gk_buffer_free(wb);
  }

  SECTION("the scheduler over a device backend and the CPU") {
    ctx_guard sc{gk_context_new(1 << 20, true)};
    mlp net;
    net.build(sc.c, GK_TYPE_Q4_K);
    gk_buffer* leaves = gk_alloc_ctx_tensors(sc.c, host);
    REQUIRE(leaves);
    CHECK(gk_buffer_size(leaves) >= gk_tensor_nbytes(net.w));
    net.fill();
    gk_backend* dev = gk_backend_from_device(0);
    REQUIRE(dev);
    gk_backend* list[2] = {dev, cpu};
    gk_sched* s = gk_sched_new(list, 2);
    REQUIRE(s);
    gk_graph* g = gk_graph_new();
    gk_build_forward_expand(g, net.y);
    REQUIRE(gk_sched_alloc_graph(s, g) == 0);
    CHECK(gk_sched_n_splits(s) >= 1);
    CHECK(gk_sched_get_tensor_backend(s, net.y) != nullptr);
    REQUIRE(gk_sched_graph_compute(s, g) == 0);
    CHECK(read_f32(net.y) == want);
    CHECK(gk_sched_set_tensor_backend(s, net.y, cpu) == 0);
    REQUIRE(gk_sched_graph_compute(s, g) == 0);
    CHECK(gk_sched_get_tensor_backend(s, net.y) == cpu);
    CHECK(read_f32(net.y) == want);
    CHECK(gk_sched_reset(s) == 0);
    gk_sched_free(s);
    gk_graph_free(g);
    gk_backend_free(dev);
    gk_buffer_free(leaves);
  }
  gk_backend_free(cpu);
}

TEST_CASE("weights in CPU_TILED memory: the scheduler's results are the host memory's", "[c_graph]") {
  for (gk_type wt : {GK_TYPE_Q4_0, GK_TYPE_Q4_1, GK_TYPE_Q8_0}) {
    INFO("weight type " << gk_type_name(wt));
    std::vector<float> want, got;
    gk_backend* cpu = gk_backend_cpu_new(2);
    REQUIRE(cpu);
    for (bool tiled : {false, true}) {
      ctx_guard wc{gk_context_new(1 << 20, true)};
      mlp net;
      net.build(wc.c, wt);
      gk_buffer_type* bt = tiled ? gk_cpu_tiled_buffer_type() : gk_cpu_buffer_type();
      REQUIRE(bt);
      CHECK(gk_buffer_type_is_host(bt) == !tiled);
      gk_buffer* wb = gk_buffer_alloc(bt, gk_buffer_type_alloc_size(bt, net.w));
      REQUIRE(wb);
      REQUIRE(gk_buffer_place_tensor(wb, net.w, 0) == 0);
      gk_buffer* rest = gk_alloc_ctx_tensors(wc.c, gk_cpu_buffer_type());  // x and g
      REQUIRE(rest);
      net.fill();
      if (tiled) {  // the bytes come back as written, though stored otherwise
        std::vector<unsigned char> a(gk_tensor_nbytes(net.w)), b(a.size());
        REQUIRE(gk_tensor_get_bytes(net.w, a.data(), 0, a.size()) == 0);
        CHECK(std::memcmp(a.data(), gk_tensor_data(net.w), a.size()) != 0);
        REQUIRE(gk_tensor_set_bytes(net.w, a.data(), 0, a.size()) == 0);
        REQUIRE(gk_tensor_get_bytes(net.w, b.data(), 0, b.size()) == 0);
        CHECK(a == b);
      }
      gk_backend* list[1] = {cpu};
      gk_sched* s = gk_sched_new(list, 1);
      REQUIRE(s);
      gk_graph* g = gk_graph_new();
      gk_build_forward_expand(g, net.y);
      REQUIRE(gk_sched_graph_compute(s, g) == 0);
      (tiled ? got : want) = read_f32(net.y);
      gk_sched_free(s);
      gk_graph_free(g);
      gk_buffer_free(rest);
      gk_buffer_free(wb);
    }
    CHECK(got == want);
    gk_backend_free(cpu);
  }
}

TEST_CASE("custom ops and node modifiers build", "[c_graph]") {
  ctx_guard cg{gk_context_new(1 << 20, false)};
  gk_context* c = cg.c;
  gk_tensor* a = gk_new_tensor_2d(c, GK_TYPE_F32, 8, 2);
  gk_custom1_fn f = [](gk_tensor*, const gk_tensor*, int, int, void*) {};
  gk_tensor* r = gk_map_custom1(c, a, f, GK_N_TASKS_MAX, nullptr);
  REQUIRE(r);
  CHECK(std::string(gk_op_name(gk_tensor_op(r))) == "map_custom1");
  CHECK(gk_map_custom1(c, a, nullptr, 1, nullptr) == nullptr);
  gk_tensor* q = gk_new_tensor_4d(c, GK_TYPE_F32, 64, 3, 4, 1);
  gk_tensor* k = gk_new_tensor_4d(c, GK_TYPE_F16, 64, 16, 2, 1);
  gk_tensor* v = gk_new_tensor_4d(c, GK_TYPE_F16, 64, 16, 2, 1);
  gk_tensor* fa = gk_flash_attn_ext(c, q, k, v, nullptr, 0.125f, 0.0f, 0.0f);
  REQUIRE(fa);
  CHECK(gk_flash_attn_ext_set_prec(fa, GK_PREC_F32) == 0);
  gk_prec p = GK_PREC_DEFAULT;
  CHECK(gk_flash_attn_ext_get_prec(fa, &p) == 0);
  CHECK(p == GK_PREC_F32);
  float dims[2];
  CHECK(gk_rope_yarn_corr_dims(128, 4096, 10000.0f, 32.0f, 1.0f, dims) == 0);
  CHECK(dims[0] <= dims[1]);
  CHECK(gk_arange(c, 0.0f, 10.0f, 1.0f) != nullptr);
  CHECK(gk_conv_transpose_2d_p0(c, gk_new_tensor_4d(c, GK_TYPE_F32, 3, 3, 4, 2), gk_new_tensor_4d(c, GK_TYPE_F32, 8, 8, 2, 1), 2) != nullptr);
}
