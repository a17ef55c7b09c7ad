// SPDX-License-Identifier: MIT
// (placeholder: this suite is being written)
#include <catch2/catch.hpp>
