// The static switch over filter sizes shared by the direct kernel families: square 1, 3, 5 and 7
// filters get kernels with the size as a template constant (their loops unroll fully); every other
// size runs the generic kernel instantiated with 0 ("size at run time"). The single-channel
// families also take the row stride (1 or 2) as a constant.
#pragma once

#include <type_traits>

#include "mconv/types.hpp"

namespace mconv::cuda {

/// The size constant filter_size_switch passes for an r x s filter: r when r == s is 1, 3, 5 or 7,
/// else 0 (the generic kernel). Launchers that size their grids by the kernel they will run ask this.
constexpr int constant_filter_size(long long r, long long s) {
  return r == s && (r == 1 || r == 3 || r == 5 || r == 7) ? static_cast<int>(r) : 0;
}

/// Calls `f(std::integral_constant<int, K>{})` with K = constant_filter_size(r, s).
template <class F>
void filter_size_switch(long long r, long long s, F&& f) {
  switch (constant_filter_size(r, s)) {
    case 1:
      return f(std::integral_constant<int, 1>{});
    case 3:
      return f(std::integral_constant<int, 3>{});
    case 5:
      return f(std::integral_constant<int, 5>{});
    case 7:
      return f(std::integral_constant<int, 7>{});
    default:
      return f(std::integral_constant<int, 0>{});
  }
}

/// The same, with the row stride as a second constant: f(K, ST) with ST = 1 when stride_h == 1,
/// else 2 (the kernels with a size constant run strides 1 and 2 only), and ST = 0 when K = 0.
template <class F>
void filter_size_stride_switch(long long r, long long s, long long stride_h, F&& f) {
  filter_size_switch(r, s, [&](auto k) {
    if constexpr (decltype(k)::value == 0)
      f(k, std::integral_constant<int, 0>{});
    else if (stride_h == 1)
      f(k, std::integral_constant<int, 1>{});
    else
      f(k, std::integral_constant<int, 2>{});
  });
}

/// The plane streams' switch: only the size-constant kernels exist, so f(K, ST) for square 1, 3, 5,
/// 7 filters, and an Unsupported error for any other size (their planner refuses those first).
template <class F>
void plane_stream_switch(long long r, long long s, long long stride_h, F&& f) {
  filter_size_stride_switch(r, s, stride_h, [&](auto k, auto st) {
    if constexpr (decltype(k)::value == 0)
      throw Error(Status::Unsupported, "filter: the plane stream runs square 1, 3, 5, 7 filters");
    else
      f(k, st);
  });
}

}  // namespace mconv::cuda
