// Hopper's bulk copy engine (TMA without a tensor map): one thread moves a contiguous range of
// global memory into shared memory with one instruction, and the block waits on an mbarrier that
// counts the bytes as they land; or moves shared memory out to global memory as a bulk group.
// sm_90 and later (every target mconv builds for).
#pragma once

#include <cstdint>

namespace mconv::cuda::detail {

__device__ __forceinline__ unsigned smem_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

/// Initialises a barrier that `arrivals` arrivals complete: one (the thread that starts the copy,
/// with the copies' bytes) by default. Make it visible with __syncthreads() before anyone waits on it.
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, unsigned arrivals = 1) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_address(bar)), "r"(arrivals));
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::);
}

/// One arrival on the barrier, releasing this thread's earlier shared-memory accesses to whoever waits.
__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];\n" ::"r"(smem_address(bar)) : "memory");
}

/// The arrival of the copying thread: the phase completes once `bytes` more bytes have landed.
__device__ __forceinline__ void mbarrier_arrive_expect_bytes(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_address(bar)), "r"(bytes)
               : "memory");
}

/// Copies `bytes` (a multiple of 16; both addresses 16-byte aligned) and counts them on `bar`.
__device__ __forceinline__ void bulk_copy_to_shared(void* smem, const void* gmem, unsigned bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   smem_address(smem)),
               "l"(gmem), "r"(bytes), "r"(smem_address(bar))
               : "memory");
}

/// Waits until the barrier's phase `parity` has completed (its copies are visible to the block).
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, unsigned parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "wait:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait;\n"
      "}\n" ::"r"(smem_address(bar)),
      "r"(parity)
      : "memory");
}

/// Thread-block clusters: the address of `bar` (a shared-memory object of this block) in block
/// `rank` of the cluster, and one arrival there that releases this thread's earlier writes to the
/// cluster; waiting with cluster scope acquires what the arriving threads released.
__device__ __forceinline__ unsigned cluster_address(unsigned smem_addr, unsigned rank) {
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(smem_addr), "r"(rank));
  return remote;
}
__device__ __forceinline__ void mbarrier_arrive_cluster(uint64_t* bar, unsigned rank) {
  asm volatile(
      "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(cluster_address(smem_address(bar), rank))
      : "memory");
}
__device__ __forceinline__ void mbarrier_wait_cluster(uint64_t* bar, unsigned parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "wait:\n"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait;\n"
      "}\n" ::"r"(smem_address(bar)),
      "r"(parity)
      : "memory");
}
/// A cluster barrier in two halves: this thread's arrival (releasing its earlier accesses), and the
/// wait for every non-exited thread of the cluster to have arrived.
__device__ __forceinline__ void cluster_arrive() {
  asm volatile("barrier.cluster.arrive;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait;\n" ::: "memory");
}
/// 16 bytes at shared-memory address `addr` of a cluster's block (from cluster_address).
__device__ __forceinline__ float4 load_cluster_float4(unsigned addr) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}

/// Makes this thread's shared-memory writes visible to the copy engine (before a bulk store of them).
__device__ __forceinline__ void fence_shared_for_bulk_copy() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/// Copies `bytes` (a multiple of 16; both addresses 16-byte aligned) from shared to global memory,
/// as a bulk group of this thread; commit, then wait with bulk_wait_read / bulk_wait.
__device__ __forceinline__ void bulk_copy_to_global(void* gmem, const void* smem, unsigned bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(gmem), "r"(smem_address(smem)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
/// An L2 policy that evicts what it touches first: for data read once.
__device__ __forceinline__ uint64_t l2_evict_first_policy() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}
/// bulk_copy_to_shared with an L2 policy for the bytes it reads.
__device__ __forceinline__ void bulk_copy_to_shared(void* smem, const void* gmem, unsigned bytes, uint64_t* bar,
                                                    uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;\n" ::
          "r"(smem_address(smem)),
      "l"(gmem), "r"(bytes), "r"(smem_address(bar)), "l"(policy)
      : "memory");
}
/// Waits until at most N of this thread's bulk groups still read their shared memory.
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
/// Waits until at most N of this thread's bulk groups are still in flight.
template <int N>
__device__ __forceinline__ void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}

}  // namespace mconv::cuda::detail
