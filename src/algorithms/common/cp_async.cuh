// cp.async helpers shared by the kernel families: 4-byte copies global -> shared with zero fill.
#pragma once

namespace mconv::cuda::detail {

/// Copies one float, or writes 0 when `pred` is false (source size 0: nothing is read; `gmem`
/// must still be a valid address).
__device__ __forceinline__ void cp_async_f32(float* smem, const float* gmem, bool pred) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int bytes = pred ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(gmem), "r"(bytes));
}
/// Copies 16 bytes (both addresses 16-byte aligned), or writes 16 zero bytes when `pred` is false.
__device__ __forceinline__ void cp_async_f32x4(float* smem, const float* gmem, bool pred) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int bytes = pred ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(bytes));
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
