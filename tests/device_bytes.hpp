// Device memory for the GPU tests: an allocation of bytes, filled from the host or not, read back,
// freed with its owner; and CUDA_OK, which fails the test on a CUDA error.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

namespace mconv::test {

struct DeviceBytes {
  void* ptr = nullptr;  // null where the allocation failed
  explicit DeviceBytes(size_t n) {
    if (cudaMalloc(&ptr, std::max<size_t>(n, 16)) != cudaSuccess) ptr = nullptr;
  }
  explicit DeviceBytes(const std::vector<unsigned char>& host) : DeviceBytes(host.size()) {
    if (ptr) cudaMemcpy(ptr, host.data(), host.size(), cudaMemcpyHostToDevice);
  }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  ~DeviceBytes() { cudaFree(ptr); }
  std::vector<unsigned char> read(size_t n) const {
    std::vector<unsigned char> r(n);
    cudaMemcpy(r.data(), ptr, n, cudaMemcpyDeviceToHost);
    return r;
  }
};

}  // namespace mconv::test
