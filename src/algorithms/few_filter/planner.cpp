// Planner of few_filter (Note [few-filter forward]).
#include "planner.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "../common/host_math.hpp"
#include "../common/smem_budget.hpp"
#include "../common/x_window.hpp"

namespace mconv::detail {
namespace {

constexpr int64_t kBlocksPerSm = kFewFilterBlocksPerSm;

int64_t chunk_of(const Problem& p) {
  return std::min(round_up(p.c, int64_t(16)), kFewFilterMaxChunk);
}

}  // namespace

int64_t few_filter_window_bytes(const Problem& p, int64_t tile_p, int64_t tile_q, int64_t chunk_c) {
  const XWindowExtent e = x_window_extent(tile_p, tile_q, 1, p.r, p.s, p.stride_h, p.stride_w, p.dil_h, p.dil_w);
  return e.rows * e.columns * few_filter_pitch(2 * chunk_c);
}

int64_t few_filter_smem_bytes(const Problem& p, int64_t tile_p, int64_t tile_q, int64_t chunk_c, int64_t buffers) {
  const int64_t window = few_filter_window_bytes(p, tile_p, tile_q, chunk_c);
  const int64_t filters = kFewFilterMaxFilters * few_filter_pitch(2 * chunk_c * p.r * p.s);
  return buffers * round_up(window + filters, int64_t(16));
}

bool few_filter_vector_x(const Problem& p, const TensorDesc& x) {
  const auto& xs = x.strides;
  return xs[1] == 1 && p.c % 8 == 0 && xs[0] % 8 == 0 && xs[2] % 8 == 0 && xs[3] % 8 == 0;
}

// Measured on the H100 (bf16, bench/suites/narrow_output.csv, one call, Auto against forced
// implicit_mma and direct_block; resnet50 conv1's dgrad):
// - channels-last x: the 3x3 heads 2.1-2.5x (rgb_out_c64_h256_k3 149 -> 65 us, depth_head_c128 77 ->
//   37), conv1's dgrad 739 -> 249 us; the 1x1 head over 64 channels (one chunk) 39.6 -> 33.7 us, but
//   the 1x1 head over 256 (four chunks, 4 MMA steps each between barriers) 16.2 -> 29.5: a 1x1 layer
//   goes only where its channels are one chunk;
// - plane-order x (element copies, a warp's loads along x's rows): the 3x3 heads 1.6-2.4x over
//   direct_block (rgb_out_c64_h256_k3 186 -> 99 us, depth_head_c128 129 -> 55), the 1x1 heads lost
//   (42 -> 61 and 18 -> 52 us);
// - fewer than 8 channels were not measured and stay on implicit_mma.
bool few_filter_preferred(const Problem& p, const TensorDesc& x) {
  if (p.c < 8) return false;
  const bool vector = few_filter_vector_x(p, x);
  if (p.r * p.s == 1) return vector && p.c <= kFewFilterMaxChunk;
  return vector || x.strides[3] == 1;
}

std::string few_filter_unsupported(const Problem& p, const TensorDesc& x, const TensorDesc& w, const TensorDesc& y) {
  if (x.dtype != DType::Float16 && x.dtype != DType::BFloat16) return "fp16 and bf16 only";
  if (w.dtype != x.dtype || y.dtype != x.dtype) return "x, w and y of one dtype";
  if (p.groups != 1) return "groups (one group only)";
  if (p.k > kFewFilterMaxFilters) return "more than " + std::to_string(kFewFilterMaxFilters) + " filters";
  if (few_filter_smem_bytes(p, 1, 16, 16, p.c > 16 ? 2 : 1) > 227 * 1024)
    return "the window of 16 output pixels exceeds a block's shared memory (filter, stride or dilation too large)";
  if (p.n * p.p() * ceil_div(p.q(), int64_t(16)) >= (int64_t(1) << 31))
    return "N * P * Q / 16 is 2^31 or more (32-bit block indices)";
  return "";
}

FewFilterDivision plan_few_filter(const Problem& p, const HardwareModel& hw, std::vector<std::string>& why) {
  FewFilterDivision d;
  const int64_t pp = p.p(), qq = p.q();
  int64_t chunk = chunk_of(p);
  const auto buffers_of = [&](int64_t c) { return p.c > c ? int64_t(2) : int64_t(1); };
  // kBlocksPerSm blocks an SM where their shared memory allows, else one.
  const int64_t fits[] = {smem_per_resident_block(hw, kBlocksPerSm), smem_block_limit(hw)};
  // The tile whose work and window copies cost least: a block's time is its busiest warp's row
  // steps (ceil(steps / 8) of 16 pixels, each pixel 2), plus 1 a window pixel copied (a copy is
  // one pass over the pixel's channels, where a row step reads them for every tap).
  int64_t best_cost = std::numeric_limits<int64_t>::max();
  for (int64_t limit : fits) {
    for (int64_t c = chunk; c >= 16 && best_cost == std::numeric_limits<int64_t>::max(); c -= 16) {
      for (int64_t tq : {16, 32, 48, 64, 96, 128}) {
        if (tq > std::max<int64_t>(16, round_up(qq, int64_t(16)))) break;
        const int64_t steps_row = tq / 16;
        int64_t tp = std::min(kFewFilterMaxSteps / steps_row, pp);
        while (tp >= 1 && few_filter_smem_bytes(p, tp, tq, c, buffers_of(c)) > limit) --tp;
        if (tp < 1) continue;
        const XWindowExtent e = x_window_extent(tp, tq, 1, p.r, p.s, p.stride_h, p.stride_w, p.dil_h, p.dil_w);
        const int64_t per_block = ceil_div(tp * steps_row, int64_t(8)) * 8 * 16 * 2 + e.rows * e.columns;
        const int64_t cost = ceil_div(pp, tp) * ceil_div(qq, tq) * per_block;
        if (cost < best_cost) {
          best_cost = cost;
          d.tile_p = static_cast<int>(tp);
          d.tile_q = static_cast<int>(tq);
          chunk = c;
        }
      }
    }
    if (best_cost != std::numeric_limits<int64_t>::max()) break;
  }
  if (best_cost == std::numeric_limits<int64_t>::max())
    throw Error(Status::Unsupported,
                "algorithm: few_filter: no window of 16 output pixels fits this device's shared memory");
  // Fewer rows a block while the grid would not give every SM its resident blocks.
  const int64_t fill = kBlocksPerSm * std::max(hw.sm_count, 1);
  const auto blocks = [&](int64_t tp) { return p.n * ceil_div(pp, tp) * ceil_div(qq, int64_t(d.tile_q)); };
  while (d.tile_p > 1 && blocks(d.tile_p) < fill) d.tile_p = static_cast<int>(ceil_div(int64_t(d.tile_p), int64_t(2)));
  d.chunk_c = static_cast<int>(chunk);
  d.buffers = static_cast<int>(buffers_of(chunk));
  d.smem_bytes = few_filter_smem_bytes(p, d.tile_p, d.tile_q, chunk, d.buffers);
  d.launch.grid_x = blocks(d.tile_p);
  d.launch.threads = kFewFilterThreads;
  d.launch.smem_bytes = d.smem_bytes;
  why.push_back("few_filter: blocks of " + std::to_string(d.tile_p) + " x " + std::to_string(d.tile_q) +
                " output pixels x " + std::to_string(p.k) + " filter(s) multiplied out of their x window, " +
                std::to_string(chunk) + " channels a chunk (" + std::to_string(ceil_div(p.c, chunk)) + " chunk(s), " +
                std::to_string(d.buffers) + " buffer(s)), " + std::to_string(d.launch.grid_x) + " blocks");
  return d;
}

}  // namespace mconv::detail
