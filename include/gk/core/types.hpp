// SPDX-License-Identifier: MIT
// gk::type: the GGUF tensor type ids, so a type read from a file is a gk::type by
// construction. Ids the format has retired (4, 5, 31-33, 36-38) have no enumerator.
// The table below is the geometry every layer above reads: name (spelled as GGUF and
// ggml spell it), weights per block, bytes per block.
//
// Ids from user_type_first on are reserved for formats defined outside gk: a program
// registers one at run time (register_type here for the geometry; gk::register_format in
// cpu/compute.hpp for a whole BlockFormat), and from then on every lookup below answers
// for it as for a GGUF id. They mean nothing outside the program that registered them,
// so a file reader should refuse them.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "gk/core/error.hpp"

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

// The reserved user range: far from GGUF's ids (which grow by a few a year) and small
// enough for fixed tables (every slot is a few dozen bytes).
inline constexpr int user_type_first = 1024;
inline constexpr int user_type_max = 64;
constexpr bool is_user_type(type t) noexcept {
  const int i = static_cast<int>(t);
  return i >= user_type_first && i < user_type_first + user_type_max;
}
// The k-th user id (0 <= k < user_type_max).
constexpr type user_type(int k) noexcept { return static_cast<type>(user_type_first + k); }

namespace detail {

// One registered user type. `set` is stored last (release) and read first (acquire), so
// a reader that sees it sees the rest; slots are written once and never cleared.
struct user_type_slot {
  type_traits traits{};
  char name[24]{};
  std::atomic<bool> set{false};
};
inline std::array<user_type_slot, user_type_max> user_types{};  // constant-initialised: no guard
inline std::mutex user_types_mutex;

inline const type_traits* registered_traits(type t) noexcept {
  const auto& s = user_types[static_cast<std::size_t>(static_cast<int>(t) - user_type_first)];
  return s.set.load(std::memory_order_acquire) ? &s.traits : nullptr;
}

// The traits of t, or null when t is neither a GGUF id nor a registered user id. GGUF ids
// take the first branch: one compare more than a plain table lookup.
constexpr const type_traits* find_traits(type t) noexcept {
  const int i = static_cast<int>(t);
  if (i >= 0 && i < type_count) return type_table[i].name.empty() ? nullptr : &type_table[i];
  if (std::is_constant_evaluated() || !is_user_type(t)) return nullptr;  // nothing is registered at compile time
  return registered_traits(t);
}

}  // namespace detail

// True for every id a GGUF file may carry today, and for user ids once registered.
constexpr bool is_valid(type t) noexcept { return detail::find_traits(t) != nullptr; }
constexpr const type_traits& traits(type t) noexcept { return *detail::find_traits(t); }  // t must be valid
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
  if (!std::is_constant_evaluated())
    for (int k = 0; k < user_type_max; ++k)
      if (const type_traits* u = detail::registered_traits(user_type(k)); u && u->name == n) return user_type(k);
  return std::nullopt;
}

// How errors name a type: its name, or what is wrong with the id.
inline std::string type_label(type t) {
  if (is_valid(t)) return std::string(name(t));
  const std::string id = "type id " + std::to_string(static_cast<int>(t));
  if (is_user_type(t)) return id + " (a user format id that nothing has registered: call gk::register_format first)";
  return id + " (neither a GGUF type nor in the user range " + std::to_string(user_type_first) + ".." +
         std::to_string(user_type_first + user_type_max - 1) + ")";
}

// Registers the geometry of user id t. Registering an id again with the same name and
// geometry does nothing; anything else that would make two meanings of one id or one name
// throws gk::error, as does an id outside the user range or a name GGUF already uses.
inline void register_type(type t, std::string_view type_name, int block_size, int type_size) {
  const std::string what = "gk: register_type " + std::string(type_name) + " (id " +
                           std::to_string(static_cast<int>(t)) + "): ";
  if (!is_user_type(t))
    throw error(what + "user formats take ids " + std::to_string(user_type_first) + ".." +
                std::to_string(user_type_first + user_type_max - 1) + " (gk::user_type(k))");
  if (type_name.empty() || type_name.size() >= sizeof(detail::user_type_slot::name))
    throw error(what + "the name must be 1.." + std::to_string(sizeof(detail::user_type_slot::name) - 1) + " characters");
  if (block_size < 1 || type_size < 1) throw error(what + "block size and bytes per block must be positive");
  std::lock_guard<std::mutex> lock(detail::user_types_mutex);
  auto& s = detail::user_types[static_cast<std::size_t>(static_cast<int>(t) - user_type_first)];
  if (s.set.load(std::memory_order_acquire)) {
    if (s.traits.name == type_name && s.traits.block_size == block_size && s.traits.type_size == type_size) return;
    throw error(what + "the id is already registered as " + std::string(s.traits.name) + " (block size " +
                std::to_string(s.traits.block_size) + ", " + std::to_string(s.traits.type_size) + " bytes)");
  }
  if (const auto other = type_from_name(type_name))
    throw error(what + "the name is already taken by id " + std::to_string(static_cast<int>(*other)));
  std::copy(type_name.begin(), type_name.end(), s.name);
  s.traits = {std::string_view(s.name, type_name.size()), block_size, type_size, block_size > 1};
  s.set.store(true, std::memory_order_release);
}

}  // namespace gk
