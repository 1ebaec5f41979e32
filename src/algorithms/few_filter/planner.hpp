// Planner of few_filter (Note [few-filter forward] in kernel.cuh): which layers it runs, a block's
// output pixels and the channels of a window chunk.
#pragma once

#include <string>
#include <vector>

#include "mconv/division.hpp"
#include "mconv/hardware.hpp"
#include "mconv/plan.hpp"

namespace mconv::detail {

/// The kernel's shape (kernel.cuh): 8 warps of at most 4 row steps of 16 output pixels, against one
/// MMA tile of 8 filters.
inline constexpr int kFewFilterThreads = 256;
inline constexpr int kFewFilterStepsPerWarp = 4;
inline constexpr int kFewFilterMaxSteps = kFewFilterThreads / 32 * kFewFilterStepsPerWarp;
/// Resident blocks an SM: one copies its window while the other multiplies (the kernel's register
/// cap and the planner's shared memory follow it). Three ran conv1's dgrad 11% slower, their
/// smaller windows costing more than the warps gained (docs/PERFORMANCE.md, "Few-filter layers").
inline constexpr int kFewFilterBlocksPerSm = 2;

/// The most filters few_filter takes: one MMA tile of 8 (m16n8k16's n).
inline constexpr int64_t kFewFilterMaxFilters = 8;

/// The most channels of a window chunk.
inline constexpr int64_t kFewFilterMaxChunk = 64;

/// Shared bytes from one window pixel (or filter row) of `bytes` to the next: 16 past it. Rows are
/// whole 32-byte steps, so the pitch is an odd multiple of 16 bytes and the 8 rows an ldmatrix reads
/// start in distinct 16-byte bank groups.
constexpr int64_t few_filter_pitch(int64_t bytes) {
  return bytes + 16;
}

/// Shared bytes of a chunk's window for tile_p x tile_q output pixels: its pixels, each
/// few_filter_pitch(2 * chunk_c) apart (16-bit elements).
int64_t few_filter_window_bytes(const Problem& p, int64_t tile_p, int64_t tile_q, int64_t chunk_c);

/// A block's shared bytes: `buffers` x (the window chunk of tile_p x tile_q output pixels and the
/// 8 filter rows of that chunk), 16-bit elements.
int64_t few_filter_smem_bytes(const Problem& p, int64_t tile_p, int64_t tile_q, int64_t chunk_c, int64_t buffers);

/// Why few_filter cannot run this forward problem ("" when it can).
std::string few_filter_unsupported(const Problem& p, const TensorDesc& x, const TensorDesc& w, const TensorDesc& y);

/// Whether x's channels make 16-byte vectors (channels contiguous, a multiple of 8 elements apart
/// at every other axis): the window chunks then copy as vectors.
bool few_filter_vector_x(const Problem& p, const TensorDesc& x);

/// Whether Auto gives this 16-bit layer of one group and at most 8 filters to few_filter, as
/// measured (planner.cpp).
bool few_filter_preferred(const Problem& p, const TensorDesc& x);

FewFilterDivision plan_few_filter(const Problem& p, const HardwareModel& hw, std::vector<std::string>& why);

}  // namespace mconv::detail
