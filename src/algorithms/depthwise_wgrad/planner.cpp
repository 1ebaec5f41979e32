// Planner of depthwise_wgrad (Note [depthwise wgrad]).
#include "planner.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "../common/filter_size_switch.cuh"
#include "../common/host_math.hpp"
#include "../common/split_k.hpp"

namespace mconv::detail {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kTapChunk = 16;              // taps a thread of the tap-chunk kernel accumulates
constexpr int kMaxAccumulators = 36;       // taps x vector: fp32 sums a thread keeps in registers
constexpr int64_t kSmemBytes = 48 << 10;   // the block's partial sums, without opting in to more
constexpr int kMaxClusterSplit = 16;       // Hopper's non-portable cluster (the launcher falls back to 8)
constexpr int kMaxAtomicSlices = 8;        // fp32 dw; 16-bit dw rounds at every add: 4
constexpr int kMinSectorBytes = 16;        // a block's share of a pixel's channels
constexpr int64_t kMinItemsPerThread = 4;  // below this a split costs more in its sum than it saves

// Filters k and k + 1 are adjacent in dy (and, with K/G = 1, their x channels in x): the filters
// are then the threads' fast axis (channels-last tensors), else the pixels are (plane order).
bool filters_adjacent(const WgradLayer& l, const TensorDesc& w, const GroupStrides& groups) {
  return l.kg == 1 ? groups.w == 1 : w.strides[0] == 1 && groups.w == l.kg;
}

}  // namespace

int depthwise_wgrad_window(const Problem& step, bool down) {
  const WgradLayer l(step);
  const int64_t stride = down ? l.stride_h : l.stride_w, dil = down ? l.dil_h : l.dil_w;
  return (stride == 1 || stride == 2) && dil == 1 ? cuda::constant_filter_size(l.r, l.s) : 0;
}

std::string depthwise_wgrad_unsupported(const Problem& step, const TensorDesc& x, const TensorDesc& w,
                                        const TensorDesc& y) {
  if (step.n != 1)
    return "more than one image (a wgrad step's images are the layer's input channels per group; with more "
           "than one its filter gradient is a GEMM over them)";
  if (step.mode == Mode::Convolution) return "flipped filters (true convolution)";
  if (x.dtype == DType::Float64 || w.dtype == DType::Float64 || y.dtype == DType::Float64)
    return "fp64 runs on the cpu target only";
  // The kernel's offsets inside one image of x and of dy are 32-bit.
  const int64_t x_image = (step.h - 1) * std::abs(x.strides[2]) + (step.w - 1) * std::abs(x.strides[3]);
  const int64_t dy_image = (step.r - 1) * std::abs(w.strides[2]) + (step.s - 1) * std::abs(w.strides[3]);
  if (std::max(x_image, dy_image) >= (int64_t(1) << 31) - 1) return "an image of x or dy spans 2^31 elements or more";
  const WgradLayer l(step);
  if (l.n * l.p * l.q >= (int64_t(1) << 31)) return "N * P * Q is 2^31 or more (32-bit item indices)";
  return "";
}

DepthwiseWgradDivision plan_depthwise_wgrad(const Problem& step, const TensorDesc& x, const TensorDesc& w,
                                            const GroupStrides& groups, const HardwareModel& hw, bool deterministic,
                                            std::vector<std::string>& why) {
  const WgradLayer l(step);
  DepthwiseWgradDivision d;
  const bool adjacent = filters_adjacent(l, w, groups);
  // Threads along the pixels (plane order) take runs down a column, so that a warp's loads are
  // adjacent elements of a row; threads along the filters take runs along a row.
  const int ks = depthwise_wgrad_window(step, !adjacent);
  d.window = ks;
  d.run_down = !adjacent && ks > 0;
  d.taps_per_block = ks > 0 ? ks * ks : kTapChunk;
  // Runs down a column of 8 rows (4 at stride 2) measured 1.2-1.5x slower on MobileNetV2's 3x3
  // layers than runs of 4 (2), 5% faster on EfficientNet's 5x5 ones.
  d.run = ks > 0 ? ((d.run_down ? l.stride_h : l.stride_w) == 1 ? 4 : 2) : 1;
  // A vector of adjacent filters a thread: one load of x (their own channels, K/G = 1) and of dy a
  // pixel, as many as 16 bytes hold and the registers for taps x vector sums allow.
  if (ks > 0 && adjacent && l.kg == 1 && groups.x == 1) {
    int v = 16 / dtype_size(x.dtype);
    while (v > 1 && ks * ks * v > kMaxAccumulators) v /= 2;
    bool fits = l.k % v == 0;
    for (int64_t stride : {x.strides[1], x.strides[2], x.strides[3], w.strides[1], w.strides[2], w.strides[3]})
      fits = fits && stride % v == 0;
    d.vector = fits ? v : 1;
  }
  const int64_t vectors = l.k / d.vector;
  const int64_t tap_chunks = ceil_div(l.r * l.s, int64_t(d.taps_per_block));
  // Note [depthwise wgrad]: four blocks an SM. The filter chunks come first; a cluster's blocks sum
  // in rank order (deterministic, no workspace); only then clusters add into dw with atomics, fewer
  // where every add rounds to 16 bits.
  const int64_t wanted = 4 * int64_t(std::max(hw.sm_count, 1));
  const int64_t max_slices = deterministic ? 1 : dtype_size(x.dtype) == 4 ? kMaxAtomicSlices : kMaxAtomicSlices / 2;
  // Threads along adjacent filters read whole sectors of a pixel's channels: as many vectors a block
  // as divide the filters (no idle lane), up to a warp, and whose partial sums fit shared memory;
  // fewer where the chunks, split as far as they go, would not fill the GPU, down to 16 bytes of a
  // pixel a block.
  if (adjacent) {
    const int64_t vector_bytes = int64_t(d.vector) * dtype_size(x.dtype);
    int tc = 32;
    while (tc > 1 && (vectors % tc != 0 || int64_t(kWarps) * tc * d.taps_per_block * d.vector * 4 > kSmemBytes))
      tc /= 2;
    while (tc > 1 && ceil_div(vectors, int64_t(tc)) * tap_chunks * kMaxClusterSplit * max_slices < wanted &&
           tc / 2 * vector_bytes >= kMinSectorBytes)
      tc /= 2;
    d.chunk_vectors = tc;
  }
  const int64_t chunks = ceil_div(vectors, int64_t(d.chunk_vectors));
  const int64_t slots = kThreads / d.chunk_vectors;
  d.items = d.run_down ? l.n * ceil_div(l.p, int64_t(d.run)) * l.q : l.n * l.p * ceil_div(l.q, int64_t(d.run));
  const int64_t base = chunks * tap_chunks;
  const int64_t most = std::max<int64_t>(1, d.items / (slots * kMinItemsPerThread));
  d.cluster_split =
      static_cast<int>(std::clamp<int64_t>(ceil_div(wanted, base), 1, std::min<int64_t>(kMaxClusterSplit, most)));
  d.atomic_slices = static_cast<int>(std::clamp<int64_t>(
      wanted / (base * d.cluster_split), 1, std::max<int64_t>(1, std::min(max_slices, most / d.cluster_split))));
  if (d.atomic_slices > 1) d.prepass_blocks = split_prepass_blocks(l.k * l.r * l.s, hw);
  d.launch.grid_x = chunks;
  d.launch.grid_y = tap_chunks;
  d.launch.grid_z = int64_t(d.atomic_slices) * d.cluster_split;
  d.launch.threads = kThreads;
  d.launch.smem_bytes = int64_t(kWarps) * d.chunk_vectors * d.taps_per_block * d.vector * 4;
  why.push_back("depthwise_wgrad: " + std::to_string(d.chunk_vectors) + " x " + std::to_string(d.vector) +
                " filters a block (" + (adjacent ? "threads along the filters" : "threads along the pixels") + "), " +
                (ks > 0 ? std::to_string(ks) + "x" + std::to_string(ks) + " taps from a register window over runs of " +
                              std::to_string(d.run) + " dy pixels " + (d.run_down ? "down a column" : "along a row")
                        : std::to_string(d.taps_per_block) + " taps a block") +
                ", " + std::to_string(d.items) + " items over " + std::to_string(d.cluster_split) +
                " cluster block(s) x " + std::to_string(d.atomic_slices) + " slice(s)" +
                (d.atomic_slices > 1 ? " adding with atomics"
                 : deterministic     ? " (deterministic)"
                                     : ""));
  return d;
}

}  // namespace mconv::detail
