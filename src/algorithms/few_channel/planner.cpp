// Planner of few_channel (Note [few-channel forward]).
#include "planner.hpp"

#include <algorithm>
#include <cstdint>

#include "../common/host_math.hpp"
#include "../common/smem_budget.hpp"
#include "../common/x_window.hpp"

namespace mconv::detail {
namespace {

constexpr int64_t kBlockPixels = 512;     // output pixels of a block, at most: 32 MMA row steps, 4 a warp
constexpr int64_t kMaxTileColumns = 128;  // output columns of a block, at most
constexpr int64_t kBlocksPerSm = 2;       // resident blocks an SM: one loads while the other multiplies

int64_t columns_of(const Problem& p) {
  return round_up(p.c * p.r * p.s, int64_t(16));
}

}  // namespace

int64_t few_channel_smem_bytes(const Problem& p, int64_t tile_p, int64_t tile_q, int64_t element_bytes) {
  const int64_t columns = columns_of(p);
  const XWindowExtent window = x_window_extent(tile_p, tile_q, p.c, p.r, p.s, p.stride_h, p.stride_w, p.dil_h, p.dil_w);
  return kFewChannelFilters * few_channel_filter_pitch(columns, element_bytes) + columns * 4 +
         2 * window.bytes(element_bytes) +
         (element_bytes == 2 ? kFewChannelThreads / 32 * 32 * kFewChannelStagingPitch : 0);
}

std::string few_channel_unsupported(const Problem& p, const TensorDesc& x, const TensorDesc& w, const TensorDesc& y) {
  if (x.dtype != DType::Float16 && x.dtype != DType::BFloat16 && x.dtype != DType::Float32)
    return "fp16, bf16 and fp32 in TF32 math only (its MMA is mma.sync's)";
  if (w.dtype != x.dtype || y.dtype != x.dtype) return "x, w and y of one dtype";
  if (p.groups != 1) return "groups (one group only)";
  if (p.c > kFewChannelMaxChannels) return "more than " + std::to_string(kFewChannelMaxChannels) + " input channels";
  if (p.c * p.r * p.s > kFewChannelMaxColumns)
    return "C * R * S above " + std::to_string(kFewChannelMaxColumns) + " (the filter rows fill shared memory)";
  if (few_channel_smem_bytes(p, 1, 16, dtype_size(x.dtype)) > 227 * 1024)
    return "the x window of 16 output pixels exceeds a block's shared memory (stride or dilation too large)";
  if (ceil_div(p.k, int64_t(kFewChannelFilters)) > 65535) return "more than 65535 blocks of 64 filters (the grid's y)";
  if (p.n * p.p() * ceil_div(p.q(), int64_t(16)) >= (int64_t(1) << 31))
    return "N * P * Q / 16 is 2^31 or more (32-bit block indices)";
  return "";
}

FewChannelDivision plan_few_channel(const Problem& p, int64_t element_bytes, const HardwareModel& hw,
                                    std::vector<std::string>& why) {
  FewChannelDivision d;
  const int64_t pp = p.p(), qq = p.q();
  d.columns = static_cast<int>(columns_of(p));
  // Whole rows of up to 128 output pixels, as many rows as make 512 pixels; fewer while two blocks'
  // shared memory exceeds an SM's, or while the grid would not give every SM two blocks.
  int64_t tile_q = std::min(round_up(qq, int64_t(16)), kMaxTileColumns);
  int64_t tile_p = std::clamp(kBlockPixels / tile_q, int64_t(1), pp);
  const int64_t limit = smem_per_resident_block(hw, kBlocksPerSm);
  while (few_channel_smem_bytes(p, tile_p, tile_q, element_bytes) > limit && (tile_p > 1 || tile_q > 16))
    if (tile_p > 1)
      --tile_p;
    else
      tile_q -= 16;
  const int64_t filter_blocks = ceil_div(p.k, int64_t(kFewChannelFilters));
  const auto blocks = [&](int64_t tp) { return p.n * ceil_div(pp, tp) * ceil_div(qq, tile_q) * filter_blocks; };
  const int64_t fill = kBlocksPerSm * std::max(hw.sm_count, 1);
  while (tile_p > 1 && blocks(tile_p) < fill) tile_p = ceil_div(tile_p, 2);
  d.tile_p = static_cast<int>(tile_p);
  d.tile_q = static_cast<int>(tile_q);
  d.smem_bytes = few_channel_smem_bytes(p, tile_p, tile_q, element_bytes);
  // Persistent blocks, two an SM, each taking every grid_x-th tile: the filter rows load once a
  // block, and a tile's window loads while the one before it is multiplied.
  const int64_t tiles = p.n * ceil_div(pp, tile_p) * ceil_div(qq, tile_q);
  d.launch.grid_x = std::min(tiles, std::max<int64_t>(1, ceil_div(fill, filter_blocks)));
  d.launch.grid_y = filter_blocks;
  d.launch.grid_z = 1;
  d.launch.threads = kFewChannelThreads;
  d.launch.smem_bytes = d.smem_bytes;
  why.push_back("few_channel: blocks of " + std::to_string(tile_p) + " x " + std::to_string(tile_q) +
                " output pixels x 64 filters multiplied out of their x window, " + std::to_string(p.c * p.r * p.s) +
                " columns padded to " + std::to_string(d.columns) + ", " + std::to_string(d.launch.grid_x) + " x " +
                std::to_string(filter_blocks) + " blocks");
  return d;
}

}  // namespace mconv::detail
