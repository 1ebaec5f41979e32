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
// whose tiles of four leave SMs without a block). One tile a block: the copies of one block overlap
// the arithmetic of the others on its SM.
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
  uint4* sWindow = reinterpret_cast<uint4*>(smem + prm.filter_floats);
  const int tc = prm.chunk_vectors;
  const int cv0 = blockIdx.y * tc;
  unsigned nt = 0, tq = 0, n = 0, tp = 0;
  prm.tiles_q.divmod(blockIdx.x, nt, tq);
  prm.tiles_p.divmod(nt, n, tp);
  const int p0 = static_cast<int>(tp) * prm.tile_rows, q0 = static_cast<int>(tq) * prm.tile_cols;
  // The window: every thread's copies issue before it waits on any (x's channel stride is 1).
  const T* xn = static_cast<const T*>(prm.xs) + n * prm.x_sn + static_cast<long long>(cv0) * V;
  const int ih0 = p0 * SW - prm.pad_h, iw0 = q0 * SW - prm.pad_w;
  const int units = (prm.window_rows * prm.window_cols) << prm.chunk_shift;
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
  detail::cp_async_commit();
  stage_filters<T, V, kQuads>(prm, sFilter, cv0, tc, KS, KS);
  const int lane = threadIdx.x & (tc - 1), slot = threadIdx.x >> prm.chunk_shift;
  const long long c0 = (static_cast<long long>(cv0) + lane) * V;  // first output channel
  float bias[V];
  load_bias(prm, c0, bias);
  detail::cp_async_wait<0>();
  __syncthreads();

  const int sp = slot & (prm.tile_rows - 1), sq = slot >> prm.rows_shift;
  const int p = p0 + sp, q = q0 + sq * QT;
  if (p >= prm.P || q >= prm.Q) return;
  float acc[QT][V];
#pragma unroll
  for (int j = 0; j < QT; ++j)
#pragma unroll
    for (int v = 0; v < V; ++v) acc[j][v] = 0.0f;
  const uint4* win = sWindow + sp * SW * prm.window_pitch + ((sq * QT * SW) << prm.chunk_shift) + lane;
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

}  // namespace mconv::cuda
