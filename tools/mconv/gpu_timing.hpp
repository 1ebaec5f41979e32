// Timing on the GPU as BENCHMARKING.md asks: CUDA events around `launches` back-to-back launches,
// after a warm-up, repeated `repeats` times; the median per launch in ms.
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

/// `launch(i)` enqueues launch i on `stream` (i selects the rotating input set).
inline double median_ms_per_launch(const std::function<void(int)>& launch, int launches, int repeats,
                                   cudaStream_t stream = nullptr) {
  cudaEvent_t a, b;
  cuda_ok(cudaEventCreate(&a), "cudaEventCreate");
  cuda_ok(cudaEventCreate(&b), "cudaEventCreate");
  for (int i = 0; i < 3; ++i) launch(i);  // warm-up
  std::vector<double> t;
  for (int r = 0; r < repeats; ++r) {
    cuda_ok(cudaEventRecord(a, stream), "cudaEventRecord");
    for (int i = 0; i < launches; ++i) launch(i);
    cuda_ok(cudaEventRecord(b, stream), "cudaEventRecord");
    cuda_ok(cudaEventSynchronize(b), "cudaEventSynchronize");
    float ms = 0;
    cuda_ok(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    t.push_back(ms / launches);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace mconv::tools
