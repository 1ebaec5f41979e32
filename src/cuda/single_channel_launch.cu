// Launcher of the single-channel kernel family: the planner's division from the Plan, the shared-
// memory opt-in, the filter-size switch (1, 3, 5, 7 square, else generic) and the launch check.
#include "../plan/single_channel_planner.hpp"
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
  if (plan.tile().name == kPlaneBulkTile) return single_channel_bulk_forward(plan, x, w, y, e, stream);
  if (plan.tile().block_planes > 0) return single_channel_planes_forward(plan, x, w, y, e, stream);
  const Problem& pr = plan.problem();
  const TileChoice& t = plan.tile();
  cuda::SingleChannelParams prm{cuda::conv_geometry(plan, x, w, y, e)};
  prm.filters_per_block = t.block_filters;
  prm.rows_per_block = t.block_rows;
  prm.strip_rows = static_cast<int>(single_channel_strip_rows(pr, t.block_rows));  // the planner's D
  prm.strip_cols = static_cast<int>(single_channel_strip_cols(pr));
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
