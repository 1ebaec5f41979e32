// mconv: the convolution problem (shapes and hyper-parameters), validated.
#pragma once

#include <cstdint>
#include <string>

#include "mconv/types.hpp"

namespace mconv {

/// Cross-correlation is the CNN convention; true convolution flips the filter (R-1-r, S-1-s).
enum class Mode : int { CrossCorrelation = 0, Convolution = 1 };

/// Forward convolution y = conv(x, w) (scaled and accumulated by the call's Epilogue). Sizes in the
/// vocabulary of types.hpp.
struct Problem {
  static constexpr int64_t kSameAsBegin = -1;
  int64_t n = 1, c = 1, h = 1, w = 1;
  int64_t k = 1, r = 1, s = 1;
  int64_t pad_h = 0, pad_w = 0;  ///< zero rows above and columns left of x (and below/right unless set apart)
  /// Zero rows below and columns right of x where they differ from pad_h/pad_w (ONNX's "pads" end
  /// values); kSameAsBegin keeps them equal. The backward passes plan their phases with these.
  int64_t pad_h_end = kSameAsBegin, pad_w_end = kSameAsBegin;
  int64_t stride_h = 1, stride_w = 1;
  int64_t dil_h = 1, dil_w = 1;
  int64_t groups = 1;
  Mode mode = Mode::CrossCorrelation;

  /// Output height P and width Q; 0 for a problem whose fields are invalid (validate() says which).
  int64_t p() const;
  int64_t q() const;
  /// The padding below and right of x in effect.
  int64_t end_pad_h() const { return pad_h_end == kSameAsBegin ? pad_h : pad_h_end; }
  int64_t end_pad_w() const { return pad_w_end == kSameAsBegin ? pad_w : pad_w_end; }
  int64_t c_per_group() const { return groups > 0 ? c / groups : 0; }
  int64_t k_per_group() const { return groups > 0 ? k / groups : 0; }
  /// Multiply-adds counted twice: 2 * N*K*P*Q * C/G*R*S.
  double flops() const;

  /// Throws Error(BadParam/Overflow) naming the first bad field.
  void validate() const;
  /// Also checks that the descriptors agree with the problem (dims, dtype, strides, sizes).
  void validate(const TensorDesc& x, const TensorDesc& w, const TensorDesc& y) const;

  /// Descriptors of packed tensors in a named layout; validate() first (Error for an invalid problem).
  TensorDesc x_desc(Layout l, DType t = DType::Float32) const;
  TensorDesc w_desc(Layout l, DType t = DType::Float32) const;
  TensorDesc y_desc(Layout l, DType t = DType::Float32) const;

  /// "n32 c64 h56 w56 k64 r3 s3 pad1,1 stride1,1 dil1,1 g1" ("pad1:0,1:0" where the end padding differs).
  std::string to_string() const;
};

}  // namespace mconv
