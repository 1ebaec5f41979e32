// The algorithm Auto runs: every rule with the measurements behind it.
#include "heuristics.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "../algorithms/single_channel/planner.hpp"

namespace mconv::detail {

Algorithm choose_algorithm(const Problem& p, const TensorDesc& x, const HardwareModel& hw,
                           std::vector<std::string>& why) {
  // Depthwise with one filter per group, where the plane stream runs it (Note [plane stream]).
  // Measured on the H100, depthwise suite (MobileNetV2, batch 32): 1.5-2.8x faster than direct_block
  // on all 10 layers (the plane stream's first version).
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
  // on the H100 (single_channel suite, every algorithm) it is the fastest mconv
  // algorithm on all 18 layers, by 1.07-2.2x: 1x1 28x28 3.0 us vs the GEMM's 3.2 and 56x56 3.7 vs 4.1
  // (with the paper's division the GEMM had won both). Where it lost: runs of one row with 5x5 or larger
  // filters and no column pairs, every output reloading its R*S taps (single_h112_m128_k5 before
  // column pairs: 10.2 us vs the GEMM's 8.7).
  if (p.c_per_group() == 1) {
    std::vector<std::string> scratch;
    try {
      const auto div = plan_single_channel(p, hw, scratch);
      const int run = div.run;
      // y's layout is not known here: x's stands for it (they match in every suite).
      const bool pairs = single_channel_column_pairs(p, x);
      if (single_channel_reloads_taps(p, div, pairs)) {
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
  // Few filters over many channels (an output head; the dgrad phase steps of an RGB first layer,
  // whose filters are dx's 3 channels): the GEMM's tiles idle all but K/G of their 32+ filter lanes,
  // and direct_block's blocks hold only the filters there are. Measured on the H100 (resnet50 conv1's
  // dgrad, fp32, batch 32, every family forced): direct_block 1.69 ms, implicit_precomp 3.76,
  // stride_fixed 5.64. Channels-last, where direct_block reads x an element at a time C apart, it
  // still won conv1's dgrad (2.49 against 3.66 ms) and the 3x3 heads (rgb_out_c64_h256_k3 0.77
  // against 0.92) but lost the 1x1 head 4.6x (mask_head_c64_h256_k1 0.680 against 0.147): 1x1
  // layers there stay on the GEMM.
  if (few_filters(p) && !(p.r * p.s == 1 && x.strides[3] != 1)) {
    why.push_back("algorithm direct_block: K/G = " + std::to_string(p.k_per_group()) +
                  " filters over C/G = " + std::to_string(p.c_per_group()) +
                  " channels (the GEMM would idle all but K/G of its filter lanes; measured faster on the H100)");
    return Algorithm::DirectBlock;
  }
  // Multi channel: stride_fixed (Note [stride-fixed on Hopper]) against the implicit GEMM, measured
  // on the H100 (multi_channel, vgg16 and resnet50 suites with every algorithm):
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

bool few_filters(const Problem& p) {
  return p.k_per_group() <= 4 && p.c_per_group() >= 16;
}

// Note [few filters off the tensor cores] (TF32 now; fp16/bf16 layers of one group go to
// few_filter first, Note [few-filter forward]): the tensor-core tile for at most 16 filters (Note [mma
// narrow filter tiles]) still idles 13 of its 16 filter lanes on 3 filters, and in plane order its
// x is gathered an element at a time, while direct_block reads x's rows as 16-byte vectors once per
// tile for all of a block's filters. Measured on the H100 (one call, mconv only; every layer of
// narrow_output and resnet50 conv1's dgrad, Auto against forced implicit_mma and direct_block):
// - plane order: conv1's dgrad TF32 2.133 -> 0.836 ms (exact FFMA), bf16 2.150 -> 0.960, fp16 2.144
//   -> 0.967; the 3x3 heads of 1-3 filters 2.5-3.4x (rgb_out_c64_h256_k3 TF32 0.517 -> 0.161 ms,
//   bf16 0.537 -> 0.185); the 1x1 head of one filter lost (TF32 0.055 against 0.072, bf16 0.043
//   against 0.070), so 1x1 layers stay;
// - channels-last x, read an element at a time C apart, lost 2.7-18x (conv1's bf16 dgrad 0.744
//   against 2.000 ms; rgb_out_c64_h256_k3 0.153 against 0.441).
bool few_filters_leave_tensor_cores(const Problem& p, const TensorDesc& x) {
  return few_filters(p) && p.r * p.s > 1 && x.strides[3] == 1;
}

}  // namespace mconv::detail
