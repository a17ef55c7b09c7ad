/* SPDX-License-Identifier: MIT */
/* gk's C ABI (libgk.so): the type layer for C callers and outside harnesses.
 * Every function that can fail returns 0 on success and non-zero on bad input; the
 * reason, naming the type and length, is then in gk_last_error() (per thread).
 * Nothing here aborts, throws, or writes past gk_row_size(t, n) bytes of dst. */
#ifndef GK_H
#define GK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#  define GK_API __declspec(dllimport)
#elif defined(GK_BUILDING_LIB)
#  define GK_API __attribute__((visibility("default")))
#else
#  define GK_API
#endif

/* The GGUF tensor type ids. Retired ids (4, 5, 31-33, 36-38) are absent. */
typedef enum gk_type {
  GK_TYPE_F32 = 0, GK_TYPE_F16 = 1, GK_TYPE_Q4_0 = 2, GK_TYPE_Q4_1 = 3,
  GK_TYPE_Q5_0 = 6, GK_TYPE_Q5_1 = 7, GK_TYPE_Q8_0 = 8, GK_TYPE_Q8_1 = 9,
  GK_TYPE_Q2_K = 10, GK_TYPE_Q3_K = 11, GK_TYPE_Q4_K = 12, GK_TYPE_Q5_K = 13,
  GK_TYPE_Q6_K = 14, GK_TYPE_Q8_K = 15,
  GK_TYPE_IQ2_XXS = 16, GK_TYPE_IQ2_XS = 17, GK_TYPE_IQ3_XXS = 18, GK_TYPE_IQ1_S = 19,
  GK_TYPE_IQ4_NL = 20, GK_TYPE_IQ3_S = 21, GK_TYPE_IQ2_S = 22, GK_TYPE_IQ4_XS = 23,
  GK_TYPE_I8 = 24, GK_TYPE_I16 = 25, GK_TYPE_I32 = 26, GK_TYPE_I64 = 27, GK_TYPE_F64 = 28,
  GK_TYPE_IQ1_M = 29, GK_TYPE_BF16 = 30,
  GK_TYPE_TQ1_0 = 34, GK_TYPE_TQ2_0 = 35,
  GK_TYPE_MXFP4 = 39, GK_TYPE_NVFP4 = 40, GK_TYPE_Q1_0 = 41, GK_TYPE_Q2_0 = 42,
  GK_TYPE_COUNT = 43
} gk_type;

/* Name as GGUF spells it ("q4_K"); NULL for an id that is not a type. */
GK_API const char * gk_type_name(gk_type t);
/* Weights per block; 0 for an id that is not a type. */
GK_API int64_t      gk_blck_size(gk_type t);
/* Bytes per block; 0 for an id that is not a type. */
GK_API size_t       gk_type_size(gk_type t);
/* Bytes of a row of n weights; 0 when t is not a type or n is not whole blocks. */
GK_API size_t       gk_row_size(gk_type t, int64_t n);
/* The activation format gk_vec_dot expects for weights of type t (as the reference
 * pairs them); GK_TYPE_COUNT when t has no dot. */
GK_API gk_type      gk_vec_dot_type(gk_type t);

/* Encode n floats into a row of type t (n a multiple of the block size). imatrix, when
 * not NULL, holds n non-negative importance weights: the encoder minimises the
 * importance-weighted squared error. */
GK_API int gk_quantize_row(gk_type t, const float * src, void * dst, int64_t n, const float * imatrix);
/* Decode a row of n weights of type t into floats. */
GK_API int gk_dequantize_row(gk_type t, const void * src, float * dst, int64_t n);
/* *out = the scalar reference dot of a weight row of type t with an activation row of
 * type gk_vec_dot_type(t), both n weights long. */
GK_API int gk_vec_dot(gk_type t, int64_t n, const void * w_row, const void * act_row, float * out);
/* The message for this thread's last non-zero return ("" when none). */
GK_API const char * gk_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* GK_H */
