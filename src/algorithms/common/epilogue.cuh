// The fused epilogue every kernel family applies: y = act(alpha * acc + beta * y_old + bias).
#pragma once

namespace mconv::cuda {

/// `old` is read only when beta != 0, so a y that holds NaN (or was never written) is never read
/// into the result; `bias` is null or the filter's bias value.
__device__ __forceinline__ float epilogue_value(float alpha, float acc, float beta, const float* old, const float* bias,
                                                int relu) {
  float v = alpha * acc;
  if (beta != 0.0f) v = fmaf(beta, *old, v);
  if (bias) v += *bias;
  return relu ? fmaxf(v, 0.0f) : v;
}
/// The same with the bias as a value (0 without one), for callers that keep it in a register.
__device__ __forceinline__ float epilogue_value(float alpha, float acc, float beta, const float* old, float bias,
                                                int relu) {
  float v = alpha * acc;
  if (beta != 0.0f) v = fmaf(beta, *old, v);
  v += bias;
  return relu ? fmaxf(v, 0.0f) : v;
}

}  // namespace mconv::cuda
