// The single-channel kernel family (technique 4, paper section 3.1), driven by the division of
// src/plan/single_channel_planner.hpp: block (strip, filter chunk, image x group) loads a strip of
// rows_per_block output rows' worth of input (all columns, halo included) and its filters_per_block
// filters into shared memory once, then every thread convolves pixels of the strip with the filters,
// four filters at a time in registers. Loads are the sub-block pattern of Note [halo sub-blocks]
// (direct_block_kernel.cuh) over a 32 x 8 thread group.
#pragma once

#include "conv_geometry.cuh"
#include "epilogue.cuh"

namespace mconv::cuda {

struct SingleChannelParams : ConvGeometry {
  int filters_per_block, rows_per_block;
  int strip_rows, strip_cols;
};

inline constexpr int kSingleChannelThreads = 256;

template <int R_, int S_>
__global__ void __launch_bounds__(kSingleChannelThreads) single_channel_kernel(const SingleChannelParams prm) {
  constexpr int TX = 32, TY = kSingleChannelThreads / 32, KF = 4;  // 4 filters in registers per pass
  const int R = R_ > 0 ? R_ : prm.R, S = S_ > 0 ? S_ : prm.S, RS = R * S;
  extern __shared__ __align__(16) float smem[];
  float* sStrip = smem;                                     // [strip_rows][strip_cols]
  float* sFilter = smem + prm.strip_rows * prm.strip_cols;  // [filters_per_block][R*S]

  const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
  const int oy0 = blockIdx.x * prm.rows_per_block;
  const int f0 = blockIdx.y * prm.filters_per_block;
  const int n = blockIdx.z / prm.groups, g = blockIdx.z - n * prm.groups;
  const int nf = min(prm.filters_per_block, prm.kg - f0);
  const int rows = min(prm.rows_per_block, prm.P - oy0);
  const int iy0 = oy0 * prm.stride_h - prm.pad_h, ix0 = -prm.pad_w;
  const float* gX = prm.x + n * prm.x_sn + g * prm.x_sc;

  for (int yy = ty; yy < prm.strip_rows; yy += TY) {
    const int h = iy0 + yy;
    const bool row_ok = static_cast<unsigned>(h) < static_cast<unsigned>(prm.H);
    const float* src_row = gX + h * prm.x_sh;
    for (int xx = tx; xx < prm.strip_cols; xx += TX) {
      const int w = ix0 + xx;
      const bool ok = row_ok && static_cast<unsigned>(w) < static_cast<unsigned>(prm.W);
      sStrip[yy * prm.strip_cols + xx] = ok ? __ldg(src_row + w * prm.x_sw) : 0.0f;
    }
  }
  for (int e = threadIdx.x; e < nf * RS; e += kSingleChannelThreads) {
    const int f = e / RS, rs = e - f * RS, r = rs / S, s = rs - r * S;
    const int fr = prm.flip ? R - 1 - r : r, fs = prm.flip ? S - 1 - s : s;
    sFilter[e] = __ldg(prm.w + (g * prm.kg + f0 + f) * prm.w_sk + fr * prm.w_sr + fs * prm.w_ss);
  }
  __syncthreads();

  const int pixels = rows * prm.Q;
  for (int fc = 0; fc < nf; fc += KF) {
    for (int pix = threadIdx.x; pix < pixels; pix += kSingleChannelThreads) {
      const int oy = pix / prm.Q, ox = pix - oy * prm.Q;  // once per pixel and filter pass
      const float* src = sStrip + oy * prm.stride_h * prm.strip_cols + ox * prm.stride_w;
      float rAcc[KF] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int s = 0; s < S; ++s) {
          const float xv = src[r * prm.dil_h * prm.strip_cols + s * prm.dil_w];
#pragma unroll
          for (int f = 0; f < KF; ++f)  // filters past nf read zeros-or-stale shared memory, never stored
            rAcc[f] = fmaf(xv, sFilter[min(fc + f, nf - 1) * RS + r * S + s], rAcc[f]);
        }
#pragma unroll
      for (int f = 0; f < KF; ++f) {
        if (fc + f >= nf) break;
        const int k = g * prm.kg + f0 + fc + f;
        float* dst = prm.y + n * prm.y_sn + k * prm.y_sk + (oy0 + oy) * prm.y_sp + ox * prm.y_sq;
        *dst = epilogue_value(prm.alpha, rAcc[f], prm.beta, dst, prm.bias ? prm.bias + k : nullptr, prm.relu);
      }
    }
  }
}

}  // namespace mconv::cuda
