// Launcher of the split-K pre-pass (output_prepass_kernel.cuh), shared by the families that sum
// channel slices into y with atomics (implicit_precomp, stride_fixed).
#include <algorithm>

#include "cuda_backend.hpp"
#include "cuda_check.cuh"
#include "output_prepass_kernel.cuh"

namespace mconv::detail::cuda_backend {

void output_prepass(const Plan& plan, float* y, const Epilogue& e, void* stream) {
  const Problem& pr = plan.problem();
  const auto& ys = plan.y_desc().strides;
  cuda::OutputPrepassParams pp{};
  pp.y = y;
  pp.bias = e.bias;
  pp.pq = static_cast<int>(pr.p() * pr.q());
  pp.total = static_cast<long long>(pr.n) * pr.k * pp.pq;
  pp.k = static_cast<int>(pr.k);
  pp.q = static_cast<int>(pr.q());
  pp.k_div = cuda::FastDivmod(static_cast<unsigned>(pp.k));
  pp.pq_div = cuda::FastDivmod(static_cast<unsigned>(pp.pq));
  pp.q_div = cuda::FastDivmod(static_cast<unsigned>(pp.q));
  pp.y_sn = ys[0];
  pp.y_sk = ys[1];
  pp.y_sp = ys[2];
  pp.y_sq = ys[3];
  pp.beta = pr.beta;
  const int blocks = static_cast<int>(std::min<long long>((pp.total + 255) / 256, 132 * 16));
  cuda::output_prepass_kernel<<<blocks, 256, 0, static_cast<cudaStream_t>(stream)>>>(pp);
  MCONV_CUDA_CHECK(cudaGetLastError());
}

}  // namespace mconv::detail::cuda_backend
