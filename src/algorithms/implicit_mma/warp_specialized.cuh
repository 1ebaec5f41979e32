// The warp-specialized form of the wgmma tiles (sm_90a): a producer warpgroup loading stages through
// tensor maps and two consumer warpgroups, on alternate tiles (ping-pong) or sharing each tile
// (cooperative).
//
// Note [wgmma warp-specialized tiles]: in the other tensor-map forms (Note [wgmma tensor-map loads],
// [wgmma persistent tiles]) the thread that refills the stages is also a consumer, and a stage is
// refilled only after a block barrier that every warp reaches once its wgmma groups are done, so a
// block multiplies, waits and stores in turn; ncu put a third of the stall cycles at that barrier.
// Here the roles are split, as CUTLASS's Hopper warp-specialized GEMMs split them. One block an SM
// of three warpgroups. The register file is split among an SM's four sub-partitions, so a warp
// beside eight others would cap every thread at 168 registers (a 128x128 tile's 128 accumulators
// spilled); a whole producer warpgroup instead hands its registers to the consumers (setmaxnreg: 40
// for it, 232 for them):
// - one thread of the producer warpgroup walks every row tile of the block's tiles (b, b + grid, ...,
//   filter tiles fastest) and issues each stage's copies as soon as the stage is free: it waits on
//   the stage's `freed` barrier, never on the consumers' progress otherwise, so it runs as far ahead
//   as the stages allow (as many as fit beside the output buffers, at most 8), across tiles;
// - a consumer waits for a stage's copies, issues its wgmma k-steps, and keeps one wgmma group in
//   flight: once the previous stage's group is done, each of its four warps arrives on that stage's
//   `freed` barrier. After its last stage it waits for every group and runs the epilogue (alpha,
//   bias, beta, ReLU) into its own output buffer, which leaves as tensor-map stores of y, as in the
//   persistent form.
// The two consumer schedules:
// - ping-pong: the warpgroups take the block's tiles in turn (warpgroup 0 the even ones, 1 the odd
//   ones), each a whole tile (64 or 128 pixels: one or two wgmma row blocks a k-step), so one
//   multiplies while the other finishes and stores. A warpgroup starts its tile once the other has
//   waited for every stage of the block's previous tile and issued its last wgmma (the `turn`
//   barriers). That order also keeps the stage barriers' phases unambiguous: stage u of the block
//   (its k_tiles row tiles per tile, in order) is stage u % S, its copies land in phase (u / S) & 1
//   of `landed[u % S]`, and a parity names one phase only while the phase before it has completed,
//   which the turn guarantees for the other warpgroup's stages. `freed` counts four warps.
// - cooperative (128-pixel tiles): both warpgroups take every tile, warpgroup w its pixels
//   64w..64w+63 over all the tile's filters, and store their halves on their own. A block of one
//   tile (late layers, fewer tiles than SMs) then keeps both warpgroups multiplying where ping-pong
//   leaves one idle. Both read every stage, so `freed` counts eight warps, and the producer cannot
//   refill a stage before the slower warpgroup is done with it: neither runs a whole ring ahead of
//   the other, and every parity it waits on names one phase.
// A cooperative tile may also split its row tiles among the `splits` blocks of a cluster along z
// (grids of few tiles: more SMs on each, as the plain form's cluster split; Note [mma cluster
// split]). Block r walks the same tiles as its cluster's others, its slice of each tile's row tiles
// only. Each warpgroup's 64 pixels have an owner, block w % splits for warpgroup w, so that with
// two blocks each adds and stores half the tile. At a tile's end the others park their fp32 sums
// in their own output buffers and arrive on the owner's `parked` barrier with cluster-scope
// release; the owner waits with acquire, adds their sums through distributed shared memory,
// arrives on each one's `read` barrier, and runs the epilogue and the store. A block parks its next
// tile's sums only after `read` says the owner has its last ones, so every parity names one phase.
// The producer warpgroups take no part in that handshake (mbarriers, not cluster barriers, which
// would hold them up). One cluster barrier among the consumers closes the kernel, so that no block
// leaves while another still reads its shared memory: a consumer arrives right after its last
// hand-over and waits before it leaves; the producers have exited by then, and a cluster barrier
// waits for non-exited threads only. (Producers waiting at that barrier, and consumers arriving
// after their epilogue, cost the split layers 1-2 us.)
// The fill of stage u + S waits for phase (u / S) & 1 of `freed[u % S]`. Otherwise the warpgroups
// synchronise only through their own named barriers (1 and 2), never a block barrier after the
// start. Forward and stride-1 dgrad steps (vector or N-major filters), 16-bit, y dense channels-last
// with K/G whole 16-byte runs and 16-byte aligned, as for the persistent form (the launcher runs the
// plain form otherwise).
//
// Note [wgmma warp-specialized wgrad]: a wgrad step (src/plan/backward.cpp) is a GEMM whose pixels
// are x's channels at one filter tap, whose filters are dy's and whose reduction is the layer's
// N*P*Q, long, over a small output. It runs cooperative: the producer loads x M-major (im2col
// columns of 64 channels over 64 dy pixels) and dy N-major (boxes of 64 pixels x 64 filters), as the
// plain tensor-map form does (Note [wgmma tensor-map loads]), and a warpgroup's wgmma reads its 64
// channels as block wg of the M-major stage. dw (KRSC) is the step's y with the pixels contiguous
// (pixel m = (r*S + s)*C + c is dw's element m of each filter), so a warpgroup parks its 64 x BN
// tile filter-major: stmatrix.trans turns each 8x8 fragment of 8 channels x 8 filters into 8 rows of
// 8 channels (16 bytes), one row a filter, in the output buffer's 128-byte swizzle; one tensor-map
// box of 64 channels x BN filters stores it. The reduction splits two ways at once: among up to
// kCooperativeSplits blocks of a cluster (the hand-over above, deterministic), and among the
// gridDim.y groups of those (atomic groups, as Note [mma atomic slices]) whose boxes are added into
// y by the copy engine (cp.reduce.async.bulk.tensor .add, 16-bit, each element atomic) after the
// launcher's pre-pass y = beta*y. Group a's blocks take slices a*splits + rank of the row tiles.
//
// Note [wgmma wave-fitted filter tiles]: wgmma takes any multiple of 8 filters up to 256, and a late
// layer's grid of whole-64 filter tiles can fit the SMs badly: resnet50's stage-4 1x1 layers of 2048
// filters over 1568 pixels make 208 tiles of 128x128 (1.6 waves); tiles of 128x208 make 130, one a
// cooperative block of 132, each reading the bytes of 2 x 64 pixels and 208 filters a stage for
// 128 x 208 MACs. The stage holds 208 K-major filter rows, the last 64-filter block partly used.
// The output buffer holds a warpgroup's whole blocks in the 128-byte swizzle, which leave as
// tensor-map boxes, and then its last BN % 64 filters as plain rows of their own, which the
// consumer threads store as 16-byte runs (store_output_tail), since a box of 64 filters would write
// into the next tile's. Such a tile has only the unsplit cooperative form on forward layers (16-bit,
// y dense with K/G a multiple of 8); the planner runs 128x128's forms where a layer cannot take it.
// Two other widths were built and measured (docs/PERFORMANCE.md, "Wave-fitted filter tiles"):
// 64x104 (cuDNN's tile for the stage's 512-filter layer, 125 tiles on 128 blocks) ran within 2% of
// 64x128, and ping-pong 64x208 (250 tiles, two a block) lost to 128x208 on both layers it won.
#pragma once

#include <type_traits>

#include "kernel.cuh"

namespace mconv::cuda {

namespace detail {
/// Waits until the `threads` threads of named barrier `id` (1-15; 0 is __syncthreads) arrive.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
/// Sets this warpgroup's registers a thread to N (every warp of the warpgroup executes it): fewer
/// gives them back to the SM, more waits until they are free.
template <int N>
__device__ __forceinline__ void release_registers() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void claim_registers() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
}  // namespace detail

/// Note [wgmma warp-specialized wgrad]: one warp's accumulators (pixels row0..row0+15 of the
/// warpgroup's 64, from tile_m, x BN filters from tile_n) through the epilogue (alpha; without
/// atomic groups also bias, beta reading y and ReLU), rounded to 16 bits into the output buffer
/// filter-major: BN rows of 64 pixels (128 bytes) in the 128-byte swizzle. y's pixels are
/// contiguous: pixel m of filter f at f * y_sk + m.
template <class Math, int BN>
__device__ __forceinline__ void write_output_buffer_m_major(const ImplicitMmaParams& prm, const float (&d)[BN / 2],
                                                            uint32_t out_base, int row0, long long tile_m, int tile_n,
                                                            int lane, bool atomic) {
  using T = typename Math::Storage;
  const T* __restrict__ gY = static_cast<const T*>(prm.y);
  const int g = lane >> 2, t4 = lane & 3;
  // Matrix i of a store: filters (j + i/2)*8.. and pixels row0 + (i%2)*8..; lane 8i + r gives row r.
  const int i = lane >> 3, r = lane & 7;
#pragma unroll
  for (int j = 0; j < BN / 8; j += 2) {
    uint32_t packed[4];
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int f = tile_n + (j + h) * 8 + t4 * 2;
        const long long m = tile_m + row0 + g + half * 8;
        float v0 = prm.alpha * d[(j + h) * 4 + half * 2], v1 = prm.alpha * d[(j + h) * 4 + half * 2 + 1];
        if (!atomic) {
          if (prm.bias)
            v0 += f < prm.kg ? __ldg(prm.bias + f) : 0.0f, v1 += f + 1 < prm.kg ? __ldg(prm.bias + f + 1) : 0.0f;
          if (prm.beta != 0.0f && m < prm.npq) {
            if (f < prm.kg) v0 = fmaf(prm.beta, Math::to_float(gY[f * prm.y_sk + m]), v0);
            if (f + 1 < prm.kg) v1 = fmaf(prm.beta, Math::to_float(gY[(f + 1) * prm.y_sk + m]), v1);
          }
          v0 = activate(v0, prm.activation), v1 = activate(v1, prm.activation);
        }
        __align__(4) T out[2] = {Math::from_float(v0), Math::from_float(v1)};
        packed[h * 2 + half] = *reinterpret_cast<const uint32_t*>(out);
      }
    detail::store_matrices_transposed(wgmma::swizzled_chunk(out_base, (j + (i >> 1)) * 8 + r, (row0 >> 3) + (i & 1)),
                                      packed);
  }
}

// Note [wgmma tf32 stages]: TF32 (fp32 tensors in TF32 math) on these tiles, forward and stride-1
// steps with both operands K-major (wgmma reads TF32 only so). The copy engine lands fp32 stages of
// 32 channels a 128-byte row, the same bytes as a 16-bit stage, and wgmma would read their fp32
// bits and ignore the low 13, which truncates. cuDNN and cuBLAS round to nearest (on the H200 their
// TF32 outputs lie 7e-6 from the exact product of the rounded inputs and 8.7e-4 from the truncated
// ones, against 2.9e-4 from the exact result), so the consumers round every stage before they
// multiply it:
// - the filter rows in place: each thread a share of their 16-byte chunks, four loads in flight,
//   then a proxy fence and a named barrier of the warpgroups that read the stage (its own warpgroup
//   in ping-pong, both in the cooperative schedule, each rounding half); this overlaps the wgmma
//   group of the stage before;
// - the image rows in registers: each warp loads its 16 pixels' fragments with ldmatrix (wgmma's
//   register A has mma.sync's m16n8k8 layout), rounds them and multiplies them from there. A group
//   reads its registers until it is done, so cooperative warps (16 registers of fragments a stage)
//   alternate two sets, even stages and odd, and load a stage's fragments while the previous
//   stage's group runs; ping-pong warps (32 a stage beside 128 accumulators) have room for one set
//   and wait for the previous group first, the other warpgroup's tile keeping the tensor cores busy.
// Rounding the image rows in place too had them cross shared memory twice more: 1.08x slower on
// resnet50 and 1.11x on vgg16 (docs/PERFORMANCE.md). (The producer warpgroup's three idle warps
// rounding the stages ahead instead, at its 40 registers a thread, ran 1.2-1.6x slower.) y is fp32:
// the accumulators go straight to a dense channels-last y, a pair of filters (8 bytes) a store,
// through the whole epilogue (SiLU included), with no output buffer.
// Note [wgmma strided dgrad stores]: a strided layer's dgrad runs one step an output phase, each
// writing every stride-th pixel of dx (src/plan/backward.cpp), which no tensor-map box of y covers.
// On these tiles such a step (16-bit, N-major filters) stores as TF32 tiles do: each warp its
// filter pairs straight from the accumulators, at the pixel's (n, p, q) address through dx's
// strides, through the whole epilogue, with no output buffer; the launcher asks for it where y
// cannot take the tensor-map store but takes aligned pairs of filters.
//
// Note [strided dgrad pixel runs]: a pair store is 4 bytes, so a warp's store instruction writes 16
// bytes into each of 8 pixels. Under Nsight Compute a one-tap phase's tile took 2048 L1 tag
// requests for its 32 KiB of dx, the L1 busy 85% of the kernel's cycles, and a tile cost about
// 4.6 us whatever its reduction (l2_3x3s2's phases alone on a share of the SMs: 5.4, 6.2 and 7.8 us
// a tile of 2, 4 and 8 stages). Where dx takes 16-byte runs of filters (staged_store, K/G a
// multiple of 8), each warp instead writes its 16 rows of the tile into its output buffer as the
// tensor-map stores do (stmatrix, the whole epilogue, beta reading dx at the pixel's address) and
// copies those rows out itself: lane i finds row i's (n, p, q) address once, and one store
// instruction writes two pixels' filters. A warp reads back only what it wrote, so no barrier of
// the warpgroup is needed. (A first version copied the buffer by the whole warpgroup, behind a
// barrier, finding a pixel's address for every 16-byte run: instruction-bound, 3.9 us a tile.)
/// Note [wgmma tf32 stages]: rounds the 16-byte chunks reader, reader + readers, ... of the `chunks`
/// at `base` to TF32 (to nearest, ties away) in place, four loads in flight a thread.
template <int kChunks, int kReaders>
__device__ __forceinline__ void round_chunks_to_tf32(uint32_t base, int reader) {
  constexpr int kAtOnce = 4;
  for (int i0 = reader; i0 < kChunks; i0 += kAtOnce * kReaders) {
    uint32_t v[kAtOnce][4];
#pragma unroll
    for (int u = 0; u < kAtOnce; ++u)
      if (i0 + u * kReaders < kChunks) detail::lds_128(base + (i0 + u * kReaders) * 16, v[u]);
#pragma unroll
    for (int u = 0; u < kAtOnce; ++u)
      if (i0 + u * kReaders < kChunks) {
#pragma unroll
        for (int e = 0; e < 4; ++e) MmaTf32::convert_fragment(v[u][e]);
        detail::sts_128(base + (i0 + u * kReaders) * 16, v[u]);
      }
  }
}

/// Note [wgmma tf32 stages]: one warp's image fragments of the K-major swizzled TF32 stage at
/// `stage` (pixels first_row.. +15, every k-step of 8 rows), rounded in registers for wgmma's
/// register A. ldmatrix's four 8 x 16-byte matrices are pixels +0 and +8 at a k-step's floats 0-3 and
/// 4-7, so lane (g, t) receives mma.sync's TF32 layout: (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4).
/// Each matrix's eight rows sit in eight distinct chunks of the swizzle: no bank conflict.
template <class Math, int kSteps>
__device__ __forceinline__ void load_tf32_image_fragments(uint32_t (&a)[kSteps][4], uint32_t stage, int first_row,
                                                          int lane) {
  const int matrix = lane >> 3, row = first_row + (matrix & 1) * 8 + (lane & 7);
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks) {
    detail::ldmatrix_x4(a[ks], wgmma::swizzled_chunk(stage, row, 2 * ks + (matrix >> 1)));
#pragma unroll
    for (int e = 0; e < 4; ++e) Math::convert_fragment(a[ks][e]);
  }
}

/// Note [wgmma tf32 stages], Note [wgmma strided dgrad stores]: one warp's accumulators (pixels
/// first_pixel.. +15 in wgmma's fragment layout, BN filters from tile_n) through the epilogue (alpha,
/// bias, beta reading y, the activation) into a channels-last y whose filter pairs 2t, 2t+1 inside
/// K/G are each one aligned store: TF32's dense y (pixel m at m * y_sq), or with kPixelCoords a
/// dgrad phase's dx (pixel m at its (n, p, q) through y's strides).
template <class Math, int BN, bool kPixelCoords>
__device__ __forceinline__ void store_accumulator_pairs(const ImplicitMmaParams& prm, const float (&d)[BN / 2],
                                                        long long first_pixel, int tile_n, int lane) {
  using T = typename Math::Storage;
  using Pair = std::conditional_t<sizeof(T) == 4, float2, uint32_t>;  // two elements, one store
  T* __restrict__ gY = static_cast<T*>(prm.y);
  const int g = lane >> 2, t4 = lane & 3;
  T* pixel[2];  // pixels g and g + 8 of the 16, nullptr past N*P*Q
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const long long m = first_pixel + g + half * 8;
    pixel[half] = nullptr;
    if (m >= prm.npq) continue;
    if constexpr (kPixelCoords) {
      int n, p, q;
      pixel_coords(prm, m, n, p, q);
      pixel[half] = gY + n * prm.y_sn + p * prm.y_sp + q * prm.y_sq;
    } else {
      pixel[half] = gY + m * prm.y_sq;
    }
  }
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    const int f = tile_n + j * 8 + t4 * 2;
    if (f >= prm.kg) continue;
    const float b0 = prm.bias ? __ldg(prm.bias + f) : 0.0f, b1 = prm.bias ? __ldg(prm.bias + f + 1) : 0.0f;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      if (!pixel[half]) continue;
      Pair* dst = reinterpret_cast<Pair*>(pixel[half] + f);
      float v0 = fmaf(prm.alpha, d[j * 4 + half * 2], b0), v1 = fmaf(prm.alpha, d[j * 4 + half * 2 + 1], b1);
      if (prm.beta != 0.0f) {
        __align__(8) const Pair old = *dst;
        const T* o = reinterpret_cast<const T*>(&old);
        v0 = fmaf(prm.beta, Math::to_float(o[0]), v0), v1 = fmaf(prm.beta, Math::to_float(o[1]), v1);
      }
      __align__(8) T out[2] = {Math::from_float(activate<ActivationSet::Any>(v0, prm.activation)),
                               Math::from_float(activate<ActivationSet::Any>(v1, prm.activation))};
      *dst = *reinterpret_cast<const Pair*>(out);
    }
  }
}

/// Note [strided dgrad pixel runs]: one warp's rows of its warpgroup's output buffer (kRows pixels x
/// BN filters from tile_m, tile_n; BN / 64 blocks in the 128-byte swizzle), which that warp wrote
/// (write_output_buffer: rows mb * 64 + 16 * (warp % 4).. +15) and synchronised, out to y as 16-byte
/// runs of filters, pixel m at its (n, p, q) address through y's strides: lane i finds row i's
/// address once, and each store takes its row's from that lane; pixels past N*P*Q and runs past
/// K/G are skipped.
template <class Math, int kRows, int BN>
__device__ __forceinline__ void store_output_buffer_pixel_runs(const ImplicitMmaParams& prm, uint32_t out_base,
                                                               long long tile_m, int tile_n, int warp, int lane) {
  static_assert(BN % 64 == 0 && BN <= 256 && kRows % 64 == 0, "whole 64-filter blocks of 64-pixel row blocks");
  using T = typename Math::Storage;
  constexpr int kRuns = BN / 8;            // 16-byte runs of a pixel's filters
  constexpr int kRowsAtOnce = 32 / kRuns;  // the rows of one store instruction
  T* __restrict__ gY = static_cast<T*>(prm.y);
  const int run = lane % kRuns, f = tile_n + run * 8;
#pragma unroll
  for (int mb = 0; mb < kRows / 64; ++mb) {
    const int row0 = mb * 64 + (warp % 4) * 16;  // this warp's 16 rows
    long long pixel = -1;                        // row row0 + lane % 16's first filter in y, -1 past N*P*Q
    const long long m = tile_m + row0 + lane % 16;
    if (m < prm.npq) {
      int n, p, q;
      pixel_coords(prm, m, n, p, q);
      pixel = n * prm.y_sn + p * prm.y_sp + q * prm.y_sq;
    }
#pragma unroll
    for (int k = 0; k < 16 / kRowsAtOnce; ++k) {
      const int r = k * kRowsAtOnce + lane / kRuns;
      const long long at = __shfl_sync(0xffffffffu, pixel, r);
      uint32_t v[4];
      detail::lds_128(wgmma::swizzled_chunk(out_base + (run / 8) * kRows * wgmma::kRowBytes, row0 + r, run % 8), v);
      if (at >= 0 && f < prm.kg) *reinterpret_cast<uint4*>(gY + at + f) = make_uint4(v[0], v[1], v[2], v[3]);
    }
  }
}

template <class Tile, class Math, GatherForm kA, GatherForm kB, bool kCooperative, bool kClusterSplit = false>
__global__ void __launch_bounds__(Tile::kWarpSpecializedThreads, 1)
    implicit_mma_warp_specialized_kernel(const __grid_constant__ ImplicitMmaParams prm) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using T = typename Math::Storage;
  constexpr int BM = Tile::kBlockM, BN = Tile::kBlockN, S = Tile::kWarpSpecializedStages;
  // Note [wgmma tf32 stages]: TF32 forward and stride-1 dgrad steps of K-major operands.
  constexpr bool kTf32 = Math::kBytes == 4;
  constexpr int BK = wgmma::kRowBytes / Math::kBytes;  // reduction rows of a stage
  static_assert(
      Tile::kWarpSpecializedForm &&
          (Math::kBytes == 2 || (kA == GatherForm::Vector && kB == GatherForm::Vector && Tile::kWholeFilterBlocks)),
      "warp-specialized tiles: 16-bit, or TF32 with both operands K-major");
  static_assert(!kCooperative || BM == 128, "cooperative tiles: 64 pixels a warpgroup");
  // The split's code is a form of its own: the unsplit kernels keep the registers and the schedule
  // they were measured with.
  static_assert(!kClusterSplit || kCooperative, "cluster splits: cooperative tiles");
  // Note [wgmma warp-specialized wgrad]: M-major x and N-major dy, cooperative only.
  constexpr bool kWgrad = kA == GatherForm::Transposed;
  // Note [wgmma strided dgrad stores]: dgrad steps' N-major filters, 16-bit.
  constexpr bool kDgradForms = !kTf32 && kA == GatherForm::Vector && kB == GatherForm::Transposed;
  static_assert(kA == GatherForm::Vector || (kWgrad && kB == GatherForm::Transposed && kCooperative),
                "warp-specialized tiles: forward, dgrad or cooperative wgrad steps");
  constexpr int kConsumerThreads = 128;              // one warpgroup
  constexpr int kRows = kCooperative ? 64 : BM;      // a warpgroup's pixels of a tile
  constexpr int MB = kRows / 64;                     // its wgmma rows of 64 pixels
  constexpr int kTileStride = kCooperative ? 1 : 2;  // a warpgroup's tiles, in the block's tiles
  // Note [wgmma wave-fitted filter tiles]: forward layers, cooperative, unsplit.
  static_assert(Tile::kWholeFilterBlocks ||
                    (kCooperative && !kClusterSplit && kA == GatherForm::Vector && kB == GatherForm::Vector),
                "wave-fitted tiles: forward layers on unsplit cooperative blocks");
  constexpr uint32_t kImageBytes = BM * wgmma::kRowBytes, kOutBytes = Tile::kWarpSpecializedOutBytes / 2;
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) uint64_t landed[S], freed[S], turn[2];
  // Cluster-split cooperative tiles: per consumer warpgroup, the peers' partial sums of a tile are
  // in their shared memory (`parked`, in block 0) and block 0 has read them (`read`, in the peers).
  __shared__ __align__(8) uint64_t parked[2], read[2];
  // Note [wgmma shared layout]: stages and output buffers start on 1024-byte boundaries.
  const uint32_t base = (static_cast<uint32_t>(__cvta_generic_to_shared(smem)) + 1023u) & ~1023u;
  auto image_stage = [&](int st) { return base + st * Tile::kStageBytes; };
  auto filter_stage = [&](int st) { return base + st * Tile::kStageBytes + kImageBytes; };
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int tiles_n = (prm.kg + BN - 1) / BN;
  const long long tiles = static_cast<long long>((prm.npq + BM - 1) / BM) * tiles_n;
  const int k_tiles = (prm.rows + BK - 1) / BK;
  // Cluster-split cooperative tiles: block `rank` of the cluster takes row tiles k_first.. of each;
  // a wgrad step's atomic group blockIdx.y (Note [wgmma warp-specialized wgrad]) its slice of them.
  const int splits = kClusterSplit ? prm.splits : 1, rank = kClusterSplit ? static_cast<int>(blockIdx.z) : 0;
  const int slice = (kWgrad ? static_cast<int>(blockIdx.y) * splits : 0) + rank;
  constexpr bool kSliced = kClusterSplit || kWgrad;
  const int k_first = kSliced ? min(k_tiles, slice * prm.k_tiles_per_split) : 0;
  const int k_count = kSliced ? min(k_tiles - k_first, prm.k_tiles_per_split) : k_tiles;
  if (tid == 0) {
    detail::prefetch_tensor_map(prm.image_map);
    detail::prefetch_tensor_map(prm.filter_map);
    // TF32 and strided dgrad steps store from the accumulators (no output map).
    if (!kTf32 && !prm.accumulator_stores) detail::prefetch_tensor_map(prm.output_map);
#pragma unroll
    for (int s = 0; s < S; ++s) {
      detail::mbarrier_init(&landed[s]);
      detail::mbarrier_init(&freed[s], (kCooperative ? 2 : 1) * kConsumerThreads / 32);
    }
    detail::mbarrier_init(&turn[0]);
    detail::mbarrier_init(&turn[1]);
    if (kClusterSplit)
      for (int w = 0; w < 2; ++w) {
        detail::mbarrier_init(&parked[w], (splits - 1) * kConsumerThreads);
        detail::mbarrier_init(&read[w], kConsumerThreads);
      }
  }
  // The peers' barriers are initialised before anyone arrives on them remotely.
  if constexpr (kClusterSplit)
    cooperative_groups::this_cluster().sync();
  else
    __syncthreads();
  // Note [dependent launch]: from here on the block reads and writes tensors.
  detail::wait_for_prerequisite_grids();
  detail::allow_dependent_grids();

  if (warp >= 2 * kConsumerThreads / 32) {  // the producer warpgroup: one thread issues the copies
    detail::release_registers<40>();
    if (warp == 2 * kConsumerThreads / 32 && lane == 0) {
      int fills = 0;
      // The offset table's row of the next stage is read while this one waits for its slot, so that
      // a stage's copies never wait for a table read (every tile walks the same rows).
      // Note [offset table prefetch] (kernel.cuh): L2 holds the rows kTablePrefetchStages stages on.
      int4 row = k_count > 0 ? __ldg(prm.table + k_first * BK) : int4{};
      const int k_end = (k_first + k_count) * BK;
      for (int s = 1; s < kTablePrefetchStages; ++s) prefetch_table_row(prm, (k_first + s) * BK, k_end);
      for (long long tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const long long tm = tile / tiles_n;
        const TensorMapTileOrigin o = tensor_map_tile_origin(prm, tm * BM, static_cast<int>(tile - tm * tiles_n) * BN);
        for (int kt = k_first; kt < k_first + k_count; ++kt, ++fills) {
          const int st = fills % S;
          const int4 next = __ldg(prm.table + (kt + 1 < k_first + k_count ? kt + 1 : k_first) * BK);
          prefetch_table_row(prm, (kt + kTablePrefetchStages) * BK, k_end);
          if (fills >= S) detail::mbarrier_wait(&freed[st], (fills / S - 1) & 1);
          issue_tensor_map_stage<BM, BN, kA, kB>(prm, kt * BK, row, o, image_stage(st), filter_stage(st), &landed[st]);
          row = next;
        }
      }
    }
    return;  // an exited thread is not waited for at the closing cluster barrier
  }

  detail::claim_registers<232>();  // the producer's share: 2 x 232 + 40 of an SM sub-partition's 512
  const int wg = warp / 4, wg_tid = tid % kConsumerThreads;
  // Cluster-split cooperative tiles: the block that adds and stores this warpgroup's pixels (block
  // 0 the first 64, block 1 the others where there are two), so that two blocks share the work.
  const int owner = wg % splits;
  // BN/64 blocks of kRows rows x 128 bytes (a cooperative warpgroup uses half of its buffer).
  const uint32_t out_base = base + S * Tile::kStageBytes + wg * kOutBytes;
  constexpr bool kMMajorA = kWgrad, kNMajorB = kB == GatherForm::Transposed;
  // A k-step is 32 bytes on in a K-major operand, 16 rows of 128 bytes on in an M- or N-major one.
  constexpr int kStepMN = 16 * wgmma::kRowBytes / 16;
  constexpr int kStepB = kNMajorB ? kStepMN : 2;
  // An M-major image stage holds blocks of 64 pixels x BK rows; warpgroup wg's is block wg.
  constexpr uint32_t kBlockBytes = BK * wgmma::kRowBytes;
  auto release = [&](int u) {  // this warp no longer reads stage u
    __syncwarp();
    if (lane == 0) detail::mbarrier_arrive(&freed[u % S]);
  };
  float d[MB][BN / 2];
  // Note [wgmma tf32 stages]: a warp's image fragments of a stage, two sets in cooperative tiles.
  constexpr bool kTwoImageSets = kTf32 && kCooperative;
  [[maybe_unused]] uint32_t a[kTwoImageSets ? 2 : 1][kTf32 ? MB : 1][wgmma::kRowBytes / 32][4];
  // Note [wgmma warp-specialized wgrad]: groups of blocks adding their slices' sums into y.
  const bool atomic = kWgrad && prm.atomic_slices > 1;
  // The block's tile index (its j-th tile is blockIdx.x + j * gridDim.x).
  int j = kCooperative ? 0 : wg;
  for (long long tile = blockIdx.x + j * static_cast<long long>(gridDim.x); tile < tiles;
       tile += kTileStride * static_cast<long long>(gridDim.x), j += kTileStride) {
#pragma unroll
    for (int mb = 0; mb < MB; ++mb)
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) d[mb][i] = 0.0f;
    // This warpgroup's turn: the other one has waited for every stage of the block's previous tile.
    if (!kCooperative && j > 0) detail::mbarrier_wait(&turn[wg], ((j - 1) / 2) & 1);
    const int u0 = j * k_count;
    // Multiplies the block's stage u0 + kt; TF32 tiles load its image fragments into `image`.
    auto multiply_stage = [&](int kt, [[maybe_unused]] auto& image) {
      const int u = u0 + kt, st = u % S;
      detail::mbarrier_wait(&landed[st], (u / S) & 1);
      if constexpr (kTf32) {  // Note [wgmma tf32 stages]: the filter rows in place, the image rows in registers
        constexpr int kReaders = (kCooperative ? 2 : 1) * kConsumerThreads;
        round_chunks_to_tf32<BN * wgmma::kRowBytes / 16, kReaders>(filter_stage(st), kCooperative ? tid : wg_tid);
        wgmma::fence_shared_for_async();
        detail::named_barrier_sync(kCooperative ? 3 : 1 + wg, kReaders);
        if constexpr (!kTwoImageSets) {  // the previous group reads the registers reloaded here
          wgmma::wait<0>();
#pragma unroll
          for (int mb = 0; mb < MB; ++mb) wgmma::pin(d[mb]);
          if (kt > 0) release(u - 1);
        }
#pragma unroll
        for (int mb = 0; mb < MB; ++mb)
          load_tf32_image_fragments<Math>(image[mb], image_stage(st), (kCooperative ? wg : mb) * 64 + (warp % 4) * 16,
                                          lane);
      }
      const uint64_t db =
          kNMajorB ? wgmma::descriptor(filter_stage(st), BK * wgmma::kRowBytes) : wgmma::descriptor(filter_stage(st));
#pragma unroll
      for (int mb = 0; mb < MB; ++mb) wgmma::pin(d[mb]);
      wgmma::fence();
      if constexpr (kTf32) {
#pragma unroll
        for (int ks = 0; ks < wgmma::kRowBytes / 32; ++ks)
#pragma unroll
          for (int mb = 0; mb < MB; ++mb) wgmma::mma_async_tf32_registers<BN>(d[mb], image[mb][ks], db + kStepB * ks);
      } else {
        // A row block of 64 pixels is 64 rows of 128 bytes on (the descriptor counts 16-byte units).
        const uint64_t da = kMMajorA ? wgmma::descriptor(image_stage(st) + wg * kBlockBytes, kBlockBytes)
                                     : wgmma::descriptor(image_stage(st));
#pragma unroll
        for (int ks = 0; ks < wgmma::kRowBytes / 32; ++ks)
#pragma unroll
          for (int mb = 0; mb < MB; ++mb)
            wgmma::mma_async<T, BN, kMMajorA, kNMajorB>(
                d[mb],
                kMMajorA ? da + kStepMN * ks : da + (kCooperative ? wg : mb) * (64 * wgmma::kRowBytes / 16) + 2 * ks,
                db + kStepB * ks);
      }
      wgmma::commit();
      if (!kCooperative && kt == k_count - 1 && wg_tid == 0)
        detail::mbarrier_arrive(&turn[1 - wg]);  // the other's turn
      if constexpr (!kTf32 || kTwoImageSets) {
        wgmma::wait<1>();  // the previous stage's group is done
#pragma unroll
        for (int mb = 0; mb < MB; ++mb) wgmma::pin(d[mb]);
        if (kt > 0) release(u - 1);
      }
    };
    if constexpr (kTwoImageSets) {
      // Note [wgmma tf32 stages]: even stages' fragments in one register set, odd ones' in the other.
      // Pairs unconditionally, so that ptxas sees the in-flight group read the other set at every
      // stage and keeps the groups overlapped (a conditional second stage had it serialize them).
      int kt = 0;
      for (; kt + 1 < k_count; kt += 2) {
        multiply_stage(kt, a[0]);
        multiply_stage(kt + 1, a[1]);
      }
      if (kt < k_count) multiply_stage(kt, a[0]);
    } else {
      for (int kt = 0; kt < k_count; ++kt) multiply_stage(kt, a[0]);
    }
    wgmma::wait<0>();
#pragma unroll
    for (int mb = 0; mb < MB; ++mb) wgmma::pin(d[mb]);
    if (k_count > 0) release(u0 + k_count - 1);
    if constexpr (kClusterSplit) {
      // Note [wgmma warp-specialized tiles]: the other blocks park this warpgroup's partial sums
      // in their output buffers, each thread its accumulators as 16-byte runs, consecutive
      // threads adjacent; the owner of these 64 pixels adds every one, tells each so, and stores.
      const uint32_t mine = out_base + wg_tid * 16;
      constexpr uint32_t kRunStride = kConsumerThreads * 16;
      const bool last_tile = tile + static_cast<long long>(gridDim.x) >= tiles;
      if (rank != owner) {
        if (j > 0) detail::mbarrier_wait_cluster(&read[wg], (j - 1) & 1);  // the owner read the last one
#pragma unroll
        for (int i = 0; i < BN / 8; ++i)
          asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(mine + i * kRunStride), "f"(d[0][4 * i]),
                       "f"(d[0][4 * i + 1]), "f"(d[0][4 * i + 2]), "f"(d[0][4 * i + 3])
                       : "memory");
        detail::mbarrier_arrive_cluster(&parked[wg], owner);
        if (last_tile) detail::cluster_arrive();  // parked: the owner arrives once it has read them
        continue;
      }
      detail::mbarrier_wait_cluster(&parked[wg], j & 1);
      for (int r = 0; r < splits; ++r) {
        if (r == owner) continue;
        const uint32_t peer = detail::cluster_address(mine, r);
#pragma unroll
        for (int i = 0; i < BN / 8; ++i) {
          const float4 v = detail::load_cluster_float4(peer + i * kRunStride);
          d[0][4 * i] += v.x, d[0][4 * i + 1] += v.y, d[0][4 * i + 2] += v.z, d[0][4 * i + 3] += v.w;
        }
        detail::mbarrier_arrive_cluster(&read[wg], r);
      }
      if (last_tile) detail::cluster_arrive();  // its reads of the peers are done
    }
    const long long tm = tile / tiles_n;
    const long long tile_m = tm * BM + (kCooperative ? 64 * wg : 0);  // this warpgroup's first pixel
    const int tile_n = static_cast<int>(tile - tm * tiles_n) * BN;
    if constexpr (kTf32) {  // Note [wgmma tf32 stages]
#pragma unroll
      for (int mb = 0; mb < MB; ++mb)
        store_accumulator_pairs<Math, BN, false>(prm, d[mb], tile_m + mb * 64 + (warp % 4) * 16, tile_n, lane);
    } else {
      if constexpr (kDgradForms)
        if (prm.accumulator_stores) {     // Note [wgmma strided dgrad stores]
          if (prm.buffered_pixel_runs) {  // Note [strided dgrad pixel runs]
            // Each warp writes and reads back its own rows: its lanes' previous reads are done.
            const bool silu = prm.activation == kActivationSiLU;  // Note [fused silu]: over the whole buffer
            if (silu) detail::named_barrier_sync(1 + wg, kConsumerThreads);
            __syncwarp();
#pragma unroll
            for (int mb = 0; mb < MB; ++mb) {
              const int row0 = mb * 64 + (warp % 4) * 16;
              if (prm.beta != 0.0f)  // Note [output buffer stores]: beta's reads in their own instance
                write_output_buffer_as<Math, BN, true, true>(prm, d[mb], out_base, kRows, row0, tile_m, tile_n, lane);
              else
                write_output_buffer_as<Math, BN, false>(prm, d[mb], out_base, kRows, row0, tile_m, tile_n, lane);
            }
            if (silu) {
              detail::named_barrier_sync(1 + wg, kConsumerThreads);
              silu_output_buffer<Math, kRows * BN * 2, kConsumerThreads>(out_base, wg_tid);
              detail::named_barrier_sync(1 + wg, kConsumerThreads);
            }
            __syncwarp();
            store_output_buffer_pixel_runs<Math, kRows, BN>(prm, out_base, tile_m, tile_n, warp, lane);
            continue;
          }
#pragma unroll
          for (int mb = 0; mb < MB; ++mb)
            store_accumulator_pairs<Math, BN, true>(prm, d[mb], tile_m + mb * 64 + (warp % 4) * 16, tile_n, lane);
          continue;
        }
      // The buffer is free once this warpgroup's previous store has read it.
      if (wg_tid == 0) detail::bulk_wait_read<0>();
      detail::named_barrier_sync(1 + wg, kConsumerThreads);
      if constexpr (kWgrad) {
        write_output_buffer_m_major<Math, BN>(prm, d[0], out_base, (warp % 4) * 16, tile_m, tile_n, lane, atomic);
      } else {
#pragma unroll
        for (int mb = 0; mb < MB; ++mb)
          write_output_buffer<Math, BN>(prm, d[mb], out_base, kRows, mb * 64 + (warp % 4) * 16, tile_m, tile_n, lane);
      }
      if (!atomic && prm.activation == kActivationSiLU) {  // Note [fused silu]: on the buffer, accumulators dead
        detail::named_barrier_sync(1 + wg, kConsumerThreads);
        silu_output_buffer<Math, kRows * BN * 2, kConsumerThreads>(out_base, wg_tid);
      }
      detail::fence_shared_for_bulk_copy();
      detail::named_barrier_sync(1 + wg, kConsumerThreads);  // the tile is in the buffer
      // A cooperative tile's second half may lie wholly past the last pixel: nothing to store.
      if (wg_tid == 0 && tile_m < prm.npq) {
        if constexpr (kWgrad) {  // one box of 64 pixels x BN filters, added into y by atomic groups
          if (atomic)
            detail::tensor_reduce_add_tile(prm.output_map, static_cast<int>(tile_m), tile_n, out_base);
          else
            detail::tensor_store_tile(prm.output_map, static_cast<int>(tile_m), tile_n, out_base);
          detail::bulk_commit();
        } else {
          store_output_buffer<kRows, BN>(prm, out_base, tile_m, tile_n);
        }
      }
      if constexpr (!Tile::kWholeFilterBlocks)
        store_output_tail<kRows, BN, kConsumerThreads>(prm, out_base, tile_m, tile_n, wg_tid);
    }
  }
  if (wg_tid == 0) detail::bulk_wait_read<0>();  // the shared memory outlives the last store's reads
  // Every block's shared memory outlives the owners' reads of its last partial sums: each consumer
  // arrived on the closing cluster barrier right after its last tile's hand-over (before the
  // epilogue, so that no block waits for another's stores), and waits here.
  if constexpr (kClusterSplit) {
    if (j == 0) detail::cluster_arrive();  // a warpgroup without a tile
    detail::cluster_wait();
  }
#else
  __trap();  // the planner picks warp-specialized tiles only on sm_90
#endif
}

}  // namespace mconv::cuda
