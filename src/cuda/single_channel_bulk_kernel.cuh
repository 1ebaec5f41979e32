// The bulk plane-stream kernel of the single-channel family (Note [plane bulk] in
// src/plan/single_channel_planner.hpp): depthwise layers (one channel, one filter per group) whose
// planes or rows lie contiguous in x. A block's chunk (whole planes, or a band of rows of one plane)
// is one contiguous range of x, so:
//   1. one thread moves it into shared memory with one bulk copy (Hopper's copy engine), unpadded,
//      while the block's threads copy the at most 3 + 3 floats outside its 16-byte-aligned middle;
//   2. each thread computes a segment of SEG outputs of one output row: for each filter row it
//      reads the SPAN input values the segment needs and adds each into every output that uses it;
//   3. padding is not in shared memory: a row outside the map reads a row of zeros, and a column
//      outside its row is replaced by 0 (a select), so there is no zero fill and no per-element
//      index split in the copies, which were most of the plane-stream kernel's instructions.
#pragma once

#include <cstdint>

#include "bulk_copy.cuh"
#include "conv_geometry.cuh"
#include "epilogue.cuh"
#include "fast_divmod.cuh"
#include "plane_order.cuh"

namespace mconv::cuda {

// x rows are contiguous and packed (x_sw == 1, x_sh == W); y_sq == 1; the filter is square (K x K),
// undilated; stride_h == stride_w.
struct PlaneBulkParams : ConvGeometry {
  int planes;             // N * G, numbered in x's memory order:
  int inner_is_c;         //   1: plane = n * G + c (NCHW-like); 0: plane = c * N + n (CNHW-like)
  FastDivmod inner;       //   G or N
  int planes_per_chunk;   // > 1 only with whole planes, which then lie H * W floats apart
  int rows_per_chunk;     // output rows of a chunk: a band, or P with whole planes
  FastDivmod bands;       // ceil(P / rows_per_chunk)
  FastDivmod chunk_rows;  // rows_per_chunk, to split an item index
  FastDivmod segments;    // segments of SEG outputs per output row: ceil(Q / SEG)
  int buffer_floats;      // room for one chunk: its floats + 3 (alignment)
};

/// Shared floats around the chunk: a row of zeros, and slack on both sides of the chunk that the
/// column reads outside a row may touch (their values are replaced by 0). A multiple of 4 floats, so
/// the chunk keeps its 16-byte alignment, and at least any SPAN.
inline constexpr int kPlaneBulkGuard = 32;

/// K: square filter size; ST: stride (both directions); SEG: outputs per thread item (a row
/// segment); MIN_BLOCKS: resident blocks per SM the register allocation must allow. One block per chunk.
template <int K, int ST, int SEG, int THREADS, int MIN_BLOCKS>
__global__ void __launch_bounds__(THREADS, MIN_BLOCKS) single_channel_bulk_kernel(const PlaneBulkParams prm) {
  constexpr int SPAN = (SEG - 1) * ST + K;  // input columns of one segment
  static_assert(SPAN <= kPlaneBulkGuard, "the slack must cover a segment's reads");
  constexpr int G = kPlaneBulkGuard;
  extern __shared__ __align__(16) float smem[];  // [zeros G][slack G][chunk buffer_floats][slack G]
  __shared__ uint64_t landed;
  float* zeros = smem;
  float* buf = smem + 2 * G;

  // Where the chunk lies.
  unsigned plane_block, band;
  prm.bands.divmod(blockIdx.x, plane_block, band);
  const unsigned g0 = plane_block * prm.planes_per_chunk;
  const int nplanes = min(prm.planes_per_chunk, prm.planes - static_cast<int>(g0));
  const int oy0 = band * prm.rows_per_chunk;
  const int out_rows = min(prm.rows_per_chunk, prm.P - oy0);
  const int plane_floats = prm.H * prm.W;
  int iy_lo = 0, count = nplanes * plane_floats;  // whole planes
  if (nplanes == 1) {                             // a band: the input rows its outputs read, inside the map
    iy_lo = max(oy0 * ST - prm.pad_h, 0);
    const int iy_hi = min((oy0 + out_rows - 1) * ST - prm.pad_h + K, prm.H);
    count = (iy_hi - iy_lo) * prm.W;
  }
  unsigned n0, c0;
  plane_coords(prm, g0, n0, c0);
  const float* src = prm.x + n0 * prm.x_sn + c0 * prm.x_sc + static_cast<long long>(iy_lo) * prm.W;
  // src[i] lands at buf[off + i], off = src's float offset from a 16-byte boundary: the aligned middle
  // of the range then lands on 16-byte boundaries of shared memory, as the bulk copy requires.
  const int off = static_cast<int>((reinterpret_cast<uintptr_t>(src) >> 2) & 3);
  const int head = min((4 - off) & 3, count);
  const int middle = (count - head) & ~3;

  if (threadIdx.x == 0) {
    detail::mbarrier_init(&landed);
    detail::mbarrier_arrive_expect_bytes(&landed, static_cast<unsigned>(middle) * 4);
    if (middle > 0)
      detail::bulk_copy_to_shared(buf + off + head, src + head, static_cast<unsigned>(middle) * 4, &landed);
  }
  for (int i = threadIdx.x; i < G; i += THREADS) {
    zeros[i] = 0.0f;
    buf[i - G] = 0.0f;
    buf[off + count + i] = 0.0f;
  }
  if (threadIdx.x < 4) {
    const int i = threadIdx.x;
    if (i < head) buf[off + i] = __ldg(src + i);
  } else if (threadIdx.x < 8) {
    const int i = head + middle + threadIdx.x - 4;
    if (i < count) buf[off + i] = __ldg(src + i);
  }
  __syncthreads();  // the barrier is initialised; zeros, head and tail are visible
  detail::mbarrier_wait(&landed, 0);

  const int segs = static_cast<int>(prm.segments.divisor);
  const int items = nplanes * out_rows * segs;
  for (int it = threadIdx.x; it < items; it += THREADS) {
    unsigned rest, seg, pl, orow;
    prm.segments.divmod(it, rest, seg);
    prm.chunk_rows.divmod(rest, pl, orow);  // a band has one plane: pl = 0, orow = rest
    const int oy = oy0 + static_cast<int>(orow), q0 = static_cast<int>(seg) * SEG;
    unsigned n, ch;
    plane_coords(prm, g0 + pl, n, ch);
    float wr[K * K];
#pragma unroll
    for (int r = 0; r < K; ++r)
#pragma unroll
      for (int s = 0; s < K; ++s) {
        const int fr = prm.flip ? K - 1 - r : r, fs = prm.flip ? K - 1 - s : s;
        wr[r * K + s] = __ldg(prm.w + ch * prm.w_sk + fr * prm.w_sr + fs * prm.w_ss);
      }
    const int ix0 = q0 * ST - prm.pad_w;  // input column of the segment's first read
    bool col_in[SPAN];
#pragma unroll
    for (int t = 0; t < SPAN; ++t) col_in[t] = static_cast<unsigned>(ix0 + t) < static_cast<unsigned>(prm.W);
    const float* plane = buf + off + static_cast<int>(pl) * plane_floats + ix0;
    float acc[SEG];
#pragma unroll
    for (int j = 0; j < SEG; ++j) acc[j] = 0.0f;
#pragma unroll
    for (int r = 0; r < K; ++r) {
      const int iy = oy * ST - prm.pad_h + r;
      const float* row =
          static_cast<unsigned>(iy) < static_cast<unsigned>(prm.H) ? plane + (iy - iy_lo) * prm.W : zeros;
#pragma unroll
      for (int t = 0; t < SPAN; ++t) {
        const float v = col_in[t] ? row[t] : 0.0f;
#pragma unroll
        for (int j = 0; j < SEG; ++j) {
          const int s = t - j * ST;  // filter column that read t meets for output j
          if (s >= 0 && s < K) acc[j] = fmaf(v, wr[r * K + s], acc[j]);
        }
      }
    }
    float* dst = prm.y + n * prm.y_sn + ch * prm.y_sk + oy * prm.y_sp + q0;
    const float bias = prm.bias ? __ldg(prm.bias + ch) : 0.0f;
    if (q0 + SEG <= prm.Q && prm.beta == 0.0f) {  // the common case, without branches per output
#pragma unroll
      for (int j = 0; j < SEG; ++j) {
        const float v = fmaf(prm.alpha, acc[j], bias);
        dst[j] = prm.relu ? fmaxf(v, 0.0f) : v;
      }
    } else {
#pragma unroll
      for (int j = 0; j < SEG; ++j)
        if (q0 + j < prm.Q) dst[j] = epilogue_value(prm.alpha, acc[j], prm.beta, dst + j, bias, prm.relu);
    }
  }
}

}  // namespace mconv::cuda
