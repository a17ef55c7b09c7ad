// SPDX-License-Identifier: MIT
// A target module of libgk.so: the C ABI over the header-only library, compiled once per
// SIMD target (meson builds libgk-scalar.so, libgk-avx2.so, libgk-avx512.so from this one
// file with different -m flags). It exports one symbol, the table of c_api_entries.inc;
// libgk.so (dispatch.cpp) loads the module this CPU runs best and forwards to the table.
//
// Why a module per target and not one library: the headers are inline templates, and the
// same inline function compiled with different -m flags in several objects of ONE link is
// an ODR violation the linker resolves by keeping one copy for all callers, perhaps the
// AVX-512 one. Here each module is its own link, its version script makes every symbol
// but the entry local, and libgk.so opens it RTLD_LOCAL: no copy can be bound across
// targets.
//
// Every entry point checks its input, runs the templates, and turns any exception into a
// non-zero return (or NULL) with a thread-local message. Rows at any address are accepted:
// a row that is not aligned for its block struct is staged through an aligned copy.
#include "c_api_table.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <string>
#include <vector>

#include "gk/gk.hpp"

#ifdef GK_MODULE_TARGET
static_assert(gk::simd::native::name == GK_MODULE_TARGET,
              "this module's compiler flags do not select the SIMD target it is named for");
#endif

namespace {

thread_local std::string last_error;

int fail(std::string msg) {
  last_error = std::move(msg);
  return 1;
}

std::string describe(gk::type t, std::int64_t n) {
  std::string s = "type ";
  if (gk::is_valid(t))
    s += gk::name(t);
  else
    s += "id " + std::to_string(static_cast<int>(t));
  return s + ", n=" + std::to_string(n);
}

// Validates (t, n, pointers); returns an empty string when fine.
std::string check(const char* fn, gk::type t, std::int64_t n, std::initializer_list<std::pair<const char*, const void*>> ptrs) {
  const std::string where = std::string(fn) + " (" + describe(t, n) + "): ";
  if (!gk::is_valid(t)) return where + "not a GGUF type id";
  bool has_format = false;
  gk::formats::visit(t, [&](auto) { has_format = true; });
  if (!has_format) return where + "gk has no block format for this type (it cannot be encoded, decoded or dotted)";
  if (n < 0) return where + "negative length";
  if (n % gk::block_size(t) != 0)
    return where + "n is not a multiple of the block size " + std::to_string(gk::block_size(t));
  if (n > 0)
    for (auto [name, p] : ptrs)
      if (!p) return where + name + " is NULL";
  return {};
}

// A pointer to n blocks of B, copied to aligned storage when p is misaligned.
template <class B>
const B* aligned_in(const void* p, std::size_t count, std::vector<B>& store) {
  if (reinterpret_cast<std::uintptr_t>(p) % alignof(B) == 0) return static_cast<const B*>(p);
  store.resize(count);
  std::memcpy(store.data(), p, count * sizeof(B));
  return store.data();
}

// Runs f; an exception becomes `failed` (1 for an int return, NULL for a pointer) and a
// message for gk_last_error. Success leaves the last message as it was.
template <class F>
std::invoke_result_t<F&> guarded(const char* fn, std::invoke_result_t<F&> failed, F&& f) noexcept {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    last_error = std::string(fn) + ": out of memory";
  } catch (const std::exception& e) {
    last_error = e.what();
  } catch (...) {
    last_error = std::string(fn) + ": unknown internal error";
  }
  return failed;
}
#define GUARD(failed, ...) guarded(__func__, failed, [&]() __VA_ARGS__)

// An argument that must be there.
template <class T>
T* need(T* p, const char* fn, const char* what) {
  if (!p) throw gk::error(std::string("gk_") + fn + ": " + what + " is NULL");
  return p;
}

// ---- handles: each C handle is the C++ object itself ----
gk::context* ctx_of(gk_context* c) { return reinterpret_cast<gk::context*>(c); }
const gk::context* ctx_of(const gk_context* c) { return reinterpret_cast<const gk::context*>(c); }
gk::tensor* ten(gk_tensor* t) { return reinterpret_cast<gk::tensor*>(t); }
const gk::tensor* ten(const gk_tensor* t) { return reinterpret_cast<const gk::tensor*>(t); }
gk_tensor* out(gk::tensor* t) { return reinterpret_cast<gk_tensor*>(t); }
gk::graph* gra(gk_graph* g) { return reinterpret_cast<gk::graph*>(g); }
const gk::graph* gra(const gk_graph* g) { return reinterpret_cast<const gk::graph*>(g); }
gk::backend* bk(gk_backend* b) { return reinterpret_cast<gk::backend*>(b); }
const gk::backend* bk(const gk_backend* b) { return reinterpret_cast<const gk::backend*>(b); }
gk::buffer_type* bt(gk_buffer_type* b) { return reinterpret_cast<gk::buffer_type*>(b); }
const gk::buffer_type* bt(const gk_buffer_type* b) { return reinterpret_cast<const gk::buffer_type*>(b); }
gk::backend_buffer* buf(gk_buffer* b) { return reinterpret_cast<gk::backend_buffer*>(b); }
const gk::backend_buffer* buf(const gk_buffer* b) { return reinterpret_cast<const gk::backend_buffer*>(b); }
gk::graph_allocator* ga(gk_gallocr* a) { return reinterpret_cast<gk::graph_allocator*>(a); }
const gk::graph_allocator* ga(const gk_gallocr* a) { return reinterpret_cast<const gk::graph_allocator*>(a); }
gk::sched* sch(gk_sched* s) { return reinterpret_cast<gk::sched*>(s); }
const gk::sched* sch(const gk_sched* s) { return reinterpret_cast<const gk::sched*>(s); }

// ---- builder arguments: C types to the C++ builders' types ----
gk::context& cv(gk_context* c) {
  if (!c) throw gk::error("gk: the context is NULL");
  return *ctx_of(c);
}
gk::tensor* cv(gk_tensor* t) { return ten(t); }
const gk::tensor* cv(const gk_tensor* t) { return ten(t); }
gk::tensor* const* cv(gk_tensor* const* t) { return reinterpret_cast<gk::tensor* const*>(t); }
gk::type cv(gk_type t) { return static_cast<gk::type>(t); }
gk::unary_op cv(gk_unary_op o) { return static_cast<gk::unary_op>(o); }
gk::glu_op cv(gk_glu_op o) { return static_cast<gk::glu_op>(o); }
gk::sort_order cv(gk_sort_order o) { return static_cast<gk::sort_order>(o); }
gk::tri_type cv(gk_tri_type o) { return static_cast<gk::tri_type>(o); }
gk::pool_op cv(gk_pool_op o) { return static_cast<gk::pool_op>(o); }
gk::scale_mode cv(gk_scale_mode o) { return static_cast<gk::scale_mode>(o); }
// gk::tensor is gk_tensor (the C handle is the C++ object), so the callbacks agree in
// everything but the spelling of the pointee type.
gk::custom1_fn cv(gk_custom1_fn f) { return reinterpret_cast<gk::custom1_fn>(f); }
gk::custom2_fn cv(gk_custom2_fn f) { return reinterpret_cast<gk::custom2_fn>(f); }
gk::custom3_fn cv(gk_custom3_fn f) { return reinterpret_cast<gk::custom3_fn>(f); }
gk::custom_fn cv(gk_custom_fn f) { return reinterpret_cast<gk::custom_fn>(f); }
template <class T>
  requires std::is_arithmetic_v<T> || std::is_pointer_v<T>
T cv(T v) {
  return v;
}

// The CPU backend inside a C handle (its runner owns the thread pool).
gk::cpu_backend* as_cpu(gk_backend* b) { return dynamic_cast<gk::cpu_backend*>(bk(need(b, "backend", "backend"))); }

const gk::device_info* device(int i) {
  const auto& ds = gk::devices();
  if (i < 0 || static_cast<std::size_t>(i) >= ds.size())
    throw gk::error("gk: device " + std::to_string(i) + " does not exist (" + std::to_string(ds.size()) +
                    " devices)");
  return &ds[static_cast<std::size_t>(i)];
}

int threads(int n) { return n > 0 ? n : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

}  // namespace

namespace impl {

// ---- the type layer ----

const char* type_name(gk_type t) {
  const auto g = static_cast<gk::type>(t);
  return gk::is_valid(g) ? gk::name(g).data() : nullptr;  // names are literals: NUL-terminated
}
int64_t blck_size(gk_type t) { return gk::block_size(static_cast<gk::type>(t)); }
size_t type_size(gk_type t) { return gk::type_size(static_cast<gk::type>(t)); }
size_t row_size(gk_type t, int64_t n) {
  const auto g = static_cast<gk::type>(t);
  if (!gk::is_valid(g) || n < 0 || n % gk::block_size(g) != 0) return 0;
  return gk::row_size(g, n);
}

gk_type vec_dot_type(gk_type t) {
  gk_type r = GK_TYPE_COUNT;
  gk::formats::visit(static_cast<gk::type>(t), [&]<class W>(std::type_identity<W>) {
    r = static_cast<gk_type>(W::dot_type::id);
  });
  return r;
}

int quantize_row(gk_type t, const float* src, void* dst, int64_t n, const float* imatrix) {
  return GUARD(1, {
    const auto g = static_cast<gk::type>(t);
    if (auto e = check("gk_quantize_row", g, n, {{"src", src}, {"dst", dst}}); !e.empty()) return fail(e);
    if (gk::is_quantized(g)) {
      // Block formats cannot represent non-finite values: refuse rather than write garbage.
      for (int64_t i = 0; i < n; ++i)
        if (!std::isfinite(src[i]))
          return fail("gk_quantize_row (" + describe(g, n) + "): src[" + std::to_string(i) +
                      "] is not finite; block formats cannot encode NaN or infinity");
      if (imatrix)
        for (int64_t i = 0; i < n; ++i)
          if (!std::isfinite(imatrix[i]) || imatrix[i] < 0.0f)
            return fail("gk_quantize_row (" + describe(g, n) + "): imatrix[" + std::to_string(i) +
                        "] is negative or not finite");
    }
    gk::formats::visit(g, [&]<class W>(std::type_identity<W>) {
      using B = typename W::block;
      const std::size_t nb = static_cast<std::size_t>(n / W::block_size);
      if (reinterpret_cast<std::uintptr_t>(dst) % alignof(B) == 0) {
        gk::encode_row<W>(src, static_cast<B*>(dst), n, imatrix);
      } else {
        std::vector<B> tmp(nb);
        gk::encode_row<W>(src, tmp.data(), n, imatrix);
        std::memcpy(dst, tmp.data(), nb * sizeof(B));
      }
    });
    return 0;
  });
}

int dequantize_row(gk_type t, const void* src, float* dst, int64_t n) {
  return GUARD(1, {
    const auto g = static_cast<gk::type>(t);
    if (auto e = check("gk_dequantize_row", g, n, {{"src", src}, {"dst", dst}}); !e.empty()) return fail(e);
    gk::formats::visit(g, [&]<class W>(std::type_identity<W>) {
      using B = typename W::block;
      std::vector<B> store;
      gk::decode_row<W>(aligned_in<B>(src, static_cast<std::size_t>(n / W::block_size), store), dst, n);
    });
    return 0;
  });
}

int vec_dot(gk_type t, int64_t n, const void* w_row, const void* act_row, float* out) {
  return GUARD(1, {
    const auto g = static_cast<gk::type>(t);
    if (auto e = check("gk_vec_dot", g, n, {{"w_row", w_row}, {"act_row", act_row}}); !e.empty()) return fail(e);
    if (!out) return fail("gk_vec_dot (" + describe(g, n) + "): out is NULL");
    gk::formats::visit(g, [&]<class W>(std::type_identity<W>) {
      using B = typename W::block;
      using A = typename W::dot_type::block;
      std::vector<B> ws;
      std::vector<A> as;
      const B* w = aligned_in<B>(w_row, static_cast<std::size_t>(n / W::block_size), ws);
      const A* a = aligned_in<A>(act_row, static_cast<std::size_t>(n / W::dot_type::block_size), as);
      *out = gk::dot_row<W>(w, a, n);
    });
    return 0;
  });
}

// ---- contexts ----

gk_context* context_new(size_t mem_size, bool no_alloc) {
  return GUARD(nullptr, {
    gk::context_params p;
    p.mem_size = mem_size;
    p.no_alloc = no_alloc;
    return reinterpret_cast<gk_context*>(new gk::context(p));
  });
}
void context_free(gk_context* c) { delete ctx_of(c); }
size_t context_used(const gk_context* c) { return c ? ctx_of(c)->used() : 0; }
size_t context_size(const gk_context* c) { return c ? ctx_of(c)->size() : 0; }
int context_set_no_alloc(gk_context* c, bool no_alloc) {
  return GUARD(1, {
    need(c, "context_set_no_alloc", "ctx");
    ctx_of(c)->set_no_alloc(no_alloc);
    return 0;
  });
}
int context_n_tensors(const gk_context* c) { return c ? static_cast<int>(ctx_of(c)->tensors().size()) : 0; }
gk_tensor* context_tensor(const gk_context* c, int i) {
  if (!c || i < 0 || static_cast<std::size_t>(i) >= ctx_of(c)->tensors().size()) return nullptr;
  return out(ctx_of(c)->tensors()[static_cast<std::size_t>(i)]);
}
gk_tensor* context_find(const gk_context* c, const char* name) {
  return c && name ? out(ctx_of(c)->find(name)) : nullptr;
}
size_t tensor_overhead() { return gk::context::tensor_overhead(); }

// ---- tensors ----

gk_tensor* new_tensor(gk_context* c, gk_type type, int n_dims, const int64_t* ne) {
  return GUARD(nullptr, {
    need(ne, "new_tensor", "ne");
    return out(cv(c).new_tensor(cv(type), n_dims, ne));
  });
}
gk_tensor* new_tensor_1d(gk_context* c, gk_type type, int64_t ne0) {
  return GUARD(nullptr, { return out(cv(c).new_tensor_1d(cv(type), ne0)); });
}
gk_tensor* new_tensor_2d(gk_context* c, gk_type type, int64_t ne0, int64_t ne1) {
  return GUARD(nullptr, { return out(cv(c).new_tensor_2d(cv(type), ne0, ne1)); });
}
gk_tensor* new_tensor_3d(gk_context* c, gk_type type, int64_t ne0, int64_t ne1, int64_t ne2) {
  return GUARD(nullptr, { return out(cv(c).new_tensor_3d(cv(type), ne0, ne1, ne2)); });
}
gk_tensor* new_tensor_4d(gk_context* c, gk_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
  return GUARD(nullptr, { return out(cv(c).new_tensor_4d(cv(type), ne0, ne1, ne2, ne3)); });
}
gk_tensor* dup_tensor(gk_context* c, const gk_tensor* src) {
  return GUARD(nullptr, { return out(cv(c).dup_tensor(ten(need(src, "dup_tensor", "src")))); });
}
gk_tensor* view_tensor(gk_context* c, gk_tensor* src) {
  return GUARD(nullptr, { return out(cv(c).view_tensor(ten(need(src, "view_tensor", "src")))); });
}

gk_type tensor_type(const gk_tensor* t) { return t ? static_cast<gk_type>(ten(t)->type) : GK_TYPE_COUNT; }
int64_t tensor_ne(const gk_tensor* t, int d) { return t && d >= 0 && d < gk::max_dims ? ten(t)->ne[d] : 0; }
size_t tensor_nb(const gk_tensor* t, int d) { return t && d >= 0 && d < gk::max_dims ? ten(t)->nb[d] : 0; }
int tensor_n_dims(const gk_tensor* t) { return t ? ten(t)->n_dims() : 0; }
int64_t tensor_nelements(const gk_tensor* t) { return t ? ten(t)->nelements() : 0; }
int64_t tensor_nrows(const gk_tensor* t) { return t ? ten(t)->nrows() : 0; }
size_t tensor_nbytes(const gk_tensor* t) { return t ? ten(t)->nbytes() : 0; }
bool tensor_is_contiguous(const gk_tensor* t) { return t && ten(t)->is_contiguous(); }
void* tensor_data(const gk_tensor* t) { return t ? ten(t)->data : nullptr; }
int tensor_set_data(gk_tensor* t, void* data) {
  return GUARD(1, {
    gk::tensor* x = ten(need(t, "tensor_set_data", "t"));
    if (gk::buffer_of(x))
      throw gk::error("gk_tensor_set_data: " + gk::describe(x) + " is placed in a buffer; its storage is the buffer's");
    x->data = data;
    return 0;
  });
}
const char* tensor_name(const gk_tensor* t) { return t ? ten(t)->name : nullptr; }
int tensor_set_name(gk_tensor* t, const char* name) {
  return GUARD(1, {
    ten(need(t, "tensor_set_name", "t"))->set_name(need(name, "tensor_set_name", "name"));
    return 0;
  });
}
int tensor_op(const gk_tensor* t) { return t ? static_cast<int>(ten(t)->op) : -1; }
const char* op_name(int o) {
  return o >= 0 && static_cast<std::size_t>(o) < gk::op_names.size() ? gk::op_names[static_cast<std::size_t>(o)].data()
                                                                      : nullptr;
}
gk_tensor* tensor_src(const gk_tensor* t, int i) { return t && i >= 0 && i < gk::max_src ? out(ten(t)->src[i]) : nullptr; }
int32_t tensor_flags(const gk_tensor* t) { return t ? ten(t)->flags : 0; }
int set_flag(gk_tensor* t, std::int32_t f, const char* fn) {
  return GUARD(1, {
    ten(need(t, fn, "t"))->flags |= f;
    return 0;
  });
}
int set_input(gk_tensor* t) { return set_flag(t, gk::flag_input, "set_input"); }
int set_output(gk_tensor* t) { return set_flag(t, gk::flag_output, "set_output"); }
int set_param(gk_tensor* t) { return set_flag(t, gk::flag_param, "set_param"); }

// Through the buffer when the tensor is in one (a device copies), else plain host memory.
int tensor_set_bytes(gk_tensor* t, const void* src, size_t offset, size_t size) {
  return GUARD(1, {
    gk::tensor* x = ten(need(t, "tensor_set_bytes", "t"));
    if (size && !src) throw gk::error("gk_tensor_set_bytes: src is NULL");
    if (gk::backend_buffer* b = gk::buffer_of(x)) {
      b->set_tensor(x, src, offset, size);
      return 0;
    }
    const std::size_t span = x->nbytes();
    if (offset > span || size > span - offset)
      throw gk::error("gk_tensor_set_bytes on " + gk::describe(x) + ": bytes [" + std::to_string(offset) + ", " +
                      std::to_string(offset + size) + ") run past its " + std::to_string(span) + " bytes");
    if (!x->data && size) throw gk::error("gk_tensor_set_bytes on " + gk::describe(x) + ": the tensor has no storage");
    if (size) std::memcpy(static_cast<char*>(x->data) + offset, src, size);
    return 0;
  });
}
int tensor_get_bytes(const gk_tensor* t, void* dst, size_t offset, size_t size) {
  return GUARD(1, {
    const gk::tensor* x = ten(need(t, "tensor_get_bytes", "t"));
    if (size && !dst) throw gk::error("gk_tensor_get_bytes: dst is NULL");
    if (gk::backend_buffer* b = gk::buffer_of(x)) {
      b->get_tensor(x, dst, offset, size);
      return 0;
    }
    const std::size_t span = x->nbytes();
    if (offset > span || size > span - offset)
      throw gk::error("gk_tensor_get_bytes on " + gk::describe(x) + ": bytes [" + std::to_string(offset) + ", " +
                      std::to_string(offset + size) + ") run past its " + std::to_string(span) + " bytes");
    if (!x->data && size) throw gk::error("gk_tensor_get_bytes on " + gk::describe(x) + ": the tensor has no storage");
    if (size) std::memcpy(dst, static_cast<const char*>(x->data) + offset, size);
    return 0;
  });
}

// ---- changing a built node ----

int mul_mat_set_prec(gk_tensor* t, gk_prec p) {
  return GUARD(1, {
    gk::mul_mat_set_prec(ten(t), static_cast<gk::prec>(p));
    return 0;
  });
}
int flash_attn_ext_set_prec(gk_tensor* t, gk_prec p) {
  return GUARD(1, {
    gk::flash_attn_ext_set_prec(ten(t), static_cast<gk::prec>(p));
    return 0;
  });
}
int flash_attn_ext_get_prec(const gk_tensor* t, gk_prec* p) {
  return GUARD(1, {
    *need(p, "flash_attn_ext_get_prec", "out") = static_cast<gk_prec>(gk::flash_attn_ext_get_prec(ten(t)));
    return 0;
  });
}
int flash_attn_ext_set_n_kv_max(gk_tensor* t, int32_t n) {
  return GUARD(1, {
    gk::flash_attn_ext_set_n_kv_max(ten(t), n);
    return 0;
  });
}
int flash_attn_ext_add_sinks(gk_tensor* t, gk_tensor* sinks) {
  return GUARD(1, {
    gk::flash_attn_ext_add_sinks(ten(t), ten(sinks));
    return 0;
  });
}
int soft_max_add_sinks(gk_tensor* t, gk_tensor* sinks) {
  return GUARD(1, {
    gk::soft_max_add_sinks(ten(t), ten(sinks));
    return 0;
  });
}
int rope_yarn_corr_dims(int n_dims, int n_ctx_orig, float freq_base, float beta_fast, float beta_slow, float* dims) {
  return GUARD(1, {
    gk::rope_yarn_corr_dims(n_dims, n_ctx_orig, freq_base, beta_fast, beta_slow,
                            need(dims, "rope_yarn_corr_dims", "dims"));
    return 0;
  });
}

// ---- graphs ----

gk_graph* graph_new() {
  return GUARD(nullptr, { return reinterpret_cast<gk_graph*>(new gk::graph()); });
}
void graph_free(gk_graph* g) { delete gra(g); }
int build_forward_expand(gk_graph* g, gk_tensor* t) {
  return GUARD(1, {
    gra(need(g, "build_forward_expand", "graph"))->build_forward_expand(ten(need(t, "build_forward_expand", "t")));
    return 0;
  });
}
int graph_n_nodes(const gk_graph* g) { return g ? gra(g)->n_nodes() : 0; }
gk_tensor* graph_node(const gk_graph* g, int i) {
  if (!g || i >= gra(g)->n_nodes() || i < -gra(g)->n_nodes()) return nullptr;
  return out(gra(g)->node(i));
}
int graph_n_leafs(const gk_graph* g) { return g ? gra(g)->n_leafs() : 0; }
gk_tensor* graph_leaf(const gk_graph* g, int i) {
  if (!g || i < 0 || i >= gra(g)->n_leafs()) return nullptr;
  return out(gra(g)->leafs()[static_cast<std::size_t>(i)]);
}
int graph_clear(gk_graph* g) {
  return GUARD(1, {
    gra(need(g, "graph_clear", "graph"))->clear();
    return 0;
  });
}
int graph_compute(gk_graph* g, int n_threads) {
  return GUARD(1, {
    gk::cpu::compute(*gra(need(g, "graph_compute", "graph")), threads(n_threads));
    return 0;
  });
}

// ---- devices and backends ----

int device_count() {
  return GUARD(0, { return static_cast<int>(gk::devices().size()); });
}
const char* device_name(int i) {
  return GUARD(static_cast<const char*>(nullptr), { return device(i)->name.c_str(); });
}
const char* device_description(int i) {
  return GUARD(static_cast<const char*>(nullptr), { return device(i)->description.c_str(); });
}
const char* device_features(int i) {
  return GUARD(static_cast<const char*>(nullptr), { return device(i)->device_features.c_str(); });
}
int device_memory(int i, uint64_t* free_bytes, uint64_t* total_bytes) {
  return GUARD(1, {
    const gk::device_info* d = device(i);
    if (free_bytes) *free_bytes = d->memory_free;
    if (total_bytes) *total_bytes = d->memory_total;
    return 0;
  });
}
bool device_is_gpu(int i) {
  return GUARD(false, { return device(i)->type == gk::device_type::gpu; });
}
gk_backend* backend_from_device(int i) {
  return GUARD(static_cast<gk_backend*>(nullptr), {
    return reinterpret_cast<gk_backend*>(device(i)->make_backend().release());
  });
}
gk_backend* backend_cpu_new(int n_threads) {
  return GUARD(static_cast<gk_backend*>(nullptr), {
    return reinterpret_cast<gk_backend*>(static_cast<gk::backend*>(new gk::cpu_backend(n_threads)));
  });
}
void backend_free(gk_backend* b) { delete bk(b); }
int backend_cpu_set_n_threads(gk_backend* b, int n) {
  return GUARD(1, {
    gk::cpu_backend* c = as_cpu(b);
    if (!c) throw gk::error("gk_backend_cpu_set_n_threads: backend " + std::string(bk(b)->name()) + " is not the CPU's");
    c->set_n_threads(n);
    return 0;
  });
}
const char* backend_name(const gk_backend* b) { return b ? bk(b)->name().data() : nullptr; }
bool backend_is_cpu(const gk_backend* b) { return b && dynamic_cast<const gk::cpu_backend*>(bk(b)) != nullptr; }
bool backend_supports_op(const gk_backend* b, const gk_tensor* n) {
  return GUARD(false, { return b && n && bk(b)->supports_op(ten(n)); });
}
gk_buffer_type* backend_buffer_type(gk_backend* b) {
  return GUARD(static_cast<gk_buffer_type*>(nullptr), {
    return reinterpret_cast<gk_buffer_type*>(&bk(need(b, "backend_buffer_type", "backend"))->default_buffer_type());
  });
}
int backend_graph_compute(gk_backend* b, gk_graph* g) {
  return GUARD(1, {
    gk::backend* x = bk(need(b, "backend_graph_compute", "backend"));
    const gk::graph& gr = *gra(need(g, "backend_graph_compute", "graph"));
    for (gk::tensor* n : gr.nodes())
      if (!x->supports_op(n))
        throw gk::error("gk_backend_graph_compute: backend " + std::string(x->name()) + " has no kernel for " +
                        std::string(gk::name(n->op)) + " -> " + gk::describe(n) + " (the scheduler would run it elsewhere)");
    x->graph_compute(gr);
    x->synchronize();
    return 0;
  });
}

// ---- memory ----

gk_buffer_type* cpu_buffer_type() { return reinterpret_cast<gk_buffer_type*>(&gk::host_buffer_type()); }
gk_buffer_type* cpu_tiled_buffer_type() { return reinterpret_cast<gk_buffer_type*>(&gk::cpu_tiled_buffer_type()); }
const char* buffer_type_name(const gk_buffer_type* b) { return b ? bt(b)->name().data() : nullptr; }
size_t buffer_type_alignment(const gk_buffer_type* b) { return b ? bt(b)->alignment() : 0; }
bool buffer_type_is_host(const gk_buffer_type* b) { return b && bt(b)->is_host(); }
size_t buffer_type_alloc_size(const gk_buffer_type* b, const gk_tensor* t) {
  return b && t ? bt(b)->alloc_size(ten(t)) : 0;
}
gk_buffer* buffer_alloc(gk_buffer_type* b, size_t size) {
  return GUARD(static_cast<gk_buffer*>(nullptr), {
    return reinterpret_cast<gk_buffer*>(bt(need(b, "buffer_alloc", "buffer type"))->alloc_buffer(size).release());
  });
}
void buffer_free(gk_buffer* b) { delete buf(b); }
size_t buffer_size(const gk_buffer* b) { return b ? buf(b)->size : 0; }
void* buffer_base(const gk_buffer* b) { return b ? buf(b)->base : nullptr; }
int buffer_place_tensor(gk_buffer* b, gk_tensor* t, size_t offset) {
  return GUARD(1, {
    gk::tensor* x = ten(need(t, "buffer_place_tensor", "t"));
    if (x->view_src) throw gk::error("gk_buffer_place_tensor: " + gk::describe(x) + " is a view; place its base");
    buf(need(b, "buffer_place_tensor", "buffer"))->init_tensor(x, offset);
    return 0;
  });
}
int buffer_clear(gk_buffer* b, uint8_t value) {
  return GUARD(1, {
    buf(need(b, "buffer_clear", "buffer"))->clear(value);
    return 0;
  });
}
gk_buffer* alloc_ctx_tensors(gk_context* c, gk_buffer_type* b) {
  return GUARD(static_cast<gk_buffer*>(nullptr), {
    gk::buffer_type& type = *bt(need(b, "alloc_ctx_tensors", "buffer type"));
    std::vector<gk::tensor*> todo;
    std::vector<std::size_t> offs;
    std::size_t total = 0;
    const std::size_t align = type.alignment();
    for (gk::tensor* t : cv(c).tensors()) {
      if (t->view_src || t->data) continue;
      todo.push_back(t);
      offs.push_back(total);
      total += (type.alloc_size(t) + align - 1) / align * align;
    }
    last_error.clear();
    if (todo.empty()) return static_cast<gk_buffer*>(nullptr);
    std::unique_ptr<gk::backend_buffer> bf = type.alloc_buffer(total);
    for (std::size_t i = 0; i < todo.size(); ++i) bf->init_tensor(todo[i], offs[i]);
    for (gk::tensor* t : cv(c).tensors())
      if (t->view_src && !t->data && t->view_src->data) {
        t->data = static_cast<char*>(t->view_src->data) + t->view_offs;
        t->buffer = t->view_src->buffer;
      }
    return reinterpret_cast<gk_buffer*>(bf.release());
  });
}

// ---- graph allocator ----

gk_gallocr* gallocr_new() {
  return GUARD(static_cast<gk_gallocr*>(nullptr), { return reinterpret_cast<gk_gallocr*>(new gk::graph_allocator()); });
}
void gallocr_free(gk_gallocr* a) { delete ga(a); }
int gallocr_alloc_graph(gk_gallocr* a, gk_graph* g) {
  return GUARD(1, {
    ga(need(a, "gallocr_alloc_graph", "allocator"))->allocate(*gra(need(g, "gallocr_alloc_graph", "graph")));
    return 0;
  });
}
size_t gallocr_buffer_size(const gk_gallocr* a) { return a ? ga(a)->buffer_size() : 0; }

// ---- scheduler ----

gk_sched* sched_new(gk_backend* const* backends, int n) {
  return GUARD(static_cast<gk_sched*>(nullptr), {
    if (n < 1) throw gk::error("gk_sched_new: needs at least one backend (the CPU, last); got " + std::to_string(n));
    need(backends, "sched_new", "backends");
    std::vector<gk::backend*> list;
    for (int i = 0; i < n; ++i) list.push_back(bk(backends[i]));
    return reinterpret_cast<gk_sched*>(new gk::sched(std::move(list)));
  });
}
void sched_free(gk_sched* s) { delete sch(s); }
int sched_alloc_graph(gk_sched* s, gk_graph* g) {
  return GUARD(1, {
    sch(need(s, "sched_alloc_graph", "scheduler"))->alloc_graph(*gra(need(g, "sched_alloc_graph", "graph")));
    return 0;
  });
}
int sched_graph_compute(gk_sched* s, gk_graph* g) {
  return GUARD(1, {
    sch(need(s, "sched_graph_compute", "scheduler"))->compute(*gra(need(g, "sched_graph_compute", "graph")));
    return 0;
  });
}
int sched_reset(gk_sched* s) {
  return GUARD(1, {
    sch(need(s, "sched_reset", "scheduler"))->reset();
    return 0;
  });
}
int sched_set_tensor_backend(gk_sched* s, gk_tensor* n, gk_backend* b) {
  return GUARD(1, {
    sch(need(s, "sched_set_tensor_backend", "scheduler"))
        ->set_backend(ten(need(n, "sched_set_tensor_backend", "node")), bk(need(b, "sched_set_tensor_backend", "backend")));
    return 0;
  });
}
gk_backend* sched_get_tensor_backend(const gk_sched* s, const gk_tensor* n) {
  return GUARD(static_cast<gk_backend*>(nullptr), {
    return s && n ? reinterpret_cast<gk_backend*>(sch(s)->backend_of(ten(n))) : nullptr;
  });
}
int sched_n_splits(const gk_sched* s) { return s ? static_cast<int>(sch(s)->splits().size()) : 0; }
int sched_n_copies(const gk_sched* s) { return s ? sch(s)->n_copies() : 0; }

// ---- every builder: the C++ builder of the same name, arguments converted ----

#define GK_FN(ret, name, params, args, fail)
#define GK_OP(name, params, args)                                                               \
  gk_tensor* name params {                                                                      \
    return guarded("gk_" #name, static_cast<gk_tensor*>(nullptr), [&] {                         \
      return out([](auto&&... x) { return gk::name(cv(x)...); } args);                          \
    });                                                                                         \
  }
#include "c_api_entries.inc"
#undef GK_FN
#undef GK_OP

const char* last_error_message() { return last_error.c_str(); }

}  // namespace impl

extern "C" __attribute__((visibility("default"))) const gk_module_table* gk_module_table_v1() {
  static const gk_module_table table = [] {
    gk_module_table t{};
    t.abi = GK_MODULE_ABI;
    t.size = sizeof(gk_module_table);
    t.target = gk::simd::native::name.data();
    t.last_error = &impl::last_error_message;
#define GK_FN(ret, name, params, args, fail) t.name = &impl::name;
#define GK_OP(name, params, args) t.name = &impl::name;
#include "c_api_entries.inc"
#undef GK_FN
#undef GK_OP
    return t;
  }();
  return &table;
}
