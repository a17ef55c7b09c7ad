// SPDX-License-Identifier: MIT
// The op families of the CUDA backend; backend.cu routes each node to one of them.
// Each family's file is the only one defining its pair of functions.
#pragma once

#include "common.cuh"

namespace gk::cuda {

// elementwise.cu: add sub mul div (broadcast), add1, add_id, sqr sqrt log sin cos, unary
// (all 22), glu (all 7), scale, clamp, leaky_relu, fill, arange
bool elementwise_supports(const tensor* node);
void elementwise_run(const tensor* node, exec& x);

// copy.cu: dup cpy cont (float types; float -> the formats encodable on the device),
// set_rows, repeat, concat; reduce.cu: sum sum_rows mean argmax argsort top_k
bool copy_supports(const tensor* node);
void copy_run(const tensor* node, exec& x);
bool reduce_supports(const tensor* node);
void reduce_run(const tensor* node, exec& x);

// norm.cu: norm rms_norm group_norm l2_norm; softmax.cu: soft_max diag_mask_inf
// diag_mask_zero; rope.cu: rope; attn.cu: flash_attn_ext
bool norm_supports(const tensor* node);
void norm_run(const tensor* node, exec& x);
bool softmax_supports(const tensor* node);
void softmax_run(const tensor* node, exec& x);
bool rope_supports(const tensor* node);
void rope_run(const tensor* node, exec& x);
bool attn_supports(const tensor* node);
void attn_run(const tensor* node, exec& x);

// matmul.cu: mul_mat mul_mat_id get_rows (weights in every format gk decodes)
bool matmul_supports(const tensor* node);
void matmul_run(const tensor* node, exec& x);
// the planted control of the encoded-activation claims (exec::claimed): true keys them by
// address alone and keeps them across writes (test_cuda_matmul, matvec_q8_plant(5))
bool claims_by_address();

}  // namespace gk::cuda
