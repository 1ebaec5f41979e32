// Argument checks shared by every executor: run before any write, so an error leaves y untouched.
#pragma once

#include <cmath>
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

/// The checks every executor makes before it writes: pointers (null, alignment) and the epilogue's
/// scalars (finite alpha and beta).
inline void check_call(const void* x, const void* w, const void* y, const Epilogue& e) {
  check_pointer(x, "x", 4);
  check_pointer(w, "w", 4);
  check_pointer(y, "y", 4);
  if (e.bias) check_pointer(e.bias, "bias", 4);
  if (!std::isfinite(e.alpha)) throw Error(Status::BadParam, "alpha: must be finite");
  if (!std::isfinite(e.beta)) throw Error(Status::BadParam, "beta: must be finite");
}

/// alpha*acc + beta*old + bias, then ReLU. beta == 0 never reads y (it may hold NaN).
inline float apply_epilogue(const Epilogue& e, double acc, const float* y_old, const float* bias) {
  double v = e.alpha * acc;
  if (e.beta != 0.0f) v += double(e.beta) * double(*y_old);
  if (bias) v += double(*bias);
  if (e.relu && v < 0.0) v = 0.0;
  return static_cast<float>(v);
}

}  // namespace mconv::detail
