// Launcher of the stride-fixed kernel family: the planner's segment from the Plan, the shared-memory
// opt-in, the filter-size switch (1, 3, 5, 7 square, else generic) and the launch check.
#include "../plan/stride_fixed_planner.hpp"
#include "cuda_backend.hpp"
#include "cuda_check.cuh"
#include "filter_size_switch.cuh"
#include "stride_fixed_kernel.cuh"

namespace mconv::detail::cuda_backend {
namespace {

template <int R, int S>
void launch(const cuda::StrideFixedParams& prm, dim3 grid, int smem, cudaStream_t stream) {
  cuda::launch_with_smem(cuda::stride_fixed_kernel<R, S>, grid, cuda::kStrideFixedPixels, smem, stream, prm);
}

}  // namespace

void stride_fixed_forward(const Plan& plan, const float* x, const float* w, float* y, const Epilogue& e, void* stream) {
  const Problem& pr = plan.problem();
  cuda::StrideFixedParams prm{cuda::conv_geometry(plan, x, w, y, e)};
  prm.seg = plan.tile().segment_channels;
  prm.line_cols = static_cast<int>(stride_fixed_line_cols(pr, cuda::kStrideFixedPixels));
  prm.segments_x = (prm.Q + cuda::kStrideFixedPixels - 1) / cuda::kStrideFixedPixels;
  const long long gx = static_cast<long long>(prm.P) * prm.segments_x;
  const long long gy = (prm.kg + cuda::kStrideFixedFilters - 1) / cuda::kStrideFixedFilters;
  const long long gz = pr.n * pr.groups;
  if (gx > 0x7fffffffLL || gy > 65535 || gz > 65535)
    throw Error(Status::Unsupported, "stride_fixed: grid exceeds the launch limits");
  const int smem = 2 * 4 * (prm.seg * prm.R * prm.line_cols + prm.seg * prm.R * prm.S * cuda::kStrideFixedFilters);
  const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy), static_cast<unsigned>(gz));
  const auto s = static_cast<cudaStream_t>(stream);
  cuda::filter_size_switch(pr.r, pr.s,
                           [&](auto k) { launch<decltype(k)::value, decltype(k)::value>(prm, grid, smem, s); });
}

}  // namespace mconv::detail::cuda_backend
