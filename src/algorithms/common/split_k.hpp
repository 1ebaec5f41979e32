// Split-K without workspace, host side (Note [split-k without workspace] in
// implicit_precomp/kernel.cuh): the families that sum channel slices into y with atomics share its
// pre-pass (output_prepass_kernel.cuh), y = beta*y + bias, run first.
#pragma once

#include <algorithm>
#include <cstdint>

#include "mconv/hardware.hpp"

namespace mconv::detail {

/// Blocks of the pre-pass over `outputs` elements of y: a grid-stride loop of 256-thread blocks,
/// 16 per SM (twice an SM's threads), fewer where y is small.
inline int split_prepass_blocks(int64_t outputs, const HardwareModel& hw) {
  return static_cast<int>(std::min<int64_t>((outputs + 255) / 256, int64_t(std::max(hw.sm_count, 1)) * 16));
}

}  // namespace mconv::detail
