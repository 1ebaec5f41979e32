// Launcher of the implicit-GEMM kernel family: fills the parameters from the Plan, checks the
// preconditions, picks the instantiation for the plan's tile and gather order, checks the launch.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string_view>

#include "../plan/tile_catalog.hpp"
#include "cuda_backend.hpp"
#include "cuda_check.cuh"
#include "implicit_precomp_kernel.cuh"

namespace mconv::detail::cuda_backend {
namespace {

using cuda::GatherOrder;
using cuda::ImplicitPrecompParams;
using cuda::ImplicitPrecompTile;

template <class Tile>
constexpr bool matches_catalog(std::string_view name) {
  for (const auto& t : kTileCatalog)
    if (t.name == name)
      return t.block_m == Tile::kBlockM && t.block_n == Tile::kBlockN && t.block_k == Tile::kBlockK &&
             t.thread_m == Tile::kThreadM && t.thread_n == Tile::kThreadN && t.stages == Tile::kStages;
  return false;
}

template <class Tile>
void launch(ImplicitPrecompParams prm, GatherOrder order, int groups, cudaStream_t stream) {
  const int k_tiles = (prm.rows + Tile::kBlockK - 1) / Tile::kBlockK;
  prm.k_tiles_per_split = (k_tiles + prm.splits - 1) / prm.splits;
  prm.splits = (k_tiles + prm.k_tiles_per_split - 1) / prm.k_tiles_per_split;  // no empty slice
  const dim3 grid((prm.npq + Tile::kBlockM - 1) / Tile::kBlockM, (prm.kg + Tile::kBlockN - 1) / Tile::kBlockN,
                  groups * prm.splits);
  if (grid.y > 65535 || grid.z > 65535)
    throw Error(Status::Unsupported, "k/groups: too many filter tiles or groups x split_k slices for one launch");
  if (order == GatherOrder::Columns)
    cuda::implicit_precomp_kernel<Tile, GatherOrder::Columns><<<grid, Tile::kThreads, 0, stream>>>(prm);
  else
    cuda::implicit_precomp_kernel<Tile, GatherOrder::Rows><<<grid, Tile::kThreads, 0, stream>>>(prm);
  MCONV_CUDA_CHECK(cudaGetLastError());
}

using Tile128x128 = ImplicitPrecompTile<128, 128, 8, 8, 8, 3>;
using Tile128x64 = ImplicitPrecompTile<128, 64, 8, 8, 4, 3>;
using Tile64x64 = ImplicitPrecompTile<64, 64, 8, 4, 4, 3>;
using Tile128x32 = ImplicitPrecompTile<128, 32, 8, 4, 4, 3>;
using Tile64x32 = ImplicitPrecompTile<64, 32, 8, 4, 4, 3>;
using Tile128x128k16 = ImplicitPrecompTile<128, 128, 16, 8, 8, 2>;
using Tile128x64k16 = ImplicitPrecompTile<128, 64, 16, 8, 4, 2>;
static_assert(matches_catalog<Tile128x128>("128x128x8"), "catalog and instantiation disagree");
static_assert(matches_catalog<Tile128x64>("128x64x8"), "catalog and instantiation disagree");
static_assert(matches_catalog<Tile64x64>("64x64x8"), "catalog and instantiation disagree");
static_assert(matches_catalog<Tile128x32>("128x32x8"), "catalog and instantiation disagree");
static_assert(matches_catalog<Tile64x32>("64x32x8"), "catalog and instantiation disagree");
static_assert(matches_catalog<Tile128x128k16>("128x128x16"), "catalog and instantiation disagree");
static_assert(matches_catalog<Tile128x64k16>("128x64x16"), "catalog and instantiation disagree");

}  // namespace

void implicit_precomp_forward(const Plan& plan, const void* table, const float* x, const float* w, float* y,
                              const Epilogue& e, void* stream) {
  const Problem& pr = plan.problem();
  const auto& sr = plan.start_rule();
  const auto& out = plan.output_rule();
  ImplicitPrecompParams prm{};
  prm.x = x;
  prm.w = w;
  prm.y = y;
  prm.table = static_cast<const int4*>(table);
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
  prm.alpha = pr.alpha;
  prm.beta = pr.beta;
  prm.relu = e.relu ? 1 : 0;
  // Note [vector epilogue]: contiguous pixels, whole float4 groups that never straddle a row, and
  // every group start 16-byte aligned (pointer and the n, k, group strides multiples of 4).
  prm.vector_store = out.stride_q == 1 && out.stride_p == pr.q() && pr.q() % 4 == 0 &&
                     reinterpret_cast<uintptr_t>(y) % 16 == 0 && out.stride_n % 4 == 0 && out.stride_k % 4 == 0 &&
                     prm.y_group % 4 == 0;

  // Note [split-k without workspace]: ReLU needs the whole sum, so it runs unsplit.
  prm.splits = e.relu ? 1 : plan.tile().split_k;
  if (prm.splits > 1) output_prepass(plan, y, e, stream);

  const GatherOrder order = plan.row_order() == RowOrder::RSC ? GatherOrder::Rows : GatherOrder::Columns;
  const auto s = static_cast<cudaStream_t>(stream);
  const int g = static_cast<int>(pr.groups);
  const std::string& tile = plan.tile().name;
  if (tile == "128x128x8")
    launch<Tile128x128>(prm, order, g, s);
  else if (tile == "128x64x8")
    launch<Tile128x64>(prm, order, g, s);
  else if (tile == "64x64x8")
    launch<Tile64x64>(prm, order, g, s);
  else if (tile == "128x32x8")
    launch<Tile128x32>(prm, order, g, s);
  else if (tile == "64x32x8")
    launch<Tile64x32>(prm, order, g, s);
  else if (tile == "128x128x16")
    launch<Tile128x128k16>(prm, order, g, s);
  else if (tile == "128x64x16")
    launch<Tile128x64k16>(prm, order, g, s);
  else
    throw Error(Status::Internal, "tile: plan names tile '" + tile + "' that has no instantiation");
}

}  // namespace mconv::detail::cuda_backend
