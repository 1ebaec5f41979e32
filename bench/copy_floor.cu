// The memory floor of each depthwise layer as `mconv bench` times it: a streaming kernel that reads
// the layer's input bytes and writes its output bytes (out = the sum of s*s input vectors, 16-byte
// accesses), over enough rotating buffers (3x L2) that it runs from DRAM, graph-timed like the bench
// (median of 5 replays of a 20-launch graph). Also an empty kernel, the fixed cost of one launch.
// Built as mconv_copy_floor in CUDA builds.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#define CK(x)                                                           \
  do {                                                                  \
    cudaError_t e_ = (x);                                               \
    if (e_ != cudaSuccess) {                                            \
      printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      return 1;                                                         \
    }                                                                   \
  } while (0)

// out[j] = sum over k < ratio of in[k * n + j]: one float4 per thread
__global__ void stream1(const float4* __restrict__ in, float4* __restrict__ out, long long n, int ratio) {
  const long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (j >= n) return;
  float4 s = in[j];
  for (int k = 1; k < ratio; ++k) {
    const float4 v = in[k * n + j];
    s.x += v.x;
    s.y += v.y;
    s.z += v.z;
    s.w += v.w;
  }
  out[j] = s;
}
// the same, 4 outputs per thread (more loads in flight)
__global__ void stream4(const float4* __restrict__ in, float4* __restrict__ out, long long n, int ratio) {
  const long long j0 = blockIdx.x * (long long)blockDim.x * 4 + threadIdx.x;
  float4 s[4];
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const long long j = j0 + u * blockDim.x;
    s[u] = j < n ? in[j] : make_float4(0, 0, 0, 0);
  }
  for (int k = 1; k < ratio; ++k)
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const long long j = j0 + u * blockDim.x;
      if (j < n) {
        const float4 v = in[k * n + j];
        s[u].x += v.x;
        s[u].y += v.y;
        s[u].z += v.z;
        s[u].w += v.w;
      }
    }
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const long long j = j0 + u * blockDim.x;
    if (j < n) out[j] = s[u];
  }
}
__global__ void empty_kernel(float* p) {
  if (p && threadIdx.x == 1024) p[0] = 0;
}

int main() {
  struct L {
    const char* name;
    int c, h, s;
  };
  const L layers[] = {{"c32_h112_s1", 32, 112, 1}, {"c96_h112_s2", 96, 112, 2}, {"c144_h56_s1", 144, 56, 1},
                      {"c144_h56_s2", 144, 56, 2}, {"c192_h28_s1", 192, 28, 1}, {"c192_h28_s2", 192, 28, 2},
                      {"c384_h14_s1", 384, 14, 1}, {"c576_h14_s1", 576, 14, 1}, {"c576_h14_s2", 576, 14, 2},
                      {"c960_h7_s1", 960, 7, 1}};
  int l2 = 0;
  CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  auto time_it = [&](auto launch) -> double {
    for (int i = 0; i < 3; ++i) launch(i);
    cudaGraph_t g;
    cudaGraphExec_t ex;
    cudaStreamBeginCapture(st, cudaStreamCaptureModeRelaxed);
    for (int i = 0; i < 20; ++i) launch(i);
    cudaStreamEndCapture(st, &g);
    cudaGraphInstantiate(&ex, g, 0);
    cudaGraphLaunch(ex, st);
    std::vector<double> t;
    for (int r = 0; r < 5; ++r) {
      cudaEventRecord(a, st);
      cudaGraphLaunch(ex, st);
      cudaEventRecord(b, st);
      cudaEventSynchronize(b);
      float ms;
      cudaEventElapsedTime(&ms, a, b);
      t.push_back(ms / 20 * 1000);
    }
    cudaGraphExecDestroy(ex);
    cudaGraphDestroy(g);
    std::sort(t.begin(), t.end());
    return t[2];
  };
  printf("empty kernel (1 block): %.2f us\n", time_it([&](int) { empty_kernel<<<1, 128, 0, st>>>(nullptr); }));
  printf("empty kernel (1056 blocks): %.2f us\n", time_it([&](int) { empty_kernel<<<1056, 128, 0, st>>>(nullptr); }));
  printf("%-14s %8s %8s %8s %8s %8s\n", "layer", "in MB", "out MB", "copies", "1/thr us", "4/thr us");
  for (const L& l : layers) {
    const long long out_floats = 32LL * l.c * (l.h / l.s) * (l.h / l.s);
    const int ratio = l.s * l.s;
    const long long n = out_floats / 4;
    const double set = 4.0 * out_floats * (ratio + 1);
    const int copies = int(std::min(16.0, std::max(1.0, std::ceil(3.0 * l2 / set))));
    std::vector<float*> in(copies), out(copies);
    for (int c = 0; c < copies; ++c) {
      CK(cudaMalloc(&in[c], 4 * out_floats * ratio));
      CK(cudaMalloc(&out[c], 4 * out_floats));
      CK(cudaMemset(in[c], 0, 4 * out_floats * ratio));
    }
    const double t1 = time_it([&](int i) {
      stream1<<<(n + 255) / 256, 256, 0, st>>>((const float4*)in[i % copies], (float4*)out[i % copies], n, ratio);
    });
    const double t4 = time_it([&](int i) {
      stream4<<<(n + 1023) / 1024, 256, 0, st>>>((const float4*)in[i % copies], (float4*)out[i % copies], n, ratio);
    });
    CK(cudaGetLastError());
    printf("%-14s %8.2f %8.2f %8d %8.2f %8.2f\n", l.name, 4e-6 * out_floats * ratio, 4e-6 * out_floats, copies, t1, t4);
    for (int c = 0; c < copies; ++c) {
      cudaFree(in[c]);
      cudaFree(out[c]);
    }
  }
  return 0;
}
