// Launching a kernel: with more than the default dynamic shared memory, as thread-block clusters
// along z (the slices of one tile: Note [mma cluster split], Note [ordered split-k]) and as a
// dependent of the stream's previous kernel (Note [dependent launch]); and whether a device can
// schedule a cluster of a given size.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <unordered_map>
#include <utility>

#include "cuda_check.cuh"
#include "dependent_launch.cuh"

namespace mconv::cuda {

/// Clusters of at most this many blocks run on every cluster-capable GPU; Hopper also takes 16
/// (non-portable) where a GPC can hold them.
inline constexpr int kPortableClusterBlocks = 8;
inline constexpr int kMaxClusterBlocks = 16;

inline cudaLaunchAttribute cluster_z_attribute(int blocks) {
  cudaLaunchAttribute a{};
  a.id = cudaLaunchAttributeClusterDimension;
  a.val.clusterDim.x = 1;
  a.val.clusterDim.y = 1;
  a.val.clusterDim.z = static_cast<unsigned>(blocks);
  return a;
}

/// Where a launch goes: its stream, and whether the kernel may start as a dependent of the stream's
/// previous kernel (Note [dependent launch]; EngineOptions::dependent_launch), where its code waits.
struct LaunchStream {
  cudaStream_t stream = nullptr;
  bool dependent = false;
};

/// Launches kernel<<<grid, threads, smem, on.stream>>>(args...), as clusters of `cluster_blocks`
/// consecutive z blocks where it is above 1 (grid.z a multiple of it), and checks the launch.
template <class... Params, class... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, int threads, int smem, LaunchStream on, int cluster_blocks,
                   Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = static_cast<size_t>(smem);
  config.stream = on.stream;
  cudaLaunchAttribute list[2]{};
  unsigned count = 0;
  if (cluster_blocks > 1) list[count++] = cluster_z_attribute(cluster_blocks);
  if (on.dependent && waits_for_prerequisite_grids(reinterpret_cast<const void*>(kernel))) {
    list[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    list[count++].val.programmaticStreamSerializationAllowed = 1;
  }
  config.attrs = list;
  config.numAttrs = count;
  MCONV_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

/// Launches `kernel(params)` on `on` with `smem` bytes of dynamic shared memory, opting the kernel in
/// above the default 48 KB first, and checks the launch.
template <class Params>
void launch_with_smem(void (*kernel)(Params), dim3 grid, int threads, int smem, LaunchStream on, const Params& params) {
  if (smem > 48 * 1024)
    MCONV_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  launch_kernel(kernel, grid, threads, smem, on, 1, params);
}

/// How many clusters of `blocks` blocks of `kernel` (with `threads` and `smem`) the device holds at
/// once; 0 where it holds none or cannot say (an unsupported size is an answer, not a sticky error).
inline int max_active_clusters(const void* kernel, int blocks, int threads, int smem) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(1, 1, static_cast<unsigned>(blocks));
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = static_cast<size_t>(smem);
  cudaLaunchAttribute cluster = cluster_z_attribute(blocks);
  config.attrs = &cluster;
  config.numAttrs = 1;
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) != cudaSuccess) {
    (void)cudaGetLastError();
    clusters = 0;
  }
  return clusters;
}

/// max_active_clusters of `Kernel`, asked once per cluster size, block size and shared memory in
/// each thread: a launch that splits its work by the clusters resident at once asks on every call.
template <auto Kernel>
int resident_clusters(int blocks, int threads, int smem) {
  thread_local std::unordered_map<long long, int> known;
  const long long key = (static_cast<long long>(blocks) << 40) | (static_cast<long long>(threads) << 24) | smem;
  const auto hit = known.find(key);
  if (hit != known.end()) return hit->second;
  const int n = max_active_clusters(reinterpret_cast<const void*>(Kernel), blocks, threads, smem);
  known.emplace(key, n);
  return n;
}

/// The cluster size a launch of `kernel` can take: `blocks` up to the portable size; beyond it (the
/// kernel must allow non-portable sizes) `blocks` where the device can schedule such a cluster with
/// this shared memory, else the portable size. Asked once per kernel; devices of one process are
/// taken to be alike.
template <auto Kernel>
int schedulable_cluster_blocks(int blocks, int threads, int smem) {
  if (blocks <= kPortableClusterBlocks) return blocks;
  static std::atomic<int> fits{0}, fails{kMaxClusterBlocks + 1};  // largest known to fit, smallest not
  if (fits.load() >= blocks) return blocks;
  if (fails.load() <= blocks) return kPortableClusterBlocks;
  if (max_active_clusters(reinterpret_cast<const void*>(Kernel), blocks, threads, smem) <= 0) {
    fails.store(blocks);
    return kPortableClusterBlocks;
  }
  fits.store(blocks);
  return blocks;
}

}  // namespace mconv::cuda
