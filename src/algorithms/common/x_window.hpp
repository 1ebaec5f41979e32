// The window of x that a rectangle of output pixels reads, kept in shared memory by the few-channel
// families (few_channel, few_channel_wgrad): its extent and bytes, for their planners and launchers.
#pragma once

#include <cstdint>

#include "host_math.hpp"

namespace mconv::detail {

/// Shared elements from one row of a window to the next, for rows of `row` elements: even, and past
/// the row, so that a row shifted by one element to its parity in x keeps to its own 4-byte words
/// (load_x_window, x_window.cuh).
constexpr int64_t window_pitch(int64_t row) {
  return (row + 2) / 2 * 2;
}

/// The x rows and columns that tile_p x tile_q output pixels read, and the window's shared layout.
struct XWindowExtent {
  int64_t rows = 0;       ///< x rows
  int64_t columns = 0;    ///< x columns
  int64_t row_elems = 0;  ///< columns * C: one window row
  int64_t pitch = 0;      ///< window_pitch(row_elems)
  /// Shared bytes of the window for elements of `element_bytes`, 16-byte aligned.
  int64_t bytes(int64_t element_bytes = 2) const { return round_up(rows * pitch * element_bytes, int64_t(16)); }
};

constexpr XWindowExtent x_window_extent(int64_t tile_p, int64_t tile_q, int64_t c, int64_t r, int64_t s,
                                        int64_t stride_h, int64_t stride_w, int64_t dil_h, int64_t dil_w) {
  XWindowExtent e;
  e.rows = (tile_p - 1) * stride_h + (r - 1) * dil_h + 1;
  e.columns = (tile_q - 1) * stride_w + (s - 1) * dil_w + 1;
  e.row_elems = e.columns * c;
  e.pitch = window_pitch(e.row_elems);
  return e;
}

}  // namespace mconv::detail
