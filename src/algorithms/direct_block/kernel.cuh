// The direct-block kernel family (technique 3: direct convolution on shared-memory blocks), in fp32,
// fp16 or bf16 storage (T: the tiles keep x's dtype in shared memory; filters, arithmetic and the
// epilogue are fp32, y is rounded once).
//
// Block (blockIdx.x, blockIdx.y, blockIdx.z) = (spatial tile, image n, group x filter slice). The
// thread group is kThreadsX x kThreadsY; each thread owns kRegRows x kRegCols outputs of each of the
// block's kFilters filters (register blocking over outputs and filters):
//   outputs (oy, ox) = (tile_y + ty + i*kThreadsY, tile_x + tx + j*kThreadsX),
// so neighbouring threads compute neighbouring outputs from neighbouring inputs.
// For each input channel of the group, one after another: the block's input tile plus its halo is
// loaded into shared memory as sub-blocks, the first exactly the size of the thread group and the
// rest the right strip, bottom strip and corner, with some threads idle (Note [halo sub-blocks]);
// the channel's filter slice goes to shared memory; every thread accumulates in registers. y is
// written once, at the end.
//
// Note [direct pipeline]: a block walks `images_per_block` images x C/G channels of its tile. While
// one (image, channel) tile is convolved, the next one is copied into the other shared-memory buffer
// with cp.async (zero fill for padding), so loads and FMAs overlap; y is written per image.
//
// Note [vector halo]: when x rows are contiguous (stride_w == 1), W and every row/plane/image stride
// are multiples of a 16-byte vector (E = 4 fp32 or 8 fp16/bf16 elements) and x is 16-byte aligned,
// the tile is copied in 16-byte chunks: its origin is moved left to a multiple of E columns (`shift`
// = 0..E-1 extra columns) so every chunk is aligned and lies wholly inside or wholly outside [0, W)
// (W % E == 0), and one cp.async of 16 bytes (or zero fill) replaces E. (Otherwise fp32 elements
// are copied by 4-byte cp.async, 2-byte ones through registers.) The loader was instruction-bound: ncu on
// mbv2_dw_c144_h56_s2 (H100) showed 72% SM throughput against 18% DRAM throughput with 4-byte copies.
//
// Note [packed groups]: with kGroupsPerBlock > 1, thread group `sub` = threadIdx.x / (TX*TY) works on
// slot blockIdx.z * kGroupsPerBlock + sub with its own shared-memory buffers; the barriers are shared.
// Past the last slot a thread group still takes part in the barriers; it copies the last slot's
// (valid) data and stores nothing.
//
// Note [halo sub-blocks]: the tile is (kTileRows x kTileCols) inputs with
//   kTileRows = (kOutRows - 1)*stride_h + (R-1)*dil_h + 1, likewise columns,
// which is larger than the thread group. Instead of an exact thread-to-element map with division and
// modulo, thread (tx, ty) loads elements (ty + a*kThreadsY, tx + b*kThreadsX) for a, b = 0, 1, ...:
// a = b = 0 is the main part matching the thread group; the others are the strips and the corner.
//
// Note [filter vectors]: a buffer's filter slice is stored tap-major, [R*S][kFilters] in fp32, so a
// thread reads the kFilters weights of one tap (the same address across the warp: a broadcast) as
// float4s, one shared-memory load per 4 filters rather than one per filter. With 4 filters a thread
// and 2x2 outputs a tap costs 5 loads for 16 FMAs instead of 8.
//
// Note [bounded taps]: a filter whose size is not one of the unrolled squares (1, 3, 5, 7) runs the
// generic kernel. Where both axes have at most kTapBound taps, the tap loops still unroll to the
// bound, each tap behind a predicate, so the shared-memory offsets fold into the loads. A strided
// dgrad splits 7x7 and 5x5 filters into such steps (stride 2: 4x4, 4x3, 3x4 and 3x3 taps), and
// resnet50's conv1 dgrad spends most of its time in them.
#pragma once

#include "../common/conv_geometry.cuh"
#include "../common/cp_async.cuh"
#include "../common/dependent_launch.cuh"
#include "../common/epilogue.cuh"
#include "../common/storage.cuh"

namespace mconv::cuda {

// R, S of the geometry are used when the kernel is instantiated with R = S = 0 (runtime size).
struct DirectBlockParams : ConvGeometry, StoragePointers {
  int filter_slices;         // ceil(kg / kFilters); slot = group * filter_slices + slice
  int slots;                 // groups * filter_slices; blockIdx.z covers kGroupsPerBlock slots
  int images_per_block;      // blockIdx.y covers images [y * images_per_block, ... + images_per_block)
  int tiles_x;               // spatial tiles along Q; blockIdx.x = tile_row * tiles_x + tile_col
  int tile_rows, tile_cols;  // input tile with halo (Note [halo sub-blocks])
  int pitch;                 // shared-memory row pitch in elements, a multiple of 16 bytes
  int group_bytes;           // shared memory of one packed group (Note [packed groups])
  int vec4;                  // Note [vector halo]: 16-byte copies allowed
};

/// Thread-group shape and register blocking; R = S = 0 means "filter size at run time", of at most
/// TapBound taps an axis when TapBound > 0 (Note [bounded taps]).
/// kGroupsPerBlock thread groups share one block, each on its own (group, filter slice) slot, so that
/// small maps (7x7, 14x14) still give a block of 256 threads enough work (Note [packed groups]).
template <int R_, int S_, int Filters, int ThreadsX, int ThreadsY, int RegRows, int RegCols, int GroupsPerBlock,
          int TapBound = 0>
struct DirectBlockShape {
  static constexpr int kR = R_, kS = S_, kFilters = Filters, kGroupsPerBlock = GroupsPerBlock;
  static constexpr int kTapBound = TapBound;
  static_assert(TapBound == 0 || (R_ == 0 && S_ == 0), "a bound serves the run-time filter size only");
  static constexpr int kThreadsX = ThreadsX, kThreadsY = ThreadsY, kGroupThreads = ThreadsX * ThreadsY;
  static constexpr int kThreads = kGroupThreads * GroupsPerBlock;
  static constexpr int kRegRows = RegRows, kRegCols = RegCols;
  static constexpr int kOutRows = ThreadsY * RegRows, kOutCols = ThreadsX * RegCols;
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps");
  static_assert(RegRows * RegCols * Filters <= 64, "accumulators must stay in registers");
};

template <class T, class Shape, bool SILU>
__global__ void __launch_bounds__(Shape::kThreads) direct_block_kernel(const DirectBlockParams prm) {
  detail::wait_then_allow_dependent_grids();  // Note [dependent launch]
  constexpr int TX = Shape::kThreadsX, TY = Shape::kThreadsY, RH = Shape::kRegRows, RW = Shape::kRegCols;
  constexpr int KF = Shape::kFilters, E = 16 / static_cast<int>(sizeof(T));
  const int R = Shape::kR > 0 ? Shape::kR : prm.R;
  const int S = Shape::kS > 0 ? Shape::kS : prm.S;
  // The tap loops' trip counts: the size, the bound (Note [bounded taps]) or 0 for "R, S at run time".
  constexpr bool kBounded = Shape::kTapBound > 0;
  constexpr int kRLoop = kBounded ? Shape::kTapBound : Shape::kR, kSLoop = kBounded ? Shape::kTapBound : Shape::kS;
  const int tile_elems = prm.tile_rows * prm.pitch;
  extern __shared__ __align__(16) unsigned char smem_all[];
  const int sub = threadIdx.x / Shape::kGroupThreads, lt = threadIdx.x - sub * Shape::kGroupThreads;
  unsigned char* smem = smem_all + sub * prm.group_bytes;  // Note [packed groups]
  // Buffer b: sTile(b) = [tile_rows][tile_cols] in T, then sFilter(b) = [R*S][KF] in fp32 after both
  // tiles, 16-byte aligned (computed, not indexed, so no pointer array lands in local memory; Note
  // [filter vectors]).
  auto sTile = [&](int b) { return reinterpret_cast<T*>(smem) + b * tile_elems; };
  const int filters_at = (2 * tile_elems * static_cast<int>(sizeof(T)) + 15) / 16 * 16;
  auto sFilter = [&](int b) { return reinterpret_cast<float*>(smem + filters_at) + b * KF * R * S; };

  const int tx = lt % TX, ty = lt / TX;
  const int tile_row = blockIdx.x / prm.tiles_x, tile_col = blockIdx.x - tile_row * prm.tiles_x;
  const int oy0 = tile_row * Shape::kOutRows, ox0 = tile_col * Shape::kOutCols;
  const int iy0 = window_origin(oy0, prm.stride_h, prm.pad_h), ix0 = window_origin(ox0, prm.stride_w, prm.pad_w);
  const int ix0a = prm.vec4 ? (ix0 & ~(E - 1)) : ix0, shift = ix0 - ix0a;  // Note [vector halo]
  const int slot_raw = blockIdx.z * Shape::kGroupsPerBlock + sub;
  const bool active = slot_raw < prm.slots;  // Note [packed groups]
  const int slot = active ? slot_raw : prm.slots - 1;
  const int group = slot / prm.filter_slices, slice = slot - group * prm.filter_slices;
  const int k0 = group * prm.kg + slice * KF;  // first filter (global index)
  const int nf = active ? min(KF, prm.kg - slice * KF) : 0;
  const int n_begin = blockIdx.y * prm.images_per_block;
  const int items = min(prm.images_per_block, prm.N - n_begin) * prm.cg;

  // Note [halo sub-blocks] + Note [direct pipeline]: copy the (n, c) tile and filter slice into `buf`.
  auto load = [&](int buf, int n, int c) {
    const T* x = prm.x_as<T>();
    const T* gX = x + n * prm.x_sn + static_cast<long long>(group * prm.cg + c) * prm.x_sc;
    if (prm.vec4) {  // Note [vector halo]
      const int chunks = (shift + prm.tile_cols + E - 1) / E;
      for (int yy = ty; yy < prm.tile_rows; yy += TY) {
        const int h = iy0 + yy;
        const bool row_ok = static_cast<unsigned>(h) < static_cast<unsigned>(prm.H);
        const T* src_row = gX + h * prm.x_sh;
        T* dst_row = sTile(buf) + yy * prm.pitch;
        for (int ch = tx; ch < chunks; ch += TX) {
          const int w = ix0a + E * ch;
          const bool ok = row_ok && static_cast<unsigned>(w) < static_cast<unsigned>(prm.W);
          detail::cp_async_16_or_zero(dst_row + E * ch, ok ? src_row + w : x, ok);
        }
      }
    } else {
      // Row pointers are formed once per row; per element only the column offset and its predicate.
      for (int yy = ty; yy < prm.tile_rows; yy += TY) {
        const int h = iy0 + yy;
        const bool row_ok = static_cast<unsigned>(h) < static_cast<unsigned>(prm.H);
        const T* src_row = gX + h * prm.x_sh;
        T* dst_row = sTile(buf) + yy * prm.pitch;
        for (int xx = tx; xx < prm.tile_cols; xx += TX) {
          const int w = ix0 + xx;
          const bool ok = row_ok && static_cast<unsigned>(w) < static_cast<unsigned>(prm.W);
          if constexpr (sizeof(T) == 4)
            detail::cp_async_f32(dst_row + xx, ok ? src_row + w * prm.x_sw : x, ok);
          else  // no cp.async moves 2 bytes
            dst_row[xx] = ok ? src_row[w * prm.x_sw] : from_float<T>(0.0f);
        }
      }
    }
    for (int e = lt; e < KF * R * S; e += Shape::kGroupThreads) {
      const int rs = e / KF, f = e - rs * KF, r = rs / S, s = rs - r * S;  // Note [filter vectors]
      const int fr = prm.flip ? R - 1 - r : r, fs = prm.flip ? S - 1 - s : s;
      const bool ok = f < nf;
      const T* w = prm.w_as<T>();
      const T* src = ok ? w + (k0 + f) * prm.w_sk + c * prm.w_sc + fr * prm.w_sr + fs * prm.w_ss : w;
      if constexpr (sizeof(T) == 4)
        detail::cp_async_f32(sFilter(buf) + e, src, ok);
      else
        sFilter(buf)[e] = ok ? to_float(*src) : 0.0f;
    }
  };

  float rAcc[KF][RH][RW];
#pragma unroll
  for (int f = 0; f < KF; ++f)
#pragma unroll
    for (int i = 0; i < RH; ++i)
#pragma unroll
      for (int j = 0; j < RW; ++j) rAcc[f][i][j] = 0.0f;

  int n = n_begin, c = 0;  // the item being convolved
  load(0, n, 0);
  detail::cp_async_commit();
  for (int it = 0; it < items; ++it) {
    __syncthreads();  // item it-1 is no longer read: its buffer may be refilled
    const int next_c = c + 1 == prm.cg ? 0 : c + 1, next_n = c + 1 == prm.cg ? n + 1 : n;
    if (it + 1 < items) load((it + 1) & 1, next_n, next_c);
    detail::cp_async_commit();   // possibly empty: keeps one group per item
    detail::cp_async_wait<1>();  // this thread's copies of item `it` have landed
    __syncthreads();             // ... and everyone else's
    const T* tile = sTile(it & 1);
    const float* filt = sFilter(it & 1);
    // With R and S template constants these loops unroll fully; R = S = 0 is the generic fallback,
    // unrolled to kTapBound taps where there is one (Note [bounded taps]).
#pragma unroll
    for (int r = 0; r < (kRLoop > 0 ? kRLoop : R); ++r) {
      if (kBounded && r >= R) continue;
#pragma unroll
      for (int s = 0; s < (kSLoop > 0 ? kSLoop : S); ++s) {
        if (kBounded && s >= S) continue;
        float rX[RH][RW];
#pragma unroll
        for (int i = 0; i < RH; ++i)
#pragma unroll
          for (int j = 0; j < RW; ++j)
            rX[i][j] = to_float(tile[((ty + i * TY) * prm.stride_h + r * prm.dil_h) * prm.pitch + shift +
                                     (tx + j * TX) * prm.stride_w + s * prm.dil_w]);
        float rW[KF];  // Note [filter vectors]
        const float* tap = filt + (r * S + s) * KF;
        if constexpr (KF % 4 == 0) {
#pragma unroll
          for (int f = 0; f < KF; f += 4) {
            const float4 v = *reinterpret_cast<const float4*>(tap + f);
            rW[f] = v.x, rW[f + 1] = v.y, rW[f + 2] = v.z, rW[f + 3] = v.w;
          }
        } else {
#pragma unroll
          for (int f = 0; f < KF; ++f) rW[f] = tap[f];
        }
#pragma unroll
        for (int f = 0; f < KF; ++f)
#pragma unroll
          for (int i = 0; i < RH; ++i)
#pragma unroll
            for (int j = 0; j < RW; ++j) rAcc[f][i][j] = fmaf(rX[i][j], rW[f], rAcc[f][i][j]);
      }
    }
    if (c + 1 < prm.cg) {
      c = next_c;
      continue;
    }
    // Last channel of image n: epilogue (any layout, alpha/beta with beta == 0 never reading y,
    // bias, ReLU), then the accumulators restart for the next image.
#pragma unroll
    for (int f = 0; f < KF; ++f) {
      if (f >= nf) break;
      const int k = k0 + f;
#pragma unroll
      for (int i = 0; i < RH; ++i) {
        const int oy = oy0 + ty + i * TY;
#pragma unroll
        for (int j = 0; j < RW; ++j) {
          const int ox = ox0 + tx + j * TX;
          const float acc = rAcc[f][i][j];
          rAcc[f][i][j] = 0.0f;
          if (oy >= prm.P || ox >= prm.Q) continue;
          T* dst = prm.y_as<T>() + static_cast<long long>(n) * prm.y_sn + k * prm.y_sk + oy * prm.y_sp + ox * prm.y_sq;
          const float old = prm.beta != 0.0f ? to_float(*dst) : 0.0f;
          *dst = from_float<T>(epilogue_value<kActivationsOf<SILU>>(prm.alpha, acc, prm.beta, &old,
                                                                    prm.bias ? prm.bias + k : nullptr, prm.activation));
        }
      }
    }
    c = next_c;
    n = next_n;
  }
}

}  // namespace mconv::cuda
