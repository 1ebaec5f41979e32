// Launcher of the single-channel kernel family: the planner's division from the Plan, the shared-
// memory opt-in, the filter-size switch (1, 3, 5, 7 square, else generic) and the launch check.
#include "cuda_backend.hpp"
#include "cuda_check.cuh"
#include "filter_size_switch.cuh"
#include "single_channel_kernel.cuh"

namespace mconv::detail::cuda_backend {
namespace {

template <int R, int S>
void launch(const cuda::SingleChannelParams& prm, dim3 grid, int smem, cudaStream_t stream) {
  cuda::launch_with_smem(cuda::single_channel_kernel<R, S>, grid, cuda::kSingleChannelThreads, smem, stream, prm);
}

}  // namespace

void single_channel_forward(const Plan& plan, const float* x, const float* w, float* y, const Epilogue& e,
                            void* stream) {
  if (plan.tile().block_planes > 0) return single_channel_planes_forward(plan, x, w, y, e, stream);
  const Problem& pr = plan.problem();
  const TileChoice& t = plan.tile();
  const TensorDesc &xd = plan.x_desc(), &wd = plan.w_desc(), &yd = plan.y_desc();
  cuda::SingleChannelParams prm{};
  prm.x = x;
  prm.w = w;
  prm.y = y;
  prm.bias = e.bias;
  prm.x_sn = xd.strides[0];
  prm.x_sc = xd.strides[1];
  prm.x_sh = xd.strides[2];
  prm.x_sw = xd.strides[3];
  prm.w_sk = wd.strides[0];
  prm.w_sr = wd.strides[2];
  prm.w_ss = wd.strides[3];
  prm.y_sn = yd.strides[0];
  prm.y_sk = yd.strides[1];
  prm.y_sp = yd.strides[2];
  prm.y_sq = yd.strides[3];
  prm.groups = static_cast<int>(pr.groups);
  prm.kg = static_cast<int>(pr.k_per_group());
  prm.filters_per_block = t.block_filters;
  prm.rows_per_block = t.block_rows;
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
  prm.strip_rows = static_cast<int>((t.block_rows - 1) * pr.stride_h + (pr.r - 1) * pr.dil_h + 1);
  prm.strip_cols = static_cast<int>((pr.q() - 1) * pr.stride_w + (pr.s - 1) * pr.dil_w + 1);
  prm.flip = pr.mode == Mode::Convolution;
  prm.alpha = pr.alpha;
  prm.beta = pr.beta;
  prm.relu = e.relu;
  const long long z = pr.n * pr.groups;
  const unsigned gx = static_cast<unsigned>((prm.P + t.block_rows - 1) / t.block_rows);
  const unsigned gy = static_cast<unsigned>((prm.kg + t.block_filters - 1) / t.block_filters);
  if (z > 65535 || gy > 65535)
    throw Error(Status::Unsupported, "n*groups: single_channel grid exceeds the launch limits");
  const int smem = (prm.strip_rows * prm.strip_cols + t.block_filters * prm.R * prm.S) * 4;
  const dim3 grid(gx, gy, static_cast<unsigned>(z));
  const auto s = static_cast<cudaStream_t>(stream);
  cuda::filter_size_switch(pr.r, pr.s,
                           [&](auto k) { launch<decltype(k)::value, decltype(k)::value>(prm, grid, smem, s); });
}

}  // namespace mconv::detail::cuda_backend
