// Planner of depthwise_wgrad (Note [depthwise wgrad] in kernel.cuh): which wgrad steps it runs and
// how their reduction is divided among filter chunks, cluster blocks and atomic slices.
#pragma once

#include <string>
#include <vector>

#include "../common/wgrad_layer.hpp"
#include "mconv/division.hpp"
#include "mconv/hardware.hpp"
#include "mconv/plan.hpp"

namespace mconv::detail {

/// The square filter size of the register-window kernel for runs down a column (`down`) or along a
/// row, 0 where only the tap-chunk kernel runs the step.
int depthwise_wgrad_window(const Problem& step, bool down);

/// Why depthwise_wgrad cannot run this step ("" when it can). `step` is a wgrad step in the form of
/// decompose_backward_filter (batch 1; its images are the step's channels, its taps the outputs), x,
/// w (dy) and y (dw) its views. Any group strides run.
std::string depthwise_wgrad_unsupported(const Problem& step, const TensorDesc& x, const TensorDesc& w,
                                        const TensorDesc& y);

DepthwiseWgradDivision plan_depthwise_wgrad(const Problem& step, const TensorDesc& x, const TensorDesc& w,
                                            const GroupStrides& groups, const HardwareModel& hw, bool deterministic,
                                            std::vector<std::string>& why);

}  // namespace mconv::detail
