// Launcher of the implicit-GEMM kernel family: fills the parameters from the Plan and its division,
// checks the call's preconditions (vector stores), and launches the tile the division names in the
// plan's gather order.
#include <cstdint>

#include "../common/cuda_check.cuh"
#include "../launch.hpp"
#include "kernel.cuh"

namespace mconv::detail {
namespace {

using cuda::GatherOrder;
using cuda::ImplicitPrecompParams;

template <class Tile>
void launch(const ImplicitPrecompParams& prm, GatherOrder order, dim3 grid, cudaStream_t stream) {
  if (order == GatherOrder::Columns)
    cuda::implicit_precomp_kernel<Tile, GatherOrder::Columns><<<grid, Tile::kThreads, 0, stream>>>(prm);
  else
    cuda::implicit_precomp_kernel<Tile, GatherOrder::Rows><<<grid, Tile::kThreads, 0, stream>>>(prm);
  MCONV_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void implicit_precomp_forward(const Plan& plan, const ImplicitPrecompDivision& d, const float* x, const float* w,
                              float* y, const Epilogue& e, void* stream) {
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

  // Note [split-k without workspace]: ReLU needs the whole sum, so it runs unsplit.
  prm.splits = e.activation == Activation::ReLU ? 1 : d.split_k;
  prm.k_tiles_per_split = e.activation == Activation::ReLU ? d.k_tiles : d.k_tiles_per_split;
  if (prm.splits > 1) output_prepass(plan, d.prepass_blocks, y, e, stream);
  dim3 grid = cuda::grid_of(d.launch);
  grid.z = static_cast<unsigned>(pr.groups * prm.splits);

  const GatherOrder order = plan.row_order() == RowOrder::RSC ? GatherOrder::Rows : GatherOrder::Columns;
  const auto s = static_cast<cudaStream_t>(stream);
  if (!visit_tile(d.tile, [&](auto tile) { launch<decltype(tile)>(prm, order, grid, s); }))
    throw Error(Status::Internal, "tile: plan names tile " + std::to_string(d.tile) + " that has no instantiation");
}

}  // namespace mconv::detail
