// The tensor-core implicit-GEMM kernel (technique 1 with mma.sync): fp16 and bf16 storage, or fp32
// storage in TF32 math, all accumulating in fp32.
//
// Block (blockIdx.x, blockIdx.y, blockIdx.z) computes block_m output pixels x block_n filters of group
// z. Each pipeline stage gathers 64 bytes of reduction rows for every pixel and filter of the block:
//   sImage[pixel][kk] = x[start[pixel] + offset[k0 + kk]]   (zero where the padding predicate fails)
//   sFilter[f][kk]    = w[f * w.stride_k + w_offset[k0 + kk]]
// through cp.async, Stages deep, then every warp multiplies its fragments with mma.sync. Start
// addresses are formed once per block; the main loop only reads the offset table and adds.
//
// Note [mma shared layout]: both tiles are stored reduction-fastest ([pixel][kk], [filter][kk]),
// which is the row-major A and column-major B that mma.sync's .row.col form takes, so fragments load
// with ldmatrix and need no transpose. Rows are 64 or 128 data bytes padded by 16: the eight 16-byte
// rows an ldmatrix phase reads then start 20 (or 36) words apart, in eight distinct 4-bank groups.
// ldmatrix moves 16-bit pairs, so in bytes its fragments are the same for 4-byte TF32 elements: an
// 8x8 b16 matrix is 8 rows of 4 fp32, exactly the m16n8k8 TF32 fragment layout.
//
// Note [mma gather forms]: each operand tile comes into shared memory in one of three forms. Vector
// (Note [mma vector gather], planner.cpp): 16-byte runs of reduction rows, stored reduction-fastest
// as above. Transposed (fp16/bf16): when the operand's contiguous axis is the GEMM's M or N instead
// -- the filter of a backward-data step is w read as (C, K, R, S), contiguous in C; the image and
// filter of a backward-filter step are x read as (C, N, H, W) and dy as (K, N, P, Q), contiguous in
// C and K -- a stage stores each reduction row as BlockM (or BlockN) contiguous elements
// ([kk][pixel], [kk][filter]), gathered as 16-byte vectors of 8 pixels or 8 filters, and fragments
// load with ldmatrix.trans, which hands each lane the same registers the .row.col MMA takes. Eight
// consecutive pixels are eight images of one window when pixels are numbered images-fastest. Element
// (any strides): see below.
//
// Note [mma tf32 pixel runs]: a 1x1 layer of stride 1 and no padding whose x is in plane order
// (NCHW: pixels contiguous, rows of the plane back to back) is a GEMM over whole planes: V = 16 /
// element-size consecutive output pixels of one image are V contiguous elements of every channel's
// plane, at every table row. The transposed image form then copies them as one 16-byte vector
// (pixels numbered image by image; P*Q a multiple of V keeps a run inside one image and aligned),
// with the filters as vectors along C (w's reduction is contiguous in KCRS when R = S = 1). 16-bit
// fragments load with ldmatrix.trans as above; ldmatrix cannot transpose 32-bit elements, so TF32
// fragments load one element a register from rows of BlockM floats padded by 8, where the lanes
// (pixel g, row t) of a load fall in 32 distinct banks (8t + g). TF32 wgmma reads only K-major
// shared memory, so on warpgroup tiles the TF32 image operand goes through registers (wgmma's
// register-A form, mma.sync's fragment order), its rows' 16-byte chunks XORed with 2 (row % 4)
// instead of padded; 16-bit images stay in shared memory as an M-major operand.
//
// Note [mma tf32 transposed filters]: the filter operand with its filters contiguous (a dgrad step's
// w, a wgrad step's dy in channels-last) lands as the 16-bit transposed form does, V = 4 filters a
// 16-byte copy into rows of BlockN floats padded by 8 ([kk][filter]); each lane then loads its
// fragment (row t, filter g), (t + 4, g) and filter g + 8 one element a register, 32 distinct banks
// (8t + g), as TF32 transposed images do. wgmma cannot take a transposed TF32 operand from shared
// memory, so only mma.sync tiles have this form (the planner gives them such layers in TF32).
//
// Note [mma vector gather]: see planner.cpp. The element form moves one element per copy (cp.async
// of 4 bytes for fp32; a predicated load and store for 16-bit types, which cp.async cannot copy) with
// consecutive threads on consecutive pixels, so NCHW/CNHW inputs read along their contiguous axis.
// Each operand's form is its own: element images may take vector filters (a KCRS w's rows, Note [mma
// filter rows] in planner.cpp), and vector images element filters.
//
// Note [offset table prefetch]: a forward or dgrad step walks the same table rows in every block, and
// they stay in L2; a wgrad step's rows are its slice of dy's pixels, each read by the few blocks of
// one slice. The tensor-map mainloop's thread 0 read the row of the stage it was about to fill, after
// the barrier that freed the stage, and each such read went to DRAM with every warp waiting at the
// next barrier. It now reads the row of the next stage it fills one stage early, into a register,
// and asks L2 for the row kTablePrefetchStages stages on (a hint: nothing waits for it); the
// warp-specialized producer, which already read one row ahead, asks L2 the same. Measured on the
// H100 (bf16 resnet50 wgrad): the deterministic steps of 56x56 layers (a 16-block cluster a tile)
// 66-84 -> 56-67 us; other steps and passes within 4%. The element forms, which read their rows in
// place, ran conv1's wgrad 11-20% slower with the same L2 requests and are left without
// (docs/PERFORMANCE.md, "Few-block wgrad steps").
//
// Note [mma staged epilogue]: fragments hold two adjacent filters of one pixel per register pair, so
// storing them directly writes 4-byte pieces scattered over 8 pixels per instruction. When y is
// channels-last (filters contiguous) the block instead parks alpha*acc + bias in shared memory (the
// pipeline's buffers are free by then) and every thread then handles 16-byte runs of filters of one
// pixel: beta*y read, ReLU, rounding and the store are all whole 16-byte vectors, a warp covering
// whole pixels' rows. Other y layouts keep the direct fragment store.
//
// Note [mma cluster split]: a layer whose tiles cannot fill the GPU (a backward-filter step: the
// output is a filter, the reduction N*P*Q long) splits each tile's rows among the S blocks of a
// thread-block cluster. Every block parks its fp32 partial tile in its own shared memory, y's
// contiguous axis (filters or pixels) fastest; after a cluster barrier block r sums rows r*BM/S..
// (whole runs of 8 where pixels are y's contiguous axis) of all S partials in rank order through
// distributed shared memory, 16 bytes a load, and stores runs of 8 outputs, and a second barrier
// keeps every block resident until its peers have read it. No workspace, no atomics: y is bitwise
// the same on every run.
//
// Note [mma atomic slices]: where even 16 slices a tile leave SMs idle (a wgrad step of a 56x56
// layer has one to nine tiles and a reduction of 100352 rows), A groups of blocks, each one block
// or one cluster, take disjoint row ranges and add their sums into y with atomics, y having been
// set to beta*y + bias first (output_prepass_kernel.cuh). A run of 8 outputs contiguous in y is
// one 16-byte reduction (red.global.add, bf16x2/f16x2 pairs or two of four floats), single
// elements otherwise. A 16-bit y is rounded once per group's sum, so a group count of at most 8
// bounds the extra rounding; without a deterministic plan only (the order of the adds varies), and
// never with ReLU, which needs the whole sum (the launcher then runs the clusters alone).
//
// Note [wgmma mainloop]: warpgroup tiles (sm_90a) keep the gather (the same threads, the same
// offset-table reads, cp.async of 16-byte vectors) but store the stages in wgmma's swizzled K-major
// layout (Note [wgmma shared layout], common/wgmma.cuh; transposed stages M- or N-major) and multiply
// with wgmma: each warpgroup issues the
// stage's four asynchronous k-steps of its 64 pixels x BN filters straight from shared memory, then
// issues the copies of a later stage while they run, and waits only for the previous stage's group.
// With 4 or more stages a wgmma group may stay in flight until the next iteration's copies are
// issued (wait_group 1), so a stage is refilled two iterations after its wgmma was issued: every
// thread has by then waited for that group and passed the next iteration's barrier, and no warpgroup
// still reads it; Stages - 2 stages are in flight ahead. With 3 stages each iteration waits for its
// own group (wait_group 0) and keeps 2 stages ahead; two blocks an SM then overlap each other.
// cp.async writes through the generic proxy and wgmma reads through the async proxy, so every thread
// fences its landed copies (fence.proxy.async) before the barrier that publishes a stage (TF32
// rounds them to nearest first: wgmma itself would truncate). The
// accumulators have mma.sync's fragment layout (warp w of the block: pixels 16w..16w+15), so the
// epilogues below serve both.
//
// Note [wgmma tensor-map loads]: profiled, the gather above keeps the L1/TEX unit 73-82% busy with
// one 16-byte cp.async per thread per vector, and that, not the MMA, bounds the warpgroup tiles. When
// C is a multiple of 64 (fp16/bf16, groups 1, x and w channels-last), a stage's 64 reduction rows
// are 64 consecutive channels at one filter tap, and the copy engine can load the stage whole: the
// image tile is one im2col column of the input -- block_m output pixels in order, each the 64
// channels at its window origin plus the tap, zeros in the padding -- and the filter tile one box of
// w viewed as K rows of R*S*C. The offset table still drives it: the tap (dh, dw), the channel
// (x_offset less the tap's displacement) and the filter offset come from the stage's first row.
// One thread issues both copies on the stage's mbarrier, which counts their bytes; the warpgroups
// wait on it, multiply, and after waiting for their wgmma groups pass a barrier, after which the
// freed stage is refilled. No thread gathers, and nothing needs the cross-proxy fence: the copies
// and wgmma both work through the async proxy.
// A dgrad step's filter (w with dx's channels as its filters, which lie contiguous) is N-major: then
// the filter tile is block_n / 64 boxes of a 4-D map of w (filters, channels, s, r), each 64 filters x
// the stage's 64 channels at its tap, landing as the N-major blocks of Note [wgmma shared layout];
// the tap (r, s) is the row's (dh, dw) over the dilation, flipped for true convolution. A wgrad step
// (both operands transposed: x with its channels as the GEMM's M, dy with its filters as N, the
// reduction over dy's pixels) loads x as block_m / 64 im2col columns of the stage's 64 pixels, 64
// channels each at the block's tap, and dy as block_n / 64 boxes of its pixels x filters, landing as
// the M- and N-major blocks; a block's columns must then be one tap (C a multiple of block_m).
//
// Note [wgmma pixel-row maps]: a 1x1 stride-1 layer without padding whose pixels are evenly spaced
// (channels-last x, and the dgrad steps of 1x1 layers, whose x is dy) reads, for a tile, rows
// m0..m0+block_m-1 of x viewed as a (N*H*W) x C matrix. Its image box is then a plain 2-D box of a
// tiled map (C, N*H*W), which lands in the same 128-byte-swizzled rows as the im2col column; the
// launcher maps x so (image_pixel_rows) and the stage copies the tile of pixel rows at the stage's
// channel.
//
// Note [wgmma persistent tiles]: a 1x1 layer's short reduction (one to four stages) leaves a block
// little to overlap: it loads, multiplies, then stores a tile as large as its inputs, and the next
// block's loads start only after. The persistent form of a tensor-map tile launches at most one
// wave of blocks; block b takes tiles b, b + grid, ... (filter tiles fastest, so that the blocks
// resident together share their pixel tiles in L2). Thread 0 keeps one cursor over every row tile
// of all those tiles and refills each stage as soon as it is freed, so the next tile's first stages
// load while this tile finishes and stores. The store goes through a shared output buffer of its own
// (block_m x block_n 16-bit values after the stages, in the 128-byte swizzle, one 64-filter block
// per box) and leaves as tensor-map stores of y viewed as (K, N*P*Q), which the copy engine drains
// while the warps go on; before the buffer is written again thread 0 waits for the previous store to
// have read it. The tile's epilogue (alpha, bias, beta reading y, ReLU) runs on the fragments; the
// copy engine clips pixels and filters past y's edges. Needs y dense channels-last (pixel m's
// filters at m * K), K a multiple of 8 and y 16-byte aligned; the launcher runs the tile's plain form
// otherwise.
#pragma once

#include <cooperative_groups.h>
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "../common/cp_async.cuh"
#include "../common/dependent_launch.cuh"
#include "../common/epilogue.cuh"
#include "../common/implicit_gemm_geometry.cuh"
#include "../common/mma_sync.cuh"
#include "../common/storage.cuh"
#include "../common/tensor_copy.cuh"
#include "../common/wgmma.cuh"
#include "mconv/division.hpp"
#include "mconv/plan.hpp"

namespace mconv::cuda {

struct ImplicitMmaParams : ImplicitGemmGeometry {
  const void* x;  // tensors of the plan's dtype
  const void* w;
  void* y;
  int pair_store;      // y.stride_k == 1 and every filter pair 2t, 2t+1 aligned for one paired store
  int staged_store;    // Note [mma staged epilogue]: y.stride_k == 1 and 16-byte aligned runs of filters
  int images;          // N
  int images_fastest;  // pixel m is (n, p, q) = (m % N, (m / N) / Q, (m / N) % Q); else n-major
  int splits;          // Note [mma cluster split]: blocks of one tile's cluster (1: no split)
  int atomic_slices;   // Note [mma atomic slices]: groups of `splits` blocks adding into y (1: none)
  int k_tiles_per_split;
  int store_pixels_fastest;  // cluster-split epilogue: consecutive threads on pixels (y.stride_k != 1)
  // Note [wgmma tensor-map loads]: x as an im2col map (C, W, H, N), w as a tiled map (R*S*C, K), or
  // N-major (filters, C, S, R) with the filter's size, dilation and flip to find a stage's tap; a
  // wgrad step's x as an im2col map of the forward layer and dy as (K, N*P*Q), filter_r * filter_s
  // being P*Q.
  CUtensorMap image_map, filter_map;
  // Note [wgmma persistent tiles]: y as a tiled map (K, N*P*Q), boxes of 64 filters x block_m pixels.
  CUtensorMap output_map;
  int filter_r, filter_s, dil_h, dil_w, flip;
  // Note [wgmma pixel-row maps]: x as a tiled map (C, N*H*W) of a 1x1 stride-1 layer.
  int image_pixel_rows;
  // Note [wgmma strided dgrad stores]: warp-specialized 16-bit dgrad steps whose y takes no
  // tensor-map store store filter pairs from the accumulators (no output map).
  int accumulator_stores;
  // Note [strided dgrad pixel runs]: such a step's y takes 16-byte runs of filters (staged_store,
  // K/G a multiple of 8): the tiles then store through their output buffers.
  int buffered_pixel_runs;
};

/// The output pixel (n, p, q) of GEMM column m in the plan's pixel order. m < npq < 2^31, so the
/// divisions are 32-bit unsigned ones, a fraction of the 64-bit ones' instructions (the staged
/// epilogue divides once per 16-byte run of filters).
__device__ __forceinline__ void pixel_coords(const ImplicitMmaParams& prm, long long m, int& n, int& p, int& q) {
  const unsigned mu = static_cast<unsigned>(m);
  unsigned rem;
  if (prm.images_fastest) {
    const unsigned pq = mu / static_cast<unsigned>(prm.images);
    n = static_cast<int>(mu - pq * static_cast<unsigned>(prm.images));
    rem = pq;
  } else {
    const unsigned nu = mu / static_cast<unsigned>(prm.pq);
    n = static_cast<int>(nu);
    rem = mu - nu * static_cast<unsigned>(prm.pq);
  }
  const unsigned pu = rem / static_cast<unsigned>(prm.q);
  p = static_cast<int>(pu);
  q = static_cast<int>(rem - pu * static_cast<unsigned>(prm.q));
}

namespace detail {

/// A TF32 fragment of an operand stored M- or N-major (ldmatrix cannot transpose 32-bit elements):
/// one 32-bit word a register, at base, base + first, base + second and base + first + second
/// (Note [mma tf32 pixel runs], Note [mma tf32 transposed filters]: the steps differ by operand).
__device__ __forceinline__ void lds_tf32_fragment(uint32_t (&r)[4], uint32_t base, uint32_t first, uint32_t second) {
  r[0] = lds_u32(base);
  r[1] = lds_u32(base + first);
  r[2] = lds_u32(base + second);
  r[3] = lds_u32(base + first + second);
}

__device__ __forceinline__ void cp_async_16(uint32_t smem_addr, const void* gmem, bool pred) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr), "l"(gmem), "r"(pred ? 16 : 0));
}
__device__ __forceinline__ void cp_async_4(uint32_t smem_addr, const void* gmem, bool pred) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr), "l"(gmem), "r"(pred ? 4 : 0));
}

// Note [mma atomic slices]: y[0..7] += v[0..7] as 16-byte reductions at a 16-byte aligned address,
// each 16-bit value rounded once before the add (sm_90's vector red).
__device__ __forceinline__ void red_add_run(float* dst, const float (&v)[8]) {
  asm volatile("red.global.add.v4.f32 [%0], {%1,%2,%3,%4};\n" ::"l"(dst), "f"(v[0]), "f"(v[1]), "f"(v[2]), "f"(v[3])
               : "memory");
  asm volatile("red.global.add.v4.f32 [%0], {%1,%2,%3,%4};\n" ::"l"(dst + 4), "f"(v[4]), "f"(v[5]), "f"(v[6]), "f"(v[7])
               : "memory");
}
// The 16-bit types: eight values rounded once each (storage.cuh's from_float), packed in address
// order (the lower address in each register's low half), then one vector red of the type's pairs.
template <class T>
__device__ __forceinline__ void red_add_run(T* dst, const float (&v)[8]) {
  static_assert(std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>, "fp16 or bf16 pairs");
  __align__(16) T h[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) h[e] = from_float<T>(v[e]);
  const uint4 r = *reinterpret_cast<const uint4*>(h);
  if constexpr (std::is_same_v<T, __half>)
    asm volatile("red.global.add.noftz.v4.f16x2 [%0], {%1,%2,%3,%4};\n" ::"l"(dst), "r"(r.x), "r"(r.y), "r"(r.z),
                 "r"(r.w)
                 : "memory");
  else
    asm volatile("red.global.add.noftz.v4.bf16x2 [%0], {%1,%2,%3,%4};\n" ::"l"(dst), "r"(r.x), "r"(r.y), "r"(r.z),
                 "r"(r.w)
                 : "memory");
}

/// Stores four 8x8 matrices of 16-bit pairs (sm_90): lanes 8i..8i+7 give the addresses of the eight
/// 16-byte rows of matrix i, and thread t's r[i] is its row t/4, columns 2(t%4) and 2(t%4)+1 (the
/// layout of an mma.sync accumulator fragment's pairs).
__device__ __forceinline__ void store_matrices(uint32_t addr, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r[0]), "r"(r[1]),
               "r"(r[2]), "r"(r[3])
               : "memory");
}
/// The same, each matrix stored transposed: row j of matrix i holds its column j.
__device__ __forceinline__ void store_matrices_transposed(uint32_t addr, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r[0]),
               "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}

}  // namespace detail

/// Note [offset table prefetch]: how many stages ahead of the one it fills thread 0 asks L2 for the
/// table's row. Eight stages of the shortest (0.1-0.2 us) cover a DRAM read.
inline constexpr int kTablePrefetchStages = 8;

/// Note [wgmma tensor-map loads]: a tile's first output pixel (n0, p0, q0), the window origin (h0,
/// w0) of that pixel, and its first filter: where each stage's copies start.
struct TensorMapTileOrigin {
  int n0, p0, q0, h0, w0, block_n;
  int m0;  // the first pixel
};
__device__ __forceinline__ TensorMapTileOrigin tensor_map_tile_origin(const ImplicitMmaParams& prm,
                                                                      long long first_pixel, int first_filter) {
  TensorMapTileOrigin o;
  pixel_coords(prm, first_pixel, o.n0, o.p0, o.q0);
  o.h0 = window_origin(o.p0, prm.stride_h, prm.pad_h);
  o.w0 = window_origin(o.q0, prm.stride_w, prm.pad_w);
  o.block_n = first_filter;
  o.m0 = static_cast<int>(first_pixel);
  return o;
}

/// Note [wgmma tensor-map loads]: the copies of the stage of BM pixels x BN filters whose first
/// reduction row is k0, for the tile at `o`, into image_dst and filter_dst (1024-byte aligned),
/// counted on `landed`; one thread issues them. The tap, channel and filter offset of the stage's
/// first row come from the offset table (64 rows, one tap, consecutive channels): `row` is its
/// entry k0, read by the caller (ahead, where it can).
template <int BM, int BN, GatherForm kA, GatherForm kB>
__device__ __forceinline__ void issue_tensor_map_stage(const ImplicitMmaParams& prm, int k0, const int4 row,
                                                       const TensorMapTileOrigin& o, uint32_t image_dst,
                                                       uint32_t filter_dst, uint64_t* landed) {
  static_assert(kB != GatherForm::Transposed || BN % 64 == 0, "N-major filters: whole boxes of 64");
  detail::mbarrier_arrive_expect_bytes(landed, (BM + BN) * wgmma::kRowBytes);
  constexpr uint32_t kBlockBytes = 64 * wgmma::kRowBytes;  // one M- or N-major block of 64
  if constexpr (kA == GatherForm::Transposed) {
    // A wgrad step: the stage's rows are 64 consecutive dy pixels (n, p, q); the block's columns
    // are 64-channel runs of x at one tap (r, s), the block's first output pixel (n0 = the
    // channel, p0 = r, q0 = s). x is an im2col column over those pixels' windows (their origin
    // from the row's tap displacement, less the padding), dy a plain 2-D box of them.
    const int image = k0 / (prm.filter_r * prm.filter_s);
    const auto tap_h = static_cast<uint16_t>(o.p0 * prm.stride_h), tap_w = static_cast<uint16_t>(o.q0 * prm.stride_w);
#pragma unroll
    for (int b = 0; b < BM / 64; ++b)
      detail::tensor_copy_im2col(image_dst + b * kBlockBytes, prm.image_map, o.n0 + 64 * b, row.z - prm.pad_w,
                                 row.y - prm.pad_h, image, tap_w, tap_h, landed);
#pragma unroll
    for (int b = 0; b < BN / 64; ++b)
      detail::tensor_copy_tile(filter_dst + b * kBlockBytes, prm.filter_map, o.block_n + 64 * b, k0, landed);
    return;
  }
  const int c0 = row.x - static_cast<int>(row.y * prm.x_sh + row.z * prm.x_sw);
  if (prm.image_pixel_rows)  // Note [wgmma pixel-row maps]
    detail::tensor_copy_tile(image_dst, prm.image_map, c0, o.m0, landed);
  else
    detail::tensor_copy_im2col(image_dst, prm.image_map, c0, o.w0, o.h0, o.n0, static_cast<uint16_t>(row.z),
                               static_cast<uint16_t>(row.y), landed);
  if constexpr (kB == GatherForm::Transposed) {
    const int tap_r = row.y / prm.dil_h, tap_s = row.z / prm.dil_w;
    const int fr = prm.flip ? prm.filter_r - 1 - tap_r : tap_r, fs = prm.flip ? prm.filter_s - 1 - tap_s : tap_s;
#pragma unroll
    for (int b = 0; b < BN / 64; ++b)
      detail::tensor_copy_tile_4d(filter_dst + b * kBlockBytes, prm.filter_map, o.block_n + 64 * b, c0, fs, fr, landed);
  } else {
    detail::tensor_copy_tile(filter_dst, prm.filter_map, row.w, o.block_n, landed);
  }
}

/// Note [wgmma persistent tiles]: one warp's accumulators (pixels row0..row0+15 of the tile at
/// (tile_m, tile_n) x BN filters, in mma.sync's fragment layout) through the epilogue (alpha, bias,
/// beta reading y when kBeta, ReLU), rounded to 16 bits into the output buffer: BN / 64 blocks of
/// `rows` pixels x 128 bytes in the 128-byte swizzle, then the last BN % 64 filters as plain rows
/// (Note [wgmma wave-fitted filter tiles]). y is dense: pixel m's filters at m * y_sq.
///
/// Note [output buffer stores]: these tiles' 1x1 layers of short reductions are bound by this loop
/// (under Nsight Compute, 60% of l1_1x1b's stall samples and about 480 of a warp's 600 instructions
/// a tile). A pair of filters of one pixel is one register of 16-bit pairs, and a warp's pairs for
/// 16 pixels x 16 filters are four 8x8 matrices in stmatrix's layout, so one stmatrix stores what
/// took sixteen 4-byte stores, each with its own swizzled address. Beta's reads of y (their bounds
/// tests and addresses) are compiled into a second instance, taken by a uniform branch, so the
/// common call issues none of them. With kPixelCoords beta reads pixel m at its (n, p, q) address
/// through y's strides (Note [strided dgrad pixel runs]: a dgrad phase's dx).
template <class Math, int BN, bool kBeta, bool kPixelCoords = false>
__device__ __forceinline__ void write_output_buffer_as(const ImplicitMmaParams& prm, const float (&d)[BN / 2],
                                                       uint32_t out_base, int rows, int row0, long long tile_m,
                                                       int tile_n, int lane) {
  static_assert(BN % 16 == 0, "pairs of 8-filter blocks");
  using T = typename Math::Storage;
  const int t4 = lane & 3;
  // Matrix i of a store holds filters 8 (j + i/2).. of pixels row0 + 8 (i%2)..; lane 8i + r gives
  // the address of its row r.
  const int store_row = row0 + ((lane >> 3) & 1) * 8 + (lane & 7), store_block = lane >> 4;
  const uint32_t tail = out_base + BN / 64 * rows * wgmma::kRowBytes;
#pragma unroll
  for (int j = 0; j < BN / 8; j += 2) {
    uint32_t packed[4];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int f = tile_n + (j + h) * 8 + t4 * 2;
      const float b0 = prm.bias && f < prm.kg ? __ldg(prm.bias + f) : 0.0f;
      const float b1 = prm.bias && f + 1 < prm.kg ? __ldg(prm.bias + f + 1) : 0.0f;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float v0 = fmaf(prm.alpha, d[(j + h) * 4 + half * 2], b0);
        float v1 = fmaf(prm.alpha, d[(j + h) * 4 + half * 2 + 1], b1);
        if constexpr (kBeta) {
          const long long m = tile_m + row0 + (lane >> 2) + half * 8;
          if (m < prm.npq && f < prm.kg) {
            const T* old = static_cast<const T*>(prm.y) + f;
            if constexpr (kPixelCoords) {
              int n, p, q;
              pixel_coords(prm, m, n, p, q);
              old += n * prm.y_sn + p * prm.y_sp + q * prm.y_sq;
            } else {
              old += m * prm.y_sq;
            }
            v0 = fmaf(prm.beta, Math::to_float(old[0]), v0);
            v1 = fmaf(prm.beta, Math::to_float(old[1]), v1);
          }
        }
        // SiLU is identity here: it runs on the buffer afterwards (Note [fused silu]).
        v0 = activate(v0, prm.activation), v1 = activate(v1, prm.activation);
        __align__(4) T out[2] = {Math::from_float(v0), Math::from_float(v1)};
        packed[h * 2 + half] = *reinterpret_cast<const uint32_t*>(out);
      }
    }
    const int jj = j + store_block;  // this lane's row's 8-filter block
    detail::store_matrices(jj < BN / 64 * 8
                               ? wgmma::swizzled_chunk(out_base + (jj / 8) * rows * wgmma::kRowBytes, store_row, jj % 8)
                               : tail + (store_row * (BN % 64) + (jj % 8) * 8) * static_cast<int>(sizeof(T)),
                           packed);
  }
}

/// Note [output buffer stores]: write_output_buffer_as's instance for the call's beta.
template <class Math, int BN>
__device__ __forceinline__ void write_output_buffer(const ImplicitMmaParams& prm, const float (&d)[BN / 2],
                                                    uint32_t out_base, int rows, int row0, long long tile_m, int tile_n,
                                                    int lane) {
  if (prm.beta != 0.0f)
    write_output_buffer_as<Math, BN, true>(prm, d, out_base, rows, row0, tile_m, tile_n, lane);
  else
    write_output_buffer_as<Math, BN, false>(prm, d, out_base, rows, row0, tile_m, tile_n, lane);
}

/// Note [wgmma persistent tiles]: the output buffer of the tile at (tile_m, tile_n) (BM pixels x BN
/// filters, written by write_output_buffer and fenced) out to y as BN / 64 tensor-map boxes, one
/// bulk group of the calling thread; the copy engine clips what lies past y's edges. A last block of
/// fewer than 64 filters is left to store_output_tail.
template <int BM, int BN>
__device__ __forceinline__ void store_output_buffer(const ImplicitMmaParams& prm, uint32_t out_base, long long tile_m,
                                                    int tile_n) {
#pragma unroll
  for (int b = 0; b < BN / 64; ++b)
    detail::tensor_store_tile(prm.output_map, tile_n + 64 * b, static_cast<int>(tile_m),
                              out_base + b * BM * wgmma::kRowBytes);
  detail::bulk_commit();
}

/// Note [wgmma wave-fitted filter tiles]: the last BN % 64 filters of the output buffer's tile (BM
/// plain rows of BN % 64 16-bit values after the whole blocks) out to y by the `kThreads` threads of
/// the caller, a 16-byte run of 8 filters each per step (pixels past N*P*Q and filters past K/G
/// skipped; K/G is a multiple of 8 where this form runs). The buffer was written and the threads
/// synchronised before; they read it before their next barrier.
template <int BM, int BN, int kThreads>
__device__ __forceinline__ void store_output_tail(const ImplicitMmaParams& prm, uint32_t out_base, long long tile_m,
                                                  int tile_n, int tid) {
  constexpr int kRuns = BN % 64 / 8;  // 16-byte runs of a pixel's tail filters
  if constexpr (kRuns > 0) {
    const uint32_t tail = out_base + BN / 64 * BM * wgmma::kRowBytes;
    char* __restrict__ gY = static_cast<char*>(prm.y);
    for (int i = tid; i < BM * kRuns; i += kThreads) {
      const int row = i / kRuns, run = i % kRuns;
      const long long m = tile_m + row;
      const int f = tile_n + BN / 64 * 64 + run * 8;
      if (m >= prm.npq || f >= prm.kg) continue;
      uint32_t v[4];
      detail::lds_128(tail + (row * kRuns + run) * 16, v);
      *reinterpret_cast<uint4*>(gY + (m * prm.y_sq + f) * 2) = make_uint4(v[0], v[1], v[2], v[3]);
    }
  }
}

/// Note [fused silu]: SiLU in place over a tile's output buffer, `kBytes` of 16-bit values in any
/// layout (every byte of it is the tile's or unused), by the `kThreads` threads of the caller, a
/// 16-byte run each per step. The buffer was written and those threads synchronised before; they
/// fence and synchronise again before the store reads it.
template <class Math, int kBytes, int kThreads>
__device__ __forceinline__ void silu_output_buffer(uint32_t out_base, int tid) {
  using T = typename Math::Storage;
  static_assert(Math::kBytes == 2 && kBytes % 16 == 0, "output buffers hold 16-bit runs of 16 bytes");
  for (int i = tid; i < kBytes / 16; i += kThreads) {
    uint32_t v[4];
    detail::lds_128(out_base + i * 16, v);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      __align__(4) T pair[2];
      *reinterpret_cast<uint32_t*>(pair) = v[k];
      pair[0] = Math::from_float(silu(Math::to_float(pair[0])));
      pair[1] = Math::from_float(silu(Math::to_float(pair[1])));
      v[k] = *reinterpret_cast<const uint32_t*>(pair);
    }
    detail::sts_128(out_base + i * 16, v);
  }
}

template <class Tile, class Math, GatherForm kA, GatherForm kB, bool kTensorMaps = false, bool kPersistent = false>
__global__ void __launch_bounds__(Tile::kThreads, Tile::kMinBlocks)
    implicit_mma_kernel(const __grid_constant__ ImplicitMmaParams prm) {
  using T = typename Math::Storage;
  constexpr int BM = Tile::kBlockM, BN = Tile::kBlockN, NT = Tile::kThreads, S = Tile::kStages;
  constexpr int kPitch = Tile::kRowPitch;  // bytes per shared row
  constexpr int EB = Math::kBytes;
  constexpr int RB = Tile::kStageRowBytes;
  constexpr int BK = RB / EB;  // reduction rows per stage
  constexpr int V = 16 / EB;   // rows per 16-byte vector
  constexpr int VR = Tile::kRowVectors;
  constexpr int FM = Tile::kFragsM, FN = Tile::kFragsN;
  static_assert((kA != GatherForm::Element && kB != GatherForm::Element) || Tile::kElementGather,
                "the tile has the element form");
  // Note [mma tf32 transposed filters]: mma.sync tiles load TF32 transposed filters through
  // registers; wgmma transposes only 16-bit operands.
  static_assert(kB != GatherForm::Transposed || EB == 2 || !Tile::kWarpgroup,
                "TF32 transposed filters: mma.sync tiles only");
  // Note [mma tf32 pixel runs]: TF32 transposed images reach the MMA through registers.
  constexpr bool kImageRegisters = kA == GatherForm::Transposed && EB == 4;
  static_assert(!kImageRegisters || kB == GatherForm::Vector || !Tile::kWarpgroup,
                "TF32 transposed images on warpgroup tiles come with vector filters");
  static_assert(!kPersistent || kTensorMaps, "persistent tiles load through tensor maps");
  static_assert(!kTensorMaps || (Tile::kWarpgroup && EB == 2 &&
                                 ((kA == GatherForm::Vector && kB != GatherForm::Element) ||
                                  (kA == GatherForm::Transposed && kB == GatherForm::Transposed))),
                "tensor-map loads: warpgroup tiles, 16-bit, vector images (vector or N-major filters) or both "
                "transposed");
  // Note [mma gather forms]: the image tile's bytes in a stage, then the filter tile's.
  constexpr int kPitchA = EB == 4 ? Tile::kPitchA32 : Tile::kPitchA;  // transposed image rows
  constexpr int kPitchB = EB == 4 ? Tile::kPitchB32 : Tile::kPitchB;  // transposed filter rows
  constexpr int kABytes = kA == GatherForm::Transposed && !Tile::kWarpgroup ? BK * kPitchA : BM * kPitch;
  extern __shared__ __align__(128) unsigned char smem[];
  // Note [wgmma shared layout]: warpgroup stages start on a 1024-byte boundary.
  const uint32_t smem_raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t smem_base = Tile::kWarpgroup ? (smem_raw + 1023u) & ~1023u : smem_raw;
  auto image_row = [&](int stage, int pixel) { return smem_base + stage * Tile::kStageBytes + pixel * kPitch; };
  auto filter_row = [&](int stage, int f) { return smem_base + stage * Tile::kStageBytes + kABytes + f * kPitch; };
  // Note [mma tf32 pixel runs]: in a warpgroup tile's TF32 image stage, the 16-byte chunk `vec`
  // (pixels 4 vec .. 4 vec + 3) of reduction row kk, XORed with 2 (kk % 4).
  auto pixel_run_chunk = [&](int stage, int kk, int vec) {
    return image_row(stage, 0) + kk * BM * 4 + ((vec ^ ((kk & 3) << 1)) << 4);
  };
  auto image_t_row = [&](int stage, int kk) { return smem_base + stage * Tile::kStageBytes + kk * kPitchA; };
  auto filter_t_row = [&](int stage, int kk) { return smem_base + stage * Tile::kStageBytes + kABytes + kk * kPitchB; };
  // The shared address of 16-byte vector `vec` of a pixel's or a filter's row (vector form).
  auto image_chunk = [&](int stage, int pixel, int vec) {
    if constexpr (Tile::kWarpgroup) return wgmma::swizzled_chunk(image_row(stage, 0), pixel, vec);
    return image_row(stage, pixel) + vec * 16;
  };
  auto filter_chunk = [&](int stage, int f, int vec) {
    if constexpr (Tile::kWarpgroup) return wgmma::swizzled_chunk(filter_row(stage, 0), f, vec);
    return filter_row(stage, f) + vec * 16;
  };

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const long long block_m = static_cast<long long>(blockIdx.x) * BM;
  const int block_n = blockIdx.y * BN;
  // z = (group * atomic_slices + a) * splits + rank; the block's slice of the rows is a * splits + rank.
  const int per_group = prm.splits * prm.atomic_slices;
  const int group = blockIdx.z / per_group, slice = blockIdx.z - group * per_group, rank = slice % prm.splits;
  const T* __restrict__ gX = static_cast<const T*>(prm.x) + group * prm.x_group;
  const T* __restrict__ gW = static_cast<const T*>(prm.w) + group * prm.w_group;

  // The pixels this thread gathers: vector form, chunk c = tid + i*NT is (pixel c/VR, vector c%VR);
  // transposed form, the V pixels from (tid % (BM/V)) * V for every row it copies (one window: their
  // start addresses differ by their images' stride, 1; or a run of a 1x1 layer's plane, Note [mma
  // tf32 pixel runs]); element form, pixel tid % BM.
  constexpr int kPix = kA == GatherForm::Vector ? BM * VR / NT : 1;
  long long rStart[kPix];
  int rH0[kPix], rW0[kPix];
#pragma unroll
  for (int i = 0; i < kPix; ++i) {
    const int pixel = kA == GatherForm::Vector       ? (tid + i * NT) / VR
                      : kA == GatherForm::Transposed ? (tid % (BM / V)) * V
                                                     : tid % BM;
    const long long m = block_m + pixel;
    if (m < prm.npq) {
      int n, p, q;
      pixel_coords(prm, m, n, p, q);
      rH0[i] = window_origin(p, prm.stride_h, prm.pad_h);
      rW0[i] = window_origin(q, prm.stride_w, prm.pad_w);
      rStart[i] = n * prm.x_sn + rH0[i] * prm.x_sh + rW0[i] * prm.x_sw;
    } else {
      rH0[i] = rW0[i] = -(1 << 30);  // Note [padding predicates] (implicit_precomp/kernel.cuh)
      rStart[i] = 0;
    }
  }
  // Note [dependent launch]: nothing above reads memory another kernel writes; everything below may.
  detail::wait_for_prerequisite_grids();
  if constexpr (kPersistent) detail::allow_dependent_grids();  // one wave: its blocks take every tile
  auto inside = [&](int i, const int4& row) {
    return static_cast<unsigned>(rH0[i] + row.y) < static_cast<unsigned>(prm.H) &&
           static_cast<unsigned>(rW0[i] + row.z) < static_cast<unsigned>(prm.W);
  };

  // Note [mma table prefetch]: the offset-table rows a thread's copies of a stage need, read one
  // stage ahead into registers, so that issuing a stage's copies never waits on a table load (with
  // few blocks an SM, as a cluster split has, that wait was most of a stage's time). The element
  // forms read many rows a thread and keep reading them in place.
  constexpr int kVecsA = BM / V, kVecsB = BN / V;
  constexpr int kRowsA = kA == GatherForm::Vector ? 1 : kA == GatherForm::Transposed ? BK * kVecsA / NT : 0;
  constexpr int kRowsB = kB == GatherForm::Transposed ? BK * kVecsB / NT : 0;
  static_assert(kA != GatherForm::Transposed || (BK * kVecsA) % NT == 0, "transposed images: equal chunks");
  static_assert(kB != GatherForm::Transposed || (BK * kVecsB) % NT == 0, "transposed filters: equal chunks");
  // Vector filters under transposed images read their own row (vector images share theirs).
  constexpr bool kOwnFilterRow = kB == GatherForm::Vector && kA != GatherForm::Vector;
  struct TableRows {
    int4 a[kRowsA > 0 ? kRowsA : 1];
    int b[kRowsB > 0 ? kRowsB : 1];
    int filter_offset;  // kOwnFilterRow: w's offset of row k0 + (tid % VR) * V
  };
  auto fetch_rows = [&](int k0, TableRows& t) {
    if constexpr (kA == GatherForm::Vector) {
      t.a[0] = __ldg(prm.table + k0 + (tid % VR) * V);
    } else if constexpr (kA == GatherForm::Transposed) {
#pragma unroll
      for (int i = 0; i < kRowsA; ++i) t.a[i] = __ldg(prm.table + k0 + tid / kVecsA + i * (NT / kVecsA));
    }
    if constexpr (kOwnFilterRow) t.filter_offset = __ldg(&prm.table[k0 + (tid % VR) * V].w);
    if constexpr (kB == GatherForm::Transposed) {
#pragma unroll
      for (int i = 0; i < kRowsB; ++i) t.b[i] = __ldg(&prm.table[k0 + tid / kVecsB + i * (NT / kVecsB)].w);
    }
  };

  auto load_images = [&](int stage, int k0, const TableRows& t) {
    if constexpr (kA == GatherForm::Vector) {
      const int vec = tid % VR;  // the same vector of rows for every chunk of this thread
      const int4 row = t.a[0];
#pragma unroll
      for (int i = 0; i < kPix; ++i) {
        const int pixel = (tid + i * NT) / VR;
        const bool ok = inside(i, row);
        detail::cp_async_16(image_chunk(stage, pixel, vec), ok ? gX + rStart[i] + row.x : gX, ok);
      }
    } else if constexpr (kA == GatherForm::Transposed) {
      const int vec = tid % kVecsA;
#pragma unroll
      for (int i = 0; i < kRowsA; ++i) {
        const int kk = tid / kVecsA + i * (NT / kVecsA);
        const int4 row = t.a[i];
        const bool ok = inside(0, row);
        uint32_t dst;
        if constexpr (Tile::kWarpgroup && kImageRegisters)
          dst = pixel_run_chunk(stage, kk, vec);
        else if constexpr (Tile::kWarpgroup)
          dst = wgmma::n_major_chunk(image_row(stage, 0), BK, kk, vec);
        else
          dst = image_t_row(stage, kk) + vec * 16;
        detail::cp_async_16(dst, ok ? gX + rStart[0] + row.x : gX, ok);
      }
    } else {
      const int pixel = tid % BM;
#pragma unroll
      for (int i = 0; i < BM * BK / NT; ++i) {
        const int kk = tid / BM + i * (NT / BM);
        const int4 row = __ldg(prm.table + k0 + kk);
        const bool ok = inside(0, row);
        const uint32_t dst = image_row(stage, pixel) + kk * EB;
        if constexpr (EB == 4) {
          detail::cp_async_4(dst, ok ? gX + rStart[0] + row.x : gX, ok);
        } else {
          const unsigned short v = ok ? __ldg(reinterpret_cast<const unsigned short*>(gX + rStart[0] + row.x)) : 0;
          asm volatile("st.shared.u16 [%0], %1;\n" ::"r"(dst), "h"(v));
        }
      }
    }
  };
  auto load_filters = [&](int stage, int k0, const TableRows& t) {
    if constexpr (kB == GatherForm::Vector) {
      const int vec = tid % VR;
      const bool row_ok = k0 + vec * V < prm.rows;
      int w_offset;
      if constexpr (kOwnFilterRow)
        w_offset = t.filter_offset;
      else
        w_offset = t.a[0].w;
#pragma unroll
      for (int i = 0; i < BN * VR / NT; ++i) {
        const int f = (tid + i * NT) / VR;
        const bool ok = row_ok && block_n + f < prm.kg;
        detail::cp_async_16(filter_chunk(stage, f, vec), ok ? gW + (block_n + f) * prm.w_sk + w_offset : gW, ok);
      }
    } else if constexpr (kB == GatherForm::Transposed) {
      // Filters contiguous (w.stride_k == 1, K/G a multiple of V): V filters of one row per copy.
      const int vec = tid % kVecsB;
      const bool f_ok = block_n + vec * V < prm.kg;
#pragma unroll
      for (int i = 0; i < kRowsB; ++i) {
        const int kk = tid / kVecsB + i * (NT / kVecsB);
        const int w_offset = t.b[i];
        const bool ok = f_ok && k0 + kk < prm.rows;
        const uint32_t dst = Tile::kWarpgroup ? wgmma::n_major_chunk(filter_row(stage, 0), BK, kk, vec)
                                              : filter_t_row(stage, kk) + vec * 16;
        detail::cp_async_16(dst, ok ? gW + block_n + vec * V + w_offset : gW, ok);
      }
    } else {
#pragma unroll
      for (int i = 0; i < BN * BK / NT; ++i) {
        const int e = tid + i * NT, kk = e % BK, f = e / BK;
        const int w_offset = __ldg(&prm.table[k0 + kk].w);
        const bool ok = k0 + kk < prm.rows && block_n + f < prm.kg;
        const uint32_t dst = filter_row(stage, f) + kk * EB;
        if constexpr (EB == 4) {
          detail::cp_async_4(dst, ok ? gW + (block_n + f) * prm.w_sk + w_offset : gW, ok);
        } else {
          const unsigned short v =
              ok ? __ldg(reinterpret_cast<const unsigned short*>(gW + (block_n + f) * prm.w_sk + w_offset)) : 0;
          asm volatile("st.shared.u16 [%0], %1;\n" ::"r"(dst), "h"(v));
        }
      }
    }
  };
  auto load_stage = [&](int stage, int k0, const TableRows& t) {
    load_images(stage, k0, t);
    load_filters(stage, k0, t);
  };

  float acc[FM][FN][4];
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.0f;

  // This block's row tiles: all of them, or its slice (Note [mma cluster split], [mma atomic slices]).
  const int k_total = (prm.rows + BK - 1) / BK;
  const int kt_begin = min(slice * prm.k_tiles_per_split, k_total);
  const int k_tiles = min(kt_begin + prm.k_tiles_per_split, k_total) - kt_begin;
  // Rows of the stages this block copies, [k_first, k_end); `ahead` holds the next stage's table rows.
  const int k_first = kt_begin * BK, k_end = (kt_begin + k_tiles) * BK;
  // Stages copied ahead of the one being multiplied. Note [wgmma mainloop]: with 4 or more stages a
  // wgmma group stays in flight across the next iteration's barrier, and its stage is kept back.
  // Registers an in-flight wgmma reads cannot be reloaded under it: image registers wait for every group.
  constexpr int kMmaInFlight = Tile::kWarpgroup && S >= 4 && !kImageRegisters ? 1 : 0;
  const int wm = warp % Tile::kWarpsM, wn = warp / Tile::kWarpsM;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  // Note [wgmma shared layout]: warpgroup wg's wgmma steps over stage st, one commit group. A k-step
  // is 32 bytes on in a K-major operand, 16 rows of 128 bytes on in an M- or N-major one (the
  // descriptor counts 16-byte units). An M-major image stage holds warpgroup wg's 64 pixels as its
  // block wg.
  auto multiply_stage = [&](auto& d, int st, int wg) {
    if constexpr (kImageRegisters) {
      // Note [mma tf32 pixel runs]: thread (g, t) of warp w loads pixels 16w + g (+ 8) of the
      // warpgroup's 64 at rows t (+ 4) of each 8-row k-step, rounded to TF32; the rows' 16-byte chunks
      // sit XORed with 2 (row % 4), so a load's 32 lanes meet 32 banks.
      const int g = lane >> 2, t = lane & 3;
      const int pixel = wg * 64 + (warp % 4) * 16 + g;
      uint32_t a[RB / 32][4];
#pragma unroll
      for (int ks = 0; ks < RB / 32; ++ks)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int kk = ks * 8 + t + (e >> 1) * 4, px = pixel + (e & 1) * 8;
          const uint32_t addr = pixel_run_chunk(st, kk, px >> 2) + (px & 3) * 4;
          a[ks][e] = detail::lds_u32(addr);
          Math::convert_fragment(a[ks][e]);
        }
      const uint64_t db = wgmma::descriptor(filter_row(st, 0));
      wgmma::pin(d);
      wgmma::fence();
#pragma unroll
      for (int ks = 0; ks < RB / 32; ++ks) wgmma::mma_async_tf32_registers<BN>(d, a[ks], db + 2 * ks);
      wgmma::commit();
    } else {
      constexpr bool kMMajorA = kA == GatherForm::Transposed, kNMajorB = kB == GatherForm::Transposed;
      constexpr int kStepMN = 16 * wgmma::kRowBytes / 16;
      constexpr int kStepA = kMMajorA ? kStepMN : 2, kStepB = kNMajorB ? kStepMN : 2;
      constexpr uint32_t kBlockBytes = BK * wgmma::kRowBytes;  // one block of 64 pixels or filters
      const uint64_t da = kMMajorA ? wgmma::descriptor(image_row(st, 0) + wg * kBlockBytes, kBlockBytes)
                                   : wgmma::descriptor(image_row(st, wg * 64));
      const uint64_t db =
          kNMajorB ? wgmma::descriptor(filter_row(st, 0), kBlockBytes) : wgmma::descriptor(filter_row(st, 0));
      wgmma::pin(d);
      wgmma::fence();
#pragma unroll
      for (int ks = 0; ks < RB / 32; ++ks)
        wgmma::mma_async<T, BN, kMMajorA, kNMajorB>(d, da + kStepA * ks, db + kStepB * ks);
      wgmma::commit();
    }
  };
#endif
  if constexpr (kTensorMaps) {
    // Note [wgmma tensor-map loads].
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    __shared__ __align__(8) uint64_t landed[S];  // one barrier a stage, one phase per fill
    float(&d)[FN * 4] = reinterpret_cast<float(&)[FN * 4]>(acc);
    const int wg = warp / 4;
    auto origin_of = [&](long long first_pixel, int first_filter) {
      return tensor_map_tile_origin(prm, first_pixel, first_filter);
    };
    if (tid == 0) {
      detail::prefetch_tensor_map(prm.image_map);
      detail::prefetch_tensor_map(prm.filter_map);
      if constexpr (kPersistent) detail::prefetch_tensor_map(prm.output_map);
#pragma unroll
      for (int s = 0; s < S; ++s) detail::mbarrier_init(&landed[s]);
    }
    __syncthreads();
    using TileOrigin = TensorMapTileOrigin;
    auto issue = [&](int st, int kt, const TileOrigin& o, const int4 row) {
      issue_tensor_map_stage<BM, BN, kA, kB>(prm, k_first + kt * BK, row, o, image_row(st, 0), filter_row(st, 0),
                                             &landed[st]);
    };
    // A stage is refilled once every warpgroup has waited for the wgmma groups that read it.
    if constexpr (kPersistent) {
      // Note [wgmma persistent tiles].
      static_assert(kA == GatherForm::Vector && EB == 2, "persistent tiles: forward and dgrad steps, 16-bit y");
      const int tiles_n = (prm.kg + BN - 1) / BN;
      const long long tiles = static_cast<long long>((prm.npq + BM - 1) / BM) * tiles_n;
      auto tile_origin = [&](long long tile) {
        const long long tm = tile / tiles_n;
        return origin_of(tm * BM, static_cast<int>(tile - tm * tiles_n) * BN);
      };
      // Thread 0's cursor over the stages to fill: every row tile of this block's tiles in order,
      // stage `fills % S` next, whatever tile it belongs to.
      long long fill_tile = blockIdx.x;
      int fill_kt = 0, fills = 0;
      TileOrigin fill_at = tile_origin(fill_tile);
      auto issue_next = [&] {
        if (fill_tile >= tiles) return;
        issue(fills % S, fill_kt, fill_at, __ldg(prm.table + k_first + fill_kt * BK));
        ++fills;
        if (++fill_kt == k_tiles) {
          fill_kt = 0;
          fill_tile += gridDim.x;
          if (fill_tile < tiles) fill_at = tile_origin(fill_tile);
        }
      };
      if (tid == 0)
        for (int s = 0; s < S; ++s) issue_next();
      const uint32_t out_base = smem_base + S * Tile::kStageBytes;  // BN/64 blocks of BM rows x 128 bytes
      int used = 0;                                                 // stages consumed, over all of this block's tiles
      for (long long tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
#pragma unroll
        for (int i = 0; i < FN * 4; ++i) d[i] = 0.0f;
        for (int kt = 0; kt < k_tiles; ++kt, ++used) {
          const int st = used % S;
          detail::mbarrier_wait(&landed[st], (used / S) & 1);
          multiply_stage(d, st, wg);
          wgmma::wait<0>();
          wgmma::pin(d);
          // The last stage's barrier also hands the output buffer over: the previous tile's store
          // has read it.
          if (tid == 0 && kt == k_tiles - 1) detail::bulk_wait_read<0>();
          __syncthreads();  // stage st is read by no warpgroup
          if (tid == 0) issue_next();
        }
        const long long tm = tile / tiles_n;
        const long long tile_m = tm * BM;
        const int tile_n = static_cast<int>(tile - tm * tiles_n) * BN;
        // Warp w holds pixels 16w..16w+15 (Note [wgmma mainloop]).
        write_output_buffer<Math, BN>(prm, d, out_base, BM, warp * 16, tile_m, tile_n, lane);
        if (prm.activation == kActivationSiLU) {  // Note [fused silu]: on the buffer, accumulators dead
          __syncthreads();
          silu_output_buffer<Math, BM * BN * 2, Tile::kThreads>(out_base, tid);
        }
        detail::fence_shared_for_bulk_copy();
        __syncthreads();  // the tile is in the output buffer
        if (tid == 0) store_output_buffer<BM, BN>(prm, out_base, tile_m, tile_n);
      }
      if (tid == 0) detail::bulk_wait_read<0>();  // the shared memory outlives the last store's reads
      return;
    }
    const TileOrigin at = origin_of(block_m, block_n);
    constexpr int kAheadTma = S - kMmaInFlight;
    // Note [offset table prefetch]: thread 0 holds the row of the next stage it fills.
    int4 next_row{};
    auto issue_ahead = [&](int kt) {
      const int k0 = k_first + kt * BK;
      const int4 row = next_row;
      if (kt + 1 < k_tiles) next_row = __ldg(prm.table + k0 + BK);
      prefetch_table_row(prm, k0 + kTablePrefetchStages * BK, k_end);
      issue(kt % S, kt, at, row);
    };
    if (tid == 0) {
      if (k_tiles > 0) next_row = __ldg(prm.table + k_first);
      for (int s = 1; s < kTablePrefetchStages; ++s) prefetch_table_row(prm, k_first + s * BK, k_end);
      for (int kt = 0; kt < kAheadTma && kt < k_tiles; ++kt) issue_ahead(kt);
    }
    for (int kt = 0; kt < k_tiles; ++kt) {
      const int st = kt % S;
      detail::mbarrier_wait(&landed[st], (kt / S) & 1);
      multiply_stage(d, st, wg);
      wgmma::wait<kMmaInFlight>();
      wgmma::pin(d);
      if (kt + kAheadTma < k_tiles) {
        __syncthreads();  // stage kt - kMmaInFlight is read by no warpgroup
        if (tid == 0) issue_ahead(kt + kAheadTma);
      }
    }
    wgmma::wait<0>();
    wgmma::pin(d);
#else
    __trap();    // the planner picks tensor-map loads only with warpgroup tiles, on sm_90
#endif
  } else {
    TableRows ahead;
    if (k_tiles > 0) fetch_rows(k_first, ahead);
    constexpr int kAhead = S - 1 - kMmaInFlight;
    static_assert(kAhead >= 1, "a pipeline of at least one stage ahead");
#pragma unroll
    for (int s = 0; s < kAhead; ++s) {
      if (s < k_tiles) {
        load_stage(s, k_first + s * BK, ahead);
        if (k_first + (s + 1) * BK < k_end) fetch_rows(k_first + (s + 1) * BK, ahead);
      }
      detail::cp_async_commit();
    }
    // ldmatrix lane addresses (Note [mma shared layout]): A, lanes 0-15 rows 0-15 at byte 0, lanes
    // 16-31 the same rows at byte 16; B, lane l reads filter (l & 7) + 8 (l >> 4) at byte 16 ((l >> 3) & 1).
    // Transposed (Note [mma gather forms]): the same four 8x8 matrices, addressed by their rows of 8
    // pixels or filters: lane l gives row (l & 7) of matrix l >> 3.
    const int a_row = wm * Tile::kWarpM + (lane & 15), a_byte = (lane >> 4) * 16;
    const int b_row = wn * Tile::kWarpN + (lane & 7) + ((lane >> 4) << 3), b_byte = ((lane >> 3) & 1) * 16;
    const int mat = lane >> 3;
    const int at_kk = (mat >> 1) * 8 + (lane & 7), at_byte = (wm * Tile::kWarpM + (mat & 1) * 8) * 2;
    const int bt_kk = (mat & 1) * 8 + (lane & 7), bt_byte = (wn * Tile::kWarpN + (mat >> 1) * 8) * 2;
    const int g_pixel = lane >> 2, t_row = lane & 3;  // TF32 transposed images: fragment (row, column)
    auto load_ahead = [&](int kt) {                   // the copies of stage kt + kAhead, one commit group
      const int next = kt + kAhead;
      if (next < k_tiles) {
        const int k0 = k_first + next * BK;
        load_stage(next % S, k0, ahead);
        if (k0 + BK < k_end) fetch_rows(k0 + BK, ahead);
      }
      detail::cp_async_commit();
    };
    if constexpr (Tile::kWarpgroup) {
      // Note [wgmma mainloop].
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
      static_assert(FM == 1, "a warp's 16 pixels are one wgmma fragment row");
      float(&d)[FN * 4] = reinterpret_cast<float(&)[FN * 4]>(acc);
      const int wg = warp / 4;
      // TF32: wgmma reads the fp32 bits and ignores the low 13, which truncates. Each thread rounds its
      // own landed copies to nearest first, as the mma.sync path rounds its fragments.
      auto round_own_copies = [&](int stage) {
        const int vec = tid % VR;
#pragma unroll
        for (int i = 0; i < kPix; ++i)  // transposed images round in registers (kImageRegisters)
          if constexpr (kA == GatherForm::Vector)
            detail::round_shared_to_tf32(image_chunk(stage, (tid + i * NT) / VR, vec));
#pragma unroll
        for (int i = 0; i < BN * VR / NT; ++i)
          detail::round_shared_to_tf32(filter_chunk(stage, (tid + i * NT) / VR, vec));
      };
      for (int kt = 0; kt < k_tiles; ++kt) {
        detail::cp_async_wait<kAhead - 1>();
        if constexpr (EB == 4) round_own_copies(kt % S);
        wgmma::fence_shared_for_async();
        __syncthreads();  // stage kt landed for all; stage kt-1-kMmaInFlight is no longer read
        const int st = kt % S;
        multiply_stage(d, st, wg);
        load_ahead(kt);
        wgmma::wait<kMmaInFlight>();
        wgmma::pin(d);
      }
      wgmma::wait<0>();
      wgmma::pin(d);
#else
      __trap();  // the planner picks warpgroup tiles only on sm_90 (common/wgmma.cuh)
#endif
    } else {
      for (int kt = 0; kt < k_tiles; ++kt) {
        detail::cp_async_wait<kAhead - 1>();
        __syncthreads();  // stage kt visible to all; stage kt-1 no longer read by anyone
        load_ahead(kt);
        const int st = kt % S;
#pragma unroll
        for (int ks = 0; ks < RB / 32; ++ks) {  // MMA steps of 32 bytes
          uint32_t a[FM][4], b[FN / 2][4];
#pragma unroll
          for (int i = 0; i < FM; ++i) {
            if constexpr (kA == GatherForm::Transposed && EB == 4) {
              // Note [mma tf32 pixel runs]: (pixel g, row t), (g + 8, t), (g, t + 4), (g + 8, t + 4).
              detail::lds_tf32_fragment(
                  a[i], image_t_row(st, ks * 8 + t_row) + (wm * Tile::kWarpM + i * 16 + g_pixel) * 4, 32, 4 * kPitchA);
            } else if constexpr (kA == GatherForm::Transposed)
              detail::ldmatrix_x4_trans(a[i], image_t_row(st, ks * 16 + at_kk) + at_byte + i * 32);
            else
              detail::ldmatrix_x4(a[i], image_row(st, a_row + i * 16) + ks * 32 + a_byte);
#pragma unroll
            for (int r = 0; r < 4; ++r) Math::convert_fragment(a[i][r]);
          }
#pragma unroll
          for (int j = 0; j < FN / 2; ++j) {
            if constexpr (kB == GatherForm::Transposed && EB == 4) {
              // Note [mma tf32 transposed filters]: (row t, filter g), (t + 4, g), then filter g + 8.
              detail::lds_tf32_fragment(
                  b[j], filter_t_row(st, ks * 8 + t_row) + (wn * Tile::kWarpN + j * 16 + g_pixel) * 4, 4 * kPitchB, 32);
            } else if constexpr (kB == GatherForm::Transposed)
              detail::ldmatrix_x4_trans(b[j], filter_t_row(st, ks * 16 + bt_kk) + bt_byte + j * 32);
            else
              detail::ldmatrix_x4(b[j], filter_row(st, b_row + j * 16) + ks * 32 + b_byte);
#pragma unroll
            for (int r = 0; r < 4; ++r) Math::convert_fragment(b[j][r]);
          }
#pragma unroll
          for (int i = 0; i < FM; ++i)
#pragma unroll
            for (int j = 0; j < FN; ++j) Math::mma(acc[i][j], a[i], b[j / 2][(j % 2) * 2], b[j / 2][(j % 2) * 2 + 1]);
        }
      }
    }
    detail::cp_async_wait<0>();
  }                                 // the gather's mainloops
  detail::allow_dependent_grids();  // Note [dependent launch]: the epilogue is left

  // Epilogue: fragment c0,c1 is (pixel g, filters 2t, 2t+1), c2,c3 the pixel g + 8; alpha, beta (never
  // reading y when 0), bias and ReLU in fp32, one rounding to the storage type at the store.
  T* __restrict__ gY = static_cast<T*>(prm.y) + group * prm.y_group;
  const float* gBias = prm.bias ? prm.bias + static_cast<long long>(group) * prm.kg : nullptr;
  const int g = lane >> 2, t4 = lane & 3;
  auto finish = [&](float v, int f, const T* old) {
    v *= prm.alpha;
    if (prm.beta != 0.0f) v = fmaf(prm.beta, Math::to_float(*old), v);
    if (gBias) v += __ldg(gBias + f);
    return activate(v, prm.activation);
  };
  if (prm.splits > 1 || prm.atomic_slices > 1) {
    // Note [mma cluster split], Note [mma atomic slices].
    namespace cg = cooperative_groups;
    const bool clustered = prm.splits > 1, atomic = prm.atomic_slices > 1;
    const bool along_pixels = prm.store_pixels_fastest;  // y's contiguous axis: pixels, else filters
    __syncthreads();                                     // every warp is done with the pipeline's buffers
    float* sOut = reinterpret_cast<float*>(smem);
    auto out_index = [&](int pixel, int col) {
      return along_pixels ? col * Tile::kOutPitchM + pixel : pixel * Tile::kOutPitch + col;
    };
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = wm * Tile::kWarpM + i * 16 + g + half * 8;
#pragma unroll
        for (int j = 0; j < FN; ++j) {
          const int col = wn * Tile::kWarpN + j * 8 + t4 * 2;
          sOut[out_index(row, col)] = acc[i][j][half * 2];
          sOut[out_index(row, col + 1)] = acc[i][j][half * 2 + 1];
        }
      }
    if (clustered)
      cg::this_cluster().sync();  // every partial tile written and visible to the cluster
    else
      __syncthreads();
    constexpr int kRun = 8;  // outputs a thread sums and stores together: 16 bytes of a 16-bit y
    // A rank's rows: whole runs of pixels where the runs step along pixels.
    const int share = (BM + prm.splits - 1) / prm.splits;
    const int rows = !clustered ? BM : along_pixels ? (share + kRun - 1) / kRun * kRun : share;
    const int r0 = min(rank * rows, BM), r1 = min(r0 + rows, BM), runs_per_col = (r1 - r0) / kRun;
    const int runs = along_pixels ? BN * runs_per_col : (r1 - r0) * (BN / kRun);
    for (int u = tid; u < runs; u += NT) {
      int pixel, col;  // the run's first output; the run steps along pixels or along filters
      if (along_pixels) {
        col = u / runs_per_col;
        pixel = r0 + (u - col * runs_per_col) * kRun;
      } else {
        pixel = r0 + u / (BN / kRun);
        col = (u % (BN / kRun)) * kRun;
      }
      float v[kRun] = {};
      const int at = out_index(pixel, col);
      for (int r = 0; r < prm.splits; ++r) {  // rank order: the same sum on every run
        const float* src = clustered ? cg::this_cluster().map_shared_rank(sOut, r) + at : sOut + at;
        const float4 lo = *reinterpret_cast<const float4*>(src), hi = *reinterpret_cast<const float4*>(src + 4);
        v[0] += lo.x, v[1] += lo.y, v[2] += lo.z, v[3] += lo.w, v[4] += hi.x, v[5] += hi.y, v[6] += hi.z, v[7] += hi.w;
      }
      auto element = [&](int e, long long& m, int& f) {
        m = block_m + pixel + (along_pixels ? e : 0);
        f = block_n + col + (along_pixels ? 0 : e);
        if (m >= prm.npq || f >= prm.kg) return static_cast<T*>(nullptr);
        int n, p, q;
        pixel_coords(prm, m, n, p, q);
        return gY + n * prm.y_sn + p * prm.y_sp + q * prm.y_sq + f * prm.y_sk;
      };
      long long m0, m7;
      int f0, f7;
      T* first = element(0, m0, f0);
      T* last = element(kRun - 1, m7, f7);
      if (first && last == first + kRun - 1 && reinterpret_cast<uintptr_t>(first) % 16 == 0) {
        if (atomic) {
#pragma unroll
          for (int e = 0; e < kRun; ++e) v[e] *= prm.alpha;
          detail::red_add_run(first, v);
        } else {
          __align__(16) T out[kRun];
#pragma unroll
          for (int e = 0; e < kRun; ++e) out[e] = Math::from_float(finish(v[e], along_pixels ? f0 : f0 + e, first + e));
#pragma unroll
          for (int k = 0; k < kRun * EB / 16; ++k)
            reinterpret_cast<uint4*>(first)[k] = reinterpret_cast<const uint4*>(out)[k];
        }
        continue;
      }
      for (int e = 0; e < kRun; ++e) {  // a run across y's edges or its layout's seams
        long long m;
        int f;
        T* dst = element(e, m, f);
        if (!dst) continue;
        if (atomic)
          atomicAdd(dst, Math::from_float(prm.alpha * v[e]));
        else
          *dst = Math::from_float(finish(v[e], f, dst));
      }
    }
    if (clustered) cg::this_cluster().sync();  // no block leaves while a peer still reads its shared memory
    return;
  }
  if (prm.staged_store) {
    // Note [mma staged epilogue].
    __syncthreads();  // every warp is done with the pipeline's buffers
    float* sOut = reinterpret_cast<float*>(smem);
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = wm * Tile::kWarpM + i * 16 + g + half * 8;
#pragma unroll
        for (int j = 0; j < FN; ++j) {
          const int col = wn * Tile::kWarpN + j * 8 + t4 * 2;
          const int f = block_n + col;
          const float b0 = gBias && f < prm.kg ? __ldg(gBias + f) : 0.0f;
          const float b1 = gBias && f + 1 < prm.kg ? __ldg(gBias + f + 1) : 0.0f;
          *reinterpret_cast<float2*>(sOut + row * Tile::kOutPitch + col) =
              make_float2(fmaf(prm.alpha, acc[i][j][half * 2], b0), fmaf(prm.alpha, acc[i][j][half * 2 + 1], b1));
        }
      }
    __syncthreads();
    constexpr int kRun = 16 / EB;     // filters in one 16-byte run
    constexpr int kRuns = BN / kRun;  // runs per pixel
    for (int c = tid; c < BM * kRuns; c += NT) {
      const int pixel = c / kRuns, col = (c % kRuns) * kRun;
      const long long m = block_m + pixel;
      const int f = block_n + col;
      if (m >= prm.npq || f >= prm.kg) continue;
      int n, p, q;
      pixel_coords(prm, m, n, p, q);
      T* dst = gY + n * prm.y_sn + p * prm.y_sp + q * prm.y_sq + f;
      const float* src = sOut + pixel * Tile::kOutPitch + col;
      if (f + kRun <= prm.kg) {
        __align__(16) T old[kRun];
        if (prm.beta != 0.0f) *reinterpret_cast<uint4*>(old) = *reinterpret_cast<const uint4*>(dst);
        __align__(16) T out[kRun];
#pragma unroll
        for (int e = 0; e < kRun; ++e) {
          float v = src[e];
          if (prm.beta != 0.0f) v = fmaf(prm.beta, Math::to_float(old[e]), v);
          out[e] = Math::from_float(activate(v, prm.activation));
        }
        *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(out);
      } else {
        for (int e = 0; e < prm.kg - f; ++e) {  // the last filters of the layer
          float v = src[e];
          if (prm.beta != 0.0f) v = fmaf(prm.beta, Math::to_float(dst[e]), v);
          dst[e] = Math::from_float(activate(v, prm.activation));
        }
      }
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < FM; ++i) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const long long m = block_m + wm * Tile::kWarpM + i * 16 + g + half * 8;
      if (m >= prm.npq) continue;
      int n, p, q;
      pixel_coords(prm, m, n, p, q);
      T* yPix = gY + n * prm.y_sn + p * prm.y_sp + q * prm.y_sq;
#pragma unroll
      for (int j = 0; j < FN; ++j) {
        const int f = block_n + wn * Tile::kWarpN + j * 8 + t4 * 2;
        if (f >= prm.kg) continue;
        T* dst = yPix + f * prm.y_sk;
        const float v0 = acc[i][j][half * 2], v1 = acc[i][j][half * 2 + 1];
        if (prm.pair_store && f + 1 < prm.kg) {
          if constexpr (EB == 2) {
            __align__(4)
                T out[2] = {Math::from_float(finish(v0, f, dst)), Math::from_float(finish(v1, f + 1, dst + 1))};
            *reinterpret_cast<uint32_t*>(dst) = *reinterpret_cast<const uint32_t*>(out);
          } else {
            *reinterpret_cast<float2*>(dst) = make_float2(finish(v0, f, dst), finish(v1, f + 1, dst + 1));
          }
        } else {
          *dst = Math::from_float(finish(v0, f, dst));
          if (f + 1 < prm.kg) dst[prm.y_sk] = Math::from_float(finish(v1, f + 1, dst + prm.y_sk));
        }
      }
    }
  }
}

}  // namespace mconv::cuda
