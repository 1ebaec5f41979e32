// The y pre-pass of split-K (Note [split-k without workspace] in implicit_precomp_kernel.cuh):
// y = beta*y + bias[k] over every output element, in any layout and storage type (fp32, or the
// 16-bit types of implicit_mma's atomic slices, computed in fp32). beta == 0 never reads y.
#pragma once

#include "dependent_launch.cuh"
#include "fast_divmod.cuh"
#include "storage.cuh"

namespace mconv::cuda {

struct OutputPrepassParams {
  void* y;            // of the kernel's storage type
  const float* bias;  // K values or null
  long long total;    // N*K*P*Q
  int k, pq, q;
  FastDivmod k_div, pq_div, q_div;  // used when total < 2^31 (FastDivmod's range)
  long long y_sn, y_sk, y_sp, y_sq;
  float beta;
};

template <class T>
__device__ __forceinline__ void output_prepass_element(const OutputPrepassParams& prm, long long n, int k, int p,
                                                       int q) {
  T* dst = static_cast<T*>(prm.y) + n * prm.y_sn + k * prm.y_sk + p * prm.y_sp + q * prm.y_sq;
  float v = prm.beta != 0.0f ? prm.beta * to_float(*dst) : 0.0f;
  if (prm.bias) v += prm.bias[k];
  *dst = from_float<T>(v);
}

template <class T>
__global__ void output_prepass_kernel(const OutputPrepassParams prm) {
  detail::wait_then_allow_dependent_grids();  // Note [dependent launch]
  // i enumerates (n, k, p, q) with q fastest. 64-bit division costs ~100 instructions per element,
  // which made this pass longer than the convolution on 112x112 maps (H100), hence FastDivmod.
  if (prm.total < 0x7fffffffLL) {
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < prm.total; i += gridDim.x * blockDim.x) {
      unsigned nk, rem, n, k, p, q;
      prm.pq_div.divmod(i, nk, rem);
      prm.k_div.divmod(nk, n, k);
      prm.q_div.divmod(rem, p, q);
      output_prepass_element<T>(prm, n, k, p, q);
    }
    return;
  }
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < prm.total;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long nk = i / prm.pq;
    const int rem = static_cast<int>(i - nk * prm.pq);
    const int p = rem / prm.q;
    output_prepass_element<T>(prm, nk / prm.k, static_cast<int>(nk % prm.k), p, rem - p * prm.q);
  }
}

}  // namespace mconv::cuda
