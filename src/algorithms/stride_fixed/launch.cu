// Launcher of the stride-fixed kernel family: the planner's division from the Plan, the channel
// slices (with the split-K pre-pass), and the switch to the float4-window kernels (square 1, 3, 5, 7
// filters, stride_w 1 or 2, no dilation) or the generic one.
#include "../common/cuda_check.cuh"
#include "../common/filter_size_switch.cuh"
#include "../common/kernel_launch.cuh"
#include "../launch.hpp"
#include "kernel.cuh"

namespace mconv::detail {
namespace {

template <int K, int SW>
void launch(const cuda::StrideFixedParams& prm, int thread_pixels, dim3 grid, int smem, cuda::LaunchStream stream) {
  if (thread_pixels == 4)
    cuda::launch_with_smem(cuda::stride_fixed_kernel<K, SW, 4>, grid, kStrideFixedThreads, smem, stream, prm);
  else
    cuda::launch_with_smem(cuda::stride_fixed_kernel<K, SW, 8>, grid, kStrideFixedThreads, smem, stream, prm);
}

}  // namespace

void stride_fixed_forward(const Plan& plan, const StrideFixedDivision& d, const float* x, const float* w, float* y,
                          const Epilogue& e, void* stream, bool dependent_launch) {
  const Problem& pr = plan.problem();
  cuda::StrideFixedParams prm{cuda::conv_geometry(plan, x, w, y, e)};
  prm.seg = d.segment_channels;
  prm.tile_rows = d.tile_rows;
  prm.tile_cols = d.tile_cols;
  prm.tiles_x = d.tiles_x;
  const int thread_pixels = d.thread_pixels == 4 ? 4 : kStrideFixedThreadPixels;  // the kernels instantiated
  const StrideFixedLayout& layout = d.layout;
  prm.in_rows = layout.rows;
  prm.in_cols = layout.cols;
  prm.pitch = layout.pitch;
  // Note [split-k without workspace]: an activation needs the whole sum, so it runs unsplit.
  prm.splits = e.activation != Activation::Identity ? 1 : d.splits;
  prm.rounds_per_split = e.activation != Activation::Identity ? d.rounds : d.rounds_per_split;
  prm.in_cols_div = cuda::FastDivmod(static_cast<unsigned>(layout.cols));
  prm.in_rows_div = cuda::FastDivmod(static_cast<unsigned>(layout.rows));
  prm.crs_div = cuda::FastDivmod(static_cast<unsigned>(prm.seg * prm.R * prm.S));
  prm.rs_div = cuda::FastDivmod(static_cast<unsigned>(prm.R * prm.S));
  prm.s_div = cuda::FastDivmod(static_cast<unsigned>(prm.S));
  // 16-byte line copies: aligned rows, and every block's first column on a float4 (W'x is a
  // multiple of a thread's 4 or 8 pixels, so that holds when pad_w is a multiple of 4).
  prm.vec_lines = cuda::x_rows_float4_aligned(plan, x) && pr.pad_w % 4 == 0;
  prm.in_vecs_div = cuda::FastDivmod(static_cast<unsigned>((layout.cols + 3) / 4));
  prm.vec_store = cuda::y_rows_float4_aligned(plan, y);
  const int rs = prm.R * prm.S, crs = prm.seg * rs;
  prm.filters_kcrs = prm.w_ss == 1 && prm.w_sr == prm.S && prm.w_sc == rs;
  prm.walk_df = kStrideFixedThreads / crs;
  prm.walk_dc = kStrideFixedThreads % crs / rs;
  prm.walk_drs = kStrideFixedThreads % rs;
  const int smem = static_cast<int>(d.launch.smem_bytes);
  dim3 grid = cuda::grid_of(d.launch);
  grid.z = static_cast<unsigned>(pr.n * pr.groups * prm.splits);
  if (prm.splits > 1) output_prepass(plan, d.prepass_blocks, y, e, stream, dependent_launch);
  const cuda::LaunchStream s{static_cast<cudaStream_t>(stream), dependent_launch};
  const bool window = pr.dil_h == 1 && pr.dil_w == 1 && (pr.stride_w == 1 || pr.stride_w == 2);
  cuda::filter_size_switch(window ? pr.r : 0, pr.s, [&](auto k) {
    constexpr int K = decltype(k)::value;
    if constexpr (K == 0)
      launch<0, 0>(prm, thread_pixels, grid, smem, s);  // any filter, stride and dilation
    else if (pr.stride_w == 1)
      launch<K, 1>(prm, thread_pixels, grid, smem, s);
    else
      launch<K, 2>(prm, thread_pixels, grid, smem, s);
  });
}

}  // namespace mconv::detail
