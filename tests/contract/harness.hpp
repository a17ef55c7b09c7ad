// SPDX-License-Identifier: MIT
// The kernel contract's harness (../shared/KERNEL-CONTRACT.md): a kernel registers a spec
// (its float64 reference, served shapes and tiles, accumulator and chain depth, in-place,
// NaN rule) and this file runs gates 1-4 on it through one backend; gate 5 (launch limits,
// from the compiled images) is limits.py. One program per backend: gk-contract-cpu and
// gk-contract-cuda differ only in the runner they hand to run_all and their controls.
//
// The main idea: every kernel, a gk graph op or a planted control, is run the same way.
// The runner places each input and output in one buffer of the backend's memory with guard
// bytes around each, uploads the inputs, poisons the outputs with NaN, computes, and reads
// back output, inputs and guards. The gates only look at those bytes and at the spec:
//   1 non-finite  NaN/+Inf/-Inf planted at known positions; every output's class must be
//                 the float64 reference's (or the spec's stated rule holds)
//   2 repeat      five runs (CPU: at 1, 2, 3, 4, 7 threads) give the same bytes; inputs
//                 unchanged; guards intact; no output overlapping an input unless in place
//   3 shapes      served shapes and each tiled dim at least, tile-step, tile, tile+step and
//                 largest: |got-want| <= |want| halfulp(out) + gamma(depth) magnitude
//   4 fp32 sums   integer inputs whose exact sums fp16/bf16 replays provably miss; the
//                 kernel must meet the exact-sum bound
// A planted control runs its own gate only and must fail it; one that passes fails the run.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gk/backend.hpp"
#include "gk/cpu/rows.hpp"
#include "gk/gk.hpp"

namespace gk_contract {

using dims = std::vector<std::int64_t>;
using shape4 = std::array<std::int64_t, 4>;

// ---- what a spec declares ----

enum class role {
  data,     // values uniform in [lo, hi), encoded to the input's type
  index,    // integers in [0, range) (distinct: no repeats), i32 or i64
};

struct input_decl {
  gk::type type = gk::type::f32;
  shape4 ne{1, 1, 1, 1};
  role r = role::data;
  double lo = -1.0, hi = 1.0;
  std::int64_t range = 0;
  bool distinct = false;
  bool nonfinite = false;  // gate 1 plants NaN/Inf in this input (float types only)
  std::string name;
};

// An input as the harness made it: its bytes (what the backend gets) and its element values
// decoded to double in index order (what the reference reads).
struct host_input {
  input_decl d;
  std::vector<unsigned char> bytes;
  std::vector<double> v;
  std::int64_t n() const { return d.ne[0] * d.ne[1] * d.ne[2] * d.ne[3]; }
  double at(std::int64_t i0, std::int64_t i1 = 0, std::int64_t i2 = 0, std::int64_t i3 = 0) const {
    return v[static_cast<std::size_t>(((i3 * d.ne[2] + i2) * d.ne[1] + i1) * d.ne[0] + i0)];
  }
};
using input_set = std::vector<host_input>;

// The float64 reference of every output element (index order) and the magnitude its
// rounding error scales with (the sum of |terms| for a sum; see each spec).
struct reference {
  std::vector<double> want, mag;
  std::vector<double> narrow;  // stated roundings to a narrower type: an absolute allowance per output
  void push(double w, double m) {
    want.push_back(w);
    mag.push_back(m);
  }
};

// A tiled dimension: dims[param] moves by `step` from `least`, and `tile` is where the
// kernel's work unit ends.
struct tile_decl {
  int param = 0;
  std::int64_t tile = 1, step = 1, least = 1, largest = 1;
  std::string what;
};

// A gate failure on a shipped kernel, carried until its fix lands (known.txt).
struct known_entry {
  int gate = 0;
  std::string what;
};

struct spec {
  std::string name;
  std::string family = "rows";  // rows | dense | quantized (which input maker)
  std::function<std::vector<input_decl>(const dims&)> inputs;
  // A gk op: the node under test, built on leaves made from `inputs` in order.
  std::function<gk::tensor*(gk::context&, const std::vector<gk::tensor*>&, const dims&)> build;
  // A raw kernel (the planted controls): device pointers of inputs and output.
  std::function<void(const std::vector<void*>&, void*, const dims&)> raw;
  std::function<shape4(const dims&)> raw_out;  // f32 output shape of a raw kernel
  std::function<void(const input_set&, const dims&, reference&)> ref;
  std::vector<dims> served;
  std::vector<tile_decl> tiles;
  std::string accumulator = "f32";
  // longest chain of roundings to an output (sums, then fp32 operations after them)
  std::function<double(const dims&)> depth = [](const dims&) { return 8.0; };
  bool exact = false;     // integer outputs (indices): bit-equal to the reference
  bool in_place = false;  // the output is a view of input 0
  std::string nan_rule;   // empty: propagate, as float64 on the formula; else the stated rule
  // gate 4: integer inputs (fill) and, per output, the terms its sum adds (exact in double)
  std::function<void(input_set&, const dims&, std::mt19937&)> gate4_fill;
  std::function<std::vector<std::vector<double>>(const input_set&, const dims&)> gate4_terms;
  dims gate4_dims;
  double gate4_post = 0;   // fp32 operations after the sum (mean's division: 1)
  double gate4_scale = 1;  // the output is the sum times this (mean: 1/n, a power of two there)
  int control_gate = 0;   // a planted control: the gate it is built to fail
  std::string launch;     // CUDA: kernels it launches (gate 5 records them)
  std::vector<known_entry> known;
};

// ---- numbers ----

inline double half_ulp(gk::type t) {
  switch (t) {
    case gk::type::f16: return std::ldexp(1.0, -11);
    case gk::type::bf16: return std::ldexp(1.0, -8);
    default: return std::ldexp(1.0, -24);
  }
}
// half the spacing of the type's subnormals: the floor of any rounding to it
inline double half_ulp_min(gk::type t) {
  switch (t) {
    case gk::type::f16: return std::ldexp(1.0, -25);
    case gk::type::bf16: return std::ldexp(1.0, -134);
    default: return std::ldexp(1.0, -150);
  }
}
inline double gamma_n(double n) {
  const double u = std::ldexp(1.0, -24);
  return n * u / (1.0 - n * u);
}
enum class fclass { finite, nan, pinf, ninf };
inline fclass class_of(double v) {
  if (std::isnan(v)) return fclass::nan;
  if (std::isinf(v)) return v > 0 ? fclass::pinf : fclass::ninf;
  return fclass::finite;
}
inline const char* class_name(fclass c) {
  switch (c) {
    case fclass::nan: return "NaN";
    case fclass::pinf: return "+Inf";
    case fclass::ninf: return "-Inf";
    default: return "finite";
  }
}
inline std::string num(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}
inline std::string dims_str(const dims& d) {
  std::string s = "[";
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(d[i]);
  }
  return s + "]";
}
inline float round_to(gk::type t, double v) {
  char b[8] = {};
  gk::cpu::store_f32(t, b, static_cast<float>(v));
  return gk::cpu::load_f32(t, b);
}

// Output bytes as doubles (f32/f16/bf16/i32/i64), index order, packed layout.
inline std::vector<double> to_doubles(gk::type t, const std::vector<unsigned char>& b) {
  std::vector<double> out;
  const std::size_t es = gk::type_size(t);
  for (std::size_t off = 0; off + es <= b.size(); off += es) {
    const char* p = reinterpret_cast<const char*>(b.data() + off);
    switch (t) {
      case gk::type::i32: { std::int32_t v; std::memcpy(&v, p, 4); out.push_back(v); break; }
      case gk::type::i64: { std::int64_t v; std::memcpy(&v, p, 8); out.push_back(static_cast<double>(v)); break; }
      default: out.push_back(gk::cpu::load_f32(t, p));
    }
  }
  return out;
}

// ---- inputs ----

inline bool is_float(gk::type t) { return t == gk::type::f32 || t == gk::type::f16 || t == gk::type::bf16; }

// Bytes of an input from its values (rows encoded for block formats), and the values the
// bytes really hold (decoded back).
inline void encode(host_input& h) {
  const gk::type t = h.d.type;
  const std::int64_t n0 = h.d.ne[0], rows = h.n() / n0;
  h.bytes.assign(gk::row_size(t, n0) * static_cast<std::size_t>(rows), 0);
  std::vector<float> row(static_cast<std::size_t>(n0));
  for (std::int64_t r = 0; r < rows; ++r) {
    char* dst = reinterpret_cast<char*>(h.bytes.data()) + gk::row_size(t, n0) * static_cast<std::size_t>(r);
    double* v = h.v.data() + r * n0;
    if (t == gk::type::i32 || t == gk::type::i64) {
      for (std::int64_t i = 0; i < n0; ++i) gk::cpu::store_f32(t, dst + i * gk::type_size(t), static_cast<float>(v[i]));
      if (t == gk::type::i64)  // store_f32 goes through float: exact below 2^24, the only indices used here
        for (std::int64_t i = 0; i < n0; ++i) {
          std::int64_t x = static_cast<std::int64_t>(v[i]);
          std::memcpy(dst + i * 8, &x, 8);
        }
      continue;
    }
    for (std::int64_t i = 0; i < n0; ++i) row[static_cast<std::size_t>(i)] = static_cast<float>(v[i]);
    if (is_float(t)) {
      for (std::int64_t i = 0; i < n0; ++i) gk::cpu::store_f32(t, dst + i * gk::type_size(t), row[static_cast<std::size_t>(i)]);
      for (std::int64_t i = 0; i < n0; ++i) v[i] = gk::cpu::load_f32(t, dst + i * gk::type_size(t));
    } else {
      gk::cpu::encode_row_any(t, row.data(), dst, n0);
      gk::cpu::decode_row_any(t, dst, row.data(), n0);
      for (std::int64_t i = 0; i < n0; ++i) v[i] = row[static_cast<std::size_t>(i)];
    }
  }
}

// gate 1's plants in rows of ne[0]: row 0 a NaN, row 1 a +Inf, row 2 a -Inf, row 3 both
// infinities (as far as the input has rows).
inline void plant_nonfinite(host_input& h) {
  const std::int64_t n0 = h.d.ne[0], rows = h.n() / n0;
  const double inf = std::numeric_limits<double>::infinity();
  auto put = [&](std::int64_t r, std::int64_t i, double x) {
    if (r < rows) h.v[static_cast<std::size_t>(r * n0 + std::min(i, n0 - 1))] = x;
  };
  put(0, n0 / 3, std::numeric_limits<double>::quiet_NaN());
  put(1, n0 / 2, inf);
  put(2, 1, -inf);
  put(3, 0, inf);
  if (n0 > 1) put(3, n0 - 1, -inf);
}

inline input_set make_inputs(const spec& s, const dims& d, std::mt19937& rng, bool nonfinite) {
  input_set in;
  for (const input_decl& decl : s.inputs(d)) {
    host_input h;
    h.d = decl;
    h.v.resize(static_cast<std::size_t>(h.n()));
    if (decl.r == role::index) {
      if (decl.distinct) {
        std::vector<double> perm(static_cast<std::size_t>(decl.range));
        std::iota(perm.begin(), perm.end(), 0.0);
        std::shuffle(perm.begin(), perm.end(), rng);
        for (std::size_t i = 0; i < h.v.size(); ++i) h.v[i] = perm[i % perm.size()];
      } else {
        std::uniform_int_distribution<std::int64_t> u(0, decl.range - 1);
        for (double& x : h.v) x = static_cast<double>(u(rng));
      }
    } else {
      std::uniform_real_distribution<double> u(decl.lo, decl.hi);
      for (double& x : h.v) x = u(rng);
      if (nonfinite && decl.nonfinite) plant_nonfinite(h);
    }
    encode(h);
    in.push_back(std::move(h));
  }
  return in;
}

// ---- running a kernel on a backend ----

struct run_out {
  std::vector<std::vector<unsigned char>> bytes;  // output bytes of each run
  gk::type type = gk::type::f32;
  shape4 ne{1, 1, 1, 1};
  std::vector<std::string> problems;  // inputs changed, guards hit, overlap
  std::string not_served;             // non-empty: the backend refused the op
};

// What a backend program provides: memory, a compute call per run, and whether it serves
// a node.
struct backend_hooks {
  std::string name;
  std::function<gk::buffer_type&()> memory;
  std::function<void(const gk::graph&, int run)> compute;  // run 0..4 (gate 2 varies threads on the CPU)
  std::function<bool(const gk::tensor*)> supports;
  std::function<void()> sync = [] {};
};

inline constexpr std::size_t guard_bytes = 256;
inline constexpr unsigned char guard_pattern(std::size_t i) { return static_cast<unsigned char>(0xA5 ^ (i * 37)); }

inline run_out run_kernel(const backend_hooks& be, const spec& s, const dims& d, const input_set& in, int runs) {
  run_out r;
  gk::context ctx{gk::context_params{16u << 20, nullptr, true}};
  std::vector<gk::tensor*> leaves;
  for (std::size_t i = 0; i < in.size(); ++i) {
    gk::tensor* t = ctx.new_tensor_4d(in[i].d.type, in[i].d.ne[0], in[i].d.ne[1], in[i].d.ne[2], in[i].d.ne[3]);
    t->set_name("in" + std::to_string(i));
    leaves.push_back(t);
  }
  gk::tensor* out = nullptr;
  gk::graph g;
  if (s.build) {
    out = s.build(ctx, leaves, d);
    out->flags |= gk::flag_output;
    g.build_forward_expand(out);
    for (gk::tensor* n : g.nodes())
      if (!n->is_view() && !be.supports(n)) {
        r.not_served = gk::describe(n) + " (" + std::string(gk::name(n->op)) + ")";
        return r;
      }
  } else {
    const shape4 ne = s.raw_out(d);
    out = ctx.new_tensor_4d(gk::type::f32, ne[0], ne[1], ne[2], ne[3]);
  }
  r.type = out->type;
  for (int k = 0; k < 4; ++k) r.ne[static_cast<std::size_t>(k)] = out->ne[k];

  // storage: guard, tensor, guard, tensor, ..., guard
  std::vector<gk::tensor*> stored(leaves);
  if (s.build) {
    for (gk::tensor* n : g.nodes())
      if (!n->is_view() && std::find(stored.begin(), stored.end(), n) == stored.end()) stored.push_back(n);
  } else {
    stored.push_back(out);
  }
  gk::buffer_type& mem = be.memory();
  const std::size_t al = mem.alignment();
  auto up = [&](std::size_t n) { return (n + al - 1) / al * al; };
  const std::size_t gsz = up(guard_bytes);
  std::size_t total = gsz;
  for (gk::tensor* t : stored) total += up(mem.alloc_size(t)) + gsz;
  auto buf = mem.alloc_buffer(total);
  std::vector<gk::tensor*> guards;
  std::size_t off = 0;
  auto add_guard = [&](std::size_t at, std::size_t n) {
    gk::tensor* gt = ctx.new_tensor_1d(gk::type::i8, static_cast<std::int64_t>(n));
    buf->init_tensor(gt, at);
    guards.push_back(gt);
  };
  for (gk::tensor* t : stored) {
    add_guard(off, gsz);
    off += gsz;
    buf->init_tensor(t, off);
    const std::size_t span = up(mem.alloc_size(t));
    // bytes between the tensor's end and the next guard belong to the guard too
    off += span;
    if (span > t->nbytes()) {
      gk::tensor* gt = ctx.new_tensor_1d(gk::type::i8, static_cast<std::int64_t>(span - t->nbytes()));
      gt->data = static_cast<char*>(t->data) + t->nbytes();
      gt->buffer = buf.get();
      guards.push_back(gt);
    }
  }
  add_guard(off, gsz);
  if (s.build)
    for (gk::tensor* n : g.nodes())
      if (n->is_view()) {
        n->data = static_cast<char*>(n->view_src->data) + n->view_offs;
        n->buffer = n->view_src->buffer;
      }
  for (gk::tensor* gt : guards) {
    std::vector<unsigned char> pat(gt->nbytes());
    for (std::size_t i = 0; i < pat.size(); ++i) pat[i] = guard_pattern(i);
    buf->set_tensor(gt, pat.data(), 0, pat.size());
  }
  // an output overlapping an input (only an in-place spec may)
  if (s.build && !s.in_place)
    for (gk::tensor* l : leaves) {
      const char* a0 = static_cast<const char*>(l->data);
      const char* b0 = static_cast<const char*>(out->data);
      if (a0 < b0 + out->nbytes() && b0 < a0 + l->nbytes())
        r.problems.push_back("output " + gk::describe(out) + " overlaps input " + gk::describe(l));
    }

  auto upload = [&] {
    for (std::size_t i = 0; i < in.size(); ++i) buf->set_tensor(leaves[i], in[i].bytes.data(), 0, in[i].bytes.size());
  };
  upload();
  for (int run = 0; run < runs; ++run) {
    if (s.in_place && run > 0) upload();  // the kernel wrote its input: the next run starts over
    for (gk::tensor* t : stored)
      if (std::find(leaves.begin(), leaves.end(), t) == leaves.end()) buf->memset_tensor(t, 0xff, 0, t->nbytes());
    if (s.build) {
      be.compute(g, run);
    } else {
      std::vector<void*> ptrs;
      for (gk::tensor* l : leaves) ptrs.push_back(l->data);
      s.raw(ptrs, out->data, d);
    }
    be.sync();
    std::vector<unsigned char> ob(out->nbytes());
    buf->get_tensor(out, ob.data(), 0, ob.size());
    r.bytes.push_back(std::move(ob));
    for (std::size_t i = 0; i < in.size(); ++i) {
      if (s.in_place && i == 0) continue;
      std::vector<unsigned char> ib(in[i].bytes.size());
      buf->get_tensor(leaves[i], ib.data(), 0, ib.size());
      if (ib != in[i].bytes) {
        r.problems.push_back("input " + std::to_string(i) + " changed by run " + std::to_string(run));
        break;
      }
    }
    for (gk::tensor* gt : guards) {
      std::vector<unsigned char> gb(gt->nbytes());
      buf->get_tensor(gt, gb.data(), 0, gb.size());
      for (std::size_t i = 0; i < gb.size(); ++i)
        if (gb[i] != guard_pattern(i)) {
          r.problems.push_back("guard bytes hit in run " + std::to_string(run));
          break;
        }
    }
  }
  return r;
}

// ---- the gates ----

struct finding {
  int gate = 0;
  std::string text;
  dims at;                 // the shape behind it
  std::int64_t elems = 0;  // input elements there (the smallest is the one to reproduce)
  std::string repro;
};

struct options {
  std::string only;
  bool repro = false;
  bool verbose = false;
};

// The inputs behind output element out_index: each input's row that holds it, around the
// same position, and every non-finite value of that row.
inline std::string repro_text(const input_set& in, std::size_t out_index, std::int64_t out_ne0) {
  std::ostringstream o;
  const std::int64_t row = out_ne0 > 0 ? static_cast<std::int64_t>(out_index) / out_ne0 : 0;
  const std::int64_t pos = out_ne0 > 0 ? static_cast<std::int64_t>(out_index) % out_ne0 : 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const host_input& h = in[i];
    const std::int64_t n0 = h.d.ne[0], rows = h.n() / n0;
    const std::int64_t r = std::min(row, rows - 1);
    const double* v = h.v.data() + r * n0;
    o << "    in" << i << " " << gk::name(h.d.type) << " [" << h.d.ne[0] << "," << h.d.ne[1] << "," << h.d.ne[2] << ","
      << h.d.ne[3] << "] row " << r << ":";
    const std::int64_t a = std::max<std::int64_t>(0, std::min(pos, n0 - 1) - 8), b = std::min(n0, a + 24);
    if (a > 0) o << " [" << a << "]";
    for (std::int64_t k = a; k < b; ++k) o << " " << num(v[k]);
    if (b < n0) o << " ... (" << n0 << ")";
    for (std::int64_t k = 0; k < n0; ++k)
      if (!std::isfinite(v[k]) && (k < a || k >= b)) o << " | [" << k << "] " << num(v[k]);
    o << "\n";
  }
  return o.str();
}

// Compares one run's outputs with the reference: gate 1 (classes) or gate 3 (values).
// Returns the first failing element's description, or "".
inline std::string compare(const spec& s, int gate, const reference& ref, const std::vector<double>& got, gk::type out_t,
                           std::size_t* bad_index, const dims& d) {
  if (got.size() != ref.want.size())
    return "output has " + std::to_string(got.size()) + " elements, the reference " + std::to_string(ref.want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double w = ref.want[i], x = got[i];
    std::string bad;
    if (class_of(w) != class_of(x)) {
      bad = std::string("class ") + class_name(class_of(x)) + ", want " + class_name(class_of(w));
    } else if (gate == 3 && class_of(w) == fclass::finite) {
      const double bound = s.exact ? 0.0 : std::fabs(w) * half_ulp(out_t) + gamma_n(s.depth(d)) * ref.mag[i] +
                           (ref.narrow.empty() ? 0.0 : ref.narrow[i]) + half_ulp_min(out_t);
      if (std::fabs(x - w) > bound)
        bad = "got " + num(x) + ", want " + num(w) + ", |diff| " + num(std::fabs(x - w)) + " > bound " + num(bound);
    }
    if (!bad.empty()) {
      *bad_index = i;
      return "out[" + std::to_string(i) + "] " + bad;
    }
  }
  return {};
}

// The shapes gate 3 runs: every served shape, then each tiled dim (from the first served
// shape) at least, tile - step, tile, tile + step and largest.
inline std::vector<dims> gate3_shapes(const spec& s) {
  std::vector<dims> out = s.served;
  if (s.served.empty()) return out;
  for (const tile_decl& t : s.tiles)
    for (std::int64_t v : {t.least, t.tile - t.step, t.tile, t.tile + t.step, t.largest}) {
      if (v < t.least) continue;
      dims d = s.served[0];
      d[static_cast<std::size_t>(t.param)] = v;
      if (std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
    }
  return out;
}

// The half-precision replays gate 4 requires to miss: one chain, contiguous halves, and
// 32 lanes then their halves, each in fp16 and bf16.
inline double replay(const std::vector<double>& terms, gk::type t, int how) {
  auto rnd = [&](double v) { return static_cast<double>(round_to(t, v)); };
  std::function<double(std::size_t, std::size_t)> halves = [&](std::size_t a, std::size_t b) -> double {
    if (b - a == 1) return rnd(terms[a]);
    const std::size_t m = a + (b - a) / 2;
    return rnd(halves(a, m) + halves(m, b));
  };
  if (terms.empty()) return 0;
  if (how == 0) {
    double acc = 0;
    for (double x : terms) acc = rnd(acc + rnd(x));
    return acc;
  }
  if (how == 1) return halves(0, terms.size());
  std::vector<double> lane(32, 0.0);
  for (std::size_t i = 0; i < terms.size(); ++i) lane[i % 32] = rnd(lane[i % 32] + rnd(terms[i]));
  for (std::size_t w = 16; w > 0; w /= 2)
    for (std::size_t i = 0; i < w; ++i) lane[i] = rnd(lane[i] + lane[i + w]);
  return lane[0];
}

class harness {
 public:
  harness(std::string program, backend_hooks be, options opt) : program_(std::move(program)), be_(std::move(be)), opt_(opt) {}

  void add(spec s) { specs_.push_back(std::move(s)); }
  void add_known(const std::string& name, int gate, const std::string& what) { known_[name].push_back({gate, what}); }
  std::vector<spec>& specs() { return specs_; }

  // Runs every spec (whose name holds --only) through its gates; prints and returns the exit status.
  int run_all() {
    int kernels = 0, passing = 0, not_served = 0, known_count = 0, controls = 0, red = 0, failures = 0;
    for (spec& s : specs_) {
      if (!opt_.only.empty() && s.name.find(opt_.only) == std::string::npos) continue;
      for (const known_entry& k : known_[s.name]) s.known.push_back(k);
      std::vector<finding> found;
      std::string ns;
      int gates_run = 0;
      try {
        for (int gate : {1, 2, 3, 4}) {
          if (s.control_gate && gate != s.control_gate) continue;
          std::vector<finding> f;
          const bool ran = run_gate(s, gate, f, ns);
          if (!ns.empty()) break;
          if (!ran) continue;
          ++gates_run;
          for (finding& x : f) found.push_back(std::move(x));
        }
      } catch (const std::exception& e) {
        found.push_back({0, std::string("threw: ") + e.what(), {}, 0, {}});
      }
      if (!ns.empty()) {
        ++not_served;
        std::printf("NOT SERVED %s: the %s backend refuses %s\n", s.name.c_str(), be_.name.c_str(), ns.c_str());
        continue;
      }
      if (s.control_gate) {
        ++controls;
        auto hit = std::find_if(found.begin(), found.end(), [&](const finding& x) { return x.gate == s.control_gate; });
        for (const finding& x : found)
          if (x.gate != s.control_gate) std::printf("FAIL harness %s: %s\n", s.name.c_str(), x.text.c_str()), ++failures;
        const bool is_red = hit != found.end();
        red += is_red;
        if (is_red) {
          std::printf("RED  %s (gate %d): %s\n", s.name.c_str(), s.control_gate, hit->text.c_str());
          if (opt_.repro && !hit->repro.empty()) std::printf("  repro at %s:\n%s", dims_str(hit->at).c_str(), hit->repro.c_str());
        } else {
          ++failures;
          std::printf("FAIL control %s stayed green at gate %d: the gate proves nothing\n", s.name.c_str(), s.control_gate);
        }
        continue;
      }
      ++kernels;
      bool ok = true;
      std::vector<bool> known_seen(s.known.size(), false);
      for (const finding& x : found) {
        auto k = std::find_if(s.known.begin(), s.known.end(), [&](const known_entry& e) { return e.gate == x.gate; });
        if (k != s.known.end()) {
          known_seen[static_cast<std::size_t>(k - s.known.begin())] = true;
          ++known_count;
          std::printf("KNOWN gate%d %s: %s (known: %s)\n", x.gate, s.name.c_str(), x.text.c_str(), k->what.c_str());
        } else {
          ok = false;
          ++failures;
          if (x.gate) std::printf("FAIL gate%d %s: %s\n", x.gate, s.name.c_str(), x.text.c_str());
          else std::printf("FAIL harness %s: %s\n", s.name.c_str(), x.text.c_str());
        }
        if (opt_.repro && !x.repro.empty()) std::printf("  repro at %s:\n%s", dims_str(x.at).c_str(), x.repro.c_str());
      }
      for (std::size_t i = 0; i < s.known.size(); ++i)
        if (!known_seen[i]) {
          ok = false;
          ++failures;
          std::printf("FAIL gate%d %s: passes now, but known.txt says it fails (%s): remove the entry\n", s.known[i].gate,
                      s.name.c_str(), s.known[i].what.c_str());
        }
      const bool clean = ok && std::none_of(known_seen.begin(), known_seen.end(), [](bool b) { return b; });
      passing += clean;
      if (clean && opt_.verbose) std::printf("ok   %s (%d gates)\n", s.name.c_str(), gates_run);
    }
    std::printf("SUMMARY %s: kernels passing gates 1-4 %d/%d, known findings %d, controls red %d/%d, limit problems n/a "
                "(gate 5 is the contract-limits test), not served %d\n",
                program_.c_str(), passing, kernels, known_count, red, controls, not_served);
    return failures ? 1 : 0;
  }

 private:
  // One gate on one spec; false when the gate does not apply to it.
  bool run_gate(const spec& s, int gate, std::vector<finding>& out, std::string& ns) {
    std::mt19937 rng(1234u + static_cast<unsigned>(gate));
    auto record = [&](const std::string& text, const dims& d, const input_set& in, std::size_t idx, std::int64_t ne0) {
      std::int64_t elems = 0;
      for (const host_input& h : in) elems += h.n();
      for (finding& f : out)
        if (f.gate == gate) {  // keep one finding per gate: the one on the smallest input
          if (elems < f.elems) f = {gate, text + " at " + dims_str(d), d, elems, repro_text(in, idx, ne0)};
          return;
        }
      out.push_back({gate, text + " at " + dims_str(d), d, elems, repro_text(in, idx, ne0)});
    };
    if (s.served.empty()) return false;
    const dims& d0 = s.served[0];
    if (gate == 1) {
      if (!s.control_gate && s.family == "quantized") return false;  // no block holds a non-finite input
      bool any = false;
      for (const auto& decl : s.inputs(d0)) any |= decl.nonfinite;
      if (!any) return false;
      for (const dims& d : s.served) {
        input_set in = make_inputs(s, d, rng, true);
        run_out r = run_kernel(be_, s, d, in, 1);
        if (!r.not_served.empty()) return ns = r.not_served, false;
        reference ref;
        s.ref(in, d, ref);
        std::size_t bad = 0;
        const std::string e = compare(s, 1, ref, to_doubles(r.type, r.bytes[0]), r.type, &bad, d);
        if (!e.empty()) record((s.nan_rule.empty() ? "" : "stated rule (" + s.nan_rule + "): ") + e, d, in, bad, r.ne[0]);
      }
      return true;
    }
    if (gate == 2) {
      input_set in = make_inputs(s, d0, rng, false);
      run_out r = run_kernel(be_, s, d0, in, 5);
      if (!r.not_served.empty()) return ns = r.not_served, false;
      for (const std::string& p : r.problems) {
        record(p, d0, in, 0, r.ne[0]);
        break;
      }
      for (std::size_t k = 1; k < r.bytes.size(); ++k)
        if (r.bytes[k] != r.bytes[0]) {
          std::size_t i = 0, es = gk::type_size(r.type);
          while (i < r.bytes[0].size() && r.bytes[k][i] == r.bytes[0][i]) ++i;
          record("run " + std::to_string(k) + " differs from run 0 at output byte " + std::to_string(i), d0, in, i / es, r.ne[0]);
          break;
        }
      return true;
    }
    if (gate == 3) {
      for (const dims& d : gate3_shapes(s)) {
        input_set in = make_inputs(s, d, rng, false);
        run_out r = run_kernel(be_, s, d, in, 1);
        if (!r.not_served.empty()) return ns = r.not_served, false;
        reference ref;
        s.ref(in, d, ref);
        std::size_t bad = 0;
        const std::string e = compare(s, 3, ref, to_doubles(r.type, r.bytes[0]), r.type, &bad, d);
        if (!e.empty()) record(e, d, in, bad, r.ne[0]);
      }
      return true;
    }
    // gate 4
    if (!s.gate4_fill) return false;
    const dims& d = s.gate4_dims.empty() ? d0 : s.gate4_dims;
    input_set in = make_inputs(s, d, rng, false);
    s.gate4_fill(in, d, rng);
    for (host_input& h : in) encode(h);
    const auto terms = s.gate4_terms(in, d);
    std::vector<double> want, bound;
    double max_partial = 0, max_abs_sum = 0;
    for (const auto& t : terms) {
      double acc = 0, sabs = 0;
      for (double x : t) {
        acc += x;
        sabs += std::fabs(x);
        max_partial = std::max(max_partial, std::fabs(acc));
      }
      max_abs_sum = std::max(max_abs_sum, sabs);
      want.push_back(acc * s.gate4_scale);
      bound.push_back(std::fabs(acc * s.gate4_scale) * (half_ulp(gk::type::f32) + gamma_n(s.gate4_post)) + 1e-45);
    }
    if (max_abs_sum >= 16777216.0 || max_partial < 262144.0) {
      out.push_back({0, "the gate-4 input is wrong: partial sums reach " + num(max_partial) + ", |terms| sum to " +
                            num(max_abs_sum) + " (want about 2^20, below 2^24)", d, 0, {}});
      return true;
    }
    // the input must tell: every half replay misses by at least 100x the exact-sum bound
    for (gk::type ht : {gk::type::f16, gk::type::bf16})
      for (int how = 0; how < 3; ++how) {
        bool tells = false;
        for (std::size_t i = 0; i < terms.size() && !tells; ++i) {
          const double miss = std::fabs(replay(terms[i], ht, how) * s.gate4_scale - want[i]);
          tells = miss != 0 && !(miss < 100 * bound[i]);  // a NaN or infinite miss tells too
        }
        if (!tells) {
          out.push_back({0, std::string("the gate-4 input cannot tell: a ") + std::string(gk::name(ht)) + " replay (" +
                                (how == 0 ? "one chain" : how == 1 ? "contiguous halves" : "32 lanes") +
                                ") meets 100x the exact-sum bound", d, 0, {}});
          return true;
        }
      }
    run_out r = run_kernel(be_, s, d, in, 1);
    if (!r.not_served.empty()) return ns = r.not_served, false;
    const std::vector<double> got = to_doubles(r.type, r.bytes[0]);
    for (std::size_t i = 0; i < want.size() && i < got.size(); ++i) {
      const double b = std::fabs(want[i]) * half_ulp(r.type) + bound[i];
      if (!(std::fabs(got[i] - want[i]) <= b)) {
        record("out[" + std::to_string(i) + "] got " + num(got[i]) + ", exact sum " + num(want[i]) + ": misses the exact-sum bound " +
                   num(b) + " (the sums are not fp32)",
               d, in, i, r.ne[0]);
        break;
      }
    }
    return true;
  }

  std::string program_;
  backend_hooks be_;
  options opt_;
  std::vector<spec> specs_;
  std::map<std::string, std::vector<known_entry>> known_;
};

// known.txt: `<program> <gate> <spec name> : <what fails>`; gate-5 lines are limits.py's.
inline void read_known(harness& h, const std::string& program, const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return;
  char line[1024];
  while (std::fgets(line, sizeof line, f)) {
    std::string s(line);
    if (auto c = s.find('#'); c != std::string::npos) s.resize(c);
    std::istringstream is(s);
    std::string prog;
    int gate = 0;
    if (!(is >> prog >> gate) || prog != program || gate < 1 || gate > 4) continue;
    std::string rest;
    std::getline(is, rest);
    const auto colon = rest.find(" : ");
    if (colon == std::string::npos) continue;
    auto trim = [](std::string x) {
      x.erase(0, x.find_first_not_of(" \t"));
      x.erase(x.find_last_not_of(" \t\r\n") + 1);
      return x;
    };
    h.add_known(trim(rest.substr(0, colon)), gate, trim(rest.substr(colon + 3)));
  }
  std::fclose(f);
}

inline options parse_args(int argc, char** argv, std::string& known_path) {
  options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--only" && i + 1 < argc) o.only = argv[++i];
    else if (a == "--repro") o.repro = true;
    else if (a == "--verbose") o.verbose = true;
    else if (a == "--known" && i + 1 < argc) known_path = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--only TEXT] [--repro] [--verbose] [--known known.txt]\n", argv[0]);
      std::exit(2);
    }
  }
  return o;
}

}  // namespace gk_contract
