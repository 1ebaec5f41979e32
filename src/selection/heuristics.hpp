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

/// Few filters over many channels (K/G <= 4, C/G >= 16: output heads, an RGB first layer's dgrad
/// phase steps): a GEMM tile would idle all but K/G of its filter lanes.
bool few_filters(const Problem& p);

/// Note [few filters off the tensor cores]: a layer of few filters, larger than 1x1, whose x is in
/// plane order; Auto runs it on direct_block in TF32 math (exact FFMA) and in fp16/bf16 too.
bool few_filters_leave_tensor_cores(const Problem& p, const TensorDesc& x);

}  // namespace mconv::detail
