#include "heuristics.hpp"

#include <cmath>
#include <sstream>

namespace mconv::detail {

const TileShape& choose_implicit_precomp_tile(const Problem& p, const DeviceSummary& dev,
                                              std::vector<std::string>& why) {
  const int64_t cols = p.n * p.p() * p.q();
  const int64_t kg = p.k_per_group();
  const int sms = dev.sm_count > 0 ? dev.sm_count : 132;  // plan for an H100 when no device is visible
  // Two resident 256-thread blocks per SM is what the 128x128 tile's registers allow (8x8 accumulators
  // + fragments ~ 128 regs/thread): a grid of fewer than ~sms blocks leaves SMs idle, so step down to
  // smaller tiles until the grid fills the machine. Larger tiles read less shared memory per FFMA.
  for (const auto& t : kTileCatalog) {
    if (kg <= t.block_n / 2 && t.block_n > 32) continue;  // more than half the filter tile would idle
    int64_t blocks = ((cols + t.block_m - 1) / t.block_m) * ((kg + t.block_n - 1) / t.block_n) * p.groups;
    if (blocks >= sms || &t == &kTileCatalog.back()) {
      std::ostringstream os;
      os << "tile " << t.name << ": " << blocks << " blocks for " << sms << " SMs (K/G = " << kg
         << ", N*P*Q = " << cols << "); larger tiles skipped for K/G <= block_n/2 or fewer blocks than SMs";
      why.push_back(os.str());
      return t;
    }
  }
  return kTileCatalog.back();
}

}  // namespace mconv::detail
