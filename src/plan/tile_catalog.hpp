// The closed set of CUDA implicit-GEMM tile shapes. The planner (heuristics.cpp) picks one by name;
// the CUDA dispatcher (src/cuda/implicit_precomp_launch.cu) instantiates exactly these, and
// static_asserts that each instantiation matches its entry here.
#pragma once

#include <array>
#include <string_view>

namespace mconv::detail {

struct TileShape {
  std::string_view name;
  int block_m;  // output pixels per block (GEMM M)
  int block_n;  // filters per block (GEMM N)
  int block_k;  // virtual-matrix rows per pipeline stage (GEMM K)
  int thread_m, thread_n;  // register micro-tile per thread
  int stages;
};

// Threads per block = (block_m / thread_m) * (block_n / thread_n): 256, or 128 for the smallest tile.
inline constexpr std::array<TileShape, 5> kTileCatalog{{
    {"128x128x8", 128, 128, 8, 8, 8, 3},  // large layers: 64 FFMA per 16 shared-memory floats read
    {"128x64x8", 128, 64, 8, 8, 4, 3},    // K/G = 64 (resnet50 stage 1, vgg16 conv1)
    {"64x64x8", 64, 64, 8, 4, 4, 3},      // small N*P*Q (late stages at batch 1)
    {"128x32x8", 128, 32, 8, 4, 4, 3},    // small K/G
    {"64x32x8", 64, 32, 8, 4, 4, 3},      // tiny problems: more blocks to fill 132 SMs
}};

inline const TileShape* find_tile(std::string_view name) {
  for (const auto& t : kTileCatalog)
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace mconv::detail
