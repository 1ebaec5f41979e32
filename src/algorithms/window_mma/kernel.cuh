// window_mma: a TF32 convolution with x in plane order (NCHW), on tensor cores, out of a shared-memory
// window of x's rows.
//
// Note [window mma]: with x in plane order a layer's contiguous axis is the output pixels, not the
// GEMM's reduction. implicit_mma's gathers then copy one element per (pixel, channel, tap) from
// global memory (pixel runs only for 1x1 stride-1 layers), so every 3x3 layer reads each element of x
// nine times through L2 and issues one 4-byte copy per element and tap. Here a block takes
// block_pixels consecutive output pixels (n, p, q) and block_filters filters. Its window is the
// rows of x those pixels read: images stacked, each Hv = (P-1)*stride_h + (R-1)*dil_h + 1 rows
// from its first padded row, every row from its first padded column, zeros outside the image. A
// chunk of 8 channels of that window (one plane of rows x columns a channel) and the chunk's filter
// rows are copied into shared memory once, and the A operand of each MMA, 16 output pixels x 8
// channels of one tap, is read at
//   channel * pitch + start[pixel] + offset[tap],
// start[pixel] = (n*Hv + p*stride_h - v0) * columns + q*stride_w, offset[tap] = r*dil_h*columns +
// s*dil_w: the offset-sequence technique on the window, whose elements are each read R*S times from
// shared memory after one trip from global.
//
// The MMA is wgmma m64nNk8 in TF32 with A in registers: TF32 fragments are one element a register,
// so each warp loads its 16 pixels x 8 channels with plain 32-bit shared loads from the pixel-major
// window (lane (g, t): pixels g and g + 8, channels t and t + 4, rounded to nearest, ties away, as
// cuDNN does), with no transpose; a channel plane's pitch 8 past a multiple of 32 puts the 32 lanes
// on 32 banks at stride 1. B is K-major in the 128-byte swizzle (Note [wgmma shared layout]): a
// filter's row of 128 bytes holds 4 taps x 8 channels, so a tap is a k-step 32 bytes on, and R*S
// taps take ceil(R*S / 4) row blocks a chunk. mma.sync's m16n8k8 (the first form of this kernel) ran
// resnet50's 3x3 layers at 40-55 TFLOP/s, below implicit_mma (docs/PERFORMANCE.md, "Window MMA").
// Each of a block's two warpgroups owns 64 (or 128) pixels x block_filters filters; chunks go
// through `stages` cp.async buffers.
//
// Where the tiles fill less than half the resident blocks (late ResNet stages: 6,272 or 1,568
// pixels), the blocks of a cluster split the chunks and rank 0 adds its peers' partial sums from
// their shared memory in rank order before the epilogue: no workspace, no atomics, deterministic.
// The fused epilogue (alpha, beta, bias, ReLU) stores y in any layout. sm_90a only (wgmma).
#pragma once

#include <cooperative_groups.h>

#include <cstdint>

#include "../common/conv_geometry.cuh"
#include "../common/cp_async.cuh"
#include "../common/dependent_launch.cuh"
#include "../common/epilogue.cuh"
#include "../common/fast_divmod.cuh"
#include "../common/mma_sync.cuh"
#include "../common/wgmma.cuh"
#include "planner.hpp"

namespace mconv::cuda {

inline constexpr int kWindowMmaThreads = mconv::detail::kWindowMmaThreads;
inline constexpr int kWindowMmaChunk = mconv::detail::kWindowMmaChunk;
inline constexpr int kWindowMmaTapsPerRow = mconv::detail::kWindowMmaTapsPerRow;
static_assert(kWindowMmaThreads == 256, "two warpgroups");
static_assert(kWindowMmaChunk == 8, "one TF32 k-step a tap");

struct WindowMmaParams : ConvGeometry {
  int npq;               // N * P * Q
  int image_rows;        // Hv: window rows of one image
  int win_rows;          // the most rows of a block's window (its buffers' capacity)
  int win_cols;          // columns of a window row
  int channel_pitch;     // floats from one channel's window plane to the next
  int filter_bytes;      // one row block of filter rows: block_filters x 128 bytes
  int stage_bytes;       // a chunk's filter row blocks, then its window (one of `stages`)
  int chunks;            // chunks of 8 channels of C
  int chunks_per_split;  // chunks of one cluster rank
  int stages;            // 2 or 3 buffers
  int vector_w;          // 3x3 KCRS filters, C a multiple of 8: each thread's 4 channels x 9 taps as 9 float4
  FastDivmod pq_div;     // pixel -> (n, p*Q + q)
  FastDivmod q_div;      // p*Q + q -> (p, q)
  FastDivmod cols_div;   // window element -> (channel x row, column)
  FastDivmod rows_div;   // channel x window row -> (channel, row)
  FastDivmod hv_div;     // window row v0 + row -> (n, padded input row)
  FastDivmod s_div;      // tap -> (r, s)
};

/// Element e (0..35) of 9 float4s held in registers (e known at compile time once unrolled).
__device__ __forceinline__ float element_of(const float4 (&v)[9], int e) {
  const float4& q = v[e / 4];
  return e % 4 == 0 ? q.x : e % 4 == 1 ? q.y : e % 4 == 2 ? q.z : q.w;
}

/// BN: filters of a block (64 or 128, one wgmma's N); MT: m64 tiles a warpgroup (1: 128-pixel
/// blocks; 2: 256). One block an SM: the filter registers of vector_w and 3 stages of a 3x3 chunk
/// leave no room for two.
template <int BN, int MT>
__global__ void __launch_bounds__(kWindowMmaThreads, 1) window_mma_kernel(const WindowMmaParams prm) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int BM = 2 * 64 * MT;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const uint32_t smem_raw_s = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  // Row blocks of filter rows start 1024-byte aligned (the 128-byte swizzle's groups).
  const uint32_t pad = ((smem_raw_s + 1023u) & ~1023u) - smem_raw_s;
  unsigned char* const smem = smem_raw + pad;
  const uint32_t smem_s = smem_raw_s + pad;
  detail::wait_then_allow_dependent_grids();
  namespace cg = cooperative_groups;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4, wg = warp / 4;
  const int m0 = static_cast<int>(blockIdx.x) * BM, k0 = static_cast<int>(blockIdx.y) * BN;
  const int taps = prm.R * prm.S, row_blocks = (taps + kWindowMmaTapsPerRow - 1) / kWindowMmaTapsPerRow;
  // The window's first row v0 (its first pixel's first padded row) and the rows this block reads.
  const auto virtual_row = [&](int m) {
    unsigned n, pq, p, q;
    prm.pq_div.divmod(static_cast<unsigned>(m), n, pq);
    prm.q_div.divmod(pq, p, q);
    return static_cast<int>(n) * prm.image_rows + static_cast<int>(p) * prm.stride_h;
  };
  const int v0 = virtual_row(m0);
  const int rows = virtual_row(min(m0 + BM, prm.npq) - 1) - v0 + (prm.R - 1) * prm.dil_h + 1;

  // This rank's chunks (blockIdx.z is the rank: clusters run along z).
  const int rank = static_cast<int>(blockIdx.z);
  const int first_chunk = rank * prm.chunks_per_split;
  const int my_chunks = min(prm.chunks_per_split, prm.chunks - first_chunk);

  // Chunk `chunk`'s filter rows and window into buffer `buf` (copies in flight; the caller commits).
  const auto load_chunk = [&](int chunk, int buf) {
    unsigned char* const stage = smem + buf * prm.stage_bytes;
    float* const win = reinterpret_cast<float*>(stage + row_blocks * prm.filter_bytes);
    const int c0 = chunk * kWindowMmaChunk;
    const int elements = kWindowMmaChunk * prm.win_rows * prm.win_cols;
    for (int e = tid; e < elements; e += kWindowMmaThreads) {
      unsigned plane_row, col, cc, row, n, hh;
      prm.cols_div.divmod(static_cast<unsigned>(e), plane_row, col);
      prm.rows_div.divmod(plane_row, cc, row);
      if (static_cast<int>(row) >= rows) continue;  // past this block's window: never read
      prm.hv_div.divmod(static_cast<unsigned>(v0) + row, n, hh);
      const int h = static_cast<int>(hh) - prm.pad_h, wc = static_cast<int>(col) - prm.pad_w;
      const int c = c0 + static_cast<int>(cc);
      const bool in = h >= 0 && h < prm.H && wc >= 0 && wc < prm.W && c < prm.cg;
      const float* const src = in ? prm.x + n * prm.x_sn + c * prm.x_sc + h * prm.x_sh + wc * prm.x_sw : prm.x;
      detail::cp_async_f32(win + cc * prm.channel_pitch + row * prm.win_cols + col, src, in);
    }
    // Filter f's 128-byte row in row block tap / 4 holds taps 4b..4b+3 x 8 channels: channel cc of
    // tap j in 16-byte chunk (2 (j % 4) + cc / 4) ^ (f % 8). Without vector_w a thread takes one
    // (filter, channel) and copies its R*S taps (rotated for a true convolution) element by element.
    if (prm.vector_w) return;
    for (int e = tid; e < BN * kWindowMmaChunk; e += kWindowMmaThreads) {
      const int f = e / kWindowMmaChunk, cc = e % kWindowMmaChunk;
      const int k = k0 + f, c = c0 + cc;
      const bool in = k < prm.kg && c < prm.cg;
      const float* const src = in ? prm.w + k * prm.w_sk + c * prm.w_sc : prm.w;
      unsigned char* const dst = stage + f * wgmma::kRowBytes + (cc % 4) * 4;
      int tap = 0;
      for (int r = 0; r < prm.R; ++r) {
        const int fr = prm.flip ? prm.R - 1 - r : r;
        for (int s = 0; s < prm.S; ++s, ++tap) {
          const int fs = prm.flip ? prm.S - 1 - s : s;
          const int chunk16 = ((tap % kWindowMmaTapsPerRow) * 2 + cc / 4) ^ (f % 8);
          detail::cp_async_f32(
              reinterpret_cast<float*>(dst + (tap / kWindowMmaTapsPerRow) * prm.filter_bytes + chunk16 * 16),
              in ? src + fr * prm.w_sr + fs * prm.w_ss : prm.w, in);
        }
      }
    }
  };

  // vector_w: thread (f, quad) = (tid / 2, tid % 2) reads channels 4 quad..4 quad + 3 of filter f,
  // all 9 taps, as 9 16-byte loads (144 contiguous bytes of KCRS w) into registers while the chunk
  // before multiplies, and stores each tap's 4 channels as one 16-byte chunk afterwards: 4-byte
  // copies of the filter rows were 9 times the L1 requests.
  float4 w_regs[9];
  const int w_filter = tid / 2, w_quad = tid % 2;
  const auto fetch_filters = [&](int chunk) {
    const int k = k0 + w_filter;
    const bool in = w_filter < BN && k < prm.kg;
    const float4* const src =
        reinterpret_cast<const float4*>(prm.w + (in ? k * prm.w_sk + (chunk * kWindowMmaChunk + 4 * w_quad) * 9 : 0));
#pragma unroll
    for (int j = 0; j < 9; ++j) w_regs[j] = in ? __ldg(src + j) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  };
  const auto store_filters = [&](int buf) {
    if (w_filter >= BN) return;
    unsigned char* const row = smem + buf * prm.stage_bytes + w_filter * wgmma::kRowBytes;
#pragma unroll
    for (int tap = 0; tap < 9; ++tap) {
      const int chunk16 = ((tap % kWindowMmaTapsPerRow) * 2 + w_quad) ^ (w_filter % 8);
      *reinterpret_cast<float4*>(row + (tap / kWindowMmaTapsPerRow) * prm.filter_bytes + chunk16 * 16) =
          make_float4(element_of(w_regs, tap), element_of(w_regs, 9 + tap), element_of(w_regs, 18 + tap),
                      element_of(w_regs, 27 + tap));
    }
  };

  // Lane (g, t) of warp w % 4 holds rows g and g + 8 of the warp's 16 in each m64 tile of its
  // warpgroup: window offsets of those pixels at channel t (0 past the last pixel: a valid address
  // whose sums are never stored).
  int a_start[MT][2];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int m = m0 + (wg * MT + i) * 64 + (warp % 4) * 16 + g + 8 * h;
      int start = 0;
      if (m < prm.npq) {
        unsigned pq, p, q, n;
        prm.pq_div.divmod(static_cast<unsigned>(m), n, pq);
        prm.q_div.divmod(pq, p, q);
        start = (static_cast<int>(n) * prm.image_rows + static_cast<int>(p) * prm.stride_h - v0) * prm.win_cols +
                static_cast<int>(q) * prm.stride_w;
      }
      a_start[i][h] = start + t * prm.channel_pitch;
    }

  float acc[MT][BN / 2];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int e = 0; e < BN / 2; ++e) acc[i][e] = 0.0f;

  for (int s = 0; s < prm.stages - 1; ++s) {
    if (s < my_chunks) {
      load_chunk(first_chunk + s, s);
      if (prm.vector_w) {
        fetch_filters(first_chunk + s);
        store_filters(s);
      }
    }
    detail::cp_async_commit();
  }
  const int pitch4 = 4 * prm.channel_pitch;
  for (int i = 0; i < my_chunks; ++i) {
    if (prm.stages == 3)
      detail::cp_async_wait<1>();
    else
      detail::cp_async_wait<0>();
    wgmma::fence_shared_for_async();  // the copies are visible to the tensor cores' reads
    __syncthreads();                  // chunk i in place; every warpgroup is done with chunk i - 1's buffer
    const int next = i + prm.stages - 1;
    if (next < my_chunks) {
      load_chunk(first_chunk + next, next % prm.stages);
      if (prm.vector_w) fetch_filters(first_chunk + next);
    }
    detail::cp_async_commit();

    const int buf = i % prm.stages;
    const uint32_t filters_s = smem_s + buf * prm.stage_bytes;
    const float* const win =
        reinterpret_cast<const float*>(smem + buf * prm.stage_bytes + row_blocks * prm.filter_bytes);
    // Four taps at a time: their A fragments, then their wgmmas.
    for (int tap0 = 0; tap0 < taps; tap0 += kWindowMmaTapsPerRow) {
      uint32_t a[kWindowMmaTapsPerRow][MT][4];
#pragma unroll
      for (int j = 0; j < kWindowMmaTapsPerRow; ++j) {
        const int tap = tap0 + j;
        if (tap >= taps) break;
        unsigned r, s;
        prm.s_div.divmod(static_cast<unsigned>(tap), r, s);
        const float* const a_tap =
            win + static_cast<int>(r) * prm.dil_h * prm.win_cols + static_cast<int>(s) * prm.dil_w;
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          a[j][m][0] = __float_as_uint(a_tap[a_start[m][0]]);
          a[j][m][1] = __float_as_uint(a_tap[a_start[m][1]]);
          a[j][m][2] = __float_as_uint(a_tap[a_start[m][0] + pitch4]);
          a[j][m][3] = __float_as_uint(a_tap[a_start[m][1] + pitch4]);
#pragma unroll
          for (int e = 0; e < 4; ++e) MmaTf32::convert_fragment(a[j][m][e]);
        }
      }
      const uint64_t b = wgmma::descriptor(filters_s + (tap0 / kWindowMmaTapsPerRow) * prm.filter_bytes);
#pragma unroll
      for (int m = 0; m < MT; ++m) wgmma::pin(acc[m]);
      wgmma::fence();
#pragma unroll
      for (int j = 0; j < kWindowMmaTapsPerRow; ++j) {
        if (tap0 + j >= taps) break;
#pragma unroll
        for (int m = 0; m < MT; ++m) wgmma::mma_async_tf32_registers<BN>(acc[m], a[j][m], b + 2 * j);
      }
      wgmma::commit();
      wgmma::wait<0>();  // the A registers and the buffer are free again
#pragma unroll
      for (int m = 0; m < MT; ++m) wgmma::pin(acc[m]);
    }
    // (buffer next % stages held chunk i - 1, which every warpgroup finished before the barrier)
    if (prm.vector_w && next < my_chunks) store_filters(next % prm.stages);
  }
  detail::cp_async_wait<0>();
  __syncthreads();  // every buffer read: they may hold the partial sums

  float* const partial = reinterpret_cast<float*>(smem);
  if (gridDim.z > 1) {
    // Ranks 1.. park their sums thread-major (conflict-free); rank 0 adds them in rank order.
    cg::cluster_group cluster = cg::this_cluster();
    if (rank != 0) {
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int e = 0; e < BN / 2; ++e) partial[(m * BN / 2 + e) * kWindowMmaThreads + tid] = acc[m][e];
    }
    cluster.sync();  // every rank's sums parked
    if (rank == 0) {
      for (int peer = 1; peer < static_cast<int>(gridDim.z); ++peer) {
        const float* const part = cluster.map_shared_rank(partial, peer);
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
          for (int e = 0; e < BN / 2; ++e) acc[m][e] += part[(m * BN / 2 + e) * kWindowMmaThreads + tid];
      }
    }
    cluster.sync();  // no block leaves while rank 0 still reads its shared memory
    if (rank != 0) return;
  }

  // Accumulator e of m64 tile m: pixel row g + 8 ((e / 2) % 2) of the warp's 16, filter 8 (e / 4) +
  // 2t + e % 2.
#pragma unroll
  for (int m = 0; m < MT; ++m) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int pixel = m0 + (wg * MT + m) * 64 + (warp % 4) * 16 + g + 8 * h;
      if (pixel >= prm.npq) continue;
      unsigned n, pq, p, q;
      prm.pq_div.divmod(static_cast<unsigned>(pixel), n, pq);
      prm.q_div.divmod(pq, p, q);
      float* const y_pixel = prm.y + n * prm.y_sn + p * prm.y_sp + q * prm.y_sq;
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int k = k0 + nt * 8 + 2 * t + j;
          if (k >= prm.kg) continue;
          const float old = prm.beta != 0.0f ? y_pixel[k * prm.y_sk] : 0.0f;
          y_pixel[k * prm.y_sk] = epilogue_value(prm.alpha, acc[m][nt * 4 + 2 * h + j], prm.beta, &old,
                                                 prm.bias ? prm.bias[k] : 0.0f, prm.activation);
        }
      }
    }
  }
#else
  __trap();  // the planner gives layers to window_mma only on sm_90 (wgmma)
#endif
}

}  // namespace mconv::cuda
