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
  const auto& sr = plan.start_rule();
  const auto& out = plan.output_rule();
  ImplicitPrecompParams prm{};
  prm.x = x;
  prm.w = w;
  prm.y = y;
  prm.table = static_cast<const int4*>(plan.device_table());
  if (!prm.table)
    throw Error(Status::BadParam,
                "plan: implicit_precomp needs the plan's device table (make the plan with Engine::plan)");
  prm.bias = e.bias;
  prm.x_group = plan.group_strides().x;
  prm.w_group = plan.group_strides().w;
  prm.y_group = plan.group_strides().y;
  prm.x_sn = sr.stride_n;
  prm.x_sh = sr.stride_h;
  prm.x_sw = sr.stride_w;
  prm.w_sk = plan.w_desc().strides[0];
  prm.y_sn = out.stride_n;
  prm.y_sk = out.stride_k;
  prm.y_sp = out.stride_p;
  prm.y_sq = out.stride_q;
  prm.npq = static_cast<int>(pr.n * pr.p() * pr.q());  // < 2^31: Problem::validate
  prm.pq = static_cast<int>(pr.p() * pr.q());
  prm.q = static_cast<int>(pr.q());
  prm.kg = static_cast<int>(pr.k_per_group());
  prm.rows = static_cast<int>(plan.rows());
  prm.H = static_cast<int>(pr.h);
  prm.W = static_cast<int>(pr.w);
  prm.stride_h = static_cast<int>(pr.stride_h);
  prm.stride_w = static_cast<int>(pr.stride_w);
  prm.pad_h = static_cast<int>(pr.pad_h);
  prm.pad_w = static_cast<int>(pr.pad_w);
  prm.alpha = e.alpha;
  prm.beta = e.beta;
  prm.relu = e.activation == Activation::ReLU ? 1 : 0;
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
