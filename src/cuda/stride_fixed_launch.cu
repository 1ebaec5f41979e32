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
  const TensorDesc &xd = plan.x_desc(), &wd = plan.w_desc(), &yd = plan.y_desc();
  cuda::StrideFixedParams prm{};
  prm.x = x;
  prm.w = w;
  prm.y = y;
  prm.bias = e.bias;
  prm.x_sn = xd.strides[0];
  prm.x_sc = xd.strides[1];
  prm.x_sh = xd.strides[2];
  prm.x_sw = xd.strides[3];
  prm.w_sk = wd.strides[0];
  prm.w_sc = wd.strides[1];
  prm.w_sr = wd.strides[2];
  prm.w_ss = wd.strides[3];
  prm.y_sn = yd.strides[0];
  prm.y_sk = yd.strides[1];
  prm.y_sp = yd.strides[2];
  prm.y_sq = yd.strides[3];
  prm.groups = static_cast<int>(pr.groups);
  prm.cg = static_cast<int>(pr.c_per_group());
  prm.kg = static_cast<int>(pr.k_per_group());
  prm.H = static_cast<int>(pr.h);
  prm.W = static_cast<int>(pr.w);
  prm.P = static_cast<int>(pr.p());
  prm.Q = static_cast<int>(pr.q());
  prm.R = static_cast<int>(pr.r);
  prm.S = static_cast<int>(pr.s);
  prm.stride_h = static_cast<int>(pr.stride_h);
  prm.stride_w = static_cast<int>(pr.stride_w);
  prm.pad_h = static_cast<int>(pr.pad_h);
  prm.pad_w = static_cast<int>(pr.pad_w);
  prm.dil_h = static_cast<int>(pr.dil_h);
  prm.dil_w = static_cast<int>(pr.dil_w);
  prm.seg = plan.tile().segment_channels;
  prm.line_cols = static_cast<int>(stride_fixed_line_cols(pr, cuda::kStrideFixedPixels));
  prm.segments_x = (prm.Q + cuda::kStrideFixedPixels - 1) / cuda::kStrideFixedPixels;
  prm.flip = pr.mode == Mode::Convolution;
  prm.alpha = pr.alpha;
  prm.beta = pr.beta;
  prm.relu = e.relu;
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
