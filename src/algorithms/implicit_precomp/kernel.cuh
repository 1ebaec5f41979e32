// The implicit-GEMM kernel family (technique 1 on Hopper, fp32 FFMA).
//
// Block (blockIdx.x, blockIdx.y, blockIdx.z) computes block_m output pixels x block_n filters of group z.
// Each main-loop step gathers one block_k-row slice of the virtual image matrix into shared memory:
//   sImage[kk][col] = x[start[col] + offset[k0 + kk]]  (Note [padding predicates]: zero fill)
//   sFilter[kk][f]  = w[f * w.stride_k + w_offset[k0 + kk]]
// with cp.async, Stages deep, so slices i+1.. load while slice i is multiplied. Start addresses (the
// compiled representation's per-thread bases) are formed once per block; the main loop reads the
// offset table and adds, with no division or modulo.
//
// Note [padding predicates]: a row carries (dh, dw) = (r*dil_h, s*dil_w) and a column (h0, w0) =
// (p*stride_h - pad_h, q*stride_w - pad_w); the element exists iff 0 <= h0+dh < H and 0 <= w0+dw < W,
// tested as two unsigned compares. Padded table rows and columns past N*P*Q carry -2^30, which fails
// the test, so tails need no other branch. cp.async with source size 0 writes zeros.
//
// Note [split-k without workspace]: when the output tiles alone cannot fill the GPU (small maps,
// large C), `splits` blocks share one output tile, each over a slice of the rows. A pre-pass writes
// y = beta*y + bias (output_prepass_kernel.cuh) and the slices add alpha*partial with atomics, so no
// buffer beyond y is needed. ReLU needs the full sum, so the launcher does not split when it is asked
// (the ordered split below keeps its split: its epilogue has the full sum).
//
// Note [ordered split-k]: the deterministic form of the split. The slices of a tile are the blocks
// of one thread-block cluster. After the main loop each block writes one part of its partial tile
// (rows of each thread's 4x4 accumulator groups) into its own shared memory (the pipeline's buffers,
// free by then), a cluster barrier
// makes them visible, block r sums rows r*rows/S.. of that part over all S blocks in rank order
// through distributed shared memory and runs the full epilogue (alpha, beta, bias, ReLU) on them;
// then the next part. No pre-pass, no atomics: y is the same bits on every run.
#pragma once

#include <cooperative_groups.h>

#include <cstdint>

#include "../common/cp_async.cuh"
#include "../common/dependent_launch.cuh"
#include "../common/epilogue.cuh"
#include "../common/implicit_gemm_geometry.cuh"
#include "mconv/plan.hpp"
#include "tiles.hpp"

namespace mconv::cuda {

struct ImplicitPrecompParams : ImplicitGemmGeometry {
  const float* x;
  const float* w;
  float* y;
  int vector_store;  // Note [vector epilogue]: set by the launcher when its preconditions hold
  int splits;        // Note [split-k without workspace]: row slices; blockIdx.z = group * splits + slice
  int k_tiles_per_split;
  int ordered;               // Note [ordered split-k]: the slices are one cluster, summed in rank order
  int store_pixels_fastest;  // ordered epilogue: consecutive threads on pixels (y.stride_k != 1)
};

/// Which way the gather's threads run: along columns (consecutive output pixels; NCHW/CNHW with
/// the CRS row order) or along rows (consecutive channels; NHWC with the RSC row order).
enum class GatherOrder { Columns, Rows };

template <class Tile, GatherOrder Order>
__global__ void __launch_bounds__(Tile::kThreads, 2) implicit_precomp_kernel(const ImplicitPrecompParams prm) {
  detail::wait_then_allow_dependent_grids();  // Note [dependent launch]
  constexpr int BM = Tile::kBlockM, BN = Tile::kBlockN, BK = Tile::kBlockK;
  constexpr int TM = Tile::kThreadM, TN = Tile::kThreadN, S = Tile::kStages, T = Tile::kThreads;
  constexpr bool kByColumns = Order == GatherOrder::Columns;
  constexpr int kCols = kByColumns ? 1 : Tile::kImageLoads;  // columns a thread gathers
  // The stages, and after the main loop the ordered split's partial tiles (Note [ordered split-k]).
  __shared__ __align__(16) float sMem[Tile::kSmemFloats];
  auto& sImage = *reinterpret_cast<float(*)[S][BK][Tile::kImageStride]>(sMem);  // [stage][row][pixel]
  auto& sFilter =
      *reinterpret_cast<float(*)[S][BK][Tile::kFilterStride]>(sMem + S * BK * Tile::kImageStride);  // [..][filter]

  const int tid = threadIdx.x;
  const long long block_m = static_cast<long long>(blockIdx.x) * BM;
  const int block_n = blockIdx.y * BN;
  const int group = blockIdx.z / prm.splits, slice = blockIdx.z - group * prm.splits;
  const float* __restrict__ gX = prm.x + group * prm.x_group;
  const float* __restrict__ gW = prm.w + group * prm.w_group;

  // Per-thread bases: start address and (h0, w0) of each column this thread gathers, formed once.
  long long rStart[kCols];
  int rH0[kCols], rW0[kCols];
#pragma unroll
  for (int i = 0; i < kCols; ++i) {
    const int col = kByColumns ? tid % BM : tid / BK + i * (T / BK);
    const long long m = block_m + col;
    if (m < prm.npq) {
      const int n = static_cast<int>(m / prm.pq), rem = static_cast<int>(m - static_cast<long long>(n) * prm.pq);
      const int p = rem / prm.q, q = rem - p * prm.q;
      rH0[i] = window_origin(p, prm.stride_h, prm.pad_h);
      rW0[i] = window_origin(q, prm.stride_w, prm.pad_w);
      rStart[i] = n * prm.x_sn + rH0[i] * prm.x_sh + rW0[i] * prm.x_sw;
    } else {
      rH0[i] = rW0[i] = -(1 << 30);  // Note [padding predicates]
      rStart[i] = 0;
    }
  }
  // Gather positions inside a stage.
  const int gCol0 = kByColumns ? tid % BM : tid / BK;
  const int gRow0 = kByColumns ? tid / BM : tid % BK;
  const int fRow = tid % BK, fCol0 = tid / BK;

  auto load_stage = [&](int stage, int k0) {
#pragma unroll
    for (int i = 0; i < Tile::kImageLoads; ++i) {
      const int kk = kByColumns ? gRow0 + i * (T / BM) : gRow0;
      const int col = kByColumns ? gCol0 : gCol0 + i * (T / BK);
      const int c = kByColumns ? 0 : i;
      const int4 row = __ldg(prm.table + k0 + kk);
      const bool ok = static_cast<unsigned>(rH0[c] + row.y) < static_cast<unsigned>(prm.H) &&
                      static_cast<unsigned>(rW0[c] + row.z) < static_cast<unsigned>(prm.W);
      detail::cp_async_f32(&sImage[stage][kk][col], ok ? gX + rStart[c] + row.x : gX, ok);
    }
    const int w_offset = __ldg(&prm.table[k0 + fRow].w);
    const bool row_ok = k0 + fRow < prm.rows;
#pragma unroll
    for (int i = 0; i < Tile::kFilterLoads; ++i) {
      const int f = fCol0 + i * (T / BK);
      const bool ok = row_ok && block_n + f < prm.kg;
      detail::cp_async_f32(&sFilter[stage][fRow][f], ok ? gW + (block_n + f) * prm.w_sk + w_offset : gW, ok);
    }
  };

  float rAcc[TM][TN];  // [pixel][filter]
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) rAcc[i][j] = 0.0f;

  const int kt_begin = slice * prm.k_tiles_per_split;
  const int k_tiles = max(min((prm.rows + BK - 1) / BK - kt_begin, prm.k_tiles_per_split), 0);  // this slice's
#pragma unroll
  for (int s = 0; s < S - 1; ++s) {
    if (s < k_tiles) load_stage(s, (kt_begin + s) * BK);
    detail::cp_async_commit();
  }
  const int tm = tid % Tile::kThreadsM, tn = tid / Tile::kThreadsM;
  for (int kt = 0; kt < k_tiles; ++kt) {
    detail::cp_async_wait<S - 2>();
    __syncthreads();  // stage kt visible to all; stage kt-1 no longer read by anyone
    const int next = kt + S - 1;
    if (next < k_tiles) load_stage(next % S, (kt_begin + next) * BK);
    detail::cp_async_commit();
    const int st = kt % S;
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float rA[TM], rB[TN];
#pragma unroll
      for (int c = 0; c < TM / 4; ++c) {
        const float4 v = *reinterpret_cast<const float4*>(&sImage[st][kk][c * (BM / (TM / 4)) + tm * 4]);
        rA[c * 4 + 0] = v.x;
        rA[c * 4 + 1] = v.y;
        rA[c * 4 + 2] = v.z;
        rA[c * 4 + 3] = v.w;
      }
#pragma unroll
      for (int c = 0; c < TN / 4; ++c) {
        const float4 v = *reinterpret_cast<const float4*>(&sFilter[st][kk][c * (BN / (TN / 4)) + tn * 4]);
        rB[c * 4 + 0] = v.x;
        rB[c * 4 + 1] = v.y;
        rB[c * 4 + 2] = v.z;
        rB[c * 4 + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) rAcc[i][j] = fmaf(rA[i], rB[j], rAcc[i][j]);
    }
  }
  detail::cp_async_wait<0>();

  // Epilogue: y in any layout, alpha/beta (beta == 0 never reads y), bias, ReLU.
  float* __restrict__ gY = prm.y + group * prm.y_group;
  const float* gBias = prm.bias ? prm.bias + static_cast<long long>(group) * prm.kg : nullptr;
  auto finish = [&](float acc, int f, const float* old) {
    return epilogue_value(prm.alpha, acc, prm.beta, old, gBias ? gBias + f : nullptr, prm.activation);
  };
  if (prm.ordered) {
    // Note [ordered split-k]: parts of A rows of each thread's 4x4 groups of accumulators: (A *
    // kThreadsM) pixels x (4 * kThreadsN) filters, A = 4, 2 or 1 as the stage buffers hold them.
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    constexpr int PN = 4 * Tile::kThreadsN;
    constexpr int A = 4 * Tile::kThreadsM * PN <= Tile::kSmemFloats   ? 4
                      : 2 * Tile::kThreadsM * PN <= Tile::kSmemFloats ? 2
                                                                      : 1;
    constexpr int PM = A * Tile::kThreadsM;
    static_assert(PM * PN <= Tile::kSmemFloats, "a part of the partial tile fits the stage buffers");
    const int rows = (PM + prm.splits - 1) / prm.splits;
    const int r0 = min(slice * rows, PM), mine = min(r0 + rows, PM) - r0;
#pragma unroll
    for (int ci = 0; ci < TM / 4; ++ci)
#pragma unroll
      for (int cj = 0; cj < TN / 4; ++cj)
#pragma unroll
        for (int a0 = 0; a0 < 4; a0 += A) {
          cluster.sync();  // this block's buffers and every peer's previous part are free
#pragma unroll
          for (int a = 0; a < A; ++a)
#pragma unroll
            for (int b = 0; b < 4; ++b) sMem[(tm * A + a) * PN + tn * 4 + b] = rAcc[ci * 4 + a0 + a][cj * 4 + b];
          cluster.sync();  // every block's part written
          for (int e = tid; e < mine * PN; e += T) {
            const int row = r0 + (prm.store_pixels_fastest ? e % mine : e / PN);
            const int fil = prm.store_pixels_fastest ? e / mine : e % PN;
            // Part row tm*A + a is the thread row tm's pixel tm*4 + a0 + a of group ci.
            const long long m = block_m + ci * (BM / (TM / 4)) + (row / A) * 4 + a0 + row % A;
            const int f = block_n + cj * (BN / (TN / 4)) + fil;
            if (m >= prm.npq || f >= prm.kg) continue;
            float v = 0.0f;
            for (int r = 0; r < prm.splits; ++r) v += cluster.map_shared_rank(sMem, r)[row * PN + fil];
            const int n = static_cast<int>(m / prm.pq), rem = static_cast<int>(m - static_cast<long long>(n) * prm.pq);
            const int p = rem / prm.q, q = rem - p * prm.q;
            float* dst = gY + n * prm.y_sn + p * prm.y_sp + q * prm.y_sq + f * prm.y_sk;
            *dst = finish(v, f, dst);
          }
        }
    cluster.sync();  // no block leaves while a peer still reads its shared memory
    return;
  }
  const bool split = prm.splits > 1;  // Note [split-k without workspace]: y already holds beta*y + bias
  if (prm.vector_store) {
    // Note [vector epilogue]: pixels are contiguous (y.stride_q == 1, rows of Q % 4 == 0 packed), so a
    // thread's 4 consecutive pixels m..m+3 (m % 4 == 0) lie in one output row, 16-byte aligned: one
    // float4 store each, and a warp writes 256 contiguous bytes per filter.
#pragma unroll
    for (int c = 0; c < TM / 4; ++c) {
      const long long m = block_m + c * (BM / (TM / 4)) + tm * 4;
      if (m >= prm.npq) continue;  // npq % 4 == 0 here, so m < npq covers all four pixels
      const int n = static_cast<int>(m / prm.pq), rem = static_cast<int>(m - static_cast<long long>(n) * prm.pq);
      float* yPix = gY + n * prm.y_sn + rem;  // rem = p*Q + q since y.stride_p == Q
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        const int f = block_n + (j / 4) * (BN / (TN / 4)) + tn * 4 + (j % 4);
        if (f >= prm.kg) continue;
        float4* dst = reinterpret_cast<float4*>(yPix + f * prm.y_sk);
        if (split) {
          atomicAdd(dst, make_float4(prm.alpha * rAcc[c * 4 + 0][j], prm.alpha * rAcc[c * 4 + 1][j],
                                     prm.alpha * rAcc[c * 4 + 2][j], prm.alpha * rAcc[c * 4 + 3][j]));
          continue;
        }
        float4 old = make_float4(0.f, 0.f, 0.f, 0.f);
        if (prm.beta != 0.0f) old = *dst;
        float4 v;
        v.x = finish(rAcc[c * 4 + 0][j], f, &old.x);
        v.y = finish(rAcc[c * 4 + 1][j], f, &old.y);
        v.z = finish(rAcc[c * 4 + 2][j], f, &old.z);
        v.w = finish(rAcc[c * 4 + 3][j], f, &old.w);
        *dst = v;
      }
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const long long m = block_m + (i / 4) * (BM / (TM / 4)) + tm * 4 + (i % 4);
    if (m >= prm.npq) continue;
    const int n = static_cast<int>(m / prm.pq), rem = static_cast<int>(m - static_cast<long long>(n) * prm.pq);
    const int p = rem / prm.q, q = rem - p * prm.q;
    float* yPix = gY + n * prm.y_sn + p * prm.y_sp + q * prm.y_sq;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int f = block_n + (j / 4) * (BN / (TN / 4)) + tn * 4 + (j % 4);
      if (f >= prm.kg) continue;
      float* dst = yPix + f * prm.y_sk;
      if (split)
        atomicAdd(dst, prm.alpha * rAcc[i][j]);
      else
        *dst = finish(rAcc[i][j], f, dst);
    }
  }
}

}  // namespace mconv::cuda
