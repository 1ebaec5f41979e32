// The direct-block planner (host side).
#pragma once

#include <string>
#include <vector>

#include "mconv/division.hpp"
#include "mconv/hardware.hpp"
#include "mconv/problem.hpp"
#include "shapes.hpp"

namespace mconv::detail {

/// The division of `p` for the direct-block kernel with elements of `elem_bytes` (x's dtype: 4 for
/// fp32, 2 for fp16/bf16); throws Unsupported when its tile cannot fit shared memory or the grid
/// exceeds the launch limits. Appends its reasons to `why`.
DirectBlockDivision plan_direct_block(const Problem& p, const HardwareModel& hw, std::vector<std::string>& why,
                                      int elem_bytes = 4);

/// Input rows and columns (with halo) of one direct-block tile (Note [halo sub-blocks]).
int64_t direct_tile_rows(const Problem& p, const DirectShape& d);
int64_t direct_tile_cols(const Problem& p, const DirectShape& d);
/// Shared-memory row pitch in elements: the tile plus up to a 16-byte vector - 1 columns of left
/// shift for 16-byte copies (Note [vector halo]), rounded up to whole vectors.
int64_t direct_tile_pitch(const Problem& p, const DirectShape& d, int elem_bytes = 4);
/// A packed group's shared memory: two tiles in x's dtype, then two fp32 filter slices, each part
/// 16-byte aligned (Note [packed groups]).
int64_t direct_group_smem_bytes(const Problem& p, const DirectShape& d, int elem_bytes = 4);
int64_t direct_smem_bytes(const Problem& p, const DirectShape& d, int elem_bytes = 4);

}  // namespace mconv::detail
