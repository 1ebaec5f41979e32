// The implicit-GEMM planner: the tile (from the tile table) and the split-K slices, each choice with
// its measured evidence, and the launch they make.
#include "planner.hpp"

#include <algorithm>
#include <sstream>

#include "../common/split_k.hpp"
#include "tiles.hpp"

namespace mconv::detail {
namespace {

// Filters read contiguously by 1x1 steps (the dgrad of a 1x1 layer: w transposed, its filter stride
// 1). Measured on the H100 (resnet50 fp32 dgrad, batch 32, every layer forced to each tile in one
// call; bench/results/latest/tile_sweep_dgrad_fp32): the three-stage 8-row tiles beat 128x128x16
// and 128x64x16 on 13 of the 14 such layers, by 1-13%. Of those, 128x64x8 won where 128x128's grid
// fills at least one wave of two blocks an SM and 128x64's last wave is fuller (l2_ds 449 vs 468 us
// on 128x128x8; l3_1x1c, l4_1x1a 11-12%), and lost below one wave, where 128x128 splits instead.
int choose_contiguous_filter_tile(const Problem& p, int sms, std::vector<std::string>& why) {
  const int64_t cols = p.n * p.p() * p.q(), kg = p.k_per_group(), slots = 2 * int64_t(sms);
  const int64_t col_tiles = (cols + 127) / 128;
  auto blocks = [&](int64_t block_n) { return col_tiles * ((kg + block_n - 1) / block_n) * p.groups; };
  auto last_wave_fill = [&](int64_t b) { return double(b) / double((b + slots - 1) / slots * slots); };
  const int64_t wide = blocks(128), narrow = blocks(64);
  const bool narrow_wins = kg <= 64 || (wide >= slots && last_wave_fill(narrow) > last_wave_fill(wide) + 0.1);
  std::ostringstream os;
  os << "tile " << (narrow_wins ? "128x64x8" : "128x128x8") << ": 1x1 filters read contiguously (K/G = " << kg << ", "
     << wide << " blocks of 128x128 and " << narrow << " of 128x64 for " << slots
     << " resident; the 8-row tiles measured best for such steps on the H100)";
  why.push_back(os.str());
  return find_tile(narrow_wins ? "128x64x8" : "128x128x8");
}

int choose_tile(const Problem& p, const HardwareModel& hw, PrecompOperands operands, std::vector<std::string>& why) {
  const int64_t cols = p.n * p.p() * p.q();
  const int64_t kg = p.k_per_group();
  const int sms = std::max(hw.sm_count, 1);
  const bool rows_gather = operands.rows_gather;
  if (operands.filters_contiguous && !rows_gather && p.r * p.s == 1 && kg > 32 && cols >= 4 * 128)
    return choose_contiguous_filter_tile(p, sms, why);
  // Two resident 256-thread blocks per SM is what the 128x128 tile's registers allow (8x8 accumulators
  // + fragments ~ 128 regs/thread): a grid of fewer than ~sms blocks leaves SMs idle, so step down to
  // smaller tiles until the grid fills the machine. Larger tiles read less shared memory per FFMA.
  // Measured on the H100 (resnet50 batch 32, every layer forced to 128x128x16 vs the pick below):
  // 128x128x16 won on every layer with K/G >= 128 and C*R*S >= 256, up to 1.9x on l4_3x3 (0.24 vs
  // 0.47 ms with 64x64x8) even with fewer blocks than SMs: the 4x4 micro-tiles of the small tiles
  // read too much shared memory per FFMA. It lost on K/G = 64 (half its filter lanes idle).
  // With the row-wise gather (NHWC) each thread of 128x128x16 keeps 8 column bases and spills
  // 72 bytes (ptxas), so NHWC takes the 8-row 128x128 tile for the same layers.
  if (kg > 64 && cols >= 4 * 128 && p.c_per_group() * p.r * p.s >= 64) {
    const int t = find_tile(rows_gather ? "128x128x8" : "128x128x16");
    why.push_back("tile " + kTileCatalog[t].name() + ": K/G = " + std::to_string(kg) + " > 64, N*P*Q = " +
                  std::to_string(cols) + " >= 512, C/G*R*S >= 64 (128x128 measured best for such layers on the H100)");
    return t;
  }
  // K/G in (32, 64]: 128x64x16 ran 1.00-1.03x faster than 128x64x8 on all 10 such layers of
  // vgg16/resnet50/multi_channel, 0.97x on resnet50_conv1 (H100, one forced run each).
  if (kg > 32 && kg <= 64 && cols >= 4 * 128 && p.c_per_group() * p.r * p.s >= 64 && !rows_gather) {
    why.push_back("tile 128x64x16: K/G = " + std::to_string(kg) + " in (32, 64], C/G*R*S >= 64 (measured on the H100)");
    return find_tile("128x64x16");
  }
  int last = -1;
  for (size_t i = 0; i < kTileCatalog.size(); ++i)
    if (kTileCatalog[i].planner_candidate) last = int(i);
  for (size_t i = 0; i < kTileCatalog.size(); ++i) {
    const TileShape& t = kTileCatalog[i];
    if (!t.planner_candidate) continue;
    if (kg <= t.block_n / 2 && t.block_n > 32) continue;  // more than half the filter tile would idle
    int64_t blocks = ((cols + t.block_m - 1) / t.block_m) * ((kg + t.block_n - 1) / t.block_n) * p.groups;
    if (blocks >= sms || int(i) == last) {
      std::ostringstream os;
      os << "tile " << t.name() << ": " << blocks << " blocks for " << sms << " SMs (K/G = " << kg
         << ", N*P*Q = " << cols << "); larger tiles skipped for K/G <= block_n/2 or fewer blocks than SMs";
      why.push_back(os.str());
      return int(i);
    }
  }
  return last;
}

int choose_split_k(const Problem& p, const TileShape& t, const HardwareModel& hw, bool ordered,
                   std::vector<std::string>& why) {
  const int sms = std::max(hw.sm_count, 1);
  const int64_t cols = p.n * p.p() * p.q();
  const int64_t blocks =
      ((cols + t.block_m - 1) / t.block_m) * ((p.k_per_group() + t.block_n - 1) / t.block_n) * p.groups;
  const int64_t k_tiles = (p.c_per_group() * p.r * p.s + t.block_k - 1) / t.block_k;
  // Aim at two resident blocks per SM; keep >= 8 row tiles (64 rows) per slice so each slice's
  // pipeline runs long enough to pay for its prologue, epilogue atomics and the y pre-pass.
  // Measured on the H100 (multi_channel suite, 7x7/14x14 maps with C = 512): 16 blocks for 132 SMs
  // ran 2x slower than cuDNN before split-K.
  // Reductions of 32K rows and more (a wgrad step's N*P*Q; no forward layer of the suites comes near)
  // on few blocks may take 64 slices. H100, resnet50 wgrad fp32 with 64 slices forced: the first layer
  // 1.107 -> 0.615 ms, the 56x56 1x1 layers 0.313 -> 0.163 and 0.413 -> 0.359 ms; layers with shorter
  // reductions ran slower with 64 than with the planner's choice.
  // Note [ordered split-k]: a deterministic plan's slices are one cluster, 16 blocks at most.
  const int64_t cap = ordered ? kMaxOrderedSplit : k_tiles >= 4096 ? 64 : 32;
  int64_t split = std::min<int64_t>({2 * sms / std::max<int64_t>(blocks, 1), k_tiles / 8, cap});
  if (split < 2) return 1;
  std::ostringstream os;
  os << "split_k " << split << ": " << blocks << " blocks for " << sms << " SMs, " << k_tiles << " row tiles"
     << (ordered ? " (deterministic: the slices are one cluster, summed in rank order)"
                 : " (y pre-scaled by beta, slices added with atomics)");
  why.push_back(os.str());
  return int(split);
}

}  // namespace

ImplicitPrecompDivision plan_implicit_precomp(const Problem& p, int64_t rows, PrecompOperands operands,
                                              const HardwareModel& hw, const std::string& forced_tile,
                                              int forced_split_k, bool deterministic, std::vector<std::string>& why) {
  int tile = -1;
  if (!forced_tile.empty()) {
    tile = find_tile(forced_tile);
    if (tile < 0) {
      std::string names;
      for (const auto& t : kTileCatalog) names += (names.empty() ? "" : ", ") + t.name();
      throw Error(Status::BadParam, "tile: unknown tile '" + forced_tile + "' (known: " + names + ")");
    }
    why.push_back("tile " + forced_tile + ": forced");
  } else {
    tile = choose_tile(p, hw, operands, why);
  }
  const TileShape& t = kTileCatalog[tile];
  ImplicitPrecompDivision d;
  d.tile = tile;
  d.tile_name = t.name();
  d.block_m = t.block_m;
  d.block_n = t.block_n;
  d.block_k = t.block_k;
  d.k_tiles = static_cast<int>((rows + t.block_k - 1) / t.block_k);
  if (forced_split_k < 0 || forced_split_k > d.k_tiles)
    throw Error(Status::BadParam, "split_k: " + std::to_string(forced_split_k) + " is outside 0.." +
                                      std::to_string(d.k_tiles) + " (the row tiles of this problem)");
  // Note [ordered split-k]: a deterministic plan splits only into a cluster (sm_90 and later).
  const bool clusters = hw.cc_major >= 9;
  if (deterministic && forced_split_k > (clusters ? kMaxOrderedSplit : 1))
    throw Error(Status::BadParam, "split_k: a deterministic plan sums at most " +
                                      std::to_string(clusters ? kMaxOrderedSplit : 1) +
                                      " slices (one thread-block cluster" + (clusters ? "" : ", which needs sm_90") +
                                      "), not " + std::to_string(forced_split_k));
  if (forced_split_k > 0) {
    d.split_k = forced_split_k;
    why.push_back("split_k " + std::to_string(forced_split_k) + ": forced");
  } else if (deterministic && !clusters) {
    d.split_k = 1;
    why.push_back("split_k 1: deterministic (no atomics; an ordered split needs sm_90's clusters)");
  } else {
    d.split_k = choose_split_k(p, t, hw, deterministic, why);
  }
  d.k_tiles_per_split = (d.k_tiles + d.split_k - 1) / d.split_k;
  d.split_k = (d.k_tiles + d.k_tiles_per_split - 1) / d.k_tiles_per_split;  // no empty slice
  d.ordered_split = deterministic && d.split_k > 1;
  d.prepass_blocks = split_prepass_blocks(p.n * p.k * p.p() * p.q(), hw);
  d.launch.grid_x = (p.n * p.p() * p.q() + t.block_m - 1) / t.block_m;
  d.launch.grid_y = (p.k_per_group() + t.block_n - 1) / t.block_n;
  d.launch.grid_z = p.groups * d.split_k;
  d.launch.threads = t.threads;
  d.launch.smem_bytes = 0;  // static shared memory
  if (d.launch.grid_y > 65535 || p.groups * d.split_k > 65535)
    throw Error(Status::Unsupported, "k/groups: too many filter tiles or groups x split_k slices for one launch");
  return d;
}

}  // namespace mconv::detail
