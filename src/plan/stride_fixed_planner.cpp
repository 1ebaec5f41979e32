#include "stride_fixed_planner.hpp"

#include <algorithm>
#include <sstream>

#include "mconv/types.hpp"

namespace mconv::detail {
namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

}  // namespace

StrideFixedLayout stride_fixed_layout(const Problem& p, int tile_rows, int tile_cols) {
  StrideFixedLayout l;
  l.rows = int((tile_rows - 1) * p.stride_h + (p.r - 1) * p.dil_h + 1);
  l.cols = int((tile_cols - 1) * p.stride_w + (p.s - 1) * p.dil_w + 1);
  const int window = int((kStrideFixedThreadPixels - 1) * p.stride_w + (p.s - 1) * p.dil_w + 1);
  const int last_window_end = int((tile_cols - kStrideFixedThreadPixels) * p.stride_w) + (window + 3) / 4 * 4;
  l.pitch = (std::max(l.cols, last_window_end) + 3) / 4 * 4;
  return l;
}

StrideFixedDivision plan_stride_fixed(const Problem& p, const HardwareModel& hw, std::vector<std::string>& why) {
  StrideFixedDivision d;
  // W'x x W'y: the line width (a multiple of a thread's 8 pixels) that pads the map least; among
  // near ties (3%), the one that reads the fewest input values per output; among those (5%), the
  // widest, whose line copies and stores are the longest contiguous runs.
  struct Candidate {
    int rows, cols;
    int64_t padded;
    double reads;
  };
  std::vector<Candidate> all;
  for (int cols = kStrideFixedThreadPixels; cols <= kStrideFixedPixels; cols *= 2) {
    const int rows = kStrideFixedPixels / cols;
    const StrideFixedLayout l = stride_fixed_layout(p, rows, cols);
    all.push_back({rows, cols, ceil_div(p.p(), rows) * rows * ceil_div(p.q(), cols) * cols,
                   double(l.rows) * l.cols / kStrideFixedPixels});
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
  d.layout = stride_fixed_layout(p, d.tile_rows, d.tile_cols);

  // S from the paper's inequality M' >= N_FMA * 4 / (S * W'x), rounded up to a power of two and
  // halved until two rounds fit a third of an SM's shared memory.
  const int64_t cg = p.c_per_group();
  d.segment_needed = hw.n_fma() * 4.0 / (double(kStrideFixedFilters) * kStrideFixedPixels);
  int seg = 1;
  while (seg * 4 < d.segment_needed && seg < 32) seg *= 2;
  while (seg > 1 && seg / 2 >= cg) seg /= 2;  // no empty channels in the only round
  const int64_t per_sm = hw.smem_per_sm > 0 ? hw.smem_per_sm : 228 * 1024;
  const int64_t optin = hw.smem_per_block_optin > 0 ? hw.smem_per_block_optin : 227 * 1024;
  const int64_t budget = std::min(per_sm / kStrideFixedResidentBlocks - kRuntimeSmemPerBlock, optin);
  while (seg > 1 && 2 * d.layout.round_floats(p, seg) * 4 > budget) seg /= 2;
  d.segment_channels = seg;
  d.smem_bytes = 2 * d.layout.round_floats(p, seg) * 4;
  if (d.smem_bytes > optin)
    throw Error(Status::Unsupported, "algorithm: stride_fixed: even one channel per round needs more than " +
                                         std::to_string(optin / 1024) + " KB of shared memory (filter " +
                                         std::to_string(p.r) + "x" + std::to_string(p.s) + ")");

  // Small maps: slice the channels until the blocks fill the SMs (at least two rounds a slice, so
  // the prefetch still overlaps).
  const int64_t tiles = ceil_div(p.p(), d.tile_rows) * ceil_div(p.q(), d.tile_cols);
  const int64_t filter_blocks = ceil_div(p.k_per_group(), kStrideFixedFilters);
  d.blocks = tiles * filter_blocks * p.n * p.groups;
  const int64_t rounds = ceil_div(cg, seg);
  const int64_t wave = int64_t(std::max(hw.sm_count, 1)) * kStrideFixedResidentBlocks;
  if (d.blocks * 2 <= wave && rounds >= 4) {
    const int64_t want = std::min<int64_t>({ceil_div(wave, d.blocks), rounds / 2, 64});
    d.splits = int(ceil_div(rounds, ceil_div(rounds, want)));  // no empty slice
  }
  if (tiles > 0x7fffffffLL || filter_blocks > 65535 || p.n * p.groups * d.splits > 65535)
    throw Error(Status::Unsupported, "n*groups: stride_fixed launches at most 65535 image x group x split blocks");

  std::ostringstream os;
  os << "stride_fixed: W'x x W'y = " << d.tile_cols << " x " << d.tile_rows << " pixels, M' = " << kStrideFixedFilters
     << ", S = " << seg * 4 << " B (" << seg
     << " channels per round; the paper's M' >= N_FMA*4/(S*W'x) asks S >= " << int(d.segment_needed + 0.5)
     << " B), double-buffered rounds " << d.smem_bytes << " B of " << budget << " B, " << d.blocks << " blocks";
  if (d.splits > 1) os << " x " << d.splits << " channel slices (split_k, unless the epilogue has ReLU)";
  why.push_back(os.str());
  return d;
}

}  // namespace mconv::detail
