// The tensor-core implicit-GEMM family's tile table: the one list of its kernel instantiations, from
// which the planner's catalog and the launcher's dispatch derive.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <tuple>

#include "../common/host_math.hpp"

namespace mconv::detail {

/// A block of BlockM output pixels x BlockN filters, split among WarpsM x WarpsN warps, each warp a
/// (BlockM/WarpsM) x (BlockN/WarpsN) tile of 16x8 MMA fragments. A pipeline stage holds 64 bytes of
/// every pixel's and every filter's reduction rows (32 fp16/bf16 or 16 fp32 rows), Stages deep.
template <int BlockM, int BlockN, int WarpsM, int WarpsN, int Stages, int MinBlocks>
struct ImplicitMmaTile {
  static constexpr int kBlockM = BlockM, kBlockN = BlockN, kWarpsM = WarpsM, kWarpsN = WarpsN;
  static constexpr int kStages = Stages, kMinBlocks = MinBlocks;
  static constexpr int kThreads = 32 * WarpsM * WarpsN;
  static constexpr int kWarpM = BlockM / WarpsM, kWarpN = BlockN / WarpsN;
  static constexpr int kFragsM = kWarpM / 16, kFragsN = kWarpN / 8;  // MMA tiles per warp
  static constexpr int kStageRowBytes = 64;                            // reduction bytes per stage
  // Shared rows padded by 16 bytes: ldmatrix's eight 16-byte rows then fall in distinct bank groups
  // (Note [mma shared layout]).
  static constexpr int kRowPitch = kStageRowBytes + 16;
  static constexpr int kStageBytes = (BlockM + BlockN) * kRowPitch;
  static constexpr int kSmemBytes = Stages * kStageBytes;
  static_assert(kWarpM % 16 == 0 && kWarpN % 16 == 0, "a warp holds whole 16x16 fragment pairs");
  static_assert(kThreads % BlockM == 0, "element gather: each thread owns one pixel column");
  static_assert((BlockM * 4) % kThreads == 0 && (BlockN * 4) % kThreads == 0, "vector gather: equal chunks");
  static_assert(kSmemBytes <= 227 * 1024, "dynamic shared memory of one block on sm_90");
};

using ImplicitMmaTiles = std::tuple<ImplicitMmaTile<128, 128, 2, 4, 4, 2>,  // large layers
                                    ImplicitMmaTile<128, 64, 2, 2, 4, 3>,   // K/G = 64, or too few 128x128 blocks
                                    ImplicitMmaTile<64, 128, 2, 4, 4, 2>,   // small N*P*Q, many filters
                                    ImplicitMmaTile<64, 64, 2, 2, 4, 4>>;   // small problems: more blocks

/// A row of the catalog.
struct MmaTileShape {
  int block_m, block_n, warps_m, warps_n, stages, threads, smem_bytes;
  /// "mma128x64": block_m x block_n.
  std::string name() const { return "mma" + std::to_string(block_m) + "x" + std::to_string(block_n); }
};

template <class... Tiles>
constexpr std::array<MmaTileShape, sizeof...(Tiles)> make_mma_catalog(std::tuple<Tiles...>*) {
  return {{{Tiles::kBlockM, Tiles::kBlockN, Tiles::kWarpsM, Tiles::kWarpsN, Tiles::kStages, Tiles::kThreads,
            Tiles::kSmemBytes}...}};
}
inline constexpr auto kMmaTileCatalog = make_mma_catalog(static_cast<ImplicitMmaTiles*>(nullptr));

inline int find_mma_tile(std::string_view name) {
  return find_by_name(kMmaTileCatalog, name);
}

template <class F>
bool visit_mma_tile(int index, F&& f) {
  return visit_type_at<ImplicitMmaTiles>(index, f);
}

}  // namespace mconv::detail
