// The planner's choices (algorithm, tile), each with its reason. One file, so every heuristic and
// its evidence can be read in one place.
#pragma once

#include <string>
#include <vector>

#include "mconv/plan.hpp"
#include "tile_catalog.hpp"

namespace mconv::detail {

struct DeviceSummary {
  int sm_count = 0;  // 0: unknown (no device)
};

/// The device the CUDA planner plans for; defined by the CUDA runtime (engine), 0 SMs without CUDA.
DeviceSummary current_device_summary();

/// Tile for the implicit-GEMM kernel; appends its reason to `why`.
const TileShape& choose_implicit_precomp_tile(const Problem& p, const DeviceSummary& dev,
                                              std::vector<std::string>& why);

/// Row slices for split-K (Note [split-k without workspace]); 1 when the grid already fills the GPU.
int choose_split_k(const Problem& p, const TileShape& tile, const DeviceSummary& dev, std::vector<std::string>& why);

}  // namespace mconv::detail
