// SPDX-License-Identifier: MIT
// BlockFormat: what a weight format is to gk, and the row functions written once over it.
//
// A format is a type with static members only. Its block struct is the GGUF bytes
// (layout-identical, static-asserted beside each format), its decode is the definition of
// what those bytes mean, and its scalar dot is the definition every SIMD kernel is
// checked against. Rows are whole blocks: a row of n weights is n / block_size blocks.
#pragma once

#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "gk/core/error.hpp"
#include "gk/core/exact_fp.hpp"
#include "gk/core/narrow.hpp"
#include "gk/core/types.hpp"

GK_EXACT_FP_BEGIN

namespace gk {

template <class W>
concept BlockFormat = requires(const typename W::block& b, typename W::block& out_b, float* out,
                               const float* in, const float* importance,
                               const typename W::dot_type::block* act) {
  // the GGUF type id this format is stored under
  { W::id } -> std::convertible_to<type>;
  // weights per block, as GGUF counts them
  { W::block_size } -> std::convertible_to<int>;
  // the block: GGUF's bytes, trivially copyable, no padding beyond what GGUF has (a user
  // id's geometry is the format's own: register_format<W> registers it from W)
  requires std::is_trivially_copyable_v<typename W::block>;
  requires is_user_type(W::id) || sizeof(typename W::block) == type_size(W::id);
  requires is_user_type(W::id) || W::block_size == block_size(W::id);
  // the activation format a dot pairs this weight with (itself a format)
  typename W::dot_type;
  // decode one block into block_size floats: the definition of the bits
  { W::decode(b, out) } -> std::same_as<void>;
  // encode block_size floats; importance (block_size weights) may be null
  { W::encode(in, out_b, importance) } -> std::same_as<void>;
  // scalar reference dot of one weight block with the activation blocks it spans
  // (block_size / dot_type::block_size of them, starting at act)
  { W::dot(b, act) } -> std::convertible_to<float>;
};

// Formats that need statistics of the whole row to encode (the importance-weighted
// searches mix in the row's mean square) provide encode_row; the others are encoded block
// by block.
template <class W>
concept RowEncoded = requires(const float* in, typename W::block* out, std::int64_t n, const float* imp) {
  { W::encode_row(in, out, n, imp) } -> std::same_as<void>;
};

// Formats whose dot is defined over the whole row rather than as blocks summed in order
// provide dot_row (the block-of-one float formats do: a single running sum in index order
// is a chain no SIMD kernel can reproduce bit for bit; float.hpp defines theirs).
template <class W>
concept RowDotted = requires(const typename W::block* w, const typename W::dot_type::block* a, std::int64_t n) {
  { W::dot_row(w, a, n) } -> std::same_as<float>;
};

// Throws gk::error unless a row of n weights of format t is whole blocks.
inline void check_row(type t, std::int64_t n) {
  if (!is_valid(t)) throw error("gk: unknown type id " + std::to_string(static_cast<int>(t)));
  if (n < 0 || n % block_size(t) != 0)
    throw error("gk: row of " + std::to_string(n) + " weights is not a whole number of " +
                std::string(name(t)) + " blocks (block size " + std::to_string(block_size(t)) + ")");
}

template <BlockFormat W>
void decode_row(const typename W::block* src, float* dst, std::int64_t n) {
  const std::int64_t nb = n / W::block_size;
  for (std::int64_t i = 0; i < nb; ++i) W::decode(src[i], dst + i * W::block_size);
}

template <BlockFormat W>
void encode_row(const float* src, typename W::block* dst, std::int64_t n, const float* importance = nullptr) {
  if constexpr (RowEncoded<W>) {
    W::encode_row(src, dst, n, importance);
  } else {
    const std::int64_t nb = n / W::block_size;
    for (std::int64_t i = 0; i < nb; ++i)
      W::encode(src + i * W::block_size, dst[i], importance ? importance + i * W::block_size : nullptr);
  }
}

// The scalar reference dot of a row: the format's own row definition where it has one,
// otherwise blocks summed in order, in float.
template <BlockFormat W>
float dot_row(const typename W::block* w, const typename W::dot_type::block* a, std::int64_t n) {
  if constexpr (RowDotted<W>) {
    return W::dot_row(w, a, n);
  } else {
    static_assert(W::dot_type::block_size <= W::block_size && W::block_size % W::dot_type::block_size == 0,
                  "a weight block must span whole activation blocks");
    constexpr int per = W::block_size / W::dot_type::block_size;
    const std::int64_t nb = n / W::block_size;
    float sum = 0.0f;
    for (std::int64_t i = 0; i < nb; ++i) sum += W::dot(w[i], a + i * per);
    return sum;
  }
}

// ---- formats registered at run time ----
// Code that holds only a type id (the row interface, the CPU kernels' dispatch) reaches a
// format defined outside gk through these pointers, instantiated from the templates above
// when the format is registered. gk's own formats never come here: they are dispatched
// at compile time (formats::visit), and the table is consulted only when that finds nothing.

struct row_codec {
  void (*decode_row)(const void* src, float* dst, std::int64_t n);
  void (*encode_row)(const float* src, void* dst, std::int64_t n, const float* importance);
};

namespace detail {
template <BlockFormat W>
inline constexpr row_codec row_codec_of{
    [](const void* src, float* dst, std::int64_t n) { decode_row<W>(static_cast<const typename W::block*>(src), dst, n); },
    [](const float* src, void* dst, std::int64_t n, const float* imp) {
      encode_row<W>(src, static_cast<typename W::block*>(dst), n, imp);
    }};
inline std::atomic<const row_codec*> user_row_codecs[user_type_max];
}  // namespace detail

// The row functions of registered user type t; null for every other id.
inline const row_codec* user_codec(type t) noexcept {
  if (!is_user_type(t)) return nullptr;
  return detail::user_row_codecs[static_cast<int>(t) - user_type_first].load(std::memory_order_acquire);
}

// Registers W (whose id is in the user range) under `name`: its geometry, then its row
// functions. Registering the same format again does nothing; a second format under one id
// throws gk::error. gk::register_format (cpu/compute.hpp) adds the CPU kernels too.
template <BlockFormat W>
void register_rows(std::string_view type_name) {
  static_assert(is_user_type(W::id), "register_rows: a format defined outside gk takes an id in the user range "
                                     "(gk::user_type(k)); gk's own formats are known without registering");
  register_type(W::id, type_name, W::block_size, static_cast<int>(sizeof(typename W::block)));
  const row_codec* expected = nullptr;
  auto& slot = detail::user_row_codecs[static_cast<int>(W::id) - user_type_first];
  if (!slot.compare_exchange_strong(expected, &detail::row_codec_of<W>, std::memory_order_acq_rel) &&
      expected != &detail::row_codec_of<W>)
    throw error("gk: register_rows " + std::string(type_name) + ": id " + std::to_string(static_cast<int>(W::id)) +
                " already has another format's row functions");
}

}  // namespace gk

GK_EXACT_FP_END
