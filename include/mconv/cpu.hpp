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

/// The reference value of one output element y[n, k, p, q] (before alpha/beta), in double.
double reference_point(const Problem& problem, const TensorDesc& xd, const float* x, const TensorDesc& wd,
                       const float* w, int64_t n, int64_t k, int64_t p, int64_t q);

/// Implicit GEMM that executes the Plan: tiles of the virtual matrix are gathered through the offset
/// table into a small per-thread buffer (no im2col), multiplied with register-blocked, vectorised
/// loops, threads over (group, column tiles) with OpenMP.
void implicit_precomp_forward(const Plan& plan, const float* x, const float* w, float* y,
                              const Epilogue& epilogue = {});

/// Runs a cpu plan on tensors of the plan's dtype: fp32 directly; fp16/bf16 converted to fp32 (exact),
/// computed by the plan's algorithm (reference or implicit_precomp) and rounded once to the dtype
/// when stored. Allocates fp32 copies of x, w and y for 16-bit dtypes. y is untouched on error.
void forward(const Plan& plan, const void* x, const void* w, void* y, const Epilogue& epilogue = {});

/// Bytes of scratch one call of implicit_precomp_forward uses per thread (bounded by the tile
/// sizes, independent of N*P*Q*C*R*S).
int64_t implicit_precomp_scratch_bytes_per_thread();

}  // namespace mconv::cpu
