// Planner of few_channel (Note [few-channel forward] in kernel.cuh): which layers it runs and the
// output pixels of a block.
#pragma once

#include <string>
#include <vector>

#include "mconv/division.hpp"
#include "mconv/hardware.hpp"
#include "mconv/plan.hpp"

namespace mconv::detail {

/// The kernel's shape (kernel.cuh): 8 warps, 64 filters a block.
inline constexpr int kFewChannelThreads = 256;
inline constexpr int kFewChannelFilters = 64;

/// The most input channels few_channel takes: from 8 channels on a pixel's channels make a 16-byte
/// vector, which implicit_mma gathers directly.
inline constexpr int64_t kFewChannelMaxChannels = 4;

/// The most columns (C * R * S) a block's filter rows hold: 64 rows of them in shared memory leave
/// room for the window beside them.
inline constexpr int64_t kFewChannelMaxColumns = 640;

/// Shared bytes from one filter row to the next for `columns` (a multiple of 16) of `element_bytes`:
/// 16 bytes past the row, so that the 8 rows an ldmatrix reads start in distinct 16-byte bank groups.
constexpr int64_t few_channel_filter_pitch(int64_t columns, int64_t element_bytes) {
  return columns * element_bytes + 16;
}

/// Shared bytes from one of a warp's staging rows (a pixel's 64 filters) to the next: 16 past the
/// row, so that eight pixels' 4-byte words of one filter pair fall in distinct banks.
inline constexpr int kFewChannelStagingPitch = 144;

/// A block's shared memory for elements of `element_bytes` (2, or 4 for TF32): the 64 filter rows,
/// the column offset table (4 bytes a column), two x windows of tile_p x tile_q output pixels, and
/// (16-bit) each warp's 32 staging rows.
int64_t few_channel_smem_bytes(const Problem& p, int64_t tile_p, int64_t tile_q, int64_t element_bytes);

/// Why few_channel cannot run this forward problem ("" when it can); fp32 tensors run in TF32 math,
/// which the caller checks.
std::string few_channel_unsupported(const Problem& p, const TensorDesc& x, const TensorDesc& w, const TensorDesc& y);

FewChannelDivision plan_few_channel(const Problem& p, int64_t element_bytes, const HardwareModel& hw,
                                    std::vector<std::string>& why);

}  // namespace mconv::detail
