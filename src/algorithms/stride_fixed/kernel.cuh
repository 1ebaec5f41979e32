// The stride-fixed block kernel family (technique 4, paper section 3.2: multi-channel; the division
// is in planner.hpp).
//
// Block (blockIdx.x, blockIdx.y, blockIdx.z) = (W'y x W'x output pixels, M' = 64 filters,
// (image, group, channel slice)). The channels are walked in segments of `seg` channels (the
// paper's S = 4*seg bytes): each round copies the segment's input lines [seg][rows][pitch] and its
// filters [seg*R*S][M' + 4] into shared memory with cp.async, double-buffered so that round i+1
// loads while round i computes. A thread accumulates 8 consecutive pixels of one line for 8 of the
// M' filters (Note [stride-fixed on Hopper]; 4 pixels on small maps, Note [stride-fixed thread
// pixels]): per (channel, filter row) it moves one window of the line to registers and uses each
// value for up to S filter columns x 8 filters.
#pragma once

#include "../common/conv_geometry.cuh"
#include "../common/cp_async.cuh"
#include "../common/dependent_launch.cuh"
#include "../common/epilogue.cuh"
#include "../common/fast_divmod.cuh"
#include "planner.hpp"

namespace mconv::cuda {

struct StrideFixedParams : ConvGeometry {
  int seg;                              // channels per round
  int tile_rows, tile_cols, tiles_x;    // W'y, W'x, blocks along Q
  int in_rows, in_cols, pitch;          // StrideFixedLayout
  int rounds_per_split, splits;         // channel slices (split_k > 1: y += alpha * sum, atomically)
  FastDivmod in_cols_div, in_rows_div;  // line copies: e -> (c * in_rows + row, col)
  FastDivmod crs_div, rs_div, s_div;    // filter copies: e -> (f, c * R * S + r * S + s)
  int vec_lines;                        // lines copied 16 bytes at a time (x_float4_lines)
  FastDivmod in_vecs_div;               //   float4s per line copy: ceil(in_cols / 4)
  int vec_store;                        // y rows take float4 stores (y_float4_rows)
  int filters_kcrs;                     // w is KCRS-dense: the filter copies walk (Note [filter walk])
  int walk_df, walk_dc, walk_drs;       //   the step of T copies in (f, c, rs)
};

using mconv::detail::kStrideFixedFilterPitch;
using mconv::detail::kStrideFixedFilters;
using mconv::detail::kStrideFixedThreadFilters;
using mconv::detail::kStrideFixedThreads;
using mconv::detail::stride_fixed_resident_blocks;

/// K: square filter size with SW = stride_w (1 or 2) and no dilation, the window read as float4s;
/// K = 0: any filter, stride and dilation, read value by value. PX: consecutive pixels per thread.
template <int K, int SW, int PX>
__global__ void __launch_bounds__(kStrideFixedThreads, stride_fixed_resident_blocks(PX))
    stride_fixed_kernel(const StrideFixedParams prm) {
  detail::wait_then_allow_dependent_grids();  // Note [dependent launch]
  constexpr int T = kStrideFixedThreads, MF = kStrideFixedFilters;
  static_assert(PX == 4 || PX == 8, "a thread's pixels are one or two float4s of y");
  constexpr int FP = kStrideFixedFilterPitch, GROUPS_F = MF / kStrideFixedThreadFilters;
  static_assert(kStrideFixedThreadFilters == 8 && MF == 64, "the filter groups below: {4fg..4fg+3, 32+4fg..}");
  const int R = K > 0 ? K : prm.R, S = K > 0 ? K : prm.S, RS = R * S;
  extern __shared__ __align__(16) float smem[];
  const int line_floats = prm.seg * prm.in_rows * prm.pitch;
  const int round_floats = line_floats + prm.seg * RS * FP;

  // The block: its pixels, filters, image, group and channel slice.
  const int tile_y = blockIdx.x / prm.tiles_x, tile_x = blockIdx.x - tile_y * prm.tiles_x;
  const int oy0 = tile_y * prm.tile_rows, ox0 = tile_x * prm.tile_cols;
  const int k0 = blockIdx.y * MF, nf = min(MF, prm.kg - k0);
  const int split = blockIdx.z % prm.splits, ng = blockIdx.z / prm.splits;
  const int n = ng / prm.groups, g = ng - n * prm.groups;
  const int c_begin = split * prm.rounds_per_split * prm.seg;
  const int c_end = min(prm.cg, c_begin + prm.rounds_per_split * prm.seg);
  const int rounds = (c_end - c_begin + prm.seg - 1) / prm.seg;
  const int ih0 = window_origin(oy0, prm.stride_h, prm.pad_h), iw0 = window_origin(ox0, prm.stride_w, prm.pad_w);
  const float* gX = prm.x + n * prm.x_sn + static_cast<long long>(g) * prm.cg * prm.x_sc;
  const float* gW = prm.w + static_cast<long long>(g * prm.kg + k0) * prm.w_sk;

  // The thread: PX pixels of one line (a warp spans 4 pixel groups x the 8 filter groups, so its
  // filter reads are 8 distinct float4s and its window reads 4) and filters {4fg..4fg+3, 32+4fg..}.
  const int fg = threadIdx.x % GROUPS_F, pg = threadIdx.x / GROUPS_F;
  const int groups_x = prm.tile_cols / PX;
  const int line = pg / groups_x, col = (pg - line * groups_x) * PX;

  auto load = [&](int buf, int c0) {
    float* lines = smem + buf * round_floats;
    if (prm.vec_lines) {  // every line starts on a float4 of x and W % 4 == 0: a float4 is all in or all out
      const int line_vecs = prm.seg * prm.in_rows * static_cast<int>(prm.in_vecs_div.divisor);
      for (int e = threadIdx.x; e < line_vecs; e += T) {
        unsigned cr, v, c, row;
        prm.in_vecs_div.divmod(e, cr, v);
        prm.in_rows_div.divmod(cr, c, row);
        const int h = ih0 + static_cast<int>(row), w = iw0 + 4 * static_cast<int>(v), ch = c0 + static_cast<int>(c);
        const bool ok = ch < c_end && static_cast<unsigned>(h) < static_cast<unsigned>(prm.H) &&
                        static_cast<unsigned>(w) < static_cast<unsigned>(prm.W);
        detail::cp_async_f32x4(lines + cr * prm.pitch + 4 * v, ok ? gX + ch * prm.x_sc + h * prm.x_sh + w : prm.x, ok);
      }
    } else {
      const int line_elems = prm.seg * prm.in_rows * prm.in_cols;
      for (int e = threadIdx.x; e < line_elems; e += T) {
        unsigned cr, cc, c, row;
        prm.in_cols_div.divmod(e, cr, cc);
        prm.in_rows_div.divmod(cr, c, row);
        const int h = ih0 + static_cast<int>(row), w = iw0 + static_cast<int>(cc), ch = c0 + static_cast<int>(c);
        const bool ok = ch < c_end && static_cast<unsigned>(h) < static_cast<unsigned>(prm.H) &&
                        static_cast<unsigned>(w) < static_cast<unsigned>(prm.W);
        detail::cp_async_f32(lines + cr * prm.pitch + cc, ok ? gX + ch * prm.x_sc + h * prm.x_sh + w * prm.x_sw : prm.x,
                             ok);
      }
    }
    // Consecutive threads read consecutive (c, r, s) of one filter: contiguous in KCRS.
    float* filters = lines + line_floats;
    const int filter_elems = MF * prm.seg * RS;
    if (prm.filters_kcrs) {
      // Note [filter walk]: element e = (f, c, rs) in mixed radix (seg, RS); a thread starts at
      // threadIdx.x and steps by T = (df, dc, drs) with carries, so no index is divided per copy
      // (three FastDivmods per copy took a quarter of a 3x3 round's instructions).
      unsigned f, crs, c, rs;
      prm.crs_div.divmod(threadIdx.x, f, crs);
      prm.rs_div.divmod(crs, c, rs);
      const int cvalid = c_end - c0, flip_base = prm.flip ? RS - 1 : 0, flip_sign = prm.flip ? -1 : 1;
      for (int e = threadIdx.x; e < filter_elems; e += T) {
        const bool ok = static_cast<int>(f) < nf && static_cast<int>(c) < cvalid;
        const float* src =
            gW + f * prm.w_sk + (c0 + static_cast<int>(c)) * RS + flip_base + flip_sign * static_cast<int>(rs);
        detail::cp_async_f32(filters + (c * RS + rs) * FP + f, ok ? src : prm.w, ok);
        rs += prm.walk_drs;
        c += prm.walk_dc;
        if (rs >= static_cast<unsigned>(RS)) {
          rs -= RS;
          ++c;
        }
        f += prm.walk_df;
        if (c >= static_cast<unsigned>(prm.seg)) {
          c -= prm.seg;
          ++f;
        }
      }
      return;
    }
    for (int e = threadIdx.x; e < filter_elems; e += T) {
      unsigned f, crs, c, rs, r, s;
      prm.crs_div.divmod(e, f, crs);
      prm.rs_div.divmod(crs, c, rs);
      prm.s_div.divmod(rs, r, s);
      const int ch = c0 + static_cast<int>(c);
      const bool ok = static_cast<int>(f) < nf && ch < c_end;
      const int fr = prm.flip ? R - 1 - static_cast<int>(r) : r, fs = prm.flip ? S - 1 - static_cast<int>(s) : s;
      detail::cp_async_f32(filters + crs * FP + f,
                           ok ? gW + f * prm.w_sk + ch * prm.w_sc + fr * prm.w_sr + fs * prm.w_ss : prm.w, ok);
    }
  };

  float acc[PX][8];
#pragma unroll
  for (int p = 0; p < PX; ++p)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[p][j] = 0.0f;

  auto fma8 = [&](float xv, const float4& wa, const float4& wb, float* a) {
    a[0] = fmaf(xv, wa.x, a[0]);
    a[1] = fmaf(xv, wa.y, a[1]);
    a[2] = fmaf(xv, wa.z, a[2]);
    a[3] = fmaf(xv, wa.w, a[3]);
    a[4] = fmaf(xv, wb.x, a[4]);
    a[5] = fmaf(xv, wb.y, a[5]);
    a[6] = fmaf(xv, wb.z, a[6]);
    a[7] = fmaf(xv, wb.w, a[7]);
  };

  load(0, c_begin);
  detail::cp_async_commit();
  for (int it = 0; it < rounds; ++it) {
    __syncthreads();  // round it-1's buffer is free
    if (it + 1 < rounds) load((it + 1) & 1, c_begin + (it + 1) * prm.seg);
    detail::cp_async_commit();
    detail::cp_async_wait<1>();
    __syncthreads();
    const float* lines = smem + (it & 1) * round_floats;
    const float* filters = lines + line_floats;
    for (int c = 0; c < prm.seg; ++c) {
      if constexpr (K > 0) {
        constexpr int WIN4 = ((PX - 1) * SW + K + 3) / 4;  // float4s of one line's window
#pragma unroll
        for (int r = 0; r < K; ++r) {
          const float4* src = reinterpret_cast<const float4*>(
              lines + (c * prm.in_rows + line * prm.stride_h + r) * prm.pitch + col * SW);
          float win[4 * WIN4];
#pragma unroll
          for (int i = 0; i < WIN4; ++i) {
            const float4 v = src[i];
            win[4 * i + 0] = v.x;
            win[4 * i + 1] = v.y;
            win[4 * i + 2] = v.z;
            win[4 * i + 3] = v.w;
          }
          const float* wrow = filters + (c * K + r) * K * FP + 4 * fg;
#pragma unroll
          for (int s = 0; s < K; ++s) {
            const float4 wa = *reinterpret_cast<const float4*>(wrow + s * FP);
            const float4 wb = *reinterpret_cast<const float4*>(wrow + s * FP + 32);
#pragma unroll
            for (int p = 0; p < PX; ++p) fma8(win[p * SW + s], wa, wb, acc[p]);
          }
        }
      } else {
        for (int r = 0; r < R; ++r) {
          const float* src =
              lines + (c * prm.in_rows + line * prm.stride_h + r * prm.dil_h) * prm.pitch + col * prm.stride_w;
          for (int s = 0; s < S; ++s) {
            const float* wp = filters + ((c * R + r) * S + s) * FP + 4 * fg;
            const float4 wa = *reinterpret_cast<const float4*>(wp);
            const float4 wb = *reinterpret_cast<const float4*>(wp + 32);
#pragma unroll
            for (int p = 0; p < PX; ++p) fma8(src[p * prm.stride_w + s * prm.dil_w], wa, wb, acc[p]);
          }
        }
      }
    }
  }

  const int oy = oy0 + line, ox = ox0 + col;
  if (oy >= prm.P || ox >= prm.Q) return;
  float* yPix = prm.y + n * prm.y_sn + oy * prm.y_sp + ox * prm.y_sq;
  const bool vec = prm.vec_store && ox + PX <= prm.Q;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int f = (j < 4 ? 0 : 32 - 4) + 4 * fg + j;
    if (f >= nf) continue;
    const int k = g * prm.kg + k0 + f;
    float* dst = yPix + k * prm.y_sk;
    const float bias = prm.bias ? __ldg(prm.bias + k) : 0.0f;
    if (vec) {  // the thread's pixels as float4s
#pragma unroll
      for (int h = 0; h < PX / 4; ++h) {
        float4* d4 = reinterpret_cast<float4*>(dst) + h;
        const float a0 = acc[4 * h + 0][j], a1 = acc[4 * h + 1][j], a2 = acc[4 * h + 2][j], a3 = acc[4 * h + 3][j];
        if (prm.splits > 1) {  // the pre-pass wrote beta * y + bias
          atomicAdd(d4, make_float4(prm.alpha * a0, prm.alpha * a1, prm.alpha * a2, prm.alpha * a3));
          continue;
        }
        const float4 old = prm.beta != 0.0f ? *d4 : make_float4(0.f, 0.f, 0.f, 0.f);
        *d4 = make_float4(epilogue_value(prm.alpha, a0, prm.beta, &old.x, bias, prm.activation),
                          epilogue_value(prm.alpha, a1, prm.beta, &old.y, bias, prm.activation),
                          epilogue_value(prm.alpha, a2, prm.beta, &old.z, bias, prm.activation),
                          epilogue_value(prm.alpha, a3, prm.beta, &old.w, bias, prm.activation));
      }
      continue;
    }
#pragma unroll
    for (int p = 0; p < PX; ++p) {
      if (ox + p >= prm.Q) break;
      float* d = dst + p * prm.y_sq;
      if (prm.splits > 1)
        atomicAdd(d, prm.alpha * acc[p][j]);  // the pre-pass wrote beta * y + bias
      else
        *d = epilogue_value(prm.alpha, acc[p][j], prm.beta, d, bias, prm.activation);
    }
  }
}

}  // namespace mconv::cuda
