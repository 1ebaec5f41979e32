// Planner of single_channel's channels-last kernel (Note [channels-last depthwise]): depthwise layers,
// channel multipliers and single-channel layers in fp16/bf16.
#include <algorithm>

#include "../common/host_math.hpp"
#include "planner.hpp"

namespace mconv::detail {
namespace {

constexpr int kVector = 8;                  // 16-bit values in one 16-byte vector
constexpr int64_t kFilterBytes = 48 << 10;  // the chunk's filters in fp32, without opting in to more

}  // namespace

// Note [channels-last occupancy]: at 100-128 registers an SM holds two blocks of 256 threads, 16
// warps, and the kernel waits on its window loads (ncu, H200, bf16 batch 32: 3.7 warps a scheduler,
// 0.95 eligible, 0.45-0.6 issued a cycle, 40% of the stalls on L1TEX). Compiled for three blocks
// (at most 80 registers) the 3x3 and 5x5 kernels of one output row a thread spill 4-228 bytes and
// still run faster: one call, us, two blocks -> three: mbv2_dw_c32_h112_s1 36.6 -> 28.8,
// c384_h14_s1 12.4 -> 9.4, effb0_dw5_c672_h14_s1 32.8 -> 23.2, c240_h28_s1 38.1 -> 33.4
// (mbv2_dw_c144_h56_s1 46.6 -> 50.6 and c576_h14_s2 6.2 -> 6.9 the losses; docs/PERFORMANCE.md).
// The shared-x form (single-channel layers, channel multipliers; 4-36 bytes of spills) gained too:
// single_h224_m64_k3 9.2 -> 6.8 us, k5 15.8 -> 12.2, h1024_m32_k3 48.1 -> 43.6, 1.06x over the
// suite's 3x3 and 5x5 layers in bf16 and fp16. 7x7 filters (372 bytes of spills: convnext_dw7 at
// batch 1 0.84x) and two rows a thread (3-11 KB) keep two blocks. The 1x1 kernels (84-90 registers,
// two blocks) fit three in 64-72 without spills and write y faster: single_h1024_m32_k1 29.5 -> 24.9
// us, h224_m64_k1 4.7 -> 4.0, h512_m32_k1 8.9 -> 8.0, the small maps within 2% (H200, bf16, three
// interleaved rounds; docs/PERFORMANCE.md).
int channels_last_blocks_per_sm(const Problem& p, int rows_per_thread) {
  const bool small_square = p.r == p.s && (p.r == 1 || p.r == 3 || p.r == 5);
  return small_square && rows_per_thread == 1 ? 3 : 2;
}

ChannelsLastWindow channels_last_window(const Problem& p, int chunk_vectors, int tile_rows, int tile_cols) {
  ChannelsLastWindow w;
  const int stride = static_cast<int>(p.stride_h);
  w.rows = channels_last_window_extent(tile_rows, p.stride_h, p.r);
  w.cols = channels_last_window_extent(tile_cols, p.stride_w, p.s);
  // A quarter warp reads 8 16-byte units: chunk_vectors lanes of 8 / chunk_vectors slots on rows
  // stride * pitch apart. The smallest pitch from cols * chunk_vectors on that puts them on 8
  // distinct bank groups (none exists for one vector at stride 2: left unpadded, two-way).
  const int slots = std::max(1, kVector / chunk_vectors);
  w.pitch = w.cols * chunk_vectors;
  for (int pad = 0; pad < kVector; ++pad) {
    const int pitch = w.cols * chunk_vectors + pad;
    unsigned groups = 0;
    for (int k = 0; k < slots; ++k)
      for (int lane = 0; lane < std::min(chunk_vectors, kVector); ++lane)
        groups |= 1u << ((k * stride * pitch + lane) % kVector);
    if (groups == 0xFFu) {
      w.pitch = pitch;
      break;
    }
  }
  w.smem_bytes = p.r * p.s * chunk_vectors * kVector * 4 + int64_t(w.rows) * w.pitch * 16;
  return w;
}

namespace {

// Note [channels-last staged tile]: the tile of the chunk's 256 / chunk_vectors slots (tile_rows
// down x the rest across, `outputs` each) that loads the fewest window pixels over the layer, among
// those idling at most a quarter of their outputs, fitting the SM's blocks, and at least 8 / chunk
// rows tall (a quarter warp's slots on distinct rows); rows 0 where none does.
struct ChannelsLastTile {
  int rows = 0, cols = 0, outputs = 0, blocks_per_sm = 0;
  ChannelsLastWindow window;
  int64_t smem_budget = 0;                                     // shared memory a block may take at blocks_per_sm
  int64_t tiles_per_chunk = 0, blocks = 0, window_pixels = 0;  // over the layer
};

ChannelsLastTile fewest_pixel_tile(const Problem& p, const HardwareModel& hw, int chunk_vectors, int outputs) {
  const int slots = 256 / chunk_vectors;
  const int blocks_per_sm = channels_last_tile_blocks_per_sm(p.r, p.stride_h, outputs);
  const int64_t budget = std::min(hw.smem_per_sm / blocks_per_sm - kRuntimeSmemPerBlock, hw.smem_per_block_optin);
  ChannelsLastTile best;
  for (int rows = std::min(slots, kVector / chunk_vectors); rows <= slots; rows *= 2) {
    const int cols = slots / rows * outputs;
    const ChannelsLastWindow w = channels_last_window(p, chunk_vectors, rows, cols);
    const int64_t tiles = channels_last_tile_count(p, rows, cols).per_chunk;
    if (w.smem_bytes > budget || tiles * rows * cols * 3 > p.n * p.p() * p.q() * 4) continue;
    const int64_t pixels = tiles * w.rows * w.cols;
    if (best.rows == 0 || pixels < best.window_pixels)
      best = {rows, cols, outputs, blocks_per_sm, w, budget, tiles, tiles * (p.k / kVector / chunk_vectors), pixels};
  }
  return best;
}

// Note [channels-last staged tile]: at stride 1 a slot holds four outputs, or two where no tile of
// four fits the map (7 x 7 maps: 8 x 16 tiles would idle 79 of 128) or where the tiles of four leave
// SMs without a block (batch-1 layers): halving the tiles puts twice the SMs to work. On grids that
// already fill the SMs two outputs read more window columns an output (2 against 1.5 with 3x3
// filters) and lost (H200, bf16, batch 32, one build, three rounds: MobileNetV2 0.92x,
// EfficientNet's 5x5 layers 0.93x; ConvNeXt's 7x7 layers at batch 1, 16-56 blocks of four, 1.17x:
// docs/PERFORMANCE.md). At stride 2 a slot holds two.
ChannelsLastTile channels_last_tile(const Problem& p, const HardwareModel& hw, int chunk_vectors) {
  const bool square = p.r == p.s && (p.r == 3 || p.r == 5 || p.r == 7);
  const bool stride = p.stride_h == p.stride_w && (p.stride_h == 1 || p.stride_h == 2);
  if (!square || !stride || p.dil_h != 1 || p.dil_w != 1 || p.k_per_group() != 1) return {};
  if (p.stride_w == 2) return fewest_pixel_tile(p, hw, chunk_vectors, 2);
  const ChannelsLastTile four = fewest_pixel_tile(p, hw, chunk_vectors, 4);
  if (four.rows > 0 && four.blocks >= hw.sm_count) return four;
  const ChannelsLastTile two = fewest_pixel_tile(p, hw, chunk_vectors, 2);
  return two.rows > 0 ? two : four;
}

}  // namespace

std::string channels_last_depthwise_unsupported(const Problem& p, const TensorDesc& x, const TensorDesc& y) {
  if (x.dtype == DType::Float32) return "fp32 depthwise and single-channel layers run on the plane streams";
  if (p.c_per_group() != 1) return "not one input channel per group";
  // Note [channels-last shared input]: a thread's vector of filters reads its own channels of x
  // (K/G = 1) or one channel they share (K/G a multiple of 8).
  if (p.k_per_group() != 1 && p.k_per_group() % kVector != 0)
    return "K/G is neither 1 nor a multiple of 8 (a 16-byte vector of filters sharing one channel)";
  // One channel: its stride does not matter.
  if ((x.strides[1] != 1 && p.c != 1) || y.strides[1] != 1) return "x or y is not channels-last (channel stride 1)";
  if (p.k % kVector != 0) return "K is not a multiple of 8 (one 16-byte vector of channels)";
  if (p.r * p.s * kVector * 4 > kFilterBytes) return "the filter's taps do not fit shared memory";
  return "";
}

ChannelsLastDepthwiseDivision plan_channels_last_depthwise(const Problem& p, const HardwareModel& hw,
                                                           std::vector<std::string>& why) {
  ChannelsLastDepthwiseDivision d;
  const int64_t vectors = p.k / kVector;
  // Up to 8 vectors (64 channels) a block: a pixel's threads then read 128 contiguous bytes; a
  // power of two that divides C / 8, so no thread of a chunk idles, and whose filters fit.
  int chunk = 8;
  while (chunk > 1 && (vectors % chunk != 0 || p.r * p.s * chunk * kVector * 4 > kFilterBytes)) chunk /= 2;
  d.chunk_channels = chunk * kVector;
  // A row's adjacent outputs share input columns (S - 1 of every S at stride 1): 4 per thread, 2 at
  // larger strides, where they share fewer. 256 threads even where that leaves batch-1 layers a few
  // dozen blocks: smaller blocks with one output a thread measured 46% slower on ConvNeXt's batch-1
  // 7x7 layers, and in this pixel-group walk 256 threads of one or two outputs where four leave SMs
  // idle lost too (H200, bf16: single_h56_m256_k5 6.3 -> 8.7 us, ConvNeXt's batch-1 7x7 layers 0.80x;
  // docs/PERFORMANCE.md). Staged tiles of two gain there (channels_last_tile).
  d.outputs_per_thread = p.stride_w == 1 ? 4 : 2;
  // Note [channels-last staged tile]: where a tile fits the map, its window is staged in shared memory.
  const ChannelsLastTile tile = channels_last_tile(p, hw, chunk);
  if (tile.rows > 0) {
    d.outputs_per_thread = tile.outputs;
    d.tile_rows = tile.rows;
    d.tile_cols = tile.cols;
    d.window_pitch = tile.window.pitch;
  }
  const int slots = 256 / chunk;
  // Note [channels-last row window]: two rows of outputs a thread where the row window streams them
  // (square 3, 5 or 7 filters, stride 2 both ways, no dilation) and the grid keeps at least two blocks
  // an SM. Measured on the H100 (bf16, batch 32): stride-2 layers 9-15% faster on MobileNetV2's and
  // EfficientNet's 56x56 and 14x14 maps (one, 112x112 with 96 channels, 8% slower); stride-1 layers
  // 9-24% slower, their four outputs a row then holding 64 accumulators, and L1 already serving the
  // rows they share.
  const int64_t q_groups = ceil_div(p.q(), int64_t(d.outputs_per_thread));
  const bool streams = p.r == p.s && (p.r == 3 || p.r == 5 || p.r == 7) && p.stride_h == 2 && p.stride_w == 2 &&
                       p.dil_h == 1 && p.dil_w == 1;
  const int64_t two_row_blocks =
      ceil_div(p.n * ceil_div(p.p(), int64_t(2)) * q_groups, int64_t(slots)) * (vectors / chunk);
  d.rows_per_thread = d.tile_rows == 0 && streams && two_row_blocks >= 2 * int64_t(hw.sm_count) ? 2 : 1;
  d.pixel_groups = p.n * ceil_div(p.p(), int64_t(d.rows_per_thread)) * q_groups;
  d.launch.threads = 256;
  // Note [channels-last grid]: a block loads its chunk's filters, then its threads walk pixel groups
  // gridDim.x * slots apart. With more than one tap, at most two waves of blocks (two or three of
  // 256 threads an SM, Note [channels-last occupancy]), so the filter load and a block's start-up latency
  // are paid a few times an SM. Measured on the H100 (bf16, batch 32 / single-channel batch 1):
  // single_h1024_m32_k5 102 -> 88 us, mbv2_dw_c144_h56_s1 42.7 -> 39.3 us, c32_h112_s1 31.2 -> 28.0;
  // 1x1 layers only write y, need every block in flight, and lost (single_h1024_m32_k1 29.6 -> 33.4).
  d.launch.grid_y = vectors / chunk;
  if (d.tile_rows > 0) {
    d.blocks_per_sm = tile.blocks_per_sm;
    d.launch.grid_x = tile.tiles_per_chunk;
    d.launch.smem_bytes = tile.window.smem_bytes;
    // Note [channels-last persistent tiles] (channels_last_tile_kernel.cuh): more tiles than one round
    // of resident blocks takes that round, each block walking its tiles with a second window buffer.
    // H200, bf16, batch 32, one build, three rounds: MobileNetV2 1.029x, EfficientNet's 5x5 layers
    // 1.074x (mbv2_dw_c32_h112_s1 24.0 -> 21.3 us, effb0_dw5_c240_h28_s1 27.4 -> 24.3; the stride-2
    // layers within 1%); docs/PERFORMANCE.md.
    const int64_t window_bytes = int64_t(tile.window.rows) * tile.window.pitch * 16;
    const int64_t resident = std::max<int64_t>(1, int64_t(tile.blocks_per_sm) * hw.sm_count / d.launch.grid_y);
    if (d.launch.grid_x > resident && tile.window.smem_bytes + window_bytes <= tile.smem_budget) {
      why.push_back("single_channel channels-last: " + std::to_string(d.launch.grid_x) + " tiles a chunk for " +
                    std::to_string(resident) +
                    " resident blocks: each block walks its tiles, two windows in shared memory");
      d.launch.grid_x = resident;
      d.launch.smem_bytes = tile.window.smem_bytes + window_bytes;
    }
  } else {
    d.blocks_per_sm = channels_last_blocks_per_sm(p, d.rows_per_thread);
    const int64_t blocks = ceil_div(d.pixel_groups, int64_t(slots));
    const int64_t two_waves = std::max<int64_t>(1, 2 * d.blocks_per_sm * hw.sm_count / (vectors / chunk));
    d.launch.grid_x = p.r * p.s > 1 ? std::min(blocks, two_waves) : blocks;
    d.launch.smem_bytes = p.r * p.s * d.chunk_channels * 4;
  }
  why.push_back(std::string("single_channel channels-last: fp16/bf16, one channel per group, ") +
                (p.k_per_group() == 1 ? "x read as vectors of channels" : "a vector of filters sharing one x value") +
                ", channels-last y, " + std::to_string(d.chunk_channels) + " channels x " + std::to_string(slots) +
                " pixel groups of " + std::to_string(d.rows_per_thread) + " x " + std::to_string(d.outputs_per_thread) +
                " a block" +
                (d.tile_rows > 0 ? ", tiles of " + std::to_string(d.tile_rows) + " x " + std::to_string(d.tile_cols) +
                                       " outputs whose input window is staged in shared memory"
                                 : std::string()) +
                ", " + std::to_string(d.launch.grid_x * d.launch.grid_y) + " blocks on " + std::to_string(hw.sm_count) +
                " SMs, " + std::to_string(d.blocks_per_sm) + " an SM");
  return d;
}

}  // namespace mconv::detail
