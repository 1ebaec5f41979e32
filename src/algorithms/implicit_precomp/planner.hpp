// The implicit-GEMM planner (host side): tile and split-K for a problem on a device.
#pragma once

#include <string>
#include <vector>

#include "mconv/division.hpp"
#include "mconv/hardware.hpp"
#include "mconv/problem.hpp"

namespace mconv::detail {

/// How the operands lie, as far as the tile choice depends on it.
struct PrecompOperands {
  bool rows_gather = false;         // the plan gathers along rows (channels innermost, RowOrder::RSC)
  bool filters_contiguous = false;  // w's filter stride is 1 (a 1x1 layer's dgrad step reads w transposed)
};

/// The division of the implicit GEMM over `rows` = C/G*R*S rows. A non-empty `forced_tile` or
/// `forced_split_k` > 0 overrides the choice; `deterministic` splits only in rank order inside a
/// cluster (Note [ordered split-k]). Appends one line per decision to `why`.
ImplicitPrecompDivision plan_implicit_precomp(const Problem& p, int64_t rows, PrecompOperands operands,
                                              const HardwareModel& hw, const std::string& forced_tile,
                                              int forced_split_k, bool deterministic, std::vector<std::string>& why);

/// Note [ordered split-k]: the slices of a deterministic split, the blocks of one cluster (Hopper's
/// non-portable 16; the launcher lowers it to 8 where the device cannot schedule 16).
inline constexpr int kMaxOrderedSplit = 16;

}  // namespace mconv::detail
