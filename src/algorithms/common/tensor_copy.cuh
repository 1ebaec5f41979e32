// Hopper's tensor memory accelerator with a tensor map (cp.async.bulk.tensor): one thread copies a
// whole box of a tensor into shared memory (or stores one from it), the addresses, the bounds and the swizzle computed
// by the copy engine, and the bytes are counted on an mbarrier (bulk_copy.cuh). Two modes: tiled (a box of a 2-D or 4-D
// view) and im2col (a column of pixels of an NHWC tensor, each pixel a run of channels, walked the way a convolution's
// output pixels walk their windows; tensor_map.hpp builds both maps). sm_90 and later.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "bulk_copy.cuh"

namespace mconv::cuda::detail {

/// The generic address of a tensor map, as the copy instructions take it. The map must live in
/// kernel parameter space (a __grid_constant__ parameter), constant or global memory.
__device__ __forceinline__ uint64_t tensor_map_address(const CUtensorMap& map) {
  return reinterpret_cast<uint64_t>(&map);
}

/// Fetches the map into the copy engine's descriptor cache ahead of the first copy.
__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap& map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(tensor_map_address(map)) : "memory");
}

/// Copies the im2col column of a 4-D (C, W, H, N) map that starts at channel c, window origin (w, h)
/// of image n, shifted by the filter tap (dw, dh) (0-255 each): the map's pixels-per-column pixels
/// in its traversal order, channels-per-pixel channels each, zeros outside the tensor. Counted on bar.
__device__ __forceinline__ void tensor_copy_im2col(uint32_t smem, const CUtensorMap& map, int c, int w, int h, int n,
                                                   uint16_t dw, uint16_t dh, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, "
      "%5}], [%6], {%7, %8};\n" ::"r"(smem),
      "l"(tensor_map_address(map)), "r"(c), "r"(w), "r"(h), "r"(n), "r"(smem_address(bar)), "h"(dw), "h"(dh)
      : "memory");
}

/// Copies the box of a 2-D map whose first element is (inner, outer), zeros outside the tensor.
__device__ __forceinline__ void tensor_copy_tile(uint32_t smem, const CUtensorMap& map, int inner, int outer,
                                                 uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
      "[%4];\n" ::"r"(smem),
      "l"(tensor_map_address(map)), "r"(inner), "r"(outer), "r"(smem_address(bar))
      : "memory");
}

/// Copies the box of a 4-D map whose first element is (c0, c1, c2, c3), innermost first, zeros
/// outside the tensor. Counted on bar.
__device__ __forceinline__ void tensor_copy_tile_4d(uint32_t smem, const CUtensorMap& map, int c0, int c1, int c2,
                                                    int c3, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, "
      "%5}], [%6];\n" ::"r"(smem),
      "l"(tensor_map_address(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_address(bar))
      : "memory");
}

/// Stores the box of a 2-D map whose first element is (inner, outer) from shared memory laid out as
/// the map's swizzle; elements outside the tensor are not written. A bulk group of this thread:
/// fence the box's shared writes first (fence_shared_for_bulk_copy), commit, then bulk_wait_read
/// before the box is written again.
__device__ __forceinline__ void tensor_store_tile(const CUtensorMap& map, int inner, int outer, uint32_t smem) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
                   tensor_map_address(map)),
               "r"(inner), "r"(outer), "r"(smem)
               : "memory");
}

/// tensor_store_tile's reduction form: adds the box into the tensor's elements (each add atomic
/// per element, in the map's element type), for blocks that each hold part of a sum.
__device__ __forceinline__ void tensor_reduce_add_tile(const CUtensorMap& map, int inner, int outer, uint32_t smem) {
  asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
                   tensor_map_address(map)),
               "r"(inner), "r"(outer), "r"(smem)
               : "memory");
}

}  // namespace mconv::cuda::detail
