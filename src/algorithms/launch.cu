// launch_forward: the Plan's division picks its family's launcher; a SiLU call on a family that does not
// take SiLU on runs it with identity and then silu_view (Note [fused silu]).
#include <type_traits>
#include <variant>

#include "common/cuda_check.cuh"
#include "launch.hpp"

namespace mconv::detail {

namespace {

// Note [fused silu]: the memory-bound families fuse SiLU, and implicit_mma takes it on (fused where its
// tile stores y from shared memory, a pass of its own otherwise); the others run identity, then silu_view.
bool fuses_silu(const Plan& plan) {
  return std::visit(
      [](const auto& d) {
        using D = std::decay_t<decltype(d)>;
        return std::is_same_v<D, ImplicitMmaDivision> || std::is_same_v<D, SingleChannelDivision> ||
               std::is_same_v<D, PlaneStreamDivision> || std::is_same_v<D, PlaneBulkDivision> ||
               std::is_same_v<D, ChannelsLastDepthwiseDivision> || std::is_same_v<D, DirectBlockDivision>;
      },
      plan.division());
}

void launch_division(const Plan& plan, const void* x, const void* w, void* y, const Epilogue& e, void* stream,
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

}  // namespace

void launch_forward(const Plan& plan, const void* x, const void* w, void* y, const Epilogue& e, void* stream,
                    bool dependent_launch) {
  if (e.activation == Activation::SiLU && !fuses_silu(plan)) {
    Epilogue identity = e;
    identity.activation = Activation::Identity;
    launch_division(plan, x, w, y, identity, stream, dependent_launch);
    silu_view(plan.y_desc(), y, stream, dependent_launch);
    return;
  }
  launch_division(plan, x, w, y, e, stream, dependent_launch);
}

void prepare_launch(const Plan& plan) {
  if (const auto* d = std::get_if<ImplicitMmaDivision>(&plan.division())) implicit_mma_prepare(plan, *d);
}

}  // namespace mconv::detail
