// The warp-level tensor-core instructions the mma.sync kernels share: the element types' MMA
// (m16n8k16 for fp16 and bf16, m16n8k8 for TF32, fp32 accumulators) and ldmatrix, plain and
// transposed. Any sm_80+ target.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace mconv::cuda {

/// The element types: storage, the MMA instruction and conversions.
struct MmaFp16 {
  using Storage = __half;
  static constexpr int kBytes = 2;
  static __device__ __forceinline__ float to_float(Storage v) { return __half2float(v); }
  static __device__ __forceinline__ Storage from_float(float v) { return __float2half_rn(v); }
  static __device__ __forceinline__ void convert_fragment(uint32_t&) {}
  // 32 bytes of reduction per call: m16n8k16.
  static __device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

struct MmaBf16 {
  using Storage = __nv_bfloat16;
  static constexpr int kBytes = 2;
  static __device__ __forceinline__ float to_float(Storage v) { return __bfloat162float(v); }
  static __device__ __forceinline__ Storage from_float(float v) { return __float2bfloat16_rn(v); }
  static __device__ __forceinline__ void convert_fragment(uint32_t&) {}
  static __device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

struct MmaTf32 {
  using Storage = float;
  static constexpr int kBytes = 4;
  static __device__ __forceinline__ float to_float(Storage v) { return v; }
  static __device__ __forceinline__ Storage from_float(float v) { return v; }
  // Round to nearest (ties away), as cuBLAS and cuDNN do, rather than let the MMA truncate.
  static __device__ __forceinline__ void convert_fragment(uint32_t& r) {
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(__uint_as_float(r)));
  }
  // 32 bytes of reduction per call: m16n8k8.
  static __device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

namespace detail {

/// One 16-bit shared element, zero-extended: kernels that pack two elements into an MMA register.
__device__ __forceinline__ uint32_t lds_u16(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.u16 %0, [%1];\n" : "=r"(v) : "r"(addr));
  return v;
}

/// One 32-bit shared word: a register of an MMA fragment.
__device__ __forceinline__ uint32_t lds_u32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(addr));
  return v;
}

/// 16 shared bytes (16-byte aligned) as four 32-bit words, and back.
__device__ __forceinline__ void lds_128(uint32_t addr, uint32_t (&v)[4]) {
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\n" : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]) : "r"(addr));
}
__device__ __forceinline__ void sts_128(uint32_t addr, const uint32_t (&v)[4]) {
  asm volatile("st.shared.v4.u32 [%0], {%1,%2,%3,%4};\n" ::"r"(addr), "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3]));
}

/// Rounds the four fp32 values of 16 shared bytes to TF32 in place (MmaTf32::convert_fragment):
/// wgmma reads an operand's fp32 bits from shared memory and would truncate them.
__device__ __forceinline__ void round_shared_to_tf32(uint32_t addr) {
  uint32_t v[4];
  lds_128(addr, v);
#pragma unroll
  for (int e = 0; e < 4; ++e) MmaTf32::convert_fragment(v[e]);
  sts_128(addr, v);
}

/// Two 8x8 matrices: lanes 0-7 address the first's rows, lanes 8-15 the second's.
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(smem_addr));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr));
}

}  // namespace detail

}  // namespace mconv::cuda
