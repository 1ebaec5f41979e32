// Storage types on the device: fp32, fp16 and bf16 tensors are read into fp32 and written back with
// one round-to-nearest-even conversion.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace mconv::cuda {

__device__ __forceinline__ float to_float(float v) {
  return v;
}
__device__ __forceinline__ float to_float(__half v) {
  return __half2float(v);
}
__device__ __forceinline__ float to_float(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <class T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

/// *dst += v for a slice of a split sum (Note [mma atomic slices]): a 16-bit dst gets v rounded once
/// to its type, then the hardware's add in that type (sm_80+).
template <class T>
__device__ __forceinline__ void atomic_add_rounded(T* dst, float v) {
  if constexpr (sizeof(T) == 4)
    atomicAdd(dst, v);
  else
    atomicAdd(dst, from_float<T>(v));
}

}  // namespace mconv::cuda
