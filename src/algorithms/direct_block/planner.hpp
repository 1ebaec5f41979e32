// The direct-block planner (host side).
#pragma once

#include <string>
#include <vector>

#include "mconv/division.hpp"
#include "mconv/hardware.hpp"
#include "mconv/problem.hpp"
#include "shapes.hpp"

namespace mconv::detail {

/// The division of `p` for the direct-block kernel; throws Unsupported when its tile cannot fit
/// shared memory or the grid exceeds the launch limits. Appends its reasons to `why`.
DirectBlockDivision plan_direct_block(const Problem& p, const HardwareModel& hw, std::vector<std::string>& why);

/// Input rows and columns (with halo) of one direct-block tile (Note [halo sub-blocks]).
int64_t direct_tile_rows(const Problem& p, const DirectShape& d);
int64_t direct_tile_cols(const Problem& p, const DirectShape& d);
/// Shared-memory row pitch: the tile plus up to 3 columns of left shift for 16-byte copies
/// (Note [vector halo]), rounded up to whole float4s.
int64_t direct_tile_pitch(const Problem& p, const DirectShape& d);
int64_t direct_smem_bytes(const Problem& p, const DirectShape& d);

}  // namespace mconv::detail
