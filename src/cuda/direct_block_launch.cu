// Launcher of the direct-block kernel family: parameters from the Plan, the shared-memory opt-in,
// the instantiation for the plan's shape and filter size (1, 3, 5, 7 square, else generic), and the
// launch check.
#include <algorithm>
#include <cstdint>
#include <string_view>

#include "../plan/heuristics.hpp"
#include "cuda_backend.hpp"
#include "cuda_check.cuh"
#include "direct_block_kernel.cuh"
#include "filter_size_switch.cuh"

namespace mconv::detail::cuda_backend {
namespace {

using cuda::DirectBlockParams;
using cuda::DirectBlockShape;

template <int TX, int TY, int RH, int RW, int KF, int GB>
constexpr bool matches_catalog(std::string_view name) {
  for (const auto& d : kDirectCatalog)
    if (d.name == name)
      return d.threads_x == TX && d.threads_y == TY && d.reg_rows == RH && d.reg_cols == RW && d.filters == KF &&
             d.groups_per_block == GB;
  return false;
}

template <class Shape>
void launch(const DirectBlockParams& prm, dim3 grid, int smem, cudaStream_t stream) {
  cuda::launch_with_smem(cuda::direct_block_kernel<Shape>, grid, Shape::kThreads, smem, stream, prm);
}

// Static switch over the filter size: 1, 3, 5, 7 square get unrolled kernels, others the generic one.
template <int TX, int TY, int RH, int RW, int KF, int GB>
void launch_sized(const DirectBlockParams& prm, dim3 grid, int smem, cudaStream_t stream) {
  cuda::filter_size_switch(prm.R, prm.S, [&](auto k) {
    constexpr int K = decltype(k)::value;
    launch<DirectBlockShape<K, K, KF, TX, TY, RH, RW, GB>>(prm, grid, smem, stream);
  });
}

static_assert(matches_catalog<32, 8, 2, 2, 1, 1>("direct_32x8_r2x2_f1"), "catalog and instantiation disagree");
static_assert(matches_catalog<16, 8, 1, 1, 1, 1>("direct_16x8_r1x1_f1"), "catalog and instantiation disagree");
static_assert(matches_catalog<32, 8, 2, 2, 4, 1>("direct_32x8_r2x2_f4"), "catalog and instantiation disagree");
static_assert(matches_catalog<8, 8, 1, 1, 1, 4>("direct_8x8_r1x1_f1_g4"), "catalog and instantiation disagree");
static_assert(matches_catalog<16, 8, 2, 1, 1, 2>("direct_16x8_r2x1_f1_g2"), "catalog and instantiation disagree");

}  // namespace

void direct_block_forward(const Plan& plan, const float* x, const float* w, float* y, const Epilogue& e, void* stream) {
  const Problem& pr = plan.problem();
  const DirectShape* shape = find_direct_shape(plan.tile().name);
  if (!shape)
    throw Error(Status::Internal, "tile: plan names direct shape '" + plan.tile().name + "' that has no instantiation");
  DirectBlockParams prm{cuda::conv_geometry(plan, x, w, y, e)};
  prm.filter_slices = (prm.kg + shape->filters - 1) / shape->filters;
  prm.tiles_x = (prm.Q + shape->out_cols() - 1) / shape->out_cols();
  const int tiles_y = (prm.P + shape->out_rows() - 1) / shape->out_rows();
  prm.tile_rows = static_cast<int>(direct_tile_rows(pr, *shape));
  prm.tile_cols = static_cast<int>(direct_tile_cols(pr, *shape));
  prm.pitch = static_cast<int>(direct_tile_pitch(pr, *shape));
  // Note [vector halo]: preconditions for 16-byte copies.
  prm.vec4 = cuda::x_rows_float4_aligned(plan, x);
  const long long blocks_x = static_cast<long long>(tiles_y) * prm.tiles_x;
  prm.slots = static_cast<int>(pr.groups * prm.filter_slices);
  const long long blocks_z = (prm.slots + shape->groups_per_block - 1) / shape->groups_per_block;
  if (blocks_x > 0x7fffffffLL || blocks_z > 65535)
    throw Error(Status::Unsupported, "groups: direct_block grid exceeds the launch limits");
  // Note [direct pipeline]: give each block several images so its loads overlap its FMAs, while
  // keeping enough blocks for a full SM (2048 threads) on each of the 132 SMs (H100), and the same
  // number of images in every block row.
  const long long per_image = blocks_x * blocks_z;
  const long long target_blocks = 132LL * (2048 / (shape->threads_x * shape->threads_y * shape->groups_per_block));
  const long long ipb0 = std::clamp<long long>(per_image * pr.n / target_blocks, 1, pr.n);
  const long long blocks_y = (pr.n + ipb0 - 1) / ipb0;
  prm.images_per_block = static_cast<int>((pr.n + blocks_y - 1) / blocks_y);
  const dim3 grid(static_cast<unsigned>(blocks_x), static_cast<unsigned>(blocks_y), static_cast<unsigned>(blocks_z));
  const int smem = static_cast<int>(direct_smem_bytes(pr, *shape));
  const auto s = static_cast<cudaStream_t>(stream);
  const std::string& name = plan.tile().name;
  if (name == "direct_32x8_r2x2_f1")
    launch_sized<32, 8, 2, 2, 1, 1>(prm, grid, smem, s);
  else if (name == "direct_16x8_r1x1_f1")
    launch_sized<16, 8, 1, 1, 1, 1>(prm, grid, smem, s);
  else if (name == "direct_32x8_r2x2_f4")
    launch_sized<32, 8, 2, 2, 4, 1>(prm, grid, smem, s);
  else if (name == "direct_8x8_r1x1_f1_g4")
    launch_sized<8, 8, 1, 1, 1, 4>(prm, grid, smem, s);
  else if (name == "direct_16x8_r2x1_f1_g2")
    launch_sized<16, 8, 2, 1, 1, 2>(prm, grid, smem, s);
  else
    throw Error(Status::Internal, "tile: no instantiation for direct shape '" + name + "'");
}

}  // namespace mconv::detail::cuda_backend
