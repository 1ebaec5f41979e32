// The closed set of CUDA implicit-GEMM tile shapes. The planner (heuristics.cpp) picks one by name;
// the CUDA dispatcher (src/cuda/implicit_precomp_launch.cu) instantiates exactly these, and
// static_asserts that each instantiation matches its entry here.
#pragma once

#include <array>
#include <string_view>

namespace mconv::detail {

struct TileShape {
  std::string_view name;
  int block_m;             // output pixels per block (GEMM M)
  int block_n;             // filters per block (GEMM N)
  int block_k;             // virtual-matrix rows per pipeline stage (GEMM K)
  int thread_m, thread_n;  // register micro-tile per thread
  int stages;
  bool planner_candidate;  // false: only when forced (kept for measurement, see heuristics.cpp)
};

// Threads per block = (block_m / thread_m) * (block_n / thread_n): 256, or 128 for the smallest tile.
inline constexpr std::array<TileShape, 7> kTileCatalog{{
    {"128x128x8", 128, 128, 8, 8, 8, 3, true},     // large layers: 64 FFMA per 16 shared-memory floats read
    {"128x64x8", 128, 64, 8, 8, 4, 3, true},       // K/G = 64 (resnet50 stage 1, vgg16 conv1)
    {"64x64x8", 64, 64, 8, 4, 4, 3, true},         // small N*P*Q (late stages at batch 1)
    {"128x32x8", 128, 32, 8, 4, 4, 3, true},       // small K/G
    {"64x32x8", 64, 32, 8, 4, 4, 3, true},         // tiny problems: more blocks to fill 132 SMs
    {"128x128x16", 128, 128, 16, 8, 8, 2, false},  // K/G > 64 with enough rows and columns: heuristics.cpp
    {"128x64x16", 128, 64, 16, 8, 4, 2, false},    // K/G in (32, 64] with enough rows: heuristics.cpp
}};

/// Thread-group shapes of the direct-block kernel (src/cuda/direct_block_kernel.cuh). Each thread
/// owns reg_rows x reg_cols outputs of `filters` filters.
struct DirectShape {
  std::string_view name;
  int threads_x, threads_y, reg_rows, reg_cols, filters;
  int groups_per_block;  // Note [packed groups] in direct_block_kernel.cuh
  int out_rows() const { return threads_y * reg_rows; }
  int out_cols() const { return threads_x * reg_cols; }
};

inline constexpr std::array<DirectShape, 5> kDirectCatalog{{
    // 32 x 64 outputs (r4x2) ran 2.2x slower than 16 x 64 on mbv2_dw_c32_h112_s1 (H100, 0.385 vs 0.176 ms).
    {"direct_32x8_r2x2_f1", 32, 8, 2, 2, 1, 1},     // depthwise, maps wider than 16: 16 x 64 outputs per block
    {"direct_16x8_r1x1_f1", 16, 8, 1, 1, 1, 1},     // depthwise, maps of 9-16 with too few groups to pack
    {"direct_32x8_r2x2_f4", 32, 8, 2, 2, 4, 1},     // several filters per group: 4 filters per thread
    {"direct_8x8_r1x1_f1_g4", 8, 8, 1, 1, 1, 4},    // depthwise, maps <= 8 wide and high: 4 groups per block
    {"direct_16x8_r2x1_f1_g2", 16, 8, 2, 1, 1, 2},  // depthwise, maps <= 16: one 16 x 16 tile, 2 groups per block
}};

inline const DirectShape* find_direct_shape(std::string_view name) {
  for (const auto& t : kDirectCatalog)
    if (t.name == name) return &t;
  return nullptr;
}

inline const TileShape* find_tile(std::string_view name) {
  for (const auto& t : kTileCatalog)
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace mconv::detail
