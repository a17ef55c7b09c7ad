// SPDX-License-Identifier: MIT
// Every format gk carries, as one type list, and the run-time switch from a gk::type to
// the format type (for the C ABI and other callers that hold a type id, not a type).
#pragma once

#include <tuple>
#include <type_traits>

#include "gk/formats/float.hpp"
#include "gk/formats/fp4.hpp"
#include "gk/formats/iq1.hpp"
#include "gk/formats/iq2.hpp"
#include "gk/formats/iq3.hpp"
#include "gk/formats/iq4.hpp"
#include "gk/formats/kquants.hpp"
#include "gk/formats/kquants_low.hpp"
#include "gk/formats/legacy.hpp"
#include "gk/formats/ternary.hpp"

namespace gk::formats {

using all = std::tuple<f32, f16, bf16,
                       q4_0, q4_1, q5_0, q5_1, q8_0, q8_1,
                       q2_K, q3_K, q4_K, q5_K, q6_K, q8_K,
                       tq1_0, tq2_0, mxfp4, nvfp4, q1_0, q2_0,
                       iq1_s, iq1_m, iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, iq4_nl, iq4_xs>;

namespace detail {
template <class F, class... Ws>
bool visit(type t, F&& f, std::tuple<Ws...>*) {
  return ((Ws::id == t ? (f(std::type_identity<Ws>{}), true) : false) || ...);
}
}  // namespace detail

// Calls f(std::type_identity<W>{}) for the format W stored under t; false when gk
// carries no format for t (the integer types, f64, or an id that is not a type).
template <class F>
bool visit(type t, F&& f) {
  return detail::visit(t, f, static_cast<all*>(nullptr));
}

}  // namespace gk::formats
