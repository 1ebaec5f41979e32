// Launcher of the tensor-core implicit-GEMM family: fills the parameters from the Plan and its
// division, picks the vector gather when the pointers allow it, and launches the tile in the plan's
// dtype and math mode.
#include <cstdint>

#include "../common/cuda_check.cuh"
#include "../launch.hpp"
#include "kernel.cuh"
#include "tiles.hpp"

namespace mconv::detail {
namespace {

using cuda::ImplicitMmaParams;

template <class Tile, class Math, bool kVector>
void launch(const ImplicitMmaParams& prm, dim3 grid, cudaStream_t stream) {
  cuda::implicit_mma_kernel<Tile, Math, kVector><<<grid, Tile::kThreads, Tile::kSmemBytes, stream>>>(prm);
  MCONV_CUDA_CHECK(cudaGetLastError());
}

template <class Tile, class Math, bool kVector>
void allow_shared_memory() {
  MCONV_CUDA_CHECK(cudaFuncSetAttribute(cuda::implicit_mma_kernel<Tile, Math, kVector>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, Tile::kSmemBytes));
}

/// Calls f(Math{}) for the plan's element type and math mode.
template <class F>
void visit_math(const Plan& plan, F&& f) {
  switch (plan.dtype()) {
    case DType::Float16:
      return f(cuda::MmaFp16{});
    case DType::BFloat16:
      return f(cuda::MmaBf16{});
    case DType::Float32:
      if (plan.math() == MathMode::TF32) return f(cuda::MmaTf32{});
      break;
  }
  throw Error(Status::Internal, "implicit_mma: a plan in fp32 exact math reached the tensor-core launcher");
}

}  // namespace

void implicit_mma_prepare(const Plan& plan, const ImplicitMmaDivision& d) {
  visit_math(plan, [&](auto math) {
    using Math = decltype(math);
    auto allow = [&](auto tile) {
      using Tile = decltype(tile);
      allow_shared_memory<Tile, Math, true>();
      if constexpr (Tile::kElementGather) allow_shared_memory<Tile, Math, false>();
    };
    visit_mma_tile(kElementFallbackTile, allow);  // for calls whose pointers the vector gather cannot take
    if (!visit_mma_tile(d.tile, allow))
      throw Error(Status::Internal,
                  "tile: plan names implicit_mma tile " + std::to_string(d.tile) + " that has no instantiation");
  });
}

void implicit_mma_forward(const Plan& plan, const ImplicitMmaDivision& d, const void* x, const void* w, void* y,
                          const Epilogue& e, void* stream) {
  const auto& out = plan.output_rule();
  ImplicitMmaParams prm{};
  static_cast<cuda::ImplicitGemmGeometry&>(prm) = cuda::implicit_gemm_geometry(plan, e, "implicit_mma");
  prm.x = x;
  prm.w = w;
  prm.y = y;
  // Filters 2t and 2t+1 adjacent, and every pair's first element aligned to two elements.
  const int esz = dtype_size(plan.dtype());
  prm.pair_store = out.stride_k == 1 && reinterpret_cast<uintptr_t>(y) % (2 * esz) == 0 && out.stride_n % 2 == 0 &&
                   out.stride_p % 2 == 0 && out.stride_q % 2 == 0 && prm.y_group % 2 == 0;
  // Note [mma staged epilogue]: whole 16-byte runs of filters, each starting 16-byte aligned.
  const int run = 16 / esz;
  prm.staged_store = out.stride_k == 1 && reinterpret_cast<uintptr_t>(y) % 16 == 0 && out.stride_n % run == 0 &&
                     out.stride_p % run == 0 && out.stride_q % run == 0 && prm.y_group % run == 0;
  // Note [mma vector gather]: the division says the strides allow it; the pointers must too.
  const bool vector =
      d.vector_gather && reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0;
  const auto s = static_cast<cudaStream_t>(stream);
  // A tile without the element form hands a call it cannot gather to the fallback tile, on its grid.
  const bool fallback = !vector && !kMmaTileCatalog[d.tile].element_gather;
  const int tile_index = fallback ? kElementFallbackTile : d.tile;
  dim3 grid = cuda::grid_of(d.launch);
  if (fallback) {
    const MmaTileShape& f = kMmaTileCatalog[kElementFallbackTile];
    grid.x = static_cast<unsigned>(ceil_div(prm.npq, f.block_m));
    grid.y = static_cast<unsigned>(ceil_div(prm.kg, f.block_n));
  }
  visit_math(plan, [&](auto math) {
    using Math = decltype(math);
    if (!visit_mma_tile(tile_index, [&](auto tile) {
          using Tile = decltype(tile);
          if constexpr (Tile::kElementGather) {
            if (!vector) return launch<Tile, Math, false>(prm, grid, s);
          }
          launch<Tile, Math, true>(prm, grid, s);
        }))
      throw Error(Status::Internal,
                  "tile: plan names implicit_mma tile " + std::to_string(d.tile) + " that has no instantiation");
  });
}

}  // namespace mconv::detail
