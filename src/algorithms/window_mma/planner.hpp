// Planner of window_mma (Note [window mma] in kernel.cuh): which layers it runs, a block's pixels and
// filters, the channels of a window chunk, the buffers and the cluster split.
#pragma once

#include <string>
#include <vector>

#include "mconv/division.hpp"
#include "mconv/hardware.hpp"
#include "mconv/plan.hpp"

namespace mconv::detail {

/// The kernel's shape (kernel.cuh): two warpgroups, each 64 or 128 output pixels x all the block's
/// filters (one wgmma m64nNk8 a tap and m64 tile).
inline constexpr int kWindowMmaThreads = 256;
/// Channels of a window chunk: one TF32 k-step of 8 a tap.
inline constexpr int kWindowMmaChunk = 8;
/// Taps in one 128-byte filter row (4 x 8 channels x 4 bytes): a row block a chunk per 4 taps.
inline constexpr int kWindowMmaTapsPerRow = 4;
/// The most blocks of one cluster over a tile's chunks (summed in rank order through shared memory).
inline constexpr int kWindowMmaMaxSplit = 4;

/// Rows of x one image spans in a window, Hv = (P-1)*stride_h + (R-1)*dil_h + 1: from its first
/// padded row to the last one its last output row reads.
int64_t window_mma_image_rows(const Problem& p);

/// Floats of one channel of a chunk's window: rows x columns, rounded up to 8 past a multiple of 32,
/// so that the four channels an MMA fragment's lanes read start 8 banks apart.
int64_t window_mma_channel_pitch(int64_t rows, int64_t columns);

/// The most rows of x's window (images stacked, window_mma_image_rows each) over every block of
/// `block_pixels` consecutive output pixels.
int64_t window_mma_rows(const Problem& p, int64_t block_pixels);
/// Columns of a window row: (Q-1)*stride_w + (S-1)*dil_w + 1, from the first padded column.
int64_t window_mma_columns(const Problem& p);

/// A chunk's shared bytes: its ceil(R*S / 4) row blocks of block_filters filter rows of 128 bytes,
/// then its window, rounded up to the 1024-byte swizzle groups.
int64_t window_mma_stage_bytes(const Problem& p, int64_t block_pixels, int64_t block_filters);
/// A block's shared bytes: `stages` chunks (at least the split's partial sums where split > 1), and
/// 1024 bytes to align them.
int64_t window_mma_smem_bytes(const Problem& p, int64_t block_pixels, int64_t block_filters, int64_t stages,
                              int64_t split);

/// Why window_mma cannot run this forward problem ("" when it can); the TF32 math mode is the
/// caller's check.
std::string window_mma_unsupported(const Problem& p, const TensorDesc& x, const TensorDesc& w, const TensorDesc& y);

WindowMmaDivision plan_window_mma(const Problem& p, const HardwareModel& hw, std::vector<std::string>& why);

}  // namespace mconv::detail
