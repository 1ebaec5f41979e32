// Launcher of the direct-block kernel family: parameters from the Plan, the shared-memory opt-in,
// the instantiation for the plan's shape and filter size (1, 3, 5, 7 square, else generic), and the
// launch check.
#include <cstdint>
#include <type_traits>

#include "../common/cuda_check.cuh"
#include "../common/filter_size_switch.cuh"
#include "../common/kernel_launch.cuh"
#include "../common/storage_dtype.cuh"
#include "../launch.hpp"
#include "kernel.cuh"
#include "planner.hpp"

namespace mconv::detail {
namespace {

using cuda::DirectBlockParams;
using cuda::DirectBlockShape;

template <class T, class Shape>
void launch(const DirectBlockParams& prm, dim3 grid, int smem, cuda::LaunchStream stream) {
  cuda::silu_switch(prm.activation, [&](auto silu) {  // Note [fused silu]
    cuda::launch_with_smem(cuda::direct_block_kernel<T, Shape, decltype(silu)::value>, grid, Shape::kThreads, smem,
                           stream, prm);
  });
}

// Static switch over the filter size: 1, 3, 5, 7 square get unrolled kernels, others the generic one,
// unrolled to 4 taps where both axes have at most 4 (Note [bounded taps]).
template <class T, class Thread>
void launch_sized(const DirectBlockParams& prm, dim3 grid, int smem, cuda::LaunchStream stream) {
  cuda::filter_size_switch(prm.R, prm.S, [&](auto k) {
    constexpr int K = decltype(k)::value;
    auto go = [&](auto bound) {
      launch<T, DirectBlockShape<K, K, Thread::kFilters, Thread::kThreadsX, Thread::kThreadsY, Thread::kRegRows,
                                 Thread::kRegCols, Thread::kGroupsPerBlock, decltype(bound)::value>>(prm, grid, smem,
                                                                                                     stream);
    };
    if constexpr (K == 0) {
      if (prm.R <= kDirectTapBound && prm.S <= kDirectTapBound)
        return go(std::integral_constant<int, kDirectTapBound>{});
    }
    go(std::integral_constant<int, 0>{});
  });
}

}  // namespace

void direct_block_forward(const Plan& plan, const DirectBlockDivision& d, const void* x, const void* w, void* y,
                          const Epilogue& e, void* stream, bool dependent_launch) {
  DirectBlockParams prm{cuda::conv_geometry(plan, nullptr, nullptr, nullptr, e), {x, w, y}};
  prm.filter_slices = d.filter_slices;
  prm.tiles_x = d.tiles_x;
  prm.tile_rows = d.tile_rows;
  prm.tile_cols = d.tile_cols;
  prm.pitch = d.pitch;
  prm.slots = d.slots;
  prm.images_per_block = d.images_per_block;
  prm.group_bytes = d.group_smem_bytes;
  // Note [vector halo]: preconditions for 16-byte copies.
  prm.vec4 = cuda::x_rows_aligned(plan, x, 16);
  const dim3 grid = cuda::grid_of(d.launch);
  const int smem = static_cast<int>(d.launch.smem_bytes);
  const cuda::LaunchStream s{static_cast<cudaStream_t>(stream), dependent_launch};
  const bool found = visit_direct_shape(d.shape, [&](auto shape) {
    using Thread = decltype(shape);
    visit_storage_dtype(plan.dtype(), "direct_block",
                        [&](auto element) { launch_sized<decltype(element), Thread>(prm, grid, smem, s); });
  });
  if (!found) throw Error(Status::Internal, "tile: no instantiation for direct shape '" + d.shape_name + "'");
}

}  // namespace mconv::detail
