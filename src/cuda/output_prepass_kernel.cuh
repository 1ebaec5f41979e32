// The y pre-pass of split-K (Note [split-k without workspace] in implicit_precomp_kernel.cuh):
// y = beta*y + bias[k] over every output element, in any layout. beta == 0 never reads y.
#pragma once

namespace mconv::cuda {

struct OutputPrepassParams {
  float* y;
  const float* bias;  // K values or null
  long long total;    // N*K*P*Q
  int k, pq, q;
  long long y_sn, y_sk, y_sp, y_sq;
  float beta;
};

__global__ void output_prepass_kernel(const OutputPrepassParams prm) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < prm.total;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    // i enumerates (n, k, p, q) with q fastest.
    const long long nk = i / prm.pq;
    const int rem = static_cast<int>(i - nk * prm.pq);
    const int k = static_cast<int>(nk % prm.k);
    const long long n = nk / prm.k;
    const int p = rem / prm.q, q = rem - p * prm.q;
    float* dst = prm.y + n * prm.y_sn + k * prm.y_sk + p * prm.y_sp + q * prm.y_sq;
    float v = prm.beta != 0.0f ? prm.beta * *dst : 0.0f;
    if (prm.bias) v += prm.bias[k];
    *dst = v;
  }
}

}  // namespace mconv::cuda
