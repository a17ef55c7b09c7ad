// SPDX-License-Identifier: MIT
// CUDA kernels: the elementwise family (gk/cpu/elementwise.hpp is the definition).
//
// Every op here computes each destination element from source elements at the same (or a
// broadcast) index, so one thread per element reproduces the CPU's arithmetic exactly:
// loads widen f16/bf16 to f32, the f32 body is the CPU's operation for operation
// (device_math.cuh: gk's exp/erf/tanh polynomials, products that feed sums rounded
// apart as the CPU's contraction-off build does), the store rounds once as the CPU's
// narrowing does. Results are the CPU's bits, except where the CPU calls libm (log, sin,
// cos, log1p in softplus): those are within 1 ulp. expm1 (elu, expm1, xielu) is glibc's
// expm1f itself (dm::expm1), so those are the bits of a CPU on glibc up to 2.36's algorithm.
//
// Tensors are read and written through byte strides, so views, permutes and transposes
// need no copy. A thread's element k is split into (i0, i1, i2, i3) of the destination
// by division in 32-bit arithmetic when the element count fits (the common case), 64-bit
// otherwise.
#include "device_math.cuh"
#include "ops.hpp"

namespace gk::cuda {

namespace {

constexpr unsigned ew_threads = 256;

// the broadcast arithmetic ops
enum class bop : int { add, sub, mul, div };
// the one-source ops
enum class mop : int { sqr, sqrt, log, sin, cos, unary, scale, scale_bias, clamp, leaky_relu, add1, fill };

struct map_params {
  int op = 0;
  int unary = 0;
  float p[5] = {};
  const char* scalar = nullptr;  // add1: b's one element
  int scalar_type = 0;
};


__device__ __forceinline__ const char* at(const tview& t, std::int64_t i0, std::int64_t i1, std::int64_t i2,
                                          std::int64_t i3) {
  return t.data + i0 * t.nb[0] + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}

template <class IT>
__global__ __launch_bounds__(ew_threads) void ew_binary_kernel(tview d, int dt, tview a, int at_, tview b, int bt,
                                                               int o, IT n) {
  for (IT k = static_cast<IT>(blockIdx.x) * ew_threads + threadIdx.x; k < n; k += static_cast<IT>(gridDim.x) * ew_threads) {
    IT i0, i1, i2, i3;
    split_index(k, d.ne, i0, i1, i2, i3);
    const float x = dm::load(at(a, i0, i1, i2, i3), at_);
    const float g = dm::load(at(b, i0 % b.ne[0], i1 % b.ne[1], i2 % b.ne[2], i3 % b.ne[3]), bt);
    float y;
    switch (static_cast<bop>(o)) {
      case bop::add: y = __fadd_rn(x, g); break;
      case bop::sub: y = __fsub_rn(x, g); break;
      case bop::mul: y = __fmul_rn(x, g); break;
      default: y = __fdiv_rn(x, g); break;
    }
    dm::store(const_cast<char*>(at(d, i0, i1, i2, i3)), dt, y);
  }
}

__device__ __forceinline__ float unary_of(int u, float v, float an, float ap, float beta, float eps) {
  switch (static_cast<unary_op>(u)) {
    case unary_op::abs: return fabsf(v);
    case unary_op::sgn: return v > 0.0f ? 1.0f : (v < 0.0f ? -1.0f : 0.0f);
    case unary_op::neg: return -v;
    case unary_op::step: return v > 0.0f ? 1.0f : 0.0f;
    case unary_op::tanh: return dm::tanh(v);
    case unary_op::elu: return v > 0.0f ? v : dm::expm1(v);
    case unary_op::relu: return v > 0.0f ? v : 0.0f;
    case unary_op::sigmoid: return dm::sigmoid(v);
    case unary_op::gelu: return dm::gelu_tanh(v);
    case unary_op::gelu_quick: return dm::gelu_quick(v);
    case unary_op::silu: return dm::silu(v);
    case unary_op::hardswish: return __fmul_rn(v, fminf(1.0f, fmaxf(0.0f, __fdiv_rn(__fadd_rn(v, 3.0f), 6.0f))));
    case unary_op::hardsigmoid: return fminf(1.0f, fmaxf(0.0f, __fdiv_rn(__fadd_rn(v, 3.0f), 6.0f)));
    case unary_op::exp: return dm::exp(v);
    case unary_op::expm1: return dm::expm1(v);
    case unary_op::softplus: return v > 20.0f ? v : dm::libm_log1p(dm::exp(v));
    case unary_op::gelu_erf: return dm::gelu_erf(v);
    case unary_op::xielu: {
      // op_params 1..4; fminf: a NaN v gives eps, as the CPU's std::fmin
      if (v > 0.0f) return __fadd_rn(__fmul_rn(__fmul_rn(ap, v), v), __fmul_rn(beta, v));
      return __fadd_rn(__fmul_rn(__fsub_rn(dm::expm1(fminf(v, eps)), v), an), __fmul_rn(beta, v));
    }
    case unary_op::floor: return floorf(v);
    case unary_op::ceil: return ceilf(v);
    case unary_op::round: return roundf(v);
    default: return truncf(v);
  }
}

template <class IT>
__global__ __launch_bounds__(ew_threads) void ew_map_kernel(tview d, int dt, tview a, int at_, map_params prm, IT n) {
  float add1 = 0.0f;
  if (static_cast<mop>(prm.op) == mop::add1) add1 = dm::load(prm.scalar, prm.scalar_type);
  for (IT k = static_cast<IT>(blockIdx.x) * ew_threads + threadIdx.x; k < n; k += static_cast<IT>(gridDim.x) * ew_threads) {
    IT i0, i1, i2, i3;
    split_index(k, d.ne, i0, i1, i2, i3);
    const float x = static_cast<mop>(prm.op) == mop::fill ? 0.0f : dm::load(at(a, i0, i1, i2, i3), at_);
    float y;
    switch (static_cast<mop>(prm.op)) {
      case mop::sqr: y = __fmul_rn(x, x); break;
      case mop::sqrt: y = __fsqrt_rn(x); break;
      case mop::log: y = dm::libm_log(x); break;
      case mop::sin: y = dm::libm_sin(x); break;
      case mop::cos: y = dm::libm_cos(x); break;
      case mop::unary: y = unary_of(prm.unary, x, prm.p[0], prm.p[1], prm.p[2], prm.p[3]); break;
      case mop::scale: y = __fmul_rn(x, prm.p[0]); break;
      case mop::scale_bias: y = __fmaf_rn(x, prm.p[0], prm.p[1]); break;
      case mop::clamp: {
        // min first, then max, with the CPU's comparisons: NaN gives max(hi, lo)
        const float m = x < prm.p[1] ? x : prm.p[1];
        y = m > prm.p[0] ? m : prm.p[0];
        break;
      }
      case mop::leaky_relu:
        y = __fadd_rn(x > 0.0f ? x : 0.0f, __fmul_rn(prm.p[0], x < 0.0f ? x : 0.0f));
        break;
      case mop::add1: y = __fadd_rn(x, add1); break;
      default: y = prm.p[0]; break;  // fill
    }
    dm::store(const_cast<char*>(at(d, i0, i1, i2, i3)), dt, y);
  }
}

struct glu_params {
  int g = 0;
  float alpha = 0.0f, limit = 0.0f;
  std::int64_t x_off = 0, g_off = 0;  // element offsets of x and gate within a's row (fused form)
  int split = 0;                      // gate from b
};

template <class IT>
__global__ __launch_bounds__(ew_threads) void ew_glu_kernel(tview d, tview a, tview b, int t, glu_params prm, IT n) {
  for (IT k = static_cast<IT>(blockIdx.x) * ew_threads + threadIdx.x; k < n; k += static_cast<IT>(gridDim.x) * ew_threads) {
    IT i0, i1, i2, i3;
    split_index(k, d.ne, i0, i1, i2, i3);
    const float x = dm::load(at(a, i0 + prm.x_off, i1, i2, i3), t);
    const float g = prm.split ? dm::load(at(b, i0, i1, i2, i3), t) : dm::load(at(a, i0 + prm.g_off, i1, i2, i3), t);
    float y;
    switch (static_cast<glu_op>(prm.g)) {
      case glu_op::reglu: y = x > 0.0f ? __fmul_rn(x, g) : 0.0f; break;
      case glu_op::geglu: y = __fmul_rn(dm::gelu_tanh(x), g); break;
      case glu_op::swiglu: y = __fmul_rn(dm::silu(x), g); break;
      case glu_op::geglu_erf: y = __fmul_rn(dm::gelu_erf(x), g); break;
      case glu_op::geglu_quick: y = __fmul_rn(dm::gelu_quick(x), g); break;
      case glu_op::swiglu_oai: {
        // std::min / std::clamp comparisons: a NaN x or g passes through
        const float xc = prm.limit < x ? prm.limit : x;
        const float gc = g < -prm.limit ? -prm.limit : (prm.limit < g ? prm.limit : g);
        const float e = dm::exp(__fmul_rn(-prm.alpha, xc));
        y = __fmul_rn(__fdiv_rn(xc, __fadd_rn(1.0f, e)), __fadd_rn(gc, 1.0f));
        break;
      }
      default: {  // swiglu_clamp
        const float xc = prm.limit < x ? prm.limit : x;
        const float gc = g < -prm.limit ? -prm.limit : (prm.limit < g ? prm.limit : g);
        y = __fmul_rn(dm::silu(xc), gc);
        break;
      }
    }
    dm::store(const_cast<char*>(at(d, i0, i1, i2, i3)), t, y);
  }
}

// a[:, i1, i2] + b[:, ids[i1, i2]] in f32; an id outside b's rows gives NaN (the CPU throws)
template <class IT>
__global__ __launch_bounds__(ew_threads) void ew_add_id_kernel(tview d, tview a, tview b, tview ids, IT n) {
  for (IT k = static_cast<IT>(blockIdx.x) * ew_threads + threadIdx.x; k < n; k += static_cast<IT>(gridDim.x) * ew_threads) {
    IT i0, i1, i2, i3;
    split_index(k, d.ne, i0, i1, i2, i3);
    const std::int32_t id = *reinterpret_cast<const std::int32_t*>(ids.data + i1 * ids.nb[0] + i2 * ids.nb[1]);
    float y = __int_as_float(0x7fc00000);
    if (id >= 0 && id < b.ne[1])
      y = __fadd_rn(dm::load(at(a, i0, i1, i2, i3), 0), dm::load(at(b, i0, id, 0, 0), 0));
    *reinterpret_cast<float*>(const_cast<char*>(at(d, i0, i1, i2, i3))) = y;
  }
}

__global__ __launch_bounds__(ew_threads) void ew_arange_kernel(tview d, float start, float step) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * ew_threads + threadIdx.x;
  if (i < d.ne[0])
    *reinterpret_cast<float*>(d.data + i * d.nb[0]) = __fmaf_rn(step, static_cast<float>(i), start);
}

bool is_f(type t) { return is_float_type(t); }
int tid(type t) { return static_cast<int>(t); }

unsigned grid_for(std::int64_t n, const exec& x) {
  const std::int64_t cap = static_cast<std::int64_t>(x.props.sm_count > 0 ? x.props.sm_count : 132) * 16;
  const std::int64_t b = (n + ew_threads - 1) / ew_threads;
  return static_cast<unsigned>(b < cap ? b : cap);
}

bool fits32(std::int64_t n) { return n < (std::int64_t{1} << 31); }

template <class Launch>
void launch_sized(std::int64_t n, Launch&& l) {
  if (fits32(n)) l(std::uint32_t{});
  else l(std::uint64_t{});
}

const tview no_view{};

}  // namespace

bool elementwise_supports(const tensor* node) {
  const tensor* a = node->src[0];
  const tensor* b = node->src[1];
  const type d = node->type;
  switch (node->op) {
    case op::add: case op::sub: case op::mul: case op::div:
      // the CPU's pairs: one float type, or f16/bf16 a with f32 b (result a's type or f32)
      if (!a || !b || !is_f(a->type) || !node->same_shape(*a) || !b->can_repeat_to(*node)) return false;
      if (a->type == type::f32) return b->type == type::f32 && d == type::f32;
      return (b->type == a->type && d == a->type) || (b->type == type::f32 && (d == a->type || d == type::f32));
    case op::add1:
      return a && b && is_f(a->type) && d == a->type && (b->type == a->type || b->type == type::f32) &&
             node->same_shape(*a);
    case op::add_id: {
      const tensor* ids = node->src[2];
      return a && b && ids && a->type == type::f32 && b->type == type::f32 && d == type::f32 &&
             ids->type == type::i32 && node->same_shape(*a) && b->ne[0] == a->ne[0] && ids->ne[0] >= a->ne[1] &&
             ids->ne[1] >= a->ne[2] && a->ne[3] == 1;
    }
    case op::unary:
      if (node->op_params[0] < 0 || node->op_params[0] >= static_cast<int>(unary_op::count)) return false;
      [[fallthrough]];
    case op::sqr: case op::sqrt: case op::log: case op::sin: case op::cos: case op::clamp: case op::leaky_relu:
    case op::scale:
      return a && is_f(a->type) && is_f(d) && node->same_shape(*a);
    case op::glu: {
      if (node->op_params[0] < 0 || node->op_params[0] >= static_cast<int>(glu_op::count)) return false;
      if (!a || !is_f(a->type) || d != a->type || (b && b->type != a->type)) return false;
      const std::int64_t nc = node->ne[0];
      if (a->ne[0] < (b ? nc : 2 * nc)) return false;
      for (int i = 1; i < 4; ++i)
        if (a->ne[i] != node->ne[i] || (b && b->ne[i] != node->ne[i])) return false;
      return !b || b->ne[0] >= nc;
    }
    case op::fill: return a && is_f(a->type) && is_f(d);
    case op::arange: return d == type::f32;
    default: return false;
  }
}

void elementwise_run(const tensor* node, exec& x) {
  const tensor* a = node->src[0];
  const tensor* b = node->src[1];
  const tview dv = view_of(node);
  const std::int64_t n = node->nelements();
  if (n == 0) return;
  const unsigned grid = grid_for(n, x);
  switch (node->op) {
    case op::add: case op::sub: case op::mul: case op::div: {
      const int o = node->op == op::add ? 0 : node->op == op::sub ? 1 : node->op == op::mul ? 2 : 3;
      launch_sized(n, [&](auto it) {
        using IT = decltype(it);
        ew_binary_kernel<IT><<<grid, ew_threads, 0, x.stream>>>(dv, tid(node->type), view_of(a), tid(a->type),
                                                                view_of(b), tid(b->type), o, static_cast<IT>(n));
      });
      break;
    }
    case op::add_id:
      launch_sized(n, [&](auto it) {
        using IT = decltype(it);
        ew_add_id_kernel<IT><<<grid, ew_threads, 0, x.stream>>>(dv, view_of(a), view_of(b), view_of(node->src[2]),
                                                                static_cast<IT>(n));
      });
      break;
    case op::glu: {
      glu_params prm;
      prm.g = node->param_i32(0);
      prm.alpha = node->param_f32(2);
      prm.limit = node->param_f32(3);
      prm.split = b != nullptr;
      if (!b) {
        const bool swapped = node->param_i32(1) != 0;
        prm.x_off = swapped ? node->ne[0] : 0;
        prm.g_off = swapped ? 0 : node->ne[0];
      }
      launch_sized(n, [&](auto it) {
        using IT = decltype(it);
        ew_glu_kernel<IT><<<grid, ew_threads, 0, x.stream>>>(dv, view_of(a), b ? view_of(b) : no_view,
                                                             tid(a->type), prm, static_cast<IT>(n));
      });
      break;
    }
    case op::arange:
      ew_arange_kernel<<<blocks_for(node->ne[0], ew_threads), ew_threads, 0, x.stream>>>(dv, node->param_f32(0),
                                                                                       node->param_f32(2));
      break;
    default: {
      map_params prm;
      switch (node->op) {
        case op::sqr: prm.op = static_cast<int>(mop::sqr); break;
        case op::sqrt: prm.op = static_cast<int>(mop::sqrt); break;
        case op::log: prm.op = static_cast<int>(mop::log); break;
        case op::sin: prm.op = static_cast<int>(mop::sin); break;
        case op::cos: prm.op = static_cast<int>(mop::cos); break;
        case op::unary:
          prm.op = static_cast<int>(mop::unary);
          prm.unary = node->param_i32(0);
          for (int i = 0; i < 4; ++i) prm.p[i] = node->param_f32(i + 1);
          break;
        case op::scale:
          // b == 0 is a plain product, as the CPU (no fma, so -0 and the rounding match)
          prm.op = static_cast<int>(node->param_f32(1) == 0.0f ? mop::scale : mop::scale_bias);
          prm.p[0] = node->param_f32(0);
          prm.p[1] = node->param_f32(1);
          break;
        case op::clamp:
          prm.op = static_cast<int>(mop::clamp);
          prm.p[0] = node->param_f32(0);
          prm.p[1] = node->param_f32(1);
          break;
        case op::leaky_relu:
          prm.op = static_cast<int>(mop::leaky_relu);
          prm.p[0] = node->param_f32(0);
          break;
        case op::add1:
          prm.op = static_cast<int>(mop::add1);
          prm.scalar = static_cast<const char*>(b->data);
          prm.scalar_type = tid(b->type);
          break;
        case op::fill:
          prm.op = static_cast<int>(mop::fill);
          prm.p[0] = node->param_f32(0);
          break;
        default: throw error("gk: CUDA: no elementwise kernel for " + describe(node));
      }
      launch_sized(n, [&](auto it) {
        using IT = decltype(it);
        ew_map_kernel<IT><<<grid, ew_threads, 0, x.stream>>>(dv, tid(node->type), view_of(a), tid(a->type), prm,
                                                             static_cast<IT>(n));
      });
      break;
    }
  }
  GK_CUDA_LAUNCHED();
}

}  // namespace gk::cuda
