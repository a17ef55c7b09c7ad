// SPDX-License-Identifier: MIT
// gk as an inference engine uses it: one include, the engine's own compiler flags, nothing
// linked but threads. `#include <gk/gk.hpp>` compiled with -O2 -march=native is the whole
// CPU library dispatched at compile time to the best SIMD target those flags allow.
//
// Two models, each built as a gk graph, run on the CPU and checked against a scalar
// double-precision implementation written below from the textbook formulas (nothing of
// gk's kernels is reused; only the weights' decode, which defines what the stored bits are):
//   (a) a two-layer MLP with quantized weights: y = W2 silu(W1 x + b1) + b2, W1 q4_K,
//       W2 q8_0; graph in a context that owns its data, computed with gk::cpu::compute;
//   (b) a llama-style transformer block: rms_norm, q/k/v projections, neox rope,
//       grouped-query causal attention (4 query heads on 2 kv heads) twice, through
//       soft_max and through flash_attn_ext, output projection, SwiGLU FFN, residuals;
//       weights in one context, the graph planned by gk::graph_allocator into one buffer
//       and computed by gk::cpu_backend, as an engine would.
//
// Tolerances, as relative RMS error over an output. gk's matmuls encode activations to 8
// bits (q8_0, or q8_K for q4_K weights): that rounding is the one error gk makes on purpose.
//   - against the double implementation: 3e-2 (the 8-bit activations; measured ~1e-2 for
//     both models);
//   - against the double implementation fed each matmul input rounded the same way (encoded
//     to the activation format and decoded): 1e-5 (what is left is f32 arithmetic;
//     measured ~1e-7); a planted control, rope in the wrong layout, must miss it by far;
//   - the soft_max and flash_attn_ext attention outputs against each other: 1e-5 (the same
//     projections, f32 sums in another order; measured ~1e-7);
//   - 1 thread and 4 threads: the same bits.
// This program is the meson test example_engine; it exits 1 when a check fails.
#include <gk/gk.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace {

int failures = 0;

void check(bool ok, const char* what, double value, double bar) {
  std::printf("  %-4s %-58s %.2e (bar %.0e)\n", ok ? "ok" : "FAIL", what, value, bar);
  if (!ok) ++failures;
}
void check_same(bool ok, const char* what) {
  std::printf("  %-4s %s\n", ok ? "ok" : "FAIL", what);
  if (!ok) ++failures;
}

std::vector<float> gaussian(std::size_t n, unsigned seed, float sd) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = g(rng);
  return v;
}

double rel_rms(const float* got, const std::vector<double>& want) {
  double e = 0, s = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    e += (got[i] - want[i]) * (got[i] - want[i]);
    s += want[i] * want[i];
  }
  return std::sqrt(e / s);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// ---- weights: a gk tensor in format W, and what its stored bits mean, in double ----

struct matrix {
  gk::tensor* t = nullptr;
  std::int64_t in = 0, out = 0;
  std::vector<double> w;  // out rows of in values: the decoded weights
  double operator()(std::int64_t o, std::int64_t i) const { return w[static_cast<std::size_t>(o * in + i)]; }
};

template <class W>
matrix make_weight(gk::context& ctx, const char* name, std::int64_t in, std::int64_t out, unsigned seed) {
  matrix m;
  m.in = in;
  m.out = out;
  m.t = ctx.new_tensor_2d(W::id, in, out);
  m.t->set_name(name);
  const auto f = gaussian(static_cast<std::size_t>(in * out), seed, 1.0f / std::sqrt(static_cast<float>(in)));
  auto* blocks = static_cast<typename W::block*>(m.t->data);
  gk::encode_row<W>(f.data(), blocks, in * out);
  std::vector<float> d(f.size());
  gk::decode_row<W>(blocks, d.data(), in * out);
  m.w.assign(d.begin(), d.end());
  return m;
}

gk::tensor* make_vector(gk::context& ctx, const char* name, std::vector<float> v) {
  gk::tensor* t = ctx.new_tensor_1d(gk::type::f32, static_cast<std::int64_t>(v.size()));
  t->set_name(name);
  std::memcpy(t->data, v.data(), v.size() * sizeof(float));
  return t;
}

// ---- the double-precision implementation ----

// x (rows of k) rounded the way a matmul with weight format W rounds its activations:
// encoded to W::dot_type and decoded. Applied to the double implementation's inputs it
// removes the one error gk makes on purpose, so what is left is arithmetic.
template <class W>
std::vector<double> rounded_as_activations(const std::vector<double>& x, std::int64_t k) {
  using A = typename W::dot_type;
  std::vector<float> f(x.begin(), x.end()), back(x.size());
  std::vector<typename A::block> blocks(static_cast<std::size_t>(k / A::block_size));
  for (std::size_t r = 0; r < x.size() / static_cast<std::size_t>(k); ++r) {
    gk::encode_row<A>(f.data() + r * k, blocks.data(), k);
    gk::decode_row<A>(blocks.data(), back.data() + r * k, k);
  }
  return {back.begin(), back.end()};
}

// y[t][o] = sum_i m(o, i) x[t][i], tokens as rows
std::vector<double> matvec(const matrix& m, const std::vector<double>& x, std::int64_t n_tok) {
  std::vector<double> y(static_cast<std::size_t>(n_tok * m.out));
  for (std::int64_t t = 0; t < n_tok; ++t)
    for (std::int64_t o = 0; o < m.out; ++o) {
      double s = 0;
      for (std::int64_t i = 0; i < m.in; ++i) s += m(o, i) * x[static_cast<std::size_t>(t * m.in + i)];
      y[static_cast<std::size_t>(t * m.out + o)] = s;
    }
  return y;
}

double silu(double v) { return v / (1.0 + std::exp(-v)); }

std::vector<double> rms_norm(const std::vector<double>& x, std::int64_t d, const float* g, double eps) {
  std::vector<double> y(x.size());
  for (std::size_t t = 0; t < x.size() / static_cast<std::size_t>(d); ++t) {
    double ss = 0;
    for (std::int64_t i = 0; i < d; ++i) ss += x[t * d + i] * x[t * d + i];
    const double r = 1.0 / std::sqrt(ss / static_cast<double>(d) + eps);
    for (std::int64_t i = 0; i < d; ++i) y[t * d + i] = x[t * d + i] * r * g[i];
  }
  return y;
}

// rope on every head of every token: pair k turns by pos * base^(-2k/hd); the pair is
// (k, k + hd/2) in neox layout, (2k, 2k + 1) in the original one
void rope(std::vector<double>& x, std::int64_t hd, std::int64_t n_head, const std::vector<int>& pos, double base,
          bool neox) {
  for (std::size_t t = 0; t < pos.size(); ++t)
    for (std::int64_t h = 0; h < n_head; ++h) {
      double* v = x.data() + (static_cast<std::int64_t>(t) * n_head + h) * hd;
      for (std::int64_t k = 0; k < hd / 2; ++k) {
        const double th = pos[t] * std::pow(base, -2.0 * static_cast<double>(k) / static_cast<double>(hd));
        double& a = v[neox ? k : 2 * k];
        double& b = v[neox ? k + hd / 2 : 2 * k + 1];
        const double a0 = a, b0 = b;
        a = a0 * std::cos(th) - b0 * std::sin(th);
        b = a0 * std::sin(th) + b0 * std::cos(th);
      }
    }
}

// ---- (a) the MLP ----

void mlp(int n_threads) {
  constexpr std::int64_t d_in = 256, d_hidden = 512, d_out = 128, n_tok = 7;
  std::printf("(a) MLP %lld -> %lld (q4_K, silu) -> %lld (q8_0), %lld tokens, gk::cpu::compute\n",
              static_cast<long long>(d_in), static_cast<long long>(d_hidden), static_cast<long long>(d_out),
              static_cast<long long>(n_tok));
  gk::context ctx(gk::context_params{8 << 20});
  const matrix w1 = make_weight<gk::formats::q4_K>(ctx, "w1", d_in, d_hidden, 1);
  const matrix w2 = make_weight<gk::formats::q8_0>(ctx, "w2", d_hidden, d_out, 2);
  const auto b1v = gaussian(d_hidden, 3, 0.1f), b2v = gaussian(d_out, 4, 0.1f);
  gk::tensor* b1 = make_vector(ctx, "b1", b1v);
  gk::tensor* b2 = make_vector(ctx, "b2", b2v);
  const auto xv = gaussian(static_cast<std::size_t>(d_in * n_tok), 5, 1.0f);
  gk::tensor* x = ctx.new_tensor_2d(gk::type::f32, d_in, n_tok);
  std::memcpy(x->data, xv.data(), xv.size() * sizeof(float));

  gk::tensor* h = gk::silu(ctx, gk::add(ctx, gk::mul_mat(ctx, w1.t, x), b1));
  gk::tensor* y = gk::add(ctx, gk::mul_mat(ctx, w2.t, h), b2);
  gk::graph g;
  g.build_forward_expand(y);

  const auto t0 = std::chrono::steady_clock::now();
  gk::cpu::compute(g, n_threads);
  const double ms = seconds_since(t0) * 1e3;
  const std::vector<float> first(static_cast<float*>(y->data), static_cast<float*>(y->data) + y->nelements());
  gk::cpu::compute(g, 1);
  check_same(std::memcmp(first.data(), y->data, first.size() * sizeof(float)) == 0,
             ("the same bits on " + std::to_string(n_threads) + " threads and on 1").c_str());

  std::vector<double> xd(xv.begin(), xv.end());
  auto hd = matvec(w1, xd, n_tok);
  for (std::size_t i = 0; i < hd.size(); ++i) hd[i] = silu(hd[i] + b1v[i % d_hidden]);
  auto yd = matvec(w2, hd, n_tok);
  for (std::size_t i = 0; i < yd.size(); ++i) yd[i] += b2v[i % d_out];
  const double e_exact = rel_rms(static_cast<const float*>(y->data), yd);
  check(e_exact < 3e-2, "y against the double MLP", e_exact, 3e-2);
  auto hq = matvec(w1, rounded_as_activations<gk::formats::q4_K>(xd, d_in), n_tok);
  for (std::size_t i = 0; i < hq.size(); ++i) hq[i] = silu(hq[i] + b1v[i % d_hidden]);
  auto yq = matvec(w2, rounded_as_activations<gk::formats::q8_0>(hq, d_hidden), n_tok);
  for (std::size_t i = 0; i < yq.size(); ++i) yq[i] += b2v[i % d_out];
  const double e_rounded = rel_rms(static_cast<const float*>(y->data), yq);
  check(e_rounded < 1e-5, "y against it with activations rounded as gk rounds them", e_rounded, 1e-5);
  std::printf("       %d nodes, %.2f ms on %d threads\n", g.n_nodes(), ms, n_threads);
}

// ---- (b) the transformer block ----

void block(int n_threads) {
  constexpr std::int64_t d = 256, n_head = 4, n_kv = 2, hd = d / n_head, d_ff = 512, n_tok = 9;
  constexpr float eps = 1e-5f, base = 10000.0f;
  constexpr int pos0 = 3;  // this chunk continues a sequence: positions 3..11
  std::printf("(b) transformer block d=%lld, %lld heads on %lld kv heads, ffn %lld, %lld tokens, "
              "gk::graph_allocator + gk::cpu_backend\n",
              static_cast<long long>(d), static_cast<long long>(n_head), static_cast<long long>(n_kv),
              static_cast<long long>(d_ff), static_cast<long long>(n_tok));

  // the model: weights in a context that owns their data
  gk::context wctx(gk::context_params{16 << 20});
  const auto attn_norm_v = gaussian(d, 10, 0.2f), ffn_norm_v = gaussian(d, 11, 0.2f);
  std::vector<float> an(d), fn(d);
  for (std::int64_t i = 0; i < d; ++i) an[i] = 1.0f + attn_norm_v[i], fn[i] = 1.0f + ffn_norm_v[i];
  gk::tensor* attn_norm = make_vector(wctx, "attn_norm", an);
  gk::tensor* ffn_norm = make_vector(wctx, "ffn_norm", fn);
  const matrix wq = make_weight<gk::formats::q8_0>(wctx, "wq", d, d, 12);
  const matrix wk = make_weight<gk::formats::q8_0>(wctx, "wk", d, n_kv * hd, 13);
  const matrix wv = make_weight<gk::formats::q8_0>(wctx, "wv", d, n_kv * hd, 14);
  const matrix wo = make_weight<gk::formats::q4_K>(wctx, "wo", d, d, 15);
  const matrix w_gate = make_weight<gk::formats::q4_K>(wctx, "w_gate", d, d_ff, 16);
  const matrix w_up = make_weight<gk::formats::q4_K>(wctx, "w_up", d, d_ff, 17);
  const matrix w_down = make_weight<gk::formats::q8_0>(wctx, "w_down", d_ff, d, 18);

  // the graph: headers only; the allocator places every node and input afterwards
  gk::context ctx(gk::context_params{256 * gk::context::tensor_overhead(), nullptr, true});
  gk::tensor* x = ctx.new_tensor_2d(gk::type::f32, d, n_tok);
  gk::tensor* pos = ctx.new_tensor_1d(gk::type::i32, n_tok);
  gk::tensor* mask = ctx.new_tensor_2d(gk::type::f32, n_tok, n_tok);      // soft_max's causal mask
  gk::tensor* mask16 = ctx.new_tensor_2d(gk::type::f16, n_tok, n_tok);    // flash_attn_ext's
  for (gk::tensor* t : {x, pos, mask, mask16}) t->flags |= gk::flag_input;

  gk::tensor* cur = gk::mul(ctx, gk::rms_norm(ctx, x, eps), attn_norm);
  gk::tensor* q = gk::reshape_3d(ctx, gk::mul_mat(ctx, wq.t, cur), hd, n_head, n_tok);
  gk::tensor* k = gk::reshape_3d(ctx, gk::mul_mat(ctx, wk.t, cur), hd, n_kv, n_tok);
  gk::tensor* v = gk::reshape_3d(ctx, gk::mul_mat(ctx, wv.t, cur), hd, n_kv, n_tok);
  q = gk::rope(ctx, q, pos, static_cast<int>(hd), gk::rope_type_neox);
  k = gk::rope(ctx, k, pos, static_cast<int>(hd), gk::rope_type_neox);
  gk::tensor* qh = gk::permute(ctx, q, 0, 2, 1, 3);  // [hd, n_tok, n_head]
  gk::tensor* kh = gk::permute(ctx, k, 0, 2, 1, 3);  // [hd, n_tok, n_kv]
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));

  // attention through soft_max: scores [n_kv_tok, n_tok, n_head], then V^T times them
  gk::tensor* kq = gk::soft_max_ext(ctx, gk::mul_mat(ctx, kh, qh), mask, scale, 0.0f);
  gk::tensor* vt = gk::cont(ctx, gk::permute(ctx, v, 1, 2, 0, 3));  // [n_tok, hd, n_kv]
  gk::tensor* kqv = gk::mul_mat(ctx, vt, kq);                        // [hd, n_tok, n_head]
  gk::tensor* attn_sm = gk::cont_2d(ctx, gk::permute(ctx, kqv, 0, 2, 1, 3), d, n_tok);
  // and through flash_attn_ext: [hd, n_head, n_tok] directly
  gk::tensor* fa = gk::flash_attn_ext(ctx, qh, kh, gk::permute(ctx, v, 0, 2, 1, 3), mask16, scale, 0.0f, 0.0f);
  gk::tensor* attn_fa = gk::reshape_2d(ctx, fa, d, n_tok);
  attn_sm->flags |= gk::flag_output;  // checked below, so the allocator must not reuse them
  fa->flags |= gk::flag_output;

  auto rest = [&](gk::tensor* attn) {
    gk::tensor* x1 = gk::add(ctx, x, gk::mul_mat(ctx, wo.t, attn));
    gk::tensor* h = gk::mul(ctx, gk::rms_norm(ctx, x1, eps), ffn_norm);
    gk::tensor* act = gk::swiglu_split(ctx, gk::mul_mat(ctx, w_gate.t, h), gk::mul_mat(ctx, w_up.t, h));
    gk::tensor* out = gk::add(ctx, x1, gk::mul_mat(ctx, w_down.t, act));
    out->flags |= gk::flag_output;
    return out;
  };
  gk::tensor* out_sm = rest(attn_sm);
  gk::tensor* out_fa = rest(attn_fa);
  gk::graph g;
  g.build_forward_expand(out_sm);
  g.build_forward_expand(out_fa);

  gk::graph_allocator alloc;
  alloc.allocate(g);
  const auto xv = gaussian(static_cast<std::size_t>(d * n_tok), 19, 1.0f);
  std::memcpy(x->data, xv.data(), xv.size() * sizeof(float));
  std::vector<int> positions(n_tok);
  for (std::int64_t t = 0; t < n_tok; ++t) positions[t] = pos0 + static_cast<int>(t);
  std::memcpy(pos->data, positions.data(), positions.size() * sizeof(int));
  for (std::int64_t i = 0; i < n_tok; ++i)
    for (std::int64_t j = 0; j < n_tok; ++j) {
      const float m = j <= i ? 0.0f : -INFINITY;  // token i sees tokens 0..i
      static_cast<float*>(mask->data)[i * n_tok + j] = m;
      static_cast<gk::f16*>(mask16->data)[i * n_tok + j] = gk::to_f16(m);
    }

  gk::cpu_backend cpu(n_threads);
  const auto t0 = std::chrono::steady_clock::now();
  cpu.graph_compute(g);
  const double ms = seconds_since(t0) * 1e3;
  const std::vector<float> first(static_cast<float*>(out_fa->data), static_cast<float*>(out_fa->data) + d * n_tok);
  cpu.set_n_threads(1);
  cpu.graph_compute(g);
  check_same(std::memcmp(first.data(), out_fa->data, first.size() * sizeof(float)) == 0,
             ("the same bits on " + std::to_string(n_threads) + " threads and on 1").c_str());

  // the double implementation; `rounded`: each matmul's input rounded as gk rounds it
  struct result {
    std::vector<double> att, out;
  };
  auto reference = [&](bool rounded, bool neox) {
    auto in = [&]<class W>(std::type_identity<W>, const std::vector<double>& v, std::int64_t k) {
      return rounded ? rounded_as_activations<W>(v, k) : v;
    };
    using q8_0 = std::type_identity<gk::formats::q8_0>;
    using q4_K = std::type_identity<gk::formats::q4_K>;
    const std::vector<double> xd(xv.begin(), xv.end());
    const auto hn = rms_norm(xd, d, an.data(), eps);
    const auto hq = in(q8_0{}, hn, d);
    auto qd = matvec(wq, hq, n_tok), kd = matvec(wk, hq, n_tok);
    const auto vd = matvec(wv, hq, n_tok);
    rope(qd, hd, n_head, positions, base, neox);
    rope(kd, hd, n_kv, positions, base, neox);
    result r;
    r.att.resize(static_cast<std::size_t>(d * n_tok));
    for (std::int64_t t = 0; t < n_tok; ++t)
      for (std::int64_t h = 0; h < n_head; ++h) {
        const std::int64_t kvh = h / (n_head / n_kv);  // grouped-query: heads share kv heads in runs
        const double* qv = &qd[(t * n_head + h) * hd];
        std::vector<double> s(static_cast<std::size_t>(t + 1));
        double mx = -INFINITY, sum = 0;
        for (std::int64_t j = 0; j <= t; ++j) {  // causal: token t sees 0..t
          double dot = 0;
          for (std::int64_t i = 0; i < hd; ++i) dot += qv[i] * kd[(j * n_kv + kvh) * hd + i];
          s[j] = dot * scale;
          mx = std::max(mx, s[j]);
        }
        for (auto& e : s) sum += (e = std::exp(e - mx));
        for (std::int64_t i = 0; i < hd; ++i) {
          double o = 0;
          for (std::int64_t j = 0; j <= t; ++j) o += s[j] / sum * vd[(j * n_kv + kvh) * hd + i];
          r.att[(t * n_head + h) * hd + i] = o;
        }
      }
    auto x1 = matvec(wo, in(q4_K{}, r.att, d), n_tok);
    for (std::size_t i = 0; i < x1.size(); ++i) x1[i] += xd[i];
    const auto h2 = in(q4_K{}, rms_norm(x1, d, fn.data(), eps), d);
    const auto gate = matvec(w_gate, h2, n_tok), up = matvec(w_up, h2, n_tok);
    std::vector<double> act(gate.size());
    for (std::size_t i = 0; i < act.size(); ++i) act[i] = silu(gate[i]) * up[i];
    r.out = matvec(w_down, in(q8_0{}, act, d_ff), n_tok);
    for (std::size_t i = 0; i < r.out.size(); ++i) r.out[i] += x1[i];
    return r;
  };

  const float* got_sm = static_cast<const float*>(out_sm->data);
  const float* got_fa = static_cast<const float*>(out_fa->data);
  const result exact = reference(false, true), rounded = reference(true, true);
  check(rel_rms(got_sm, exact.out) < 3e-2, "out (soft_max path) against the double block", rel_rms(got_sm, exact.out),
        3e-2);
  check(rel_rms(got_fa, exact.out) < 3e-2, "out (flash_attn_ext path) against the double block",
        rel_rms(got_fa, exact.out), 3e-2);
  check(rel_rms(got_fa, rounded.out) < 1e-5, "out against it with activations rounded as gk rounds them",
        rel_rms(got_fa, rounded.out), 1e-5);
  check(rel_rms(static_cast<const float*>(attn_fa->data), rounded.att) < 1e-5,
        "attention (before wo) against the rounded double attention",
        rel_rms(static_cast<const float*>(attn_fa->data), rounded.att), 1e-5);
  const std::vector<double> sm(static_cast<const float*>(attn_sm->data),
                               static_cast<const float*>(attn_sm->data) + d * n_tok);
  check(rel_rms(static_cast<const float*>(attn_fa->data), sm) < 1e-5, "attention: flash_attn_ext against soft_max",
        rel_rms(static_cast<const float*>(attn_fa->data), sm), 1e-5);
  // planted control: the rounded check against a block with rope's pairs in the original
  // layout instead of neox (the classic bug of a wrong rope mode) must fail by far
  const double e_wrong = rel_rms(got_fa, reference(true, false).out);
  check(e_wrong > 1e-2, "control: against the other rope layout the error is large", e_wrong, 1e-2);
  std::printf("       %d nodes, %zu bytes planned for activations, %.2f ms on %d threads\n", g.n_nodes(),
              alloc.buffer_size(), ms, n_threads);
}

}  // namespace

int main() {
  constexpr int n_threads = 4;
  std::printf("engine: gk header-only, compiled for SIMD target %s (this CPU %s it)\n",
              std::string(gk::simd::native::name).c_str(), gk::simd::native::available() ? "runs" : "cannot run");
  if (!gk::simd::native::available()) return 77;  // meson: skipped
  try {
    mlp(n_threads);
    block(n_threads);
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
  std::printf(failures ? "%d check(s) failed\n" : "all checks passed\n", failures);
  return failures ? 1 : 0;
}
