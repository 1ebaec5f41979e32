// The direct-block planner: the thread-group shape for a problem, the input tile with its halo, and
// the images a block walks (Note [direct pipeline]).
#include "planner.hpp"

#include <algorithm>
#include <sstream>

#include "../common/host_math.hpp"

namespace mconv::detail {
namespace {

int choose_shape(const Problem& p, const HardwareModel& hw, std::vector<std::string>& why, int elem_bytes) {
  int d = find_direct_shape("direct_32x8_r2x2_f1");
  const int64_t sms = std::max(hw.sm_count, 1);
  const int64_t slots = p.groups * p.k_per_group();
  if (p.k_per_group() >= 4 || (p.k_per_group() >= 2 && p.q() > 16)) {
    // Below 4 filters a group the idle filter lanes cost less than copying each tile once per filter
    // (Note [filter vectors]); on maps of 16 or less the narrower shapes below fill their threads.
    d = find_direct_shape("direct_32x8_r2x2_f4");
  } else if (p.p() <= 8 && p.q() <= 8 && slots >= 4 * sms) {
    // Small maps: one tile covers the map and several groups share a block (Note [packed groups]).
    // Before packing, mbv2_dw_c960_h7_s1 ran at 0.33x cuDNN with 49 of 128 threads busy (H100).
    d = find_direct_shape("direct_8x8_r1x1_f1_g4");
  } else if (p.p() <= 16 && p.q() <= 16 && slots >= 2 * sms) {
    d = find_direct_shape("direct_16x8_r2x1_f1_g2");
  } else if (p.q() <= 16) {
    d = find_direct_shape("direct_16x8_r1x1_f1");  // a 64-wide tile would leave most threads idle
  }
  const DirectShape& shape = kDirectCatalog[d];
  const int64_t smem = direct_smem_bytes(p, shape, elem_bytes);
  const int64_t limit = hw.smem_per_block_optin;
  if (smem > limit)
    throw Error(Status::Unsupported,
                "algorithm: direct_block needs " + std::to_string(smem / 1024) +
                    " KB of shared memory for its tile and halo (stride, dilation, filter), more than the " +
                    std::to_string(limit / 1024) + " KB a block can have");
  std::ostringstream os;
  os << "shape " << shape.name() << ": " << shape.out_rows() << "x" << shape.out_cols() << " outputs x "
     << shape.filters << " filter(s) per block, input tile " << direct_tile_rows(p, shape) << "x"
     << direct_tile_cols(p, shape) << " with halo, " << smem << " B shared memory";
  why.push_back(os.str());
  return d;
}

}  // namespace

int64_t direct_tile_rows(const Problem& p, const DirectShape& d) {
  return (d.out_rows() - 1) * p.stride_h + (p.r - 1) * p.dil_h + 1;
}
int64_t direct_tile_cols(const Problem& p, const DirectShape& d) {
  return (d.out_cols() - 1) * p.stride_w + (p.s - 1) * p.dil_w + 1;
}
int64_t direct_tile_pitch(const Problem& p, const DirectShape& d, int elem_bytes) {
  const int64_t vector = 16 / elem_bytes;
  return round_up(direct_tile_cols(p, d) + vector - 1, vector);
}
int64_t direct_group_smem_bytes(const Problem& p, const DirectShape& d, int elem_bytes) {
  // Double-buffered tiles, then double-buffered filter slices.
  return round_up(2 * direct_tile_rows(p, d) * direct_tile_pitch(p, d, elem_bytes) * elem_bytes, 16) +
         round_up(2 * int64_t(d.filters) * p.r * p.s * 4, 16);
}
int64_t direct_smem_bytes(const Problem& p, const DirectShape& d, int elem_bytes) {
  return int64_t(d.groups_per_block) * direct_group_smem_bytes(p, d, elem_bytes);
}

DirectBlockDivision plan_direct_block(const Problem& p, const HardwareModel& hw, std::vector<std::string>& why,
                                      int elem_bytes) {
  if (p.n > 65535) throw Error(Status::Unsupported, "n: direct_block launches one grid row per image, at most 65535");
  DirectBlockDivision d;
  d.shape = choose_shape(p, hw, why, elem_bytes);
  const DirectShape& shape = kDirectCatalog[d.shape];
  d.shape_name = shape.name();
  d.filter_slices = static_cast<int>((p.k_per_group() + shape.filters - 1) / shape.filters);
  d.tiles_x = static_cast<int>((p.q() + shape.out_cols() - 1) / shape.out_cols());
  const int64_t tiles_y = (p.p() + shape.out_rows() - 1) / shape.out_rows();
  d.tile_rows = static_cast<int>(direct_tile_rows(p, shape));
  d.tile_cols = static_cast<int>(direct_tile_cols(p, shape));
  d.pitch = static_cast<int>(direct_tile_pitch(p, shape, elem_bytes));
  d.group_smem_bytes = static_cast<int>(direct_group_smem_bytes(p, shape, elem_bytes));
  const int64_t blocks_x = tiles_y * d.tiles_x;
  d.slots = static_cast<int>(p.groups * d.filter_slices);
  const int64_t blocks_z = (d.slots + shape.groups_per_block - 1) / shape.groups_per_block;
  if (blocks_x > 0x7fffffffLL || blocks_z > 65535)
    throw Error(Status::Unsupported, "groups: direct_block grid exceeds the launch limits");
  // Note [direct pipeline]: give each block several images so its loads overlap its FMAs, while
  // keeping enough blocks to fill every SM's threads, and the same number of images in every block row.
  const int64_t per_image = blocks_x * blocks_z;
  const int64_t target_blocks =
      int64_t(std::max(hw.sm_count, 1)) * std::max<int64_t>(hw.max_threads_per_sm / shape.threads, 1);
  const int64_t ipb0 = std::clamp<int64_t>(per_image * p.n / target_blocks, 1, p.n);
  const int64_t blocks_y = (p.n + ipb0 - 1) / ipb0;
  d.images_per_block = static_cast<int>((p.n + blocks_y - 1) / blocks_y);
  d.launch = {blocks_x, blocks_y, blocks_z, shape.threads, direct_smem_bytes(p, shape, elem_bytes)};
  return d;
}

}  // namespace mconv::detail
