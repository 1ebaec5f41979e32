// The plane-stream kernel of the single-channel family (Note [plane stream] in
// planner.hpp): for groups of one channel and one filter (depthwise,
// multiplier 1), in fp32, fp16 or bf16 storage (T) with fp32 arithmetic. The work is a list of
// chunks: several whole planes (small maps) or a band of output rows of one plane (large maps), one
// block each:
//   1. the block copies the chunk's input rows in with cp.async, 16 bytes at a time when rows
//      allow (4 bytes, or for 2-byte elements in odd rows one element through registers,
//      otherwise), keeping x's dtype in shared memory, and its filters as fp32; it zeroes the
//      padding around the rows meanwhile. The copies walk the rows as
//      one flat range, so a warp reads contiguous memory even when a row is 7 floats long. (A
//      resident wave walking the chunks with two buffers measured 1.0-1.5x slower on the H100: see
//      docs/PERFORMANCE.md.)
//   2. padding is the zeros left in shared memory, so the compute reads without predicates (the
//      row pitch and plane stride come from the plan: Note [plane stream banks]);
//   3. each thread computes a vertical run of RUN (plane_stream_run) outputs of one column: it loads
//      each of the run's input rows once and adds it into every output of the run that uses it, with
//      the plane's filter in registers.
//
// Note [plane stream stride-2 pairs]
// At stride_w 2 neighbouring lanes read shared memory 2 floats apart: each 4-byte read of the K
// columns is a 2-way bank conflict (ncu, H100, mbv2_dw_c144_h56_s2: 56% of the shared-load
// wavefronts were conflicts). With 16-byte copies the row pitch and plane stride are multiples of
// 4 floats, so every item's first column has pad_w's parity: the item reads its K columns as
// ceil((K + parity) / 2) 8-byte words from the even float at or before the first, and a half-warp's
// words cover all 32 banks once. For K = 3: 2 reads per input row instead of 3, 4 wavefronts per
// warp instead of 6. Instantiated for "same" padding's parity ((K - 1) / 2) only; others read singly.
#pragma once

#include <type_traits>

#include "../common/conv_geometry.cuh"
#include "../common/cp_async.cuh"
#include "../common/dependent_launch.cuh"
#include "../common/epilogue.cuh"
#include "../common/fast_divmod.cuh"
#include "../common/storage.cuh"
#include "plane_order.cuh"

namespace mconv::cuda {

// x rows are contiguous (x_sw == 1); the filter is square (R = S = K) and undilated. Lengths in
// shared memory are in elements of T.
struct PlaneStreamParams : ConvGeometry, StoragePointers, PlaneOrder {
  long long plane_stride;  // distance between consecutive planes when constant, else 0
  int planes_per_block, rows_per_block;
  int chunks;                               // ceil(planes / planes_per_block) * bands
  FastDivmod bands;                         // bands of output rows per plane: ceil(P / rows_per_block)
  int filter_offset;                        // bytes from the buffer's start to its fp32 filters
  FastDivmod row_vectors;                   // vectors (of VW elements) per input row: W / VW
  FastDivmod plane_rows;                    // input rows copied per plane when a block holds whole planes
  FastDivmod q_div;                         // Q
  FastDivmod run_div;                       // runs of RUN output rows per block
  int smem_rows, pitch, lpad, plane_elems;  // PlaneStreamLayout
};

/// The chunk's fp32 filters, [planes][K*K], after its planes in the buffer.
__device__ __forceinline__ float* plane_filters(const PlaneStreamParams& prm, void* buf) {
  return reinterpret_cast<float*>(static_cast<char*>(buf) + prm.filter_offset);
}

/// Copies one vector of VB bytes of x's rows into shared memory: cp.async for 4 and 16 bytes, a
/// load and a store for one 2-byte element (cp.async moves at least 4).
template <class T, int VB>
__device__ __forceinline__ void copy_row_vector(T* dst, const T* src) {
  if constexpr (VB >= 4)
    detail::cp_async_bytes<VB>(dst, src);
  else
    *dst = *src;
}

/// Where chunk `chunk` lies: its first plane, planes, first output row and rows, and the input rows it copies.
struct PlaneChunk : PlaneBand {
  int iy0, ih_lo, copy_rows;
};

template <int SH>
__device__ __forceinline__ PlaneChunk plane_chunk(const PlaneStreamParams& prm, int chunk) {
  PlaneChunk c;
  static_cast<PlaneBand&>(c) = plane_band(prm, prm.bands, chunk, prm.planes_per_block, prm.rows_per_block, prm.P);
  c.iy0 = window_origin(c.oy0, SH, prm.pad_h);  // input row of shared row 0
  c.ih_lo = max(c.iy0, 0);
  c.copy_rows = max(min(c.iy0 + prm.smem_rows, prm.H) - c.ih_lo, 0);
  return c;
}

/// Starts the copies of the input rows of planes [pl0, pl0 + count) of chunk `c` into `buf`, VB
/// bytes at a time. The caller commits.
template <class T, int VB, int THREADS>
__device__ __forceinline__ void copy_planes(const PlaneStreamParams& prm, const PlaneChunk& c, T* buf, int pl0,
                                            int count) {
  constexpr int VW = VB / static_cast<int>(sizeof(T));
  const T* x = prm.x_as<T>();
  const int plane_elems = prm.plane_elems;
  const int first = c.ih_lo - c.iy0;  // shared row of the first copied input row
  const int rv = static_cast<int>(prm.row_vectors.divisor), rows = c.copy_rows;
  const int copies = count * rows * rv;
  if (prm.plane_stride != 0 && copies > 0) {
    // Note [plane stream copies]: element e = (plane, row, vector) in mixed radix (nplanes, rows, rv).
    // A thread starts at e = threadIdx.x and steps by THREADS = (dpl, drr, dvec) with carries, moving
    // its source and destination offsets along: no division per copy.
    // The split itself uses the launch-time divisors (a runtime `/` costs ~20 instructions, and
    // ncu counted these splits at 13% of the kernel's instructions on 7x7 maps). Whole planes copy
    // plane_rows rows each; a band is one plane, where e < copies keeps rr below rows unsplit.
    unsigned t_rows, t_vec, i_rows, i_vec;
    prm.row_vectors.divmod(THREADS, t_rows, t_vec);
    prm.row_vectors.divmod(threadIdx.x, i_rows, i_vec);
    unsigned t_pl = 0, t_rr = t_rows, i_pl = 0, i_rr = i_rows;
    if (prm.planes_per_block > 1) {
      prm.plane_rows.divmod(t_rows, t_pl, t_rr);
      prm.plane_rows.divmod(i_rows, i_pl, i_rr);
    }
    const int dvec = t_vec, drr = t_rr, dpl = t_pl;
    int vec = i_vec, rr = i_rr, pl = pl0 + i_pl;
    unsigned n0, ch0;
    plane_coords(prm, c.g0, n0, ch0);
    long long src = n0 * prm.x_sn + ch0 * prm.x_sc + pl * prm.plane_stride + (c.ih_lo + rr) * prm.x_sh + vec * VW;
    int dst = pl * plane_elems + (first + rr) * prm.pitch + prm.lpad + vec * VW;
    for (int e = threadIdx.x; e < copies; e += THREADS) {
      copy_row_vector<T, VB>(buf + dst, x + src);
      vec += dvec;
      src += dvec * VW;
      dst += dvec * VW;
      if (vec >= rv) {
        vec -= rv;
        ++rr;
        src += prm.x_sh - rv * VW;
        dst += prm.pitch - rv * VW;
      }
      rr += drr;
      src += drr * prm.x_sh;
      dst += drr * prm.pitch;
      if (rr >= rows) {
        rr -= rows;
        ++pl;
        src += prm.plane_stride - rows * prm.x_sh;
        dst += plane_elems - rows * prm.pitch;
      }
      src += dpl * prm.plane_stride;
      dst += dpl * plane_elems;
    }
  } else {
    for (int e = threadIdx.x; e < copies; e += THREADS) {
      unsigned row, vec, pl = 0, rr;
      prm.row_vectors.divmod(e, row, vec);
      if (prm.planes_per_block > 1)
        prm.plane_rows.divmod(row, pl, rr);  // whole planes: every chunk copies the same rows
      else
        rr = row;
      pl += pl0;
      unsigned n, ch;
      plane_coords(prm, c.g0 + pl, n, ch);
      const T* src = x + n * prm.x_sn + ch * prm.x_sc + (c.ih_lo + rr) * prm.x_sh + vec * VW;
      copy_row_vector<T, VB>(buf + pl * plane_elems + (first + rr) * prm.pitch + prm.lpad + vec * VW, src);
    }
  }
}

/// Starts the copies of chunk `c`'s filters into `buf`'s fp32 filters (fp16/bf16 ones converted on
/// the way, through registers). The caller commits.
template <class T, int K, int THREADS>
__device__ __forceinline__ void copy_filters(const PlaneStreamParams& prm, const PlaneChunk& c, void* buf) {
  constexpr int KK = K * K;
  float* sFilter = plane_filters(prm, buf);
  for (int e = threadIdx.x; e < c.nplanes * KK; e += THREADS) {
    const int pl = e / KK, rs = e - pl * KK, r = rs / K, s = rs - r * K;
    unsigned n, ch;
    plane_coords(prm, c.g0 + pl, n, ch);
    const int fr = prm.flip ? K - 1 - r : r, fs = prm.flip ? K - 1 - s : s;
    const T* w = prm.w_as<T>() + ch * prm.w_sk + fr * prm.w_sr + fs * prm.w_ss;
    if constexpr (sizeof(T) == 4)
      detail::cp_async_f32(sFilter + e, w, true);
    else
      sFilter[e] = to_float(*w);
  }
}

/// Zeroes what the compute reads and the copies do not write in chunk `c`'s planes: the shared rows
/// outside the copied input rows, and the padding columns left and right of the input in the others.
/// The copies write none of it, so both go on at once and one barrier covers them.
template <class T, int VB, int THREADS>
__device__ __forceinline__ void zero_padding(const PlaneStreamParams& prm, const PlaneChunk& c, T* buf) {
  constexpr int VW = VB / static_cast<int>(sizeof(T));
  const int first = c.ih_lo - c.iy0, last = first + c.copy_rows;  // shared rows the copies fill
  const int rows = prm.smem_rows, pitch = prm.pitch, right = prm.lpad + prm.W;
  // lpad, W and the pitch are multiples of the copies' vector, so the margins are whole vectors
  // (zero bits are 0 in every dtype).
  using Vec = std::conditional_t<VB == 16, uint4, std::conditional_t<VB == 4, unsigned, unsigned short>>;
  const Vec zero{};
  for (int e = threadIdx.x; e < c.nplanes * rows; e += THREADS) {
    const int pl = e / rows, r = e - pl * rows;
    Vec* row = reinterpret_cast<Vec*>(buf + pl * prm.plane_elems + r * pitch);
    const bool whole = r < first || r >= last;
    for (int i = 0; i < (whole ? pitch : prm.lpad) / VW; ++i) row[i] = zero;
    if (!whole)
      for (int i = right / VW; i < pitch / VW; ++i) row[i] = zero;
  }
}

/// Every output of planes [pl0, pl0 + count) of chunk `c` from `buf`, through the epilogue into y
/// (rounded once to T).
/// (Items of 2 columns as well as RUN rows measured 1.2-1.4x slower on the H100: neighbouring lanes
/// then read shared memory 2 or 4 banks apart, and small planes have half the items for 256 threads.)
/// PAIR_ODD >= 0 (fp32, stride_w 2, 16-byte copies): Note [plane stream stride-2 pairs], with
/// PAIR_ODD the parity of an item's first input column in shared memory (pad_w's, as lpad is a
/// multiple of 4). (2-byte elements need no pairs: lanes 2 elements apart read distinct banks.)
template <class T, int K, int RUN, int SH, int THREADS, int PAIR_ODD>
__device__ __forceinline__ void compute_planes(const PlaneStreamParams& prm, const PlaneChunk& c, const T* buf, int pl0,
                                               int count) {
  static_assert(PAIR_ODD < 0 || sizeof(T) == 4, "paired reads are fp32's");
  constexpr int KK = K * K, RUN_ROWS = (RUN - 1) * SH + K;  // input rows of one run
  const int plane_elems = prm.plane_elems;
  const float* sFilter = plane_filters(prm, const_cast<T*>(buf));
  const int items = count * static_cast<int>(prm.run_div.divisor) * prm.Q;
  for (int it = threadIdx.x; it < items; it += THREADS) {
    unsigned rest, q, pl, run;
    prm.q_div.divmod(it, rest, q);
    prm.run_div.divmod(rest, pl, run);
    pl += pl0;
    const int oy = run * RUN;
    if (oy >= c.out_rows) continue;  // the last band's runs past P
    float wr[KK];  // reloaded per run (broadcast reads): kept across runs it would spill at 40 registers
#pragma unroll
    for (int i = 0; i < KK; ++i) wr[i] = sFilter[pl * KK + i];
    const T* src = buf + pl * plane_elems + oy * SH * prm.pitch + prm.lpad - prm.pad_w + q * prm.stride_w;
    float acc[RUN];
#pragma unroll
    for (int j = 0; j < RUN; ++j) acc[j] = 0.0f;
#pragma unroll
    for (int i = 0; i < RUN_ROWS; ++i) {
      float xv[K];
      if constexpr (PAIR_ODD >= 0) {
        // Note [plane stream stride-2 pairs]: the K columns from the 8-byte word at or before the
        // first, one 8-byte read per pair.
        constexpr int kPairs = (K + PAIR_ODD + 1) / 2;
        const float2* row =
            reinterpret_cast<const float2*>(reinterpret_cast<const float*>(src) + i * prm.pitch - PAIR_ODD);
        float v[2 * kPairs];
#pragma unroll
        for (int j = 0; j < kPairs; ++j) {
          const float2 t = row[j];
          v[2 * j] = t.x;
          v[2 * j + 1] = t.y;
        }
#pragma unroll
        for (int s = 0; s < K; ++s) xv[s] = v[s + PAIR_ODD];
      } else {
#pragma unroll
        for (int s = 0; s < K; ++s) xv[s] = to_float(src[i * prm.pitch + s]);
      }
#pragma unroll
      for (int j = 0; j < RUN; ++j) {
        const int r = i - j * SH;  // filter row that input row i meets for output j of the run
        if (r >= 0 && r < K) {
#pragma unroll
          for (int s = 0; s < K; ++s) acc[j] = fmaf(xv[s], wr[r * K + s], acc[j]);
        }
      }
    }
    unsigned n, ch;
    plane_coords(prm, c.g0 + pl, n, ch);
    T* dst = prm.y_as<T>() + n * prm.y_sn + ch * prm.y_sk + (c.oy0 + oy) * prm.y_sp + q * prm.y_sq;
    // The bias is read once per run: through a pointer it would be re-read after every store to y.
    const float bias = prm.bias ? __ldg(prm.bias + ch) : 0.0f;
    // The common case, without branches per output; SiLU takes the general path (Note [fused silu]).
    if (oy + RUN <= c.out_rows && prm.beta == 0.0f && prm.activation != kActivationSiLU) {
#pragma unroll
      for (int j = 0; j < RUN; ++j) {
        const float v = fmaf(prm.alpha, acc[j], bias);
        dst[j * prm.y_sp] = from_float<T>(activate<ActivationSet::NoSiLU>(v, prm.activation));
      }
    } else {
#pragma unroll
      for (int j = 0; j < RUN; ++j)
        if (oy + j < c.out_rows) {
          const float old = prm.beta != 0.0f ? to_float(dst[j * prm.y_sp]) : 0.0f;
          dst[j * prm.y_sp] = from_float<T>(
              epilogue_value<ActivationSet::Any>(prm.alpha, acc[j], prm.beta, &old, bias, prm.activation));
        }
    }
  }
}

/// T: storage type of x, w and y; K: square filter size; RUN: output rows per thread; SH: vertical
/// stride; VB: bytes per copy (16, 4, or 2 for one 2-byte element); MIN_BLOCKS: resident blocks per
/// SM the register allocation must allow; PAIR_ODD: -1, or the parity of paired reads
/// (compute_planes). One block per chunk.
template <class T, int K, int RUN, int SH, int VB, int THREADS, int MIN_BLOCKS, int PAIR_ODD>
__global__ void __launch_bounds__(THREADS, MIN_BLOCKS) single_channel_planes_kernel(const PlaneStreamParams prm) {
  detail::wait_then_allow_dependent_grids();  // Note [dependent launch]
  extern __shared__ __align__(16) unsigned char smem_bytes[];
  T* smem = reinterpret_cast<T*>(smem_bytes);
  // (Copying and computing the planes in two halves, the first computing while the second is in
  // flight, measured 1.1-1.2x slower on the 7x7/14x14 layers: twice the barriers, same item passes.)
  const PlaneChunk c = plane_chunk<SH>(prm, blockIdx.x);
  copy_filters<T, K, THREADS>(prm, c, smem);
  copy_planes<T, VB, THREADS>(prm, c, smem, 0, c.nplanes);
  detail::cp_async_commit();
  // The padding is zeroed while the copies are in flight (zeroing the whole buffer first delayed
  // every copy by the zero fill).
  zero_padding<T, VB, THREADS>(prm, c, smem);
  detail::cp_async_wait<0>();
  __syncthreads();
  compute_planes<T, K, RUN, SH, THREADS, PAIR_ODD>(prm, c, smem, 0, c.nplanes);
}

}  // namespace mconv::cuda
