// SPDX-License-Identifier: MIT
// The planted CUDA controls of the kernel contract (cuda_controls.cu): each a real kernel
// built to break exactly one gate. Pointers are device addresses; rows are packed f32 of
// n elements; every function launches on the default stream and synchronises.
#pragma once

namespace gk_contract::cuda_controls {

void row_max_fmax(const float* x, float* y, int n, int rows);       // gate 1: fmax drops NaN
void row_sum_atomic(const float* x, float* y, int n, int rows);     // gate 2: order varies
void row_sum_inplace(float* x, float* y, int n, int rows);          // gate 2: writes its input
void row_sum_tail_drop(const float* x, float* y, int n, int rows);  // gate 3: tail loses one
void dot_half(const float* w, const float* x, float* y, int n, int rows);  // gate 4: half sums

}  // namespace gk_contract::cuda_controls
