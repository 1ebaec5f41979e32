#include "stride_fixed_planner.hpp"

#include <sstream>

#include "mconv/types.hpp"

namespace mconv::detail {

int64_t stride_fixed_line_cols(const Problem& p, int pixels) {
  const int64_t cols = (pixels - 1) * p.stride_w + (p.s - 1) * p.dil_w + 1;
  return (cols + 3) / 4 * 4;  // float4-aligned buffers
}

StrideFixedDivision plan_stride_fixed(const Problem& p, const HardwareModel& hw, std::vector<std::string>& why) {
  StrideFixedDivision d;
  d.line_cols = int(stride_fixed_line_cols(p, d.pixels));
  const int64_t budget = hw.smem_per_block_optin > 0 ? hw.smem_per_block_optin : 227 * 1024;
  if (p.n * p.groups > 65535)
    throw Error(Status::Unsupported, "n*groups: stride_fixed launches at most 65535 image x group blocks");
  for (int seg : {16, 8, 4, 2, 1}) {
    const int64_t round = int64_t(seg) * p.r * d.line_cols + int64_t(seg) * p.r * p.s * d.filters;
    if (2 * round * 4 <= budget) {
      d.segment_channels = seg;
      d.smem_bytes = 2 * round * 4;
      d.filters_needed = hw.n_fma() * 4.0 / (seg * 4.0 * d.pixels);
      std::ostringstream os;
      os << "stride_fixed: S = " << seg * 4 << " B (" << seg << " channels per round), W'x = " << d.pixels
         << ", M' = " << d.filters << " (the paper's bound M' >= N_FMA*4/(S*W'x) = " << d.filters_needed
         << "; registers cap M' at 64), double-buffered rounds " << d.smem_bytes << " B of " << budget << " B";
      why.push_back(os.str());
      return d;
    }
  }
  throw Error(Status::Unsupported, "algorithm: stride_fixed: even one channel per round needs more than " +
                                       std::to_string(budget / 1024) + " KB of shared memory (filter " +
                                       std::to_string(p.r) + "x" + std::to_string(p.s) + ")");
}

}  // namespace mconv::detail
