// Hopper's warpgroup MMA (wgmma, sm_90a) for the tensor-core families (implicit_mma, window_mma):
// shared-memory matrix descriptors, the fences and group waits, and one asynchronous m64nNk16 (k8
// for TF32) step per element type. Note [wgmma mainloop] (implicit_mma/kernel.cuh) says how the
// implicit GEMM uses them, Note [window mma] (window_mma/kernel.cuh) how the window kernel does.
//
// Note [wgmma shared layout]: both operands sit K-major (reduction-fastest) in shared memory, rows of
// 128 bytes (64 fp16/bf16 or 32 fp32 reduction rows) in the 128-byte swizzle: within each 1024-byte
// group of 8 rows, the 16-byte chunk c of row r lives at chunk c ^ (r % 8). The hardware applies the
// same XOR to the address bits it computes, so an operand's groups must start 1024-byte aligned, and
// a k-step inside the 128-byte row is the descriptor's start address plus 32 bytes. The swizzle also
// spreads the eight rows a 16-byte gather column writes over all 32 banks. A transposed stage (16-bit,
// filters or pixels contiguous: a dgrad step's w, both operands of a wgrad step) is N- or M-major
// instead: each reduction row holds 64 filters (pixels) in 128 swizzled bytes, blocks of 64 lie a
// whole stage's rows apart (the leading byte offset), and a k-step of 16 rows is 2048 bytes on.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace mconv::cuda::wgmma {

/// Bytes of one K-major row and of one 8-row swizzle group (Note [wgmma shared layout]).
inline constexpr int kRowBytes = 128;
inline constexpr int kGroupBytes = 8 * kRowBytes;

/// The chunk address of 16-byte chunk `chunk` of row `row` in an operand that starts at `base`.
__device__ __forceinline__ uint32_t swizzled_chunk(uint32_t base, int row, int chunk) {
  return base + row * kRowBytes + ((chunk ^ (row & 7)) << 4);
}

/// A shared-memory matrix descriptor in the 128-byte swizzle (layout type 1): start address, leading
/// byte offset (K-major: unused, 16; N-major: between blocks of 64 filters), stride 1024 bytes
/// between 8-row groups.
__device__ __forceinline__ uint64_t descriptor(uint32_t smem_addr, uint32_t leading_bytes = 16) {
  uint64_t d = (smem_addr & 0x3FFFF) >> 4;
  d |= uint64_t((leading_bytes >> 4) & 0x3FFF) << 16;
  d |= uint64_t(kGroupBytes >> 4) << 32;
  d |= uint64_t(1) << 62;
  return d;
}

/// N-major B (Note [wgmma shared layout]): the chunk of 8 filters `vec` of reduction row `kk`, in a
/// stage of `rows` reduction rows; each block of 64 filters is `rows` rows of 128 bytes.
__device__ __forceinline__ uint32_t n_major_chunk(uint32_t base, int rows, int kk, int vec) {
  return base + (vec >> 3) * rows * kRowBytes + swizzled_chunk(0, kk, vec & 7);
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
inline constexpr bool kAvailable = true;

/// Orders this warpgroup's earlier register accesses before its next wgmma reads or writes them.
__device__ __forceinline__ void fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
/// Waits until at most N of this warpgroup's committed wgmma groups are in flight.
template <int N>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/// Makes this thread's generic-proxy writes to shared memory (cp.async, st.shared) visible to the
/// async proxy that wgmma reads operands through.
__device__ __forceinline__ void fence_shared_for_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// The steps. Inline asm takes no loops, so the accumulator operands are written out, each N's list
// extending the one below it, and one macro makes every step from them. D += A * B (scale-d 1), no
// negation; A and B K-major (transpose 0) or, for the 16-bit types, B N-major ("_nb") or both
// transposed ("_tt"). TF32 has no transpose operands.
#define MCONV_WGMMA_D64                                                    \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"

#define MCONV_WGMMA_ACC64                                                                                     \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), \
      "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),  \
      "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), \
      "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])

#define MCONV_WGMMA_D128                                                             \
  MCONV_WGMMA_D64                                                                    \
  ", "                                                                               \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"

#define MCONV_WGMMA_ACC128                                                                                      \
  MCONV_WGMMA_ACC64, "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), \
      "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]),   \
      "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]),   \
      "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),   \
      "+f"(d[63])

#define MCONV_WGMMA_D256                                                                         \
  MCONV_WGMMA_D128                                                                               \
  ", "                                                                                           \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "             \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "             \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"

#define MCONV_WGMMA_ACC256                                                                                            \
  MCONV_WGMMA_ACC128, "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]),      \
      "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]),         \
      "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]),         \
      "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]),         \
      "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]),      \
      "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), \
      "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), \
      "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), \
      "+f"(d[127])

#define MCONV_WGMMA_STEP(NAME, N, TYPES, K, TAIL)                                                 \
  __device__ __forceinline__ void NAME(float(&d)[N / 2], uint64_t a, uint64_t b) {                \
    asm volatile("wgmma.mma_async.sync.aligned.m64n" #N "k" K ".f32." TYPES " {" MCONV_WGMMA_D##N \
                 "}, "                                                                            \
                 "%" MCONV_WGMMA_A##N ", %" MCONV_WGMMA_B##N ", 1, 1, 1" TAIL ";\n"               \
                 : MCONV_WGMMA_ACC##N                                                             \
                 : "l"(a), "l"(b));                                                               \
  }

#define MCONV_WGMMA_A64 "32"
#define MCONV_WGMMA_B64 "33"
#define MCONV_WGMMA_A128 "64"
#define MCONV_WGMMA_B128 "65"
#define MCONV_WGMMA_A256 "128"
#define MCONV_WGMMA_B256 "129"

MCONV_WGMMA_STEP(wgmma_m64n64_f16, 64, "f16.f16", "16", ", 0, 0")
MCONV_WGMMA_STEP(wgmma_m64n128_f16, 128, "f16.f16", "16", ", 0, 0")
MCONV_WGMMA_STEP(wgmma_m64n256_f16, 256, "f16.f16", "16", ", 0, 0")
MCONV_WGMMA_STEP(wgmma_m64n64_bf16, 64, "bf16.bf16", "16", ", 0, 0")
MCONV_WGMMA_STEP(wgmma_m64n128_bf16, 128, "bf16.bf16", "16", ", 0, 0")
MCONV_WGMMA_STEP(wgmma_m64n256_bf16, 256, "bf16.bf16", "16", ", 0, 0")
MCONV_WGMMA_STEP(wgmma_m64n64_tf32, 64, "tf32.tf32", "8", "")
MCONV_WGMMA_STEP(wgmma_m64n128_tf32, 128, "tf32.tf32", "8", "")
MCONV_WGMMA_STEP(wgmma_m64n256_tf32, 256, "tf32.tf32", "8", "")
MCONV_WGMMA_STEP(wgmma_m64n64_f16_nb, 64, "f16.f16", "16", ", 0, 1")
MCONV_WGMMA_STEP(wgmma_m64n128_f16_nb, 128, "f16.f16", "16", ", 0, 1")
MCONV_WGMMA_STEP(wgmma_m64n256_f16_nb, 256, "f16.f16", "16", ", 0, 1")
MCONV_WGMMA_STEP(wgmma_m64n64_bf16_nb, 64, "bf16.bf16", "16", ", 0, 1")
MCONV_WGMMA_STEP(wgmma_m64n128_bf16_nb, 128, "bf16.bf16", "16", ", 0, 1")
MCONV_WGMMA_STEP(wgmma_m64n256_bf16_nb, 256, "bf16.bf16", "16", ", 0, 1")
MCONV_WGMMA_STEP(wgmma_m64n64_f16_tt, 64, "f16.f16", "16", ", 1, 1")
MCONV_WGMMA_STEP(wgmma_m64n128_f16_tt, 128, "f16.f16", "16", ", 1, 1")
MCONV_WGMMA_STEP(wgmma_m64n256_f16_tt, 256, "f16.f16", "16", ", 1, 1")
MCONV_WGMMA_STEP(wgmma_m64n64_bf16_tt, 64, "bf16.bf16", "16", ", 1, 1")
MCONV_WGMMA_STEP(wgmma_m64n128_bf16_tt, 128, "bf16.bf16", "16", ", 1, 1")
MCONV_WGMMA_STEP(wgmma_m64n256_bf16_tt, 256, "bf16.bf16", "16", ", 1, 1")
MCONV_WGMMA_STEP(wgmma_m64n64_f16_ta, 64, "f16.f16", "16", ", 1, 0")
MCONV_WGMMA_STEP(wgmma_m64n128_f16_ta, 128, "f16.f16", "16", ", 1, 0")
MCONV_WGMMA_STEP(wgmma_m64n256_f16_ta, 256, "f16.f16", "16", ", 1, 0")
MCONV_WGMMA_STEP(wgmma_m64n64_bf16_ta, 64, "bf16.bf16", "16", ", 1, 0")
MCONV_WGMMA_STEP(wgmma_m64n128_bf16_ta, 128, "bf16.bf16", "16", ", 1, 0")
MCONV_WGMMA_STEP(wgmma_m64n256_bf16_ta, 256, "bf16.bf16", "16", ", 1, 0")

// Note [wgmma wave-fitted filter tiles] (warp_specialized.cuh): the 16-bit steps of 208 filters,
// both operands K-major.
#define MCONV_WGMMA_D208                                                             \
  MCONV_WGMMA_D128                                                                   \
  ", "                                                                               \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
  "%96, %97, %98, %99, %100, %101, %102, %103"
#define MCONV_WGMMA_ACC208                                                                                       \
  MCONV_WGMMA_ACC128, "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), \
      "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]),    \
      "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]),    \
      "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]),    \
      "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), \
      "+f"(d[103])
#define MCONV_WGMMA_A208 "104"
#define MCONV_WGMMA_B208 "105"
MCONV_WGMMA_STEP(wgmma_m64n208_f16, 208, "f16.f16", "16", ", 0, 0")
MCONV_WGMMA_STEP(wgmma_m64n208_bf16, 208, "bf16.bf16", "16", ", 0, 0")

// TF32 with A in registers (Note [mma tf32 pixel runs]): each thread's four A elements in mma.sync's
// m16n8k8 fragment order (warp w of the warpgroup holding rows 16w..16w+15), B from shared memory.
#define MCONV_WGMMA_STEP_RA(NAME, N)                                                                                   \
  __device__ __forceinline__ void NAME(float(&d)[N / 2], const uint32_t(&a)[4], uint64_t b) {                          \
    asm volatile("wgmma.mma_async.sync.aligned.m64n" #N "k8.f32.tf32.tf32 {" MCONV_WGMMA_D##N "}, {%" MCONV_WGMMA_A##N \
                 ", %" MCONV_WGMMA_A1_##N ", %" MCONV_WGMMA_A2_##N ", %" MCONV_WGMMA_A3_##N "}, %" MCONV_WGMMA_B4_##N  \
                 ", 1, 1, 1;\n"                                                                                        \
                 : MCONV_WGMMA_ACC##N                                                                                  \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));                                                \
  }
#define MCONV_WGMMA_A1_64 "33"
#define MCONV_WGMMA_A2_64 "34"
#define MCONV_WGMMA_A3_64 "35"
#define MCONV_WGMMA_B4_64 "36"
#define MCONV_WGMMA_A1_128 "65"
#define MCONV_WGMMA_A2_128 "66"
#define MCONV_WGMMA_A3_128 "67"
#define MCONV_WGMMA_B4_128 "68"
#define MCONV_WGMMA_A1_256 "129"
#define MCONV_WGMMA_A2_256 "130"
#define MCONV_WGMMA_A3_256 "131"
#define MCONV_WGMMA_B4_256 "132"
MCONV_WGMMA_STEP_RA(wgmma_m64n64_tf32_ra, 64)
MCONV_WGMMA_STEP_RA(wgmma_m64n128_tf32_ra, 128)
MCONV_WGMMA_STEP_RA(wgmma_m64n256_tf32_ra, 256)
#undef MCONV_WGMMA_STEP_RA
#undef MCONV_WGMMA_A1_64
#undef MCONV_WGMMA_A2_64
#undef MCONV_WGMMA_A3_64
#undef MCONV_WGMMA_B4_64
#undef MCONV_WGMMA_A1_128
#undef MCONV_WGMMA_A2_128
#undef MCONV_WGMMA_A3_128
#undef MCONV_WGMMA_B4_128
#undef MCONV_WGMMA_A1_256
#undef MCONV_WGMMA_A2_256
#undef MCONV_WGMMA_A3_256
#undef MCONV_WGMMA_B4_256

#undef MCONV_WGMMA_STEP
#undef MCONV_WGMMA_D64
#undef MCONV_WGMMA_ACC64
#undef MCONV_WGMMA_A64
#undef MCONV_WGMMA_B64
#undef MCONV_WGMMA_D128
#undef MCONV_WGMMA_ACC128
#undef MCONV_WGMMA_A128
#undef MCONV_WGMMA_B128
#undef MCONV_WGMMA_D256
#undef MCONV_WGMMA_ACC256
#undef MCONV_WGMMA_A256
#undef MCONV_WGMMA_B256
#undef MCONV_WGMMA_D208
#undef MCONV_WGMMA_ACC208
#undef MCONV_WGMMA_A208
#undef MCONV_WGMMA_B208

/// Keeps the compiler from moving reads or writes of the accumulators across an asynchronous wgmma.
template <int R>
__device__ __forceinline__ void pin(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

/// One k-step D += A * B of a 64 x N warpgroup tile, in the storage type's MMA (TF32 for float); A
/// M-major when kMMajorA, B N-major when kNMajorB (Note [wgmma shared layout]; 16-bit only).
template <class Storage, int N, bool kMMajorA, bool kNMajorB>
__device__ __forceinline__ void mma_async(float (&d)[N / 2], uint64_t a, uint64_t b) {
  static_assert(N == 64 || N == 128 || N == 256 || (N == 208 && sizeof(Storage) == 2 && !kMMajorA && !kNMajorB),
                "wgmma tiles of 64, 128 or 256 filters; 16-bit ones of 208 (Note [wgmma wave-fitted filter tiles])");
  static_assert((!kNMajorB && !kMMajorA) || sizeof(Storage) == 2, "M- or N-major operands are 16-bit");
  if constexpr (std::is_same_v<Storage, __half> && kMMajorA && !kNMajorB) {
    if constexpr (N == 64) wgmma_m64n64_f16_ta(d, a, b);
    if constexpr (N == 128) wgmma_m64n128_f16_ta(d, a, b);
    if constexpr (N == 256) wgmma_m64n256_f16_ta(d, a, b);
  } else if constexpr (std::is_same_v<Storage, __nv_bfloat16> && kMMajorA && !kNMajorB) {
    if constexpr (N == 64) wgmma_m64n64_bf16_ta(d, a, b);
    if constexpr (N == 128) wgmma_m64n128_bf16_ta(d, a, b);
    if constexpr (N == 256) wgmma_m64n256_bf16_ta(d, a, b);
  } else if constexpr (std::is_same_v<Storage, __half> && kMMajorA) {
    if constexpr (N == 64) wgmma_m64n64_f16_tt(d, a, b);
    if constexpr (N == 128) wgmma_m64n128_f16_tt(d, a, b);
    if constexpr (N == 256) wgmma_m64n256_f16_tt(d, a, b);
  } else if constexpr (std::is_same_v<Storage, __nv_bfloat16> && kMMajorA) {
    if constexpr (N == 64) wgmma_m64n64_bf16_tt(d, a, b);
    if constexpr (N == 128) wgmma_m64n128_bf16_tt(d, a, b);
    if constexpr (N == 256) wgmma_m64n256_bf16_tt(d, a, b);
  } else if constexpr (std::is_same_v<Storage, __half> && kNMajorB) {
    if constexpr (N == 64) wgmma_m64n64_f16_nb(d, a, b);
    if constexpr (N == 128) wgmma_m64n128_f16_nb(d, a, b);
    if constexpr (N == 256) wgmma_m64n256_f16_nb(d, a, b);
  } else if constexpr (std::is_same_v<Storage, __nv_bfloat16> && kNMajorB) {
    if constexpr (N == 64) wgmma_m64n64_bf16_nb(d, a, b);
    if constexpr (N == 128) wgmma_m64n128_bf16_nb(d, a, b);
    if constexpr (N == 256) wgmma_m64n256_bf16_nb(d, a, b);
  } else if constexpr (std::is_same_v<Storage, __half>) {
    if constexpr (N == 208) wgmma_m64n208_f16(d, a, b);
    if constexpr (N == 64) wgmma_m64n64_f16(d, a, b);
    if constexpr (N == 128) wgmma_m64n128_f16(d, a, b);
    if constexpr (N == 256) wgmma_m64n256_f16(d, a, b);
  } else if constexpr (std::is_same_v<Storage, __nv_bfloat16>) {
    if constexpr (N == 208) wgmma_m64n208_bf16(d, a, b);
    if constexpr (N == 64) wgmma_m64n64_bf16(d, a, b);
    if constexpr (N == 128) wgmma_m64n128_bf16(d, a, b);
    if constexpr (N == 256) wgmma_m64n256_bf16(d, a, b);
  } else {
    static_assert(std::is_same_v<Storage, float>, "fp16, bf16 or fp32 (TF32) operands");
    if constexpr (N == 64) wgmma_m64n64_tf32(d, a, b);
    if constexpr (N == 128) wgmma_m64n128_tf32(d, a, b);
    if constexpr (N == 256) wgmma_m64n256_tf32(d, a, b);
  }
}
/// One TF32 k-step D += A * B with A in registers (mma.sync's m16n8k8 fragment of each warp) and B
/// K-major in shared memory.
template <int N>
__device__ __forceinline__ void mma_async_tf32_registers(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b) {
  static_assert(N == 64 || N == 128 || N == 256, "wgmma tiles of 64, 128 or 256 filters");
  if constexpr (N == 64) wgmma_m64n64_tf32_ra(d, a, b);
  if constexpr (N == 128) wgmma_m64n128_tf32_ra(d, a, b);
  if constexpr (N == 256) wgmma_m64n256_tf32_ra(d, a, b);
}
#else
// Other targets (the portable compute_90 PTX) have no wgmma: the planner picks wgmma tiles only on
// sm_90, and a kernel built without them traps.
inline constexpr bool kAvailable = false;
#endif

}  // namespace mconv::cuda::wgmma
