// Launcher of window_mma (Note [window mma]): the window's geometry, the block shape and the cluster
// split.
#include <cstdint>

#include "../common/conv_geometry.cuh"
#include "../common/host_math.hpp"
#include "../common/kernel_launch.cuh"
#include "../launch.hpp"
#include "kernel.cuh"
#include "planner.hpp"

namespace mconv::detail {

void window_mma_forward(const Plan& plan, const WindowMmaDivision& d, const void* x, const void* w, void* y,
                        const Epilogue& e, void* stream, bool dependent_launch) {
  if (plan.dtype() != DType::Float32) throw Error(Status::Internal, "window_mma: fp32 tensors only");
  const Problem& p = plan.problem();
  cuda::WindowMmaParams prm{
      cuda::conv_geometry(plan, static_cast<const float*>(x), static_cast<const float*>(w), static_cast<float*>(y), e)};
  prm.npq = static_cast<int>(p.n * p.p() * p.q());
  prm.image_rows = static_cast<int>(window_mma_image_rows(p));
  prm.win_rows = d.window_rows;
  prm.win_cols = d.window_columns;
  prm.channel_pitch = static_cast<int>(window_mma_channel_pitch(d.window_rows, d.window_columns));
  prm.filter_bytes = d.block_filters * 128;
  prm.stage_bytes = static_cast<int>(window_mma_stage_bytes(p, d.block_pixels, d.block_filters));
  prm.chunks = static_cast<int>(ceil_div(p.c, int64_t(kWindowMmaChunk)));
  prm.chunks_per_split = static_cast<int>(ceil_div(int64_t(prm.chunks), int64_t(d.cluster_split)));
  prm.stages = d.stages;
  // 3x3 filters in KCRS, whole chunks, 16-byte aligned: 144-byte runs of 4 channels' taps.
  prm.vector_w = p.r * p.s == 9 && !prm.flip && prm.w_ss == 1 && prm.w_sr == p.s && prm.w_sc == 9 &&
                         prm.w_sk % 4 == 0 && p.c % kWindowMmaChunk == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0
                     ? 1
                     : 0;
  prm.pq_div = cuda::FastDivmod(static_cast<unsigned>(p.p() * p.q()));
  prm.q_div = cuda::FastDivmod(static_cast<unsigned>(p.q()));
  prm.cols_div = cuda::FastDivmod(static_cast<unsigned>(d.window_columns));
  prm.rows_div = cuda::FastDivmod(static_cast<unsigned>(d.window_rows));
  prm.hv_div = cuda::FastDivmod(static_cast<unsigned>(prm.image_rows));
  prm.s_div = cuda::FastDivmod(static_cast<unsigned>(p.s));
  const dim3 grid(static_cast<unsigned>(d.launch.grid_x), static_cast<unsigned>(d.launch.grid_y),
                  static_cast<unsigned>(d.launch.grid_z));
  const int smem = static_cast<int>(d.launch.smem_bytes);
  void (*kernel)(cuda::WindowMmaParams) =
      d.block_filters == 64 ? cuda::window_mma_kernel<64, 2> : cuda::window_mma_kernel<128, 1>;
  if (smem > 48 * 1024)
    MCONV_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cuda::launch_kernel(kernel, grid, kWindowMmaThreads, smem,
                      cuda::LaunchStream{static_cast<cudaStream_t>(stream), dependent_launch}, d.cluster_split, prm);
}

}  // namespace mconv::detail
