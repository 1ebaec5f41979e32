// The single-channel planner of the stride-fixed-block paper, section 3.1 (technique 4).
//
// Input: one channel per group, M = K/G filters of R x S, map Wx x Wy (= W x H; the paper's K x K
// filter generalised to R x S). Two ways to share the work among N_sm SMs:
//   Method 1: filters split over the SMs (ceil(M/N_sm) each), the map split into P pieces along y:
//     D1 = (R*S*ceil(M/N_sm) + (ceil(Wy/P) + R - 1)*Wx) * 4,  Th1 = R*S*ceil(M/N_sm)*ceil(Wy/P)*Wx
//   Method 2: the map split over the SMs along y, the filters into Q pieces:
//     D2 = (R*S*ceil(M/Q) + (ceil(Wy/N_sm) + R - 1)*Wx) * 4,  Th2 = R*S*ceil(M/Q)*ceil(Wy/N_sm)*Wx
// P (Q) is the smallest integer with D <= the shared memory of one block and Th >= N_FMA; the
// method with the smaller D is kept. If even then Th < N_FMA, the map is too small for prefetching
// to hide latency: the division is refined until the data all blocks move together is >= V_s.
// (mconv: rows are output rows; D counts the input rows a strip of output rows needs at the
// problem's stride and dilation, and the padded width.)
#pragma once

#include <string>
#include <vector>

#include "mconv/hardware.hpp"
#include "mconv/problem.hpp"

namespace mconv::detail {

struct SingleChannelDivision {
  int method = 0;             // 1 or 2
  int pieces = 1;             // P (method 1) or Q (method 2)
  int filters_per_block = 1;  // ceil(M/N_sm) or ceil(M/Q)
  int rows_per_block = 1;     // output rows of one block: ceil(P_out/P) or ceil(P_out/N_sm)
  int64_t d_bytes = 0;        // D: shared memory of one block
  double th = 0;              // Th: FMAs of one block
  bool vs_fallback = false;   // Th < N_FMA: refined until all blocks move >= V_s
  int64_t blocks = 0;         // per image and group
};

/// Shared-memory budget of one block: the paper runs 2 blocks per SM.
int64_t single_channel_smem_budget(const HardwareModel& hw);

/// Input columns of a strip (padded width) and input rows of `out_rows` output rows.
int64_t single_channel_strip_cols(const Problem& p);
int64_t single_channel_strip_rows(const Problem& p, int64_t out_rows);

/// The division, with one line per decision appended to `why`. Throws Error(Unsupported) when
/// C/G != 1 or no division fits shared memory.
SingleChannelDivision plan_single_channel(const Problem& p, const HardwareModel& hw, std::vector<std::string>& why);

}  // namespace mconv::detail
