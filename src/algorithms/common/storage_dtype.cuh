// The launchers' one switch over the storage types: a plan's dtype chosen at run time becomes the
// kernel's element type at compile time.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "mconv/types.hpp"

namespace mconv::detail {

/// Calls f(T{}) for the element type the GPU stores `t` as (float, __half, __nv_bfloat16). fp64
/// (the CPU executor's only) is an internal error naming `who`: no planner gives it a GPU kernel.
template <class F>
decltype(auto) visit_storage_dtype(DType t, const char* who, F&& f) {
  switch (t) {
    case DType::Float32:
      return f(float{});
    case DType::Float16:
      return f(__half{});
    case DType::BFloat16:
      return f(__nv_bfloat16{});
    case DType::Float64:
      break;
  }
  throw Error(Status::Internal, std::string(who) + ": no CUDA kernel stores " + dtype_name(t));
}

}  // namespace mconv::detail
