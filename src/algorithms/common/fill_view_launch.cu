// A backward pass's fill step (include/mconv/backward.hpp): out = beta * out over a strided view of
// any dtype, for the dgrad phases that no filter tap reaches (1x1 stride-2 layers' odd rows).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <array>

#include "../launch.hpp"
#include "cuda_check.cuh"
#include "storage.cuh"

namespace mconv::detail {
namespace {

struct FillViewParams {
  void* base;
  long long total;
  long long d1, d2, d3;  // dims 1..3 (dim 0 is what remains)
  long long s0, s1, s2, s3;
  float beta;
};

template <class T>
__global__ void fill_view_kernel(const FillViewParams prm) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < prm.total;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    long long rest = i;
    const long long i3 = rest % prm.d3;
    rest /= prm.d3;
    const long long i2 = rest % prm.d2;
    rest /= prm.d2;
    const long long i1 = rest % prm.d1;
    const long long i0 = rest / prm.d1;
    T* dst = static_cast<T*>(prm.base) + i0 * prm.s0 + i1 * prm.s1 + i2 * prm.s2 + i3 * prm.s3;
    *dst = cuda::from_float<T>(prm.beta != 0.0f ? prm.beta * cuda::to_float(*dst) : 0.0f);  // beta = 0 never reads
  }
}

}  // namespace

void fill_view(const TensorDesc& view, void* base, float beta, void* stream) {
  FillViewParams prm{};
  prm.base = base;
  prm.total = view.element_count();
  if (prm.total == 0) return;
  // Walk the view with its smallest stride fastest, so that consecutive threads write neighbouring
  // elements whatever the layout (a channels-last view's channels, an NCHW view's columns).
  std::array<int, 4> order{0, 1, 2, 3};
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return view.strides[a] > view.strides[b]; });
  prm.d1 = view.dims[order[1]];
  prm.d2 = view.dims[order[2]];
  prm.d3 = view.dims[order[3]];
  prm.s0 = view.strides[order[0]];
  prm.s1 = view.strides[order[1]];
  prm.s2 = view.strides[order[2]];
  prm.s3 = view.strides[order[3]];
  prm.beta = beta;
  const int threads = 256;
  const long long blocks = std::min<long long>((prm.total + threads - 1) / threads, 4096);
  auto s = static_cast<cudaStream_t>(stream);
  switch (view.dtype) {
    case DType::Float32:
      fill_view_kernel<float><<<blocks, threads, 0, s>>>(prm);
      break;
    case DType::Float16:
      fill_view_kernel<__half><<<blocks, threads, 0, s>>>(prm);
      break;
    case DType::BFloat16:
      fill_view_kernel<__nv_bfloat16><<<blocks, threads, 0, s>>>(prm);
      break;
  }
  MCONV_CUDA_CHECK(cudaGetLastError());
}

}  // namespace mconv::detail
