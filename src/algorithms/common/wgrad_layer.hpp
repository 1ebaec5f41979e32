// A wgrad step (decompose_backward_filter, src/plan/backward.cpp) in the forward layer's terms, for
// the families that reduce the filter gradient directly rather than as the step's GEMM.
#pragma once

#include <cstdint>

#include "mconv/problem.hpp"

namespace mconv::detail {

/// The step's images are the layer's input channels per group, its channels the layer's images
/// (times the groups), its filter extent the layer's output pixels, its output extent the taps, its
/// dilation the layer's stride and its stride the layer's dilation. h and w are the step's, which
/// drop input rows and columns past the last one any output pixel reads.
struct WgradLayer {
  int64_t n, c, h, w, p, q, r, s, stride_h, stride_w, dil_h, dil_w, pad_h, pad_w, k, kg;
  explicit WgradLayer(const Problem& step)
      : n(step.c_per_group()),
        c(step.n),
        h(step.h),
        w(step.w),
        p(step.r),
        q(step.s),
        r(step.p()),
        s(step.q()),
        stride_h(step.dil_h),
        stride_w(step.dil_w),
        dil_h(step.stride_h),
        dil_w(step.stride_w),
        pad_h(step.pad_h),
        pad_w(step.pad_w),
        k(step.k),
        kg(step.k_per_group()) {}
};

}  // namespace mconv::detail
