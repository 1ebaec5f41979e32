// Launcher of the plane-stream kernel: the plane-stream division from the Plan, x's plane order,
// 16-byte copies where x's rows and planes allow them (else 4-byte ones, else elements), and the
// (dtype, filter size, vertical stride) switch.
#include <algorithm>
#include <cstdint>

#include "../common/cuda_check.cuh"
#include "../common/filter_size_switch.cuh"
#include "../common/kernel_launch.cuh"
#include "../common/storage_dtype.cuh"
#include "../launch.hpp"
#include "plane_stream_kernel.cuh"
#include "planner.hpp"

namespace mconv::detail {
namespace {

template <class T, int K, int RUN, int SH, int VB, int PAIR_ODD = -1>
void launch_chunks(const cuda::PlaneStreamParams& prm, int smem, cuda::LaunchStream stream) {
  constexpr int kThreads = kPlaneStreamThreads;
  const auto kernel =
      cuda::single_channel_planes_kernel<T, K, RUN, SH, VB, kThreads, plane_stream_resident_blocks(K), PAIR_ODD>;
  cuda::launch_with_smem(kernel, dim3(static_cast<unsigned>(prm.chunks)), kThreads, smem, stream, prm);
}

// copy_bytes: 16, 4, or the element's size.
template <class T, int K, int RUN, int SH>
void launch_run(const cuda::PlaneStreamParams& prm, int copy_bytes, bool pairs, int smem, cuda::LaunchStream stream) {
  // Note [plane stream stride-2 pairs]: instantiated for "same" padding's parity only, (K - 1) / 2.
  constexpr int kSameOdd = (K - 1) / 2 % 2;
  if constexpr (SH == 2 && sizeof(T) == 4) {
    if (pairs) return launch_chunks<T, K, RUN, SH, 16, kSameOdd>(prm, smem, stream);
  }
  if (copy_bytes == 16) return launch_chunks<T, K, RUN, SH, 16>(prm, smem, stream);
  if constexpr (sizeof(T) == 2) {
    if (copy_bytes == 4) return launch_chunks<T, K, RUN, SH, 4>(prm, smem, stream);
  }
  launch_chunks<T, K, RUN, SH, sizeof(T)>(prm, smem, stream);
}

template <class T, int K, int SH>
void launch(const cuda::PlaneStreamParams& prm, int run, int copy_bytes, bool pairs, int smem,
            cuda::LaunchStream stream) {
  run == 7 ? launch_run<T, K, 7, SH>(prm, copy_bytes, pairs, smem, stream)
           : launch_run<T, K, 4, SH>(prm, copy_bytes, pairs, smem, stream);
}

}  // namespace

void plane_stream_forward(const Plan& plan, const PlaneStreamDivision& d, const void* x, const void* w, void* y,
                          const Epilogue& e, void* stream, bool dependent_launch) {
  const Problem& pr = plan.problem();
  const TensorDesc& xd = plan.x_desc();
  const PlaneStreamLayout& layout = d.layout;
  cuda::PlaneStreamParams prm{
      cuda::conv_geometry(plan, nullptr, nullptr, nullptr, e), {x, w, y}, cuda::plane_order(plan)};
  // Equidistant planes (dense NCHW or CNHW): plane i starts at i * plane_stride, so a thread walks
  // its copies by constant steps instead of splitting every index (Note [plane stream copies]).
  const long long inner_stride = prm.inner_is_c ? xd.strides[1] : xd.strides[0];
  const long long outer_stride = prm.inner_is_c ? xd.strides[0] : xd.strides[1];
  prm.plane_stride = outer_stride == inner_stride * static_cast<long long>(prm.inner.divisor) ? inner_stride : 0;
  prm.planes_per_block = d.planes_per_block;
  prm.rows_per_block = d.rows_per_block;
  prm.chunks = static_cast<int>(d.blocks);  // the planner keeps it below 2^31
  prm.bands = cuda::FastDivmod(static_cast<unsigned>(d.bands));
  prm.filter_offset = d.filter_offset;
  // The widest copy every row start is aligned for (x, the plane and row strides, W all multiples of
  // its elements); the layout keeps shared rows aligned for 16 bytes where W allows them, and for 4
  // bytes with 2-byte elements.
  const int esz = dtype_size(xd.dtype);
  const int copy_bytes = cuda::x_rows_aligned(plan, x, 16)              ? 16
                         : esz == 2 && cuda::x_rows_aligned(plan, x, 4) ? 4
                                                                        : esz;
  prm.row_vectors = cuda::FastDivmod(static_cast<unsigned>(pr.w / (copy_bytes / esz)));
  const int64_t whole_rows = std::min<int64_t>(layout.rows - pr.pad_h, pr.h);  // rows a block copies when oy0 = 0
  prm.plane_rows = cuda::FastDivmod(static_cast<unsigned>(std::max<int64_t>(whole_rows, 1)));
  prm.q_div = cuda::FastDivmod(static_cast<unsigned>(pr.q()));
  const int run = d.run;
  prm.run_div = cuda::FastDivmod(static_cast<unsigned>((d.rows_per_block + run - 1) / run));
  prm.smem_rows = layout.rows;
  prm.plane_elems = layout.plane;
  prm.pitch = layout.pitch;
  prm.lpad = layout.lpad;
  const int smem = static_cast<int>(d.launch.smem_bytes);
  const cuda::LaunchStream s{static_cast<cudaStream_t>(stream), dependent_launch};
  // Note [plane stream stride-2 pairs]: 16-byte copies keep the pitch and planes even, so pad_w's
  // parity is every item's first column's.
  const bool pairs =
      esz == 4 && copy_bytes == 16 && pr.stride_h == 2 && pr.stride_w == 2 && pr.pad_w % 2 == (pr.s - 1) / 2 % 2;
  cuda::plane_stream_switch(pr.r, pr.s, pr.stride_h, [&](auto k, auto st) {
    constexpr int K = decltype(k)::value, ST = decltype(st)::value;
    visit_storage_dtype(xd.dtype, "single_channel plane stream",
                        [&](auto element) { launch<decltype(element), K, ST>(prm, run, copy_bytes, pairs, smem, s); });
  });
}

}  // namespace mconv::detail
