// The stride-fixed block planner (paper section 3.2, technique 4), for the kernel of
// src/cuda/stride_fixed_kernel.cuh:
//   - each round moves a segment of S bytes along the channel axis (S = 32 or 64 in the paper:
//     the smallest coalesced sizes) of M' filters and of the pixels' input lines;
//   - M' >= N_FMA * 4 / (S * W'x) so that one round has enough FMAs to hide a memory latency;
//   - double buffering: the two rounds in flight fit shared memory.
// mconv: W'x = 128 pixels (one thread each) and M' = 64 (accumulators per thread; the register file
// caps it: 64 + the operands). The planner takes the largest S in {64, 32, 16, 8, 4} bytes that fits.
#pragma once

#include <string>
#include <vector>

#include "mconv/hardware.hpp"
#include "mconv/problem.hpp"

namespace mconv::detail {

struct StrideFixedDivision {
  int segment_channels = 8;   // S / 4
  int pixels = 128;           // W'x
  int filters = 64;           // M'
  int line_cols = 0;          // input columns of one pixel segment, padded to a multiple of 4
  int64_t smem_bytes = 0;     // both buffers
  double filters_needed = 0;  // N_FMA * 4 / (S * W'x)
};

int64_t stride_fixed_line_cols(const Problem& p, int pixels);
StrideFixedDivision plan_stride_fixed(const Problem& p, const HardwareModel& hw, std::vector<std::string>& why);

}  // namespace mconv::detail
