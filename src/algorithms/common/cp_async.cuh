// cp.async helpers shared by the kernel families: 4- to 16-byte copies global -> shared, some with zero fill.
#pragma once

namespace mconv::cuda::detail {

/// Copies one float, or writes 0 when `pred` is false (source size 0: nothing is read; `gmem`
/// must still be a valid address).
__device__ __forceinline__ void cp_async_f32(float* smem, const float* gmem, bool pred) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int bytes = pred ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(gmem), "r"(bytes));
}
/// Copies 16 bytes of any dtype (both addresses 16-byte aligned), or writes 16 zero bytes when
/// `pred` is false.
__device__ __forceinline__ void cp_async_16_or_zero(void* smem, const void* gmem, bool pred) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int bytes = pred ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(bytes));
}
/// The same for 4 floats.
__device__ __forceinline__ void cp_async_f32x4(float* smem, const float* gmem, bool pred) {
  cp_async_16_or_zero(smem, gmem, pred);
}
/// Copies B = 4, 8 or 16 bytes of any dtype (both addresses B-byte aligned).
template <int B>
__device__ __forceinline__ void cp_async_bytes(void* smem, const void* gmem) {
  static_assert(B == 4 || B == 8 || B == 16, "cp.async copies 4, 8 or 16 bytes");
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  if constexpr (B == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(s), "l"(gmem), "n"(B));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
/// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

}  // namespace mconv::cuda::detail
