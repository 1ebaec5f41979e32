// The fused epilogue every kernel family applies: y = act(alpha * acc + beta * y_old + bias).
#pragma once

#include <type_traits>

#include "mconv/engine.hpp"

namespace mconv::cuda {

/// The activation a kernel applies last, by mconv::Activation's number (kernels take it as an int).
enum : int { kActivationIdentity = 0, kActivationReLU = 1, kActivationSiLU = 2 };
static_assert(static_cast<int>(Activation::Identity) == kActivationIdentity &&
              static_cast<int>(Activation::ReLU) == kActivationReLU &&
              static_cast<int>(Activation::SiLU) == kActivationSiLU);

// Note [fused silu]: SiLU is v / (1 + e^-v) on the special-function unit: __expf (ex2.approx of
// v*log2(e)) and __fdividef (rcp.approx), five instructions, relative error about 1e-7 + 6e-8*|v|,
// far inside fp32's 1e-5 check and bf16's rounding. Compiled into an epilogue as a choice at run
// time, even these instructions cost every call, SiLU or not: on the H200 the bf16 implicit GEMMs
// ran 4-19% slower a layer (resnet50 0.496 -> 0.553 ms), TF32 and FFMA 2-3%; with the accurate expf
// and the IEEE divide it had been 2-27% and spills (docs/PERFORMANCE.md, "Fused SiLU"). So:
// - the memory-bound kernels fuse it at no cost to other calls: the bulk plane stream and
//   direct_block are compiled twice, with identity and ReLU (the code they ran before) and with SiLU
//   only (silu_switch picks the instance); the strip, plane-stream and channels-last kernels keep
//   their branch-free common-case stores for identity and ReLU and send SiLU to their general path
//   (ActivationSet::Any there); their identity calls timed as before;
// - implicit_mma's tiles that store y from a shared-memory buffer (persistent, ping-pong and
//   cooperative: the 16-bit channels-last layers on sm_90) apply SiLU to that buffer after the
//   epilogue has rounded into it, while the accumulators are dead: a branch outside every loop
//   (silu_output_buffer), y rounded before SiLU and after, as the pass below rounds it;
// - every other family compiles identity and ReLU only (ActivationSet::NoSiLU, the default), and a
//   SiLU call runs it with identity followed by silu_view over y in place (launch_forward, or
//   implicit_mma's launcher for its other tiles), one more read and write of y. Compiling those
//   families twice would double the implicit GEMM's build.
// Below v = -88, e^-v is infinite and the result -0, the limit; NaN stays NaN.

/// Which activations an instance compiles in (Note [fused silu]).
enum class ActivationSet { Any, NoSiLU, SiLUOnly };

/// SiLU v / (1 + e^-v) (Note [fused silu]).
__device__ __forceinline__ float silu(float v) {
  return __fdividef(v, 1.0f + __expf(-v));
}

/// act(v) for `activation`, mconv::Activation's number, among those of kSet.
template <ActivationSet kSet = ActivationSet::NoSiLU>
__device__ __forceinline__ float activate(float v, int activation) {
  if constexpr (kSet == ActivationSet::SiLUOnly) {
    return silu(v);
  } else {
    if (activation == kActivationReLU) return fmaxf(v, 0.0f);
    if constexpr (kSet == ActivationSet::Any)
      if (activation == kActivationSiLU) return silu(v);
    return v;
  }
}

/// `old` is read only when beta != 0, so a y that holds NaN (or was never written) is never read
/// into the result; `bias` is null or the filter's bias value.
template <ActivationSet kSet = ActivationSet::NoSiLU>
__device__ __forceinline__ float epilogue_value(float alpha, float acc, float beta, const float* old, const float* bias,
                                                int activation) {
  float v = alpha * acc;
  if (beta != 0.0f) v = fmaf(beta, *old, v);
  if (bias) v += *bias;
  return activate<kSet>(v, activation);
}
/// The same with the bias as a value (0 without one), for callers that keep it in a register.
template <ActivationSet kSet = ActivationSet::NoSiLU>
__device__ __forceinline__ float epilogue_value(float alpha, float acc, float beta, const float* old, float bias,
                                                int activation) {
  float v = alpha * acc;
  if (beta != 0.0f) v = fmaf(beta, *old, v);
  v += bias;
  return activate<kSet>(v, activation);
}

/// The set of a kernel compiled with or without SiLU.
template <bool kSiLU>
inline constexpr ActivationSet kActivationsOf = kSiLU ? ActivationSet::SiLUOnly : ActivationSet::NoSiLU;

/// A launcher's choice between such a kernel's two instances: f(std::true_type) where the call's
/// activation is SiLU, else f(std::false_type).
template <class F>
void silu_switch(int activation, F&& f) {
  if (activation == kActivationSiLU)
    f(std::true_type{});
  else
    f(std::false_type{});
}

}  // namespace mconv::cuda
