// `mconv device`: what the CUDA runtime reports about each visible GPU.
#include <cuda_runtime.h>

#include <iostream>

#include "bench.hpp"
#include "gpu_timing.hpp"

namespace mconv::tools {

void print_device_info() {
  int count = 0;
  cuda_ok(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp p{};
    cuda_ok(cudaGetDeviceProperties(&p, d), "cudaGetDeviceProperties");
    int clock_khz = 0;
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, d);
    std::cout << "device " << d << ": " << p.name << " (sm_" << p.major << p.minor << ")\n"
              << "  SMs                      " << p.multiProcessorCount << "\n"
              << "  shared memory per SM     " << p.sharedMemPerMultiprocessor / 1024 << " KiB\n"
              << "  shared memory per block  " << p.sharedMemPerBlockOptin / 1024 << " KiB (opt-in)\n"
              << "  registers per SM         " << p.regsPerMultiprocessor << "\n"
              << "  max threads per SM       " << p.maxThreadsPerMultiProcessor << "\n"
              << "  L2                       " << p.l2CacheSize / (1024 * 1024) << " MiB\n"
              << "  SM clock                 " << clock_khz / 1000 << " MHz\n"
              << "  global memory            " << p.totalGlobalMem / (1 << 20) << " MiB\n";
  }
}

}  // namespace mconv::tools
