// Timing on the GPU as docs/BENCHMARKING.md asks: CUDA events around `launches` back-to-back launches,
// after a warm-up, repeated `repeats` times; the median per launch in ms. The launches are either
// enqueued from the host in each loop or replayed as one captured CUDA graph (`mconv bench --timing graph`, the
// default).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace mconv::tools {

inline void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

/// A device buffer of `n` floats, freed with its owner.
struct DeviceArray {
  float* ptr = nullptr;
  explicit DeviceArray(size_t n) { cuda_ok(cudaMalloc(&ptr, std::max<size_t>(n, 1) * 4), "cudaMalloc"); }
  ~DeviceArray() { cudaFree(ptr); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& o) noexcept : ptr(o.ptr) { o.ptr = nullptr; }
};

/// `launch(i)` enqueues launch i on `timing.stream` (i selects the rotating input set). With `graph`, the
/// `launches` launches are captured once into a CUDA graph and each timed loop is one graph launch, so
/// the time has no per-call host overhead in it (`stream` must then not be the legacy default stream).
struct LoopTiming {
  int launches = 20;  ///< back-to-back launches per timed loop
  int repeats = 5;    ///< timed loops; the median is returned
  bool graph = false;
  cudaStream_t stream = nullptr;
};

inline double median_ms_per_launch(const std::function<void(int)>& launch, const LoopTiming& timing) {
  const int launches = timing.launches, repeats = timing.repeats;
  const bool graph = timing.graph;
  cudaStream_t stream = timing.stream;
  cudaEvent_t a, b;
  cuda_ok(cudaEventCreate(&a), "cudaEventCreate");
  cuda_ok(cudaEventCreate(&b), "cudaEventCreate");
  for (int i = 0; i < 3; ++i) launch(i);  // warm-up (and first-use uploads, which a capture may not hold)
  cudaGraphExec_t exec = nullptr;
  if (graph) {
    cudaGraph_t g = nullptr;
    // Relaxed: cuDNN may query the device while its launches are captured.
    cuda_ok(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture");
    for (int i = 0; i < launches; ++i) launch(i);
    cuda_ok(cudaStreamEndCapture(stream, &g), "cudaStreamEndCapture");
    cuda_ok(cudaGraphInstantiate(&exec, g, 0), "cudaGraphInstantiate");
    cudaGraphDestroy(g);
    cuda_ok(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");  // warm-up of the graph itself
  }
  std::vector<double> t;
  for (int r = 0; r < repeats; ++r) {
    cuda_ok(cudaEventRecord(a, stream), "cudaEventRecord");
    if (graph)
      cuda_ok(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
    else
      for (int i = 0; i < launches; ++i) launch(i);
    cuda_ok(cudaEventRecord(b, stream), "cudaEventRecord");
    cuda_ok(cudaEventSynchronize(b), "cudaEventSynchronize");
    float ms = 0;
    cuda_ok(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    t.push_back(ms / launches);
  }
  if (exec) cudaGraphExecDestroy(exec);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace mconv::tools
