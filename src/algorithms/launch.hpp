// The boundary between the runtime and the kernel families: one entry that launches a Plan's
// division, and each family's launcher behind it. Built from the .cu files when mconv has CUDA, and
// by launch_absent.cpp (every call reports NoDevice) otherwise.
#pragma once

#include "mconv/engine.hpp"
#include "mconv/plan.hpp"

namespace mconv::detail {

/// Launches `plan` (a cuda plan with its device table where its family reads one) on `stream`.
/// Asynchronous; checks the launch. Pointers are device pointers of the plan's dtype, checked by the
/// caller. `dependent_launch`: the kernels (every family's, the pre-pass and the fills, each with
/// that flag below) may start while the stream's previous kernel finishes (Note [dependent launch],
/// common/dependent_launch.cuh).
void launch_forward(const Plan& plan, const void* x, const void* w, void* y, const Epilogue& e, void* stream,
                    bool dependent_launch);

/// What a plan's kernels need set once before their first launch (the dynamic shared-memory limit
/// of the tensor-core tiles), done when the plan is made so that a launch stays graph-capturable.
void prepare_launch(const Plan& plan);

// The families' launchers (src/algorithms/<family>/launch.cu): each reads its division and only
// decides what depends on the call (pointer alignment for vector copies; an activation forbids split-K).
void implicit_mma_prepare(const Plan& plan, const ImplicitMmaDivision& d);
void implicit_mma_forward(const Plan& plan, const ImplicitMmaDivision& d, const void* x, const void* w, void* y,
                          const Epilogue& e, void* stream, bool dependent_launch);
void implicit_precomp_forward(const Plan& plan, const ImplicitPrecompDivision& d, const float* x, const float* w,
                              float* y, const Epilogue& e, void* stream, bool dependent_launch);
void direct_block_forward(const Plan& plan, const DirectBlockDivision& d, const void* x, const void* w, void* y,
                          const Epilogue& e, void* stream, bool dependent_launch);
void single_channel_strip_forward(const Plan& plan, const SingleChannelDivision& d, const void* x, const void* w,
                                  void* y, const Epilogue& e, void* stream, bool dependent_launch);
void plane_stream_forward(const Plan& plan, const PlaneStreamDivision& d, const void* x, const void* w, void* y,
                          const Epilogue& e, void* stream, bool dependent_launch);
void channels_last_depthwise_forward(const Plan& plan, const ChannelsLastDepthwiseDivision& d, const void* x,
                                     const void* w, void* y, const Epilogue& e, void* stream, bool dependent_launch);
void plane_bulk_forward(const Plan& plan, const PlaneBulkDivision& d, const void* x, const void* w, void* y,
                        const Epilogue& e, void* stream, bool dependent_launch);
void stride_fixed_forward(const Plan& plan, const StrideFixedDivision& d, const float* x, const float* w, float* y,
                          const Epilogue& e, void* stream, bool dependent_launch);
/// A wgrad step: x, w and y are the step's views of x, dy and dw.
void depthwise_wgrad_forward(const Plan& plan, const DepthwiseWgradDivision& d, const void* x, const void* w, void* y,
                             const Epilogue& e, void* stream, bool dependent_launch);

/// A wgrad step: x, w and y are the step's views of x, dy and dw.
void few_channel_wgrad_forward(const Plan& plan, const FewChannelWgradDivision& d, const void* x, const void* w,
                               void* y, const Epilogue& e, void* stream, bool dependent_launch);

/// A forward layer of at most 4 input channels (Note [few-channel forward]).
void few_channel_forward(const Plan& plan, const FewChannelDivision& d, const void* x, const void* w, void* y,
                         const Epilogue& e, void* stream, bool dependent_launch);

/// A layer of at most 8 filters (Note [few-filter forward]); a dgrad step's x is its view of dy.
void few_filter_forward(const Plan& plan, const FewFilterDivision& d, const void* x, const void* w, void* y,
                        const Epilogue& e, void* stream, bool dependent_launch);

/// An fp32 layer in TF32 math with x in plane order (Note [window mma]); a dgrad step's x is its view
/// of dy.
void window_mma_forward(const Plan& plan, const WindowMmaDivision& d, const void* x, const void* w, void* y,
                        const Epilogue& e, void* stream, bool dependent_launch);

/// out = beta * out over a strided view of any dtype (beta = 0 never reads it): a backward pass's fill
/// step.
void fill_view(const TensorDesc& view, void* base, float beta, void* stream, bool dependent_launch);

/// out = silu(out) over a strided view of any dtype: a SiLU call's second step after the families
/// that do not fuse SiLU (Note [fused silu], common/epilogue.cuh).
void silu_view(const TensorDesc& view, void* base, void* stream, bool dependent_launch);

/// Split-K's first pass, y = beta*y + bias, so that slices can add alpha * partial sums; `blocks`
/// from the division (common/split_k.hpp).
void output_prepass(const Plan& plan, int blocks, void* y, const Epilogue& e, void* stream, bool dependent_launch);

}  // namespace mconv::detail
