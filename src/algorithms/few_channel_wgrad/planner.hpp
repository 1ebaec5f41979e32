// Planner of few_channel_wgrad (Note [few-channel wgrad] in kernel.cuh): which wgrad steps it runs,
// the output pixels of an item, the columns of a block, and how the items are divided among cluster
// blocks and atomic slices.
#pragma once

#include <string>
#include <vector>

#include "../common/wgrad_layer.hpp"
#include "../common/x_window.hpp"
#include "mconv/division.hpp"
#include "mconv/hardware.hpp"
#include "mconv/plan.hpp"

namespace mconv::detail {

/// The kernel's shape (kernel.cuh): two halves of 8 warps a block, 64 filters a block, each dy pixel's
/// 64 values in a 144-byte shared row.
inline constexpr int kFewChannelWgradThreads = 512;
inline constexpr int kFewChannelWgradFilters = 64;
inline constexpr int kFewChannelWgradRowBytes = 144;

/// The most input channels few_channel_wgrad takes: past them a window of x costs as much shared
/// memory as the dy rows it serves, and from 8 channels on implicit_mma copies them as vectors.
inline constexpr int64_t kFewChannelWgradMaxChannels = 4;

/// Why few_channel_wgrad cannot run this step ("" when it can). `step` is a wgrad step in the form of
/// decompose_backward_filter; x, w (dy) and y (dw) its views; `group_strides` whether it has them.
std::string few_channel_wgrad_unsupported(const Problem& step, const TensorDesc& x, const TensorDesc& w,
                                          const TensorDesc& y, bool group_strides);

FewChannelWgradDivision plan_few_channel_wgrad(const Problem& step, const HardwareModel& hw, bool deterministic,
                                               std::vector<std::string>& why);

}  // namespace mconv::detail
