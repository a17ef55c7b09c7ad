// SPDX-License-Identifier: MIT
// gk, the whole CPU library in one include: types and formats, SIMD dots, tensors,
// contexts, graphs, op builders, the CPU compute pass, the graph allocator, backends,
// the device registry and the scheduler, dispatched at compile time to the best SIMD
// target your compiler flags allow (gk::simd::native).
#pragma once

#include "gk/alloc.hpp"
#include "gk/backend.hpp"
#include "gk/backends/cpu.hpp"
#include "gk/registry.hpp"
#include "gk/sched.hpp"

#include "gk/context.hpp"
#include "gk/core/error.hpp"
#include "gk/core/narrow.hpp"
#include "gk/core/types.hpp"
#include "gk/cpu/compute.hpp"
#include "gk/formats/all.hpp"
#include "gk/graph.hpp"
#include "gk/ops.hpp"
#include "gk/simd/dot.hpp"
#include "gk/tensor.hpp"
