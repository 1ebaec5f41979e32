// few_channel: the forward convolution of a layer with few input channels (an RGB stem).
//
// Note [few-channel forward]: for conv1 of a ResNet (C = 3, 7x7, stride 2),
//   y[n][p][q][k] = sum over r, s, c of x[n][p*sh - ph + r*dh][q*sw - pw + s*dw][c] * w[k][r][s][c]
// is a GEMM of N*P*Q pixels x K filters over C*R*S = 147 columns. implicit_mma runs it with each
// pixel's 3 channels padded to an 8-element vector (392 columns, 2.7 times the work) and gathered
// from global memory. Here a block takes tile_p x tile_q output pixels of one image and loads, once,
// the window of x they read (x_window.cuh: zeros outside the image, 4-byte words where x is
// channels-last) and its 64 filters' rows of C*R*S columns, padded only to the MMA's 16. Each
// (pixel, column) element is then a shared read at start[pixel] + offset[column], the
// offset-sequence technique on the window: offset[column] = r*dh*pitch + s*dw*C + c and start[pixel]
// = pp*sh*pitch + qq*sw*C. A 7x7 window at stride 2 reads each x element about 12 times; it comes
// from shared memory each time after one trip from global.
//
// The MMA is mma.sync m16n8k16 with fp32 accumulators: A = the window's elements (pixels x columns)
// as 16-bit shared loads packed in pairs, the offsets of a thread's four columns of a step one
// 16-byte read of the offset table; B = the filter rows by ldmatrix, from rows padded by 16 bytes.
// fp32 tensors in TF32 math take m16n8k8, two a 16-column step, their elements 32-bit loads rounded
// to TF32 as they are loaded. Columns past C*R*S hold zero filters, and their A values are masked to
// zero too: a 0 * Inf in x would otherwise make a NaN the sum does not have. A warp takes two
// 16-pixel row steps at a time against all 64 filters and stores them through the fused epilogue.
// 16-bit channels-last y with beta 0 goes through the warp's staging rows in shared memory and
// leaves as 16-byte runs, a pixel's 128 bytes from eight lanes (from the accumulators each store
// would write 4 bytes of 8 pixels' rows). Blocks are persistent, two an SM, over the tiles: the
// filter rows load once a block, and a tile's window is copied while the one before it is
// multiplied. No workspace, no atomics.
#pragma once

#include <cstdint>

#include "../common/conv_geometry.cuh"
#include "../common/cp_async.cuh"
#include "../common/dependent_launch.cuh"
#include "../common/epilogue.cuh"
#include "../common/fast_divmod.cuh"
#include "../common/mma_sync.cuh"
#include "../common/storage.cuh"
#include "../common/x_window.cuh"
#include "planner.hpp"

namespace mconv::cuda {

inline constexpr int kFewChannelThreads = mconv::detail::kFewChannelThreads;
inline constexpr int kFewChannelFilters = mconv::detail::kFewChannelFilters;
inline constexpr int kFewChannelWarps = kFewChannelThreads / 32;
inline constexpr int kFewChannelStagingPitch = mconv::detail::kFewChannelStagingPitch;
inline constexpr int kFewChannelStagingBytes = 32 * kFewChannelStagingPitch;  // a warp's 32 pixel rows
static_assert(kFewChannelFilters == 64, "a warp's 8 filter tiles of 8");

struct FewChannelParams : ConvGeometry, StoragePointers {
  int crs;                 // C * R * S
  int columns;             // crs rounded up to 16: the MMA steps' columns
  int tile_p, tile_q;      // a tile's output pixels (tile_q a multiple of 16)
  XWindow window;          // the x window of a tile
  int filter_pitch;        // shared bytes from one filter row to the next
  FastDivmod tiles_q_div;  // tile -> (image row of tiles, column tile)
  FastDivmod tiles_p_div;  // image row of tiles -> (n, row tile)
  int window_bytes;        // one of the two window buffers
  int tiles;               // N * ceil(P / tile_p) * ceil(Q / tile_q); a block takes every gridDim.x-th
  int y_rows;              // beta 0, channels-last y of 16-byte pixel rows, K a multiple of 8: staged stores
  int y_pairs;             // y's filters adjacent, K even, every pair aligned: a pair is one 4-byte (8 with fp32) store
};

namespace detail {

/// The two elements at `lo` and `hi` as one MMA register (the lower column in the low half).
__device__ __forceinline__ uint32_t pair_at(uint32_t lo, uint32_t hi) {
  return __byte_perm(lds_u16(lo), lds_u16(hi), 0x5410);
}

/// Two 16-bit values as one word, `lo` at the lower address.
template <class T>
__device__ __forceinline__ uint32_t pack_pair(T lo, T hi) {
  uint16_t l, h;
  memcpy(&l, &lo, 2);
  memcpy(&h, &hi, 2);
  return l | static_cast<uint32_t>(h) << 16;
}

}  // namespace detail

/// Mma: MmaFp16, MmaBf16 or MmaTf32 (fp32 tensors).
template <class Mma>
__global__ void __launch_bounds__(kFewChannelThreads, 2) few_channel_kernel(const FewChannelParams prm) {
  using T = typename Mma::Storage;
  constexpr bool kTf32 = sizeof(T) == 4;
  constexpr int kBytes = static_cast<int>(sizeof(T));
  extern __shared__ __align__(16) unsigned char smem[];
  detail::wait_then_allow_dependent_grids();

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int k0 = static_cast<int>(blockIdx.y) * kFewChannelFilters;
  const int filters_bytes = kFewChannelFilters * prm.filter_pitch;
  int* offsets = reinterpret_cast<int*>(smem + filters_bytes);
  unsigned char* windows = smem + filters_bytes + prm.columns * 4;
  unsigned char* staging = windows + 2 * prm.window_bytes + warp * kFewChannelStagingBytes;
  const T* x = prm.x_as<T>();

  // Tile `tile`'s image and first output pixel; its window's copies into buffer `buf` (returns the
  // window's shift, x_window.cuh).
  struct Origin {
    unsigned n;
    int p0, q0;
  };
  const auto origin = [&](int tile) {
    unsigned image_row, tq, n, tp;
    prm.tiles_q_div.divmod(static_cast<unsigned>(tile), image_row, tq);
    prm.tiles_p_div.divmod(image_row, n, tp);
    return Origin{n, static_cast<int>(tp) * prm.tile_p, static_cast<int>(tq) * prm.tile_q};
  };
  const auto load_window = [&](int tile, int buf) {
    const Origin o = origin(tile);
    return load_x_window<T, kFewChannelThreads>(prm.window, reinterpret_cast<T*>(windows + buf * prm.window_bytes),
                                                x + o.n * prm.x_sn, o.p0 * prm.stride_h - prm.pad_h,
                                                o.q0 * prm.stride_w - prm.pad_w, tid);
  };

  // The first window's copies fly while the filter rows and the offsets are written.
  int tile = static_cast<int>(blockIdx.x);
  int shift = tile < prm.tiles ? load_window(tile, 0) : 0;
  detail::cp_async_commit();

  // Column j is (tap row, tap column, channel) in RSC order. Its window offset, in bytes, goes to
  // the table's entry for the thread that reads it: columns 2t, 2t+1, 2t+8, 2t+9 of a 16-column step
  // are thread t's four, adjacent. Its filter values go to byte 2j of the 64 rows (zeros past C*R*S
  // and K), once for all of the block's tiles.
  for (int j = tid; j < prm.columns; j += kFewChannelThreads) {
    const int c = j % prm.cg, rs = j / prm.cg, s = rs % prm.S, r = rs / prm.S;
    // (TF32: columns t, t+4, t+8, t+12 of a step, two m16n8k8 steps)
    const int within = j % 16, tt = kTf32 ? within % 4 : within % 8 / 2,
              slot = kTf32 ? within / 4 : within / 8 * 2 + within % 2;
    offsets[j / 16 * 16 + tt * 4 + slot] =
        j < prm.crs ? kBytes * (r * prm.dil_h * prm.window.pitch + s * prm.dil_w * prm.cg + c) : 0;
  }
  constexpr int kBatch = 8;  // loads in flight a thread before their stores
  const int filter_elems = kFewChannelFilters * prm.columns;
  for (int e0 = tid; e0 < filter_elems; e0 += kFewChannelThreads * kBatch) {
    T v[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int e = e0 + b * kFewChannelThreads, m = e / prm.columns, j = e - m * prm.columns;
      const int c = j % prm.cg, rs = j / prm.cg, s = rs % prm.S, r = rs / prm.S;
      const int fr = prm.flip ? prm.R - 1 - r : r, fs = prm.flip ? prm.S - 1 - s : s;
      v[b] = e < filter_elems && j < prm.crs && k0 + m < prm.kg
                 ? __ldg(prm.w_as<T>() + (k0 + m) * prm.w_sk + c * prm.w_sc + fr * prm.w_sr + fs * prm.w_ss)
                 : from_float<T>(0.0f);
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int e = e0 + b * kFewChannelThreads, m = e / prm.columns, j = e - m * prm.columns;
      if constexpr (kTf32) {  // rounded once here, as the MMA's operand
        uint32_t bits = __float_as_uint(v[b]);
        Mma::convert_fragment(bits);
        v[b] = __uint_as_float(bits);
      }
      if (e < filter_elems) *reinterpret_cast<T*>(smem + m * prm.filter_pitch + kBytes * j) = v[b];
    }
  }

  const uint32_t offsets_s = static_cast<uint32_t>(__cvta_generic_to_shared(offsets)) + t * 16;
  // ldmatrix: lanes 8i..8i+7 address matrix i's rows: filters (i/2)*8 + 0..7 of a 16-filter pair of
  // tiles, columns (i%2)*8 + 0..7 of the step.
  // TF32: matrix i is one filter tile's columns 4i..4i+3 (b0, b1 of the step's two m16n8k8).
  const uint32_t b_lane = static_cast<uint32_t>(__cvta_generic_to_shared(smem)) +
                          (kTf32 ? lane % 8 * prm.filter_pitch + lane / 8 * 16
                                 : (lane / 16 * 8 + lane % 8) * prm.filter_pitch + lane / 8 % 2 * 16);
  const int steps_per_row = prm.tile_q / 16, steps = prm.tile_p * steps_per_row, ksteps = prm.columns / 16;
  const int pixel_elems = prm.stride_w * prm.cg, row_elems = prm.stride_h * prm.window.pitch;
  // The last step's columns past C*R*S: the thread's elements there are masked to zero.
  // (16-bit: halves of the words of columns 2t, 2t+1 and 2t+8, 2t+9; TF32: words of columns t,
  // t+4, t+8, t+12.)
  uint32_t keep[4];
  if constexpr (kTf32) {
#pragma unroll
    for (int i = 0; i < 4; ++i) keep[i] = (ksteps - 1) * 16 + t + 4 * i < prm.crs ? 0xffffffffu : 0u;
  } else {
    const int last = (ksteps - 1) * 16 + 2 * t;
    keep[0] = keep[1] = (last < prm.crs ? 0xffffu : 0u) | (last + 1 < prm.crs ? 0xffff0000u : 0u);
    keep[2] = keep[3] = (last + 8 < prm.crs ? 0xffffu : 0u) | (last + 9 < prm.crs ? 0xffff0000u : 0u);
  }

  // The block's tiles, each window loaded while the tile before it is multiplied.
  for (int round = 0; tile < prm.tiles; tile += static_cast<int>(gridDim.x), ++round) {
    const int buf = round & 1, next = tile + static_cast<int>(gridDim.x);
    const int next_shift = next < prm.tiles ? load_window(next, buf ^ 1) : 0;
    detail::cp_async_commit();
    detail::cp_async_wait<1>();
    __syncthreads();  // the tile's window (and, the first time, the filter rows and offsets) in place

    const Origin o = origin(tile);
    const uint32_t window_s = static_cast<uint32_t>(__cvta_generic_to_shared(windows + buf * prm.window_bytes));
    for (int pair = warp; 2 * pair < steps; pair += kFewChannelWarps) {
      // The warp's two row steps (the second may be past the tile's last: computed on the first's
      // pixels and not stored); each thread's A rows are pixels g and g + 8 of each.
      uint32_t start[2][2];
      int step_pp[2], step_qq[2];
#pragma unroll
      for (int f = 0; f < 2; ++f) {
        const int step = min(2 * pair + f, steps - 1);
        step_pp[f] = step / steps_per_row;
        step_qq[f] = step % steps_per_row * 16;
#pragma unroll
        for (int h = 0; h < 2; ++h)
          start[f][h] = window_s + kBytes * static_cast<uint32_t>(shift + step_pp[f] * row_elems +
                                                                  (step_qq[f] + g + 8 * h) * pixel_elems);
      }
      float acc[2][8][4];
#pragma unroll
      for (int f = 0; f < 2; ++f)
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[f][j][e] = 0.0f;

      for (int ks = 0; ks < ksteps; ++ks) {
        uint32_t words[4];
        detail::lds_128(offsets_s + ks * 64, words);
        const int4 off = make_int4(int(words[0]), int(words[1]), int(words[2]), int(words[3]));
        if constexpr (kTf32) {
          // Two m16n8k8 steps: a[f][0..1] rows g, g+8 at column t (then t+4: a[f][2..3]); the
          // second step's columns are t+8 and t+12.
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int o0 = half ? off.z : off.x, o1 = half ? off.w : off.y;
            uint32_t a[2][4];
#pragma unroll
            for (int f = 0; f < 2; ++f) {
              a[f][0] = detail::lds_u32(start[f][0] + o0);
              a[f][1] = detail::lds_u32(start[f][1] + o0);
              a[f][2] = detail::lds_u32(start[f][0] + o1);
              a[f][3] = detail::lds_u32(start[f][1] + o1);
#pragma unroll
              for (int i = 0; i < 4; ++i) {
                if (ks == ksteps - 1) a[f][i] &= keep[2 * half + i / 2];
                Mma::convert_fragment(a[f][i]);
              }
            }
#pragma unroll
            for (int j = 0; j < 8; ++j) {
              uint32_t b[4];
              detail::ldmatrix_x4(b, b_lane + j * 8 * prm.filter_pitch + ks * 64);
#pragma unroll
              for (int f = 0; f < 2; ++f) Mma::mma(acc[f][j], a[f], b[2 * half], b[2 * half + 1]);
            }
          }
        } else {
          uint32_t a[2][4];
#pragma unroll
          for (int f = 0; f < 2; ++f) {
            a[f][0] = detail::pair_at(start[f][0] + off.x, start[f][0] + off.y);
            a[f][1] = detail::pair_at(start[f][1] + off.x, start[f][1] + off.y);
            a[f][2] = detail::pair_at(start[f][0] + off.z, start[f][0] + off.w);
            a[f][3] = detail::pair_at(start[f][1] + off.z, start[f][1] + off.w);
          }
          if (ks == ksteps - 1) {
#pragma unroll
            for (int f = 0; f < 2; ++f)
#pragma unroll
              for (int i = 0; i < 4; ++i) a[f][i] &= keep[i];
          }
#pragma unroll
          for (int jp = 0; jp < 4; ++jp) {
            uint32_t b[4];
            detail::ldmatrix_x4(b, b_lane + jp * 16 * prm.filter_pitch + ks * 32);
#pragma unroll
            for (int f = 0; f < 2; ++f) {
              Mma::mma(acc[f][2 * jp], a[f], b[0], b[1]);
              Mma::mma(acc[f][2 * jp + 1], a[f], b[2], b[3]);
            }
          }
        }
      }

      // Thread (g, t) holds pixels g and g + 8 of each step, filters 8j + 2t and 8j + 2t + 1.
      T* const y_n = prm.y_as<T>() + o.n * prm.y_sn;
      if constexpr (!kTf32) {
        if (prm.y_rows) {
          // The warp's 32 pixels x 64 filters through its staging rows (144 bytes apart: a store of
          // eight pixels' words meets 32 banks), then out as 16-byte runs, eight lanes a pixel row.
#pragma unroll
          for (int f = 0; f < 2; ++f)
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
              for (int j = 0; j < 8; ++j) {
                const int k = k0 + 8 * j + 2 * t;
                float v[2];
#pragma unroll
                for (int i = 0; i < 2; ++i)
                  v[i] = epilogue_value(prm.alpha, acc[f][j][2 * h + i], 0.0f, nullptr,
                                        prm.bias && k + i < prm.kg ? prm.bias[k + i] : 0.0f, prm.activation);
                *reinterpret_cast<uint32_t*>(staging + (16 * f + 8 * h + g) * kFewChannelStagingPitch + 16 * j +
                                             4 * t) = detail::pack_pair(from_float<T>(v[0]), from_float<T>(v[1]));
              }
          __syncwarp();
#pragma unroll
          for (int it = 0; it < 8; ++it) {
            const int row = it * 4 + lane / 8, chunk = lane % 8, f = row / 16;
            const int p = o.p0 + step_pp[f], q = o.q0 + step_qq[f] + row % 16;
            const uint4 v = *reinterpret_cast<const uint4*>(staging + row * kFewChannelStagingPitch + 16 * chunk);
            if (2 * pair + f < steps && p < prm.P && q < prm.Q && k0 + 8 * chunk < prm.kg)
              *reinterpret_cast<uint4*>(y_n + p * prm.y_sp + q * prm.y_sq + k0 + 8 * chunk) = v;
          }
          __syncwarp();  // the staging rows are read before the warp's next pair writes them
          continue;
        }
      }
#pragma unroll
      for (int f = 0; f < 2; ++f) {
        if (2 * pair + f >= steps) continue;
        const int p = o.p0 + step_pp[f];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int q = o.q0 + step_qq[f] + g + 8 * h;
          if (p >= prm.P || q >= prm.Q) continue;
          T* const y_pixel = y_n + p * prm.y_sp + q * prm.y_sq;
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            const int k = k0 + 8 * j + 2 * t;
            if (k >= prm.kg) continue;
            float v[2];
#pragma unroll
            for (int i = 0; i < 2; ++i) {
              const float old = prm.beta != 0.0f && k + i < prm.kg ? to_float(y_pixel[(k + i) * prm.y_sk]) : 0.0f;
              v[i] = epilogue_value(prm.alpha, acc[f][j][2 * h + i], prm.beta, &old,
                                    prm.bias && k + i < prm.kg ? prm.bias[k + i] : 0.0f, prm.activation);
            }
            if (prm.y_pairs) {
              if constexpr (kTf32)
                *reinterpret_cast<float2*>(y_pixel + k) = make_float2(v[0], v[1]);
              else
                *reinterpret_cast<uint32_t*>(y_pixel + k) = detail::pack_pair(from_float<T>(v[0]), from_float<T>(v[1]));
            } else {
              y_pixel[k * prm.y_sk] = from_float<T>(v[0]);
              if (k + 1 < prm.kg) y_pixel[(k + 1) * prm.y_sk] = from_float<T>(v[1]);
            }
          }
        }
      }
    }
    shift = next_shift;
    __syncthreads();  // the window is read: the next round's copies may overwrite it
  }
}

}  // namespace mconv::cuda
