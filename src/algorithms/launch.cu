// launch_forward: the Plan's division picks its family's launcher.
#include <variant>

#include "common/cuda_check.cuh"
#include "launch.hpp"

namespace mconv::detail {

void launch_forward(const Plan& plan, const float* x, const float* w, float* y, const Epilogue& e, void* stream) {
  std::visit(
      [&](const auto& d) {
        using D = std::decay_t<decltype(d)>;
        if constexpr (std::is_same_v<D, std::monostate>)
          throw Error(Status::BadParam, "plan: a cpu plan given to the cuda target");
        else if constexpr (std::is_same_v<D, ImplicitPrecompDivision>)
          implicit_precomp_forward(plan, d, x, w, y, e, stream);
        else if constexpr (std::is_same_v<D, DirectBlockDivision>)
          direct_block_forward(plan, d, x, w, y, e, stream);
        else if constexpr (std::is_same_v<D, SingleChannelDivision>)
          single_channel_strip_forward(plan, d, x, w, y, e, stream);
        else if constexpr (std::is_same_v<D, PlaneStreamDivision>)
          plane_stream_forward(plan, d, x, w, y, e, stream);
        else if constexpr (std::is_same_v<D, PlaneBulkDivision>)
          plane_bulk_forward(plan, d, x, w, y, e, stream);
        else
          stride_fixed_forward(plan, d, x, w, y, e, stream);
      },
      plan.division());
}

}  // namespace mconv::detail
