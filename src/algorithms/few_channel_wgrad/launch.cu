// Launcher of few_channel_wgrad (Note [few-channel wgrad]): the step's views in the layer's terms,
// whether dy's rows can be copied as vectors, the cluster size the device schedules, the pre-pass of
// atomic slices, and the (dtype, columns) switch.
#include <cstdint>

#include "../common/cuda_check.cuh"
#include "../common/host_math.hpp"
#include "../common/kernel_launch.cuh"
#include "../launch.hpp"
#include "kernel.cuh"
#include "planner.hpp"

namespace mconv::detail {
namespace {

using cuda::FewChannelWgradParams;

template <class Mma, int NC>
void launch_columns(FewChannelWgradParams prm, dim3 grid, int smem, int slices, cuda::LaunchStream on) {
  constexpr auto kernel = cuda::few_channel_wgrad_kernel<Mma, NC>;
  // The plan's shared memory, not a device's most: a device that holds less then gets the launch's
  // own error, not the attribute's.
  if (smem > 48 * 1024)
    MCONV_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  if (prm.cluster_split > 1) {
    static const bool non_portable = [] {
      MCONV_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
      return true;
    }();
    (void)non_portable;
    prm.cluster_split = cuda::schedulable_cluster_blocks<kernel>(prm.cluster_split, kFewChannelWgradThreads, smem);
  }
  // A block holds an SM: slices past the clusters the device holds at once would run as a second
  // wave of few clusters, so the items go to as many slices as run together.
  if (slices > 1) {
    // (a cluster's blocks share a GPC: on the H100 fewer 16-block clusters than 132 / 16 fit)
    const int fit = cuda::resident_clusters<kernel>(prm.cluster_split, kFewChannelWgradThreads, smem) /
                    static_cast<int>(grid.x * grid.y);
    if (fit >= 1 && fit < slices) slices = fit;  // still adding into the pre-pass's dw
  }
  grid.z = static_cast<unsigned>(slices * prm.cluster_split);
  cuda::launch_kernel(kernel, grid, kFewChannelWgradThreads, smem, on, prm.cluster_split, prm);
}

template <class Mma>
void launch_dtype(const FewChannelWgradParams& prm, int column_tiles, dim3 grid, int smem, int slices,
                  cuda::LaunchStream on) {
  switch (column_tiles) {
    case 5:
      return launch_columns<Mma, 5>(prm, grid, smem, slices, on);
    case 2:
      return launch_columns<Mma, 2>(prm, grid, smem, slices, on);
    case 1:
      return launch_columns<Mma, 1>(prm, grid, smem, slices, on);
  }
  throw Error(Status::Internal, "few_channel_wgrad: a plan's column tiles have no instantiation");
}

}  // namespace

void few_channel_wgrad_forward(const Plan& plan, const FewChannelWgradDivision& d, const void* x, const void* w,
                               void* y, const Epilogue& e, void* stream, bool dependent_launch) {
  // The step (decompose_backward_filter) in the layer's terms: x's images are the step's channels,
  // dy is the step's filter (its filters the step's, its images the step's channels), dw the step's
  // output (its images the layer's channels).
  const Problem& st = plan.problem();
  const auto &xs = plan.x_desc().strides, &ws = plan.w_desc().strides, &ys = plan.y_desc().strides;
  const WgradLayer l(st);
  FewChannelWgradParams prm{};
  prm.x = x;
  prm.dy = w;
  prm.dw = y;
  prm.bias = e.bias;
  prm.x_sn = xs[1];
  prm.dy_sn = ws[1];
  prm.dy_sp = ws[2];
  prm.dy_sq = ws[3];
  prm.dw_sc = ys[0];
  prm.dw_sk = ys[1];
  prm.dw_sr = ys[2];
  prm.dw_ss = ys[3];
  prm.K = static_cast<int>(l.k);
  prm.C = static_cast<int>(l.c);
  prm.R = static_cast<int>(l.r);
  prm.S = static_cast<int>(l.s);
  prm.P = static_cast<int>(l.p);
  prm.Q = static_cast<int>(l.q);
  prm.crs = prm.C * prm.R * prm.S;
  prm.stride_h = static_cast<int>(l.stride_h);
  prm.stride_w = static_cast<int>(l.stride_w);
  prm.dil_h = static_cast<int>(l.dil_h);
  prm.dil_w = static_cast<int>(l.dil_w);
  prm.pad_h = static_cast<int>(l.pad_h);
  prm.pad_w = static_cast<int>(l.pad_w);
  prm.tile_p = d.tile_p;
  prm.tile_q = d.tile_q;
  // The step's h and w stop at the last row and column an output pixel reads (backward.cpp); its
  // x's images are the layer's channels.
  const XWindowExtent extent =
      x_window_extent(d.tile_p, d.tile_q, l.c, l.r, l.s, l.stride_h, l.stride_w, l.dil_h, l.dil_w);
  prm.window = cuda::make_x_window(extent, l.c, l.h, l.w, xs[0], xs[2], xs[3]);
  prm.dy_bytes = d.tile_p * d.tile_q * kFewChannelWgradRowBytes;
  prm.half_bytes = static_cast<int>(d.half_bytes);
  const int64_t tiles_p = ceil_div(l.p, int64_t(d.tile_p)), tiles_q = ceil_div(l.q, int64_t(d.tile_q));
  prm.tiles_q_div = cuda::FastDivmod(static_cast<unsigned>(tiles_q));
  prm.tiles_p_div = cuda::FastDivmod(static_cast<unsigned>(tiles_p));
  prm.items = static_cast<int>(d.items);
  // A pixel's 8 filters are one 16-byte copy where dy and every pixel's row start at 16 bytes;
  // otherwise they are copied element by element (the same kernel, a uniform branch in its loads).
  const int esz = dtype_size(plan.dtype());
  bool vectors = reinterpret_cast<uintptr_t>(w) % 16 == 0 && l.k % 8 == 0;
  for (int64_t stride : {ws[1], ws[2], ws[3]}) vectors = vectors && (stride * esz) % 16 == 0;
  prm.dy_vectors = vectors ? 1 : 0;
  prm.cluster_split = d.cluster_split;
  prm.alpha = e.alpha;
  prm.beta = e.beta;
  prm.activation = static_cast<int>(e.activation);
  // An activation needs the whole sum: atomic slices run as one.
  const int slices = e.activation != Activation::Identity ? 1 : d.atomic_slices;
  prm.atomic = slices > 1;
  if (prm.atomic) output_prepass(plan, d.prepass_blocks, y, e, stream, dependent_launch);
  const dim3 grid(static_cast<unsigned>(d.launch.grid_x), static_cast<unsigned>(d.launch.grid_y), 1);
  const int smem = static_cast<int>(d.launch.smem_bytes);
  const cuda::LaunchStream s{static_cast<cudaStream_t>(stream), dependent_launch};
  if (plan.dtype() == DType::BFloat16)
    launch_dtype<cuda::MmaBf16>(prm, d.column_tiles, grid, smem, slices, s);
  else if (plan.dtype() == DType::Float16)
    launch_dtype<cuda::MmaFp16>(prm, d.column_tiles, grid, smem, slices, s);
  else
    throw Error(Status::Internal, "few_channel_wgrad: fp16 and bf16 only");
}

}  // namespace mconv::detail
