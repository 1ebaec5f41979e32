#include "heuristics.hpp"

#include <algorithm>
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

int choose_split_k(const Problem& p, const TileShape& t, const DeviceSummary& dev, std::vector<std::string>& why) {
  const int sms = dev.sm_count > 0 ? dev.sm_count : 132;
  const int64_t cols = p.n * p.p() * p.q();
  const int64_t blocks = ((cols + t.block_m - 1) / t.block_m) * ((p.k_per_group() + t.block_n - 1) / t.block_n) * p.groups;
  const int64_t k_tiles = (p.c_per_group() * p.r * p.s + t.block_k - 1) / t.block_k;
  // Aim at two resident blocks per SM; keep >= 8 row tiles (64 rows) per slice so each slice's
  // pipeline runs long enough to pay for its prologue, epilogue atomics and the y pre-pass.
  // Measured on the H100 (multi_channel suite, 7x7/14x14 maps with C = 512): 16 blocks for 132 SMs
  // ran 2x slower than cuDNN before split-K.
  int64_t split = std::min<int64_t>({2 * sms / std::max<int64_t>(blocks, 1), k_tiles / 8, 32});
  if (split < 2) return 1;
  std::ostringstream os;
  os << "split_k " << split << ": " << blocks << " blocks for " << sms << " SMs, " << k_tiles
     << " row tiles (y pre-scaled by beta, slices added with atomics)";
  why.push_back(os.str());
  return int(split);
}

}  // namespace mconv::detail
