// SPDX-License-Identifier: MIT
// gk::error: what every layer throws on bad input. The message names what was wrong in
// one sentence (the type, the length, the tensor or op); the C ABI turns it into a
// non-zero return and gk_last_error().
#pragma once

#include <stdexcept>
#include <string>

namespace gk {

class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace gk
