// Launcher of the single-channel kernel family: the planner's division from the Plan, its run length
// and block size, the shared-memory opt-in, the instantiation (filter size 1, 3, 5, 7 square at
// stride_h 1 or 2 with the window in registers, else generic) and the launch check.
#include <algorithm>
#include <cstdint>
#include <string>

#include "../common/cuda_check.cuh"
#include "../common/filter_size_switch.cuh"
#include "../common/kernel_launch.cuh"
#include "../common/storage_dtype.cuh"
#include "../launch.hpp"
#include "planner.hpp"
#include "strip_kernel.cuh"

namespace mconv::detail {
namespace {

// The divisors that split a whole block's items: (lane, run) and (run row, column), for the
// instantiation's run of `run` rows x `cols` columns.
template <class T, int K, int ST, int RUN, int COLS>
void launch_cols(cuda::SingleChannelParams prm, dim3 grid, int threads, int smem, cuda::LaunchStream stream) {
  const int per_row = (prm.Q + COLS - 1) / COLS;
  const int runs = (prm.rows_per_block + RUN - 1) / RUN * per_row;
  prm.per_row_div = cuda::FastDivmod(static_cast<unsigned>(per_row));
  prm.runs_div = cuda::FastDivmod(static_cast<unsigned>(runs));
  prm.lanes = std::max(1, std::min(prm.filters_per_block, threads / runs));
  cuda::launch_with_smem(cuda::single_channel_kernel<T, K, ST, RUN, COLS>, grid, threads, smem, stream, prm);
}

template <class T, int K, int ST, int RUN>
void launch(const cuda::SingleChannelParams& prm, bool pairs, dim3 grid, int threads, int smem,
            cuda::LaunchStream stream) {
  // Runs whose register window exceeds kSingleChannelWindowFloats are never planned (they would
  // spill): no such kernel is built.
  if constexpr (K > 0 && single_channel_window_floats(RUN, ST, K, K) > kSingleChannelWindowFloats) {
    throw Error(Status::Internal, "single_channel: a run of " + std::to_string(RUN) + " rows at " + std::to_string(K) +
                                      "x" + std::to_string(K) + " stride " + std::to_string(ST) +
                                      " exceeds the register window the planner allows");
  } else {
    if constexpr (K > 0) {
      if (pairs) return launch_cols<T, K, ST, RUN, 2>(prm, grid, threads, smem, stream);
    }
    launch_cols<T, K, ST, RUN, 1>(prm, grid, threads, smem, stream);
  }
}

// The window in registers (single_channel_register_window); K = 0 reads the strip for every tap.
template <class T, int RUN>
void launch_run(const Problem& pr, const cuda::SingleChannelParams& prm, bool pairs, dim3 grid, int threads, int smem,
                cuda::LaunchStream stream) {
  cuda::filter_size_stride_switch(
      single_channel_register_window(pr) ? pr.r : 0, pr.s, pr.stride_h, [&](auto k, auto st) {
        launch<T, decltype(k)::value, decltype(st)::value, RUN>(prm, pairs, grid, threads, smem, stream);
      });
}

template <class T>
void launch_dtype(const Problem& pr, const cuda::SingleChannelParams& prm, int run, bool pairs, dim3 grid, int threads,
                  int smem, cuda::LaunchStream stream) {
  if (run == 4)
    launch_run<T, 4>(pr, prm, pairs, grid, threads, smem, stream);
  else if (run == 2)
    launch_run<T, 2>(pr, prm, pairs, grid, threads, smem, stream);
  else
    launch_run<T, 1>(pr, prm, pairs, grid, threads, smem, stream);
}

}  // namespace

void single_channel_strip_forward(const Plan& plan, const SingleChannelDivision& d, const void* x, const void* w,
                                  void* y, const Epilogue& e, void* stream, bool dependent_launch) {
  const Problem& pr = plan.problem();
  const int esz = dtype_size(plan.dtype());
  cuda::SingleChannelParams prm{cuda::conv_geometry(plan, nullptr, nullptr, nullptr, e), {x, w, y}};
  prm.filters_per_block = d.filters_per_block;
  prm.rows_per_block = d.rows_per_block;
  prm.strip_rows = d.strip_rows;
  prm.strip_cols = d.strip_cols;
  prm.strip_pitch = d.strip_pitch;
  prm.filter_pitch = d.filter_pitch;
  prm.vec4 = cuda::x_rows_aligned(plan, x, 4 * esz) && pr.pad_w % 4 == 0;  // chunks of 4 elements
  prm.groups_div = cuda::FastDivmod(static_cast<unsigned>(pr.groups));
  prm.chunks_div = cuda::FastDivmod(static_cast<unsigned>(prm.vec4 ? prm.strip_pitch / 4 : prm.strip_cols));
  const int smem = static_cast<int>(d.launch.smem_bytes);
  const int threads = d.launch.threads;
  const dim3 grid = cuda::grid_of(d.launch);
  const cuda::LaunchStream s{static_cast<cudaStream_t>(stream), dependent_launch};
  // Note [single-channel column pairs]: stores of 2 elements also need y aligned for them.
  const bool pairs = single_channel_column_pairs(pr, plan.y_desc()) && reinterpret_cast<uintptr_t>(y) % (2 * esz) == 0;
  visit_storage_dtype(plan.dtype(), "single_channel strip", [&](auto element) {
    launch_dtype<decltype(element)>(pr, prm, d.run, pairs, grid, threads, smem, s);
  });
}

}  // namespace mconv::detail
