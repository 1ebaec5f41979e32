// The implicit-GEMM planner (host side): tile and split-K for a problem on a device.
#pragma once

#include <string>
#include <vector>

#include "mconv/division.hpp"
#include "mconv/hardware.hpp"
#include "mconv/problem.hpp"

namespace mconv::detail {

/// The division of the implicit GEMM over `rows` = C/G*R*S rows; `rows_gather`: the plan gathers
/// along rows (channels innermost, RowOrder::RSC). A non-empty `forced_tile` or `forced_split_k` > 0
/// overrides the choice; `deterministic` splits only in rank order inside a cluster (Note [ordered
/// split-k]). Appends one line per decision to `why`.
ImplicitPrecompDivision plan_implicit_precomp(const Problem& p, int64_t rows, bool rows_gather, const HardwareModel& hw,
                                              const std::string& forced_tile, int forced_split_k, bool deterministic,
                                              std::vector<std::string>& why);

/// Note [ordered split-k]: the slices of a deterministic split, the blocks of one cluster (Hopper's
/// non-portable 16; the launcher lowers it to 8 where the device cannot schedule 16).
inline constexpr int kMaxOrderedSplit = 16;

}  // namespace mconv::detail
