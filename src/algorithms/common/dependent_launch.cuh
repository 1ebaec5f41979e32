// Programmatic dependent launch (sm_90): a kernel's blocks start while the previous kernel of its
// stream finishes, and wait for it before they touch memory.
//
// Note [dependent launch]: a small layer's kernel runs 10-20 us on the H100, and between two kernels
// of a stream the next grid is launched, its blocks dispatched and set up only once the previous
// grid has drained. A kernel launched with cudaLaunchAttributeProgrammaticStreamSerialization may
// be dispatched as soon as every block of the previous grid has executed
// griddepcontrol.launch_dependents (or exited). It then does what reads nothing another kernel
// writes (pixel coordinates, barrier initialisation, tensor-map prefetches) and waits in
// griddepcontrol.wait until the previous grid has completed and its writes are visible. So:
// - a kernel launched this way waits before its first read or write of a tensor, a bias or an
//   offset table (the tables are uploaded by copies, which keep the full ordering anyway);
// - a kernel allows its dependents only after its own wait, so that at most one grid waits ahead
//   of the one running and a dependent's blocks are dispatched only once every block of this grid
//   has been (they never take an SM from this grid's own blocks). The tensor cores' plain tiles
//   allow them when their mainloop ends, the persistent and warp-specialized ones (one wave) right
//   after the wait. Measured (docs/PERFORMANCE.md, "Dependent launches"): allowed at the first
//   instruction, ahead of the wait, resnet50's bf16 3x3 l3 layer lost 2 us of 18. Two TF32 1x1
//   layers of 208 blocks (between one and two an SM) lose 2-7% wherever the dependents are let go,
//   on every tile;
// - the other families (the FFMA and memory-bound kernels, the split-K pre-pass, the fills) have
//   nothing worth doing before their first load: they wait, then allow, as their first statement
//   (wait_then_allow_dependent_grids). What they gain is the launch and dispatch of their blocks,
//   hidden behind the previous kernel's last wave. The bulk plane stream, one resident wave that
//   walks its chunks, only waits: its dependents go when it exits. Allowed right after its wait,
//   MobileNetV2's bf16 NCHW layers gained nothing over the suite (c192_h28_s1 12.2 -> 14.0 us);
//   at its exit they gain 4.5% (docs/PERFORMANCE.md, "Dependent launches");
// - only kernels compiled with the instructions (sm_90 and later; the host asks the loaded code's
//   PTX version) are launched this way; every other launch keeps the full ordering.
// EngineOptions::dependent_launch turns it off for every family.
#pragma once

#include <cuda_runtime.h>

#include <unordered_map>

namespace mconv::cuda {

namespace detail {
/// Lets the stream's next kernel, if launched as a dependent, be dispatched once every block of this
/// grid has done the same or exited.
__device__ __forceinline__ void allow_dependent_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
/// Waits until the grids this one depends on have completed and their memory operations are
/// visible (returns at once where it was not launched as a dependent).
__device__ __forceinline__ void wait_for_prerequisite_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
/// The first statement of a kernel with nothing to set up before its first memory access.
__device__ __forceinline__ void wait_then_allow_dependent_grids() {
  wait_for_prerequisite_grids();
  allow_dependent_grids();
}
}  // namespace detail

/// Whether `kernel`'s code loaded for this device was compiled with the griddepcontrol instructions
/// (PTX 9.0 or later), so that a dependent launch of it waits where it must. Every launch asks, so
/// each thread keeps the answers it has had (asked once per kernel and thread, no lock on a launch);
/// devices of one process are taken to be alike.
inline bool waits_for_prerequisite_grids(const void* kernel) {
  thread_local std::unordered_map<const void*, bool> known;
  if (auto it = known.find(kernel); it != known.end()) return it->second;
  cudaFuncAttributes attributes{};
  const bool asked = cudaFuncGetAttributes(&attributes, kernel) == cudaSuccess;
  if (!asked) (void)cudaGetLastError();  // the launch itself reports a kernel that cannot load
  const bool waits = asked && attributes.ptxVersion >= 90;
  known.emplace(kernel, waits);
  return waits;
}

}  // namespace mconv::cuda
