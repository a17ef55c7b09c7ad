// SPDX-License-Identifier: MIT
// Op builders: attn family (to be written).
#pragma once

#include "gk/ops/common.hpp"

namespace gk {}  // namespace gk
