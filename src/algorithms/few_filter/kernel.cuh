// few_filter: the forward convolution of a layer with few filters (an output head; a dgrad step of
// an RGB stem).
//
// Note [few-filter forward]: the dgrad of ResNet's conv1 (C = 3, 7x7, stride 2) splits into four
// phase steps (backward.cpp), each a stride-1 forward convolution of dy's 64 channels with 3x3 to
// 4x4 taps into 3 filters (dx's channels). As a GEMM of N*P*Q pixels x 3 filters over 64*R*S
// columns, implicit_mma runs it on its narrowest tile, 16 filters (5.3 times the work), gathering
// each (pixel, tap) row of dy from global memory for every tap, and stays far below the tensor
// cores' rate. Here a block takes tile_p x tile_q output pixels of one image and copies, a chunk of
// up to 64 channels at a time, the window of x they read (zeros outside the image) into shared
// memory, with each window pixel's chunk one row of 16-byte vectors (16-byte copies where x's
// channels are contiguous), and the chunk's 8 filter rows (zeros past K) beside it. The A operand
// of each MMA, 16 output pixels x 16 channels of one tap, is then an ldmatrix at start[pixel] +
// offset[tap] + channel: the offset-sequence technique on the window, offset[tap] = (r*dh*columns +
// s*dw) * pitch. A 4x4 tap set reads each window pixel 16 times from shared memory after one trip
// from global.
//
// The MMA is mma.sync m16n8k16 (fp16, bf16) with fp32 accumulators and one 8-filter tile: A by
// ldmatrix.x4 from pixel rows an odd multiple of 16 bytes apart (8 rows in distinct bank groups),
// B by ldmatrix.x2 from the filter rows, one B fragment for a warp's four 16-pixel row steps. Where
// the channels take more than one chunk, two buffers alternate and a chunk is copied while the one
// before it is multiplied; otherwise two resident blocks an SM overlap one's copies with the
// other's MMAs. The fused epilogue (alpha, beta, bias, ReLU) stores y in any layout. No workspace,
// no atomics, deterministic.
#pragma once

#include <cstdint>

#include "../common/conv_geometry.cuh"
#include "../common/cp_async.cuh"
#include "../common/dependent_launch.cuh"
#include "../common/epilogue.cuh"
#include "../common/fast_divmod.cuh"
#include "../common/mma_sync.cuh"
#include "../common/storage.cuh"
#include "planner.hpp"

namespace mconv::cuda {

inline constexpr int kFewFilterThreads = mconv::detail::kFewFilterThreads;
inline constexpr int kFewFilterWarps = kFewFilterThreads / 32;
inline constexpr int kFewFilterStepsPerWarp = mconv::detail::kFewFilterStepsPerWarp;
static_assert(mconv::detail::kFewFilterMaxFilters == 8, "one m16n8k16 filter tile");

struct FewFilterParams : ConvGeometry, StoragePointers {
  int tile_p, tile_q;       // a block's output pixels (tile_q a multiple of 16)
  int chunk_c, chunks;      // channels of a window chunk; chunks of C
  int win_rows, win_cols;   // the window's pixels
  int pixel_pitch;          // shared bytes from one window pixel's chunk to the next
  int filter_pitch;         // shared bytes from one filter row to the next
  int window_bytes;         // a chunk's window; its filter rows follow
  int buffer_bytes;         // a chunk's window and filter rows (one of `buffers`)
  int buffers;              // 2 where chunks > 1
  int vector_x;             // x's channels contiguous in 16-byte vectors: window rows copied as such
  FastDivmod tiles_q_div;   // block -> (image row of tiles, column tile)
  FastDivmod tiles_p_div;   // image row of tiles -> (n, row tile)
  FastDivmod win_cols_div;  // window pixel -> (row, column)
  FastDivmod vectors_div;   // window vector -> (pixel, vector of the chunk)
  FastDivmod pixels_div;    // window vector -> (vector of the chunk, pixel)
  FastDivmod taps_div;      // filter row x tap -> (row, tap)
};

/// Mma: MmaFp16 or MmaBf16.
template <class Mma>
__global__ void __launch_bounds__(kFewFilterThreads, mconv::detail::kFewFilterBlocksPerSm)
    few_filter_kernel(const FewFilterParams prm) {
  using T = typename Mma::Storage;
  static_assert(sizeof(T) == 2, "16-bit elements");
  extern __shared__ __align__(16) unsigned char smem[];
  detail::wait_then_allow_dependent_grids();

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  unsigned image_row, tq, n, tp;
  prm.tiles_q_div.divmod(blockIdx.x, image_row, tq);
  prm.tiles_p_div.divmod(image_row, n, tp);
  const int p0 = static_cast<int>(tp) * prm.tile_p, q0 = static_cast<int>(tq) * prm.tile_q;
  const int h0 = p0 * prm.stride_h - prm.pad_h, w0 = q0 * prm.stride_w - prm.pad_w;
  const T* const x_n = prm.x_as<T>() + n * prm.x_sn;
  const T* const w = prm.w_as<T>();
  const int taps = prm.R * prm.S, C = prm.cg, K = prm.kg;

  // Filter rows K..7 stay zero in both buffers (their accumulators are never stored, but an
  // uninitialised NaN would still be read).
  for (int b = 0; b < prm.buffers; ++b)
    for (int v = tid; v < (8 - K) * (prm.filter_pitch / 16); v += kFewFilterThreads)
      *reinterpret_cast<uint4*>(smem + b * prm.buffer_bytes + prm.window_bytes + K * prm.filter_pitch + 16 * v) =
          make_uint4(0, 0, 0, 0);

  // Chunk `chunk`'s window and filter rows into buffer `buf` (copies in flight; the caller commits).
  const auto load_chunk = [&](int chunk, int buf) {
    unsigned char* const base = smem + buf * prm.buffer_bytes;
    const int c0 = chunk * prm.chunk_c, vectors = prm.win_rows * prm.win_cols * (prm.chunk_c / 8);
    for (int v = tid; v < vectors; v += kFewFilterThreads) {
      // (vectors of a pixel adjacent for 16-byte copies; else pixels adjacent, so that a warp's
      // element loads run along x's rows where its channels are planes)
      unsigned pixel, vec, row, col;
      if (prm.vector_x)
        prm.vectors_div.divmod(static_cast<unsigned>(v), pixel, vec);
      else
        prm.pixels_div.divmod(static_cast<unsigned>(v), vec, pixel);
      prm.win_cols_div.divmod(pixel, row, col);
      const int h = h0 + static_cast<int>(row), wc = w0 + static_cast<int>(col), c = c0 + 8 * static_cast<int>(vec);
      const bool in = h >= 0 && h < prm.H && wc >= 0 && wc < prm.W;
      unsigned char* const dst = base + pixel * prm.pixel_pitch + 16 * vec;
      const T* const src = x_n + h * prm.x_sh + wc * prm.x_sw + c * prm.x_sc;
      if (prm.vector_x) {
        detail::cp_async_16_or_zero(dst, in && c < C ? src : x_n, in && c < C);
      } else {
        alignas(16) T e[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) e[i] = in && c + i < C ? src[i * prm.x_sc] : from_float<T>(0.0f);
        *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(e);
      }
    }
    // Filter row k, column tap * chunk_c + c: w[k][c0 + c][r][s] (rotated for a true convolution).
    unsigned char* const rows = base + prm.window_bytes;
    for (int rt = warp; rt < K * taps; rt += kFewFilterWarps) {
      unsigned k, tap;
      prm.taps_div.divmod(static_cast<unsigned>(rt), k, tap);
      const int r = static_cast<int>(tap) / prm.S, s = static_cast<int>(tap) % prm.S;
      const int fr = prm.flip ? prm.R - 1 - r : r, fs = prm.flip ? prm.S - 1 - s : s;
      const T* const src = w + k * prm.w_sk + fr * prm.w_sr + fs * prm.w_ss;
      T* const dst = reinterpret_cast<T*>(rows + k * prm.filter_pitch) + tap * prm.chunk_c;
      for (int c = lane; c < prm.chunk_c; c += 32)
        dst[c] = c0 + c < C ? __ldg(src + (c0 + c) * prm.w_sc) : from_float<T>(0.0f);
    }
  };

  // The warp's row steps: step warp + 8i, 16 output pixels of one row; each lane addresses pixel
  // lane % 16 of it, channels (lane / 16) * 8 of a 16-channel step (ldmatrix.x4's four matrices).
  const int steps_row = prm.tile_q / 16, steps = prm.tile_p * steps_row;
  int step_pp[kFewFilterStepsPerWarp], step_qq[kFewFilterStepsPerWarp];
  uint32_t a_pixel[kFewFilterStepsPerWarp];
#pragma unroll
  for (int i = 0; i < kFewFilterStepsPerWarp; ++i) {
    const int step = min(warp + kFewFilterWarps * i, steps - 1);
    step_pp[i] = step / steps_row;
    step_qq[i] = step % steps_row * 16;
    a_pixel[i] = static_cast<uint32_t>(
        (step_pp[i] * prm.stride_h * prm.win_cols + (step_qq[i] + lane % 16) * prm.stride_w) * prm.pixel_pitch +
        lane / 16 * 16);
  }
  float acc[kFewFilterStepsPerWarp][4];
#pragma unroll
  for (int i = 0; i < kFewFilterStepsPerWarp; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[i][e] = 0.0f;

  load_chunk(0, 0);
  detail::cp_async_commit();
  const uint32_t smem_s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const int ksteps = prm.chunk_c / 16;
  for (int chunk = 0; chunk < prm.chunks; ++chunk) {
    const int buf = chunk % prm.buffers;
    if (chunk + 1 < prm.chunks) {
      load_chunk(chunk + 1, buf ^ 1);
      detail::cp_async_commit();
      detail::cp_async_wait<1>();
    } else {
      detail::cp_async_wait<0>();
    }
    __syncthreads();  // the chunk's window and filter rows in place

    const uint32_t window_s = smem_s + buf * prm.buffer_bytes;
    // ldmatrix.x2: lanes 0-7 address filters 0-7 at the step's channels 0-7, lanes 8-15 at 8-15.
    const uint32_t b_lane = window_s + prm.window_bytes + lane % 8 * prm.filter_pitch + lane / 8 % 2 * 16;
    for (int r = 0; r < prm.R; ++r) {
      for (int s = 0; s < prm.S; ++s) {
        const uint32_t tap_off = (r * prm.dil_h * prm.win_cols + s * prm.dil_w) * prm.pixel_pitch;
        const uint32_t b_tap = b_lane + (r * prm.S + s) * prm.chunk_c * 2;
        for (int ks = 0; ks < ksteps; ++ks) {
          // Every load before the first MMA: the loads are asm volatile, kept in program order, so
          // interleaving them would make each MMA wait out its own load's latency.
          uint32_t b[2], a[kFewFilterStepsPerWarp][4];
          detail::ldmatrix_x2(b, b_tap + ks * 32);
#pragma unroll
          for (int i = 0; i < kFewFilterStepsPerWarp; ++i)
            if (warp + kFewFilterWarps * i < steps)  // warp-uniform
              detail::ldmatrix_x4(a[i], window_s + a_pixel[i] + tap_off + ks * 32);
#pragma unroll
          for (int i = 0; i < kFewFilterStepsPerWarp; ++i)
            if (warp + kFewFilterWarps * i < steps) Mma::mma(acc[i], a[i], b[0], b[1]);
        }
      }
    }
    __syncthreads();  // the buffer is read: the chunk after next may be copied into it
  }

  // Thread (g, t) holds pixels g and g + 8 of each step, filters 2t and 2t + 1.
  T* const y_n = prm.y_as<T>() + n * prm.y_sn;
#pragma unroll
  for (int i = 0; i < kFewFilterStepsPerWarp; ++i) {
    if (warp + kFewFilterWarps * i >= steps) break;
    const int p = p0 + step_pp[i];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int q = q0 + step_qq[i] + g + 8 * h;
      if (p >= prm.P || q >= prm.Q) continue;
      T* const y_pixel = y_n + p * prm.y_sp + q * prm.y_sq;
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int k = 2 * t + j;
        if (k >= K) continue;
        const float old = prm.beta != 0.0f ? to_float(y_pixel[k * prm.y_sk]) : 0.0f;
        y_pixel[k * prm.y_sk] = from_float<T>(epilogue_value(prm.alpha, acc[i][2 * h + j], prm.beta, &old,
                                                             prm.bias ? prm.bias[k] : 0.0f, prm.activation));
      }
    }
  }
}

}  // namespace mconv::cuda
