// Launcher of the implicit-GEMM kernel family: fills the parameters from the Plan and its division,
// checks the call's preconditions (vector stores), and launches the tile the division names in the
// plan's gather order, as clusters when the division's split is ordered.
#include <cstdint>

#include "../common/cuda_check.cuh"
#include "../common/kernel_launch.cuh"
#include "../launch.hpp"
#include "kernel.cuh"

namespace mconv::detail {
namespace {

using cuda::GatherOrder;
using cuda::ImplicitPrecompParams;

template <class Tile, GatherOrder Order>
void launch(ImplicitPrecompParams prm, int k_tiles, dim3 grid, int groups, cuda::LaunchStream on) {
  constexpr auto kernel = cuda::implicit_precomp_kernel<Tile, Order>;
  if (!prm.ordered) {
    cuda::launch_kernel(kernel, grid, Tile::kThreads, 0, on, 1, prm);
  } else {
    // Note [ordered split-k]: the slices of a tile are consecutive z blocks, one cluster; beyond the
    // portable 8 where the device schedules it.
    static const bool non_portable = [] {
      MCONV_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
      return true;
    }();
    (void)non_portable;
    prm.splits = cuda::schedulable_cluster_blocks<kernel>(prm.splits, Tile::kThreads, 0);
    prm.k_tiles_per_split = (k_tiles + prm.splits - 1) / prm.splits;
    grid.z = static_cast<unsigned>(groups * prm.splits);
    cuda::launch_kernel(kernel, grid, Tile::kThreads, 0, on, prm.splits, prm);
  }
}

}  // namespace

void implicit_precomp_forward(const Plan& plan, const ImplicitPrecompDivision& d, const float* x, const float* w,
                              float* y, const Epilogue& e, void* stream, bool dependent_launch) {
  const Problem& pr = plan.problem();
  const auto& out = plan.output_rule();
  ImplicitPrecompParams prm{};
  static_cast<cuda::ImplicitGemmGeometry&>(prm) = cuda::implicit_gemm_geometry(plan, e, "implicit_precomp");
  prm.x = x;
  prm.w = w;
  prm.y = y;
  // Note [vector epilogue]: contiguous pixels, whole float4 groups that never straddle a row, and
  // every group start 16-byte aligned (pointer and the n, k, group strides multiples of 4).
  prm.vector_store = out.stride_q == 1 && out.stride_p == pr.q() && pr.q() % 4 == 0 &&
                     reinterpret_cast<uintptr_t>(y) % 16 == 0 && out.stride_n % 4 == 0 && out.stride_k % 4 == 0 &&
                     prm.y_group % 4 == 0;

  // Note [split-k without workspace]: an activation needs the whole sum, so the atomic split runs unsplit. The
  // ordered split (Note [ordered split-k]) has the whole sum in its epilogue and needs no pre-pass.
  prm.ordered = d.ordered_split && d.split_k > 1;
  prm.store_pixels_fastest = out.stride_k != 1;
  const bool unsplit = e.activation != Activation::Identity && !prm.ordered;
  prm.splits = unsplit ? 1 : d.split_k;
  prm.k_tiles_per_split = unsplit ? d.k_tiles : d.k_tiles_per_split;
  if (prm.splits > 1 && !prm.ordered) output_prepass(plan, d.prepass_blocks, y, e, stream, dependent_launch);
  dim3 grid = cuda::grid_of(d.launch);
  grid.z = static_cast<unsigned>(pr.groups * prm.splits);

  const GatherOrder order = plan.row_order() == RowOrder::RSC ? GatherOrder::Rows : GatherOrder::Columns;
  const cuda::LaunchStream s{static_cast<cudaStream_t>(stream), dependent_launch};
  const int groups = static_cast<int>(pr.groups);
  if (!visit_tile(d.tile, [&](auto tile) {
        using Tile = decltype(tile);
        if (order == GatherOrder::Columns)
          launch<Tile, GatherOrder::Columns>(prm, d.k_tiles, grid, groups, s);
        else
          launch<Tile, GatherOrder::Rows>(prm, d.k_tiles, grid, groups, s);
      }))
    throw Error(Status::Internal, "tile: plan names tile " + std::to_string(d.tile) + " that has no instantiation");
}

}  // namespace mconv::detail
