// Launcher of the bulk plane-stream kernel (Note [plane bulk]): the division from the Plan, x's
// plane order, and the (filter size, stride, segment) switch.
#include "../plan/single_channel_planner.hpp"
#include "cuda_backend.hpp"
#include "cuda_check.cuh"
#include "filter_size_switch.cuh"
#include "single_channel_bulk_kernel.cuh"

namespace mconv::detail::cuda_backend {
namespace {

template <int K, int ST, int SEG>
void launch_chunks(const cuda::PlaneBulkParams& prm, int blocks, int smem, cudaStream_t stream) {
  constexpr int T = kPlaneStreamThreads;
  const auto kernel = cuda::single_channel_bulk_kernel<K, ST, SEG, T, plane_bulk_resident_blocks(K, ST)>;
  cuda::launch_with_smem(kernel, dim3(static_cast<unsigned>(blocks)), T, smem, stream, prm);
}

template <int K, int ST>
void launch(const cuda::PlaneBulkParams& prm, int segment, int blocks, int smem, cudaStream_t stream) {
  segment == 7 ? launch_chunks<K, ST, 7>(prm, blocks, smem, stream)
               : launch_chunks<K, ST, 4>(prm, blocks, smem, stream);
}

}  // namespace

void single_channel_bulk_forward(const Plan& plan, const float* x, const float* w, float* y, const Epilogue& e,
                                 void* stream) {
  const Problem& pr = plan.problem();
  const TileChoice& t = plan.tile();
  const TensorDesc& xd = plan.x_desc();
  cuda::PlaneBulkParams prm{cuda::conv_geometry(plan, x, w, y, e)};
  prm.planes = static_cast<int>(pr.n * pr.groups);
  prm.inner_is_c = xd.strides[1] <= xd.strides[0];
  prm.inner = cuda::FastDivmod(static_cast<unsigned>(prm.inner_is_c ? pr.groups : pr.n));
  prm.planes_per_chunk = t.block_planes;
  prm.rows_per_chunk = t.block_rows;
  const int64_t bands = (pr.p() + t.block_rows - 1) / t.block_rows;
  const int64_t blocks = (prm.planes + t.block_planes - 1) / t.block_planes * bands;
  prm.bands = cuda::FastDivmod(static_cast<unsigned>(bands));
  prm.chunk_rows = cuda::FastDivmod(static_cast<unsigned>(t.block_rows));
  prm.segments = cuda::FastDivmod(static_cast<unsigned>((pr.q() + t.block_cols - 1) / t.block_cols));
  const int64_t in_rows = t.block_planes > 1 || t.block_rows == pr.p()
                              ? pr.h
                              : std::min<int64_t>((t.block_rows - 1) * pr.stride_h + pr.r, pr.h);
  prm.buffer_floats = static_cast<int>(t.block_planes * in_rows * pr.w + 3);
  const int smem = (prm.buffer_floats + 3 * cuda::kPlaneBulkGuard) * 4;
  const auto s = static_cast<cudaStream_t>(stream);
  const int b = static_cast<int>(blocks);  // the planner keeps it below 2^31
  cuda::filter_size_switch(pr.r, pr.s, [&](auto k) {
    constexpr int K = decltype(k)::value;
    if constexpr (K == 0) {
      throw Error(Status::Unsupported, "filter: the plane stream runs square 1, 3, 5, 7 filters");  // planner refuses
    } else if (pr.stride_h == 1) {
      launch<K, 1>(prm, t.block_cols, b, smem, s);
    } else {
      launch<K, 2>(prm, t.block_cols, b, smem, s);
    }
  });
}

}  // namespace mconv::detail::cuda_backend
