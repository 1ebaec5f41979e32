// The bulk plane-stream kernel of the single-channel family (Note [plane bulk] in
// planner.hpp): depthwise layers (one channel, one filter per group) whose
// planes or rows lie contiguous in x, in fp32, fp16 or bf16 storage (T, kept in shared memory) with
// fp32 arithmetic. A block's chunk (whole planes, or a band of rows of one plane) is one contiguous
// range of x, so:
//   1. one thread moves it into shared memory with one bulk copy (Hopper's copy engine), unpadded,
//      while the first warp copies the at most 2 x (16 bytes - 1 element) outside its
//      16-byte-aligned middle;
//   2. each thread computes a segment of SEG outputs of one output row: for each filter row it
//      reads the SPAN input values the segment needs and adds each into every output that uses it
//      (at stride 2 as pairs where the rows start on even elements);
//   3. padding is not in shared memory: a row outside the map reads a row of zeros, and a column
//      outside its row is replaced by 0 (a select), so there is no zero fill and no per-element
//      index split in the copies, which were most of the plane-stream kernel's instructions.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../common/bulk_copy.cuh"
#include "../common/conv_geometry.cuh"
#include "../common/cp_async.cuh"
#include "../common/dependent_launch.cuh"
#include "../common/epilogue.cuh"
#include "../common/fast_divmod.cuh"
#include "../common/storage.cuh"
#include "plane_order.cuh"
#include "planner.hpp"

namespace mconv::cuda {

// x rows are contiguous and packed (x_sw == 1, x_sh == W); y_sq == 1; the filter is square (K x K),
// undilated; stride_h == stride_w. Lengths in shared memory are in elements of T.
struct PlaneBulkParams : ConvGeometry, StoragePointers, PlaneOrder {
  int planes_per_chunk;   // > 1 only with whole planes, which then lie H * W elements apart
  int rows_per_chunk;     // output rows of a chunk: a band, or P with whole planes
  FastDivmod bands;       // ceil(P / rows_per_chunk)
  FastDivmod chunk_runs;  // runs of RUN output rows per chunk row set: ceil(rows_per_chunk / RUN)
  FastDivmod segments;    // segments of SEG outputs per output row: ceil(Q / SEG)
  int in_elements;        // room for one chunk's inputs: its elements + a vector - 1 (alignment)
  int out_elements;       // room for one chunk's outputs: the same
  int chunks;             // ceil(planes / planes_per_chunk) * bands
  bool late_second_copy;  // chunks < 2 x blocks: a block's second copy waits for its first to land
};

// The shared-memory layout's constants come from the planner, which sizes it.
using ::mconv::detail::kPlaneBulkGuard;
using ::mconv::detail::kPlaneBulkStages;

/// Elements of T in 16 bytes (the bulk copies' unit), and the threads that move a range's ends: one
/// for the middle, then one per element of a partial vector at either end.
template <class T>
constexpr int bulk_vector() {
  return 16 / static_cast<int>(sizeof(T));
}
template <class T>
constexpr int bulk_copy_threads() {
  return 2 * bulk_vector<T>() - 1;
}

/// Where chunk `chunk` lies: its planes, output rows, the contiguous range of x it reads and the
/// contiguous range of y it writes.
template <class T>
struct BulkChunk : PlaneBand {
  int iy_lo, iy_hi, count;  // input rows [iy_lo, iy_hi) are in the copy
  const T* src;
  int off;  // src's element offset from a 16-byte boundary: src[i] lands at buf[off + i], so the
            // aligned middle of the range lands on 16-byte boundaries of shared memory
  T* dst;
  int dst_off, out_count;  // the same for y: output i of the chunk sits at out[dst_off + i]
};

/// The element offset of `p` from the 16-byte boundary at or before it.
template <class T>
__device__ __forceinline__ int offset_in_vector(const T* p) {
  return static_cast<int>((reinterpret_cast<uintptr_t>(p) / sizeof(T)) & (bulk_vector<T>() - 1));
}

template <class T, int K, int ST>
__device__ __forceinline__ BulkChunk<T> bulk_chunk(const PlaneBulkParams& prm, int chunk) {
  BulkChunk<T> c;
  static_cast<PlaneBand&>(c) = plane_band(prm, prm.bands, chunk, prm.planes_per_chunk, prm.rows_per_chunk, prm.P);
  c.iy_lo = 0;
  c.iy_hi = prm.H;
  c.count = c.nplanes * prm.H * prm.W;  // whole planes
  if (c.nplanes == 1) {                 // a band: the input rows its outputs read, inside the map
    c.iy_lo = max(window_origin(c.oy0, ST, prm.pad_h), 0);
    c.iy_hi = min(window_origin(c.oy0 + c.out_rows - 1, ST, prm.pad_h) + K, prm.H);
    c.count = (c.iy_hi - c.iy_lo) * prm.W;
  }
  unsigned n0, c0;
  plane_coords(prm, c.g0, n0, c0);
  c.src = prm.x_as<T>() + n0 * prm.x_sn + c0 * prm.x_sc + static_cast<long long>(c.iy_lo) * prm.W;
  c.off = offset_in_vector(c.src);
  c.dst = prm.y_as<T>() + n0 * prm.y_sn + c0 * prm.y_sk + static_cast<long long>(c.oy0) * prm.Q;
  c.dst_off = offset_in_vector(c.dst);
  c.out_count = c.nplanes * c.out_rows * prm.Q;
  return c;
}

/// Starts the copy of chunk `c` into `buf` (by threads below bulk_copy_threads<T>()): thread 0 moves
/// the 16-byte-aligned middle with one bulk copy counted on `landed`; threads 1.. move the elements of
/// the partial vectors at its ends, fp32 ones with cp.async (the caller waits for those with
/// cp_async_wait before its next __syncthreads()), 2-byte ones through registers. READ_ONCE: the
/// bulk copy reads with an L2 evict-first policy (Note [bulk read-once inputs]).
template <class T, bool READ_ONCE>
__device__ __forceinline__ void start_chunk_copy(const BulkChunk<T>& c, T* buf, uint64_t* landed) {
  constexpr int E = bulk_vector<T>();
  const int head = min((E - c.off) & (E - 1), c.count);
  const int middle = (c.count - head) & ~(E - 1);
  const int t = threadIdx.x;
  if (t == 0) {
    const unsigned bytes = static_cast<unsigned>(middle) * sizeof(T);
    detail::mbarrier_arrive_expect_bytes(landed, bytes);
    if (middle > 0) {
      if constexpr (READ_ONCE)
        detail::bulk_copy_to_shared(buf + c.off + head, c.src + head, bytes, landed, detail::l2_evict_first_policy());
      else
        detail::bulk_copy_to_shared(buf + c.off + head, c.src + head, bytes, landed);
    }
  } else if (t < bulk_copy_threads<T>()) {
    const int i = t < E ? t - 1 : head + middle + t - E;
    if (t < E ? i < head : i < c.count) {
      if constexpr (sizeof(T) == 4)
        detail::cp_async_f32(buf + c.off + i, c.src + i, true);
      else
        buf[c.off + i] = c.src[i];
    }
    if constexpr (sizeof(T) == 4) detail::cp_async_commit();
  }
}

/// Writes chunk `c`'s outputs from `out` (after a __syncthreads() that follows every thread's
/// fence_shared_for_bulk_copy): thread 0 the 16-byte-aligned middle with one bulk store, threads 1..
/// the elements of the partial vectors at its ends.
template <class T>
__device__ __forceinline__ void store_chunk_outputs(const BulkChunk<T>& c, const T* out) {
  constexpr int E = bulk_vector<T>();
  const int head = min((E - c.dst_off) & (E - 1), c.out_count);
  const int middle = (c.out_count - head) & ~(E - 1);
  const int t = threadIdx.x;
  if (t == 0) {
    if (middle > 0) {
      detail::bulk_copy_to_global(c.dst + head, out + c.dst_off + head, static_cast<unsigned>(middle) * sizeof(T));
      detail::bulk_commit();
    }
  } else if (t < bulk_copy_threads<T>()) {
    const int i = t < E ? t - 1 : head + middle + t - E;
    if (t < E ? i < head : i < c.out_count) c.dst[i] = out[c.dst_off + i];
  }
}

/// Two neighbouring elements read as one word (fp32: 8 bytes, 2-byte dtypes: 4), both in fp32.
template <class T>
__device__ __forceinline__ void read_pair(const T* p, float& a, float& b) {
  if constexpr (sizeof(T) == 4) {
    const float2 two = *reinterpret_cast<const float2*>(p);
    a = two.x;
    b = two.y;
  } else {
    using Pair = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;
    const Pair two = *reinterpret_cast<const Pair*>(p);
    a = to_float(two.x);
    b = to_float(two.y);
  }
}

// Note [bulk whole rows]
// Padding is not in shared memory, so an item replaces the values of columns outside the row by 0,
// one select per value read (9 per input row for 7 outputs of a 3x3 filter). Where a row is one
// segment with "same" padding (stride 1, W = Q = SEG, pad_w = (K - 1) / 2: MobileNet's 7x7 maps),
// which values lie outside is known at compile time: they are neither read nor multiplied. On the
// H100, c960_h7_s1 7.2-7.3 -> 6.9-7.1 us. Selects kept only at a row's two ends on wider maps of
// whole segments made c576_h14_s1 slower (13.0 -> 13.3 us) and the others no faster: not kept.

/// One thread item: RUN x SEG outputs (RUN output rows of a segment of SEG columns) of one plane,
/// and that plane's filter. The RUN rows share their input rows: (RUN - 1) * ST + K rows are read
/// for RUN * K row reads' worth of FMAs.
template <class T, int K, int ST, int SEG, int RUN, bool SILU>
struct BulkItem {
  int pl, oy, q0;
  unsigned ch;
  float wr[K * K];

  __device__ __forceinline__ void start(const PlaneBulkParams& prm, const BulkChunk<T>& c, int it) {
    unsigned rest, seg, p, run;
    prm.segments.divmod(it, rest, seg);
    prm.chunk_runs.divmod(rest, p, run);  // a band has one plane: p = 0, run = rest
    pl = static_cast<int>(p);
    oy = c.oy0 + static_cast<int>(run) * RUN;
    q0 = static_cast<int>(seg) * SEG;
    unsigned n;
    plane_coords(prm, c.g0 + p, n, ch);
    // A true convolution turns the filter both ways: its taps are read from the last, stepping
    // backwards. (Swapping the loaded registers instead made every item wait for its filter before it
    // waited for its chunk: ncu on the H100 sampled the most stalls there after the chunk wait.)
    const T* w = prm.w_as<T>() + ch * prm.w_sk;
    long long sr = prm.w_sr, ss = prm.w_ss;
    if (prm.flip) {
      w += (K - 1) * (sr + ss);
      sr = -sr;
      ss = -ss;
    }
#pragma unroll
    for (int r = 0; r < K; ++r)
#pragma unroll
      for (int s = 0; s < K; ++s) wr[r * K + s] = to_float(__ldg(w + r * sr + s * ss));
  }

  /// For each input row of the run, the SPAN input values of the segment (0 outside the map) added
  /// into `acc` for every output that uses them. PAIRS: the values are read as pairs from the even
  /// column at or before the first (D = 1 when that first column is odd), so `row` - D must be
  /// aligned for two elements (Note [bulk stride-2 pairs] in planner.hpp). WHOLE: the
  /// segment is the whole row with "same" padding (Note [bulk whole rows]).
  template <bool PAIRS, int D, bool WHOLE = false>
  __device__ __forceinline__ void accumulate(const PlaneBulkParams& prm, const BulkChunk<T>& c, const T* buf,
                                             const T* zeros, float (&acc)[RUN][SEG]) const {
    constexpr int SPAN = (SEG - 1) * ST + K, ROWS = (RUN - 1) * ST + K;
    constexpr int READ = PAIRS ? (SPAN + D + 1) / 2 * 2 : SPAN;  // elements read per row, from column -D
    static_assert(READ <= kPlaneBulkGuard, "the zero row and the slack cover a row's reads");
    static_assert(!WHOLE || (ST == 1 && !PAIRS), "whole rows are read at stride 1, 4 bytes at a time");
    constexpr int LEFT = (K - 1) / 2;                  // WHOLE: values [LEFT, LEFT + SEG) are the row
    const int ix0 = window_origin(q0, ST, prm.pad_w);  // input column of the segment's first value
    bool col_in[SPAN];
#pragma unroll
    for (int t = 0; t < SPAN; ++t)
      col_in[t] = WHOLE ? t >= LEFT && t < LEFT + SEG : static_cast<unsigned>(ix0 + t) < static_cast<unsigned>(prm.W);
    const T* plane = buf + c.off + pl * prm.H * prm.W + ix0 - D;
#pragma unroll
    for (int i = 0; i < ROWS; ++i) {
      // Rows outside the chunk's copy (outside the map, or under a run row past the chunk's last)
      // read the zero row.
      const int iy = window_origin(oy, ST, prm.pad_h) + i;
      const T* row = static_cast<unsigned>(iy - c.iy_lo) < static_cast<unsigned>(c.iy_hi - c.iy_lo)
                         ? plane + (iy - c.iy_lo) * prm.W
                         : zeros;
      float got[READ];
#pragma unroll
      for (int t = 0; t < READ; t += PAIRS ? 2 : 1) {
        if constexpr (PAIRS)
          read_pair(row + t, got[t], got[t + 1]);
        else
          got[t] = WHOLE && !col_in[t] ? 0.0f : to_float(row[t]);
      }
#pragma unroll
      for (int t = 0; t < SPAN; ++t) {
        if (WHOLE && !col_in[t]) continue;
        const float v = WHOLE || col_in[t] ? got[t + D] : 0.0f;
#pragma unroll
        for (int u = 0; u < RUN; ++u) {
          const int r = i - u * ST;  // filter row that input row i meets for run row u
          if (r < 0 || r >= K) continue;
#pragma unroll
          for (int j = 0; j < SEG; ++j) {
            const int s = t - j * ST;  // filter column that read t meets for output j
            if (s >= 0 && s < K) acc[u][j] = fmaf(v, wr[r * K + s], acc[u][j]);
          }
        }
      }
    }
  }

  /// The item's outputs (accumulate), then the epilogue into the chunk's output buffer `out`.
  __device__ __forceinline__ void compute(const PlaneBulkParams& prm, const BulkChunk<T>& c, const T* buf,
                                          const T* zeros, T* out) const {
    float acc[RUN][SEG];
#pragma unroll
    for (int u = 0; u < RUN; ++u)
#pragma unroll
      for (int j = 0; j < SEG; ++j) acc[u][j] = 0.0f;
    // Stride 2 reads pairs where every row starts on an even element: W even and the chunk's copy
    // placed at an even offset (its source aligned for two elements), the same for every item of
    // the chunk.
    bool pairs = false;
    if constexpr (ST == 2) {
      pairs = (prm.W & 1) == 0 && (c.off & 1) == 0;
      if (pairs && (prm.pad_w & 1))  // the first column q0 * 2 - pad_w is odd for every segment
        accumulate<true, 1>(prm, c, buf, zeros, acc);
      else if (pairs)
        accumulate<true, 0>(prm, c, buf, zeros, acc);
    }
    if constexpr (ST == 1) {
      if (prm.W == SEG && prm.Q == SEG && prm.pad_w == (K - 1) / 2)  // Note [bulk whole rows]
        accumulate<false, 0, true>(prm, c, buf, zeros, acc);
      else
        accumulate<false, 0>(prm, c, buf, zeros, acc);
    } else if (!pairs) {
      accumulate<false, 0>(prm, c, buf, zeros, acc);
    }
    const float bias = prm.bias ? __ldg(prm.bias + ch) : 0.0f;  // fp32 in every dtype
    const int end_row = c.oy0 + c.out_rows;
#pragma unroll
    for (int u = 0; u < RUN; ++u) {
      if (oy + u >= end_row) break;                                   // a run row past the chunk's last
      const int o = (pl * c.out_rows + oy + u - c.oy0) * prm.Q + q0;  // the segment's first output in the chunk
      T* dst = out + c.dst_off + o;
      if (q0 + SEG <= prm.Q && prm.beta == 0.0f) {  // the common case, without branches per output
        // (At stride 1, one loop per ReLU setting: a ReLU inside the loop issued its max for every
        // output, under a false predicate when there was none. At stride 2 the second loop cost spills.)
        if (ST == 2 || SILU || prm.activation) {
#pragma unroll
          for (int j = 0; j < SEG; ++j) {
            const float v = fmaf(prm.alpha, acc[u][j], bias);
            dst[j] = from_float<T>(activate<kActivationsOf<SILU>>(v, prm.activation));
          }
        } else {
#pragma unroll
          for (int j = 0; j < SEG; ++j) dst[j] = from_float<T>(fmaf(prm.alpha, acc[u][j], bias));
        }
      } else {
#pragma unroll
        for (int j = 0; j < SEG; ++j)
          if (q0 + j < prm.Q) {
            const float old = prm.beta != 0.0f ? to_float(c.dst[o + j]) : 0.0f;
            dst[j] = from_float<T>(
                epilogue_value<kActivationsOf<SILU>>(prm.alpha, acc[u][j], prm.beta, &old, bias, prm.activation));
          }
      }
    }
  }
};

/// T: storage type of x, w and y; K: square filter size; ST: stride (both directions); SEG x RUN:
/// outputs per thread item (RUN rows
/// of a segment of SEG columns); MIN_BLOCKS: resident blocks per SM the register allocation must allow; READ_ONCE:
/// chunks of whole planes, x read with an evict-first policy (Note [bulk read-once inputs]; a template constant,
/// since a runtime flag cost the stride-2 variant 8 bytes more of spills). A block walks chunks blockIdx.x,
/// + gridDim.x, ... through kPlaneBulkStages buffers.
template <class T, int K, int ST, int SEG, int RUN, int THREADS, int MIN_BLOCKS, bool READ_ONCE, bool SILU>
__global__ void __launch_bounds__(THREADS, MIN_BLOCKS) single_channel_bulk_kernel(const PlaneBulkParams prm) {
  // Note [dependent launch]: one resident wave; its dependents go at its exit.
  detail::wait_for_prerequisite_grids();
  static_assert((SEG - 1) * ST + K <= kPlaneBulkGuard, "the slack must cover a segment's reads");
  constexpr int G = kPlaneBulkGuard, E = bulk_vector<T>(), COPIERS = bulk_copy_threads<T>();
  static_assert(G % E == 0 && G / E <= THREADS, "the zero row is whole 16-byte vectors, one a thread");
  // [zeros G][stage 0][stage 1], a stage = [slack G][inputs][slack G][outputs]
  extern __shared__ __align__(16) unsigned char smem_bytes[];
  T* smem = reinterpret_cast<T*>(smem_bytes);
  __shared__ uint64_t landed[kPlaneBulkStages];
  static_assert(sizeof(landed) == ::mconv::detail::kPlaneBulkBarrierBytes, "the planner counts these bytes");
  const T* zeros = smem;
  const int stage_elements =
      static_cast<int>(::mconv::detail::plane_bulk_stage_elements(prm.in_elements, prm.out_elements, E));
  auto stage = [&](int s) { return smem + G + s * stage_elements + G; };
  auto outputs = [&](int s) { return stage(s) + (prm.in_elements + E - 1) / E * E + G; };

  const int chunks = static_cast<int>(prm.chunks), step = static_cast<int>(gridDim.x);
  // The first chunks' copies go out before any other work: most blocks of a small layer have one
  // chunk, and the copy is their critical path. (Issued by thread 0 right after its own
  // initialisation, without this barrier, compute-sanitizer's racecheck reports the init and the
  // arrive as a hazard.) The copies of an SM's blocks land one after another, so where some blocks
  // have no second chunk, the second chunks are copied once their block's first has landed: every
  // block's first copy is then ahead of them in the queue.
  static_assert(kPlaneBulkStages == 2, "the late copy is the second stage's");
  if (threadIdx.x == 0)
    for (int s = 0; s < kPlaneBulkStages; ++s) detail::mbarrier_init(&landed[s]);
  __syncthreads();
  const int early_stages = prm.late_second_copy ? 1 : kPlaneBulkStages;
  for (int s = 0; s < early_stages; ++s) {
    const int chunk = blockIdx.x + s * step;
    if (chunk < chunks && threadIdx.x < COPIERS)
      start_chunk_copy<T, READ_ONCE>(bulk_chunk<T, K, ST>(prm, chunk), stage(s), &landed[s]);
  }
  // Only the zero row needs zeros: reads of the slack and of the alignment elements around a chunk are
  // columns outside their row, which the compute replaces by 0 (a select, so not even a NaN left in
  // shared memory gets through). Zeroing both stages whole delayed every block's first copy.
  if (threadIdx.x < G / E) reinterpret_cast<uint4*>(smem)[threadIdx.x] = make_uint4(0, 0, 0, 0);
  detail::cp_async_wait<0>();
  __syncthreads();  // the zero row and the first chunks' ends are visible

  const int segs = static_cast<int>(prm.segments.divisor);
  int k = 0;
  for (int chunk = blockIdx.x; chunk < chunks; chunk += step, ++k) {
    const int s = k % kPlaneBulkStages;
    const BulkChunk<T> c = bulk_chunk<T, K, ST>(prm, chunk);
    const int items = c.nplanes * ((c.out_rows + RUN - 1) / RUN) * segs;
    int it = threadIdx.x;
    BulkItem<T, K, ST, SEG, RUN, SILU> item;
    if (it < items) item.start(prm, c, it);  // the filter loads overlap the copy
    detail::mbarrier_wait(&landed[s], (k / kPlaneBulkStages) & 1);
    if (k == 0 && early_stages == 1 && threadIdx.x < COPIERS && chunk + step < chunks)  // the late copy
      start_chunk_copy<T, READ_ONCE>(bulk_chunk<T, K, ST>(prm, chunk + step), stage(1), &landed[1]);
    while (it < items) {
      item.compute(prm, c, stage(s), zeros, outputs(s));
      it += THREADS;
      if (it < items) item.start(prm, c, it);
    }
    detail::fence_shared_for_bulk_copy();               // the outputs, for the bulk store
    detail::cp_async_wait<0>();                         // the ends of the next chunk, started a chunk ago
    if (threadIdx.x == 0) detail::bulk_wait_read<0>();  // the other stage's outputs are out of shared memory
    __syncthreads();              // stage s's inputs are free, its outputs complete; those ends are visible
    if (threadIdx.x < COPIERS) {  // the copies are the first warp's: the others go straight on
      // (Located again rather than kept: c's copy fields, live across the items, made the stride-2
      // variants spill.)
      store_chunk_outputs<T>(bulk_chunk<T, K, ST>(prm, chunk), outputs(s));
      const int next = chunk + kPlaneBulkStages * step;
      if (next < chunks) start_chunk_copy<T, READ_ONCE>(bulk_chunk<T, K, ST>(prm, next), stage(s), &landed[s]);
    }
  }
  // Shared memory stays until the last store has read it; the writes themselves complete with the grid.
  if (threadIdx.x == 0) detail::bulk_wait_read<0>();
}

}  // namespace mconv::cuda
