// The plane order of the single-channel plane streams: the N*G planes of a depthwise layer numbered
// in x's memory order, so that consecutive planes of a chunk are neighbours in memory.
#pragma once

#include "../common/fast_divmod.cuh"
#include "mconv/plan.hpp"
#include "planner.hpp"

namespace mconv::cuda {

struct PlaneOrder {
  int planes;        // N * G, numbered in x's memory order:
  int inner_is_c;    //   1: plane = n * G + c (NCHW-like); 0: plane = c * N + n (CNHW-like)
  FastDivmod inner;  //   G or N
};

/// The plane order of `plan`'s x (host side, once per launch).
inline PlaneOrder plane_order(const Plan& plan) {
  const Problem& pr = plan.problem();
  PlaneOrder o;
  o.planes = static_cast<int>(pr.n * pr.groups);
  o.inner_is_c = ::mconv::detail::planes_channel_inner(plan.x_desc());
  o.inner = FastDivmod(static_cast<unsigned>(o.inner_is_c ? pr.groups : pr.n));
  return o;
}

/// (image, channel) of plane `plane`.
__device__ __forceinline__ void plane_coords(const PlaneOrder& o, unsigned plane, unsigned& n, unsigned& c) {
  unsigned outer, inner;
  o.inner.divmod(plane, outer, inner);
  n = o.inner_is_c ? outer : inner;
  c = o.inner_is_c ? inner : outer;
}

/// Where chunk `chunk` of a plane stream lies: blocks of `planes_per` planes by bands of `rows_per`
/// output rows, `bands` bands per plane block. Its first plane, planes, first output row and rows.
struct PlaneBand {
  unsigned g0;
  int nplanes, oy0, out_rows;
};
__device__ __forceinline__ PlaneBand plane_band(const PlaneOrder& o, const FastDivmod& bands, int chunk, int planes_per,
                                                int rows_per, int P) {
  unsigned plane_block, band;
  bands.divmod(chunk, plane_block, band);
  PlaneBand b;
  b.g0 = plane_block * planes_per;
  b.nplanes = min(planes_per, o.planes - static_cast<int>(b.g0));
  b.oy0 = band * rows_per;
  b.out_rows = min(rows_per, P - b.oy0);
  return b;
}

}  // namespace mconv::cuda
