// Launcher of few_filter (Note [few-filter forward]): the window's geometry, whether x copies as
// 16-byte vectors, and the dtype switch.
#include <cstdint>

#include "../common/conv_geometry.cuh"
#include "../common/host_math.hpp"
#include "../common/kernel_launch.cuh"
#include "../common/x_window.hpp"
#include "../launch.hpp"
#include "kernel.cuh"
#include "planner.hpp"

namespace mconv::detail {
void few_filter_forward(const Plan& plan, const FewFilterDivision& d, const void* x, const void* w, void* y,
                        const Epilogue& e, void* stream, bool dependent_launch) {
  const Problem& p = plan.problem();
  cuda::FewFilterParams prm{cuda::conv_geometry(plan, nullptr, nullptr, nullptr, e), {x, w, y}};
  prm.tile_p = d.tile_p;
  prm.tile_q = d.tile_q;
  prm.chunk_c = d.chunk_c;
  prm.chunks = static_cast<int>(ceil_div(p.c, int64_t(d.chunk_c)));
  prm.buffers = d.buffers;
  const XWindowExtent extent =
      x_window_extent(d.tile_p, d.tile_q, 1, p.r, p.s, p.stride_h, p.stride_w, p.dil_h, p.dil_w);
  prm.win_rows = static_cast<int>(extent.rows);
  prm.win_cols = static_cast<int>(extent.columns);
  prm.pixel_pitch = static_cast<int>(few_filter_pitch(2 * d.chunk_c));
  prm.filter_pitch = static_cast<int>(few_filter_pitch(2 * d.chunk_c * p.r * p.s));
  prm.window_bytes = static_cast<int>(few_filter_window_bytes(p, d.tile_p, d.tile_q, d.chunk_c));
  prm.buffer_bytes = static_cast<int>(d.smem_bytes / d.buffers);
  prm.vector_x = few_filter_vector_x(p, plan.x_desc()) && reinterpret_cast<uintptr_t>(x) % 16 == 0 ? 1 : 0;
  prm.tiles_q_div = cuda::FastDivmod(static_cast<unsigned>(ceil_div(p.q(), int64_t(d.tile_q))));
  prm.tiles_p_div = cuda::FastDivmod(static_cast<unsigned>(ceil_div(p.p(), int64_t(d.tile_p))));
  prm.win_cols_div = cuda::FastDivmod(static_cast<unsigned>(prm.win_cols));
  prm.vectors_div = cuda::FastDivmod(static_cast<unsigned>(d.chunk_c / 8));
  prm.pixels_div = cuda::FastDivmod(static_cast<unsigned>(prm.win_rows * prm.win_cols));
  prm.taps_div = cuda::FastDivmod(static_cast<unsigned>(p.r * p.s));
  const dim3 grid(static_cast<unsigned>(d.launch.grid_x), 1, 1);
  const int smem = static_cast<int>(d.launch.smem_bytes);
  const cuda::LaunchStream s{static_cast<cudaStream_t>(stream), dependent_launch};
  if (plan.dtype() == DType::BFloat16)
    cuda::launch_with_smem(cuda::few_filter_kernel<cuda::MmaBf16>, grid, kFewFilterThreads, smem, s, prm);
  else if (plan.dtype() == DType::Float16)
    cuda::launch_with_smem(cuda::few_filter_kernel<cuda::MmaFp16>, grid, kFewFilterThreads, smem, s, prm);
  else
    throw Error(Status::Internal, "few_filter: fp16 and bf16 only");
}

}  // namespace mconv::detail
