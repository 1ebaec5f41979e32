// single_channel's staged-tile form of the channels-last kernel (Note [channels-last staged tile]).
//
// Note [channels-last staged tile]: the pixel-group kernel (channels_last_kernel.cuh) reads its row
// windows from global memory and waits on them: each thread has a few 16-byte loads in flight, and
// on the large depthwise maps the SMs sit at 27-43% of the copy roofline (H200, bf16, batch 32). Here
// a block owns a tile of tile_rows x tile_cols output pixels of one image and one chunk of channel
// vectors; it copies the tile's whole input window (the halo included, zeros outside the map) into
// shared memory with 16-byte cp.async copies, all of them in flight at once, stages the filters
// while they land, and then computes from shared memory: a thread's QT adjacent outputs of one row
// read each window row's (QT - 1) * stride + R vectors once, as the register window does (QT: four
// at stride 1, two at stride 2, on maps whose tiles of four would idle too many outputs, and on grids
// whose tiles of four leave SMs without a block). On a grid of one tile a block, the copies of one
// block overlap the arithmetic of the others on its SM; on larger layers also the block's own
// (Note [channels-last persistent tiles]).
//
// Note [channels-last persistent tiles]: where a layer has more tiles than one round of resident
// blocks, the grid is that round and a block walks the chunk's tiles gridDim.x apart, with two window
// buffers: it issues the next tile's copies, waits for this tile's (cp.async groups complete in
// order), computes it, and synchronises before the next round refills the buffer it read. The
// filters are staged once a block instead of once a tile. A grid of one tile a block runs the loop
// once, with one buffer.
//
// The block's threads are chunk lanes (fastest) x slots, and consecutive slots go down the tile's
// rows: the 8 / chunk slots of a quarter warp then read rows stride * pitch apart, and the window's
// row pitch is padded so those reads fall on distinct banks (channels_last_window).
#pragma once

#include "../common/cp_async.cuh"
#include "channels_last_kernel.cuh"

namespace mconv::cuda {

struct ChannelsLastTileParams : ChannelsLastDepthwiseParams {
  int tile_rows, tile_cols;      // output pixels of a block's tile
  int rows_shift, chunk_shift;   // log2(tile_rows), log2(chunk_vectors): both powers of two
  int window_rows, window_cols;  // input pixels the tile reads
  int window_pitch;              // 16-byte units from one window row to the next in shared memory
  int filter_floats;             // shared floats ahead of the window: the chunk's filters
  FastDivmod tiles_q, tiles_p;   // ceil(Q / tile_cols), ceil(P / tile_rows)
  FastDivmod window_cols_div;    // window pixel -> (row, column)
  int tiles;                     // the chunk's tiles: N * ceil(P / tile_rows) * ceil(Q / tile_cols)
  int window_units;              // 16-byte units from one window buffer to the next (rows * pitch)
};

/// T: 16-bit storage type; KS: square filter size; SW: the stride both ways; QT: adjacent outputs a
/// thread (4 or 2 at stride 1, 2 at stride 2); MinBlocks: blocks an SM must hold. Dilation 1, x and
/// y channels-last with 16-byte aligned pixels, one channel and one filter per group (the planner's
/// conditions).
template <class T, int KS, int SW, int QT, int MinBlocks>
__global__ void __launch_bounds__(kChannelsLastDepthwiseThreads, MinBlocks)
    channels_last_tile_kernel(const ChannelsLastTileParams prm) {
  constexpr int V = 8, kWindow = (QT - 1) * SW + KS;
  constexpr bool kQuads = !(KS == 5 && QT == 4);  // the filters' layout (filter_slot)
  static_assert(sizeof(T) * V == 16, "a 16-byte vector of 16-bit values");
  // Note [dependent launch]
  detail::wait_then_allow_dependent_grids();
  extern __shared__ __align__(16) float smem[];
  float* sFilter = smem;  // [KS*KS taps][chunk_vectors * V channels], fp32 (filter_slot)
  uint4* sWindows = reinterpret_cast<uint4*>(smem + prm.filter_floats);  // one or two windows
  const int tc = prm.chunk_vectors;
  const int cv0 = blockIdx.y * tc;
  const T* xc = static_cast<const T*>(prm.xs) + static_cast<long long>(cv0) * V;
  const int units = (prm.window_rows * prm.window_cols) << prm.chunk_shift;
  // Tile t of the chunk: image n, tile row tp, tile column tq.
  auto tile_origin = [&](int t, unsigned& n, int& p0, int& q0) {
    unsigned nt = 0, tq = 0, tp = 0;
    prm.tiles_q.divmod(static_cast<unsigned>(t), nt, tq);
    prm.tiles_p.divmod(nt, n, tp);
    p0 = static_cast<int>(tp) * prm.tile_rows;
    q0 = static_cast<int>(tq) * prm.tile_cols;
  };
  // Tile t's window into buffer b: every thread's copies issue before it waits on any (x's channel
  // stride is 1).
  auto copy_window = [&](int t, int b) {
    unsigned n = 0;
    int p0 = 0, q0 = 0;
    tile_origin(t, n, p0, q0);
    const T* xn = xc + n * prm.x_sn;
    uint4* sWindow = sWindows + b * prm.window_units;
    const int ih0 = p0 * SW - prm.pad_h, iw0 = q0 * SW - prm.pad_w;
    for (int i = threadIdx.x; i < units; i += blockDim.x) {
      const int lane = i & (tc - 1);
      unsigned wr = 0, wc = 0;
      prm.window_cols_div.divmod(static_cast<unsigned>(i >> prm.chunk_shift), wr, wc);
      const int ih = ih0 + static_cast<int>(wr), iw = iw0 + static_cast<int>(wc);
      const bool inside = static_cast<unsigned>(ih) < static_cast<unsigned>(prm.H) &&
                          static_cast<unsigned>(iw) < static_cast<unsigned>(prm.W);
      const T* src = inside ? xn + ih * prm.x_sh + iw * prm.x_sw + lane * V : xn;
      detail::cp_async_16_or_zero(sWindow + wr * prm.window_pitch + (wc << prm.chunk_shift) + lane, src, inside);
    }
  };
  int tile = blockIdx.x;
  copy_window(tile, 0);
  detail::cp_async_commit();
  stage_filters<T, V, kQuads>(prm, sFilter, cv0, tc, KS, KS);
  const int lane = threadIdx.x & (tc - 1), slot = threadIdx.x >> prm.chunk_shift;
  const long long c0 = (static_cast<long long>(cv0) + lane) * V;  // first output channel
  float bias[V];
  load_bias(prm, c0, bias);
  const int sp = slot & (prm.tile_rows - 1), sq = slot >> prm.rows_shift;

  // Note [channels-last persistent tiles]: a grid smaller than the chunk's tiles walks them
  // gridDim.x apart, the next tile's window copied into the other buffer while this one computes.
  for (int b = 0; tile < prm.tiles; tile += gridDim.x, b ^= 1) {
    const int next = tile + gridDim.x;
    if (next < prm.tiles) copy_window(next, b ^ 1);
    detail::cp_async_commit();
    detail::cp_async_wait<1>();
    __syncthreads();  // this tile's window (the first time, the filters too) has landed for all
    unsigned n = 0;
    int p0 = 0, q0 = 0;
    tile_origin(tile, n, p0, q0);
    const int p = p0 + sp, q = q0 + sq * QT;
    if (p < prm.P && q < prm.Q) {
      float acc[QT][V];
#pragma unroll
      for (int j = 0; j < QT; ++j)
#pragma unroll
        for (int v = 0; v < V; ++v) acc[j][v] = 0.0f;
      const uint4* win =
          sWindows + b * prm.window_units + sp * SW * prm.window_pitch + ((sq * QT * SW) << prm.chunk_shift) + lane;
#pragma unroll
      for (int r = 0; r < KS; ++r) {
        uint4 window[kWindow];
#pragma unroll
        for (int u = 0; u < kWindow; ++u) window[u] = win[r * prm.window_pitch + (u << prm.chunk_shift)];
#pragma unroll
        for (int s = 0; s < KS; ++s) {
          float wv[V];
          filter_tap<V, kQuads>(sFilter, r * KS + s, tc, lane, wv);
#pragma unroll
          for (int j = 0; j < QT; ++j) fma_channels<T, V, V>(acc[j], window[j * SW + s], wv);
        }
      }
      T* y = static_cast<T*>(prm.ys) + c0 + n * prm.y_sn + static_cast<long long>(p) * prm.y_sp;
#pragma unroll
      for (int j = 0; j < QT; ++j) {
        if (q + j >= prm.Q) break;
        store_output<T, V>(prm, y + static_cast<long long>(q + j) * prm.y_sq, acc[j], bias);
      }
    }
    if (next < prm.tiles) __syncthreads();  // every thread is done with buffer b before it is refilled
  }
}

}  // namespace mconv::cuda
