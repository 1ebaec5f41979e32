// The implicit-GEMM family's tile table: the one list of its kernel instantiations. The planner's
// catalog (kTileCatalog), the launcher's dispatch and the static checks all derive from
// ImplicitPrecompTiles, so a tile is added in one place.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include "../common/host_math.hpp"

namespace mconv::detail {

/// A tile configuration: block_m output pixels x block_n filters x block_k rows a pipeline stage,
/// each thread a thread_m x thread_n register micro-tile. Derives the thread layout and
/// shared-memory size and checks its invariants. `Candidate`: Auto may pick it (false: only when
/// forced, kept for measurement; see planner.cpp).
template <int BlockM, int BlockN, int BlockK, int ThreadM, int ThreadN, int Stages, bool Candidate = true>
struct ImplicitPrecompTile {
  static constexpr int kBlockM = BlockM, kBlockN = BlockN, kBlockK = BlockK;
  static constexpr int kThreadM = ThreadM, kThreadN = ThreadN, kStages = Stages;
  static constexpr bool kCandidate = Candidate;
  static constexpr int kThreadsM = BlockM / ThreadM, kThreadsN = BlockN / ThreadN;
  static constexpr int kThreads = kThreadsM * kThreadsN;
  static constexpr int kImageLoads = BlockK * BlockM / kThreads;  // per thread per stage
  static constexpr int kFilterLoads = BlockK * BlockN / kThreads;
  // Rows padded by one float4 so that row-wise gathers (kk fastest) hit distinct banks.
  static constexpr int kImageStride = BlockM + 4, kFilterStride = BlockN + 4;
  static constexpr int kSmemFloats = Stages * BlockK * (kImageStride + kFilterStride);
  static_assert(ThreadM % 4 == 0 && ThreadN % 4 == 0, "micro-tiles are read from shared memory as float4");
  static_assert(BlockM % ThreadM == 0 && BlockN % ThreadN == 0, "micro-tiles must tile the block");
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps, at most 1024 threads");
  static_assert(kThreads % BlockM == 0 && kThreads % BlockK == 0, "gather maps threads evenly onto the tile");
  static_assert((BlockK * BlockM) % kThreads == 0 && (BlockK * BlockN) % kThreads == 0, "every thread loads equally");
  static_assert(Stages >= 2, "a pipeline needs at least two stages");
  static_assert(kSmemFloats * 4 <= 48 * 1024, "static shared memory is limited to 48 KB");
};

// Threads per block = (block_m / thread_m) * (block_n / thread_n): 256, or 128 for the smallest tile.
using ImplicitPrecompTiles =
    std::tuple<ImplicitPrecompTile<128, 128, 8, 8, 8, 3>,  // large layers: 64 FFMA per 16 shared-memory floats read
               ImplicitPrecompTile<128, 64, 8, 8, 4, 3>,   // K/G = 64 (resnet50 stage 1, vgg16 conv1)
               ImplicitPrecompTile<64, 64, 8, 4, 4, 3>,    // small N*P*Q (late stages at batch 1)
               ImplicitPrecompTile<128, 32, 8, 4, 4, 3>,   // small K/G
               ImplicitPrecompTile<64, 32, 8, 4, 4, 3>,    // tiny problems: more blocks to fill the SMs
               ImplicitPrecompTile<128, 128, 16, 8, 8, 2, false>,  // K/G > 64 with enough rows and columns: planner.cpp
               ImplicitPrecompTile<128, 64, 16, 8, 4, 2, false>>;  // K/G in (32, 64] with enough rows: planner.cpp

/// A row of the catalog: what the planner needs of a tile.
struct TileShape {
  int block_m, block_n, block_k;  // GEMM M (pixels), N (filters), K (rows per stage)
  int thread_m, thread_n, stages, threads;
  bool planner_candidate;
  /// "128x128x8": block_m x block_n x block_k.
  std::string name() const {
    return std::to_string(block_m) + "x" + std::to_string(block_n) + "x" + std::to_string(block_k);
  }
};

template <class... Tiles>
constexpr std::array<TileShape, sizeof...(Tiles)> make_tile_catalog(std::tuple<Tiles...>*) {
  return {{{Tiles::kBlockM, Tiles::kBlockN, Tiles::kBlockK, Tiles::kThreadM, Tiles::kThreadN, Tiles::kStages,
            Tiles::kThreads, Tiles::kCandidate}...}};
}
inline constexpr auto kTileCatalog = make_tile_catalog(static_cast<ImplicitPrecompTiles*>(nullptr));

/// Index of the tile named `name` in kTileCatalog, or -1.
inline int find_tile(std::string_view name) {
  return find_by_name(kTileCatalog, name);
}

/// Calls f(Tile{}) for the tile at `index` of ImplicitPrecompTiles; false when there is none.
template <class F>
bool visit_tile(int index, F&& f) {
  return visit_type_at<ImplicitPrecompTiles>(index, f);
}

}  // namespace mconv::detail
