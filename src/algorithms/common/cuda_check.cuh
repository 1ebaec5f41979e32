// CUDA errors become mconv::Error(CudaError) carrying the runtime's message and the call site.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "mconv/division.hpp"
#include "mconv/types.hpp"

namespace mconv::cuda {

inline void check_cuda(cudaError_t err, const char* what, const char* file, int line) {
  if (err != cudaSuccess)
    throw Error(Status::CudaError, std::string(what) + ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err) +
                                       " (" + file + ":" + std::to_string(line) + ")");
}

}  // namespace mconv::cuda

#define MCONV_CUDA_CHECK(call) ::mconv::cuda::check_cuda((call), #call, __FILE__, __LINE__)

namespace mconv::cuda {

/// The grid of a division's launch (the planner keeps every dimension inside the launch limits).
inline dim3 grid_of(const LaunchShape& l) {
  return dim3(static_cast<unsigned>(l.grid_x), static_cast<unsigned>(l.grid_y), static_cast<unsigned>(l.grid_z));
}

}  // namespace mconv::cuda
