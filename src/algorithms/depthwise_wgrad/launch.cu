// Launcher of depthwise_wgrad (Note [depthwise wgrad]): the step's views in the layer's terms, the
// filter vector the pointers allow, the cluster size the device schedules, the pre-pass of atomic
// slices, and the (dtype, vector, window) switch.
#include <algorithm>
#include <cstdint>

#include "../common/cuda_check.cuh"
#include "../common/filter_size_switch.cuh"
#include "../common/host_math.hpp"
#include "../common/kernel_launch.cuh"
#include "../common/storage_dtype.cuh"
#include "../launch.hpp"
#include "kernel.cuh"
#include "planner.hpp"

namespace mconv::detail {
namespace {

using cuda::DepthwiseWgradParams;

// Splits the items among grid.z blocks (slices x cluster ranks) and launches, as clusters along z
// where the division splits within one; beyond the portable 8 where the device schedules it.
template <class T, int V, int KS, int ST, int QT, int TAPS, bool DOWN = false>
void launch_parts(DepthwiseWgradParams prm, dim3 grid, int threads, int smem, int slices, cuda::LaunchStream on) {
  constexpr auto kernel = cuda::depthwise_wgrad_kernel<T, V, KS, ST, QT, TAPS, DOWN>;
  if (prm.cluster_split > 1) {
    static const bool non_portable = [] {
      MCONV_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
      return true;
    }();
    (void)non_portable;
    prm.cluster_split = cuda::schedulable_cluster_blocks<kernel>(prm.cluster_split, threads, smem);
  }
  const int parts = slices * prm.cluster_split;
  prm.items_per_part = static_cast<int>(ceil_div(int64_t(prm.items), int64_t(parts)));
  grid.z = static_cast<unsigned>(parts);
  cuda::launch_kernel(kernel, grid, threads, smem, on, prm.cluster_split, prm);
}

// The window kernel for square KS x KS filters with runs down a column, or along a row with V
// filters a thread (the planner's vector or 1), or the tap-chunk kernel (ks = 0).
template <class T, int VMAX>
void launch_dtype(const DepthwiseWgradParams& prm, int ks, bool down, int v, dim3 grid, int threads, int smem,
                  int slices, cuda::LaunchStream s) {
  cuda::filter_size_switch(ks, ks, [&](auto ks_c) {
    constexpr int KS = decltype(ks_c)::value;
    if constexpr (KS == 0) {
      launch_parts<T, 1, 0, 1, 1, 16>(prm, grid, threads, smem, slices, s);
    } else if (down) {
      if (prm.stride_h == 1) return launch_parts<T, 1, KS, 1, 4, KS * KS, true>(prm, grid, threads, smem, slices, s);
      launch_parts<T, 1, KS, 2, 2, KS * KS, true>(prm, grid, threads, smem, slices, s);
    } else {
      const int stride_w = prm.stride_w;
      // The planner's vector for this size: as many filters as 16 bytes hold, at most 36 sums.
      constexpr int VK = KS * KS * VMAX <= 36 ? VMAX : KS * KS * (VMAX / 2) <= 36 ? VMAX / 2 : 1;
      if (v != 1 && v != VK) throw Error(Status::Internal, "depthwise_wgrad: a plan's vector has no instantiation");
      if constexpr (VK > 1) {
        if (v == VK) {
          if (stride_w == 1) return launch_parts<T, VK, KS, 1, 4, KS * KS>(prm, grid, threads, smem, slices, s);
          return launch_parts<T, VK, KS, 2, 2, KS * KS>(prm, grid, threads, smem, slices, s);
        }
      }
      if (stride_w == 1) return launch_parts<T, 1, KS, 1, 4, KS * KS>(prm, grid, threads, smem, slices, s);
      launch_parts<T, 1, KS, 2, 2, KS * KS>(prm, grid, threads, smem, slices, s);
    }
  });
}

bool aligned(const void* p, int bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

}  // namespace

void depthwise_wgrad_forward(const Plan& plan, const DepthwiseWgradDivision& d, const void* x, const void* w, void* y,
                             const Epilogue& e, void* stream, bool dependent_launch) {
  // The step (decompose_backward_filter) in the layer's terms: its channels per group are images,
  // its filter extent is dy's pixels, its output extent the taps; its dilation is the layer's stride
  // and its stride the layer's dilation.
  const Problem& st = plan.problem();
  const auto &xs = plan.x_desc().strides, &ws = plan.w_desc().strides, &ys = plan.y_desc().strides;
  const GroupStrides& gs = plan.group_strides();
  DepthwiseWgradParams prm{};
  prm.x = x;
  prm.dy = w;
  prm.dw = y;
  prm.bias = e.bias;
  prm.x_sn = xs[1];
  prm.x_sc = gs.x;
  prm.x_sh = static_cast<int>(xs[2]);
  prm.x_sw = static_cast<int>(xs[3]);
  prm.dy_sn = ws[1];
  prm.dy_sk = ws[0];
  prm.dy_sg = gs.w;
  prm.dy_sp = static_cast<int>(ws[2]);
  prm.dy_sq = static_cast<int>(ws[3]);
  prm.dw_sk = ys[1];
  prm.dw_sg = gs.y;
  prm.dw_sr = ys[2];
  prm.dw_ss = ys[3];
  prm.K = static_cast<int>(st.k);
  prm.kg = static_cast<int>(st.k_per_group());
  prm.H = static_cast<int>(st.h);
  prm.W = static_cast<int>(st.w);
  const WgradLayer layer(st);
  prm.P = static_cast<int>(layer.p);
  prm.Q = static_cast<int>(layer.q);
  prm.R = static_cast<int>(layer.r);
  prm.S = static_cast<int>(layer.s);
  prm.taps = prm.R * prm.S;
  prm.stride_h = static_cast<int>(layer.stride_h);
  prm.stride_w = static_cast<int>(layer.stride_w);
  prm.dil_h = static_cast<int>(layer.dil_h);
  prm.dil_w = static_cast<int>(layer.dil_w);
  prm.pad_h = static_cast<int>(st.pad_h);
  prm.pad_w = static_cast<int>(st.pad_w);
  prm.alpha = e.alpha;
  prm.beta = e.beta;
  prm.activation = static_cast<int>(e.activation);
  // The planner's vector needs x and dy aligned for one load of it; else one filter a thread, the
  // block's lanes then as many filters as its vectors were.
  const int esz = dtype_size(plan.dtype());
  const int v = d.vector > 1 && aligned(x, d.vector * esz) && aligned(w, d.vector * esz) ? d.vector : 1;
  prm.vectors = static_cast<int>(st.k / v);
  prm.chunk_vectors = d.chunk_vectors;
  prm.items = static_cast<int>(d.items);
  // Items (n, major, minor): down a column (n, run of rows, column), along a row (n, row, run).
  const int64_t runs = ceil_div(d.run_down ? layer.p : layer.q, int64_t(d.run));
  prm.runs_div = cuda::FastDivmod(static_cast<unsigned>(d.run_down ? prm.Q : runs));
  prm.rows_div = cuda::FastDivmod(static_cast<unsigned>(d.run_down ? runs : prm.P));
  prm.cluster_split = d.cluster_split;
  // An activation needs the whole sum: atomic slices run as one.
  const int slices = e.activation != Activation::Identity ? 1 : d.atomic_slices;
  prm.atomic = slices > 1;
  if (prm.atomic) output_prepass(plan, d.prepass_blocks, y, e, stream, dependent_launch);
  dim3 grid(static_cast<unsigned>(ceil_div(int64_t(prm.vectors), int64_t(prm.chunk_vectors))),
            static_cast<unsigned>(d.launch.grid_y), 1);
  const int threads = d.launch.threads;
  const int smem = static_cast<int>(d.launch.smem_bytes / d.vector * v);
  const cuda::LaunchStream s{static_cast<cudaStream_t>(stream), dependent_launch};
  visit_storage_dtype(plan.dtype(), "depthwise_wgrad", [&](auto element) {
    using T = decltype(element);
    launch_dtype<T, 16 / sizeof(T)>(prm, d.window, d.run_down, v, grid, threads, smem, slices, s);
  });
}

}  // namespace mconv::detail
