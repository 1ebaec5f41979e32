// Division by a divisor fixed at launch, without the ~20-instruction integer divide: a multiply-high,
// an add and a shift (Granlund & Montgomery's round-up method). The launcher builds it on the host;
// kernels split flat indices with it. Host-callable so the CPU tests can check it exhaustively.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define MCONV_HOST_DEVICE __host__ __device__
#else
#define MCONV_HOST_DEVICE
#endif

namespace mconv::cuda {

struct FastDivmod {
  unsigned divisor = 1, multiplier = 0, shift = 0;

  FastDivmod() = default;
  /// d >= 1. Exact for every dividend below 2^31 (the sum umulhi(n, m) + n then fits 32 bits).
  explicit FastDivmod(unsigned d) : divisor(d) {
    while ((uint64_t(1) << shift) < d) ++shift;  // shift = ceil(log2 d)
    multiplier = unsigned((uint64_t(1) << 32) * ((uint64_t(1) << shift) - d) / d + 1);
  }

  MCONV_HOST_DEVICE unsigned div(unsigned n) const {
#ifdef __CUDA_ARCH__
    const unsigned hi = __umulhi(n, multiplier);
#else
    const unsigned hi = unsigned((uint64_t(n) * multiplier) >> 32);
#endif
    return (hi + n) >> shift;
  }
  /// q = n / divisor, r = n % divisor.
  MCONV_HOST_DEVICE void divmod(unsigned n, unsigned& q, unsigned& r) const {
    q = div(n);
    r = n - q * divisor;
  }
};

}  // namespace mconv::cuda
