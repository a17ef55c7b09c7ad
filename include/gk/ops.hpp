// SPDX-License-Identifier: MIT
// Op builders for every op the reference knows, with its shape rules. Each builder checks
// its operands first and fails with gk::error naming the op, the shapes and the types;
// only then does it make the result node, so nothing is half-built.
//
//   gk::tensor* y = gk::mul_mat(ctx, w, x);   // y = w^T x, ggml's convention
//
// Builders only record the op; computing happens in a backend (cpu/compute.hpp).
#pragma once

#include "gk/ops/common.hpp"
#include "gk/ops/view.hpp"
#include "gk/ops/elementwise.hpp"
#include "gk/ops/reduce.hpp"
#include "gk/ops/norm.hpp"
#include "gk/ops/softmax.hpp"
#include "gk/ops/rope.hpp"
#include "gk/ops/copy.hpp"
#include "gk/ops/attn.hpp"
#include "gk/ops/matmul.hpp"
#include "gk/ops/extra.hpp"
