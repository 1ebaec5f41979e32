// Launcher of few_channel (Note [few-channel forward]): the layer's strides, how y's filters can be
// stored, and the dtype switch.
#include <cstdint>

#include "../common/conv_geometry.cuh"
#include "../common/host_math.hpp"
#include "../common/kernel_launch.cuh"
#include "../launch.hpp"
#include "kernel.cuh"
#include "planner.hpp"

namespace mconv::detail {
void few_channel_forward(const Plan& plan, const FewChannelDivision& d, const void* x, const void* w, void* y,
                         const Epilogue& e, void* stream, bool dependent_launch) {
  const Problem& p = plan.problem();
  const auto &xs = plan.x_desc().strides, &ys = plan.y_desc().strides;
  cuda::FewChannelParams prm{cuda::conv_geometry(plan, nullptr, nullptr, nullptr, e), {x, w, y}};
  prm.crs = prm.cg * prm.R * prm.S;
  prm.columns = d.columns;
  prm.tile_p = d.tile_p;
  prm.tile_q = d.tile_q;
  const XWindowExtent extent =
      x_window_extent(d.tile_p, d.tile_q, p.c, p.r, p.s, p.stride_h, p.stride_w, p.dil_h, p.dil_w);
  const int esz = dtype_size(plan.dtype());
  prm.window = cuda::make_x_window(extent, p.c, p.h, p.w, xs[1], xs[2], xs[3], esz);
  prm.filter_pitch = static_cast<int>(few_channel_filter_pitch(d.columns, esz));
  prm.window_bytes = static_cast<int>(extent.bytes(esz));
  prm.tiles = static_cast<int>(p.n * ceil_div(p.p(), int64_t(d.tile_p)) * ceil_div(p.q(), int64_t(d.tile_q)));
  prm.tiles_q_div = cuda::FastDivmod(static_cast<unsigned>(ceil_div(p.q(), int64_t(d.tile_q))));
  prm.tiles_p_div = cuda::FastDivmod(static_cast<unsigned>(ceil_div(p.p(), int64_t(d.tile_p))));
  // A pixel's filters k and k + 1 (k even) are one store where they are adjacent and every pixel's
  // run starts on an even element; otherwise each is stored alone (a uniform branch).
  bool pairs = ys[1] == 1 && p.k % 2 == 0 && reinterpret_cast<uintptr_t>(y) % (2 * esz) == 0;
  for (int64_t stride : {ys[0], ys[2], ys[3]}) pairs = pairs && stride % 2 == 0;
  prm.y_pairs = pairs ? 1 : 0;
  // A pixel's 64 filters (fewer in the last block) leave as 16-byte runs where every run is
  // aligned (16-bit y); beta reads y, and then each pair goes its own way.
  bool rows = esz == 2 && ys[1] == 1 && p.k % 8 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0 && e.beta == 0.0f;
  for (int64_t stride : {ys[0], ys[2], ys[3]}) rows = rows && stride % 8 == 0;
  prm.y_rows = rows ? 1 : 0;
  const dim3 grid(static_cast<unsigned>(d.launch.grid_x), static_cast<unsigned>(d.launch.grid_y), 1);
  const int smem = static_cast<int>(d.launch.smem_bytes);
  const cuda::LaunchStream s{static_cast<cudaStream_t>(stream), dependent_launch};
  if (plan.dtype() == DType::BFloat16)
    cuda::launch_with_smem(cuda::few_channel_kernel<cuda::MmaBf16>, grid, kFewChannelThreads, smem, s, prm);
  else if (plan.dtype() == DType::Float16)
    cuda::launch_with_smem(cuda::few_channel_kernel<cuda::MmaFp16>, grid, kFewChannelThreads, smem, s, prm);
  else if (plan.math() == MathMode::TF32)
    cuda::launch_with_smem(cuda::few_channel_kernel<cuda::MmaTf32>, grid, kFewChannelThreads, smem, s, prm);
  else
    throw Error(Status::Internal, "few_channel: fp16, bf16 and TF32 only");
}

}  // namespace mconv::detail
