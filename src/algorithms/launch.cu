// launch_forward: the Plan's division picks its family's launcher.
#include <variant>

#include "common/cuda_check.cuh"
#include "launch.hpp"

namespace mconv::detail {

void launch_forward(const Plan& plan, const void* x, const void* w, void* y, const Epilogue& e, void* stream,
                    bool dependent_launch) {
  // implicit_mma and the direct families but stride_fixed take every dtype; implicit_precomp and
  // stride_fixed run fp32 only (Plan::build refuses other dtypes for them).
  const auto* xf = static_cast<const float*>(x);
  const auto* wf = static_cast<const float*>(w);
  auto* yf = static_cast<float*>(y);
  std::visit(
      [&](const auto& d) {
        using D = std::decay_t<decltype(d)>;
        if constexpr (std::is_same_v<D, std::monostate>)
          throw Error(Status::BadParam, "plan: a cpu plan given to the cuda target");
        else if constexpr (std::is_same_v<D, ImplicitMmaDivision>)
          implicit_mma_forward(plan, d, x, w, y, e, stream, dependent_launch);
        else if constexpr (std::is_same_v<D, ChannelsLastDepthwiseDivision>)
          channels_last_depthwise_forward(plan, d, x, w, y, e, stream, dependent_launch);
        else if constexpr (std::is_same_v<D, ImplicitPrecompDivision>)
          implicit_precomp_forward(plan, d, xf, wf, yf, e, stream, dependent_launch);
        else if constexpr (std::is_same_v<D, DirectBlockDivision>)
          direct_block_forward(plan, d, x, w, y, e, stream, dependent_launch);
        else if constexpr (std::is_same_v<D, SingleChannelDivision>)
          single_channel_strip_forward(plan, d, x, w, y, e, stream, dependent_launch);
        else if constexpr (std::is_same_v<D, PlaneStreamDivision>)
          plane_stream_forward(plan, d, x, w, y, e, stream, dependent_launch);
        else if constexpr (std::is_same_v<D, PlaneBulkDivision>)
          plane_bulk_forward(plan, d, x, w, y, e, stream, dependent_launch);
        else if constexpr (std::is_same_v<D, DepthwiseWgradDivision>)
          depthwise_wgrad_forward(plan, d, x, w, y, e, stream, dependent_launch);
        else if constexpr (std::is_same_v<D, FewChannelWgradDivision>)
          few_channel_wgrad_forward(plan, d, x, w, y, e, stream, dependent_launch);
        else if constexpr (std::is_same_v<D, FewChannelDivision>)
          few_channel_forward(plan, d, x, w, y, e, stream, dependent_launch);
        else if constexpr (std::is_same_v<D, FewFilterDivision>)
          few_filter_forward(plan, d, x, w, y, e, stream, dependent_launch);
        else if constexpr (std::is_same_v<D, WindowMmaDivision>)
          window_mma_forward(plan, d, x, w, y, e, stream, dependent_launch);
        else
          stride_fixed_forward(plan, d, xf, wf, yf, e, stream, dependent_launch);
      },
      plan.division());
}

void prepare_launch(const Plan& plan) {
  if (const auto* d = std::get_if<ImplicitMmaDivision>(&plan.division())) implicit_mma_prepare(plan, *d);
}

}  // namespace mconv::detail
