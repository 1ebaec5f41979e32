// The plane-stream kernel of the single-channel family (Note [plane stream] in
// src/plan/single_channel_planner.hpp): for groups of one channel and one filter (depthwise,
// multiplier 1). A block takes several whole planes (small maps) or a band of output rows of one
// plane (large maps):
//   1. zero its shared memory (the zeros stay where padding is), then copy the planes' input rows
//      in with cp.async, 16 bytes at a time when rows allow. The copies walk the rows as one flat
//      range, so a warp reads contiguous memory even when a row is 7 floats long;
//   2. each thread computes a vertical run of kPlaneRowsPerThread outputs of one column: it loads
//      each of the run's input rows once and adds it into every output of the run that uses it, with
//      the plane's filter in registers. Shared memory is read without predicates (padding is zeros).
#pragma once

#include "cp_async.cuh"
#include "epilogue.cuh"
#include "fast_divmod.cuh"

namespace mconv::cuda {

struct PlaneStreamParams {
  const float* x;
  const float* w;
  float* y;
  const float* bias;
  long long x_sn, x_sc, x_sh;  // x rows are contiguous (W stride 1)
  long long w_sk, w_sr, w_ss;
  long long y_sn, y_sk, y_sp, y_sq;
  int planes;                  // N * G, numbered in x's memory order:
  int inner_is_c;              //   1: plane = n * G + c (NCHW-like); 0: plane = c * N + n (CNHW-like)
  FastDivmod inner;            //   G or N
  int planes_per_block, rows_per_block;
  FastDivmod row_vectors;      // vectors (of VW floats) per input row: W / VW
  FastDivmod plane_rows;       // input rows copied per plane when a block holds whole planes
  FastDivmod q_div;            // Q
  FastDivmod run_div;          // runs of kPlaneRowsPerThread output rows per block
  int H, P, Q;
  int stride_w, pad_h, pad_w;
  int smem_rows, pitch, lpad;  // PlaneStreamLayout
  int flip;
  float alpha, beta;
  int relu;
};

/// (image, channel) of plane `plane` in x's memory order.
__device__ __forceinline__ void plane_coords(const PlaneStreamParams& prm, unsigned plane, unsigned& n, unsigned& c) {
  unsigned outer, inner;
  prm.inner.divmod(plane, outer, inner);
  n = prm.inner_is_c ? outer : inner;
  c = prm.inner_is_c ? inner : outer;
}

/// K: square filter size; RUN: output rows per thread; SH: vertical stride; VW: floats per copy (4 or 1).
template <int K, int RUN, int SH, int VW, int THREADS>
__global__ void __launch_bounds__(THREADS) single_channel_planes_kernel(const PlaneStreamParams prm) {
  constexpr int KK = K * K, RUN_ROWS = (RUN - 1) * SH + K;  // input rows of one run
  extern __shared__ __align__(16) float smem[];
  const int plane_floats = prm.smem_rows * prm.pitch;  // a multiple of 4: pitch is
  const unsigned g0 = blockIdx.x * prm.planes_per_block;
  const int nplanes = min(prm.planes_per_block, prm.planes - static_cast<int>(g0));
  float* sFilter = smem + prm.planes_per_block * plane_floats;  // [planes][K*K]
  const int oy0 = blockIdx.y * prm.rows_per_block;
  const int out_rows = min(prm.rows_per_block, prm.P - oy0);
  const int iy0 = oy0 * SH - prm.pad_h;  // input row of shared row 0
  const int ih_lo = max(iy0, 0), copy_rows = max(min(iy0 + prm.smem_rows, prm.H) - ih_lo, 0);

  float4* s4 = reinterpret_cast<float4*>(smem);
  for (int i = threadIdx.x; i < nplanes * plane_floats / 4; i += THREADS) s4[i] = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int e = threadIdx.x; e < nplanes * KK; e += THREADS) {
    const int pl = e / KK, rs = e - pl * KK, r = rs / K, s = rs - r * K;
    unsigned n, c;
    plane_coords(prm, g0 + pl, n, c);
    const int fr = prm.flip ? K - 1 - r : r, fs = prm.flip ? K - 1 - s : s;
    sFilter[e] = __ldg(prm.w + c * prm.w_sk + fr * prm.w_sr + fs * prm.w_ss);
  }
  __syncthreads();  // the zeros land before the copies overwrite the interior

  const int copies = nplanes * copy_rows * static_cast<int>(prm.row_vectors.divisor);
  for (int e = threadIdx.x; e < copies; e += THREADS) {
    unsigned row, vec, pl = 0, rr;
    prm.row_vectors.divmod(e, row, vec);
    if (prm.planes_per_block > 1)
      prm.plane_rows.divmod(row, pl, rr);  // whole planes: every block copies the same rows
    else
      rr = row;
    unsigned n, c;
    plane_coords(prm, g0 + pl, n, c);
    const float* src = prm.x + n * prm.x_sn + c * prm.x_sc + (ih_lo + rr) * prm.x_sh + vec * VW;
    float* dst = smem + pl * plane_floats + (ih_lo - iy0 + rr) * prm.pitch + prm.lpad + vec * VW;
    if constexpr (VW == 4)
      detail::cp_async_f32x4(dst, src, true);
    else
      detail::cp_async_f32(dst, src, true);
  }
  detail::cp_async_commit();
  detail::cp_async_wait<0>();
  __syncthreads();

  const int items = nplanes * static_cast<int>(prm.run_div.divisor) * prm.Q;
  int filter_plane = -1;
  float wr[KK];
  for (int it = threadIdx.x; it < items; it += THREADS) {
    unsigned rest, q, pl, run;
    prm.q_div.divmod(it, rest, q);
    prm.run_div.divmod(rest, pl, run);
    const int oy = run * RUN;
    if (oy >= out_rows) continue;  // the last band's runs past P
    if (static_cast<int>(pl) != filter_plane) {
      filter_plane = pl;
#pragma unroll
      for (int i = 0; i < KK; ++i) wr[i] = sFilter[pl * KK + i];
    }
    const float* src = smem + pl * plane_floats + oy * SH * prm.pitch + prm.lpad - prm.pad_w + q * prm.stride_w;
    float acc[RUN];
#pragma unroll
    for (int j = 0; j < RUN; ++j) acc[j] = 0.0f;
#pragma unroll
    for (int i = 0; i < RUN_ROWS; ++i) {
      float xv[K];
#pragma unroll
      for (int s = 0; s < K; ++s) xv[s] = src[i * prm.pitch + s];
#pragma unroll
      for (int j = 0; j < RUN; ++j) {
        const int r = i - j * SH;  // filter row that input row i meets for output j of the run
        if (r >= 0 && r < K) {
#pragma unroll
          for (int s = 0; s < K; ++s) acc[j] = fmaf(xv[s], wr[r * K + s], acc[j]);
        }
      }
    }
    unsigned n, c;
    plane_coords(prm, g0 + pl, n, c);
    float* dst = prm.y + n * prm.y_sn + c * prm.y_sk + (oy0 + oy) * prm.y_sp + q * prm.y_sq;
    const float* bias = prm.bias ? prm.bias + c : nullptr;
#pragma unroll
    for (int j = 0; j < RUN; ++j)
      if (oy + j < out_rows)
        dst[j * prm.y_sp] = epilogue_value(prm.alpha, acc[j], prm.beta, dst + j * prm.y_sp, bias, prm.relu);
  }
}

}  // namespace mconv::cuda
