// SPDX-License-Identifier: MIT
// Op builders: reduce family (to be written).
#pragma once

#include "gk/ops/common.hpp"

namespace gk {}  // namespace gk
