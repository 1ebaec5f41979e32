// The stride-fixed block planner (paper section 3.2, technique 4), for the kernel of
// kernel.cuh:
//   - each round moves a segment of S bytes along the channel axis (S = 32 or 64 in the paper:
//     the smallest coalesced sizes) of M' filters and of the block's input lines;
//   - M' >= N_FMA * 4 / (S * W'x) so that one round has enough FMAs to hide a memory latency;
//     mconv fixes M' = 64 and W'x * W'y = 128 pixels (64 on small maps) and solves the same
//     inequality for S;
//   - double buffering: the two rounds in flight fit shared memory (here: a third of an SM's,
//     so that three blocks are resident).
// Note [stride-fixed on Hopper]: the paper's thread computes one pixel for all M' filters, which
// takes a broadcast float4 shared-memory read per 4 FMAs; on the H100 that read rate caps the kernel
// near 14 TFLOP/s (measured; docs/PERFORMANCE.md). mconv's thread computes 8 pixels of a line for 8 of
// the M' filters: each input value read from shared memory feeds 8*S FMAs and each float4 of
// filters 32, while the block's division (segments, M', W'x, W'y, double buffering) stays the
// paper's. Small maps also split the channels over several blocks (split_k, summed with atomics).
#pragma once

#include <string>
#include <vector>

#include "mconv/division.hpp"
#include "mconv/hardware.hpp"
#include "mconv/problem.hpp"

namespace mconv::detail {

inline constexpr int kStrideFixedThreads = 128;
inline constexpr int kStrideFixedFilters = 64;  // M'
inline constexpr int kStrideFixedThreadFilters = 8;
inline constexpr int kStrideFixedPixelGroups = kStrideFixedThreads / (kStrideFixedFilters / kStrideFixedThreadFilters);
inline constexpr int kStrideFixedFilterPitch = kStrideFixedFilters + 4;  // floats per (c, r, s) in shared memory

// Note [stride-fixed thread pixels]: a thread takes 8 consecutive pixels of a line, or 4 where the
// 8-pixel blocks are fewer than the SMs (fewer than half of them for filters wider than 3x3).
// With so few blocks each SM runs one or two, each warp one long chain (load a round, compute,
// the next round, store): ncu on a 56x56 1x1 layer showed 1.7 warps per scheduler, 0.38
// instructions issued per cycle. Half the pixels per thread gives twice the warps with half the
// chain each, and 32 accumulators fit 128 registers, so four blocks fit an SM where rounds are
// small. On larger maps the 8-pixel thread wins: each window and filter value read from shared
// memory feeds twice the FMAs. Wider filters lose more with 4 pixels (a 5x5 window of 4 pixels is
// 8 values for 4 outputs), so they switch only where the blocks leave half the SMs idle.
// Measured on the H100 (multi_channel suite, docs/PERFORMANCE.md): 1x1 layers of 7x7 to 112x112 maps
// 1.3-1.8x faster, the 3x3 ones of 7x7 to 112x112 1.1-1.3x, the suite 1.18x (geometric mean).
inline constexpr int kStrideFixedThreadPixels = 8;  // the default; 4 on small maps
/// W'x * W'y for `thread_pixels` consecutive pixels of a line per thread.
constexpr int stride_fixed_block_pixels(int thread_pixels) {
  return kStrideFixedPixelGroups * thread_pixels;
}
/// Two rounds of a block take at most a third of an SM's shared memory.
inline constexpr int kStrideFixedResidentBlocks = 3;
/// The kernel's __launch_bounds__: its 64 (or 32) accumulators and windows fit 168 (or 128)
/// registers. Blocks with small rounds (1x1 filters) can then be 4 to an SM.
constexpr int stride_fixed_resident_blocks(int thread_pixels) {
  return thread_pixels >= 8 ? kStrideFixedResidentBlocks : 4;
}

/// Floats of one round in shared memory: [seg][rows][pitch] input lines, then [seg*R*S][filter pitch].
inline int64_t stride_fixed_round_floats(const Problem& p, const StrideFixedLayout& l, int seg) {
  return int64_t(seg) * (int64_t(l.rows) * l.pitch + p.r * p.s * kStrideFixedFilterPitch);
}

/// The lines a block of `tile_rows` x `tile_cols` output pixels reads, `thread_pixels` per thread.
/// The pitch also covers the float4 windows of the vectorised kernels (which read up to 3 columns
/// past the last one used).
StrideFixedLayout stride_fixed_layout(const Problem& p, int tile_rows, int tile_cols, int thread_pixels);

/// Tile names that force a thread's pixels (to compare the two or test them); the planner's choice otherwise.
inline constexpr char kStrideFixedTile4[] = "stride_fixed_p4";
inline constexpr char kStrideFixedTile8[] = "stride_fixed_p8";

/// `thread_pixels`: 4 or 8 to force it, 0 for the planner's choice.
/// `allow_splits`: false keeps the channels in one slice (no atomics: a deterministic plan).
StrideFixedDivision plan_stride_fixed(const Problem& p, const HardwareModel& hw, std::vector<std::string>& why,
                                      int thread_pixels = 0, bool allow_splits = true);

}  // namespace mconv::detail
