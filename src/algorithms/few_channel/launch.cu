// Launcher of few_channel (Note [few-channel forward]): the layer's strides, how y's filters can be
// stored, and the dtype switch.
#include <cstdint>

#include "../common/cuda_check.cuh"
#include "../common/host_math.hpp"
#include "../common/kernel_launch.cuh"
#include "../launch.hpp"
#include "kernel.cuh"
#include "planner.hpp"

namespace mconv::detail {
namespace {

template <class Mma>
void launch_dtype(const cuda::FewChannelParams& prm, dim3 grid, int smem, cuda::LaunchStream on) {
  constexpr auto kernel = cuda::few_channel_kernel<Mma>;
  // The plan's shared memory, not a device's most: a device that holds less then gets the launch's
  // own error, not the attribute's.
  if (smem > 48 * 1024)
    MCONV_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cuda::launch_kernel(kernel, grid, kFewChannelThreads, smem, on, 1, prm);
}

}  // namespace

void few_channel_forward(const Plan& plan, const FewChannelDivision& d, const void* x, const void* w, void* y,
                         const Epilogue& e, void* stream, bool dependent_launch) {
  const Problem& p = plan.problem();
  const auto &xs = plan.x_desc().strides, &ws = plan.w_desc().strides, &ys = plan.y_desc().strides;
  cuda::FewChannelParams prm{};
  prm.x = x;
  prm.w = w;
  prm.y = y;
  prm.bias = e.bias;
  prm.x_sn = xs[0];
  prm.w_sk = ws[0];
  prm.w_sc = ws[1];
  prm.w_sr = ws[2];
  prm.w_ss = ws[3];
  prm.y_sn = ys[0];
  prm.y_sk = ys[1];
  prm.y_sp = ys[2];
  prm.y_sq = ys[3];
  prm.K = static_cast<int>(p.k);
  prm.C = static_cast<int>(p.c);
  prm.R = static_cast<int>(p.r);
  prm.S = static_cast<int>(p.s);
  prm.P = static_cast<int>(p.p());
  prm.Q = static_cast<int>(p.q());
  prm.crs = prm.C * prm.R * prm.S;
  prm.columns = d.columns;
  prm.stride_h = static_cast<int>(p.stride_h);
  prm.stride_w = static_cast<int>(p.stride_w);
  prm.dil_h = static_cast<int>(p.dil_h);
  prm.dil_w = static_cast<int>(p.dil_w);
  prm.pad_h = static_cast<int>(p.pad_h);
  prm.pad_w = static_cast<int>(p.pad_w);
  prm.flip = p.mode == Mode::Convolution ? 1 : 0;
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
  prm.alpha = e.alpha;
  prm.beta = e.beta;
  prm.relu = e.activation == Activation::ReLU ? 1 : 0;
  const dim3 grid(static_cast<unsigned>(d.launch.grid_x), static_cast<unsigned>(d.launch.grid_y), 1);
  const int smem = static_cast<int>(d.launch.smem_bytes);
  const cuda::LaunchStream s{static_cast<cudaStream_t>(stream), dependent_launch};
  if (plan.dtype() == DType::BFloat16)
    launch_dtype<cuda::MmaBf16>(prm, grid, smem, s);
  else if (plan.dtype() == DType::Float16)
    launch_dtype<cuda::MmaFp16>(prm, grid, smem, s);
  else if (plan.math() == MathMode::TF32)
    launch_dtype<cuda::MmaTf32>(prm, grid, smem, s);
  else
    throw Error(Status::Internal, "few_channel: fp16, bf16 and TF32 only");
}

}  // namespace mconv::detail
