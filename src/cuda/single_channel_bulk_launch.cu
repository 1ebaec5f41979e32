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
void launch_chunks(cuda::PlaneBulkParams prm, int grid, int smem, bool read_once, cudaStream_t stream) {
  constexpr int T = kPlaneStreamThreads, resident = plane_bulk_resident_blocks(K);
  constexpr int RUN = plane_bulk_run(K, ST);
  const auto kernel = read_once ? cuda::single_channel_bulk_kernel<K, ST, SEG, RUN, T, resident, true>
                                : cuda::single_channel_bulk_kernel<K, ST, SEG, RUN, T, resident, false>;
  // One resident wave walks the chunks: the planner's blocks per SM (registers, threads, shared
  // memory with the runtime's share and the barriers) on every SM, or fewer when there are fewer chunks.
  // Where not every block has a second chunk, those copies go after every first one (measured on the
  // H100: 384 x 14x14 maps, 1.45 chunks per block, 10.0 -> 9.6 us; at 2.9 chunks per block 1-2% slower).
  prm.late_second_copy = prm.chunks < 2 * grid;
  cuda::launch_with_smem(kernel, dim3(static_cast<unsigned>(grid)), T, smem, stream, prm);
}

template <int K, int ST>
void launch(const cuda::PlaneBulkParams& prm, int segment, int grid, int smem, bool read_once, cudaStream_t stream) {
  segment == 7 ? launch_chunks<K, ST, 7>(prm, grid, smem, read_once, stream)
               : launch_chunks<K, ST, 4>(prm, grid, smem, read_once, stream);
}

}  // namespace

void single_channel_bulk_forward(const Plan& plan, const float* x, const float* w, float* y, const Epilogue& e,
                                 void* stream) {
  const Problem& pr = plan.problem();
  const TileChoice& t = plan.tile();
  cuda::PlaneBulkParams prm{cuda::conv_geometry(plan, x, w, y, e), cuda::plane_order(plan)};
  prm.planes_per_chunk = t.block_planes;
  prm.rows_per_chunk = t.block_rows;
  const int64_t bands = (pr.p() + t.block_rows - 1) / t.block_rows;
  const int64_t blocks = (prm.planes + t.block_planes - 1) / t.block_planes * bands;
  prm.bands = cuda::FastDivmod(static_cast<unsigned>(bands));
  const int run = plane_bulk_run(pr.r, pr.stride_h);
  prm.chunk_runs = cuda::FastDivmod(static_cast<unsigned>((t.block_rows + run - 1) / run));
  prm.segments = cuda::FastDivmod(static_cast<unsigned>((pr.q() + t.block_cols - 1) / t.block_cols));
  const PlaneBulkChunkFloats floats = plane_bulk_chunk_floats(pr, t.block_planes, t.block_rows);
  prm.buffer_floats = static_cast<int>(floats.in);
  prm.out_floats = static_cast<int>(floats.out);
  prm.chunks = static_cast<int>(blocks);  // the planner keeps it below 2^31
  const int smem = static_cast<int>(plane_bulk_smem_bytes(floats));
  const auto s = static_cast<cudaStream_t>(stream);
  const bool read_once = plane_bulk_whole_planes(pr, t.block_planes, t.block_rows);  // Note [bulk read-once inputs]
  cuda::plane_stream_switch(pr.r, pr.s, pr.stride_h, [&](auto k, auto st) {
    constexpr int K = decltype(k)::value, ST = decltype(st)::value;
    launch<K, ST>(prm, t.block_cols, t.grid_blocks, smem, read_once, s);
  });
}

}  // namespace mconv::detail::cuda_backend
