/* mconv C ABI: opaque handles and status codes over the C++ API, for FFI users.
 * Every function returns a status; on failure mconv_last_error_message() holds the message
 * (naming the bad field) for the calling thread. */
#ifndef MCONV_MCONV_H
#define MCONV_MCONV_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  MCONV_STATUS_SUCCESS = 0,
  MCONV_STATUS_BAD_PARAM = 1,
  MCONV_STATUS_UNSUPPORTED = 2,
  MCONV_STATUS_OVERFLOW = 3,
  MCONV_STATUS_NULL_POINTER = 4,
  MCONV_STATUS_MISALIGNED = 5,
  MCONV_STATUS_CUDA_ERROR = 6,
  MCONV_STATUS_IO_ERROR = 7,
  MCONV_STATUS_NO_DEVICE = 8,
  MCONV_STATUS_INTERNAL = 9,
  MCONV_STATUS_OUT_OF_MEMORY = 10
} mconv_status_t;

typedef enum { MCONV_TARGET_AUTO = 0, MCONV_TARGET_CPU = 1, MCONV_TARGET_CUDA = 2 } mconv_target_t;
typedef enum { MCONV_LAYOUT_NCHW = 0, MCONV_LAYOUT_NHWC = 1, MCONV_LAYOUT_CNHW = 2 } mconv_layout_t;
/* FLOAT64: CPU engines only (the double reference loops, for gradient checks). */
typedef enum {
  MCONV_DTYPE_FLOAT32 = 0,
  MCONV_DTYPE_FLOAT16 = 1,
  MCONV_DTYPE_BFLOAT16 = 2,
  MCONV_DTYPE_FLOAT64 = 3
} mconv_dtype_t;
/* fp32 tensors: EXACT (fp32 FFMA, the default) or TF32 (tensor cores, fp32 accumulation). fp16/bf16
 * tensors always run on tensor cores with fp32 accumulation. */
typedef enum { MCONV_MATH_EXACT = 0, MCONV_MATH_TF32 = 1 } mconv_math_t;
typedef enum {
  MCONV_ALGO_AUTO = 0,
  MCONV_ALGO_REFERENCE = 1,
  MCONV_ALGO_IMPLICIT_PRECOMP = 2,
  MCONV_ALGO_DIRECT_BLOCK = 3,
  MCONV_ALGO_SINGLE_CHANNEL = 4,
  MCONV_ALGO_STRIDE_FIXED = 5,
  MCONV_ALGO_IMPLICIT_MMA = 6,
  MCONV_ALGO_DEPTHWISE_WGRAD = 7,   /* wgrad of layers with one input channel per group (backward plans) */
  MCONV_ALGO_FEW_CHANNEL_WGRAD = 8, /* wgrad of layers of at most 4 input channels, fp16/bf16 (backward plans) */
  MCONV_ALGO_FEW_CHANNEL = 9,       /* forward of layers of at most 4 input channels, fp16/bf16/TF32 */
  MCONV_ALGO_FEW_FILTER = 10,       /* layers of at most 8 filters (output heads, an RGB stem's dgrad), fp16/bf16 */
  MCONV_ALGO_WINDOW_MMA = 11 /* TF32 layers with x in plane order (NCHW) on shared-memory windows, sm_90; forced only */
} mconv_algorithm_t;
typedef enum { MCONV_MODE_CROSS_CORRELATION = 0, MCONV_MODE_CONVOLUTION = 1 } mconv_mode_t;
typedef enum { MCONV_PASS_DGRAD = 1, MCONV_PASS_WGRAD = 2 } mconv_pass_t;
typedef enum { MCONV_ACTIVATION_IDENTITY = 0, MCONV_ACTIVATION_RELU = 1, MCONV_ACTIVATION_SILU = 2 } mconv_activation_t;

typedef struct {
  int64_t n, c, h, w, k, r, s;
  int64_t pad_h, pad_w, stride_h, stride_w, dil_h, dil_w, groups;
  int mode; /* mconv_mode_t */
} mconv_problem_t;

typedef struct {
  int dtype;          /* mconv_dtype_t */
  int64_t dims[4];    /* n, c, h, w (filters: k, c/g, r, s) */
  int64_t strides[4]; /* elements */
} mconv_tensor_desc_t;

typedef struct mconv_engine_s* mconv_engine_t;
typedef struct mconv_plan_s* mconv_plan_t;
typedef struct mconv_backward_plan_s* mconv_backward_plan_t;

const char* mconv_status_string(mconv_status_t status);
const char* mconv_last_error_message(void);

/* The library's version ("0.1.0"); 1 when it was built with CUDA and a device is visible, else 0. */
const char* mconv_version(void);
int mconv_cuda_available(void);

/* A problem with every field at its default (sizes 1, stride/dilation 1). */
mconv_problem_t mconv_problem_default(void);
mconv_status_t mconv_tensor_desc_packed(int layout, int64_t n, int64_t c, int64_t h, int64_t w,
                                        mconv_tensor_desc_t* out);

mconv_status_t mconv_engine_create(int target, int device, void* stream, mconv_engine_t* out);
mconv_status_t mconv_engine_destroy(mconv_engine_t engine);
mconv_status_t mconv_engine_synchronize(mconv_engine_t engine);

/* tile may be NULL (planner's choice); math is an mconv_math_t. x, w and y share one dtype. The plan is
 * owned by the caller; destroy it when done. */
mconv_status_t mconv_plan_create(mconv_engine_t engine, const mconv_problem_t* problem, const mconv_tensor_desc_t* x,
                                 const mconv_tensor_desc_t* w, const mconv_tensor_desc_t* y, int algorithm,
                                 const char* tile, int math, mconv_plan_t* out);
mconv_status_t mconv_plan_destroy(mconv_plan_t plan);
mconv_status_t mconv_plan_table_bytes(mconv_plan_t plan, int64_t* bytes);
/* Writes the plan's text form into buf (truncated to size, always NUL-terminated); *needed gets the full length + 1. */
mconv_status_t mconv_plan_describe(mconv_plan_t plan, char* buf, int64_t size, int64_t* needed);

/* y = act(alpha*conv(x, w) + beta*y + bias[k]), act an mconv_activation_t, computed
 * in fp32 and rounded once to y's dtype. bias
 * (fp32, K values) may be NULL; beta = 0 never reads y. Asynchronous
 * on the engine's stream on the cuda target, with no allocation or synchronisation (graph-capturable). */
mconv_status_t mconv_conv2d_forward(mconv_engine_t engine, mconv_plan_t plan, const void* x, const void* w, void* y,
                                    float alpha, float beta, const float* bias, int activation);

/* The backward passes of `problem` (the forward problem), pass an mconv_pass_t: DGRAD with a = dy,
 * b = w, out = dx; WGRAD with a = x, b = dy, out = dw (descriptors as the forward's). deterministic
 * != 0: no atomics, so dw is bitwise the same on every run (slower where the reduction N*P*Q is long). */
mconv_status_t mconv_backward_plan_create(mconv_engine_t engine, int pass, const mconv_problem_t* problem,
                                          const mconv_tensor_desc_t* a, const mconv_tensor_desc_t* b,
                                          const mconv_tensor_desc_t* out, int math, int deterministic,
                                          mconv_backward_plan_t* plan);
mconv_status_t mconv_backward_plan_destroy(mconv_backward_plan_t plan);
/* dx = alpha * dgrad(dy, w) + beta * dx; dw = alpha * wgrad(x, dy) + beta * dw. Asynchronous on the
 * engine's stream on the cuda target; on error the output is untouched. */
mconv_status_t mconv_conv2d_backward_data(mconv_engine_t engine, mconv_backward_plan_t plan, const void* dy,
                                          const void* w, void* dx, float alpha, float beta);
mconv_status_t mconv_conv2d_backward_filter(mconv_engine_t engine, mconv_backward_plan_t plan, const void* x,
                                            const void* dy, void* dw, float alpha, float beta);

#ifdef __cplusplus
}
#endif

#endif /* MCONV_MCONV_H */
