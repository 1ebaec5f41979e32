// few_channel_wgrad: the filter gradient of a layer with few input channels (an RGB stem).
//
// Note [few-channel wgrad]: for conv1 of a ResNet (C = 3, 7x7, stride 2),
//   dw[k][r][s][c] = sum over n, p, q of dy[n][p][q][k] * x[n][p*sh - ph + r*dh][q*sw - pw + s*dw][c]
// is a GEMM of K filters x C*R*S columns over a reduction of N*P*Q pixels. implicit_mma runs it with
// each (pixel, column) element of x gathered from global memory through its offset-table row: three
// channels never make a 16-byte vector, and at ~320 instructions a warp a stage the gather, not the
// MMA, bounds it (docs/PERFORMANCE.md, "Few-block wgrad steps"). Here a block instead takes an item
// of tile_p x tile_q output pixels of one image and loads, once, the dy rows of those pixels (64
// filters of 16 bytes a pixel row, cp.async) and the window of x they read (region_h x region_w
// pixels of C channels, zero outside the image; with channels-last x a window row is one run of x,
// copied as 4-byte words). Each column's element for a pixel is then a shared-memory read at
// start[pixel] + offset[column], the offset-sequence technique on the window: offset[column] =
// r*dh*pitch + s*dw*C + c, start[pixel] = pp*sh*pitch + qq*sw*C (pitch: a window row's elements,
// padded). A 7x7 window at stride 2 reads each x element about 12 times; it comes from shared
// memory each time after one trip from global.
//
// The MMA is mma.sync m16n8k16 with fp32 accumulators: A = dy^T (filters x pixels) by ldmatrix.trans
// from rows padded to 144 bytes (eight pixels' 16-byte rows fall in distinct bank groups), B = the
// window's elements (pixels x columns) as 16-bit shared loads packed in pairs. Columns past C*R*S
// read offset 0 and are never stored.
//
// A block is two halves of eight warps, each with its own buffers, taking an item each a round:
// while one half waits on its loads the other multiplies. Each warp owns 32 filters x 8*NC columns. At the
// end the halves' sums are added in a fixed order, the blocks of a cluster (consecutive z) sum in
// rank order through distributed shared memory, and rank r stores its share of the block's
// outputs: no workspace, and bitwise the same on every run. Where one cluster cannot fill the GPU,
// clusters take disjoint items and add into dw with atomics after a pre-pass (dw = beta*dw + bias),
// except in a deterministic plan (Note [mma atomic slices] bounds the 16-bit rounding likewise).
#pragma once

#include <cooperative_groups.h>

#include <cstdint>

#include "../common/cp_async.cuh"
#include "../common/dependent_launch.cuh"
#include "../common/epilogue.cuh"
#include "../common/fast_divmod.cuh"
#include "../common/mma_sync.cuh"
#include "../common/storage.cuh"
#include "../common/x_window.cuh"
#include "planner.hpp"

namespace mconv::cuda {

// The block's shape, which the planner sizes its shared memory by (planner.hpp): two halves of 8
// warps, 2 along the 64 filters (32 each) and 4 along the columns; a dy pixel's 64 values in a
// shared row padded by 16 bytes.
inline constexpr int kFewChannelWgradThreads = mconv::detail::kFewChannelWgradThreads;
inline constexpr int kFewChannelWgradHalfThreads = kFewChannelWgradThreads / 2;
inline constexpr int kFewChannelWgradFilters = mconv::detail::kFewChannelWgradFilters;
inline constexpr int kFewChannelWgradRowBytes = mconv::detail::kFewChannelWgradRowBytes;
inline constexpr int kFewChannelWgradWarpsAlongN = 4;
inline constexpr int kFewChannelWindowBatch = 8;  // x window loads a thread keeps in flight
static_assert(kFewChannelWgradThreads == 512 && kFewChannelWgradFilters == 64, "2 x (2 x 4) warps of 32 filters");

struct FewChannelWgradParams {
  const void* x;
  const void* dy;
  void* dw;
  const float* bias;                     // K values or null (a forward call of the step's form)
  long long x_sn;                        // x: image
  long long dy_sn, dy_sp, dy_sq;         // dy: image, row, column; its filters are adjacent
  long long dw_sk, dw_sc, dw_sr, dw_ss;  // dw: filter, channel, tap row, tap column
  int K, C, R, S, P, Q, crs;
  int stride_h, stride_w, dil_h, dil_w, pad_h, pad_w;
  int tile_p, tile_q;      // an item's output pixels (tile_q a multiple of 16)
  XWindow window;          // the x window of an item (rows and columns past the last one read are zeros)
  int dy_bytes;            // a half's dy rows: tile_p * tile_q * kFewChannelWgradRowBytes
  int half_bytes;          // a half's buffers: dy rows, then the window (16-byte aligned)
  int dy_vectors;          // dy's rows are 16-byte aligned vectors (else element copies)
  FastDivmod tiles_q_div;  // item -> (image row of tiles, column tile)
  FastDivmod tiles_p_div;  // image row of tiles -> (n, row tile)
  int items;               // N * tiles_p * tiles_q
  int cluster_split;       // blocks of a cluster (consecutive z), summed in rank order
  int atomic;              // clusters add alpha * sum into dw (the pre-pass wrote beta * dw + bias)
  float alpha, beta;
  int activation;  // mconv::Activation's number (epilogue.cuh)
};

namespace detail {

/// bar.sync on the half's own barrier (1 or 2; 0 is __syncthreads'), its 256 threads. The ids are
/// immediates: with an id in a register ptxas reserves all 16 barriers.
__device__ __forceinline__ void half_barrier(int half) {
  if (half == 0)
    asm volatile("bar.sync 1, %0;\n" ::"n"(kFewChannelWgradHalfThreads) : "memory");
  else
    asm volatile("bar.sync 2, %0;\n" ::"n"(kFewChannelWgradHalfThreads) : "memory");
}

/// Column j of the GEMM as (tap row, tap column, channel), RSC order; its element's offset in the
/// window, 0 past C*R*S.
__device__ __forceinline__ int window_offset(const FewChannelWgradParams& prm, int j) {
  if (j >= prm.crs) return 0;
  const int c = j % prm.C, rs = j / prm.C, s = rs % prm.S, r = rs / prm.S;
  return r * prm.dil_h * prm.window.pitch + s * prm.dil_w * prm.C + c;
}

}  // namespace detail

/// Mma: MmaFp16 or MmaBf16. NC: 8-column MMA tiles of a warp (a block's columns: 32 * NC).
template <class Mma, int NC>
__global__ void __launch_bounds__(kFewChannelWgradThreads, 1)
    few_channel_wgrad_kernel(const FewChannelWgradParams prm) {
  using T = typename Mma::Storage;
  constexpr int kColumns = kFewChannelWgradWarpsAlongN * 8 * NC;
  constexpr int kPitch = kFewChannelWgradRowBytes;
  extern __shared__ __align__(16) unsigned char smem[];
  detail::wait_then_allow_dependent_grids();

  const int tid = threadIdx.x, half = tid / kFewChannelWgradHalfThreads, ht = tid % kFewChannelWgradHalfThreads;
  const int warp = ht / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int warp_m = warp % 2, warp_n = warp / 2;
  unsigned char* buf = smem + half * prm.half_bytes;
  T* window = reinterpret_cast<T*>(buf + prm.dy_bytes);
  const uint32_t dy_s = static_cast<uint32_t>(__cvta_generic_to_shared(buf));
  const uint32_t window_s = static_cast<uint32_t>(__cvta_generic_to_shared(window));
  const int k0 = blockIdx.y * kFewChannelWgradFilters;
  const int col0 = blockIdx.x * kColumns;
  const int tile_pixels = prm.tile_p * prm.tile_q, steps_per_row = prm.tile_q / 16;

  // Each thread's B elements: pixels 2t, 2t+1, 2t+8, 2t+9 of a 16-pixel step (one row of the
  // tile), column g of each of its 8-column tiles; byte offsets of the pixels from the step's first
  // and of the columns in the window.
  const int pixel_step = prm.stride_w * prm.C;
  uint32_t pixel_bytes[4], column_bytes[NC];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    pixel_bytes[i] = 2u * static_cast<uint32_t>((2 * t + (i & 1) + (i >> 1) * 8) * pixel_step);
#pragma unroll
  for (int jn = 0; jn < NC; ++jn)
    column_bytes[jn] = 2u * static_cast<uint32_t>(detail::window_offset(prm, col0 + warp_n * 8 * NC + jn * 8 + g));
  const int row_step = prm.stride_h * prm.window.pitch;
  // ldmatrix.trans: lanes 8i..8i+7 address matrix i's rows (pixels 0-7 or 8-15, filters +0 or +8).
  const int mi = lane / 8, mr = lane % 8;
  const uint32_t a_lane = dy_s + (mr + (mi / 2) * 8) * kPitch + (warp_m * 32 + (mi % 2) * 8) * 2;

  float acc[2][NC][4];
#pragma unroll
  for (int f = 0; f < 2; ++f)
#pragma unroll
    for (int jn = 0; jn < NC; ++jn)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[f][jn][e] = 0.0f;

  const int workers = 2 * static_cast<int>(gridDim.z);
  const T* dy_base = static_cast<const T*>(prm.dy) + k0;
  // Rounds of two items, one a half. Both halves run every round, its barriers included, even
  // where the last round has no item for half 1: their named barriers then pair up in the same
  // order, which is also how compute-sanitizer's racecheck follows them (with unequal counts it
  // reported the block barrier at the end as not ordering the halves).
  for (int round = 2 * static_cast<int>(blockIdx.z); round < prm.items; round += workers) {
    const int item = round + half;
    const bool has_item = item < prm.items;
    unsigned image_row, tq, n, tp;
    prm.tiles_q_div.divmod(static_cast<unsigned>(has_item ? item : round), image_row, tq);
    prm.tiles_p_div.divmod(image_row, n, tp);
    const int p0 = static_cast<int>(tp) * prm.tile_p, q0 = static_cast<int>(tq) * prm.tile_q;
    const int h0 = p0 * prm.stride_h - prm.pad_h, w0 = q0 * prm.stride_w - prm.pad_w;
    detail::half_barrier(half);  // the half's previous item is multiplied: its buffers are free
    if (!has_item) {
      detail::half_barrier(half);
      continue;
    }

    // dy: each pixel's 64 filters as eight 16-byte vectors, zeros past P, Q and K.
    const T* dy_n = dy_base + n * prm.dy_sn;
    for (int pp = 0; pp < prm.tile_p; ++pp) {
      const int p = p0 + pp;
      for (int v = ht; v < prm.tile_q * 8; v += kFewChannelWgradHalfThreads) {
        const int qq = v / 8, chunk = v % 8, q = q0 + qq;
        const bool pixel = p < prm.P && q < prm.Q;
        unsigned char* dst = buf + (pp * prm.tile_q + qq) * kPitch + chunk * 16;
        const T* src = dy_n + p * prm.dy_sp + q * prm.dy_sq + chunk * 8;
        if (prm.dy_vectors) {  // K is a multiple of 8: a vector is all filters or none
          const bool ok = pixel && k0 + chunk * 8 < prm.K;
          detail::cp_async_16_or_zero(dst, ok ? src : prm.dy, ok);
        } else {
          T* d = reinterpret_cast<T*>(dst);
#pragma unroll
          for (int e = 0; e < 8; ++e) d[e] = pixel && k0 + chunk * 8 + e < prm.K ? src[e] : from_float<T>(0.0f);
        }
      }
    }
    // The x window (x_window.cuh), in 4-byte words shifted to x's parity where x is channels-last.
    const int shift = load_x_window<T, kFewChannelWgradHalfThreads, kFewChannelWindowBatch>(
        prm.window, window, static_cast<const T*>(prm.x) + n * prm.x_sn, h0, w0, ht);
    detail::cp_async_commit();
    detail::cp_async_wait<0>();
    detail::half_barrier(half);  // the item's dy rows and window are in place

    for (int step = 0, pp = 0, qs = 0; step < tile_pixels / 16; ++step) {
      const uint32_t start = window_s + 2u * static_cast<uint32_t>(shift + pp * row_step + qs * 16 * pixel_step);
      uint32_t a[2][4], px[4];
      detail::ldmatrix_x4_trans(a[0], a_lane + step * 16 * kPitch);
      detail::ldmatrix_x4_trans(a[1], a_lane + step * 16 * kPitch + 32);
#pragma unroll
      for (int i = 0; i < 4; ++i) px[i] = start + pixel_bytes[i];
#pragma unroll
      for (int jn = 0; jn < NC; ++jn) {
        const uint32_t b0 =
            __byte_perm(detail::lds_u16(px[0] + column_bytes[jn]), detail::lds_u16(px[1] + column_bytes[jn]), 0x5410);
        const uint32_t b1 =
            __byte_perm(detail::lds_u16(px[2] + column_bytes[jn]), detail::lds_u16(px[3] + column_bytes[jn]), 0x5410);
        Mma::mma(acc[0][jn], a[0], b0, b1);
        Mma::mma(acc[1][jn], a[1], b0, b1);
      }
      if (++qs == steps_per_row) qs = 0, ++pp;
    }
  }

  // Each half parks its sums in its own buffer past the staging; they are added half 0 first.
  constexpr int kOutPitch = kColumns + 4, kHalfOutputs = kFewChannelWgradFilters * kOutPitch;
  float* partial = reinterpret_cast<float*>(smem + 2 * prm.half_bytes);
#pragma unroll
  for (int f = 0; f < 2; ++f)
#pragma unroll
    for (int jn = 0; jn < NC; ++jn)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int m = warp_m * 32 + f * 16 + g + (e / 2) * 8, col = warp_n * 8 * NC + jn * 8 + 2 * t + e % 2;
        partial[half * kHalfOutputs + m * kOutPitch + col] = acc[f][jn][e];
      }
  __syncthreads();

  // The cluster's sum in rank order; rank r stores elements r, r + ranks*threads, ... of the block.
  namespace cg = cooperative_groups;
  const bool clustered = prm.cluster_split > 1;
  if (clustered) cg::this_cluster().sync();  // every rank's block sum is in its shared memory
  const int rank = clustered ? static_cast<int>(cg::this_cluster().block_rank()) : 0;
  const int ranks = clustered ? prm.cluster_split : 1;
  for (int e = rank * kFewChannelWgradThreads + tid; e < kFewChannelWgradFilters * kColumns;
       e += ranks * kFewChannelWgradThreads) {
    const int m = e / kColumns, col = e % kColumns;
    const int k = k0 + m, j = col0 + col;
    if (k >= prm.K || j >= prm.crs) continue;
    const int at = m * kOutPitch + col;
    float sum = partial[at] + partial[kHalfOutputs + at];
    if (clustered) {
      cg::cluster_group cluster = cg::this_cluster();
      sum = 0.0f;
      for (int r = 0; r < ranks; ++r) {
        const float* peer = cluster.map_shared_rank(partial, r);
        sum += peer[at] + peer[kHalfOutputs + at];
      }
    }
    const int c = j % prm.C, rs = j / prm.C, s = rs % prm.S, r = rs / prm.S;
    T* dst = static_cast<T*>(prm.dw) + k * prm.dw_sk + c * prm.dw_sc + r * prm.dw_sr + s * prm.dw_ss;
    if (prm.atomic) {
      atomic_add_rounded(dst, prm.alpha * sum);
    } else {
      const float old = prm.beta != 0.0f ? to_float(*dst) : 0.0f;
      *dst =
          from_float<T>(epilogue_value(prm.alpha, sum, prm.beta, &old, prm.bias ? prm.bias[k] : 0.0f, prm.activation));
    }
  }
  if (clustered) cg::this_cluster().sync();  // no block leaves while its peers still read it
}

}  // namespace mconv::cuda
