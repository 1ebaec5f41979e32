// The direct-block family's shape table: the one list of its thread-group shapes. The planner's
// catalog (kDirectCatalog), the launcher's dispatch and the static checks derive from
// DirectBlockShapes; each shape is then instantiated per filter size (filter_size_switch).
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include "../common/host_math.hpp"

namespace mconv::detail {

/// A thread group of ThreadsX x ThreadsY threads, each owning RegRows x RegCols outputs of Filters
/// filters; GroupsPerBlock thread groups share a block (Note [packed groups] in kernel.cuh).
template <int ThreadsX, int ThreadsY, int RegRows, int RegCols, int Filters, int GroupsPerBlock>
struct DirectThreadShape {
  static constexpr int kThreadsX = ThreadsX, kThreadsY = ThreadsY, kRegRows = RegRows, kRegCols = RegCols;
  static constexpr int kFilters = Filters, kGroupsPerBlock = GroupsPerBlock;
  static constexpr int kThreads = ThreadsX * ThreadsY * GroupsPerBlock;
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps");
  static_assert(RegRows * RegCols * Filters <= 64, "accumulators must stay in registers");
};

using DirectBlockShapes = std::tuple<
    // 32 x 64 outputs (r4x2) ran 2.2x slower than 16 x 64 on mbv2_dw_c32_h112_s1 (H100, 0.385 vs 0.176 ms).
    DirectThreadShape<32, 8, 2, 2, 1, 1>,   // depthwise, maps wider than 16: 16 x 64 outputs per block
    DirectThreadShape<16, 8, 1, 1, 1, 1>,   // depthwise, maps of 9-16 with too few groups to pack
    DirectThreadShape<32, 8, 2, 2, 4, 1>,   // several filters per group: 4 filters per thread
    DirectThreadShape<8, 8, 1, 1, 1, 4>,    // depthwise, maps <= 8 wide and high: 4 groups per block
    DirectThreadShape<16, 8, 2, 1, 1, 2>>;  // depthwise, maps <= 16: one 16 x 16 tile, 2 groups per block

/// Filters of other sizes than the unrolled squares with at most this many taps an axis run a kernel
/// unrolled to it (Note [bounded taps] in kernel.cuh).
inline constexpr int kDirectTapBound = 4;

/// A row of the catalog: what the planner needs of a shape.
struct DirectShape {
  int threads_x, threads_y, reg_rows, reg_cols, filters, groups_per_block, threads;
  int out_rows() const { return threads_y * reg_rows; }
  int out_cols() const { return threads_x * reg_cols; }
  /// "direct_32x8_r2x2_f1", with "_g4" where several groups share a block.
  std::string name() const {
    return "direct_" + std::to_string(threads_x) + "x" + std::to_string(threads_y) + "_r" + std::to_string(reg_rows) +
           "x" + std::to_string(reg_cols) + "_f" + std::to_string(filters) +
           (groups_per_block > 1 ? "_g" + std::to_string(groups_per_block) : "");
  }
};

template <class... Shapes>
constexpr std::array<DirectShape, sizeof...(Shapes)> make_direct_catalog(std::tuple<Shapes...>*) {
  return {{{Shapes::kThreadsX, Shapes::kThreadsY, Shapes::kRegRows, Shapes::kRegCols, Shapes::kFilters,
            Shapes::kGroupsPerBlock, Shapes::kThreads}...}};
}
inline constexpr auto kDirectCatalog = make_direct_catalog(static_cast<DirectBlockShapes*>(nullptr));

/// Index of the shape named `name` in kDirectCatalog, or -1.
inline int find_direct_shape(std::string_view name) {
  return find_by_name(kDirectCatalog, name);
}

/// Calls f(Shape{}) for the shape at `index` of DirectBlockShapes; false when there is none.
template <class F>
bool visit_direct_shape(int index, F&& f) {
  return visit_type_at<DirectBlockShapes>(index, f);
}

}  // namespace mconv::detail
