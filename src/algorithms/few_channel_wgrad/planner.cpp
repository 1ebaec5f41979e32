// Planner of few_channel_wgrad (Note [few-channel wgrad]).
#include "planner.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "../common/host_math.hpp"
#include "../common/split_k.hpp"

namespace mconv::detail {
namespace {

constexpr int kMaxClusterSplit = 16;       // Hopper's non-portable cluster (the launcher falls back to 8)
constexpr int kMaxAtomicSlices = 8;        // 16-bit dw rounds once per slice (Note [mma atomic slices])
constexpr int64_t kTilePixels = 256;       // output pixels of an item, at most
constexpr int64_t kMaxTileColumns = 128;   // output columns of an item, at most
constexpr int64_t kMinItemsPerWorker = 2;  // a half block with fewer waits on its loads with nothing to overlap
constexpr int kColumnTiles[] = {5, 2, 1};  // 8-column MMA tiles a warp: the kernel's instantiations

struct ItemTile {
  int64_t tile_p, tile_q, half_bytes;
};

int64_t half_bytes(const WgradLayer& l, int64_t tile_p, int64_t tile_q) {
  return tile_p * tile_q * kFewChannelWgradRowBytes +
         x_window_extent(tile_p, tile_q, l.c, l.r, l.s, l.stride_h, l.stride_w, l.dil_h, l.dil_w).bytes();
}

// The two halves' buffers, then each half's fp32 sums (their own bytes: the halves' accesses then
// never share an address, whatever order they finish in).
int64_t block_smem(int64_t half, int column_tiles) {
  return 2 * half + 2 * int64_t(kFewChannelWgradFilters) * (32 * column_tiles + 4) * 4;
}

// A whole row of output pixels (up to 128) an item and as many rows as make 256 pixels, fewer while
// the two halves' buffers exceed a block's shared memory.
ItemTile item_tile(const WgradLayer& l, const HardwareModel& hw) {
  ItemTile t;
  t.tile_q = std::min(round_up(l.q, int64_t(16)), kMaxTileColumns);
  t.tile_p = std::clamp(kTilePixels / t.tile_q, int64_t(1), l.p);
  const int64_t limit = hw.smem_per_block_optin > 0 ? hw.smem_per_block_optin : 227 * 1024;
  while (block_smem(half_bytes(l, t.tile_p, t.tile_q), 5) > limit && (t.tile_p > 1 || t.tile_q > 16))
    if (t.tile_p > 1)
      --t.tile_p;
    else
      t.tile_q -= 16;
  t.half_bytes = half_bytes(l, t.tile_p, t.tile_q);
  return t;
}

}  // namespace

std::string few_channel_wgrad_unsupported(const Problem& step, const TensorDesc& x, const TensorDesc& w,
                                          const TensorDesc& y, bool group_strides) {
  if (x.dtype != DType::Float16 && x.dtype != DType::BFloat16)
    return "fp16 and bf16 only (its MMA is mma.sync's m16n8k16)";
  if (w.dtype != x.dtype || y.dtype != x.dtype) return "x, dy and dw of one dtype";
  if (step.mode == Mode::Convolution) return "flipped filters (true convolution)";
  if (step.groups != 1 || group_strides) return "groups (one group only)";
  const WgradLayer l(step);
  if (l.c > kFewChannelWgradMaxChannels)
    return "more than " + std::to_string(kFewChannelWgradMaxChannels) + " input channels";
  if (w.strides[0] != 1) return "dy's filters not adjacent (channels-last dy)";
  const int64_t items = l.n * l.p * ceil_div(l.q, int64_t(16));
  if (items >= (int64_t(1) << 31)) return "N * P * Q / 16 is 2^31 or more (32-bit item indices)";
  const int64_t limit = 227 * 1024;
  if (block_smem(half_bytes(l, 1, 16), 5) > limit)
    return "the x window of 16 output pixels exceeds a block's shared memory (stride or dilation too large)";
  const int64_t crs = l.c * l.r * l.s;
  if (crs * l.k >= (int64_t(1) << 31)) return "K * C * R * S is 2^31 or more";
  return "";
}

FewChannelWgradDivision plan_few_channel_wgrad(const Problem& step, const HardwareModel& hw, bool deterministic,
                                               std::vector<std::string>& why) {
  const WgradLayer l(step);
  FewChannelWgradDivision d;
  const ItemTile t = item_tile(l, hw);
  d.tile_p = static_cast<int>(t.tile_p);
  d.tile_q = static_cast<int>(t.tile_q);
  d.half_bytes = t.half_bytes;
  d.items = l.n * ceil_div(l.p, t.tile_p) * ceil_div(l.q, t.tile_q);
  const int64_t crs = l.c * l.r * l.s;
  const int64_t filter_blocks = ceil_div(l.k, int64_t(kFewChannelWgradFilters));
  const int64_t sms = std::max(hw.sm_count, 1);
  const int64_t most = std::max<int64_t>(1, d.items / (2 * kMinItemsPerWorker));  // blocks that keep both halves fed
  const int64_t max_slices = deterministic ? 1 : kMaxAtomicSlices;
  // The widest block (the fewest loads of each item) whose grid still fills 7/8 of the SMs; else
  // the one of the most blocks. Columns past C*R*S are MMA work thrown away: a width that pads the
  // columns to more than 5/4 of what the narrowest pads them to is skipped.
  const auto padded = [crs](int nc) { return round_up(crs, int64_t(32 * nc)); };
  int best = 0;
  int64_t best_blocks = -1;
  for (int nc : kColumnTiles) {
    if (padded(nc) * 4 > padded(1) * 5) continue;
    const int64_t column_blocks = ceil_div(crs, int64_t(32 * nc));
    const int64_t blocks = column_blocks * filter_blocks * std::min<int64_t>(kMaxClusterSplit * max_slices, most);
    if (blocks * 8 >= sms * 7) {
      best = nc;
      break;
    }
    if (blocks > best_blocks) best = nc, best_blocks = blocks;
  }
  d.column_tiles = best;
  const int64_t base = ceil_div(crs, int64_t(32 * best)) * filter_blocks;
  d.cluster_split =
      static_cast<int>(std::clamp<int64_t>(ceil_div(sms, base), 1, std::min<int64_t>(kMaxClusterSplit, most)));
  d.atomic_slices = static_cast<int>(std::clamp<int64_t>(
      sms / (base * d.cluster_split), 1, std::max<int64_t>(1, std::min(max_slices, most / d.cluster_split))));
  if (d.atomic_slices > 1) d.prepass_blocks = split_prepass_blocks(l.k * crs, hw);
  d.launch.grid_x = ceil_div(crs, int64_t(32 * best));
  d.launch.grid_y = filter_blocks;
  d.launch.grid_z = int64_t(d.atomic_slices) * d.cluster_split;
  d.launch.threads = kFewChannelWgradThreads;
  d.launch.smem_bytes = block_smem(d.half_bytes, best);
  why.push_back("few_channel_wgrad: items of " + std::to_string(d.tile_p) + " x " + std::to_string(d.tile_q) +
                " output pixels and their x window, " + std::to_string(32 * best) + " of " + std::to_string(crs) +
                " columns x 64 filters a block, " + std::to_string(d.items) + " items over " +
                std::to_string(d.cluster_split) + " cluster block(s) x " + std::to_string(d.atomic_slices) +
                " slice(s)" +
                (d.atomic_slices > 1 ? " adding with atomics"
                 : deterministic     ? " (deterministic)"
                                     : ""));
  return d;
}

}  // namespace mconv::detail
