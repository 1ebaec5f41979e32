// Launcher of the channels-last kernel: 16-byte vectors of output channels where y, x and their
// strides allow them (one channel a thread otherwise), x read as vectors or as one shared value
// (Note [channels-last shared input]), and the (dtype, outputs a thread) switch.
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include "../common/cuda_check.cuh"
#include "../common/filter_size_switch.cuh"
#include "../common/host_math.hpp"
#include "../common/kernel_launch.cuh"
#include "../common/storage_dtype.cuh"
#include "../launch.hpp"
#include "channels_last_kernel.cuh"
#include "channels_last_tile_kernel.cuh"
#include "planner.hpp"

namespace mconv::detail {
namespace {

constexpr int kThreads = cuda::kChannelsLastDepthwiseThreads;

// The kernel of `qt` outputs a thread: four at stride 1, two at larger strides (the planner's only
// choices; fewer on small grids measured slower, docs/PERFORMANCE.md).
template <class T, int V, int XV, int PT, int KS, int MinBlocks>
void launch_outputs(const cuda::ChannelsLastDepthwiseParams& prm, int qt, dim3 grid, int threads, int smem,
                    cuda::LaunchStream s) {
  using cuda::channels_last_depthwise_kernel;
  if (qt == 4)
    return cuda::launch_with_smem(channels_last_depthwise_kernel<T, V, XV, 4, PT, KS, MinBlocks>, grid, threads, smem,
                                  s, prm);
  if (qt == 2)
    return cuda::launch_with_smem(channels_last_depthwise_kernel<T, V, XV, 2, PT, KS, MinBlocks>, grid, threads, smem,
                                  s, prm);
  throw Error(Status::Internal,
              "single_channel channels-last: no kernel for " + std::to_string(qt) + " outputs a thread");
}

// Note [channels-last occupancy]: the vector kernels of 1x1, 3x3 and 5x5 rows (x read as vectors or
// as one shared value) are also compiled for three blocks an SM.
template <class T, int V, int XV, int PT, int KS>
void launch_size(const cuda::ChannelsLastDepthwiseParams& prm, int qt, bool three_blocks, dim3 grid, int threads,
                 int smem, cuda::LaunchStream s) {
  if constexpr (V > 1 && PT == 1 && (KS == 1 || KS == 3 || KS == 5)) {
    if (three_blocks) return launch_outputs<T, V, XV, PT, KS, 3>(prm, qt, grid, threads, smem, s);
  }
  launch_outputs<T, V, XV, PT, KS, 1>(prm, qt, grid, threads, smem, s);
}

// The vector kernel with the filter size as a constant for square 1, 3, 5, 7 filters; the
// one-channel fallback with the size at run time only.
// Two rows a thread only in the vector kernel with a constant filter size (the planner's condition).
template <class T, int V, int XV>
void launch(const cuda::ChannelsLastDepthwiseParams& prm, int qt, int pt, bool three_blocks, dim3 grid, int threads,
            int smem, cuda::LaunchStream s) {
  if constexpr (V == 1) {
    launch_size<T, V, XV, 1, 0>(prm, qt, false, grid, threads, smem, s);
  } else {
    cuda::filter_size_switch(prm.R, prm.S, [&](auto k) {
      constexpr int KS = decltype(k)::value;
      if constexpr (KS > 1) {
        if (pt == 2) return launch_size<T, V, XV, 2, KS>(prm, qt, three_blocks, grid, threads, smem, s);
      }
      launch_size<T, V, XV, 1, KS>(prm, qt, three_blocks, grid, threads, smem, s);
    });
  }
}

// The kernel for storage type T: 16-byte vectors of output channels (reading x as vectors, or one
// shared value), or one channel a thread.
template <class T>
void launch_dtype(const cuda::ChannelsLastDepthwiseParams& prm, bool vector, bool shared_x, int qt, int pt,
                  bool three_blocks, dim3 grid, int threads, int smem, cuda::LaunchStream s) {
  if (!vector) return launch<T, 1, 1>(prm, qt, pt, false, grid, threads, smem, s);
  if (shared_x) return launch<T, 8, 1>(prm, qt, pt, three_blocks, grid, threads, smem, s);
  launch<T, 8, 8>(prm, qt, pt, three_blocks, grid, threads, smem, s);
}

// Note [channels-last staged tile]: the tile kernel for square 3, 5, 7 filters at stride 1 (four or
// two outputs a thread) or 2 (two).
template <class T>
void launch_tile(const cuda::ChannelsLastTileParams& prm, int qt, dim3 grid, int smem, cuda::LaunchStream s) {
  cuda::filter_size_switch(prm.R, prm.S, [&](auto k) {
    constexpr int KS = decltype(k)::value;
    if constexpr (KS > 1) {
      constexpr int B4 = channels_last_tile_blocks_per_sm(KS, 1, 4);
      constexpr int B2 = channels_last_tile_blocks_per_sm(KS, 1, 2), B2s2 = channels_last_tile_blocks_per_sm(KS, 2, 2);
      if (prm.stride_w == 1 && qt == 4)
        return cuda::launch_with_smem(cuda::channels_last_tile_kernel<T, KS, 1, 4, B4>, grid, kThreads, smem, s, prm);
      if (prm.stride_w == 1 && qt == 2)
        return cuda::launch_with_smem(cuda::channels_last_tile_kernel<T, KS, 1, 2, B2>, grid, kThreads, smem, s, prm);
      if (prm.stride_w == 2 && qt == 2)
        return cuda::launch_with_smem(cuda::channels_last_tile_kernel<T, KS, 2, 2, B2s2>, grid, kThreads, smem, s, prm);
    }
    throw Error(Status::Internal, "single_channel channels-last: no tile kernel for this filter size, stride and " +
                                      std::to_string(qt) + " outputs a thread");
  });
}

int log2_exact(int v) {
  int shift = 0;
  while ((1 << shift) < v) ++shift;
  return shift;
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// Calls f(T{}) for the plan's 16-bit storage type: the planner gives fp32 layers the plane streams.
template <class F>
void visit_half_dtype(DType t, F&& f) {
  visit_storage_dtype(t, "single_channel channels-last", [&](auto v) {
    using T = decltype(v);
    if constexpr (std::is_same_v<T, float>)
      throw Error(Status::Internal, "single_channel channels-last: a plan in fp32 reached the 16-bit kernel");
    else
      f(v);
  });
}

}  // namespace

void channels_last_depthwise_forward(const Plan& plan, const ChannelsLastDepthwiseDivision& d, const void* x,
                                     const void* w, void* y, const Epilogue& e, void* stream, bool dependent_launch) {
  const Problem& pr = plan.problem();
  cuda::ChannelsLastDepthwiseParams prm{};
  static_cast<cuda::ConvGeometry&>(prm) = cuda::conv_geometry(plan, nullptr, nullptr, nullptr, e);
  prm.xs = x;
  prm.ws = w;
  prm.ys = y;
  // A pixel's output channels are contiguous (the planner's condition); 16-byte vectors need every
  // pixel's first channel 16-byte aligned too. x is read as vectors of the same channels when K/G = 1,
  // and needs the same; with K/G a multiple of 8 a vector's filters share one x value (Note
  // [channels-last shared input]) and x may lie anywhere.
  const auto& xs = plan.x_desc().strides;
  const auto& ys = plan.y_desc().strides;
  const bool shared_x = pr.k_per_group() % 8 == 0;
  bool vector = aligned16(y) && (shared_x || aligned16(x));
  for (int64_t stride : {ys[0], ys[2], ys[3]}) vector = vector && stride % 8 == 0;
  if (!shared_x)
    for (int64_t stride : {xs[0], xs[2], xs[3]}) vector = vector && stride % 8 == 0;
  vector = vector && (shared_x || pr.k_per_group() == 1);
  const cuda::LaunchStream s{static_cast<cudaStream_t>(stream), dependent_launch};
  if (vector && d.tile_rows > 0) {
    cuda::ChannelsLastTileParams tile{};
    static_cast<cuda::ChannelsLastDepthwiseParams&>(tile) = prm;
    tile.channel_vectors = static_cast<int>(pr.k / 8);
    tile.chunk_vectors = d.chunk_channels / 8;
    tile.tile_rows = d.tile_rows;
    tile.tile_cols = d.tile_cols;
    tile.rows_shift = log2_exact(d.tile_rows);
    tile.chunk_shift = log2_exact(tile.chunk_vectors);
    tile.window_rows = channels_last_window_extent(d.tile_rows, pr.stride_h, pr.r);
    tile.window_cols = channels_last_window_extent(d.tile_cols, pr.stride_w, pr.s);
    tile.window_pitch = d.window_pitch;
    tile.filter_floats = static_cast<int>(pr.r * pr.s) * d.chunk_channels;
    const ChannelsLastTileCount count = channels_last_tile_count(pr, d.tile_rows, d.tile_cols);
    tile.tiles_q = cuda::FastDivmod(static_cast<unsigned>(count.across));
    tile.tiles_p = cuda::FastDivmod(static_cast<unsigned>(count.down));
    tile.window_cols_div = cuda::FastDivmod(static_cast<unsigned>(tile.window_cols));
    tile.tiles = static_cast<int>(count.per_chunk);
    tile.window_units = tile.window_rows * d.window_pitch;
    const dim3 grid(static_cast<unsigned>(d.launch.grid_x), static_cast<unsigned>(d.launch.grid_y));
    return visit_half_dtype(plan.dtype(), [&](auto t) {
      launch_tile<decltype(t)>(tile, d.outputs_per_thread, grid, static_cast<int>(d.launch.smem_bytes), s);
    });
  }
  const int v = vector ? 8 : 1;
  prm.channel_vectors = static_cast<int>(pr.k / v);
  prm.chunk_vectors = d.chunk_channels / v;
  prm.q_groups = cuda::FastDivmod(static_cast<unsigned>(ceil_div(pr.q(), int64_t(d.outputs_per_thread))));
  // Two output rows a thread run on the vector kernel with a constant filter size above 1 (launch()
  // above); one channel a thread, or any other size, goes row by row.
  const int pt = vector && cuda::constant_filter_size(pr.r, pr.s) > 1 ? d.rows_per_thread : 1;
  prm.p_groups = cuda::FastDivmod(static_cast<unsigned>(ceil_div(pr.p(), int64_t(pt))));
  prm.pixel_groups = pr.n * ceil_div(pr.p(), int64_t(pt)) * ceil_div(pr.q(), int64_t(d.outputs_per_thread));
  // A multiple of the chunk's vectors: one channel a thread needs at least the chunk's channels.
  const int threads = vector ? d.launch.threads : std::max(d.launch.threads, d.chunk_channels);
  const int slots = threads / prm.chunk_vectors;
  // The planner's cap on blocks along the pixels (Note [channels-last grid]); the threads walk the
  // rest. A tiled plan whose tensors allow no vectors has no cap: one block per `slots` pixel groups.
  const int64_t blocks = ceil_div(prm.pixel_groups, int64_t(slots));
  const dim3 grid(static_cast<unsigned>(d.tile_rows > 0 ? blocks : std::min(blocks, d.launch.grid_x)),
                  static_cast<unsigned>(prm.channel_vectors / prm.chunk_vectors));
  const int smem = static_cast<int>(pr.r * pr.s * d.chunk_channels * 4);
  const int qt = d.outputs_per_thread;
  // The planner's grid counted on this many blocks an SM.
  const bool three_blocks = d.blocks_per_sm == 3;
  visit_half_dtype(plan.dtype(), [&](auto t) {
    launch_dtype<decltype(t)>(prm, vector, shared_x, qt, pt, three_blocks, grid, threads, smem, s);
  });
}

}  // namespace mconv::detail
