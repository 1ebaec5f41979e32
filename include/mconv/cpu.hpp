// mconv: CPU executors. Both take any strides (NCHW, NHWC, CNHW, custom), padding, stride,
// dilation, groups, both modes and alpha/beta. Pointers are host pointers.
#pragma once

#include "mconv/engine.hpp"
#include "mconv/plan.hpp"

namespace mconv::cpu {

/// Direct loops accumulating in double: the oracle every test compares against.
/// Validates like every executor; y is untouched on error. Bias and activation as in Epilogue.
void reference_forward(const Problem& problem, const TensorDesc& xd, const float* x, const TensorDesc& wd,
                       const float* w, const TensorDesc& yd, float* y, const Epilogue& epilogue = {});

/// The same on fp64 tensors (the CPU executor's fp64 path).
void reference_forward(const Problem& problem, const TensorDesc& xd, const double* x, const TensorDesc& wd,
                       const double* w, const TensorDesc& yd, double* y, const Epilogue& epilogue = {});

/// The reference value of one output element y[n, k, p, q] (before alpha/beta), in double.
double reference_point(const Problem& problem, const TensorDesc& xd, const float* x, const TensorDesc& wd,
                       const float* w, int64_t n, int64_t k, int64_t p, int64_t q);

/// The backward passes' oracles, direct loops over their definitions in double (alpha, beta applied
/// as in cuDNN: out = alpha * grad + beta * out, beta = 0 never reads out). dgrad of `problem`:
/// dx[n, c, h, w] = sum over the k of c's group, r, s with h = p*stride_h - pad_h + r*dil_h (and w
/// likewise) of dy[n, k, p, q] * w[k, c, r, s] (w's r, s reversed for true convolution).
void reference_backward_data(const Problem& problem, const TensorDesc& dyd, const float* dy, const TensorDesc& wd,
                             const float* w, const TensorDesc& dxd, float* dx, float alpha = 1.0f, float beta = 0.0f);
/// wgrad: dw[k, c, r, s] = sum over n, p, q of dy[n, k, p, q] * x[n, g*C/G + c, h, w] (r, s reversed
/// for true convolution).
void reference_backward_filter(const Problem& problem, const TensorDesc& xd, const float* x, const TensorDesc& dyd,
                               const float* dy, const TensorDesc& dwd, float* dw, float alpha = 1.0f,
                               float beta = 0.0f);

/// One element of each, before alpha/beta, in double: dx[n, c, h, w] and dw[k, c, r, s] (cross-correlation).
double reference_backward_data_point(const Problem& problem, const TensorDesc& dyd, const float* dy,
                                     const TensorDesc& wd, const float* w, int64_t n, int64_t c, int64_t h, int64_t w_);
double reference_backward_filter_point(const Problem& problem, const TensorDesc& xd, const float* x,
                                       const TensorDesc& dyd, const float* dy, int64_t k, int64_t c, int64_t r,
                                       int64_t s);

/// Implicit GEMM that executes the Plan: tiles of the virtual matrix are gathered through the offset
/// table into a small per-thread buffer (no im2col), multiplied with register-blocked, vectorised
/// loops, threads over (group, column tiles) with OpenMP.
void implicit_precomp_forward(const Plan& plan, const float* x, const float* w, float* y,
                              const Epilogue& epilogue = {});

/// Runs a cpu plan on tensors of the plan's dtype: fp32 directly; fp64 by the double reference loops;
/// fp16/bf16 converted to fp32 (exact),
/// computed by the plan's algorithm (reference or implicit_precomp) and rounded once to the dtype
/// when stored. Allocates fp32 copies of x, w and y for 16-bit dtypes. y is untouched on error.
void forward(const Plan& plan, const void* x, const void* w, void* y, const Epilogue& epilogue = {});

/// out = beta * out over a strided view of any dtype (beta = 0 never reads it): a backward pass's
/// fill step.
void fill_view(const TensorDesc& view, void* out, float beta);

/// Bytes of scratch one call of implicit_precomp_forward uses per thread (bounded by the tile
/// sizes, independent of N*P*Q*C*R*S).
int64_t implicit_precomp_scratch_bytes_per_thread();

}  // namespace mconv::cpu
