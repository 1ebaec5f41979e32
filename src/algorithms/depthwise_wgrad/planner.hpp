// Planner of depthwise_wgrad (Note [depthwise wgrad] in kernel.cuh): which wgrad steps it runs and
// how their reduction is divided among filter chunks, cluster blocks and atomic slices.
#pragma once

#include <string>
#include <vector>

#include "mconv/division.hpp"
#include "mconv/hardware.hpp"
#include "mconv/plan.hpp"

namespace mconv::detail {

/// A wgrad step in the forward layer's terms (decompose_backward_filter), for the planner and the
/// launcher: the step's channels per group are the layer's images, its filter extent the layer's
/// output pixels, its output the layer's taps, its dilation the layer's stride and its stride the
/// layer's dilation.
struct DepthwiseWgradLayer {
  int64_t n, p, q, r, s, stride_h, stride_w, dil_h, dil_w, k, kg;
  explicit DepthwiseWgradLayer(const Problem& step)
      : n(step.c_per_group()),
        p(step.r),
        q(step.s),
        r(step.p()),
        s(step.q()),
        stride_h(step.dil_h),
        stride_w(step.dil_w),
        dil_h(step.stride_h),
        dil_w(step.stride_w),
        k(step.k),
        kg(step.k_per_group()) {}
};

/// The square filter size of the register-window kernel for runs down a column (`down`) or along a
/// row, 0 where only the tap-chunk kernel runs the step.
int depthwise_wgrad_window(const Problem& step, bool down);

/// Why depthwise_wgrad cannot run this step ("" when it can). `step` is a wgrad step in the form of
/// decompose_backward_filter (batch 1; its images are the step's channels, its taps the outputs), x,
/// w (dy) and y (dw) its views. Any group strides run.
std::string depthwise_wgrad_unsupported(const Problem& step, const TensorDesc& x, const TensorDesc& w,
                                        const TensorDesc& y);

DepthwiseWgradDivision plan_depthwise_wgrad(const Problem& step, const TensorDesc& x, const TensorDesc& w,
                                            const GroupStrides& groups, const HardwareModel& hw, bool deterministic,
                                            std::vector<std::string>& why);

}  // namespace mconv::detail
