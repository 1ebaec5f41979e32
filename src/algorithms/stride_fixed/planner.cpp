// The stride-fixed block planner (paper section 3.2): segment, W'x x W'y, channel slices, launch.
#include "planner.hpp"

#include <algorithm>
#include <sstream>

#include "../common/host_math.hpp"
#include "../common/split_k.hpp"
#include "mconv/types.hpp"

namespace mconv::detail {
StrideFixedLayout stride_fixed_layout(const Problem& p, int tile_rows, int tile_cols, int thread_pixels) {
  StrideFixedLayout l;
  l.rows = int((tile_rows - 1) * p.stride_h + (p.r - 1) * p.dil_h + 1);
  l.cols = int((tile_cols - 1) * p.stride_w + (p.s - 1) * p.dil_w + 1);
  const int window = int((thread_pixels - 1) * p.stride_w + (p.s - 1) * p.dil_w + 1);
  const int last_window_end = int((tile_cols - thread_pixels) * p.stride_w) + (window + 3) / 4 * 4;
  l.pitch = (std::max(l.cols, last_window_end) + 3) / 4 * 4;
  return l;
}

namespace {

/// W'x x W'y for `thread_pixels` per thread: the line width (a multiple of a thread's pixels) that
/// pads the map least; among near ties (3%), the one that reads the fewest input values per output;
/// among those (5%), the widest, whose line copies and stores are the longest contiguous runs.
void choose_block_lines(const Problem& p, int thread_pixels, StrideFixedDivision& d) {
  struct Candidate {
    int rows, cols;
    int64_t padded;
    double reads;
  };
  const int pixels = stride_fixed_block_pixels(thread_pixels);
  std::vector<Candidate> all;
  for (int cols = thread_pixels; cols <= pixels; cols *= 2) {
    const int rows = pixels / cols;
    const StrideFixedLayout l = stride_fixed_layout(p, rows, cols, thread_pixels);
    all.push_back(
        {rows, cols, ceil_div(p.p(), rows) * rows * ceil_div(p.q(), cols) * cols, double(l.rows) * l.cols / pixels});
  }
  int64_t least_padded = INT64_MAX;
  for (const auto& c : all) least_padded = std::min(least_padded, c.padded);
  double least_reads = 1e300;
  for (const auto& c : all)
    if (c.padded * 100 <= least_padded * 103) least_reads = std::min(least_reads, c.reads);
  for (const auto& c : all)
    if (c.padded * 100 <= least_padded * 103 && c.reads <= least_reads * 1.05) {
      d.tile_rows = c.rows;  // the widest so far (cols ascend)
      d.tile_cols = c.cols;
    }
  d.thread_pixels = thread_pixels;
  d.layout = stride_fixed_layout(p, d.tile_rows, d.tile_cols, thread_pixels);
  d.blocks = ceil_div(p.p(), d.tile_rows) * ceil_div(p.q(), d.tile_cols) *
             ceil_div(p.k_per_group(), kStrideFixedFilters) * p.n * p.groups;
}

}  // namespace

StrideFixedDivision plan_stride_fixed(const Problem& p, const HardwareModel& hw, std::vector<std::string>& why,
                                      int thread_pixels, bool allow_splits) {
  StrideFixedDivision d;
  const int64_t sms = std::max(hw.sm_count, 1);
  // Note [stride-fixed thread pixels]: 4 pixels a thread where the 8-pixel blocks are fewer than
  // the SMs (half the SMs for filters wider than 3x3, whose windows 4 pixels share less).
  choose_block_lines(p, kStrideFixedThreadPixels, d);
  const bool wide = p.r * p.s > 9;
  const bool small = d.blocks * (wide ? 2 : 1) < sms;
  const int px = thread_pixels > 0 ? thread_pixels : small ? 4 : kStrideFixedThreadPixels;
  if (px != d.thread_pixels) choose_block_lines(p, px, d);
  const int pixels = stride_fixed_block_pixels(d.thread_pixels);

  // S from the paper's inequality M' >= N_FMA * 4 / (S * W'x), rounded up to a power of two and
  // halved until two rounds fit a third of an SM's shared memory.
  const int64_t cg = p.c_per_group();
  d.segment_needed = hw.n_fma() * 4.0 / (double(kStrideFixedFilters) * pixels);
  const int64_t per_sm = hw.smem_per_sm, optin = hw.smem_per_block_optin;
  const int64_t budget = std::min(per_sm / kStrideFixedResidentBlocks - kRuntimeSmemPerBlock, optin);
  auto fit = [&](int seg) {
    while (seg > 1 && seg / 2 >= cg) seg /= 2;  // no empty channels in the only round
    while (seg > 1 && 2 * stride_fixed_round_floats(p, d.layout, seg) * 4 > budget) seg /= 2;
    return seg;
  };
  int seg = 1;
  while (seg * 4 < d.segment_needed && seg < 32) seg *= 2;
  seg = fit(seg);

  // Small maps: slice the channels while the blocks fill whole waves of the SMs, and each slice
  // keeps at least two rounds so the prefetch still overlaps. Rounding the slices down rather than
  // up to the wave measured 10-15% faster on the 3x3 layers of 56x56 and 112x112 maps, 8% slower
  // on 28x28 (H100, one image).
  const int64_t tiles = ceil_div(p.p(), d.tile_rows) * ceil_div(p.q(), d.tile_cols);
  const int64_t filter_blocks = ceil_div(p.k_per_group(), kStrideFixedFilters);
  auto slices = [&](int seg) {
    const int64_t rounds = ceil_div(cg, seg), smem = 2 * stride_fixed_round_floats(p, d.layout, seg) * 4;
    // Resident blocks: the kernel's launch bound, or fewer where the rounds fill shared memory.
    const int64_t resident =
        std::min<int64_t>(stride_fixed_resident_blocks(d.thread_pixels), per_sm / (smem + kRuntimeSmemPerBlock));
    const int64_t wave = sms * std::max<int64_t>(resident, 1);
    if (d.blocks * 2 > wave || rounds < 4) return 1;
    const int64_t want = std::min<int64_t>({wave / d.blocks, rounds / 2, 64});
    return int(ceil_div(rounds, ceil_div(rounds, want)));  // no empty slice
  };
  // Note [stride-fixed 1x1 rounds]: a 1x1 round has R*S = 1 tap per channel, a ninth of a 3x3
  // round's FMAs for the same barriers and copies. Where the layer runs unsliced with it, 1x1 takes
  // twice the paper's segment. On the H100 (stride_fixed forced, us): 224x224 C = 64 22.9 -> 21.3,
  // 512x512 91.3 -> 85.2, 56x56 C = 128 11.2 -> 10.4 (now unsliced: no pre-pass, no atomics),
  // 112x112 9.6 either way. Sliced layers keep the paper's: twice the segment there halves the
  // slices, and 7x7 C = 512 went 12.6 -> 17.1, 28x28 C = 256 10.7 -> 11.9.
  if (p.r * p.s == 1) {
    const int wider = fit(2 * seg);
    if (wider > seg && slices(wider) == 1) seg = wider;
  }
  d.segment_channels = seg;
  const int64_t smem_bytes = 2 * stride_fixed_round_floats(p, d.layout, seg) * 4;
  if (smem_bytes > optin)
    throw Error(Status::Unsupported, "algorithm: stride_fixed: even one channel per round needs more than " +
                                         std::to_string(optin / 1024) + " KB of shared memory (filter " +
                                         std::to_string(p.r) + "x" + std::to_string(p.s) + ")");
  d.splits = allow_splits ? slices(seg) : 1;
  if (tiles > 0x7fffffffLL || filter_blocks > 65535 || p.n * p.groups * d.splits > 65535)
    throw Error(Status::Unsupported, "n*groups: stride_fixed launches at most 65535 image x group x split blocks");

  std::ostringstream os;
  os << "stride_fixed: W'x x W'y = " << d.tile_cols << " x " << d.tile_rows << " pixels (" << d.thread_pixels
     << " a thread), M' = " << kStrideFixedFilters << ", S = " << seg * 4 << " B (" << seg
     << " channels per round; the paper's M' >= N_FMA*4/(S*W'x) asks S >= " << int(d.segment_needed + 0.5)
     << " B), double-buffered rounds " << smem_bytes << " B of " << budget << " B, " << d.blocks << " blocks";
  if (d.splits > 1) os << " x " << d.splits << " channel slices (split_k, unless the epilogue has an activation)";
  why.push_back(os.str());

  d.rounds = static_cast<int>(ceil_div(cg, seg));
  d.rounds_per_split = static_cast<int>(ceil_div(d.rounds, d.splits));
  d.splits = static_cast<int>(ceil_div(d.rounds, d.rounds_per_split));  // no empty slice
  d.tiles_x = static_cast<int>(ceil_div(p.q(), d.tile_cols));
  d.prepass_blocks = split_prepass_blocks(p.n * p.k * p.p() * p.q(), hw);
  d.launch = {tiles, filter_blocks, p.n * p.groups * d.splits, kStrideFixedThreads, smem_bytes};
  return d;
}

}  // namespace mconv::detail
