// SPDX-License-Identifier: MIT
// A quant format gk has never heard of, end to end: q3_f16 (q3_f16.hpp, this folder) is
// defined in the user's code, registered once, and then encoded and decoded in rows,
// dotted on every SIMD target this build and CPU have, multiplied (mul_mat, mul_mat_id),
// gathered (get_rows) and written (cpy) inside gk graphs on the CPU pass, with no line of
// gk written for it. Each step is checked against the format's own scalar definition; the
// program is the meson test example_custom_format (exit status 1 on any failure).
//
// Bars, each with what set it:
//   - dots: every target's row dot equals the scalar definition bit for bit (the integer
//     part is exact and the float steps are the definition's, in its order);
//   - the scalar dot against a double dot of the decoded blocks: 1e-6 of sum |w_i a_i|
//     (float sums of n/32 block terms; measured ~2e-9);
//   - mul_mat and mul_mat_id in a graph against the definition (weights decoded,
//     activations encoded to q8_0 and decoded, dotted in double): 1e-6 of sum |w_i a_i|
//     (measured ~3e-8); against the unquantised activations: relative RMS error under
//     1.5e-2 (q8_0's rounding; measured ~6e-3);
//   - get_rows equals decode bit for bit; cpy f32 -> q3_f16 equals encode_row bit for bit;
//   - encoding a gaussian row: relative RMS error under 0.2 (a 3-bit grid with one scale per
//     32 weights; measured ~0.17); a row already on a block's grid encodes back to itself.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <gk/gk.hpp>

#include "q3_f16.hpp"
#include "q3_f16_avx2.hpp"

namespace {

using example::q3_f16;
using q8_0 = gk::formats::q8_0;

int failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("  %-4s %s\n", ok ? "ok" : "FAIL", what.c_str());
  if (!ok) ++failures;
}

// Runs f and reports whether it threw gk::error with `needle` in its message.
template <class F>
bool throws_with(F&& f, const char* needle) {
  try {
    f();
  } catch (const gk::error& e) {
    const bool ok = std::strstr(e.what(), needle) != nullptr;
    if (!ok) std::printf("       (message was: %s)\n", e.what());
    return ok;
  }
  return false;
}

std::vector<float> gaussian(std::size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = g(rng);
  return v;
}

std::vector<q3_f16::block> encode(const std::vector<float>& x) {
  std::vector<q3_f16::block> b(x.size() / 32);
  gk::encode_row<q3_f16>(x.data(), b.data(), static_cast<std::int64_t>(x.size()));
  return b;
}

// ---- registration, and the errors around it ----

// A second format under the same id, name and geometry: registering it must fail.
struct q3_f16_twin : q3_f16 {};

void registration() {
  std::printf("registration\n");
  gk::context ctx(gk::context_params{1 << 20});
  check(!gk::is_valid(q3_f16::id) && throws_with([&] { ctx.new_tensor_1d(q3_f16::id, 32); }, "register_format"),
        "before registering, a q3_f16 tensor is refused, and the message says why");
  gk::register_format<q3_f16>("q3_f16");
  check(gk::is_valid(q3_f16::id) && gk::name(q3_f16::id) == "q3_f16" && gk::block_size(q3_f16::id) == 32 &&
            gk::type_size(q3_f16::id) == 14 && gk::type_from_name("q3_f16") == q3_f16::id &&
            gk::is_quantized(q3_f16::id),
        "registered: id " + std::to_string(static_cast<int>(q3_f16::id)) + ", name, 32 weights in 14 bytes");
  gk::register_format<q3_f16>("q3_f16");
  check(true, "registering the same format again is a no-op");
  check(throws_with([] { gk::register_format<q3_f16_twin>("q3_f16"); }, "another format"),
        "another format under the same id is refused");
  check(throws_with([] { gk::register_type(q3_f16::id, "q3_other", 32, 14); }, "already registered as q3_f16"),
        "another name for the same id is refused");
  check(throws_with([] { gk::register_type(gk::user_type(1), "q4_0", 32, 18); }, "name is already taken"),
        "a GGUF name for a user id is refused");
  check(throws_with([] { gk::register_type(gk::type::q4_0, "mine", 32, 18); }, "user formats take ids"),
        "a GGUF id is refused");
  check(throws_with([&] { ctx.new_tensor_1d(static_cast<gk::type>(999), 32); }, "neither a GGUF type"),
        "an id outside both ranges is named as such");

  // Planted control: geometry without kernels. Tensors can be made, the CPU pass refuses.
  const gk::type bare = gk::user_type(2);
  gk::register_type(bare, "bare3", 32, 14);
  gk::tensor* w = ctx.new_tensor_2d(bare, 64, 4);
  gk::tensor* x = ctx.new_tensor_2d(gk::type::f32, 64, 2);
  std::memset(w->data, 0, w->nbytes());
  std::memset(x->data, 0, x->nbytes());
  gk::graph g;
  g.build_forward_expand(gk::mul_mat(ctx, w, x));
  check(throws_with([&] { gk::cpu::compute(g, 1); }, "no kernel for node mul_mat"),
        "control: a type registered without kernels is refused by the CPU pass, by name (bare3)");
}

// ---- bits ----

void bits() {
  std::printf("bits\n");
  // Codes 0..7 repeating with d = 0.5: decode is d * (q - 4), and the grid's own values
  // encode back to the same bytes.
  q3_f16::block b{};
  b.d = gk::to_f16(0.5f);
  for (int j = 0; j < 32; ++j) {
    const int q = (j * 5 + 3) % 8;
    b.ql[j % 8] = static_cast<std::uint8_t>(b.ql[j % 8] | (q & 3) << (2 * (j / 8)));
    b.qh[j / 8] = static_cast<std::uint8_t>(b.qh[j / 8] | (q >> 2) << (j % 8));
  }
  float y[32];
  q3_f16::decode(b, y);
  bool exact = true;
  for (int j = 0; j < 32; ++j) exact = exact && y[j] == 0.5f * static_cast<float>((j * 5 + 3) % 8 - 4);
  check(exact, "decode of a hand-packed block is d * (q - 4) for every code");
  q3_f16::block back{};
  q3_f16::encode(y, back, nullptr);
  check(std::memcmp(&back, &b, sizeof b) == 0, "a block's decoded values encode back to the same 14 bytes");

  const float zeros[32] = {};
  q3_f16::encode(zeros, back, nullptr);
  q3_f16::decode(back, y);
  check(std::all_of(y, y + 32, [](float v) { return v == 0.0f; }), "a zero block decodes to zeros");

  const std::size_t n = 64 * 4096;
  const auto x = gaussian(n, 7);
  const auto q = encode(x);
  std::vector<float> d(n);
  gk::decode_row<q3_f16>(q.data(), d.data(), static_cast<std::int64_t>(n));
  double err = 0, sig = 0;
  for (std::size_t i = 0; i < n; ++i) {
    err += double(x[i] - d[i]) * (x[i] - d[i]);
    sig += double(x[i]) * x[i];
  }
  const double rel = std::sqrt(err / sig);
  char line[160];
  std::snprintf(line, sizeof line, "gaussian rows: relative RMS error %.4f (bar 0.2; 3.5 bits per weight)", rel);
  check(rel < 0.2, line);
}

// ---- dots on every target ----

template <class T>
constexpr bool compiled_in() {
  return std::is_same_v<T, gk::simd::scalar> || std::is_base_of_v<T, gk::simd::native>;
}

template <class T>
void dots_on() {
  const bool runs = compiled_in<T>() && T::available();
  if (!runs) {
    std::printf("  --   %s: %s\n", std::string(T::name).c_str(),
                compiled_in<T>() ? "not on this CPU" : "not compiled in (build flags)");
    return;
  }
  bool same = true;
  for (std::int64_t n : {32, 64, 96, 160, 4096}) {
    for (int kind = 0; kind < 3; ++kind) {  // gaussian, zero weights, constant activations
      auto w = gaussian(static_cast<std::size_t>(n), 100 + static_cast<unsigned>(n), 0.3f);
      auto a = gaussian(static_cast<std::size_t>(n), 200 + static_cast<unsigned>(n), 2.0f);
      if (kind == 1) std::fill(w.begin(), w.end(), 0.0f);
      if (kind == 2) std::fill(a.begin(), a.end(), -1.25f);
      const auto wq = encode(w);
      std::vector<q8_0::block> aq(static_cast<std::size_t>(n / 32));
      gk::encode_row<q8_0>(a.data(), aq.data(), n);
      const float ref = gk::dot_kernel<q3_f16, gk::simd::scalar>::row(wq.data(), aq.data(), n);
      const float got = gk::dot_kernel<q3_f16, T>::row(wq.data(), aq.data(), n);
      same = same && std::memcmp(&ref, &got, sizeof ref) == 0;
    }
  }
  // speed, for the record: rows of 4096 against one activation row
  const std::int64_t n = 4096, rows = 256;
  const auto w = encode(gaussian(static_cast<std::size_t>(n * rows), 5));
  std::vector<q8_0::block> aq(n / 32);
  const auto a = gaussian(n, 6);
  gk::encode_row<q8_0>(a.data(), aq.data(), n);
  using clock = std::chrono::steady_clock;
  double best = 1e30;
  float sink = 0;
  const auto t_start = clock::now();
  while (std::chrono::duration<double>(clock::now() - t_start).count() < 0.05) {
    const auto t0 = clock::now();
    for (std::int64_t r = 0; r < rows; ++r)
      sink += gk::dot_kernel<q3_f16, T>::row(w.data() + r * (n / 32), aq.data(), n);
    best = std::min(best, std::chrono::duration<double>(clock::now() - t0).count());
  }
  char line[200];
  std::snprintf(line, sizeof line, "%s (served by %s): bit-identical to scalar on 15 rows; %.2f GB/s of weights%s",
                std::string(T::name).c_str(), std::string(gk::dot_kernel<q3_f16, T>::served_by).c_str(),
                double(w.size() * sizeof(q3_f16::block)) / best / 1e9, sink == 12345.0f ? " " : "");
  check(same, line);
}

void dots() {
  std::printf("dots (this build's target: %s)\n", std::string(gk::simd::native::name).c_str());
  // the scalar definition against a double dot of what the blocks mean
  bool close = true;
  double worst = 0;
  for (std::int64_t n : {32, 256, 4096}) {
    const auto w = encode(gaussian(static_cast<std::size_t>(n), 11, 0.5f));
    const auto a = gaussian(static_cast<std::size_t>(n), 12, 3.0f);
    std::vector<q8_0::block> aq(static_cast<std::size_t>(n / 32));
    gk::encode_row<q8_0>(a.data(), aq.data(), n);
    std::vector<float> wd(static_cast<std::size_t>(n)), ad(static_cast<std::size_t>(n));
    gk::decode_row<q3_f16>(w.data(), wd.data(), n);
    gk::decode_row<q8_0>(aq.data(), ad.data(), n);
    double truth = 0, mag = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      truth += double(wd[i]) * ad[i];
      mag += std::fabs(double(wd[i]) * ad[i]);
    }
    const double e = std::fabs(gk::dot_kernel<q3_f16, gk::simd::scalar>::row(w.data(), aq.data(), n) - truth) / mag;
    worst = std::max(worst, e);
    close = close && e <= 1e-6;
  }
  char line[160];
  std::snprintf(line, sizeof line, "scalar dot vs double dot of the decoded blocks: %.1e of sum |w a| (bar 1e-6)",
                worst);
  check(close, line);
  // planted control: the same blocks summed last to first, a kernel that keeps every block
  // exact but reorders the float sum, must fail the bit-for-bit check
  {
    const std::int64_t n = 4096;
    const auto w = encode(gaussian(n, 13, 0.5f));
    const auto a = gaussian(n, 14, 3.0f);
    std::vector<q8_0::block> aq(n / 32);
    gk::encode_row<q8_0>(a.data(), aq.data(), n);
    bool differs = false;
    for (std::int64_t len = 64; len <= n; len += 32) {
      float reversed = 0.0f;
      for (std::int64_t i = len / 32 - 1; i >= 0; --i) reversed += q3_f16::dot(w[i], &aq[i]);
      const float ref = gk::dot_kernel<q3_f16, gk::simd::scalar>::row(w.data(), aq.data(), len);
      differs = differs || std::memcmp(&ref, &reversed, sizeof ref) != 0;
    }
    check(differs, "control: a kernel that sums the blocks in reverse is caught by the bit-for-bit check");
  }
  dots_on<gk::simd::scalar>();
  dots_on<gk::simd::avx2>();
  dots_on<gk::simd::avx512>();
}

// ---- in a graph ----

void in_a_graph() {
  std::printf("in a graph (mul_mat, get_rows, mul_mat_id, cpy on the CPU pass)\n");
  const std::int64_t k = 256, m = 37, n = 11, batch = 2;  // ragged rows and columns, weight broadcast over batch
  gk::context ctx(gk::context_params{16 << 20});
  gk::tensor* w = ctx.new_tensor_2d(q3_f16::id, k, m);
  w->set_name("w");
  gk::tensor* x = ctx.new_tensor_3d(gk::type::f32, k, n, batch);
  gk::tensor* idx = ctx.new_tensor_1d(gk::type::i32, 5);
  gk::tensor* xf = ctx.new_tensor_2d(gk::type::f32, k, 3);
  gk::tensor* xq = ctx.new_tensor_2d(q3_f16::id, k, 3);

  const auto wf = gaussian(static_cast<std::size_t>(k * m), 21, 0.1f);
  gk::encode_row<q3_f16>(wf.data(), static_cast<q3_f16::block*>(w->data), k * m);
  const auto xs = gaussian(static_cast<std::size_t>(k * n * batch), 22);
  std::memcpy(x->data, xs.data(), xs.size() * sizeof(float));
  const std::int32_t rows[5] = {3, 0, 36, 3, 17};
  std::memcpy(idx->data, rows, sizeof rows);
  const auto xfs = gaussian(static_cast<std::size_t>(k * 3), 23);
  std::memcpy(xf->data, xfs.data(), xfs.size() * sizeof(float));

  gk::tensor* y = gk::mul_mat(ctx, w, x);
  gk::tensor* r = gk::get_rows(ctx, w, idx);
  gk::tensor* c = gk::cpy(ctx, xf, xq);
  gk::graph g;
  g.build_forward_expand(y);
  g.build_forward_expand(r);
  g.build_forward_expand(c);

  gk::cpu::compute(g, 1);
  std::vector<float> y1(static_cast<float*>(y->data), static_cast<float*>(y->data) + y->nelements());
  gk::cpu::compute(g, 3);
  check(std::memcmp(y1.data(), y->data, y1.size() * sizeof(float)) == 0, "mul_mat: the same bits on 1 and 3 threads");

  // the definition: decoded weights against decoded q8_0 activations, in double
  std::vector<float> wd(static_cast<std::size_t>(k * m));
  gk::decode_row<q3_f16>(static_cast<const q3_f16::block*>(w->data), wd.data(), k * m);
  double worst = 0, control = 0, err2 = 0, sig2 = 0;
  std::vector<q8_0::block> aq(k / 32);
  std::vector<float> ad(k);
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t j = 0; j < n; ++j) {
      const float* xr = xs.data() + (b * n + j) * k;
      gk::encode_row<q8_0>(xr, aq.data(), k);
      gk::decode_row<q8_0>(aq.data(), ad.data(), k);
      for (std::int64_t i = 0; i < m; ++i) {
        double def = 0, mag = 0, truth = 0;
        for (std::int64_t t = 0; t < k; ++t) {
          def += double(wd[i * k + t]) * ad[t];
          mag += std::fabs(double(wd[i * k + t]) * ad[t]);
          truth += double(wd[i * k + t]) * xr[t];
        }
        const double got = static_cast<const float*>(y->data)[(b * n + j) * m + i];
        worst = std::max(worst, std::fabs(got - def) / mag);
        control = std::max(control, std::fabs(truth - def) / mag);
        err2 += (got - truth) * (got - truth);
        sig2 += truth * truth;
      }
    }
  char line[200];
  std::snprintf(line, sizeof line,
                "mul_mat [%lld x %lld] x [%lld x %lld x %lld] vs the definition: %.1e of sum |w a| (bar 1e-6)",
                static_cast<long long>(k), static_cast<long long>(m), static_cast<long long>(k),
                static_cast<long long>(n), static_cast<long long>(batch), worst);
  check(worst <= 1e-6, line);
  std::snprintf(line, sizeof line, "control: a mul_mat that skipped the activation rounding misses that bar (%.1e)",
                control);
  check(control > 1e-6, line);
  const double rel = std::sqrt(err2 / sig2);
  std::snprintf(line, sizeof line, "mul_mat vs unquantised activations: relative RMS error %.1e (bar 1.5e-2)", rel);
  check(rel < 1.5e-2, line);

  bool rows_ok = true;
  for (int i = 0; i < 5; ++i)
    rows_ok = rows_ok && std::memcmp(static_cast<const float*>(r->data) + i * k, wd.data() + rows[i] * k,
                                     static_cast<std::size_t>(k) * sizeof(float)) == 0;
  check(rows_ok, "get_rows {3, 0, 36, 3, 17} equals the decoded rows bit for bit");

  // mul_mat_id (mixture of experts): 3 experts of [k, m], 2 used per token, 4 tokens
  {
    const std::int64_t n_as = 3, n_used = 2, n_tok = 4;
    gk::tensor* as = ctx.new_tensor_3d(q3_f16::id, k, m, n_as);
    gk::tensor* xb = ctx.new_tensor_3d(gk::type::f32, k, 1, n_tok);
    gk::tensor* ids = ctx.new_tensor_2d(gk::type::i32, n_used, n_tok);
    const auto asf = gaussian(static_cast<std::size_t>(k * m * n_as), 24, 0.1f);
    gk::encode_row<q3_f16>(asf.data(), static_cast<q3_f16::block*>(as->data), k * m * n_as);
    const auto xbs = gaussian(static_cast<std::size_t>(k * n_tok), 25);
    std::memcpy(xb->data, xbs.data(), xbs.size() * sizeof(float));
    const std::int32_t experts[n_used * n_tok] = {2, 0, 1, 2, 0, 1, 2, 2};
    std::memcpy(ids->data, experts, sizeof experts);
    gk::tensor* ye = gk::mul_mat_id(ctx, as, xb, ids);
    gk::graph ge;
    ge.build_forward_expand(ye);
    gk::cpu::compute(ge, 2);
    std::vector<float> asd(asf.size());
    gk::decode_row<q3_f16>(static_cast<const q3_f16::block*>(as->data), asd.data(), k * m * n_as);
    double worst_id = 0;
    for (std::int64_t t = 0; t < n_tok; ++t) {
      gk::encode_row<q8_0>(xbs.data() + t * k, aq.data(), k);
      gk::decode_row<q8_0>(aq.data(), ad.data(), k);
      for (std::int64_t e = 0; e < n_used; ++e)
        for (std::int64_t i = 0; i < m; ++i) {
          const float* wr = asd.data() + (experts[t * n_used + e] * m + i) * k;
          double def = 0, mag = 0;
          for (std::int64_t j = 0; j < k; ++j) {
            def += double(wr[j]) * ad[j];
            mag += std::fabs(double(wr[j]) * ad[j]);
          }
          const double got = static_cast<const float*>(ye->data)[(t * n_used + e) * m + i];
          worst_id = std::max(worst_id, std::fabs(got - def) / mag);
        }
    }
    std::snprintf(line, sizeof line, "mul_mat_id, 3 experts, 2 per token, vs the definition: %.1e (bar 1e-6)",
                  worst_id);
    check(worst_id <= 1e-6, line);
  }

  std::vector<q3_f16::block> want(static_cast<std::size_t>(3 * k / 32));
  gk::encode_row<q3_f16>(xfs.data(), want.data(), 3 * k);
  check(std::memcmp(xq->data, want.data(), want.size() * sizeof(q3_f16::block)) == 0,
        "cpy f32 -> q3_f16 equals encode_row bit for bit");
}

}  // namespace

int main() {
  std::printf("custom_format: q3_f16, a 3.5-bit format defined in this program (SIMD target %s)\n",
              std::string(gk::simd::native::name).c_str());
  try {
    registration();
    bits();
    dots();
    in_a_graph();
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
  std::printf(failures ? "%d check(s) failed\n" : "all checks passed\n", failures);
  return failures ? 1 : 0;
}
