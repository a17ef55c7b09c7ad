// SPDX-License-Identifier: MIT
// CPU kernels: data movement (dup, cpy, cont, get_rows, set_rows, repeat, concat).
//
// Every kernel splits the destination's rows with ex.begin/ex.end and fills each of its
// rows completely, so a row is written by one thread and the bits never depend on the
// thread count. Two ways to move data, chosen per node:
//   - same type: bytes, in units of one element (or one block for block formats); nothing
//     is converted, so i32 indices, NaN payloads and block bytes survive untouched;
//   - different types: the destination row is gathered as f32 (row_read converts or decodes
//     the source) and handed to row_writer, which converts or encodes it. Encoding is per
//     destination row with gk's own encode_row<W>, which is therefore the definition of a
//     copy into a block format.
// dup/cpy/cont copy in flat order (i0 fastest): source and destination need only have the
// same element count, so a destination row may draw on several source rows.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "gk/cpu/rows.hpp"
#include "gk/tensor.hpp"

namespace gk::cpu::copy {

namespace detail {

// A type the gather path can read as f32 (convert or decode) and write from f32: gk's
// own, and formats registered at run time (through their row functions, rows.hpp).
inline bool convertible(gk::type t) noexcept {
  if (t == type::f32 || t == type::f16 || t == type::bf16 || t == type::i32) return true;
  return formats::visit(t, [](auto) {}) || user_codec(t) != nullptr;
}

// Units (elements, or blocks for block formats) per row.
inline std::int64_t units_per_row(const tensor* t) noexcept { return t->ne[0] / gk::block_size(t->type); }

// Copy n units of `unit` bytes between strided runs (memmove: dup_inplace copies onto itself).
inline void copy_units(char* dst, std::size_t dst_stride, const char* src, std::size_t src_stride, std::int64_t n,
                       std::size_t unit) {
  if (n <= 0) return;
  if (dst_stride == unit && src_stride == unit) {
    std::memmove(dst, src, static_cast<std::size_t>(n) * unit);
    return;
  }
  for (std::int64_t i = 0; i < n; ++i)
    std::memmove(dst + static_cast<std::size_t>(i) * dst_stride, src + static_cast<std::size_t>(i) * src_stride, unit);
}

// Splits a flat row number of shape ne into (i1, i2, i3).
inline void row_coords(const std::int64_t* ne, std::int64_t r, std::int64_t& i1, std::int64_t& i2, std::int64_t& i3) {
  i1 = r % ne[1];
  i2 = (r / ne[1]) % ne[2];
  i3 = r / (ne[1] * ne[2]);
}

inline void require_packed_blocks(const tensor* t, const char* what) {
  if (gk::block_size(t->type) > 1 && !t->rows_contiguous())
    throw error(std::string("gk: cpu: ") + what + ": rows of " + describe(t) + " are not packed blocks");
}

// dup / cpy / cont with src and dst of one type: flat-order unit copy.
inline void copy_same_type(const exec& ex, const tensor* src, tensor* dst) {
  require_packed_blocks(src, "copy");
  require_packed_blocks(dst, "copy");
  const std::size_t unit = gk::type_size(dst->type);
  const std::int64_t su = units_per_row(src), du = units_per_row(dst);
  const std::size_t snb0 = gk::block_size(src->type) > 1 ? unit : src->nb[0];
  const std::size_t dnb0 = gk::block_size(dst->type) > 1 ? unit : dst->nb[0];
  const std::int64_t nr = dst->nrows(), r0 = ex.begin(nr), r1 = ex.end(nr);
  for (std::int64_t r = r0; r < r1; ++r) {
    std::int64_t i1, i2, i3;
    row_coords(dst->ne, r, i1, i2, i3);
    char* d = dst->at(i1, i2, i3);
    std::int64_t k = r * du;  // flat unit index of this row's first unit
    std::int64_t done = 0;
    while (done < du) {
      const std::int64_t sr = k / su, s0 = k % su;
      std::int64_t j1, j2, j3;
      row_coords(src->ne, sr, j1, j2, j3);
      const std::int64_t n = std::min(du - done, su - s0);
      copy_units(d + static_cast<std::size_t>(done) * dnb0, dnb0,
                 src->at(j1, j2, j3) + static_cast<std::size_t>(s0) * snb0, snb0, n, unit);
      done += n;
      k += n;
    }
  }
}

// dup / cpy / cont across types: gather each destination row as f32, then write it.
inline void copy_convert(const exec& ex, const tensor* src, tensor* dst) {
  require_packed_blocks(src, "copy");
  require_packed_blocks(dst, "copy");
  const std::int64_t n0 = dst->ne[0], s0n = src->ne[0];
  float* row = ex.scr->get<float>(0, static_cast<std::size_t>(n0));
  float* sbuf = ex.scr->get<float>(1, static_cast<std::size_t>(s0n));
  row_writer w(dst, row);
  const bool same_rows = src->same_shape(*dst);
  const std::int64_t nr = dst->nrows(), r0 = ex.begin(nr), r1 = ex.end(nr);
  for (std::int64_t r = r0; r < r1; ++r) {
    std::int64_t i1, i2, i3;
    row_coords(dst->ne, r, i1, i2, i3);
    float* y = w.begin(i1, i2, i3);
    if (same_rows) {
      const float* x = row_read(src, i1, i2, i3, y);
      if (x != y) std::memcpy(y, x, static_cast<std::size_t>(n0) * sizeof(float));
    } else {
      // Element k of the flat order lives in source row k / s0n; each source row touched
      // is read once into sbuf (a destination row may span several, or part of one).
      std::int64_t k = r * n0, done = 0;
      while (done < n0) {
        const std::int64_t sr = k / s0n, s0 = k % s0n;
        std::int64_t j1, j2, j3;
        row_coords(src->ne, sr, j1, j2, j3);
        const float* x = row_read(src, j1, j2, j3, sbuf);
        const std::int64_t n = std::min(n0 - done, s0n - s0);
        std::memcpy(y + done, x + s0, static_cast<std::size_t>(n) * sizeof(float));
        done += n;
        k += n;
      }
    }
    w.commit();
  }
}

inline void compute_copy(const exec& ex, tensor* node) {
  const tensor* src = node->src[0];
  if (src->nelements() != node->nelements())
    throw error("gk: cpu: " + std::string(name(node->op)) + ": " + describe(src) + " and " + describe(node) +
                " differ in element count");
  if (src->type == node->type) copy_same_type(ex, src, node);
  else copy_convert(ex, src, node);
}

// get_rows: dst[:, i10, i11, i12] = src0[:, idx[i10, i11, i12], i11, i12].
inline void compute_get_rows(const exec& ex, tensor* node) {
  const tensor* a = node->src[0];
  const tensor* b = node->src[1];
  require_packed_blocks(a, "get_rows");
  const std::int64_t n0 = node->ne[0];
  float* buf = ex.scr->get<float>(0, static_cast<std::size_t>(n0));
  row_writer w(node, buf);
  const bool raw = a->type == node->type;
  const std::size_t unit = gk::type_size(a->type);
  const std::int64_t nr = node->nrows(), r0 = ex.begin(nr), r1 = ex.end(nr);
  for (std::int64_t r = r0; r < r1; ++r) {
    std::int64_t i10, i11, i12;
    row_coords(node->ne, r, i10, i11, i12);
    std::int32_t idx;
    std::memcpy(&idx,
                static_cast<const char*>(b->data) + i10 * static_cast<std::int64_t>(b->nb[0]) +
                    i11 * static_cast<std::int64_t>(b->nb[1]) + i12 * static_cast<std::int64_t>(b->nb[2]),
                sizeof idx);
    if (idx < 0 || idx >= a->ne[1])
      throw error("gk: cpu: get_rows: index " + std::to_string(idx) + " at [" + std::to_string(i10) + ", " +
                  std::to_string(i11) + ", " + std::to_string(i12) + "] is outside the " + std::to_string(a->ne[1]) +
                  " rows of " + describe(a));
    if (raw) {
      copy_units(node->at(i10, i11, i12), node->nb[0], a->at(idx, i11, i12), a->nb[0], n0, unit);
      continue;
    }
    float* y = w.begin(i10, i11, i12);
    const float* x = row_read(a, idx, i11, i12, y);
    if (x != y) std::memcpy(y, x, static_cast<std::size_t>(n0) * sizeof(float));
    w.commit();
  }
}

// set_rows: dst[:, idx[i, i02 % c1, i03 % c2], i02, i03] = b[:, i, i02, i03]. Split by
// destination row: every thread scans all indices of a slice and writes only the rows it
// owns, in source order, so a duplicated index resolves the same way (the later source row
// wins) at every thread count.
inline void compute_set_rows(const exec& ex, tensor* node) {
  const tensor* b = node->src[0];
  const tensor* c = node->src[1];
  require_packed_blocks(node, "set_rows");
  const std::int64_t n0 = node->ne[0];
  float* buf = ex.scr->get<float>(0, static_cast<std::size_t>(n0));
  row_writer w(node, buf);
  const std::int64_t nr = node->nrows(), r0 = ex.begin(nr), r1 = ex.end(nr);
  const std::int64_t ne1 = node->ne[1];
  for (std::int64_t i03 = 0; i03 < b->ne[3]; ++i03)
    for (std::int64_t i02 = 0; i02 < b->ne[2]; ++i02) {
      const std::int64_t base = (i03 * node->ne[2] + i02) * ne1;
      if (base + ne1 <= r0 || base >= r1) continue;  // none of this slice's rows is ours
      for (std::int64_t i = 0; i < b->ne[1]; ++i) {
        const char* pi = static_cast<const char*>(c->data) + i * static_cast<std::int64_t>(c->nb[0]) +
                         (i02 % c->ne[1]) * static_cast<std::int64_t>(c->nb[1]) +
                         (i03 % c->ne[2]) * static_cast<std::int64_t>(c->nb[2]);
        std::int64_t idx;
        if (c->type == type::i64) {
          std::memcpy(&idx, pi, 8);
        } else {
          std::int32_t v;
          std::memcpy(&v, pi, 4);
          idx = v;
        }
        if (idx < 0 || idx >= ne1)
          throw error("gk: cpu: set_rows: index " + std::to_string(idx) + " for source row " + std::to_string(i) +
                      " is outside the " + std::to_string(ne1) + " rows of " + describe(node));
        if (base + idx < r0 || base + idx >= r1) continue;
        float* y = w.begin(idx, i02, i03);
        const float* x = row_read(b, i, i02, i03, y);
        if (x != y) std::memcpy(y, x, static_cast<std::size_t>(n0) * sizeof(float));
        w.commit();
      }
    }
}

// repeat: dst[i0, i1, i2, i3] = src[i0 % ne00, i1 % ne01, i2 % ne02, i3 % ne03], as bytes.
inline void compute_repeat(const exec& ex, tensor* node) {
  const tensor* a = node->src[0];
  const std::size_t unit = gk::type_size(a->type);
  const std::int64_t n00 = a->ne[0], reps = node->ne[0] / n00;
  const std::int64_t nr = node->nrows(), r0 = ex.begin(nr), r1 = ex.end(nr);
  for (std::int64_t r = r0; r < r1; ++r) {
    std::int64_t i1, i2, i3;
    row_coords(node->ne, r, i1, i2, i3);
    const char* x = a->at(i1 % a->ne[1], i2 % a->ne[2], i3 % a->ne[3]);
    char* y = node->at(i1, i2, i3);
    for (std::int64_t k = 0; k < reps; ++k)
      copy_units(y + static_cast<std::size_t>(k * n00) * node->nb[0], node->nb[0], x, a->nb[0], n00, unit);
  }
}

// concat along dim: a's part first, then b's, as bytes (blocks stay blocks).
inline void compute_concat(const exec& ex, tensor* node) {
  const tensor* a = node->src[0];
  const tensor* b = node->src[1];
  const int dim = node->param_i32(0);
  require_packed_blocks(a, "concat");
  require_packed_blocks(b, "concat");
  require_packed_blocks(node, "concat");
  const std::size_t unit = gk::type_size(node->type);
  const bool blocks = gk::block_size(node->type) > 1;
  auto stride0 = [&](const tensor* t) { return blocks ? unit : t->nb[0]; };
  const std::int64_t nr = node->nrows(), r0 = ex.begin(nr), r1 = ex.end(nr);
  for (std::int64_t r = r0; r < r1; ++r) {
    std::int64_t i[4] = {0, 0, 0, 0};
    row_coords(node->ne, r, i[1], i[2], i[3]);
    char* y = node->at(i[1], i[2], i[3]);
    if (dim == 0) {
      const std::int64_t ua = units_per_row(a), ub = units_per_row(b);
      copy_units(y, stride0(node), a->at(i[1], i[2], i[3]), stride0(a), ua, unit);
      copy_units(y + static_cast<std::size_t>(ua) * stride0(node), stride0(node), b->at(i[1], i[2], i[3]), stride0(b),
                 ub, unit);
      continue;
    }
    const tensor* s = a;
    if (i[dim] >= a->ne[dim]) {
      i[dim] -= a->ne[dim];
      s = b;
    }
    copy_units(y, stride0(node), s->at(i[1], i[2], i[3]), stride0(s), units_per_row(s), unit);
  }
}

}  // namespace detail

inline bool supports(const tensor* node) noexcept {
  const tensor* a = node->src[0];
  if (!a) return false;
  const bool block = gk::block_size(node->type) > 1;
  switch (node->op) {
    case op::dup: case op::cpy: case op::cont:
      return a->type == node->type || (detail::convertible(a->type) && detail::convertible(node->type));
    case op::get_rows:
      return node->src[1] && node->src[1]->type == type::i32 &&
             (a->type == node->type || (node->type == type::f32 && detail::convertible(a->type)));
    case op::set_rows:
      return (a->type == type::f32 || a->type == type::f16) && node->src[1] &&
             (node->src[1]->type == type::i64 || node->src[1]->type == type::i32) &&
             detail::convertible(node->type) && node->type != type::i32;
    case op::repeat: return !block && a->type == node->type;
    case op::concat: return node->src[1] && a->type == node->type && node->src[1]->type == node->type;
    default: return false;
  }
}

inline void compute(const exec& ex, tensor* node) {
  if (!supports(node)) throw error("gk: cpu: no copy kernel for " + describe(node) + " from " + describe(node->src[0]));
  switch (node->op) {
    case op::dup: case op::cpy: case op::cont: return detail::compute_copy(ex, node);
    case op::get_rows: return detail::compute_get_rows(ex, node);
    case op::set_rows: return detail::compute_set_rows(ex, node);
    case op::repeat: return detail::compute_repeat(ex, node);
    case op::concat: return detail::compute_concat(ex, node);
    default: throw error("gk: cpu: op " + std::string(name(node->op)) + " is not a copy op");
  }
}

}  // namespace gk::cpu::copy
