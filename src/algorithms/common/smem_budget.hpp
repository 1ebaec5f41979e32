// The shared memory a family's planner may give one block, from the hardware model.
#pragma once

#include <algorithm>
#include <cstdint>

#include "mconv/hardware.hpp"

namespace mconv::detail {

/// A block's most shared memory (the per-block opt-in; 227 KB, the H100's, where the model has none).
inline int64_t smem_block_limit(const HardwareModel& hw) {
  return hw.smem_per_block_optin > 0 ? hw.smem_per_block_optin : 227 * 1024;
}

/// A block's shared memory where `blocks` of them share an SM: the SM's share less the runtime's
/// reserve (228 KB an SM where the model has none), at most smem_block_limit.
inline int64_t smem_per_resident_block(const HardwareModel& hw, int64_t blocks) {
  const int64_t per_sm = hw.smem_per_sm > 0 ? hw.smem_per_sm : 228 * 1024;
  return std::clamp<int64_t>(per_sm / blocks - kRuntimeSmemPerBlock, 0, smem_block_limit(hw));
}

}  // namespace mconv::detail
