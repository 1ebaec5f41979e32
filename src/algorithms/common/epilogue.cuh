// The fused epilogue every kernel family applies: y = act(alpha * acc + beta * y_old + bias), act one of Activation.
#pragma once

namespace mconv::cuda {

/// The fused activation (Activation's values: 0 identity, 1 ReLU, 2 SiLU). SiLU uses the accurate
/// expf, so fp32 results stay within 1e-5 of the double reference.
__device__ __forceinline__ float activate(float v, int activation) {
  if (activation == 1) return fmaxf(v, 0.0f);
  if (activation == 2) return v / (1.0f + expf(-v));
  return v;
}

/// `old` is read only when beta != 0, so a y that holds NaN (or was never written) is never read
/// into the result; `bias` is null or the filter's bias value.
__device__ __forceinline__ float epilogue_value(float alpha, float acc, float beta, const float* old, const float* bias,
                                                int activation) {
  float v = alpha * acc;
  if (beta != 0.0f) v = fmaf(beta, *old, v);
  if (bias) v += *bias;
  return activate(v, activation);
}
/// The same with the bias as a value (0 without one), for callers that keep it in a register.
__device__ __forceinline__ float epilogue_value(float alpha, float acc, float beta, const float* old, float bias,
                                                int activation) {
  float v = alpha * acc;
  if (beta != 0.0f) v = fmaf(beta, *old, v);
  v += bias;
  return activate(v, activation);
}

}  // namespace mconv::cuda
