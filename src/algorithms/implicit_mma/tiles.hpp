// The tensor-core implicit-GEMM family's tile table: the one list of its kernel instantiations, from
// which the planner's catalog and the launcher's dispatch derive.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <tuple>

#include "../common/host_math.hpp"
#include "mconv/division.hpp"

namespace mconv::detail {

/// The MMA a tile issues: mma.sync per warp (every target), or Hopper's warpgroup MMA reading both
/// operands from shared memory (wgmma, sm_90a only: Note [wgmma mainloop]).
enum class MmaUnit { Warp, Warpgroup };

/// A block of BlockM output pixels x BlockN filters, split among WarpsM x WarpsN warps, each warp a
/// (BlockM/WarpsM) x (BlockN/WarpsN) tile of 16x8 MMA fragments. A pipeline stage holds RowBytes
/// bytes of every pixel's and every filter's reduction rows (RowBytes/2 fp16/bf16 or RowBytes/4 fp32
/// rows), Stages deep. Every tile has the vector forms (both operands vector, or vector images and
/// transposed filters: Note [mma gather forms]); `ElementGather` tiles also have the element forms
/// and the both-transposed form (mma_tile_has_forms). Calls the plan's forms cannot take run on
/// kElementFallbackTile. Warpgroup tiles: WarpsM warps of 16 pixels (a warpgroup per 64), each
/// warpgroup one 64 x BlockN wgmma tile; their stage rows are 128 swizzled bytes, no element forms.
template <int BlockM, int BlockN, int WarpsM, int WarpsN, int RowBytes, int Stages, int MinBlocks, bool ElementGather,
          MmaUnit Unit = MmaUnit::Warp, bool WarpSpecialized = false>
struct ImplicitMmaTile {
  static constexpr int kBlockM = BlockM, kBlockN = BlockN, kWarpsM = WarpsM, kWarpsN = WarpsN;
  static constexpr int kStages = Stages, kMinBlocks = MinBlocks;
  static constexpr bool kElementGather = ElementGather;
  static constexpr bool kWarpgroup = Unit == MmaUnit::Warpgroup;
  static constexpr int kThreads = 32 * WarpsM * WarpsN;
  static constexpr int kWarpM = BlockM / WarpsM, kWarpN = BlockN / WarpsN;
  static constexpr int kFragsM = kWarpM / 16, kFragsN = kWarpN / 8;  // MMA tiles per warp
  static constexpr int kStageRowBytes = RowBytes;                    // reduction bytes per stage
  static constexpr int kRowVectors = RowBytes / 16;                  // 16-byte vectors in a row
  // Shared rows padded by 16 bytes: ldmatrix's eight 16-byte rows then fall in distinct bank groups
  // (Note [mma shared layout]).
  // Warpgroup tiles: Note [wgmma shared layout] (common/wgmma.cuh) swizzles instead.
  static constexpr int kRowPitch = kWarpgroup ? kStageRowBytes : kStageRowBytes + 16;
  // Note [mma gather forms]: a transposed stage holds the rows of BlockM (or BlockN) 16-bit elements,
  // padded by 16 bytes. It fits the reduction-fastest bytes of the image operand; a narrow filter
  // tile's transposed rows (BlockN = 16: 48-byte rows) need more than its 16 padded rows, and the
  // filter part of a stage is the larger of the two.
  static constexpr int kTransposedRows = RowBytes / 2;
  static constexpr int kPitchA = BlockM * 2 + 16, kPitchB = BlockN * 2 + 16;
  // Note [wgmma wave-fitted filter tiles] (warp_specialized.cuh): a warpgroup tile whose filters
  // end in a partial block of 64 has only the cooperative form, forward layers only.
  static constexpr bool kWholeFilterBlocks = BlockN % 64 == 0;
  /// Whether the tile has the forms of one block a tile (plain, tensor-map, persistent).
  static constexpr bool kPlainForms = !kWarpgroup || kWholeFilterBlocks;
  static constexpr int kFilterBytes =
      kWarpgroup || BlockN * kRowPitch >= kTransposedRows * kPitchB ? BlockN * kRowPitch : kTransposedRows * kPitchB;
  static constexpr int kStageBytes = BlockM * kRowPitch + kFilterBytes;
  // Note [mma staged epilogue]: the fp32 results of the block, rows padded by 4 floats; Note [mma
  // cluster split] also parks them transposed (pixels fastest, kOutPitchM).
  static constexpr int kOutPitch = BlockN + 4, kOutPitchM = BlockM + 4;
  static constexpr int kOutBytes =
      (BlockM * kOutPitch > BlockN * kOutPitchM ? BlockM * kOutPitch : BlockN * kOutPitchM) * 4;
  // Warpgroup tiles align their stages to 1024 bytes at run time (the swizzle's groups): 1 KiB slack.
  static constexpr int kSmemBytes =
      (Stages * kStageBytes > kOutBytes ? Stages * kStageBytes : kOutBytes) + (kWarpgroup ? 1024 : 0);
  static_assert(RowBytes == 64 || RowBytes == 128, "a stage row is two or four MMA steps of 32 bytes");
  static_assert(kWarpM % 16 == 0 && kWarpN % (kWarpgroup ? 8 : 16) == 0,
                "a warp holds whole 16x16 fragment pairs (wgmma: 16 x 8 fragments)");
  static_assert(!ElementGather || kThreads % BlockM == 0, "element gather: each thread owns one pixel column");
  static_assert(kThreads % kRowVectors == 0, "vector gather: a thread keeps one vector position");
  static_assert(!kPlainForms || ((BlockM * kRowVectors) % kThreads == 0 && (BlockN * kRowVectors) % kThreads == 0),
                "vector gather: equal chunks");
  static_assert(kWarpgroup || kTransposedRows * kPitchA <= BlockM * kRowPitch,
                "transposed images fit the image operand's stage bytes");
  // Note [mma tf32 pixel runs]: TF32 transposed images, BlockM floats a row padded by 8, so that the
  // four rows a fragment load reads start 8 banks apart.
  static constexpr int kPitchA32 = BlockM * 4 + 32;
  static_assert(kWarpgroup || (RowBytes / 4) * kPitchA32 <= BlockM * kRowPitch,
                "TF32 transposed images fit the operand's stage bytes");
  // Note [mma tf32 transposed filters] (kernel.cuh): likewise BlockN floats a row padded by 8.
  static constexpr int kPitchB32 = BlockN * 4 + 32;
  static_assert(kWarpgroup || (RowBytes / 4) * kPitchB32 <= kFilterBytes,
                "TF32 transposed filters fit the operand's stage bytes");
  static_assert(!kWarpgroup || (RowBytes == 128 && WarpsN == 1 && WarpsM * 16 == BlockM && BlockM % 64 == 0 &&
                                BlockN % 8 == 0 && BlockN <= 256 && !ElementGather),
                "warpgroup tiles: 128-byte rows, a warpgroup per 64 pixels over every filter, no element form");
  static_assert(!kWarpgroup || kWholeFilterBlocks || (WarpSpecialized && BlockM == 128),
                "wave-fitted filter tiles: the cooperative form only");
  static_assert(!kPlainForms ||
                    (kThreads % (BlockM / 8) == 0 && kThreads % (BlockN / 8) == 0 &&
                     (kTransposedRows * BlockM / 8) % kThreads == 0 && (kTransposedRows * BlockN / 8) % kThreads == 0),
                "transposed gather: a thread keeps one vector column and copies equal chunks");
  static_assert(kThreads % (BlockM / 4) == 0 && ((RowBytes / 4) * BlockM / 4) % kThreads == 0,
                "TF32 transposed gather: a thread keeps one vector column and copies equal chunks");
  static_assert(kSmemBytes <= 227 * 1024, "dynamic shared memory of one block on sm_90");
  // Note [wgmma persistent tiles]: the stages, then an output buffer of the block's 16-bit tile.
  static constexpr int kPersistentSmemBytes = Stages * kStageBytes + BlockM * BlockN * 2 + 1024;
  static constexpr bool kPersistentForm = kWarpgroup && kWholeFilterBlocks && kPersistentSmemBytes <= 227 * 1024;
  // Note [wgmma warp-specialized tiles] (warp_specialized.cuh): one block an SM, a producer
  // warpgroup and two consumer warpgroups, on whole tiles of their own (ping-pong) or, with 128
  // pixels, on 64 pixels each of every tile (cooperative); as many stages as fit beside two output
  // buffers of a tile, at most 8. Both schedules use the same shared memory.
  static constexpr bool kWarpSpecializedForm = WarpSpecialized;
  static constexpr bool kCooperativeForm = WarpSpecialized && BlockM == 128;
  static constexpr int kWarpSpecializedThreads = 3 * 128;
  // Two buffers of a warpgroup's 16-bit tile (Note [wgmma wave-fitted filter tiles]: a 64-pixel
  // half of a cooperative tile; the tiles of whole blocks as they were measured, a cooperative
  // warpgroup using half of its buffer).
  static constexpr int kWarpSpecializedOutBytes = 2 * (kWholeFilterBlocks ? BlockM : 64) * BlockN * 2;
  static constexpr int kWarpSpecializedStagesFit = (227 * 1024 - 1024 - kWarpSpecializedOutBytes) / kStageBytes;
  static constexpr int kWarpSpecializedStages = kWarpSpecializedStagesFit < 8 ? kWarpSpecializedStagesFit : 8;
  static constexpr int kWarpSpecializedSmemBytes =
      kWarpSpecializedStages * kStageBytes + kWarpSpecializedOutBytes + 1024;
  static_assert(!WarpSpecialized || (kWarpgroup && (BlockM == 64 || BlockM == 128) && kWarpSpecializedStages >= 4),
                "warp-specialized tiles: 64 or 128 pixels, at least four stages");
  static_assert(RowBytes / 2 <= 64, "a stage's rows stay inside the offset table's padding (kOffsetTableRowAlign)");
  static_assert(kPlainForms || Stages == kWarpSpecializedStages,
                "a tile of warp-specialized forms only is named by their stages");
};

/// Note [wgmma deep tiles] (planner.cpp): the stages of the tiles kept for few-block wgrad steps.
inline constexpr int kDeepTileStages = 8;

// Measured choices are in planner.cpp; the names spell block, warps and stage-row bytes.
using ImplicitMmaTiles =
    std::tuple<ImplicitMmaTile<128, 256, 2, 4, 128, 3, 1, false>,  // 0: warps of 64x64, the most MMAs per byte read
               ImplicitMmaTile<128, 128, 2, 4, 128, 3, 2, false>,  // 1
               ImplicitMmaTile<128, 128, 2, 2, 128, 3, 2, false>,  // 2: warps of 64x64
               ImplicitMmaTile<128, 128, 2, 4, 64, 4, 2, true>,    // 3
               ImplicitMmaTile<128, 64, 2, 2, 128, 3, 2, false>,   // 4
               ImplicitMmaTile<128, 64, 2, 2, 64, 4, 3, true>,     // 5: the element-gather fallback
               ImplicitMmaTile<64, 128, 2, 4, 64, 4, 2, true>,     // 6
               ImplicitMmaTile<64, 64, 2, 2, 128, 3, 3, false>,    // 7
               ImplicitMmaTile<64, 64, 2, 2, 64, 4, 4, true>,      // 8: small problems
               // Note [wgmma mainloop]: sm_90a only.
               ImplicitMmaTile<128, 256, 8, 1, 128, 4, 1, false, MmaUnit::Warpgroup>,        // 9
               ImplicitMmaTile<128, 128, 8, 1, 128, 3, 2, false, MmaUnit::Warpgroup, true>,  // 10
               ImplicitMmaTile<128, 64, 8, 1, 128, 4, 2, false, MmaUnit::Warpgroup>,         // 11
               ImplicitMmaTile<128, 64, 8, 1, 128, 3, 3, false, MmaUnit::Warpgroup, true>,   // 12
               ImplicitMmaTile<64, 128, 4, 1, 128, 4, 2, false, MmaUnit::Warpgroup, true>,   // 13
               ImplicitMmaTile<64, 128, 4, 1, 128, 3, 3, false, MmaUnit::Warpgroup>,         // 14
               // Note [mma narrow filter tiles]: layers of at most 16 filters a group.
               ImplicitMmaTile<128, 16, 4, 1, 128, 3, 3, true>,  // 15
               // Wgrad steps of at most 64 filters, and persistent 1x1 layers of few tiles (planner.cpp).
               ImplicitMmaTile<64, 64, 4, 1, 128, 3, 4, false, MmaUnit::Warpgroup, true>,  // 16
               // Note [wgmma deep tiles] (planner.cpp): few-block wgrad steps, seven stages in flight.
               ImplicitMmaTile<64, 64, 4, 1, 128, kDeepTileStages, 1, false, MmaUnit::Warpgroup>,   // 17
               ImplicitMmaTile<64, 128, 4, 1, 128, kDeepTileStages, 1, false, MmaUnit::Warpgroup>,  // 18
               // Note [wgmma wave-fitted filter tiles]: cooperative only, forward layers.
               ImplicitMmaTile<128, 208, 8, 1, 128, 4, 1, false, MmaUnit::Warpgroup, true>>;  // 19
/// The tile that runs a layer with the element gather when its plan's tile has no such form.
inline constexpr int kElementFallbackTile = 5;
static_assert(std::tuple_element_t<kElementFallbackTile, ImplicitMmaTiles>::kElementGather,
              "the fallback tile has the element gather");

/// A row of the catalog.
struct MmaTileShape {
  int block_m, block_n, warps_m, warps_n, row_bytes, stages, threads, smem_bytes;
  int min_blocks;  ///< blocks an SM holds at once (the kernel's launch bound)
  bool element_gather, warpgroup;
  int persistent_smem_bytes;  ///< Note [wgmma persistent tiles]: that form's shared memory; 0 without one
  /// Note [wgmma warp-specialized tiles]: that form's shared memory (0 without one), stages and
  /// threads, and whether it has the cooperative schedule.
  int specialized_smem_bytes, specialized_stages, specialized_threads;
  bool cooperative;
  bool plain_forms;  ///< false: warp-specialized forms only (Note [wgmma wave-fitted filter tiles])
  /// "mma128x64_4w_64B": block_m x block_n, warps, stage-row bytes; "wgmma128x128_s3": block_m x
  /// block_n, stages (warpgroup tiles: a warpgroup per 64 pixels, 128-byte rows).
  std::string name() const {
    if (warpgroup)
      return "wgmma" + std::to_string(block_m) + "x" + std::to_string(block_n) + "_s" + std::to_string(stages);
    return "mma" + std::to_string(block_m) + "x" + std::to_string(block_n) + "_" + std::to_string(warps_m * warps_n) +
           "w_" + std::to_string(row_bytes) + "B";
  }
};

template <class... Tiles>
constexpr std::array<MmaTileShape, sizeof...(Tiles)> make_mma_catalog(std::tuple<Tiles...>*) {
  return {{{Tiles::kBlockM, Tiles::kBlockN, Tiles::kWarpsM, Tiles::kWarpsN, Tiles::kStageRowBytes, Tiles::kStages,
            Tiles::kThreads, Tiles::kSmemBytes, Tiles::kMinBlocks, Tiles::kElementGather, Tiles::kWarpgroup,
            Tiles::kPersistentForm ? Tiles::kPersistentSmemBytes : 0,
            Tiles::kWarpSpecializedForm ? Tiles::kWarpSpecializedSmemBytes : 0, Tiles::kWarpSpecializedStages,
            Tiles::kWarpSpecializedThreads, Tiles::kCooperativeForm, Tiles::kPlainForms}...}};
}
inline constexpr auto kMmaTileCatalog = make_mma_catalog(static_cast<ImplicitMmaTiles*>(nullptr));

/// Whether tile `t` has an instantiation of these gather forms for elements of `element_bytes` (the
/// catalog's rule, which the launcher's dispatch follows): vector images with vector or transposed
/// filters on every tile; element images under any filter form (vector filters: Note [mma filter
/// rows], planner.cpp), element filters under vector images, transposed images with vector filters (Note [mma tf32
/// pixel runs]) and the both-transposed form on ElementGather tiles; warpgroup tiles have the vector forms, transposed
/// images with vector filters and the both-transposed form, but no TF32 transposed filters (Note
/// [mma tf32 transposed filters]).
inline bool mma_tile_has_forms(const MmaTileShape& t, GatherForm a, GatherForm b, int element_bytes) {
  if (!t.plain_forms)  // Note [wgmma wave-fitted filter tiles]
    return element_bytes == 2 && a == GatherForm::Vector && b == GatherForm::Vector;
  if (t.warpgroup)
    return (element_bytes == 2 || b != GatherForm::Transposed) &&
           ((a == GatherForm::Vector && b != GatherForm::Element) ||
            (a == GatherForm::Transposed && b != GatherForm::Element));
  if (a == GatherForm::Vector && b != GatherForm::Element) return true;
  if (a == GatherForm::Transposed) return t.element_gather && b != GatherForm::Element;
  return t.element_gather;  // element images under any filter form (Note [mma filter rows], planner.cpp)
}

/// Note [mma cluster split]: slices of one tile, the blocks of one thread-block cluster: up to
/// Hopper's non-portable 16, lowered at launch to the portable 8 where a device cannot schedule 16
/// (common/kernel_launch.cuh, which holds the same numbers for the device side).
inline constexpr int kMaxClusterSplit = 16;
/// Note [mma atomic slices]: the largest cluster the planner combines with atomic groups.
inline constexpr int kPortableClusterSplit = 8;

inline int find_mma_tile(std::string_view name) {
  return find_by_name(kMmaTileCatalog, name);
}

template <class F>
bool visit_mma_tile(int index, F&& f) {
  return visit_type_at<ImplicitMmaTiles>(index, f);
}

}  // namespace mconv::detail
