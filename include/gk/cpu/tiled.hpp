// SPDX-License-Identifier: MIT
// CPU_TILED: host memory in which weights of some formats are stored the way the matmul
// tiles read them, so a tile loads its sixteen rows' codes with plain vector loads instead
// of gathering and transposing them per block (avx512/dot_tile_legacy.hpp).
//
// The layout. A tensor of a tiled format (q4_0, q4_1, q5_0, q5_1, q8_0, iq4_nl, mxfp4, nvfp4,
// q4_K, q5_K, iq4_xs, q2_K, q3_K, q6_K, tq1_0, tq2_0, iq2_s, iq3_s), contiguous, not a view, is cut
// into groups of sixteen consecutive rows of one matrix (rows 16g .. 16g + 15 of each (i2,
// i3) slab); rows past the last whole group of a matrix stay as they are. A group keeps its
// bytes (16 rows' worth, at the same place), reordered block column by block column: block
// column i (block i of each of the sixteen rows) is 16 x sizeof(block) bytes in which each
// unit of the block (the fields before qs in 2-byte units, mxfp4's e a 1-byte unit, qs in
// 4-byte units; a K-quant,
// iq4_xs or nvfp4 block in 4-byte units throughout; q2_K, q3_K, q6_K, tq1_0 and tq2_0 in 4-byte
// units up to their f16 scales at the end, in 2-byte units; iq2_s and iq3_s: the f16 scale,
// then 4-byte units) comes as sixteen consecutive copies, row 0's first:
// unit at block offset o of row r goes to 16 o + r * unit size. So a q4_0 block column is
// the sixteen scales (32 bytes), then four 64-byte vectors, vector k holding row r's qs
// dword k in lane r: what the tile's unpack made before, now one load each. The byte
// count is the tensor's.
//
// Reading and writing go through the buffer (set_tensor / get_tensor / memset_tensor, any
// byte range, views too), which convert; t->data is not the tensor's bytes in the usual
// order, so the memory is not is_host. The CPU backend reads a tiled weight in place only
// as mul_mat's or mul_mat_id's weight (and any tensor of another format, or one stored
// plain, by any op); the scheduler copies it out through get_tensor for any other reader.
// Computing a graph on the CPU runner directly (no scheduler) with such a read throws.
// Every SIMD target reads the layout: the AVX-512 tiles load it directly, the others
// convert a group back to rows in scratch as they go (cpu/matmul.hpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gk/backend.hpp"
#include "gk/core/error.hpp"
#include "gk/formats/iq2.hpp"
#include "gk/formats/iq3.hpp"
#include "gk/formats/iq4.hpp"
#include "gk/formats/kquants.hpp"
#include "gk/formats/kquants_low.hpp"
#include "gk/formats/legacy.hpp"
#include "gk/formats/ternary.hpp"
#include "gk/tensor.hpp"

namespace gk::cpu::tiled {

inline constexpr std::int64_t group_rows = 16;

// The formats stored tiled.
constexpr bool tiles_format(type t) noexcept {
  return t == type::q4_0 || t == type::q4_1 || t == type::q5_0 || t == type::q5_1 || t == type::q8_0 ||
         t == type::iq4_nl || t == type::mxfp4 || t == type::nvfp4 || t == type::q4_K ||
         t == type::q5_K || t == type::iq4_xs || t == type::q2_K || t == type::q3_K || t == type::q6_K ||
         t == type::tq1_0 || t == type::tq2_0 || t == type::iq2_s || t == type::iq3_s;
}

// A block's units: [0, qs_at) in 2-byte units, [qs_at, qs_end) in 4-byte units, [qs_end,
// bytes) in 2-byte units. The 32-weight formats' f16 fields come before qs; a K-quant,
// iq4_xs or nvfp4 block is dwords throughout; q2_K, q3_K, q6_K, tq1_0 and tq2_0 end with their f16
// scales (d, and q2_K's dmin after it); iq2_s and iq3_s start with theirs.
struct block_units {
  std::size_t bytes, qs_at, qs_end;
  std::size_t head = 2;  // the unit before qs: 2 bytes, or 1 (mxfp4's e)
};
template <class W>
constexpr block_units units_of() {
  if constexpr (W::id == type::q4_K || W::id == type::q5_K || W::id == type::iq4_xs || W::id == type::nvfp4) {
    static_assert(sizeof(typename W::block) % 4 == 0);
    return {sizeof(typename W::block), 0, sizeof(typename W::block)};
  } else if constexpr (W::id == type::q2_K || W::id == type::q3_K || W::id == type::q6_K || W::id == type::tq1_0 ||
                       W::id == type::tq2_0) {
    static_assert(offsetof(typename W::block, d) % 4 == 0 &&
                  sizeof(typename W::block) - offsetof(typename W::block, d) == (W::id == type::q2_K ? 4 : 2));
    return {sizeof(typename W::block), 0, offsetof(typename W::block, d)};
  } else if constexpr (W::id == type::mxfp4) {  // e (1 byte), then qs
    static_assert(offsetof(typename W::block, qs) == 1 && sizeof(typename W::block) == 17);
    return {sizeof(typename W::block), 1, sizeof(typename W::block), 1};
  } else if constexpr (W::id == type::iq2_s || W::id == type::iq3_s) {
    static_assert(offsetof(typename W::block, d) == 0 && (sizeof(typename W::block) - 2) % 4 == 0);
    return {sizeof(typename W::block), 2, sizeof(typename W::block)};
  } else {
    static_assert(offsetof(typename W::block, qs) % 2 == 0 && sizeof(W::block::qs) % 4 == 0 &&
                  offsetof(typename W::block, qs) + sizeof(W::block::qs) == sizeof(typename W::block));
    return {sizeof(typename W::block), offsetof(typename W::block, qs), sizeof(typename W::block)};
  }
}
inline block_units units_of(type t) {
  switch (t) {
    case type::q4_0: return units_of<formats::q4_0>();
    case type::q4_1: return units_of<formats::q4_1>();
    case type::q5_0: return units_of<formats::q5_0>();
    case type::q5_1: return units_of<formats::q5_1>();
    case type::nvfp4: return units_of<formats::nvfp4>();
    case type::mxfp4: return units_of<formats::mxfp4>();
    case type::q8_0: return units_of<formats::q8_0>();
    case type::iq4_nl: return units_of<formats::iq4_nl>();
    case type::q4_K: return units_of<formats::q4_K>();
    case type::q5_K: return units_of<formats::q5_K>();
    case type::iq4_xs: return units_of<formats::iq4_xs>();
    case type::q2_K: return units_of<formats::q2_K>();
    case type::q3_K: return units_of<formats::q3_K>();
    case type::q6_K: return units_of<formats::q6_K>();
    case type::tq1_0: return units_of<formats::tq1_0>();
    case type::tq2_0: return units_of<formats::tq2_0>();
    case type::iq2_s: return units_of<formats::iq2_s>();
    case type::iq3_s: return units_of<formats::iq3_s>();
    default: throw error("gk: cpu tiled: " + type_label(t) + " is not a tiled format");
  }
}

// Sixteen plain rows of nb blocks at `rows` -> one tiled group at `out` (and back).
inline void tile_group(const unsigned char* rows, unsigned char* out, std::int64_t nb, block_units u) {
  const std::size_t row_bytes = static_cast<std::size_t>(nb) * u.bytes;
  for (std::int64_t i = 0; i < nb; ++i) {
    unsigned char* col = out + static_cast<std::size_t>(i) * group_rows * u.bytes;
    for (std::size_t r = 0; r < group_rows; ++r) {
      const unsigned char* b = rows + r * row_bytes + static_cast<std::size_t>(i) * u.bytes;
      for (std::size_t o = 0; o < u.qs_at; o += u.head) std::memcpy(col + group_rows * o + r * u.head, b + o, u.head);
      for (std::size_t o = u.qs_at; o < u.qs_end; o += 4) std::memcpy(col + group_rows * o + r * 4, b + o, 4);
      for (std::size_t o = u.qs_end; o < u.bytes; o += 2) std::memcpy(col + group_rows * o + r * 2, b + o, 2);
    }
  }
}
inline void untile_group(const unsigned char* group, unsigned char* rows, std::int64_t nb, block_units u) {
  const std::size_t row_bytes = static_cast<std::size_t>(nb) * u.bytes;
  for (std::int64_t i = 0; i < nb; ++i) {
    const unsigned char* col = group + static_cast<std::size_t>(i) * group_rows * u.bytes;
    for (std::size_t r = 0; r < group_rows; ++r) {
      unsigned char* b = rows + r * row_bytes + static_cast<std::size_t>(i) * u.bytes;
      for (std::size_t o = 0; o < u.qs_at; o += u.head) std::memcpy(b + o, col + group_rows * o + r * u.head, u.head);
      for (std::size_t o = u.qs_at; o < u.qs_end; o += 4) std::memcpy(b + o, col + group_rows * o + r * 4, 4);
      for (std::size_t o = u.qs_end; o < u.bytes; o += 2) std::memcpy(b + o, col + group_rows * o + r * 2, 2);
    }
  }
}

// Whether t's bytes, where t lives in CPU_TILED memory, are in the tiled layout (else plain).
inline bool layout_tiled(const tensor* t) noexcept {
  return tiles_format(t->type) && !t->view_src && t->is_contiguous();
}

// The geometry of a tiled tensor's bytes.
struct geometry {
  block_units u;
  std::int64_t nb;             // blocks per row
  std::size_t group, slab, full;  // bytes of a group, of a matrix, of a matrix's whole groups
  explicit geometry(const tensor* t)
      : u(units_of(t->type)), nb(t->ne[0] / block_size(t->type)),
        group(static_cast<std::size_t>(group_rows) * t->row_bytes()),
        slab(static_cast<std::size_t>(t->ne[1]) * t->row_bytes()),
        full(static_cast<std::size_t>(t->ne[1] / group_rows) * group) {}
};

// Visits logical bytes [off, off + n) of tiled tensor t whose storage is `phys`, piece by
// piece: whole(g, geo) for a whole group starting at byte g, which converts it directly, and
// bytes(at, p, len) for every other piece, `at` holding its logical bytes [p, p + len) in
// order: phys + p for a stretch stored as it is; for part of a group, the group's rows
// untiled into scratch (and tiled back afterwards when Store).
template <bool Store, class Phys, class Bytes, class Whole>
void for_pieces(const tensor* t, Phys* phys, std::size_t off, std::size_t n, Bytes&& bytes, Whole&& whole) {
  const geometry geo(t);
  std::vector<unsigned char> tmp;
  std::size_t pos = off;
  const std::size_t end = off + n;
  while (pos < end) {
    const std::size_t slab0 = geo.slab ? pos / geo.slab * geo.slab : 0, in = pos - slab0;
    if (in >= geo.full) {
      const std::size_t len = std::min(end, slab0 + geo.slab) - pos;
      bytes(phys + pos, pos, len);
      pos += len;
      continue;
    }
    const std::size_t g = slab0 + in / geo.group * geo.group, len = std::min(end, g + geo.group) - pos;
    if (len == geo.group) {
      whole(g, geo);
    } else {
      tmp.resize(geo.group);
      untile_group(phys + g, tmp.data(), geo.nb, geo.u);
      bytes(tmp.data() + (pos - g), pos, len);
      if constexpr (Store) tile_group(tmp.data(), phys + g, geo.nb, geo.u);
    }
    pos += len;
  }
}

// Logical bytes [off, off + n) of tiled tensor t (storage phys) := src / -> dst / := value.
inline void write(const tensor* t, unsigned char* phys, const unsigned char* src, std::size_t off, std::size_t n) {
  for_pieces<true>(
      t, phys, off, n,
      [&](unsigned char* at, std::size_t p, std::size_t len) { std::memcpy(at, src + (p - off), len); },
      [&](std::size_t g, const geometry& geo) { tile_group(src + (g - off), phys + g, geo.nb, geo.u); });
}
inline void read(const tensor* t, const unsigned char* phys, unsigned char* dst, std::size_t off, std::size_t n) {
  for_pieces<false>(
      t, phys, off, n,
      [&](const unsigned char* at, std::size_t p, std::size_t len) { std::memcpy(dst + (p - off), at, len); },
      [&](std::size_t g, const geometry& geo) { untile_group(phys + g, dst + (g - off), geo.nb, geo.u); });
}
inline void fill(const tensor* t, unsigned char* phys, std::uint8_t value, std::size_t off, std::size_t n) {
  for_pieces<true>(
      t, phys, off, n, [&](unsigned char* at, std::size_t, std::size_t len) { std::memset(at, value, len); },
      [&](std::size_t g, const geometry& geo) {
        std::memset(phys + g, value, geo.group);  // a whole group: every unit the same bytes, in any order
      });
}

// A CPU_TILED buffer: host memory whose set/get/memset convert tiled tensors' bytes.
struct buffer final : host_buffer {
  using host_buffer::host_buffer;

  void set_tensor(tensor* t, const void* src, std::size_t offset, std::size_t n) override {
    check_range(t, offset, n, "set_tensor");
    if (const tensor* base = tiled_base(t))
      return write(base, static_cast<unsigned char*>(base->data), static_cast<const unsigned char*>(src),
                   view_offset(t, base) + offset, n);
    std::memcpy(static_cast<char*>(t->data) + offset, src, n);
  }
  void get_tensor(const tensor* t, void* dst, std::size_t offset, std::size_t n) const override {
    check_range(t, offset, n, "get_tensor");
    if (const tensor* base = tiled_base(t))
      return read(base, static_cast<const unsigned char*>(base->data), static_cast<unsigned char*>(dst),
                  view_offset(t, base) + offset, n);
    std::memcpy(dst, static_cast<const char*>(t->data) + offset, n);
  }
  void memset_tensor(tensor* t, std::uint8_t value, std::size_t offset, std::size_t n) override {
    check_range(t, offset, n, "memset_tensor");
    if (const tensor* base = tiled_base(t))
      return fill(base, static_cast<unsigned char*>(base->data), value, view_offset(t, base) + offset, n);
    std::memset(static_cast<char*>(t->data) + offset, value, n);
  }

 private:
  // The tensor whose tiled bytes t addresses (t or its view base), or null: plain bytes.
  static const tensor* tiled_base(const tensor* t) noexcept {
    const tensor* base = t->view_src ? t->view_src : t;
    return layout_tiled(base) && base->data ? base : nullptr;
  }
  static std::size_t view_offset(const tensor* t, const tensor* base) noexcept {
    return static_cast<std::size_t>(static_cast<const char*>(t->data) - static_cast<const char*>(base->data));
  }
};

class buffer_type_impl final : public gk::buffer_type {
 public:
  std::string_view name() const override { return "CPU_TILED"; }
  std::size_t alignment() const override { return 64; }
  bool is_host() const override { return false; }  // the CPU addresses it, but not every byte is where t->data says
  std::unique_ptr<backend_buffer> alloc_buffer(std::size_t size) override {
    return std::make_unique<buffer>(*this, size, alignment());
  }
};

}  // namespace gk::cpu::tiled

namespace gk {

// The CPU_TILED memory (cpu/tiled.hpp): place mul_mat weights here for faster CPU matmul.
inline buffer_type& cpu_tiled_buffer_type() {
  static cpu::tiled::buffer_type_impl t;
  return t;
}

namespace cpu::tiled {

// Whether t lives in CPU_TILED memory.
inline bool in_tiled_memory(const tensor* t) noexcept {
  const backend_buffer* b = buffer_of(t);
  return b && &b->buft == &cpu_tiled_buffer_type();
}
// Whether t's bytes are in the tiled layout now (t in CPU_TILED memory, a tiled format).
inline bool is_tiled(const tensor* t) noexcept { return layout_tiled(t) && in_tiled_memory(t); }
// Whether t, read as source `slot` of node, needs the tiled layout's reader: it lives in
// CPU_TILED memory in the tiled layout (a view of such a tensor included).
inline bool reads_tiled(const tensor* t) noexcept {
  if (!in_tiled_memory(t)) return false;
  return layout_tiled(t->view_src ? t->view_src : t);
}
// The CPU reads `node`'s source `slot` in place: anything but a tiled layout, and a tiled
// tensor itself (not a view) as the weight of mul_mat or mul_mat_id.
inline bool cpu_reads_in_place(const tensor* node, int slot) noexcept {
  const tensor* s = node->src[slot];
  if (!s || !reads_tiled(s)) return true;
  return slot == 0 && !s->view_src && (node->op == op::mul_mat || node->op == op::mul_mat_id);
}

}  // namespace cpu::tiled
}  // namespace gk
