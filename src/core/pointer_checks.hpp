// Argument checks shared by every executor: run before any write, so an error leaves y untouched.
#pragma once

#include <cstdint>
#include <string>

#include "mconv/engine.hpp"
#include "mconv/types.hpp"

namespace mconv::detail {

inline void check_pointer(const void* p, const char* field, int alignment) {
  if (p == nullptr) throw Error(Status::NullPointer, std::string(field) + ": null pointer");
  if (reinterpret_cast<uintptr_t>(p) % alignment != 0)
    throw Error(Status::Misaligned,
                std::string(field) + ": pointer is not " + std::to_string(alignment) + "-byte aligned");
}

inline void check_tensors(const void* x, const void* w, const void* y, const Epilogue& e) {
  check_pointer(x, "x", 4);
  check_pointer(w, "w", 4);
  check_pointer(y, "y", 4);
  if (e.bias) check_pointer(e.bias, "bias", 4);
}

/// alpha*acc + beta*old + bias, then ReLU. beta == 0 never reads y (it may hold NaN).
inline float apply_epilogue(float alpha, double acc, float beta, const float* y_old, const float* bias, bool relu) {
  double v = alpha * acc;
  if (beta != 0.0f) v += double(beta) * double(*y_old);
  if (bias) v += double(*bias);
  if (relu && v < 0.0) v = 0.0;
  return static_cast<float>(v);
}

}  // namespace mconv::detail
