// The planner's choices (algorithm, tile), each with its reason. One file, so every heuristic and
// its evidence can be read in one place.
#pragma once

#include <string>
#include <vector>

#include "mconv/hardware.hpp"
#include "mconv/plan.hpp"
#include "tile_catalog.hpp"

namespace mconv::detail {

struct DeviceSummary {
  int sm_count = 0;              // 0: unknown (no device)
  int smem_per_block_optin = 0;  // bytes a block may opt in to; 0: unknown
};

/// The device the CUDA planner plans for; defined by the CUDA runtime (engine), 0 SMs without CUDA.
DeviceSummary current_device_summary();
/// The hardware model the planners use: the current device's (measured once, cached), or an H100's
/// when no GPU is visible (so plans can be inspected anywhere); the latter adds a line to `why`.
HardwareModel planning_hardware_model(std::vector<std::string>& why);

/// Tile for the implicit-GEMM kernel; appends its reason to `why`.
/// `rows_gather`: the plan gathers along rows (channels innermost, RowOrder::RSC).
const TileShape& choose_implicit_precomp_tile(const Problem& p, const DeviceSummary& dev, bool rows_gather,
                                              std::vector<std::string>& why);

/// The algorithm Auto runs, with its reason appended to `why`.
Algorithm choose_algorithm(const Problem& p, const TensorDesc& x, std::vector<std::string>& why);

/// Shape of the direct-block kernel for `p`; throws Unsupported when its tile cannot fit shared memory.
const DirectShape& choose_direct_shape(const Problem& p, const DeviceSummary& dev, std::vector<std::string>& why);

/// Input rows and columns (with halo) of one direct-block tile (Note [halo sub-blocks]).
inline int64_t direct_tile_rows(const Problem& p, const DirectShape& d) {
  return (d.out_rows() - 1) * p.stride_h + (p.r - 1) * p.dil_h + 1;
}
inline int64_t direct_tile_cols(const Problem& p, const DirectShape& d) {
  return (d.out_cols() - 1) * p.stride_w + (p.s - 1) * p.dil_w + 1;
}
/// Shared-memory row pitch: the tile plus up to 3 columns of left shift for 16-byte copies
/// (Note [vector halo]), rounded up to whole float4s.
inline int64_t direct_tile_pitch(const Problem& p, const DirectShape& d) {
  return (direct_tile_cols(p, d) + 3 + 3) / 4 * 4;
}
inline int64_t direct_smem_bytes(const Problem& p, const DirectShape& d) {
  return int64_t(d.groups_per_block) * 2 * 4 *  // double-buffered, per packed group
         (direct_tile_rows(p, d) * direct_tile_pitch(p, d) + d.filters * p.r * p.s);
}

/// Row slices for split-K (Note [split-k without workspace]); 1 when the grid already fills the GPU.
int choose_split_k(const Problem& p, const TileShape& tile, const DeviceSummary& dev, std::vector<std::string>& why);

}  // namespace mconv::detail
