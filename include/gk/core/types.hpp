// SPDX-License-Identifier: MIT
// gk::type: the GGUF tensor type ids, so a type read from a file is a gk::type by
// construction. Ids the format has retired (4, 5, 31-33, 36-38) have no enumerator.
// The table below is the geometry every layer above reads: name (spelled as GGUF and
// ggml spell it), weights per block, bytes per block.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace gk {

enum class type : std::int32_t {
  f32 = 0, f16 = 1, q4_0 = 2, q4_1 = 3,
  q5_0 = 6, q5_1 = 7, q8_0 = 8, q8_1 = 9,
  q2_K = 10, q3_K = 11, q4_K = 12, q5_K = 13, q6_K = 14, q8_K = 15,
  iq2_xxs = 16, iq2_xs = 17, iq3_xxs = 18, iq1_s = 19, iq4_nl = 20, iq3_s = 21,
  iq2_s = 22, iq4_xs = 23,
  i8 = 24, i16 = 25, i32 = 26, i64 = 27, f64 = 28,
  iq1_m = 29, bf16 = 30,
  tq1_0 = 34, tq2_0 = 35,
  mxfp4 = 39, nvfp4 = 40, q1_0 = 41, q2_0 = 42,
};

inline constexpr int type_count = 43;  // one past the largest id, as GGUF counts them
inline constexpr int qk_k = 256;       // weights per super-block (k-quants, iq*, tq*)

struct type_traits {
  std::string_view name;     // empty: the id is retired
  std::int32_t block_size;   // weights per block (1 for plain scalars)
  std::int32_t type_size;    // bytes per block
  bool quantized;
};

namespace detail {
constexpr std::array<type_traits, type_count> make_type_table() {
  std::array<type_traits, type_count> t{};
  auto set = [&](type id, std::string_view n, int bs, int ts, bool q) {
    t[static_cast<int>(id)] = {n, bs, ts, q};
  };
  set(type::f32, "f32", 1, 4, false);
  set(type::f16, "f16", 1, 2, false);
  set(type::q4_0, "q4_0", 32, 18, true);
  set(type::q4_1, "q4_1", 32, 20, true);
  set(type::q5_0, "q5_0", 32, 22, true);
  set(type::q5_1, "q5_1", 32, 24, true);
  set(type::q8_0, "q8_0", 32, 34, true);
  set(type::q8_1, "q8_1", 32, 36, true);
  set(type::q2_K, "q2_K", 256, 84, true);
  set(type::q3_K, "q3_K", 256, 110, true);
  set(type::q4_K, "q4_K", 256, 144, true);
  set(type::q5_K, "q5_K", 256, 176, true);
  set(type::q6_K, "q6_K", 256, 210, true);
  set(type::q8_K, "q8_K", 256, 292, true);
  set(type::iq2_xxs, "iq2_xxs", 256, 66, true);
  set(type::iq2_xs, "iq2_xs", 256, 74, true);
  set(type::iq3_xxs, "iq3_xxs", 256, 98, true);
  set(type::iq1_s, "iq1_s", 256, 50, true);
  set(type::iq4_nl, "iq4_nl", 32, 18, true);
  set(type::iq3_s, "iq3_s", 256, 110, true);
  set(type::iq2_s, "iq2_s", 256, 82, true);
  set(type::iq4_xs, "iq4_xs", 256, 136, true);
  set(type::i8, "i8", 1, 1, false);
  set(type::i16, "i16", 1, 2, false);
  set(type::i32, "i32", 1, 4, false);
  set(type::i64, "i64", 1, 8, false);
  set(type::f64, "f64", 1, 8, false);
  set(type::iq1_m, "iq1_m", 256, 56, true);
  set(type::bf16, "bf16", 1, 2, false);
  set(type::tq1_0, "tq1_0", 256, 54, true);
  set(type::tq2_0, "tq2_0", 256, 66, true);
  set(type::mxfp4, "mxfp4", 32, 17, true);
  set(type::nvfp4, "nvfp4", 64, 36, true);
  set(type::q1_0, "q1_0", 128, 18, true);
  set(type::q2_0, "q2_0", 64, 18, true);
  return t;
}
}  // namespace detail

inline constexpr std::array<type_traits, type_count> type_table = detail::make_type_table();

// True for every id a GGUF file may carry today.
constexpr bool is_valid(type t) noexcept {
  const int i = static_cast<int>(t);
  return i >= 0 && i < type_count && !type_table[i].name.empty();
}
constexpr const type_traits& traits(type t) noexcept { return type_table[static_cast<int>(t)]; }
constexpr std::string_view name(type t) noexcept { return is_valid(t) ? traits(t).name : std::string_view{}; }
constexpr std::int64_t block_size(type t) noexcept { return is_valid(t) ? traits(t).block_size : 0; }
constexpr std::size_t type_size(type t) noexcept { return is_valid(t) ? traits(t).type_size : 0; }
constexpr bool is_quantized(type t) noexcept { return is_valid(t) && traits(t).quantized; }

// Bytes of a row of n weights; n must be a multiple of the block size (callers check:
// see gk::check_row).
constexpr std::size_t row_size(type t, std::int64_t n) noexcept {
  return is_valid(t) ? type_size(t) * static_cast<std::size_t>(n / block_size(t)) : 0;
}

constexpr std::optional<type> type_from_name(std::string_view n) noexcept {
  for (int i = 0; i < type_count; ++i)
    if (!type_table[i].name.empty() && type_table[i].name == n) return static_cast<type>(i);
  return std::nullopt;
}

}  // namespace gk
