// Tensor maps for the copy engine (tensor_copy.cuh), encoded on the host per call (a few hundred
// nanoseconds of CPU work, no device call) because they hold the tensors' addresses. The encoders are
// driver functions; the runtime hands out their entry points, so the library links no libcuda.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <string>

#include "mconv/types.hpp"

namespace mconv::cuda {

namespace tensor_map_detail {

template <class Fn>
Fn driver_entry(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  const cudaError_t err = cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found);
  if (err != cudaSuccess || found != cudaDriverEntryPointSuccess || !fn)
    throw Error(Status::CudaError, std::string("tensor map: the driver has no ") + name + " (CUDA 12.0 or later)");
  return reinterpret_cast<Fn>(fn);
}

inline void check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS)
    throw Error(Status::Internal, std::string("tensor map: ") + what + " refused the map (CUresult " +
                                      std::to_string(static_cast<int>(r)) +
                                      "); the planner should have kept the gather");
}

/// Bytes of one element of the maps' types: fp16/bf16, or fp32 (TF32 stages).
inline cuuint64_t element_bytes(CUtensorMapDataType type) {
  return type == CU_TENSOR_MAP_DATA_TYPE_FLOAT32 ? 4 : 2;
}

}  // namespace tensor_map_detail

/// The shape of an im2col map over an NHWC tensor (strides in elements, H and W within N): columns of
/// `pixels` output pixels, `channels` channels each, window origins from (lower_w, lower_h) to the
/// tensor's far edge plus (upper_w, upper_h) in steps of (step_w, step_h).
struct Im2colShape {
  int64_t n, h, w, c;
  int64_t stride_n, stride_h, stride_w;
  int lower_h, lower_w, upper_h, upper_w;
  int step_h, step_w;
  int channels, pixels;
};

/// An im2col map over 16-bit or fp32 elements, stages in the 128-byte swizzle, zeros outside the tensor.
inline CUtensorMap im2col_map(const void* base, CUtensorMapDataType type, const Im2colShape& s) {
  static const auto encode =
      tensor_map_detail::driver_entry<PFN_cuTensorMapEncodeIm2col_v12000>("cuTensorMapEncodeIm2col");
  const cuuint64_t dims[4] = {cuuint64_t(s.c), cuuint64_t(s.w), cuuint64_t(s.h), cuuint64_t(s.n)};
  const cuuint64_t e = tensor_map_detail::element_bytes(type);
  const cuuint64_t strides[3] = {cuuint64_t(s.stride_w) * e, cuuint64_t(s.stride_h) * e, cuuint64_t(s.stride_n) * e};
  const int lower[2] = {s.lower_w, s.lower_h}, upper[2] = {s.upper_w, s.upper_h};  // innermost first
  const cuuint32_t steps[4] = {1, cuuint32_t(s.step_w), cuuint32_t(s.step_h), 1};
  CUtensorMap map;
  tensor_map_detail::check(
      encode(&map, type, 4, const_cast<void*>(base), dims, strides, lower, upper, cuuint32_t(s.channels),
             cuuint32_t(s.pixels), steps, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
      "cuTensorMapEncodeIm2col");
  return map;
}

/// A tiled map over a Rank-D view of 16-bit or fp32 elements (dims innermost first, the first contiguous; the
/// others `strides` elements apart), boxes of `box` in the 128-byte swizzle, zeros outside the view.
template <int Rank>
inline CUtensorMap tiled_map(const void* base, CUtensorMapDataType type, const std::array<int64_t, Rank>& dims,
                             const std::array<int64_t, Rank - 1>& strides, const std::array<int, Rank>& box) {
  static const auto encode =
      tensor_map_detail::driver_entry<PFN_cuTensorMapEncodeTiled_v12000>("cuTensorMapEncodeTiled");
  cuuint64_t global_dims[Rank], global_strides[Rank - 1];
  cuuint32_t box_dims[Rank], steps[Rank];
  for (int i = 0; i < Rank; ++i) {
    global_dims[i] = cuuint64_t(dims[i]);
    box_dims[i] = cuuint32_t(box[i]);
    steps[i] = 1;
    if (i > 0) global_strides[i - 1] = cuuint64_t(strides[i - 1]) * tensor_map_detail::element_bytes(type);
  }
  CUtensorMap map;
  tensor_map_detail::check(encode(&map, type, Rank, const_cast<void*>(base), global_dims, global_strides, box_dims,
                                  steps, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                  CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                           "cuTensorMapEncodeTiled");
  return map;
}

}  // namespace mconv::cuda
