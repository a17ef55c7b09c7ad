// SPDX-License-Identifier: MIT
// The row interface every CPU kernel is written over. A kernel asks for row (i1, i2, i3)
// of a tensor as f32 and gets a pointer: straight into the tensor when it is f32 with
// packed elements, otherwise into this thread's scratch, converted (f16, bf16, integers),
// decoded (any block format) or gathered (strided dim 0). Writing is the mirror: begin()
// hands out the destination row itself when it is packed f32, else scratch, and commit()
// converts or encodes the scratch into place. Kernels never look inside a block.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gk/core/error.hpp"
#include "gk/core/narrow.hpp"
#include "gk/formats/all.hpp"
#include "gk/tensor.hpp"

namespace gk::cpu {

// Per-thread scratch: a few independent slots that grow on first use and stay allocated
// for the life of the pool, so steady-state compute allocates nothing.
class scratch {
 public:
  static constexpr int slots = 10;
  template <class T>
  T* get(int slot, std::size_t n) {
    auto& v = buf_[slot];
    const std::size_t bytes = n * sizeof(T) + 64;
    if (v.size() < bytes) v.resize(bytes);
    auto p = reinterpret_cast<std::uintptr_t>(v.data());
    return reinterpret_cast<T*>((p + 63) & ~std::uintptr_t{63});
  }

 private:
  std::vector<std::byte> buf_[slots];
};

// What one thread knows while it computes one node.
struct exec {
  int ith = 0;
  int nth = 1;
  scratch* scr = nullptr;
  // Shared by all threads for this node, zero when the node starts: a work queue for
  // kernels that hand out tiles dynamically (which thread takes a tile never changes it).
  std::atomic<std::int64_t>* counter = nullptr;
  // This thread's share [begin, end) of n units, split by index only.
  std::int64_t begin(std::int64_t n) const noexcept { return n * ith / nth; }
  std::int64_t end(std::int64_t n) const noexcept { return n * (ith + 1) / nth; }
};

// Element i of a non-block row at byte pointer p, as f32.
inline float load_f32(gk::type t, const char* p) noexcept {
  switch (t) {
    case type::f32: { float v; std::memcpy(&v, p, 4); return v; }
    case type::f16: { std::uint16_t h; std::memcpy(&h, p, 2); return f16_to_f32(h); }
    case type::bf16: { std::uint16_t h; std::memcpy(&h, p, 2); return bf16_to_f32(h); }
    case type::i8: return static_cast<float>(*reinterpret_cast<const std::int8_t*>(p));
    case type::i16: { std::int16_t v; std::memcpy(&v, p, 2); return static_cast<float>(v); }
    case type::i32: { std::int32_t v; std::memcpy(&v, p, 4); return static_cast<float>(v); }
    case type::i64: { std::int64_t v; std::memcpy(&v, p, 8); return static_cast<float>(v); }
    case type::f64: { double v; std::memcpy(&v, p, 8); return static_cast<float>(v); }
    default: return 0.0f;
  }
}

inline void store_f32(gk::type t, char* p, float v) noexcept {
  switch (t) {
    case type::f32: std::memcpy(p, &v, 4); break;
    case type::f16: { std::uint16_t h = f32_to_f16(v); std::memcpy(p, &h, 2); break; }
    case type::bf16: { std::uint16_t h = f32_to_bf16(v); std::memcpy(p, &h, 2); break; }
    case type::i8: { auto x = static_cast<std::int8_t>(v); std::memcpy(p, &x, 1); break; }
    case type::i16: { auto x = static_cast<std::int16_t>(v); std::memcpy(p, &x, 2); break; }
    case type::i32: { auto x = static_cast<std::int32_t>(v); std::memcpy(p, &x, 4); break; }
    case type::i64: { auto x = static_cast<std::int64_t>(v); std::memcpy(p, &x, 8); break; }
    case type::f64: { double x = v; std::memcpy(p, &x, 8); break; }
    default: break;
  }
}

// Decode n elements of a row in block format t (packed blocks at p) into out.
inline void decode_row_any(gk::type t, const void* p, float* out, std::int64_t n) {
  const bool ok = formats::visit(t, [&]<class W>(std::type_identity<W>) {
    decode_row<W>(static_cast<const typename W::block*>(p), out, n);
  });
  if (ok) return;
  if (const row_codec* c = user_codec(t)) return c->decode_row(p, out, n);  // registered outside gk
  throw error("gk: cannot decode rows of type " + type_label(t));
}

// Encode n f32 values into a row of format t at p (no importance).
inline void encode_row_any(gk::type t, const float* in, void* p, std::int64_t n) {
  const bool ok = formats::visit(t, [&]<class W>(std::type_identity<W>) {
    encode_row<W>(in, static_cast<typename W::block*>(p), n, nullptr);
  });
  if (ok) return;
  if (const row_codec* c = user_codec(t)) return c->encode_row(in, p, n, nullptr);
  throw error("gk: cannot encode rows of type " + type_label(t));
}

inline bool is_float_like(gk::type t) noexcept {
  return t == type::f32 || t == type::f16 || t == type::bf16 || t == type::i8 || t == type::i16 ||
         t == type::i32 || t == type::i64 || t == type::f64;
}

// True when row (i1,i2,i3) can be handed out as a float* without a copy.
inline bool row_is_direct(const tensor* t) noexcept { return t->type == type::f32 && t->nb[0] == sizeof(float); }

// Row (i1,i2,i3) of t as ne[0] floats. `buf` must hold ne[0] floats; it is used only when
// the row is not packed f32.
inline const float* row_read(const tensor* t, std::int64_t i1, std::int64_t i2, std::int64_t i3, float* buf) {
  const char* p = t->at(i1, i2, i3);
  const std::int64_t n = t->ne[0];
  if (row_is_direct(t)) return reinterpret_cast<const float*>(p);
  if (is_float_like(t->type)) {
    const std::size_t s = t->nb[0];
    if (t->type == type::f16 && s == 2) {
      const auto* h = reinterpret_cast<const std::uint16_t*>(p);
      for (std::int64_t i = 0; i < n; ++i) buf[i] = f16_to_f32(h[i]);
    } else {
      for (std::int64_t i = 0; i < n; ++i) buf[i] = load_f32(t->type, p + static_cast<std::size_t>(i) * s);
    }
    return buf;
  }
  if (!t->rows_contiguous())
    throw error("gk: rows of " + describe(t) + " are not packed blocks; a " + std::string(gk::name(t->type)) +
                " tensor cannot be strided inside a row");
  decode_row_any(t->type, p, buf, n);
  return buf;
}

// Writes one row of t. Usage: float* y = w.begin(i1,i2,i3); ...fill y[0..ne0)...; w.commit();
class row_writer {
 public:
  row_writer(tensor* t, float* buf) : t_(t), buf_(buf) {}
  float* begin(std::int64_t i1, std::int64_t i2, std::int64_t i3) {
    dst_ = t_->at(i1, i2, i3);
    return row_is_direct(t_) ? reinterpret_cast<float*>(dst_) : buf_;
  }
  void commit() {
    if (row_is_direct(t_)) return;
    const std::int64_t n = t_->ne[0];
    if (is_float_like(t_->type)) {
      const std::size_t s = t_->nb[0];
      for (std::int64_t i = 0; i < n; ++i) store_f32(t_->type, dst_ + static_cast<std::size_t>(i) * s, buf_[i]);
      return;
    }
    encode_row_any(t_->type, buf_, dst_, n);
  }

 private:
  tensor* t_;
  float* buf_;
  char* dst_ = nullptr;
};

// Iterate every row index (i1, i2, i3) of a shape in order; `f(i1, i2, i3)`. ir is the
// flat row number i1 + ne1*(i2 + ne2*i3); rows [r0, r1) are visited.
template <class F>
inline void for_rows(const std::int64_t* ne, std::int64_t r0, std::int64_t r1, F&& f) {
  for (std::int64_t ir = r0; ir < r1; ++ir) {
    const std::int64_t i1 = ir % ne[1];
    const std::int64_t i2 = (ir / ne[1]) % ne[2];
    const std::int64_t i3 = ir / (ne[1] * ne[2]);
    f(i1, i2, i3);
  }
}

}  // namespace gk::cpu
