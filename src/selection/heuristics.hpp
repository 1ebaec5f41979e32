// The choice of algorithm, with its measured evidence (heuristics.cpp). Each family's own choices
// (tiles, shapes, divisions) are in its planner under src/algorithms/<family>/.
#pragma once

#include <string>
#include <vector>

#include "mconv/hardware.hpp"
#include "mconv/plan.hpp"

namespace mconv::detail {

/// The algorithm Auto runs on the CUDA target for `p` with input `x` on `hw`; its reason is
/// appended to `why`.
Algorithm choose_algorithm(const Problem& p, const TensorDesc& x, const HardwareModel& hw,
                           std::vector<std::string>& why);

}  // namespace mconv::detail
