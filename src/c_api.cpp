// SPDX-License-Identifier: MIT
// libgk.so: the C ABI over the header-only library. Every entry point checks its input,
// runs the templates through gk::formats::visit, and turns any gk::error (or anything
// else thrown) into a non-zero return with a thread-local message. Rows at any address
// are accepted: a row that is not aligned for its block struct is staged through an
// aligned copy rather than read through a misaligned pointer.
#define GK_BUILDING_LIB 1
#include "gk/gk.h"

#include <cmath>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "gk/formats/all.hpp"

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

template <class F>
int guarded(F&& f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return fail("gk: out of memory");
  } catch (const std::exception& e) {
    return fail(e.what());
  } catch (...) {
    return fail("gk: unknown internal error");
  }
}

}  // namespace

extern "C" {

const char* gk_type_name(gk_type t) {
  const auto g = static_cast<gk::type>(t);
  return gk::is_valid(g) ? gk::name(g).data() : nullptr;  // names are literals: NUL-terminated
}
int64_t gk_blck_size(gk_type t) { return gk::block_size(static_cast<gk::type>(t)); }
size_t gk_type_size(gk_type t) { return gk::type_size(static_cast<gk::type>(t)); }
size_t gk_row_size(gk_type t, int64_t n) {
  const auto g = static_cast<gk::type>(t);
  if (!gk::is_valid(g) || n < 0 || n % gk::block_size(g) != 0) return 0;
  return gk::row_size(g, n);
}

gk_type gk_vec_dot_type(gk_type t) {
  gk_type r = GK_TYPE_COUNT;
  gk::formats::visit(static_cast<gk::type>(t), [&]<class W>(std::type_identity<W>) {
    r = static_cast<gk_type>(W::dot_type::id);
  });
  return r;
}

int gk_quantize_row(gk_type t, const float* src, void* dst, int64_t n, const float* imatrix) {
  return guarded([&] {
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

int gk_dequantize_row(gk_type t, const void* src, float* dst, int64_t n) {
  return guarded([&] {
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

int gk_vec_dot(gk_type t, int64_t n, const void* w_row, const void* act_row, float* out) {
  return guarded([&] {
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

const char* gk_last_error(void) { return last_error.c_str(); }

}  // extern "C"
