// The stride-fixed block planner (paper section 3.2, technique 4), for the kernel of
// src/cuda/stride_fixed_kernel.cuh:
//   - each round moves a segment of S bytes along the channel axis (S = 32 or 64 in the paper:
//     the smallest coalesced sizes) of M' filters and of the block's input lines;
//   - M' >= N_FMA * 4 / (S * W'x) so that one round has enough FMAs to hide a memory latency;
//     mconv fixes M' = 64 and W'x * W'y = 128 pixels and solves the same inequality for S;
//   - double buffering: the two rounds in flight fit shared memory (here: a third of an SM's,
//     so that three blocks are resident).
// Note [stride-fixed on Hopper]: the paper's thread computes one pixel for all M' filters, which
// takes a broadcast float4 shared-memory read per 4 FMAs; on the H100 that read rate caps the kernel
// near 14 TFLOP/s (measured, bench/NOTES.md). mconv's thread computes 8 pixels of a line for 8 of
// the M' filters: each input value read from shared memory feeds 8*S FMAs and each float4 of
// filters 32, while the block's division (segments, M', W'x, W'y, double buffering) stays the
// paper's. Small maps also split the channels over several blocks (split_k, summed with atomics).
#pragma once

#include <string>
#include <vector>

#include "mconv/hardware.hpp"
#include "mconv/problem.hpp"

namespace mconv::detail {

inline constexpr int kStrideFixedThreads = 128;
inline constexpr int kStrideFixedFilters = 64;      // M'
inline constexpr int kStrideFixedThreadPixels = 8;  // consecutive pixels of a line per thread
inline constexpr int kStrideFixedThreadFilters = 8;
inline constexpr int kStrideFixedPixels =  // W'x * W'y
    kStrideFixedThreads / (kStrideFixedFilters / kStrideFixedThreadFilters) * kStrideFixedThreadPixels;
inline constexpr int kStrideFixedFilterPitch = kStrideFixedFilters + 4;  // floats per (c, r, s) in shared memory
inline constexpr int kStrideFixedResidentBlocks = 3;  // the kernel's __launch_bounds__; two buffers each

/// The shared-memory image of one round: [seg][rows][pitch] input lines, then [seg*R*S][filter pitch].
struct StrideFixedLayout {
  int rows = 0, cols = 0, pitch = 0;  // input lines of a block and their columns
  int64_t round_floats(const Problem& p, int seg) const {
    return int64_t(seg) * (int64_t(rows) * pitch + p.r * p.s * kStrideFixedFilterPitch);
  }
};

/// The lines a block of `tile_rows` x `tile_cols` output pixels reads. The pitch also covers the
/// float4 windows of the vectorised kernels (which read up to 3 columns past the last one used).
StrideFixedLayout stride_fixed_layout(const Problem& p, int tile_rows, int tile_cols);

struct StrideFixedDivision {
  int segment_channels = 8;  // S / 4
  int tile_rows = 0;         // W'y (output lines per block)
  int tile_cols = 0;         // W'x (output pixels per line)
  int splits = 1;            // channel slices summed with atomics (small maps)
  StrideFixedLayout layout;
  int64_t smem_bytes = 0;     // both buffers
  int64_t blocks = 0;         // per split
  double segment_needed = 0;  // bytes: N_FMA * 4 / (M' * W'x * W'y)
};

StrideFixedDivision plan_stride_fixed(const Problem& p, const HardwareModel& hw, std::vector<std::string>& why);

}  // namespace mconv::detail
