// The stride-fixed block kernel family (technique 4, paper section 3.2: multi-channel).
//
// Block (blockIdx.x, blockIdx.y, blockIdx.z) = (output row x segment of kPixels pixels, kFilters
// filters, image x group). One thread per output pixel; each thread keeps kFilters accumulators.
// The channels are walked in segments of `seg` channels (the paper's S = 4*seg bytes): each round
// copies the segment's input lines (R rows of the pixels' receptive field) and its filter slice
// [seg][R*S][kFilters] into shared memory with cp.async, double-buffered so that round i+1 loads
// while round i computes. In a round a thread moves seg*R*S input values to registers, one per
// (c, r, s), each used for kFilters FMAs with the filters read as float4 broadcasts.
#pragma once

#include "conv_geometry.cuh"
#include "cp_async.cuh"
#include "epilogue.cuh"

namespace mconv::cuda {

struct StrideFixedParams : ConvGeometry {
  int seg;         // channels per round
  int line_cols;   // input columns of the pixel segment's receptive field
  int segments_x;  // ceil(Q / kPixels)
};

inline constexpr int kStrideFixedPixels = 128;  // W'x: one thread per output pixel
inline constexpr int kStrideFixedFilters = 64;  // M': accumulators per thread

template <int R_, int S_>
__global__ void __launch_bounds__(kStrideFixedPixels) stride_fixed_kernel(const StrideFixedParams prm) {
  constexpr int MF = kStrideFixedFilters, WX = kStrideFixedPixels;
  const int R = R_ > 0 ? R_ : prm.R, S = S_ > 0 ? S_ : prm.S, RS = R * S;
  extern __shared__ __align__(16) float smem[];
  const int line_elems = prm.seg * R * prm.line_cols;  // [seg][R][line_cols]
  const int filter_elems = prm.seg * RS * MF;          // [seg][R*S][MF]
  auto sLines = [&](int b) { return smem + b * (line_elems + filter_elems); };
  auto sFilters = [&](int b) { return smem + b * (line_elems + filter_elems) + line_elems; };

  const int oy = blockIdx.x / prm.segments_x, ox0 = (blockIdx.x - oy * prm.segments_x) * WX;
  const int k0 = blockIdx.y * MF;
  const int n = blockIdx.z / prm.groups, g = blockIdx.z - n * prm.groups;
  const int nf = min(MF, prm.kg - k0);
  const int ih0 = oy * prm.stride_h - prm.pad_h, iw0 = ox0 * prm.stride_w - prm.pad_w;
  const float* gX = prm.x + n * prm.x_sn + static_cast<long long>(g) * prm.cg * prm.x_sc;
  const float* gW = prm.w + static_cast<long long>(g * prm.kg + k0) * prm.w_sk;

  auto load = [&](int buf, int c0) {
    float* lines = sLines(buf);
    for (int e = threadIdx.x; e < line_elems; e += WX) {  // consecutive threads: consecutive columns
      const int col = e % prm.line_cols, cr = e / prm.line_cols, r = cr % R, c = cr / R;
      const int h = ih0 + r * prm.dil_h, w = iw0 + col;
      const bool ok = c0 + c < prm.cg && static_cast<unsigned>(h) < static_cast<unsigned>(prm.H) &&
                      static_cast<unsigned>(w) < static_cast<unsigned>(prm.W);
      detail::cp_async_f32(lines + e, ok ? gX + (c0 + c) * prm.x_sc + h * prm.x_sh + w * prm.x_sw : prm.x, ok);
    }
    float* filters = sFilters(buf);
    for (int e = threadIdx.x; e < filter_elems; e += WX) {
      const int f = e % MF, crs = e / MF, rs = crs % RS, c = crs / RS, r = rs / S, s = rs - r * S;
      const int fr = prm.flip ? R - 1 - r : r, fs = prm.flip ? S - 1 - s : s;
      const bool ok = f < nf && c0 + c < prm.cg;
      detail::cp_async_f32(filters + e,
                           ok ? gW + f * prm.w_sk + (c0 + c) * prm.w_sc + fr * prm.w_sr + fs * prm.w_ss : prm.w, ok);
    }
  };

  float rAcc[MF];
#pragma unroll
  for (int f = 0; f < MF; ++f) rAcc[f] = 0.0f;

  const int rounds = (prm.cg + prm.seg - 1) / prm.seg;
  load(0, 0);
  detail::cp_async_commit();
  for (int it = 0; it < rounds; ++it) {
    __syncthreads();  // round it-1's buffer is free
    if (it + 1 < rounds) load((it + 1) & 1, (it + 1) * prm.seg);
    detail::cp_async_commit();
    detail::cp_async_wait<1>();
    __syncthreads();
    const float* lines = sLines(it & 1);
    const float* filters = sFilters(it & 1);
    for (int c = 0; c < prm.seg; ++c) {
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int s = 0; s < S; ++s) {
          const float xv = lines[(c * R + r) * prm.line_cols + threadIdx.x * prm.stride_w + s * prm.dil_w];
          const float4* w4 = reinterpret_cast<const float4*>(filters + ((c * RS) + r * S + s) * MF);
#pragma unroll
          for (int f4 = 0; f4 < MF / 4; ++f4) {
            const float4 wv = w4[f4];  // the same address for every thread: a broadcast
            rAcc[4 * f4 + 0] = fmaf(xv, wv.x, rAcc[4 * f4 + 0]);
            rAcc[4 * f4 + 1] = fmaf(xv, wv.y, rAcc[4 * f4 + 1]);
            rAcc[4 * f4 + 2] = fmaf(xv, wv.z, rAcc[4 * f4 + 2]);
            rAcc[4 * f4 + 3] = fmaf(xv, wv.w, rAcc[4 * f4 + 3]);
          }
        }
    }
  }

  const int ox = ox0 + threadIdx.x;
  if (ox >= prm.Q) return;
  float* yPix = prm.y + n * prm.y_sn + oy * prm.y_sp + ox * prm.y_sq;
#pragma unroll
  for (int f = 0; f < MF; ++f) {
    if (f >= nf) break;
    const int k = g * prm.kg + k0 + f;
    float* dst = yPix + k * prm.y_sk;
    *dst = epilogue_value(prm.alpha, rAcc[f], prm.beta, dst, prm.bias ? prm.bias + k : nullptr, prm.relu);
  }
}

}  // namespace mconv::cuda
