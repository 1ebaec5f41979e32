// Measurements of the hardware model: global-memory latency by a pointer chase, bandwidth by a
// device copy. Run once per device; the result is cached (hardware_cache.cpp).
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "../algorithms/common/cuda_check.cuh"
#include "cuda_device.hpp"

namespace mconv::detail::cuda_device {
namespace {

// One thread follows `steps` dependent loads through a random cycle; each load misses L2 because
// the cycle spans far more than the L2 and its order is random.
__global__ void pointer_chase_kernel(const unsigned* next, int steps, unsigned start, long long* cycles,
                                     unsigned* sink) {
  unsigned i = start;
  for (int k = 0; k < 64; ++k) i = next[i];  // warm the TLB path a little
  const long long t0 = clock64();
  for (int k = 0; k < steps; ++k) i = __ldcg(next + i);
  const long long t1 = clock64();
  *cycles = t1 - t0;
  *sink = i;
}

int cores_per_sm(int major, int minor) {
  if (major >= 9) return 128;
  if (major == 8) return minor == 0 ? 64 : 128;
  if (major == 7) return 64;
  if (major == 6) return minor == 0 ? 64 : 128;
  return 128;
}

}  // namespace

HardwareModel reported_hardware(int device) {
  check_index(device);
  DeviceGuard guard(device);
  cudaDeviceProp p{};
  MCONV_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  int clock_khz = 0;
  MCONV_CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device));
  HardwareModel m;
  m.name = p.name;
  char uuid[40];
  for (int i = 0; i < 16; ++i) snprintf(uuid + 2 * i, 3, "%02x", static_cast<unsigned char>(p.uuid.bytes[i]));
  m.uuid = uuid;
  m.cc_major = p.major;
  m.cc_minor = p.minor;
  m.sm_count = p.multiProcessorCount;
  m.cores_per_sm = cores_per_sm(p.major, p.minor);
  m.smem_per_sm = static_cast<int64_t>(p.sharedMemPerMultiprocessor);
  m.smem_per_block_optin = static_cast<int64_t>(p.sharedMemPerBlockOptin);
  m.l2_bytes = p.l2CacheSize;
  m.regs_per_sm = p.regsPerMultiprocessor;
  m.max_threads_per_sm = p.maxThreadsPerMultiProcessor;
  m.clock_mhz = clock_khz / 1000.0;
  return m;
}

void measure_memory(int device, double& latency_cycles, double& bandwidth) {
  check_index(device);
  DeviceGuard guard(device);
  // Latency: a random cycle over 256 MiB (5x the H100's L2), visited with 128-byte spacing.
  const size_t slots = (size_t(256) << 20) / sizeof(unsigned);
  const size_t stride = 32;  // 128 bytes: one cache line per hop
  const size_t nodes = slots / stride;
  std::vector<unsigned> order(nodes);
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin() + 1, order.end(), std::mt19937(12345));
  std::vector<unsigned> next(slots, 0);
  for (size_t k = 0; k < nodes; ++k) next[order[k] * stride] = static_cast<unsigned>(order[(k + 1) % nodes] * stride);
  unsigned* d_next = nullptr;
  long long* d_cycles = nullptr;
  unsigned* d_sink = nullptr;
  MCONV_CUDA_CHECK(cudaMalloc(&d_next, slots * sizeof(unsigned)));
  MCONV_CUDA_CHECK(cudaMalloc(&d_cycles, sizeof(long long)));
  MCONV_CUDA_CHECK(cudaMalloc(&d_sink, sizeof(unsigned)));
  MCONV_CUDA_CHECK(cudaMemcpy(d_next, next.data(), slots * sizeof(unsigned), cudaMemcpyHostToDevice));
  const int steps = 20000;
  std::vector<double> samples;
  for (int rep = 0; rep < 3; ++rep) {
    pointer_chase_kernel<<<1, 1>>>(d_next, steps, 0, d_cycles, d_sink);
    MCONV_CUDA_CHECK(cudaGetLastError());
    long long cycles = 0;
    MCONV_CUDA_CHECK(cudaMemcpy(&cycles, d_cycles, sizeof cycles, cudaMemcpyDeviceToHost));
    samples.push_back(double(cycles) / steps);
  }
  std::sort(samples.begin(), samples.end());
  latency_cycles = samples[1];
  // Bandwidth: a 512 MiB device-to-device copy (10x the H100's L2), median of 5, bytes read + written.
  const size_t bytes = size_t(512) << 20;
  void *a = nullptr, *b = nullptr;
  MCONV_CUDA_CHECK(cudaMalloc(&a, bytes));
  MCONV_CUDA_CHECK(cudaMalloc(&b, bytes));
  MCONV_CUDA_CHECK(cudaMemset(a, 1, bytes));
  cudaEvent_t e0, e1;
  MCONV_CUDA_CHECK(cudaEventCreate(&e0));
  MCONV_CUDA_CHECK(cudaEventCreate(&e1));
  std::vector<double> bw;
  for (int rep = 0; rep < 6; ++rep) {
    MCONV_CUDA_CHECK(cudaEventRecord(e0));
    MCONV_CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
    MCONV_CUDA_CHECK(cudaEventRecord(e1));
    MCONV_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    MCONV_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    if (rep > 0) bw.push_back(2.0 * bytes / (ms * 1e-3));  // rep 0 is the warm-up
  }
  std::sort(bw.begin(), bw.end());
  bandwidth = bw[bw.size() / 2];
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFree(a);
  cudaFree(b);
  cudaFree(d_next);
  cudaFree(d_cycles);
  cudaFree(d_sink);
}

}  // namespace mconv::detail::cuda_device
