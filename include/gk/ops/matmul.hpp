// SPDX-License-Identifier: MIT
// Op builders: matmul family (to be written).
#pragma once

#include "gk/ops/common.hpp"

namespace gk {}  // namespace gk
