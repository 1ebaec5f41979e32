// Loading the window of x a rectangle of output pixels reads into shared memory (x_window.hpp gives
// its extent), zeros outside the image. The few-channel families multiply out of it: their layers
// have too few channels for a pixel to make a 16-byte vector, so a window read once replaces a
// gather of every (pixel, tap) element from global memory.
#pragma once

#include <cstdint>

#include "cp_async.cuh"
#include "fast_divmod.cuh"
#include "storage.cuh"
#include "x_window.hpp"

namespace mconv::cuda {

/// A window's geometry in x and in shared memory; built on the host by make_x_window.
struct XWindow {
  long long x_sc, x_sh, x_sw;  // x: channel, row, column strides
  int C;
  int h_end, w_end;            // x rows and columns at and past these read as zeros
  int rows, row_elems, elems;  // the window: rows x row_elems (columns * C) elements
  int pitch;                   // shared elements from one window row to the next: even, above row_elems
  int words;                   // x channels-last with even row strides: rows copied as 4-byte words
  FastDivmod row_elems_div;    // window element -> (row, rest)
  FastDivmod pitch_words_div;  // window word -> (row, word of the row): pitch / 2
  FastDivmod channels_div;     // rest -> (column, channel)
};

/// x_sc, x_sh, x_sw: x's channel, row and column strides in elements.
/// element_bytes: x's dtype (the 4-byte-word copies are for 16-bit elements).
inline XWindow make_x_window(const mconv::detail::XWindowExtent& e, int64_t c, int64_t h_end, int64_t w_end,
                             int64_t x_sc, int64_t x_sh, int64_t x_sw, int element_bytes = 2) {
  XWindow w{};
  w.x_sc = x_sc;
  w.x_sh = x_sh;
  w.x_sw = x_sw;
  w.C = static_cast<int>(c);
  w.h_end = static_cast<int>(h_end);
  w.w_end = static_cast<int>(w_end);
  w.rows = static_cast<int>(e.rows);
  w.row_elems = static_cast<int>(e.row_elems);
  w.elems = static_cast<int>(e.rows * e.row_elems);
  w.pitch = static_cast<int>(e.pitch);
  // A window row of 16-bit elements is one run of x where its channels and columns are adjacent;
  // every row's run has the same parity (so one shift copies all of them as 4-byte words) where
  // rows are an even number of elements apart.
  w.words = element_bytes == 2 && x_sc == 1 && x_sw == c && x_sh % 2 == 0 ? 1 : 0;
  w.row_elems_div = FastDivmod(static_cast<unsigned>(e.row_elems));
  w.pitch_words_div = FastDivmod(static_cast<unsigned>(e.pitch / 2));
  w.channels_div = FastDivmod(static_cast<unsigned>(c));
  return w;
}

/// Issues the copies of the window whose first element is x_n's (h0, w0): element e of window row
/// `row` at shared element row * pitch + shift + e, zeros outside the image. With channels-last x a
/// window row is one run of x, and `shift` (returned: 0 or 1) gives it the parity of its run in
/// global memory, so that whole 4-byte words copy (cp.async) and only the words at the image's
/// edges mix x with zeros. Any other x goes element by element, `batch` loads in flight a thread
/// before their stores (the compiler cannot move a load above a store through generic pointers).
/// The caller commits and waits for the cp.async group and synchronises its threads.
template <class T, int kThreads, int kBatch = 8>
__device__ __forceinline__ int load_x_window(const XWindow& xw, T* window, const T* x_n, int h0, int w0, int thread) {
  int shift = 0;
  if (xw.words) {
    shift = static_cast<int>((reinterpret_cast<uintptr_t>(x_n + w0 * xw.C) / sizeof(T)) & 1);
    const int words = xw.rows * (xw.pitch / 2);
    for (int wi = thread; wi < words; wi += kThreads) {
      unsigned row, word;
      xw.pitch_words_div.divmod(static_cast<unsigned>(wi), row, word);
      const int h = h0 + static_cast<int>(row), e = 2 * static_cast<int>(word) - shift;
      const bool row_in = h >= 0 && h < xw.h_end;
      bool in[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int w = w0 + static_cast<int>(xw.channels_div.div(static_cast<unsigned>(e + i + xw.C))) - 1;
        in[i] = row_in && e + i >= 0 && e + i < xw.row_elems && w >= 0 && w < xw.w_end;
      }
      T* dst = window + row * xw.pitch + 2 * word;
      const T* src = x_n + h * xw.x_sh + w0 * xw.C + e;  // e may be -1: the address is not read then
      if (in[0] && in[1]) {
        detail::cp_async_bytes<4>(dst, src);
      } else {
        dst[0] = in[0] ? src[0] : from_float<T>(0.0f);
        dst[1] = in[1] ? src[1] : from_float<T>(0.0f);
      }
    }
    return shift;
  }
  for (int e0 = thread; e0 < xw.elems; e0 += kThreads * kBatch) {
    T v[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int e = e0 + b * kThreads;
      unsigned row, rest, col, c;
      xw.row_elems_div.divmod(static_cast<unsigned>(e), row, rest);
      xw.channels_div.divmod(rest, col, c);
      const int h = h0 + static_cast<int>(row), w = w0 + static_cast<int>(col);
      const bool ok = e < xw.elems && h >= 0 && h < xw.h_end && w >= 0 && w < xw.w_end;
      v[b] = ok ? __ldg(x_n + h * xw.x_sh + w * xw.x_sw + static_cast<long long>(c) * xw.x_sc) : from_float<T>(0.0f);
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int e = e0 + b * kThreads;
      if (e < xw.elems) {
        const unsigned row = xw.row_elems_div.div(static_cast<unsigned>(e));
        window[row * xw.pitch + (e - static_cast<int>(row) * xw.row_elems)] = v[b];
      }
    }
  }
  return 0;
}

}  // namespace mconv::cuda
