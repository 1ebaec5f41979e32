#include "heuristics.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "single_channel_planner.hpp"

namespace mconv::detail {

const TileShape& choose_implicit_precomp_tile(const Problem& p, const DeviceSummary& dev, bool rows_gather,
                                              std::vector<std::string>& why) {
  const int64_t cols = p.n * p.p() * p.q();
  const int64_t kg = p.k_per_group();
  const int sms = dev.sm_count > 0 ? dev.sm_count : 132;  // plan for an H100 when no device is visible
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
    const TileShape& t = *find_tile(rows_gather ? "128x128x8" : "128x128x16");
    why.push_back("tile " + std::string(t.name) + ": K/G = " + std::to_string(kg) + " > 64, N*P*Q = " +
                  std::to_string(cols) + " >= 512, C/G*R*S >= 64 (128x128 measured best for such layers on the H100)");
    return t;
  }
  // K/G in (32, 64]: 128x64x16 ran 1.00-1.03x faster than 128x64x8 on all 10 such layers of
  // vgg16/resnet50/multi_channel, 0.97x on resnet50_conv1 (H100, one forced run each).
  if (kg > 32 && kg <= 64 && cols >= 4 * 128 && p.c_per_group() * p.r * p.s >= 64 && !rows_gather) {
    why.push_back("tile 128x64x16: K/G = " + std::to_string(kg) + " in (32, 64], C/G*R*S >= 64 (measured on the H100)");
    return *find_tile("128x64x16");
  }
  const TileShape* last = nullptr;
  for (const auto& t : kTileCatalog)
    if (t.planner_candidate) last = &t;
  for (const auto& t : kTileCatalog) {
    if (!t.planner_candidate) continue;
    if (kg <= t.block_n / 2 && t.block_n > 32) continue;  // more than half the filter tile would idle
    int64_t blocks = ((cols + t.block_m - 1) / t.block_m) * ((kg + t.block_n - 1) / t.block_n) * p.groups;
    if (blocks >= sms || &t == last) {
      std::ostringstream os;
      os << "tile " << t.name << ": " << blocks << " blocks for " << sms << " SMs (K/G = " << kg << ", N*P*Q = " << cols
         << "); larger tiles skipped for K/G <= block_n/2 or fewer blocks than SMs";
      why.push_back(os.str());
      return t;
    }
  }
  return *last;
}

Algorithm choose_algorithm(const Problem& p, const TensorDesc& x, std::vector<std::string>& why) {
  // Depthwise with one filter per group, where the plane stream runs it (Note [plane stream]).
  // Measured on the H100, depthwise suite (MobileNetV2, batch 32): 1.5-2.8x faster than direct_block
  // on all 10 layers (first version, 2026-11-22).
  if (p.c_per_group() == 1 && p.k_per_group() == 1 && plane_stream_unsupported(p, x).empty()) {
    why.push_back(
        "algorithm single_channel: K/G = C/G = 1 (depthwise): the plane stream (measured faster than "
        "direct_block on every MobileNetV2 depthwise layer)");
    return Algorithm::SingleChannel;
  }
  // Depthwise (one channel per group, at most 4 filters per group): the implicit GEMM would use 1 of
  // its 32+ filter lanes. Measured on the H100, depthwise suite: implicit_precomp 0.14x cuDNN.
  if (p.groups > 1 && p.c_per_group() == 1 && p.k_per_group() <= 4) {
    why.push_back("algorithm direct_block: depthwise (C/G = 1, K/G = " + std::to_string(p.k_per_group()) +
                  "): implicit GEMM would idle all but K/G of its filter lanes");
    return Algorithm::DirectBlock;
  }
  // Single channel with many filters (C/G = 1): the paper's division, reshaped where the kernel
  // needs it, and its kernel, each thread's run of outputs walking the block's filters (Note
  // [single-channel runs], [single-channel column pairs], [single-channel block shape]). Graph-timed
  // on the H100 (single_channel suite, every algorithm, eleventh session) it is the fastest mconv
  // algorithm on all 18 layers, by 1.07-2.2x: 1x1 28x28 3.0 us vs the GEMM's 3.2 and 56x56 3.7 vs 4.1
  // (with the paper's division the GEMM had won both). Where it lost: runs of one row with 5x5 or larger
  // filters and no column pairs, every output reloading its R*S taps (single_h112_m128_k5 before
  // column pairs: 10.2 us vs the GEMM's 8.7).
  if (p.c_per_group() == 1) {
    std::vector<std::string> scratch;
    try {
      const auto div = plan_single_channel(p, planning_hardware_model(scratch), scratch);
      const int run = single_channel_run(p, div.filters_per_block, div.rows_per_block);
      // y's layout is not known here: x's stands for it (they match in every suite).
      const bool pairs = single_channel_column_pairs(p, x);
      if (run == 1 && !pairs && p.r * p.s >= 25) {
        why.push_back(
            "algorithm implicit_precomp: single channel, but the division gives 1-row blocks and each of "
            "their outputs would reload its " +
            std::to_string(p.r * p.s) + " taps");
        return Algorithm::ImplicitPrecomp;
      }
      why.push_back("algorithm single_channel: C/G = 1, K/G = " + std::to_string(p.k_per_group()) + ", runs of " +
                    std::to_string(run) + " rows" + (pairs ? " x 2 columns" : "") + " over " +
                    std::to_string(div.filters_per_block) +
                    " filters per block (measured faster than direct_block and the GEMM there)");
      return Algorithm::SingleChannel;
    } catch (const Error& e) {
      why.push_back(std::string("algorithm implicit_precomp: single channel, but ") + e.what());
      return Algorithm::ImplicitPrecomp;
    }
  }
  // Multi channel: stride_fixed (Note [stride-fixed on Hopper]) against the implicit GEMM, measured
  // on the H100 (multi_channel, vgg16 and resnet50 suites with every algorithm, 2026-11-22):
  //  - few channels, many outputs: the GEMM's K = C*R*S is short while the direct lines reuse each
  //    input R*S times. stride_fixed 1.12-1.52x faster for C = 64 at 224x224 and 512x512 (3x3, 5x5)
  //    and 112x112 (5x5); the GEMM 1.14x faster at 112x112 3x3 and on 56x56 maps. Hence
  //    P*Q*R*S >= 250k per image and 32 <= C <= 64 (C = 3 was a tie; C = 1 is not measured);
  //  - 1x1 with 512-4096 outputs and C >= 128 where the GEMM's 128 x 128 tiles make fewer than 32
  //    blocks (a quarter of the H100's SMs), while the channel slices fill the SMs: 1.23-1.30x
  //    (multi_h28_c256_k1, multi_h56_c128_k1). With K >= 512 (resnet50's 7x7 1x1 layers, batch 32)
  //    the GEMM's grid is full and stride_fixed measured 2-3x slower;
  //  - 1x1 on maps of 50k+ outputs per image with 32 <= C <= 64, since those take twice the
  //    segment (Note [stride-fixed 1x1 rounds]): 1.05x at 224x224, 1.10x at 512x512 (C = 64); the
  //    GEMM 1.25x faster on resnet50's 56x56 C = 64 layer (batch 32);
  //  - 3x3/5x5 on maps of at most 256 outputs with C >= 256: stride_fixed 1.0-1.44x;
  //  - 3x3 on 2500-12800 outputs with 64 <= C <= 128, since stride_fixed takes 4 pixels a thread
  //    there (Note [stride-fixed thread pixels]): 1.09x at 56x56 (C = 128), 1.11x at 112x112
  //    (C = 64); the GEMM still 1.05x faster at 28x28 (C = 256) and on the 5x5 layers of 28x28
  //    and 56x56.
  // Everywhere else the GEMM won, by up to 4x on resnet50's 1x1 and strided layers.
  const bool square = p.r == p.s && p.stride_h == 1 && p.stride_w == 1 && p.dil_h == 1 && p.dil_w == 1;
  const int64_t cg = p.c_per_group(), outputs = p.n * p.p() * p.q();
  const int64_t gemm_tiles = (outputs + 127) / 128 * ((p.k_per_group() + 127) / 128) * p.groups;
  const bool stride_fixed_wins =
      square && p.k_per_group() >= 64 &&
      ((p.r >= 3 && p.r <= 7 && cg >= 32 && cg <= 64 && p.p() * p.q() * p.r * p.s >= 250000) ||
       (p.r == 1 && cg >= 128 && outputs >= 512 && outputs <= 4096 && gemm_tiles < 32) ||
       (p.r == 1 && cg >= 32 && cg <= 64 && p.p() * p.q() >= 50000) ||
       (p.r >= 3 && p.r <= 5 && cg >= 256 && outputs <= 256) ||
       (p.r == 3 && cg >= 64 && cg <= 128 && outputs >= 2500 && outputs <= 12800));
  if (stride_fixed_wins) {
    why.push_back("algorithm stride_fixed: C/G = " + std::to_string(cg) + ", " + std::to_string(p.r) + "x" +
                  std::to_string(p.s) + ", " + std::to_string(p.p()) + "x" + std::to_string(p.q()) +
                  " outputs (measured faster than the implicit GEMM there)");
    return Algorithm::StrideFixed;
  }
  why.push_back("algorithm implicit_precomp: C/G = " + std::to_string(p.c_per_group()) +
                ", K/G = " + std::to_string(p.k_per_group()) +
                " fill the GEMM tiles (stride_fixed measured faster only on the layers above)");
  return Algorithm::ImplicitPrecomp;
}

const DirectShape& choose_direct_shape(const Problem& p, const DeviceSummary& dev, std::vector<std::string>& why) {
  const DirectShape* d = find_direct_shape("direct_32x8_r2x2_f1");
  const int64_t slots = p.groups * p.k_per_group();
  if (p.k_per_group() >= 4) {
    d = find_direct_shape("direct_32x8_r2x2_f4");
  } else if (p.p() <= 8 && p.q() <= 8 && slots >= 4 * 132) {
    // Small maps: one tile covers the map and several groups share a block (Note [packed groups]).
    // Before packing, mbv2_dw_c960_h7_s1 ran at 0.33x cuDNN with 49 of 128 threads busy (H100).
    d = find_direct_shape("direct_8x8_r1x1_f1_g4");
  } else if (p.p() <= 16 && p.q() <= 16 && slots >= 2 * 132) {
    d = find_direct_shape("direct_16x8_r2x1_f1_g2");
  } else if (p.q() <= 16) {
    d = find_direct_shape("direct_16x8_r1x1_f1");  // a 64-wide tile would leave most threads idle
  }
  const int64_t smem = direct_smem_bytes(p, *d);
  const int64_t limit = dev.smem_per_block_optin > 0 ? dev.smem_per_block_optin : 227 * 1024;
  if (smem > limit)
    throw Error(Status::Unsupported,
                "algorithm: direct_block needs " + std::to_string(smem / 1024) +
                    " KB of shared memory for its tile and halo (stride, dilation, filter), more than the " +
                    std::to_string(limit / 1024) + " KB a block can have");
  std::ostringstream os;
  os << "shape " << d->name << ": " << d->out_rows() << "x" << d->out_cols() << " outputs x " << d->filters
     << " filter(s) per block, input tile " << direct_tile_rows(p, *d) << "x" << direct_tile_cols(p, *d)
     << " with halo, " << smem << " B shared memory";
  why.push_back(os.str());
  return *d;
}

int choose_split_k(const Problem& p, const TileShape& t, const DeviceSummary& dev, std::vector<std::string>& why) {
  const int sms = dev.sm_count > 0 ? dev.sm_count : 132;
  const int64_t cols = p.n * p.p() * p.q();
  const int64_t blocks =
      ((cols + t.block_m - 1) / t.block_m) * ((p.k_per_group() + t.block_n - 1) / t.block_n) * p.groups;
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
