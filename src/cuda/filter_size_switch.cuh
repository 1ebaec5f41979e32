// The static switch over filter sizes shared by the direct kernel families: square 1, 3, 5 and 7
// filters get kernels with the size as a template constant (their loops unroll fully); every other
// size runs the generic kernel instantiated with 0 ("size at run time").
#pragma once

#include <type_traits>

namespace mconv::cuda {

/// Calls `f(std::integral_constant<int, K>{})` with K = r when r == s is 1, 3, 5 or 7, else K = 0.
template <class F>
void filter_size_switch(long long r, long long s, F&& f) {
  switch (r == s ? r : 0) {
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

}  // namespace mconv::cuda
