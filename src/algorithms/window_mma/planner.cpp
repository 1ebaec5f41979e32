// Planner of window_mma (Note [window mma]).
#include "planner.hpp"

#include <algorithm>
#include <cstdint>
#include <numeric>

#include "../common/host_math.hpp"
#include "../common/smem_budget.hpp"

namespace mconv::detail {
namespace {

/// Layers of at most 64 filters take blocks of 256 pixels x 64 filters (two m64n64 tiles a
/// warpgroup), the others 128 x 128 (one m64n128 tile a warpgroup).
int64_t block_filters_of(const Problem& p) {
  return p.k <= 64 ? 64 : 128;
}
int64_t block_pixels_of(int64_t block_filters) {
  return block_filters == 64 ? 256 : 128;
}

}  // namespace

int64_t window_mma_image_rows(const Problem& p) {
  return (p.p() - 1) * p.stride_h + (p.r - 1) * p.dil_h + 1;
}

int64_t window_mma_channel_pitch(int64_t rows, int64_t columns) {
  return round_up(rows * columns + 24, int64_t(32)) - 24;
}

int64_t window_mma_rows(const Problem& p, int64_t block_pixels) {
  const int64_t q = p.q(), pq = p.p() * q, hv = window_mma_image_rows(p);
  // A block's rows depend only on where its first pixel falls in its image (the batch taken as
  // unbounded, an upper bound for the last block), which repeats every pq / gcd(block_pixels, pq).
  const auto virtual_row = [&](int64_t m) { return m / pq * hv + m % pq / q * p.stride_h; };
  const int64_t period = pq / std::gcd(block_pixels, pq);
  int64_t most = 0;
  for (int64_t b = 0; b < period; ++b) {
    const int64_t m0 = b * block_pixels % pq;
    most = std::max(most, virtual_row(m0 + block_pixels - 1) - virtual_row(m0));
  }
  return most + (p.r - 1) * p.dil_h + 1;
}

int64_t window_mma_columns(const Problem& p) {
  return (p.q() - 1) * p.stride_w + (p.s - 1) * p.dil_w + 1;
}

int64_t window_mma_stage_bytes(const Problem& p, int64_t block_pixels, int64_t block_filters) {
  const int64_t filters = ceil_div(p.r * p.s, int64_t(kWindowMmaTapsPerRow)) * block_filters * 128;
  const int64_t window =
      kWindowMmaChunk * window_mma_channel_pitch(window_mma_rows(p, block_pixels), window_mma_columns(p)) * 4;
  return round_up(filters + window, int64_t(1024));
}

int64_t window_mma_smem_bytes(const Problem& p, int64_t block_pixels, int64_t block_filters, int64_t stages,
                              int64_t split) {
  const int64_t bytes = stages * window_mma_stage_bytes(p, block_pixels, block_filters);
  // Each thread's 64 partial sums, thread-major, where the blocks of a cluster split the chunks.
  const int64_t partials = split > 1 ? int64_t(4) * 64 * kWindowMmaThreads : 0;
  return std::max(bytes, partials) + 1024;
}

std::string window_mma_unsupported(const Problem& p, const TensorDesc& x, const TensorDesc& w, const TensorDesc& y) {
  if (x.dtype != DType::Float32 || w.dtype != DType::Float32 || y.dtype != DType::Float32)
    return "fp32 tensors only (in TF32 math)";
  if (p.groups != 1) return "groups (one group only)";
  if (p.n * p.p() * p.q() >= (int64_t(1) << 31)) return "N * P * Q is 2^31 or more (32-bit pixel indices)";
  const int64_t filters = block_filters_of(p);
  if (window_mma_smem_bytes(p, block_pixels_of(filters), filters, 2, 1) > 227 * 1024)
    return "two chunks of 8 channels (the window and " + std::to_string(filters) + " filter rows of " +
           std::to_string(p.r * p.s) +
           " taps) exceed a block's shared memory (filter too large, rows too wide, "
           "stride or dilation too large)";
  return "";
}

WindowMmaDivision plan_window_mma(const Problem& p, const HardwareModel& hw, std::vector<std::string>& why) {
  WindowMmaDivision d;
  d.block_filters = static_cast<int>(block_filters_of(p));
  d.block_pixels = static_cast<int>(block_pixels_of(d.block_filters));
  const int64_t npq = p.n * p.p() * p.q();
  // The most stages (up to 3) that fit one block an SM (the kernel's registers hold one).
  int64_t stages = 0;
  for (int64_t s = 3; s >= 2 && stages == 0; --s)
    if (window_mma_smem_bytes(p, d.block_pixels, d.block_filters, s, 1) <= smem_block_limit(hw)) stages = s;
  if (stages == 0)
    throw Error(Status::Unsupported,
                "algorithm: window_mma: no two chunks of the window fit this device's shared "
                "memory");
  const int64_t chunk = kWindowMmaChunk;
  const int64_t chunks = ceil_div(p.c, chunk);
  const int64_t tiles = ceil_div(npq, int64_t(d.block_pixels)) * ceil_div(p.k, int64_t(d.block_filters));
  // A cluster splits the chunks while the tiles fill less than half the resident blocks, each block
  // keeping at least two chunks.
  const int64_t slots = std::max(hw.sm_count, 1);
  int64_t split = 1;
  while (split * 2 <= kWindowMmaMaxSplit && tiles * split * 2 <= slots && chunks >= split * 4) split *= 2;
  d.chunk_c = static_cast<int>(chunk);
  d.stages = static_cast<int>(stages);
  d.cluster_split = static_cast<int>(split);
  d.window_rows = static_cast<int>(window_mma_rows(p, d.block_pixels));
  d.window_columns = static_cast<int>(window_mma_columns(p));
  d.smem_bytes = window_mma_smem_bytes(p, d.block_pixels, d.block_filters, stages, split);
  d.launch.grid_x = ceil_div(npq, int64_t(d.block_pixels));
  d.launch.grid_y = ceil_div(p.k, int64_t(d.block_filters));
  d.launch.grid_z = split;
  d.launch.threads = kWindowMmaThreads;
  d.launch.smem_bytes = d.smem_bytes;
  why.push_back("window_mma: blocks of " + std::to_string(d.block_pixels) + " output pixels x " +
                std::to_string(d.block_filters) + " filters multiplied out of their window of x (" +
                std::to_string(d.window_rows) + " rows of " + std::to_string(d.window_columns) + "), " +
                std::to_string(chunk) + " channels a chunk in " + std::to_string(stages) + " buffers (" +
                std::to_string(chunks) + " chunks), " + std::to_string(tiles) + " tiles" +
                (split > 1 ? " split over clusters of " + std::to_string(split) : std::string()) + ", one block an SM");
  return d;
}

}  // namespace mconv::detail
