// The single-channel kernel family (technique 4, paper section 3.1), driven by the division of
// planner.hpp: block (strip, filter chunk, image x group) copies a strip of
// rows_per_block output rows' worth of input (all columns, halo and padding included), its
// filters_per_block filters and their bias values into shared memory once; then each thread takes
// a run of output rows in one column, or two (Note [single-channel column pairs]), and walks the
// filters with it (Note [single-channel runs] in the planner). With a square 1/3/5/7 filter,
// stride_h 1 or 2 and dil_h 1 the run's input window lives in registers (K > 0); any other shape
// reads the strip for every tap (K = 0).
//
// fp16/bf16 x, w and y (T) are widened into the fp32 strip and filters as they are copied (through
// registers: cp.async moves bytes), the arithmetic is fp32 and y is rounded once.
//
// Threads map to (filter lane, run): run index = (run row, column), consecutive threads take
// consecutive columns so every store of a warp is contiguous. When the block has fewer runs than
// threads, the filters are dealt over `lanes` groups of threads (filter f goes to lane f % lanes).
#pragma once

#include <type_traits>

#include "../common/conv_geometry.cuh"
#include "../common/cp_async.cuh"
#include "../common/dependent_launch.cuh"
#include "../common/epilogue.cuh"
#include "../common/fast_divmod.cuh"
#include "../common/storage.cuh"

namespace mconv::cuda {

struct SingleChannelParams : ConvGeometry, StoragePointers {
  int filters_per_block, rows_per_block;
  int strip_rows, strip_cols;  // strip_rows covers whole runs
  int strip_pitch;             // floats per strip row in shared memory (strip_cols rounded up to 4)
  int filter_pitch;            // floats per filter row in shared memory (S rounded up to 4)
  int vec4;                    // strip copies of 4 elements: x rows aligned for them and pad_w % 4 == 0
  FastDivmod groups_div;       // blockIdx.z -> (image, group)
  FastDivmod chunks_div;       // strip copy e -> (row, chunk): chunks per strip row
  FastDivmod per_row_div;      // run -> (run row, column): runs per output row, ceil(Q / COLS)
  FastDivmod runs_div;         // item -> (lane, run): runs of a block of rows_per_block rows
  int lanes;                   // filter lanes of a whole block: max(1, min(filters_per_block, threads / runs))
};

/// K: square filter size with the window in registers, 0 for the generic path. ST: stride_h of the
/// register window (ignored when K = 0). RUN: output rows per thread. COLS: output columns per
/// thread, 1 or 2 (K > 0 only).
/// 4 elements of T from global memory into 4 fp32 values of shared memory (16-byte aligned), or 4
/// zeros when `ok` is false: cp.async for fp32, a load and a widening store for 2-byte dtypes.
template <class T>
__device__ __forceinline__ void copy_four_widened(float* dst, const T* src, bool ok) {
  if constexpr (sizeof(T) == 4) {
    detail::cp_async_f32x4(dst, src, ok);
  } else {
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (ok) {
      const uint2 raw = *reinterpret_cast<const uint2*>(src);
      const T* e = reinterpret_cast<const T*>(&raw);
      v = make_float4(to_float(e[0]), to_float(e[1]), to_float(e[2]), to_float(e[3]));
    }
    *reinterpret_cast<float4*>(dst) = v;
  }
}
/// One element of T into one fp32 value of shared memory, or 0 when `ok` is false.
template <class T>
__device__ __forceinline__ void copy_one_widened(float* dst, const T* src, bool ok) {
  if constexpr (sizeof(T) == 4)
    detail::cp_async_f32(dst, src, ok);
  else
    *dst = ok ? to_float(*src) : 0.0f;
}

/// The run's row i as COLS stored values: a pair as one 2-element store (COLS = 2, aligned by the
/// launcher's condition), else one element.
template <class T, int COLS>
__device__ __forceinline__ void store_row(T* dst, const float (&v)[COLS]) {
  if constexpr (COLS == 2 && sizeof(T) == 4) {
    *reinterpret_cast<float2*>(dst) = make_float2(v[0], v[1]);
  } else if constexpr (COLS == 2) {
    using Pair = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;
    Pair p;
    p.x = from_float<T>(v[0]);
    p.y = from_float<T>(v[1]);
    *reinterpret_cast<Pair*>(dst) = p;
  } else {
    dst[0] = from_float<T>(v[0]);
  }
}

template <class T, int K, int ST, int RUN, int COLS>
__global__ void __launch_bounds__(512) single_channel_kernel(const SingleChannelParams prm) {
  detail::wait_then_allow_dependent_grids();  // Note [dependent launch]
  const int R = K > 0 ? K : prm.R, S = K > 0 ? K : prm.S;
  constexpr int kPitch = (K + 3) / 4 * 4;  // filter_pitch when K > 0
  const int SP = K > 0 ? kPitch : prm.filter_pitch;
  extern __shared__ __align__(16) float smem[];
  float* sFilter = smem;                                        // [filters][R][SP], rows 16-byte aligned
  float* sBias = sFilter + prm.filters_per_block * R * SP;      // [filters] (0 without bias)
  float* sStrip = sBias + (prm.filters_per_block + 3) / 4 * 4;  // [strip_rows][strip_pitch]

  const int nthreads = blockDim.x, tid = threadIdx.x;
  const int oy0 = blockIdx.x * prm.rows_per_block;
  const int f0 = blockIdx.y * prm.filters_per_block;
  unsigned image, group;
  prm.groups_div.divmod(blockIdx.z, image, group);
  const int n = static_cast<int>(image), g = static_cast<int>(group);
  const int nf = min(prm.filters_per_block, prm.kg - f0);
  const int rows = min(prm.rows_per_block, prm.P - oy0);
  const int iy0 = window_origin(oy0, prm.stride_h, prm.pad_h), ix0 = window_origin(0, prm.stride_w, prm.pad_w);
  const T* x = prm.x_as<T>();
  const T* gX = x + n * prm.x_sn + g * prm.x_sc;
  const int k_base = g * prm.kg + f0;

  // The strip (zero fill outside the map: padding, and rows past the last whole run). With vec4 every
  // chunk of 4 elements of a row lies wholly inside or wholly outside [0, W) (W % 4 == 0, pad_w % 4 == 0).
  const int chunks = static_cast<int>(prm.chunks_div.divisor);  // 4-element chunks (vec4) or elements per strip row
  for (int e = tid; e < prm.strip_rows * chunks; e += nthreads) {
    unsigned row, chunk;
    prm.chunks_div.divmod(e, row, chunk);
    const int yy = static_cast<int>(row), ch = static_cast<int>(chunk);
    const int h = iy0 + yy;
    const bool row_ok = static_cast<unsigned>(h) < static_cast<unsigned>(prm.H);
    if (prm.vec4) {
      const int w = ix0 + 4 * ch;
      const bool ok = row_ok && static_cast<unsigned>(w) < static_cast<unsigned>(prm.W);
      copy_four_widened(sStrip + yy * prm.strip_pitch + 4 * ch, ok ? gX + h * prm.x_sh + w : x, ok);
    } else {
      const int w = ix0 + ch;
      const bool ok = row_ok && static_cast<unsigned>(w) < static_cast<unsigned>(prm.W);
      copy_one_widened(sStrip + yy * prm.strip_pitch + ch, ok ? gX + h * prm.x_sh + w * prm.x_sw : x, ok);
    }
  }
  const int RS = R * S;
  for (int e = tid; e < nf * RS; e += nthreads) {
    const int f = e / RS, rs = e - f * RS, r = rs / S, s = rs - r * S;
    const int fr = prm.flip ? R - 1 - r : r, fs = prm.flip ? S - 1 - s : s;
    copy_one_widened(sFilter + (f * R + r) * SP + s,
                     prm.w_as<T>() + (k_base + f) * prm.w_sk + fr * prm.w_sr + fs * prm.w_ss, true);
  }
  for (int f = tid; f < nf; f += nthreads)  // zero fill without bias; the bias is fp32 in every dtype
    detail::cp_async_f32(sBias + f, prm.bias ? prm.bias + k_base + f : static_cast<const float*>(prm.ws),
                         prm.bias != nullptr);
  detail::cp_async_commit();
  detail::cp_async_wait<0>();
  __syncthreads();

  // COLS = 2: a run is RUN rows x 2 columns and its rows go out as 8-byte stores (Note
  // [single-channel column pairs] in the planner). Items split with divisors fixed at launch
  // (FastDivmod), except in a short last block row. On small maps a block is one short chain
  // (copies, then one item per thread) and three integer divides lengthened it: without them the
  // single_channel suite ran 5.5% faster (H100, every layer 1-12%); computing the divides while the
  // copies were in flight instead gained 1.4% and lost 4-5% on the 5x5 layers of 112x112-224x224.
  const int per_row = static_cast<int>(prm.per_row_div.divisor);
  const bool full_rows = rows == prm.rows_per_block;
  const int runs = full_rows ? static_cast<int>(prm.runs_div.divisor) : (rows + RUN - 1) / RUN * per_row;
  const int lanes = full_rows && nf == prm.filters_per_block ? prm.lanes : max(1, min(nf, nthreads / runs));
  T* y_img = prm.y_as<T>() + n * prm.y_sn;
  for (int item = tid; item < runs * lanes; item += nthreads) {
    unsigned lane_u, run, row_u, col;
    if (full_rows) {
      prm.runs_div.divmod(item, lane_u, run);
    } else {
      lane_u = item / runs;
      run = item - lane_u * runs;
    }
    prm.per_row_div.divmod(run, row_u, col);
    const int lane = static_cast<int>(lane_u), run_row = static_cast<int>(row_u);
    const int ox = COLS * static_cast<int>(col);
    const int ly = run_row * RUN;  // first output row of the run, in the block
    const float* src = sStrip + ly * prm.stride_h * prm.strip_pitch + ox * prm.stride_w;
    T* y_run = y_img + (oy0 + ly) * prm.y_sp + ox * prm.y_sq;
    const bool whole_run = ly + RUN <= rows && ox + COLS <= prm.Q;
    // Stores the run's outputs of filter f. The common case (a whole run, beta = 0) takes no branch
    // per output; rows past the block's last and a pair's column past Q are skipped.
    auto store = [&](int f, const float(&acc)[RUN][COLS]) {
      T* dst = y_run + static_cast<long long>(k_base + f) * prm.y_sk;
      const float bias = sBias[f];
      if (whole_run && prm.beta == 0.0f && prm.activation != kActivationSiLU) {  // SiLU: Note [fused silu]
#pragma unroll
        for (int i = 0; i < RUN; ++i) {
          float v[COLS];
#pragma unroll
          for (int c = 0; c < COLS; ++c) {
            v[c] = fmaf(prm.alpha, acc[i][c], bias);
            v[c] = activate<ActivationSet::NoSiLU>(v[c], prm.activation);
          }
          store_row<T, COLS>(dst + i * prm.y_sp, v);
        }
        return;
      }
#pragma unroll
      for (int i = 0; i < RUN; ++i)
#pragma unroll
        for (int c = 0; c < COLS; ++c)
          if (ly + i < rows && ox + c < prm.Q) {
            const float old = prm.beta != 0.0f ? to_float(dst[i * prm.y_sp + c]) : 0.0f;
            dst[i * prm.y_sp + c] = from_float<T>(
                epilogue_value<ActivationSet::Any>(prm.alpha, acc[i][c], prm.beta, &old, bias, prm.activation));
          }
    };
    if constexpr (K > 0) {
      constexpr int WR = (RUN - 1) * ST + K, WC = K + COLS - 1;
      float win[WR][WC];
#pragma unroll
      for (int a = 0; a < WR; ++a)
#pragma unroll
        for (int b = 0; b < WC; ++b) win[a][b] = src[a * prm.strip_pitch + b * prm.dil_w];
      for (int f = lane; f < nf; f += lanes) {
        float acc[RUN][COLS];
#pragma unroll
        for (int i = 0; i < RUN; ++i)
#pragma unroll
          for (int c = 0; c < COLS; ++c) acc[i][c] = 0.0f;
#pragma unroll
        for (int r = 0; r < K; ++r) {
          float tap[kPitch];
          const float4* row = reinterpret_cast<const float4*>(sFilter + (f * K + r) * kPitch);
#pragma unroll
          for (int q = 0; q < kPitch / 4; ++q) {
            const float4 v = row[q];
            tap[4 * q] = v.x;
            tap[4 * q + 1] = v.y;
            tap[4 * q + 2] = v.z;
            tap[4 * q + 3] = v.w;
          }
#pragma unroll
          for (int s = 0; s < K; ++s)
#pragma unroll
            for (int i = 0; i < RUN; ++i)
#pragma unroll
              for (int c = 0; c < COLS; ++c) acc[i][c] = fmaf(win[i * ST + r][s + c], tap[s], acc[i][c]);
        }
        store(f, acc);
      }
    } else {
      static_assert(COLS == 1, "the strip-reading kernel computes one column per run");
      for (int f = lane; f < nf; f += lanes) {
        float acc[RUN][COLS];
#pragma unroll
        for (int i = 0; i < RUN; ++i) acc[i][0] = 0.0f;
        for (int r = 0; r < R; ++r)
          for (int s = 0; s < S; ++s) {
            const float tap = sFilter[(f * R + r) * SP + s];
            const float* col = src + r * prm.dil_h * prm.strip_pitch + s * prm.dil_w;
#pragma unroll
            for (int i = 0; i < RUN; ++i) acc[i][0] = fmaf(col[i * prm.stride_h * prm.strip_pitch], tap, acc[i][0]);
          }
        store(f, acc);
      }
    }
  }
}

}  // namespace mconv::cuda
