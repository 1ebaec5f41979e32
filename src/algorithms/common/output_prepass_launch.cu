// Launcher of the split-K pre-pass (output_prepass_kernel.cuh), shared by the families that sum
// slices into y with atomics (implicit_precomp, stride_fixed, implicit_mma).
#include "../launch.hpp"
#include "cuda_check.cuh"
#include "kernel_launch.cuh"
#include "output_prepass_kernel.cuh"
#include "storage_dtype.cuh"

namespace mconv::detail {

void output_prepass(const Plan& plan, int blocks, void* y, const Epilogue& e, void* stream, bool dependent_launch) {
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
  pp.beta = e.beta;
  // beta = 0 without a bias is a zero fill: where y is dense (its span holds exactly its elements,
  // in any order) the runtime's memset does it. On the H100, graph-timed, stride_fixed's split
  // layers: multi_h56_c128_k1 14.5 -> 13.5 us, multi_h112_c64_k1 15.9 -> 14.4, 3x3 layers 1-3%.
  const auto s = static_cast<cudaStream_t>(stream);
  if (e.beta == 0.0f && !e.bias && plan.y_desc().span_elements() == pp.total) {
    MCONV_CUDA_CHECK(cudaMemsetAsync(y, 0, static_cast<size_t>(pp.total) * dtype_size(plan.dtype()), s));
    return;
  }
  visit_storage_dtype(plan.dtype(), "output_prepass", [&](auto element) {
    cuda::launch_kernel(cuda::output_prepass_kernel<decltype(element)>, dim3(static_cast<unsigned>(blocks)), 256, 0,
                        cuda::LaunchStream{s, dependent_launch}, 1, pp);
  });
}

}  // namespace mconv::detail
