// Host time of one Engine::conv2d_forward call on the cuda target, measured with the GPU busy: a
// spinning kernel is queued first, so every call below only enqueues and none waits for the GPU.
// Small layers run in a few microseconds on the GPU, so this is what a call costs a framework.
// Prints a table and, with an argument, writes it as CSV.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "mconv/mconv.hpp"

namespace {

__global__ void spin(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  using namespace mconv;
  if (!cuda_available()) {
    std::printf("host_overhead: no CUDA device visible\n");
    return 0;
  }
  cudaStream_t stream = nullptr;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  Problem p;  // a late-ResNet-sized layer at batch 1: a few microseconds on the GPU
  p.c = p.k = 64;
  p.h = p.w = 14;
  p.r = p.s = 3;
  p.pad_h = p.pad_w = 1;
  // fp32 NCHW through three algorithms; bf16 NHWC on one wgmma tile with the threads' gather and
  // with tensor-map loads, whose two maps are encoded on every call (Note [wgmma tensor-map loads]).
  struct Variant {
    const char* label;
    DType dtype;
    Layout layout;
    const char* algorithm;
    const char* tile;
  };
  const Variant variants[] = {{"implicit_precomp", DType::Float32, Layout::NCHW, "implicit_precomp", ""},
                              {"stride_fixed", DType::Float32, Layout::NCHW, "stride_fixed", ""},
                              {"auto", DType::Float32, Layout::NCHW, "auto", ""},
                              {"bf16 wgmma gather", DType::BFloat16, Layout::NHWC, "implicit_mma", "wgmma128x64_s3"},
                              {"bf16 wgmma tma", DType::BFloat16, Layout::NHWC, "implicit_mma", "wgmma128x64_s3_tma"}};
  const int64_t elements = std::max({p.x_desc(Layout::NCHW).span_elements(), p.w_desc(Layout::NCHW).span_elements(),
                                     p.y_desc(Layout::NCHW).span_elements()});
  float *x, *w, *y;
  cudaMalloc(&x, elements * 4);
  cudaMalloc(&w, elements * 4);
  cudaMalloc(&y, elements * 4);
  FILE* csv = argc > 1 ? std::fopen(argv[1], "w") : nullptr;
  if (csv) std::fprintf(csv, "algorithm,pointer_checks,us_per_call,us_per_plan_lookup_and_call\n");
  std::printf("%-18s %-15s %14s %24s\n", "algorithm", "pointer checks", "us per call", "us per plan() + call");
  for (const Variant& v : variants)
    for (bool checks : {true, false}) {
      const TensorDesc xd = p.x_desc(v.layout, v.dtype), wd = p.w_desc(v.layout, v.dtype),
                       yd = p.y_desc(v.layout, v.dtype);
      EngineOptions eo;
      eo.check_device_pointers = checks;
      Engine engine(Target::Cuda, 0, stream, eo);
      PlanOptions o;
      o.algorithm = parse_algorithm(v.algorithm);
      o.tile = v.tile;
      std::shared_ptr<const Plan> plan;
      try {
        plan = engine.plan(p, xd, wd, yd, o);
      } catch (const Error& e) {  // the wgmma tiles need sm_90
        std::printf("%-18s %-15s %s\n", v.label, checks ? "on" : "off", e.what());
        continue;
      }
      engine.conv2d_forward(*plan, x, w, y);
      engine.synchronize();
      std::vector<double> call, lookup;
      // 200 calls stay well inside the launch queue (about a thousand entries): a full queue would
      // block the host and count the GPU's time instead of the call's.
      const int calls = 200;
      for (int rep = 0; rep < 5; ++rep) {
        spin<<<1, 1, 0, stream>>>(1000000000LL);  // about 0.5 s of GPU work ahead of the calls
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < calls; ++i) engine.conv2d_forward(*plan, x, w, y);
        auto t1 = std::chrono::steady_clock::now();
        for (int i = 0; i < calls; ++i) engine.conv2d_forward(*engine.plan(p, xd, wd, yd, o), x, w, y);
        auto t2 = std::chrono::steady_clock::now();
        engine.synchronize();
        call.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / calls);
        lookup.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count() / calls);
      }
      std::printf("%-18s %-15s %14.2f %24.2f\n", v.label, checks ? "on" : "off", median(call), median(lookup));
      if (csv) std::fprintf(csv, "%s,%d,%.3f,%.3f\n", v.label, checks ? 1 : 0, median(call), median(lookup));
    }
  if (csv) std::fclose(csv);
  cudaFree(x);
  cudaFree(w);
  cudaFree(y);
  cudaStreamDestroy(stream);
  return 0;
}
