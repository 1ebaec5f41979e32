// depthwise_wgrad: the filter gradient of a layer with one input channel per group.
//
// Note [depthwise wgrad]: with one input channel per group,
//   dw[k][r][s] = sum over n, p, q of dy[n][k][p][q] * x[n][k / kg][p*sh - ph + r*dh][q*sw - pw + s*dw].
// decompose_backward_filter makes it a forward step with one filter a group (dy, P x Q taps) and an
// output of R x S pixels; a GEMM over that step holds one filter a tile and runs 12-100x slower than
// cuDNN on MobileNetV2's and EfficientNet's layers (H100, docs/PERFORMANCE.md). Here it is a direct
// reduction. A thread owns V adjacent filters (a vector of channels-last x and dy; 1 in plane order)
// and walks items (n, run of QT adjacent dy pixels): it reads the run's dy values once and the x
// window they meet once, and keeps R*S*V fp32 sums in registers (a square filter of constant size
// KS; other shapes take their taps 16 at a time, one chunk a block, reading x a tap at a time).
// Threads along the filters (channels-last) run along a row: per tap row, (QT - 1) * stride + KS
// columns of vectors. Threads along the pixels (plane order) run down a column, so that a warp's
// loads are adjacent elements of one row: (QT - 1) * stride + KS rows of KS columns each; runs
// along a row read elements QT apart and measured slower (docs/PERFORMANCE.md).
//
// The sums of the threads that own the same filters are added in a fixed order (shuffles, then the
// warps in turn), and the blocks of one cluster, each over its share of the items, in rank order
// through distributed shared memory: bitwise the same on every run, no workspace. Where the filters
// are too few for that to fill the GPU, clusters take slices of the items and add their sums into dw
// with atomics after a pre-pass (dw = beta * dw), except in a deterministic plan.
#pragma once

#include <cooperative_groups.h>

#include "../common/dependent_launch.cuh"
#include "../common/epilogue.cuh"
#include "../common/fast_divmod.cuh"
#include "../common/storage.cuh"

namespace mconv::cuda {

constexpr int kDepthwiseWgradThreads = 256;

struct DepthwiseWgradParams {
  const void* x;
  const void* dy;
  void* dw;
  const float* bias;                     // K values or null (a forward call of the step's form)
  long long x_sn, x_sc;                  // x: image, channel (= group)
  int x_sh, x_sw;                        // x: row, column (an image's offsets fit 32 bits: the planner's condition)
  long long dy_sn, dy_sk, dy_sg;         // dy: image, filter within its group, group
  int dy_sp, dy_sq;                      // dy: row, column
  long long dw_sk, dw_sg, dw_sr, dw_ss;  // dw: filter within its group, group, tap row, tap column
  int K, kg;                             // filters, filters per group
  int H, W, P, Q, R, S, taps;
  int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  int vectors;          // K / V
  int chunk_vectors;    // vectors of one block (its threads along x); a power of two up to 32
  int items;            // thread items: N * P * Q / QT, runs rounded up
  int items_per_part;   // items of one block (one rank of one slice)
  FastDivmod runs_div;  // item -> (image row, minor): dy columns (runs down) or runs of a row
  FastDivmod rows_div;  // image row -> (n, major): runs of a column (runs down) or P
  int cluster_split;    // blocks of a cluster (consecutive z), summed in rank order
  int atomic;           // slices add alpha * sum into dw (the pre-pass wrote beta * dw + bias)
  float alpha, beta;
  int activation;  // mconv::Activation's number (epilogue.cuh)
};

template <class T, int V>
struct alignas(V * sizeof(T)) WgradVector {
  T v[V];
};

/// V adjacent values of T at p (aligned for one load of V * sizeof(T) bytes) widened to fp32.
template <class T, int V>
__device__ __forceinline__ void load_widened(const T* p, float (&out)[V]) {
  const WgradVector<T, V> raw = *reinterpret_cast<const WgradVector<T, V>*>(p);
#pragma unroll
  for (int i = 0; i < V; ++i) out[i] = to_float(raw.v[i]);
}

/// T: storage type. V: adjacent filters a thread. KS: square filter size with the register window
/// (1, 3, 5, 7), or 0 for any filter, TAPS taps a block. DOWN: an item's run goes down a column (one
/// filter a thread, plane order: a warp's lanes read adjacent columns) or along a row. ST: the
/// layer's stride along the run (1 or 2). QT: dy pixels of one item. One filter a thread with at
/// most 25 taps is held to 64 registers, four blocks an SM, where ptxas spills nothing; 7x7 spills
/// there, and the vector kernels spilled 120-308 bytes when held to 85 (three blocks).
template <class T, int V, int KS, int ST, int QT, int TAPS, bool DOWN>
__global__ void __launch_bounds__(kDepthwiseWgradThreads, V == 1 && TAPS <= 25 ? 4 : 1)
    depthwise_wgrad_kernel(const DepthwiseWgradParams prm) {
  detail::wait_then_allow_dependent_grids();  // Note [dependent launch]
  static_assert(KS == 0 || TAPS == KS * KS, "the window kernel keeps every tap");
  static_assert(KS > 0 || (V == 1 && QT == 1 && !DOWN), "the tap-chunk kernel takes one filter and one pixel an item");
  static_assert(!DOWN || (V == 1 && KS > 0), "runs down a column: one filter a thread, the register window");
  extern __shared__ __align__(16) float sPartial[];  // [warps][chunk_vectors][TAPS][V]
  const int tc = prm.chunk_vectors;
  const int lane = threadIdx.x % tc, slot = threadIdx.x / tc, slots = blockDim.x / tc;
  const int vec = blockIdx.x * tc + lane;
  const int tap0 = blockIdx.y * TAPS;
  const long long first = static_cast<long long>(blockIdx.z) * prm.items_per_part;
  const int last = static_cast<int>(min(static_cast<long long>(prm.items), first + prm.items_per_part));

  float acc[TAPS][V];
#pragma unroll
  for (int t = 0; t < TAPS; ++t)
#pragma unroll
    for (int v = 0; v < V; ++v) acc[t][v] = 0.0f;

  if (vec < prm.vectors) {
    const int k0 = vec * V, g = k0 / prm.kg, j = k0 - g * prm.kg;
    const T* x = static_cast<const T*>(prm.x) + g * prm.x_sc;
    const T* dy = static_cast<const T*>(prm.dy) + g * prm.dy_sg + j * prm.dy_sk;
    for (int item = static_cast<int>(min(first + slot, static_cast<long long>(last))); item < last; item += slots) {
      unsigned image_row, minor, n_u, major;
      prm.runs_div.divmod(static_cast<unsigned>(item), image_row, minor);
      prm.rows_div.divmod(image_row, n_u, major);
      const int n = static_cast<int>(n_u);
      const T* x_img = x + n * prm.x_sn;
      if constexpr (DOWN) {
        // dy rows p0 + [0, QT) of column q; x rows p0*ST - pad_h + [0, ROWS) (row dilation 1, the
        // planner's condition), KS columns each, every row loaded once for the outputs it meets.
        const int p0 = static_cast<int>(major) * QT, q = static_cast<int>(minor);
        const T* dy_col = dy + n * prm.dy_sn + q * prm.dy_sq;
        float d[QT];
#pragma unroll
        for (int jj = 0; jj < QT; ++jj) d[jj] = p0 + jj < prm.P ? to_float(dy_col[(p0 + jj) * prm.dy_sp]) : 0.0f;
        constexpr int ROWS = (QT - 1) * ST + KS;
        const int ih0 = p0 * ST - prm.pad_h, iw0 = q * prm.stride_w - prm.pad_w;
        const bool columns_inside = iw0 >= 0 && iw0 + (KS - 1) * prm.dil_w < prm.W;
        const T* x_first = x_img + iw0 * prm.x_sw;
#pragma unroll
        for (int t = 0; t < ROWS; ++t) {
          const int ih = ih0 + t;
          if (static_cast<unsigned>(ih) >= static_cast<unsigned>(prm.H)) continue;
          const T* x_row = x_first + ih * prm.x_sh;
          float xs[KS];
#pragma unroll
          for (int s = 0; s < KS; ++s)
            xs[s] = columns_inside || static_cast<unsigned>(iw0 + s * prm.dil_w) < static_cast<unsigned>(prm.W)
                        ? to_float(x_row[s * prm.dil_w * prm.x_sw])
                        : 0.0f;
#pragma unroll
          for (int jj = 0; jj < QT; ++jj) {
            const int r = t - jj * ST;  // the tap row of output row p0 + jj that reads x row t
            if (r < 0 || r >= KS) continue;
#pragma unroll
            for (int s = 0; s < KS; ++s) acc[r * KS + s][0] = fmaf(d[jj], xs[s], acc[r * KS + s][0]);
          }
        }
        continue;
      }
      const int p = static_cast<int>(major), q0 = static_cast<int>(minor) * QT;
      // Offsets inside one image in 32 bits; whole runs and windows inside the map take no check per
      // element.
      const T* dy_row = dy + n * prm.dy_sn + p * prm.dy_sp;
      float d[QT][V];
      if (q0 + QT <= prm.Q) {
#pragma unroll
        for (int jj = 0; jj < QT; ++jj) load_widened<T, V>(dy_row + (q0 + jj) * prm.dy_sq, d[jj]);
      } else {
#pragma unroll
        for (int jj = 0; jj < QT; ++jj) {
          if (q0 + jj < prm.Q) {
            load_widened<T, V>(dy_row + (q0 + jj) * prm.dy_sq, d[jj]);
          } else {
#pragma unroll
            for (int v = 0; v < V; ++v) d[jj][v] = 0.0f;
          }
        }
      }
      if constexpr (KS > 0) {
        // Dilation 1 along the row, column stride ST (the planner's condition): the run's taps read
        // columns q0*ST - pad_w + [0, WIN).
        constexpr int WIN = (QT - 1) * ST + KS;
        const int iw0 = q0 * ST - prm.pad_w;
        const bool window_inside = iw0 >= 0 && iw0 + WIN <= prm.W;
        const T* x_first = x_img + iw0 * prm.x_sw;
#pragma unroll
        for (int r = 0; r < KS; ++r) {
          const int ih = p * prm.stride_h - prm.pad_h + r * prm.dil_h;
          if (static_cast<unsigned>(ih) >= static_cast<unsigned>(prm.H)) continue;
          const T* x_row = x_first + ih * prm.x_sh;
          float win[WIN][V];
          if (window_inside) {
#pragma unroll
            for (int u = 0; u < WIN; ++u) load_widened<T, V>(x_row + u * prm.x_sw, win[u]);
          } else {
#pragma unroll
            for (int u = 0; u < WIN; ++u) {
              if (static_cast<unsigned>(iw0 + u) < static_cast<unsigned>(prm.W)) {
                load_widened<T, V>(x_row + u * prm.x_sw, win[u]);
              } else {
#pragma unroll
                for (int v = 0; v < V; ++v) win[u][v] = 0.0f;
              }
            }
          }
#pragma unroll
          for (int s = 0; s < KS; ++s)
#pragma unroll
            for (int jj = 0; jj < QT; ++jj)
#pragma unroll
              for (int v = 0; v < V; ++v) acc[r * KS + s][v] = fmaf(d[jj][v], win[jj * ST + s][v], acc[r * KS + s][v]);
        }
      } else {
        const int ih0 = p * prm.stride_h - prm.pad_h, iw0 = q0 * prm.stride_w - prm.pad_w;
#pragma unroll
        for (int t = 0; t < TAPS; ++t) {
          const int tap = tap0 + t;
          if (tap < prm.taps) {
            const int r = tap / prm.S, s = tap - r * prm.S;
            const int ih = ih0 + r * prm.dil_h, iw = iw0 + s * prm.dil_w;
            if (static_cast<unsigned>(ih) < static_cast<unsigned>(prm.H) &&
                static_cast<unsigned>(iw) < static_cast<unsigned>(prm.W))
              acc[t][0] = fmaf(d[0][0], to_float(x_img[ih * prm.x_sh + iw * prm.x_sw]), acc[t][0]);
          }
        }
      }
    }
  }

  // The block's sum: lanes of a warp that own the same filters (lane % tc) by shuffles, then the
  // warps in order. Both orders are fixed.
  const int warp = threadIdx.x / 32, wl = threadIdx.x % 32;
  for (int off = 16; off >= tc; off /= 2)
#pragma unroll
    for (int t = 0; t < TAPS; ++t)
#pragma unroll
      for (int v = 0; v < V; ++v) acc[t][v] += __shfl_xor_sync(0xffffffffu, acc[t][v], off);
  const int per_lane = TAPS * V, per_warp = tc * per_lane;
  if (wl < tc) {
#pragma unroll
    for (int t = 0; t < TAPS; ++t)
#pragma unroll
      for (int v = 0; v < V; ++v) sPartial[warp * per_warp + wl * per_lane + t * V + v] = acc[t][v];
  }
  __syncthreads();
  const int warps = blockDim.x / 32;
  for (int e = threadIdx.x; e < per_warp; e += blockDim.x) {
    float sum = sPartial[e];
    for (int w = 1; w < warps; ++w) sum += sPartial[w * per_warp + e];
    sPartial[e] = sum;  // warp 0's row: only this thread reads or writes index e of any row
  }

  // The cluster's sum in rank order, written by rank 0 (each element by one thread).
  namespace cg = cooperative_groups;
  const bool clustered = prm.cluster_split > 1;
  if (clustered) {
    cg::this_cluster().sync();  // every rank's block sum is in its shared memory
  } else {
    __syncthreads();
  }
  const bool writer = !clustered || cg::this_cluster().block_rank() == 0;
  if (writer) {
    for (int e = threadIdx.x; e < per_warp; e += blockDim.x) {
      float sum = sPartial[e];
      if (clustered) {
        cg::cluster_group cluster = cg::this_cluster();
        for (int r = 1; r < prm.cluster_split; ++r) sum += cluster.map_shared_rank(sPartial, r)[e];
      }
      const int el = e / per_lane, rest = e - el * per_lane, t = rest / V, v = rest - t * V;
      const int vv = blockIdx.x * tc + el, tap = tap0 + t;
      if (vv >= prm.vectors || tap >= prm.taps) continue;
      const int k = vv * V + v, g = k / prm.kg, jk = k - g * prm.kg;
      const int r = tap / prm.S, s = tap - r * prm.S;
      T* dst = static_cast<T*>(prm.dw) + g * prm.dw_sg + jk * prm.dw_sk + r * prm.dw_sr + s * prm.dw_ss;
      if (prm.atomic) {
        atomic_add_rounded(dst, prm.alpha * sum);
      } else {
        const float old = prm.beta != 0.0f ? to_float(*dst) : 0.0f;
        *dst = from_float<T>(
            epilogue_value(prm.alpha, sum, prm.beta, &old, prm.bias ? prm.bias[k] : 0.0f, prm.activation));
      }
    }
  }
  if (clustered) cg::this_cluster().sync();  // no block leaves while rank 0 still reads its shared memory
}

}  // namespace mconv::cuda
