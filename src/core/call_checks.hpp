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

/// The checks every executor makes before it writes: pointers (null, alignment to the element size;
/// bias is fp32) and the epilogue's scalars (finite alpha and beta).
/// The tensors' names in messages: a backward pass's are not x, w, y.
struct TensorNames {
  const char *x = "x", *w = "w", *y = "y";
};

inline void check_call(const void* x, const void* w, const void* y, const Epilogue& e, int element_bytes,
                       const TensorNames& names = {}) {
  check_pointer(x, names.x, element_bytes);
  check_pointer(w, names.w, element_bytes);
  check_pointer(y, names.y, element_bytes);
  if (e.bias) check_pointer(e.bias, "bias", 4);
  if (!std::isfinite(e.alpha)) throw Error(Status::BadParam, "alpha: must be finite");
  if (!std::isfinite(e.beta)) throw Error(Status::BadParam, "beta: must be finite");
  if (e.activation != Activation::Identity && e.activation != Activation::ReLU && e.activation != Activation::SiLU)
    throw Error(Status::BadParam, "activation: " + std::to_string(int(e.activation)) + " is not an Activation");
}

/// y must not share memory with x or w (the kernels read x and w while they write y): Error(BadParam)
/// naming the two tensors. Spans in elements of `element_bytes`.
inline void check_disjoint(const void* x, int64_t x_span, const void* w, int64_t w_span, const void* y, int64_t y_span,
                           int element_bytes, const TensorNames& names = {}) {
  auto overlaps = [&](const void* a, int64_t a_span, const void* b, int64_t b_span) {
    const auto a0 = reinterpret_cast<uintptr_t>(a), b0 = reinterpret_cast<uintptr_t>(b);
    return a0 < b0 + uintptr_t(b_span) * element_bytes && b0 < a0 + uintptr_t(a_span) * element_bytes;
  };
  const std::string out(names.y);
  if (overlaps(y, y_span, x, x_span))
    throw Error(Status::BadParam, out + ": overlaps " + names.x + " (the output must not alias an input)");
  if (overlaps(y, y_span, w, w_span))
    throw Error(Status::BadParam, out + ": overlaps " + names.w + " (the output must not alias an input)");
}

/// alpha*acc + beta*old + bias, then the activation, in double. beta == 0 never reads y (it may hold NaN).
template <class T>
inline double apply_epilogue(const Epilogue& e, double acc, const T* y_old, const float* bias) {
  double v = e.alpha * acc;
  if (e.beta != 0.0f) v += double(e.beta) * double(*y_old);
  if (bias) v += double(*bias);
  return apply_activation(e.activation, v);
}

}  // namespace mconv::detail
