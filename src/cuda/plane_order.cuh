// The plane order of the single-channel plane streams: the N*G planes of a depthwise layer numbered
// in x's memory order, so that consecutive planes of a chunk are neighbours in memory.
#pragma once

namespace mconv::cuda {

/// (image, channel) of plane `plane`. Params has `inner` (FastDivmod by G or N) and `inner_is_c`
/// (1: plane = n * G + c, NCHW-like; 0: plane = c * N + n, CNHW-like).
template <class Params>
__device__ __forceinline__ void plane_coords(const Params& prm, unsigned plane, unsigned& n, unsigned& c) {
  unsigned outer, inner;
  prm.inner.divmod(plane, outer, inner);
  n = prm.inner_is_c ? outer : inner;
  c = prm.inner_is_c ? inner : outer;
}

}  // namespace mconv::cuda
