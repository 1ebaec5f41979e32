// A backward pass's fill step (include/mconv/backward.hpp): out = beta * out over a strided view of
// any dtype, for the dgrad phases that no filter tap reaches (1x1 stride-2 layers' odd rows). The
// same walk applies SiLU in place to y after the kernels that do not fuse it (Note [fused silu]).
//
// Note [fill rows]: the view is walked as rows along its smallest stride (a channels-last view's
// channels, an NCHW view's columns), a group of threads a row. A row's coordinates come from two
// fixed-divisor divides per row, not three 64-bit divides per element: with those, the three fills
// of resnet50's l2_ds dgrad (bf16, batch 32, 12.8 MB each) took 39.5 us apiece on the H100, bound
// on instructions with DRAM idle, three times the GEMM step beside them. Rows that are contiguous
// and 16-byte aligned are written a 16-byte vector a thread.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <array>
#include <cstdint>

#include "../launch.hpp"
#include "cuda_check.cuh"
#include "dependent_launch.cuh"
#include "epilogue.cuh"
#include "fast_divmod.cuh"
#include "kernel_launch.cuh"
#include "storage.cuh"
#include "storage_dtype.cuh"

namespace mconv::detail {
namespace {

struct FillViewParams {
  void* base;
  unsigned rows;             // d0 * d1 * d2 of this launch, below 2^31 (FastDivmod's range)
  cuda::FastDivmod d2, d1;   // row -> (i0, i1, i2)
  long long s0, s1, s2, s3;  // element strides, s3 the smallest
  int row_length;            // d3
  int lanes;                 // threads of a row (a power of two dividing the block)
  float beta;
};

/// V: elements a thread writes at once; V > 1 only for contiguous, 16-byte aligned rows. SILU: each
/// element becomes silu(element) instead of beta times it.
template <class T, int V, bool SILU>
__global__ void __launch_bounds__(256) fill_view_kernel(const FillViewParams prm) {
  cuda::detail::wait_then_allow_dependent_grids();  // Note [dependent launch]
  const int lane = threadIdx.x % prm.lanes, rows_per_block = blockDim.x / prm.lanes;
  for (unsigned row = blockIdx.x * rows_per_block + threadIdx.x / prm.lanes; row < prm.rows;
       row += gridDim.x * rows_per_block) {
    unsigned rest, i0, i1, i2;
    prm.d2.divmod(row, rest, i2);
    prm.d1.divmod(rest, i0, i1);
    T* line = static_cast<T*>(prm.base) + i0 * prm.s0 + i1 * prm.s1 + i2 * prm.s2;
    for (int j = lane * V; j < prm.row_length; j += prm.lanes * V) {
      if constexpr (V > 1) {
        static_assert(sizeof(T) * V == 16, "one 16-byte vector");
        uint4* p = reinterpret_cast<uint4*>(line + j);
        if (!SILU && prm.beta == 0.0f) {  // never reads: y may hold NaN or never have been written
          *p = make_uint4(0, 0, 0, 0);
        } else {
          T v[V];
          const uint4 old = *p;
          __builtin_memcpy(v, &old, 16);
#pragma unroll
          for (int e = 0; e < V; ++e) {
            const float f = cuda::to_float(v[e]);
            v[e] = cuda::from_float<T>(SILU ? cuda::silu(f) : prm.beta * f);
          }
          uint4 scaled;
          __builtin_memcpy(&scaled, v, 16);
          *p = scaled;
        }
      } else {
        T* p = line + j * prm.s3;
        if constexpr (SILU)
          *p = cuda::from_float<T>(cuda::silu(cuda::to_float(*p)));
        else
          *p = cuda::from_float<T>(prm.beta != 0.0f ? prm.beta * cuda::to_float(*p) : 0.0f);
      }
    }
  }
}

template <class T, bool SILU>
void launch(FillViewParams prm, long long d0, long long d1, long long d2, cuda::LaunchStream on) {
  const long long per_image = d1 * d2;
  if (per_image >= (1LL << 31))
    throw Error(Status::Unsupported, "fill: 2^31 or more rows in one slice of the view along its largest stride");
  constexpr int kVector = 16 / sizeof(T);
  const bool vector = prm.s3 == 1 && prm.row_length % kVector == 0 && prm.s0 % kVector == 0 && prm.s1 % kVector == 0 &&
                      prm.s2 % kVector == 0 && reinterpret_cast<uintptr_t>(prm.base) % 16 == 0;
  const int v = vector ? kVector : 1;
  const long long units = (prm.row_length + v - 1) / v;
  prm.lanes = 1;
  while (prm.lanes < 256 && prm.lanes < units) prm.lanes *= 2;
  prm.d2 = cuda::FastDivmod(static_cast<unsigned>(d2));
  prm.d1 = cuda::FastDivmod(static_cast<unsigned>(d1));
  const int threads = 256, rows_per_block = threads / prm.lanes;
  // Launches of at most 2^31 - 1 rows (FastDivmod's range), a whole number of d0 slices each.
  const long long images_per_launch = std::max<long long>(1, ((1LL << 31) - 1) / per_image);
  for (long long i0 = 0; i0 < d0; i0 += images_per_launch) {
    FillViewParams part = prm;
    part.base = static_cast<T*>(prm.base) + i0 * prm.s0;
    part.rows = static_cast<unsigned>(std::min(images_per_launch, d0 - i0) * per_image);
    const long long blocks = std::min<long long>((part.rows + rows_per_block - 1) / rows_per_block, 8192);
    cuda::launch_kernel(vector ? fill_view_kernel<T, kVector, SILU> : fill_view_kernel<T, 1, SILU>,
                        dim3(static_cast<unsigned>(blocks)), threads, 0, on, 1, part);
  }
}

// The view's walk (Note [fill rows]) with out = beta * out, or out = silu(out).
template <bool SILU>
void map_view(const TensorDesc& view, void* base, float beta, void* stream, bool dependent_launch) {
  if (view.element_count() == 0) return;
  // Note [fill rows]: rows along the smallest stride, so that a row's threads write neighbouring
  // elements whatever the layout.
  std::array<int, 4> order{0, 1, 2, 3};
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return view.strides[a] > view.strides[b]; });
  FillViewParams prm{};
  prm.base = base;
  prm.s0 = view.strides[order[0]];
  prm.s1 = view.strides[order[1]];
  prm.s2 = view.strides[order[2]];
  prm.s3 = view.strides[order[3]];
  prm.row_length = static_cast<int>(view.dims[order[3]]);
  prm.beta = beta;
  const long long d0 = view.dims[order[0]], d1 = view.dims[order[1]], d2 = view.dims[order[2]];
  const cuda::LaunchStream on{static_cast<cudaStream_t>(stream), dependent_launch};
  visit_storage_dtype(view.dtype, SILU ? "silu" : "fill",
                      [&](auto element) { launch<decltype(element), SILU>(prm, d0, d1, d2, on); });
}

}  // namespace

void fill_view(const TensorDesc& view, void* base, float beta, void* stream, bool dependent_launch) {
  map_view<false>(view, base, beta, stream, dependent_launch);
}

void silu_view(const TensorDesc& view, void* base, void* stream, bool dependent_launch) {
  map_view<true>(view, base, 0.0f, stream, dependent_launch);
}

}  // namespace mconv::detail
