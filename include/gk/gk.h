/* SPDX-License-Identifier: MIT */
/* gk's C ABI (libgk.so): the type layer, contexts, tensors, every graph builder, graphs,
 * CPU compute, devices, backends, buffers, the graph allocator and the scheduler, for
 * callers in C (or anything with a C FFI). Plain C11.
 *
 * Errors: a function that can fail returns int 0 on success and non-zero on failure, or
 * NULL for one that makes something; the reason, naming the op, tensors and shapes, is
 * then in gk_last_error() (per thread). No C++ exception crosses this boundary and
 * nothing aborts on bad input.
 *
 * Handles are opaque. A gk_tensor lives in the gk_context that made it and dies with it.
 * Builders record ops; gk_graph_compute, a backend or the scheduler computes them.
 * Builders take their arguments in the order of the C++ builders (include/gk/ops/) and of
 * ggml's, under the same names with gk_ in front: gk_mul_mat(ctx, w, x) is w^T x.
 *
 * SIMD dispatch: libgk.so carries the CPU kernels built for several x86 targets, one
 * module each (scalar = x86-64-v2, avx2 = + AVX2/FMA/F16C, avx512 = + AVX-512
 * F/BW/DQ/VL/VNNI), and loads the best one this CPU runs on the first call.
 * GK_TARGET=scalar|avx2|avx512 in the environment (read once) forces one; forcing one the
 * CPU cannot run makes every call fail with the reason in gk_last_error(), never an
 * illegal instruction. gk_simd_target() says which one runs. */
#ifndef GK_H
#define GK_H

#include <stdbool.h>
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

/* The op enums' values are the reference's (enum ggml_unary_op, ggml_glu_op, ...). */
typedef enum gk_unary_op {
  GK_UNARY_OP_ABS, GK_UNARY_OP_SGN, GK_UNARY_OP_NEG, GK_UNARY_OP_STEP, GK_UNARY_OP_TANH,
  GK_UNARY_OP_ELU, GK_UNARY_OP_RELU, GK_UNARY_OP_SIGMOID, GK_UNARY_OP_GELU,
  GK_UNARY_OP_GELU_QUICK, GK_UNARY_OP_SILU, GK_UNARY_OP_HARDSWISH, GK_UNARY_OP_HARDSIGMOID,
  GK_UNARY_OP_EXP, GK_UNARY_OP_EXPM1, GK_UNARY_OP_SOFTPLUS, GK_UNARY_OP_GELU_ERF,
  GK_UNARY_OP_XIELU, GK_UNARY_OP_FLOOR, GK_UNARY_OP_CEIL, GK_UNARY_OP_ROUND, GK_UNARY_OP_TRUNC,
  GK_UNARY_OP_COUNT
} gk_unary_op;

typedef enum gk_glu_op {
  GK_GLU_OP_REGLU, GK_GLU_OP_GEGLU, GK_GLU_OP_SWIGLU, GK_GLU_OP_SWIGLU_OAI, GK_GLU_OP_GEGLU_ERF,
  GK_GLU_OP_GEGLU_QUICK, GK_GLU_OP_SWIGLU_CLAMP, GK_GLU_OP_COUNT
} gk_glu_op;

typedef enum gk_sort_order { GK_SORT_ORDER_ASC = 0, GK_SORT_ORDER_DESC = 1 } gk_sort_order;
typedef enum gk_tri_type {
  GK_TRI_TYPE_UPPER_DIAG = 0, GK_TRI_TYPE_UPPER = 1, GK_TRI_TYPE_LOWER_DIAG = 2, GK_TRI_TYPE_LOWER = 3
} gk_tri_type;
typedef enum gk_pool_op { GK_POOL_MAX = 0, GK_POOL_AVG = 1 } gk_pool_op;
typedef enum gk_scale_mode { GK_SCALE_MODE_NEAREST = 0, GK_SCALE_MODE_BILINEAR = 1, GK_SCALE_MODE_BICUBIC = 2 } gk_scale_mode;
#define GK_SCALE_FLAG_ALIGN_CORNERS (1u << 8)
#define GK_SCALE_FLAG_ANTIALIAS (1u << 9)
typedef enum gk_prec { GK_PREC_DEFAULT = 0, GK_PREC_F32 = 10 } gk_prec;

#define GK_ROPE_TYPE_NORMAL 0
#define GK_ROPE_TYPE_NEOX 2
#define GK_ROPE_TYPE_MROPE 8
#define GK_ROPE_TYPE_VISION 24
#define GK_ROPE_TYPE_IMROPE 40

#define GK_TENSOR_FLAG_INPUT 1
#define GK_TENSOR_FLAG_OUTPUT 2
#define GK_TENSOR_FLAG_PARAM 4
#define GK_TENSOR_FLAG_LOSS 8
#define GK_TENSOR_FLAG_COMPUTE 16

#define GK_MAX_DIMS 4
#define GK_MAX_SRC 10
#define GK_N_TASKS_MAX (-1)

typedef struct gk_context gk_context;         /* an arena of tensors */
typedef struct gk_tensor gk_tensor;           /* a tensor, or a node of a graph */
typedef struct gk_graph gk_graph;             /* nodes in an order sources come first */
typedef struct gk_backend gk_backend;         /* computes graphs: the CPU, a GPU */
typedef struct gk_buffer_type gk_buffer_type; /* a kind of memory (not freed by callers) */
typedef struct gk_buffer gk_buffer;           /* one allocation of a buffer type */
typedef struct gk_gallocr gk_gallocr;         /* the graph allocator */
typedef struct gk_sched gk_sched;             /* the scheduler */

/* Custom ops: called on every one of nth threads (ith = 0..nth-1) when computed. */
typedef void (*gk_custom1_fn)(gk_tensor *dst, const gk_tensor *a, int ith, int nth, void *userdata);
typedef void (*gk_custom2_fn)(gk_tensor *dst, const gk_tensor *a, const gk_tensor *b, int ith, int nth,
                              void *userdata);
typedef void (*gk_custom3_fn)(gk_tensor *dst, const gk_tensor *a, const gk_tensor *b, const gk_tensor *c,
                              int ith, int nth, void *userdata);
typedef void (*gk_custom_fn)(gk_tensor *dst, int ith, int nth, void *userdata);

/* The message for this thread's last failure ("" when none). */
GK_API const char *gk_last_error(void);

/* ---- Runtime SIMD dispatch ---- */

/* Loads the target module now (every other call does it on first use). 0 when one is
 * loaded; non-zero, with the reason in gk_last_error(), when none can be. */
GK_API int gk_init(void);
/* The target the CPU kernels run on: "scalar", "avx2" or "avx512"; NULL when none loaded. */
GK_API const char *gk_simd_target(void);
/* 1 when this CPU can run `target` and its module is installed, else 0. */
GK_API int gk_simd_target_supported(const char *target);

/* ---- The type layer: geometry, encode, decode, dot ---- */

/* Name as GGUF spells it ("q4_K"); NULL for an id that is not a type. */
GK_API const char *gk_type_name(gk_type t);
/* Weights per block; 0 for an id that is not a type. */
GK_API int64_t gk_blck_size(gk_type t);
/* Bytes per block; 0 for an id that is not a type. */
GK_API size_t gk_type_size(gk_type t);
/* Bytes of a row of n weights; 0 when t is not a type or n is not whole blocks. */
GK_API size_t gk_row_size(gk_type t, int64_t n);
/* The activation format gk_vec_dot expects for weights of type t (as the reference
 * pairs them); GK_TYPE_COUNT when t has no dot. */
GK_API gk_type gk_vec_dot_type(gk_type t);
/* Encode n floats into a row of type t (n a multiple of the block size). imatrix,
 * when not NULL, holds n non-negative importance weights: the encoder minimises the
 * importance-weighted squared error. */
GK_API int gk_quantize_row(gk_type t, const float *src, void *dst, int64_t n, const float *imatrix);
/* Decode a row of n weights of type t into floats. */
GK_API int gk_dequantize_row(gk_type t, const void *src, float *dst, int64_t n);
/* *out = the scalar reference dot of a weight row of type t with an activation row of
 * type gk_vec_dot_type(t), both n weights long. */
GK_API int gk_vec_dot(gk_type t, int64_t n, const void *w_row, const void *act_row, float *out);

/* ---- Contexts: an arena of tensor headers and (unless no_alloc) their data ---- */

/* A context whose arena holds mem_size bytes (gk_tensor_overhead() per tensor, plus
 * its data unless no_alloc). */
GK_API gk_context *gk_context_new(size_t mem_size, bool no_alloc);
/* Frees the arena and every tensor in it (NULL is a no-op). */
GK_API void gk_context_free(gk_context *ctx);
/* Arena bytes in use. */
GK_API size_t gk_context_used(const gk_context *ctx);
/* Arena bytes in all. */
GK_API size_t gk_context_size(const gk_context *ctx);
/* Tensors made from now on get (or do not get) data from the arena. */
GK_API int gk_context_set_no_alloc(gk_context *ctx, bool no_alloc);
/* Tensors made in ctx so far. */
GK_API int gk_context_n_tensors(const gk_context *ctx);
/* The i-th tensor made in ctx; NULL when out of range. */
GK_API gk_tensor *gk_context_tensor(const gk_context *ctx, int i);
/* The first tensor named name; NULL when none. */
GK_API gk_tensor *gk_context_find(const gk_context *ctx, const char *name);
/* Arena bytes one tensor header takes (add its data, rounded up to 64, if it owns
 * storage). */
GK_API size_t gk_tensor_overhead(void);

/* ---- Tensors ---- */

/* A tensor of type and shape ne[0..n_dims) (n_dims 1..4). */
GK_API gk_tensor *gk_new_tensor(gk_context *ctx, gk_type type, int n_dims, const int64_t *ne);
GK_API gk_tensor *gk_new_tensor_1d(gk_context *ctx, gk_type type, int64_t ne0);
GK_API gk_tensor *gk_new_tensor_2d(gk_context *ctx, gk_type type, int64_t ne0, int64_t ne1);
GK_API gk_tensor *gk_new_tensor_3d(gk_context *ctx, gk_type type, int64_t ne0, int64_t ne1, int64_t ne2);
GK_API gk_tensor *gk_new_tensor_4d(gk_context *ctx, gk_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
/* Same type and shape as src, storage of its own. */
GK_API gk_tensor *gk_dup_tensor(gk_context *ctx, const gk_tensor *src);
/* Same type, shape and strides as src, aliasing its storage. */
GK_API gk_tensor *gk_view_tensor(gk_context *ctx, gk_tensor *src);
GK_API gk_type gk_tensor_type(const gk_tensor *t);
/* Elements along dim (0..3); 0 for a NULL tensor or a dim out of range. */
GK_API int64_t gk_tensor_ne(const gk_tensor *t, int dim);
/* Stride of dim in bytes. */
GK_API size_t gk_tensor_nb(const gk_tensor *t, int dim);
GK_API int gk_tensor_n_dims(const gk_tensor *t);
GK_API int64_t gk_tensor_nelements(const gk_tensor *t);
GK_API int64_t gk_tensor_nrows(const gk_tensor *t);
/* Bytes spanned from the first element to one past the last. */
GK_API size_t gk_tensor_nbytes(const gk_tensor *t);
GK_API bool gk_tensor_is_contiguous(const gk_tensor *t);
/* The data pointer (a device address for a tensor in device memory); NULL before
 * storage is given. */
GK_API void *gk_tensor_data(const gk_tensor *t);
/* Points t at caller-owned host memory of at least gk_tensor_nbytes(t) bytes. */
GK_API int gk_tensor_set_data(gk_tensor *t, void *data);
GK_API const char *gk_tensor_name(const gk_tensor *t);
/* At most 63 bytes are kept. */
GK_API int gk_tensor_set_name(gk_tensor *t, const char *name);
/* The op that computes t (0: none, a leaf); values are the reference's enum ggml_op. */
GK_API int gk_tensor_op(const gk_tensor *t);
/* "mul_mat" for the mul_mat op; NULL for a value that is no op. */
GK_API const char *gk_op_name(int op);
/* Source i (0..9) of t; NULL when none. */
GK_API gk_tensor *gk_tensor_src(const gk_tensor *t, int i);
/* GK_TENSOR_FLAG_* bits. */
GK_API int32_t gk_tensor_flags(const gk_tensor *t);
/* Marks t as filled by the caller before compute (the allocator keeps its storage
 * apart). */
GK_API int gk_set_input(gk_tensor *t);
/* Marks t as read by the caller after compute (its storage is never reused). */
GK_API int gk_set_output(gk_tensor *t);
/* Marks t as a trainable parameter. */
GK_API int gk_set_param(gk_tensor *t);
/* Copies size bytes from host memory into t's bytes [offset, offset + size), wherever
 * t lives. */
GK_API int gk_tensor_set_bytes(gk_tensor *t, const void *src, size_t offset, size_t size);
/* Copies t's bytes [offset, offset + size) to host memory. */
GK_API int gk_tensor_get_bytes(const gk_tensor *t, void *dst, size_t offset, size_t size);

/* ---- Changing a built node ---- */

GK_API int gk_mul_mat_set_prec(gk_tensor *t, gk_prec p);
GK_API int gk_flash_attn_ext_set_prec(gk_tensor *t, gk_prec p);
GK_API int gk_flash_attn_ext_get_prec(const gk_tensor *t, gk_prec *out);
GK_API int gk_flash_attn_ext_set_n_kv_max(gk_tensor *t, int32_t n_kv_max);
/* Attaches per-head sink logits (NULL detaches them). */
GK_API int gk_flash_attn_ext_add_sinks(gk_tensor *t, gk_tensor *sinks);
GK_API int gk_soft_max_add_sinks(gk_tensor *t, gk_tensor *sinks);
/* dims[0..2): the YaRN correction range. */
GK_API int gk_rope_yarn_corr_dims(int n_dims, int n_ctx_orig, float freq_base, float beta_fast, float beta_slow, float *dims);

/* ---- Graphs and computing them on the CPU ---- */

/* An empty graph (it holds pointers to tensors; the tensors stay in their context). */
GK_API gk_graph *gk_graph_new(void);
GK_API void gk_graph_free(gk_graph *g);
/* Adds t and every tensor it depends on not yet in g, sources first. */
GK_API int gk_build_forward_expand(gk_graph *g, gk_tensor *t);
GK_API int gk_graph_n_nodes(const gk_graph *g);
/* Node i; i < 0 counts from the end (-1 is the last node). NULL when out of range. */
GK_API gk_tensor *gk_graph_node(const gk_graph *g, int i);
GK_API int gk_graph_n_leafs(const gk_graph *g);
GK_API gk_tensor *gk_graph_leaf(const gk_graph *g, int i);
GK_API int gk_graph_clear(gk_graph *g);
/* Computes every node on the CPU with n_threads threads (<= 0: one per hardware
 * thread). Every tensor needs storage. Results are the same bits at every thread
 * count. */
GK_API int gk_graph_compute(gk_graph *g, int n_threads);

/* ---- Devices and backends ---- */

/* Devices found at start-up; the CPU is device 0. */
GK_API int gk_device_count(void);
GK_API const char *gk_device_name(int i);
GK_API const char *gk_device_description(int i);
/* For the CPU: "simd avx512", the target this process's kernels run on. */
GK_API const char *gk_device_features(int i);
GK_API int gk_device_memory(int i, uint64_t *free_bytes, uint64_t *total_bytes);
GK_API bool gk_device_is_gpu(int i);
/* A backend computing on device i. */
GK_API gk_backend *gk_backend_from_device(int i);
/* The CPU backend (n_threads <= 0: one per hardware thread). */
GK_API gk_backend *gk_backend_cpu_new(int n_threads);
GK_API void gk_backend_free(gk_backend *b);
/* Fails for a backend that is not the CPU's. */
GK_API int gk_backend_cpu_set_n_threads(gk_backend *b, int n_threads);
GK_API const char *gk_backend_name(const gk_backend *b);
GK_API bool gk_backend_is_cpu(const gk_backend *b);
GK_API bool gk_backend_supports_op(const gk_backend *b, const gk_tensor *node);
/* The memory the backend computes in. */
GK_API gk_buffer_type *gk_backend_buffer_type(gk_backend *b);
/* Computes g on b (every tensor in memory b addresses) and waits for it. */
GK_API int gk_backend_graph_compute(gk_backend *b, gk_graph *g);

/* ---- Memory: buffer types, buffers, placing tensors ---- */

/* Host memory. */
GK_API gk_buffer_type *gk_cpu_buffer_type(void);
/* CPU_TILED: host memory that stores q4_0, q4_1, q5_0, q5_1, q8_0, iq4_nl, mxfp4, nvfp4, q2_K, q3_K,
 * q4_K, q5_K, q6_K, iq4_xs, iq2_s, iq3_s, tq1_0 and tq2_0 weights in the layout the CPU matmul tiles read
 * (faster mul_mat and mul_mat_id); other types are stored as they are.
 * Not is_host: read and write its tensors with gk_tensor_set_bytes / gk_tensor_get_bytes
 * (which convert), never through their data pointers. The CPU reads a tiled weight in
 * place only as the weight of mul_mat / mul_mat_id; a scheduler copies it out for any
 * other reader, and gk_backend_graph_compute refuses such a graph. */
GK_API gk_buffer_type *gk_cpu_tiled_buffer_type(void);
GK_API const char *gk_buffer_type_name(const gk_buffer_type *bt);
GK_API size_t gk_buffer_type_alignment(const gk_buffer_type *bt);
GK_API bool gk_buffer_type_is_host(const gk_buffer_type *bt);
/* Bytes t needs in this memory. */
GK_API size_t gk_buffer_type_alloc_size(const gk_buffer_type *bt, const gk_tensor *t);
/* One allocation of size bytes. */
GK_API gk_buffer *gk_buffer_alloc(gk_buffer_type *bt, size_t size);
/* Frees the memory; tensors placed in it must not be used after. */
GK_API void gk_buffer_free(gk_buffer *buf);
GK_API size_t gk_buffer_size(const gk_buffer *buf);
GK_API void *gk_buffer_base(const gk_buffer *buf);
/* Gives t storage at byte offset of buf (a multiple of the alignment). */
GK_API int gk_buffer_place_tensor(gk_buffer *buf, gk_tensor *t, size_t offset);
GK_API int gk_buffer_clear(gk_buffer *buf, uint8_t value);
/* One buffer holding every tensor of ctx that has no storage yet (views point into
 * their bases); NULL also when there is none to place (gk_last_error is then empty). */
GK_API gk_buffer *gk_alloc_ctx_tensors(gk_context *ctx, gk_buffer_type *bt);

/* ---- The graph allocator: storage for a graph's nodes out of one reused host buffer ---- */

GK_API gk_gallocr *gk_gallocr_new(void);
GK_API void gk_gallocr_free(gk_gallocr *ga);
/* Plans g and gives every node and input without storage a slot in the allocator's
 * buffer (grown to the plan's peak). */
GK_API int gk_gallocr_alloc_graph(gk_gallocr *ga, gk_graph *g);
GK_API size_t gk_gallocr_buffer_size(const gk_gallocr *ga);

/* ---- The scheduler: one graph over several backends, the CPU last ---- */

/* backends in priority order; the last must address host memory (the CPU). The
 * backends must outlive the scheduler. */
GK_API gk_sched *gk_sched_new(gk_backend *const *backends, int n_backends);
GK_API void gk_sched_free(gk_sched *s);
/* Assigns backends, cuts splits and gives storage to every node, input and staging
 * copy. */
GK_API int gk_sched_alloc_graph(gk_sched *s, gk_graph *g);
/* Computes g (planning it first when it is new or changed). */
GK_API int gk_sched_graph_compute(gk_sched *s, gk_graph *g);
/* Forgets the plan and gives back the storage it gave. */
GK_API int gk_sched_reset(gk_sched *s);
/* Pins node to b for every later plan. */
GK_API int gk_sched_set_tensor_backend(gk_sched *s, gk_tensor *node, gk_backend *b);
/* The backend the last plan gave node. */
GK_API gk_backend *gk_sched_get_tensor_backend(const gk_sched *s, const gk_tensor *node);
GK_API int gk_sched_n_splits(const gk_sched *s);
GK_API int gk_sched_n_copies(const gk_sched *s);

/* ---- Graph builders: every builder of include/gk/ops/, NULL (and gk_last_error) when
 * the operands do not fit the op ---- */

/* include/gk/ops/view.hpp */
GK_API gk_tensor *gk_reshape_4d(gk_context *ctx, gk_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
GK_API gk_tensor *gk_reshape_1d(gk_context *ctx, gk_tensor *a, int64_t ne0);
GK_API gk_tensor *gk_reshape_2d(gk_context *ctx, gk_tensor *a, int64_t ne0, int64_t ne1);
GK_API gk_tensor *gk_reshape_3d(gk_context *ctx, gk_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2);
GK_API gk_tensor *gk_reshape(gk_context *ctx, gk_tensor *a, const gk_tensor *b);
GK_API gk_tensor *gk_view_4d(gk_context *ctx, gk_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, size_t nb1, size_t nb2, size_t nb3, size_t offset);
GK_API gk_tensor *gk_view_1d(gk_context *ctx, gk_tensor *a, int64_t ne0, size_t offset);
GK_API gk_tensor *gk_view_2d(gk_context *ctx, gk_tensor *a, int64_t ne0, int64_t ne1, size_t nb1, size_t offset);
GK_API gk_tensor *gk_view_3d(gk_context *ctx, gk_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2, size_t nb1, size_t nb2, size_t offset);
GK_API gk_tensor *gk_permute(gk_context *ctx, gk_tensor *a, int axis0, int axis1, int axis2, int axis3);
GK_API gk_tensor *gk_transpose(gk_context *ctx, gk_tensor *a);

/* include/gk/ops/elementwise.hpp */
GK_API gk_tensor *gk_add(gk_context *ctx, gk_tensor *a, gk_tensor *b);
GK_API gk_tensor *gk_add_inplace(gk_context *ctx, gk_tensor *a, gk_tensor *b);
GK_API gk_tensor *gk_sub(gk_context *ctx, gk_tensor *a, gk_tensor *b);
GK_API gk_tensor *gk_sub_inplace(gk_context *ctx, gk_tensor *a, gk_tensor *b);
GK_API gk_tensor *gk_mul(gk_context *ctx, gk_tensor *a, gk_tensor *b);
GK_API gk_tensor *gk_mul_inplace(gk_context *ctx, gk_tensor *a, gk_tensor *b);
GK_API gk_tensor *gk_div(gk_context *ctx, gk_tensor *a, gk_tensor *b);
GK_API gk_tensor *gk_div_inplace(gk_context *ctx, gk_tensor *a, gk_tensor *b);
GK_API gk_tensor *gk_add_cast(gk_context *ctx, gk_tensor *a, gk_tensor *b, gk_type type);
GK_API gk_tensor *gk_add_id(gk_context *ctx, gk_tensor *a, gk_tensor *b, gk_tensor *ids);
GK_API gk_tensor *gk_add1(gk_context *ctx, gk_tensor *a, gk_tensor *b);
GK_API gk_tensor *gk_add1_inplace(gk_context *ctx, gk_tensor *a, gk_tensor *b);
GK_API gk_tensor *gk_acc(gk_context *ctx, gk_tensor *a, gk_tensor *b, size_t nb1, size_t nb2, size_t nb3, size_t offset);
GK_API gk_tensor *gk_acc_inplace(gk_context *ctx, gk_tensor *a, gk_tensor *b, size_t nb1, size_t nb2, size_t nb3, size_t offset);
GK_API gk_tensor *gk_sqr(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_sqr_inplace(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_sqrt(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_sqrt_inplace(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_log(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_log_inplace(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_sin(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_sin_inplace(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_cos(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_cos_inplace(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_unary(gk_context *ctx, gk_tensor *a, gk_unary_op u);
GK_API gk_tensor *gk_unary_inplace(gk_context *ctx, gk_tensor *a, gk_unary_op u);
GK_API gk_tensor *gk_hardswish(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_hardsigmoid(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_xielu(gk_context *ctx, gk_tensor *a, float alpha_n, float alpha_p, float beta, float eps);
GK_API gk_tensor *gk_glu(gk_context *ctx, gk_tensor *a, gk_glu_op g, bool swapped);
GK_API gk_tensor *gk_glu_split(gk_context *ctx, gk_tensor *a, gk_tensor *b, gk_glu_op g);
GK_API gk_tensor *gk_swiglu_oai(gk_context *ctx, gk_tensor *a, gk_tensor *b, float alpha, float limit);
GK_API gk_tensor *gk_swiglu_clamp(gk_context *ctx, gk_tensor *a, gk_tensor *b, float limit);
GK_API gk_tensor *gk_scale(gk_context *ctx, gk_tensor *a, float s);
GK_API gk_tensor *gk_scale_inplace(gk_context *ctx, gk_tensor *a, float s);
GK_API gk_tensor *gk_scale_bias(gk_context *ctx, gk_tensor *a, float s, float b);
GK_API gk_tensor *gk_scale_bias_inplace(gk_context *ctx, gk_tensor *a, float s, float b);
GK_API gk_tensor *gk_clamp(gk_context *ctx, gk_tensor *a, float lo, float hi);
GK_API gk_tensor *gk_clamp_inplace(gk_context *ctx, gk_tensor *a, float lo, float hi);
GK_API gk_tensor *gk_leaky_relu(gk_context *ctx, gk_tensor *a, float negative_slope, bool inplace);
GK_API gk_tensor *gk_fill(gk_context *ctx, gk_tensor *a, float c);
GK_API gk_tensor *gk_fill_inplace(gk_context *ctx, gk_tensor *a, float c);
GK_API gk_tensor *gk_tri(gk_context *ctx, gk_tensor *a, gk_tri_type t);
GK_API gk_tensor *gk_arange(gk_context *ctx, float start, float stop, float step);
GK_API gk_tensor *gk_cumsum(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_abs(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_abs_inplace(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_sgn(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_sgn_inplace(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_neg(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_neg_inplace(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_step(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_step_inplace(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_tanh(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_tanh_inplace(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_elu(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_elu_inplace(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_relu(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_relu_inplace(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_sigmoid(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_sigmoid_inplace(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_gelu(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_gelu_inplace(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_gelu_quick(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_gelu_quick_inplace(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_silu(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_silu_inplace(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_exp(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_exp_inplace(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_expm1(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_expm1_inplace(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_softplus(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_softplus_inplace(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_gelu_erf(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_gelu_erf_inplace(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_floor(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_floor_inplace(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_ceil(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_ceil_inplace(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_round(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_round_inplace(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_trunc(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_trunc_inplace(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_reglu(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_reglu_swapped(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_reglu_split(gk_context *ctx, gk_tensor *a, gk_tensor *b);
GK_API gk_tensor *gk_geglu(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_geglu_swapped(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_geglu_split(gk_context *ctx, gk_tensor *a, gk_tensor *b);
GK_API gk_tensor *gk_swiglu(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_swiglu_swapped(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_swiglu_split(gk_context *ctx, gk_tensor *a, gk_tensor *b);
GK_API gk_tensor *gk_geglu_erf(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_geglu_erf_swapped(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_geglu_erf_split(gk_context *ctx, gk_tensor *a, gk_tensor *b);
GK_API gk_tensor *gk_geglu_quick(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_geglu_quick_swapped(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_geglu_quick_split(gk_context *ctx, gk_tensor *a, gk_tensor *b);

/* include/gk/ops/reduce.hpp */
GK_API gk_tensor *gk_sum(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_sum_rows(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_mean(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_argmax(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_count_equal(gk_context *ctx, gk_tensor *a, gk_tensor *b);
GK_API gk_tensor *gk_argsort(gk_context *ctx, gk_tensor *a, gk_sort_order order);
GK_API gk_tensor *gk_argsort_top_k(gk_context *ctx, gk_tensor *a, int k);
GK_API gk_tensor *gk_top_k(gk_context *ctx, gk_tensor *a, int k);

/* include/gk/ops/norm.hpp */
GK_API gk_tensor *gk_norm(gk_context *ctx, gk_tensor *a, float eps);
GK_API gk_tensor *gk_norm_inplace(gk_context *ctx, gk_tensor *a, float eps);
GK_API gk_tensor *gk_rms_norm(gk_context *ctx, gk_tensor *a, float eps);
GK_API gk_tensor *gk_rms_norm_inplace(gk_context *ctx, gk_tensor *a, float eps);
GK_API gk_tensor *gk_group_norm(gk_context *ctx, gk_tensor *a, int n_groups, float eps);
GK_API gk_tensor *gk_group_norm_inplace(gk_context *ctx, gk_tensor *a, int n_groups, float eps);
GK_API gk_tensor *gk_l2_norm(gk_context *ctx, gk_tensor *a, float eps);
GK_API gk_tensor *gk_l2_norm_inplace(gk_context *ctx, gk_tensor *a, float eps);

/* include/gk/ops/softmax.hpp */
GK_API gk_tensor *gk_soft_max(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_soft_max_inplace(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_soft_max_ext(gk_context *ctx, gk_tensor *a, gk_tensor *mask, float scale, float max_bias);
GK_API gk_tensor *gk_soft_max_ext_inplace(gk_context *ctx, gk_tensor *a, gk_tensor *mask, float scale, float max_bias);
GK_API gk_tensor *gk_diag_mask_inf(gk_context *ctx, gk_tensor *a, int n_past);
GK_API gk_tensor *gk_diag_mask_inf_inplace(gk_context *ctx, gk_tensor *a, int n_past);
GK_API gk_tensor *gk_diag_mask_zero(gk_context *ctx, gk_tensor *a, int n_past);
GK_API gk_tensor *gk_diag_mask_zero_inplace(gk_context *ctx, gk_tensor *a, int n_past);

/* include/gk/ops/rope.hpp */
GK_API gk_tensor *gk_rope(gk_context *ctx, gk_tensor *a, gk_tensor *b, int n_dims, int mode);
GK_API gk_tensor *gk_rope_inplace(gk_context *ctx, gk_tensor *a, gk_tensor *b, int n_dims, int mode);
GK_API gk_tensor *gk_rope_ext(gk_context *ctx, gk_tensor *a, gk_tensor *b, gk_tensor *c, int n_dims, int mode, int n_ctx_orig, float freq_base, float freq_scale, float ext_factor, float attn_factor, float beta_fast, float beta_slow);
GK_API gk_tensor *gk_rope_ext_inplace(gk_context *ctx, gk_tensor *a, gk_tensor *b, gk_tensor *c, int n_dims, int mode, int n_ctx_orig, float freq_base, float freq_scale, float ext_factor, float attn_factor, float beta_fast, float beta_slow);
GK_API gk_tensor *gk_rope_multi(gk_context *ctx, gk_tensor *a, gk_tensor *b, gk_tensor *c, int n_dims, const int *sections, int mode, int n_ctx_orig, float freq_base, float freq_scale, float ext_factor, float attn_factor, float beta_fast, float beta_slow);
GK_API gk_tensor *gk_rope_multi_inplace(gk_context *ctx, gk_tensor *a, gk_tensor *b, gk_tensor *c, int n_dims, const int *sections, int mode, int n_ctx_orig, float freq_base, float freq_scale, float ext_factor, float attn_factor, float beta_fast, float beta_slow);
GK_API gk_tensor *gk_rope_set_offset(gk_tensor *a, int n_offs);

/* include/gk/ops/copy.hpp */
GK_API gk_tensor *gk_dup(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_dup_inplace(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_cpy(gk_context *ctx, gk_tensor *a, gk_tensor *b);
GK_API gk_tensor *gk_cast(gk_context *ctx, gk_tensor *a, gk_type t);
GK_API gk_tensor *gk_cont_4d(gk_context *ctx, gk_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
GK_API gk_tensor *gk_cont(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_cont_1d(gk_context *ctx, gk_tensor *a, int64_t ne0);
GK_API gk_tensor *gk_cont_2d(gk_context *ctx, gk_tensor *a, int64_t ne0, int64_t ne1);
GK_API gk_tensor *gk_cont_3d(gk_context *ctx, gk_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2);
GK_API gk_tensor *gk_get_rows(gk_context *ctx, gk_tensor *a, gk_tensor *b);
GK_API gk_tensor *gk_set_rows(gk_context *ctx, gk_tensor *a, gk_tensor *b, gk_tensor *c);
GK_API gk_tensor *gk_repeat_4d(gk_context *ctx, gk_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
GK_API gk_tensor *gk_repeat(gk_context *ctx, gk_tensor *a, gk_tensor *b);
GK_API gk_tensor *gk_concat(gk_context *ctx, gk_tensor *a, gk_tensor *b, int dim);

/* include/gk/ops/attn.hpp */
GK_API gk_tensor *gk_flash_attn_ext(gk_context *ctx, gk_tensor *q, gk_tensor *k, gk_tensor *v, gk_tensor *mask, float scale, float max_bias, float logit_softcap);

/* include/gk/ops/matmul.hpp */
GK_API gk_tensor *gk_mul_mat(gk_context *ctx, gk_tensor *a, gk_tensor *b);
GK_API gk_tensor *gk_mul_mat_id(gk_context *ctx, gk_tensor *as, gk_tensor *b, gk_tensor *ids);
GK_API gk_tensor *gk_out_prod(gk_context *ctx, gk_tensor *a, gk_tensor *b);

/* include/gk/ops/extra.hpp */
GK_API gk_tensor *gk_repeat_back(gk_context *ctx, gk_tensor *a, gk_tensor *b);
GK_API gk_tensor *gk_silu_back(gk_context *ctx, gk_tensor *a, gk_tensor *b);
GK_API gk_tensor *gk_rms_norm_back(gk_context *ctx, gk_tensor *a, gk_tensor *b, float eps);
GK_API gk_tensor *gk_get_rows_back(gk_context *ctx, gk_tensor *a, gk_tensor *b, gk_tensor *c);
GK_API gk_tensor *gk_soft_max_ext_back(gk_context *ctx, gk_tensor *a, gk_tensor *b, float scale, float max_bias);
GK_API gk_tensor *gk_soft_max_ext_back_inplace(gk_context *ctx, gk_tensor *a, gk_tensor *b, float scale, float max_bias);
GK_API gk_tensor *gk_rope_ext_back(gk_context *ctx, gk_tensor *a, gk_tensor *b, gk_tensor *c, int n_dims, int mode, int n_ctx_orig, float freq_base, float freq_scale, float ext_factor, float attn_factor, float beta_fast, float beta_slow);
GK_API gk_tensor *gk_rope_multi_back(gk_context *ctx, gk_tensor *a, gk_tensor *b, gk_tensor *c, int n_dims, const int *sections, int mode, int n_ctx_orig, float freq_base, float freq_scale, float ext_factor, float attn_factor, float beta_fast, float beta_slow);
GK_API gk_tensor *gk_flash_attn_back(gk_context *ctx, gk_tensor *q, gk_tensor *k, gk_tensor *v, gk_tensor *d, bool masked);
GK_API gk_tensor *gk_cross_entropy_loss_back(gk_context *ctx, gk_tensor *a, gk_tensor *b, gk_tensor *c);
GK_API gk_tensor *gk_set(gk_context *ctx, gk_tensor *a, gk_tensor *b, size_t nb1, size_t nb2, size_t nb3, size_t offset);
GK_API gk_tensor *gk_set_inplace(gk_context *ctx, gk_tensor *a, gk_tensor *b, size_t nb1, size_t nb2, size_t nb3, size_t offset);
GK_API gk_tensor *gk_set_1d(gk_context *ctx, gk_tensor *a, gk_tensor *b, size_t offset);
GK_API gk_tensor *gk_set_1d_inplace(gk_context *ctx, gk_tensor *a, gk_tensor *b, size_t offset);
GK_API gk_tensor *gk_set_2d(gk_context *ctx, gk_tensor *a, gk_tensor *b, size_t nb1, size_t offset);
GK_API gk_tensor *gk_set_2d_inplace(gk_context *ctx, gk_tensor *a, gk_tensor *b, size_t nb1, size_t offset);
GK_API gk_tensor *gk_diag(gk_context *ctx, gk_tensor *a);
GK_API gk_tensor *gk_im2col(gk_context *ctx, gk_tensor *a, gk_tensor *b, int s0, int s1, int p0, int p1, int d0, int d1, bool is_2D, gk_type dst_type);
GK_API gk_tensor *gk_im2col_back(gk_context *ctx, gk_tensor *a, gk_tensor *b, const int64_t *ne, int s0, int s1, int p0, int p1, int d0, int d1, bool is_2D);
GK_API gk_tensor *gk_im2col_3d(gk_context *ctx, gk_tensor *a, gk_tensor *b, int64_t IC, int s0, int s1, int s2, int p0, int p1, int p2, int d0, int d1, int d2, gk_type dst_type);
GK_API gk_tensor *gk_col2im_1d(gk_context *ctx, gk_tensor *a, int s0, int oc, int p0);
GK_API gk_tensor *gk_conv_transpose_1d(gk_context *ctx, gk_tensor *a, gk_tensor *b, int s0, int p0, int d0);
GK_API gk_tensor *gk_conv_2d_direct(gk_context *ctx, gk_tensor *a, gk_tensor *b, int s0, int s1, int p0, int p1, int d0, int d1);
GK_API gk_tensor *gk_conv_3d_direct(gk_context *ctx, gk_tensor *a, gk_tensor *b, int s0, int s1, int s2, int p0, int p1, int p2, int d0, int d1, int d2, int c, int n, int oc);
GK_API gk_tensor *gk_conv_2d_dw_direct(gk_context *ctx, gk_tensor *a, gk_tensor *b, int stride0, int stride1, int pad0, int pad1, int dilation0, int dilation1);
GK_API gk_tensor *gk_conv_transpose_2d_p0(gk_context *ctx, gk_tensor *a, gk_tensor *b, int stride);
GK_API gk_tensor *gk_pool_1d(gk_context *ctx, gk_tensor *a, gk_pool_op op, int k0, int s0, int p0);
GK_API gk_tensor *gk_pool_2d(gk_context *ctx, gk_tensor *a, gk_pool_op op, int k0, int k1, int s0, int s1, float p0, float p1);
GK_API gk_tensor *gk_pool_2d_back(gk_context *ctx, gk_tensor *a, gk_tensor *af, gk_pool_op op, int k0, int k1, int s0, int s1, float p0, float p1);
GK_API gk_tensor *gk_interpolate(gk_context *ctx, gk_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, uint32_t mode);
GK_API gk_tensor *gk_upscale(gk_context *ctx, gk_tensor *a, int scale_factor, gk_scale_mode mode);
GK_API gk_tensor *gk_upscale_ext(gk_context *ctx, gk_tensor *a, int ne0, int ne1, int ne2, int ne3, gk_scale_mode mode);
GK_API gk_tensor *gk_pad_ext(gk_context *ctx, gk_tensor *a, int lp0, int rp0, int lp1, int rp1, int lp2, int rp2, int lp3, int rp3);
GK_API gk_tensor *gk_pad_ext_circular(gk_context *ctx, gk_tensor *a, int lp0, int rp0, int lp1, int rp1, int lp2, int rp2, int lp3, int rp3);
GK_API gk_tensor *gk_pad(gk_context *ctx, gk_tensor *a, int p0, int p1, int p2, int p3);
GK_API gk_tensor *gk_pad_circular(gk_context *ctx, gk_tensor *a, int p0, int p1, int p2, int p3);
GK_API gk_tensor *gk_pad_reflect_1d(gk_context *ctx, gk_tensor *a, int p0, int p1);
GK_API gk_tensor *gk_roll(gk_context *ctx, gk_tensor *a, int shift0, int shift1, int shift2, int shift3);
GK_API gk_tensor *gk_timestep_embedding(gk_context *ctx, gk_tensor *timesteps, int dim, int max_period);
GK_API gk_tensor *gk_win_part(gk_context *ctx, gk_tensor *a, int w);
GK_API gk_tensor *gk_win_unpart(gk_context *ctx, gk_tensor *a, int w0, int h0, int w);
GK_API gk_tensor *gk_get_rel_pos(gk_context *ctx, gk_tensor *a, int qh, int kh);
GK_API gk_tensor *gk_add_rel_pos(gk_context *ctx, gk_tensor *a, gk_tensor *pw, gk_tensor *ph);
GK_API gk_tensor *gk_add_rel_pos_inplace(gk_context *ctx, gk_tensor *a, gk_tensor *pw, gk_tensor *ph);
GK_API gk_tensor *gk_ssm_conv(gk_context *ctx, gk_tensor *sx, gk_tensor *c);
GK_API gk_tensor *gk_ssm_scan(gk_context *ctx, gk_tensor *s, gk_tensor *x, gk_tensor *dt, gk_tensor *A, gk_tensor *B, gk_tensor *C, gk_tensor *ids, int64_t K);
GK_API gk_tensor *gk_rwkv_wkv6(gk_context *ctx, gk_tensor *k, gk_tensor *v, gk_tensor *r, gk_tensor *tf, gk_tensor *td, gk_tensor *state);
GK_API gk_tensor *gk_gated_linear_attn(gk_context *ctx, gk_tensor *k, gk_tensor *v, gk_tensor *q, gk_tensor *g, gk_tensor *state, float scale);
GK_API gk_tensor *gk_rwkv_wkv7(gk_context *ctx, gk_tensor *r, gk_tensor *w, gk_tensor *k, gk_tensor *v, gk_tensor *a, gk_tensor *b, gk_tensor *state);
GK_API gk_tensor *gk_solve_tri(gk_context *ctx, gk_tensor *a, gk_tensor *b, bool left, bool lower, bool uni);
GK_API gk_tensor *gk_gated_delta_net(gk_context *ctx, gk_tensor *q, gk_tensor *k, gk_tensor *v, gk_tensor *g, gk_tensor *beta, gk_tensor *state, int64_t K);
GK_API gk_tensor *gk_lightning_indexer(gk_context *ctx, gk_tensor *q, gk_tensor *k, gk_tensor *weights, gk_tensor *mask);
GK_API gk_tensor *gk_dsv4_hc_comb(gk_context *ctx, gk_tensor *mixes, gk_tensor *scale, gk_tensor *base, float eps, int32_t n_iter);
GK_API gk_tensor *gk_dsv4_hc_pre(gk_context *ctx, gk_tensor *x, gk_tensor *weights);
GK_API gk_tensor *gk_dsv4_hc_post(gk_context *ctx, gk_tensor *x, gk_tensor *residual, gk_tensor *post, gk_tensor *comb);
GK_API gk_tensor *gk_cross_entropy_loss(gk_context *ctx, gk_tensor *a, gk_tensor *b);
GK_API gk_tensor *gk_opt_step_adamw(gk_context *ctx, gk_tensor *a, gk_tensor *grad, gk_tensor *m, gk_tensor *v, gk_tensor *adamw_params);
GK_API gk_tensor *gk_opt_step_sgd(gk_context *ctx, gk_tensor *a, gk_tensor *grad, gk_tensor *params);
GK_API gk_tensor *gk_map_custom1(gk_context *ctx, gk_tensor *a, gk_custom1_fn fun, int n_tasks, void *userdata);
GK_API gk_tensor *gk_map_custom1_inplace(gk_context *ctx, gk_tensor *a, gk_custom1_fn fun, int n_tasks, void *userdata);
GK_API gk_tensor *gk_map_custom2(gk_context *ctx, gk_tensor *a, gk_tensor *b, gk_custom2_fn fun, int n_tasks, void *userdata);
GK_API gk_tensor *gk_map_custom2_inplace(gk_context *ctx, gk_tensor *a, gk_tensor *b, gk_custom2_fn fun, int n_tasks, void *userdata);
GK_API gk_tensor *gk_map_custom3(gk_context *ctx, gk_tensor *a, gk_tensor *b, gk_tensor *c, gk_custom3_fn fun, int n_tasks, void *userdata);
GK_API gk_tensor *gk_map_custom3_inplace(gk_context *ctx, gk_tensor *a, gk_tensor *b, gk_tensor *c, gk_custom3_fn fun, int n_tasks, void *userdata);
GK_API gk_tensor *gk_custom_4d(gk_context *ctx, gk_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, gk_tensor * const *args, int n_args, gk_custom_fn fun, int n_tasks, void *userdata);
GK_API gk_tensor *gk_custom_inplace(gk_context *ctx, gk_tensor *a, gk_tensor * const *args, int n_args, gk_custom_fn fun, int n_tasks, void *userdata);

#ifdef __cplusplus
}
#endif

#endif /* GK_H */
