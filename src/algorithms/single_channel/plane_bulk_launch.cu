// Launcher of the bulk plane-stream kernel (Note [plane bulk]): the division from the Plan, x's
// plane order, and the (dtype, filter size, stride, segment) switch.
#include "../common/cuda_check.cuh"
#include "../common/filter_size_switch.cuh"
#include "../common/kernel_launch.cuh"
#include "../common/storage_dtype.cuh"
#include "../launch.hpp"
#include "plane_bulk_kernel.cuh"
#include "planner.hpp"

namespace mconv::detail {
namespace {

template <class T, int K, int ST, int SEG>
void launch_chunks(cuda::PlaneBulkParams prm, int grid, int smem, bool read_once, cuda::LaunchStream stream) {
  constexpr int kThreads = kPlaneStreamThreads, resident = plane_bulk_resident_blocks(K);
  constexpr int RUN = plane_bulk_run(K, ST);
  // One resident wave walks the chunks: the planner's blocks per SM (registers, threads, shared
  // memory with the runtime's share and the barriers) on every SM, or fewer when there are fewer chunks.
  // Where not every block has a second chunk, those copies go after every first one (measured on the
  // H100: 384 x 14x14 maps, 1.45 chunks per block, 10.0 -> 9.6 us; at 2.9 chunks per block 1-2% slower).
  prm.late_second_copy = prm.chunks < 2 * grid;
  cuda::silu_switch(prm.activation, [&](auto silu) {  // Note [fused silu]
    constexpr bool SILU = decltype(silu)::value;
    const auto kernel = read_once
                            ? cuda::single_channel_bulk_kernel<T, K, ST, SEG, RUN, kThreads, resident, true, SILU>
                            : cuda::single_channel_bulk_kernel<T, K, ST, SEG, RUN, kThreads, resident, false, SILU>;
    cuda::launch_with_smem(kernel, dim3(static_cast<unsigned>(grid)), kThreads, smem, stream, prm);
  });
}

template <class T, int K, int ST>
void launch(const cuda::PlaneBulkParams& prm, int segment, int grid, int smem, bool read_once,
            cuda::LaunchStream stream) {
  segment == 7 ? launch_chunks<T, K, ST, 7>(prm, grid, smem, read_once, stream)
               : launch_chunks<T, K, ST, 4>(prm, grid, smem, read_once, stream);
}

}  // namespace

void plane_bulk_forward(const Plan& plan, const PlaneBulkDivision& d, const void* x, const void* w, void* y,
                        const Epilogue& e, void* stream, bool dependent_launch) {
  const Problem& pr = plan.problem();
  cuda::PlaneBulkParams prm{
      cuda::conv_geometry(plan, nullptr, nullptr, nullptr, e), {x, w, y}, cuda::plane_order(plan)};
  prm.planes_per_chunk = d.planes_per_chunk;
  prm.rows_per_chunk = d.rows_per_chunk;
  prm.bands = cuda::FastDivmod(static_cast<unsigned>(d.bands));
  prm.chunk_runs = cuda::FastDivmod(static_cast<unsigned>((d.rows_per_chunk + d.run - 1) / d.run));
  prm.segments = cuda::FastDivmod(static_cast<unsigned>((pr.q() + d.segment - 1) / d.segment));
  prm.in_elements = static_cast<int>(d.in_elements);
  prm.out_elements = static_cast<int>(d.out_elements);
  prm.chunks = static_cast<int>(d.chunks);  // the planner keeps it below 2^31
  const int smem = static_cast<int>(d.launch.smem_bytes);
  const int grid = static_cast<int>(d.launch.grid_x);
  const cuda::LaunchStream s{static_cast<cudaStream_t>(stream), dependent_launch};
  cuda::plane_stream_switch(pr.r, pr.s, pr.stride_h, [&](auto k, auto st) {
    constexpr int K = decltype(k)::value, ST = decltype(st)::value;
    visit_storage_dtype(plan.dtype(), "single_channel plane bulk", [&](auto element) {
      launch<decltype(element), K, ST>(prm, d.segment, grid, smem, d.read_once, s);
    });
  });
}

}  // namespace mconv::detail
