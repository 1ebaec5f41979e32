// The CPU reference: direct loops over the definition, accumulating in double.
#include <cmath>

#include "../core/call_checks.hpp"
#include "mconv/cpu.hpp"

namespace mconv::cpu {

double reference_point(const Problem& pr, const TensorDesc& xd, const float* x, const TensorDesc& wd, const float* w,
                       int64_t n, int64_t k, int64_t p, int64_t q) {
  const int64_t cg = pr.c_per_group(), g = k / pr.k_per_group();
  double acc = 0.0;
  for (int64_t c = 0; c < cg; ++c)
    for (int64_t r = 0; r < pr.r; ++r) {
      const int64_t h = p * pr.stride_h - pr.pad_h + r * pr.dil_h;
      if (h < 0 || h >= pr.h) continue;
      for (int64_t s = 0; s < pr.s; ++s) {
        const int64_t ww = q * pr.stride_w - pr.pad_w + s * pr.dil_w;
        if (ww < 0 || ww >= pr.w) continue;
        const int64_t fr = pr.mode == Mode::Convolution ? pr.r - 1 - r : r;
        const int64_t fs = pr.mode == Mode::Convolution ? pr.s - 1 - s : s;
        const double xv = x[n * xd.strides[0] + (g * cg + c) * xd.strides[1] + h * xd.strides[2] + ww * xd.strides[3]];
        const double wv = w[k * wd.strides[0] + c * wd.strides[1] + fr * wd.strides[2] + fs * wd.strides[3]];
        acc += xv * wv;
      }
    }
  return acc;
}

void reference_forward(const Problem& pr, const TensorDesc& xd, const float* x, const TensorDesc& wd, const float* w,
                       const TensorDesc& yd, float* y, const Epilogue& e) {
  pr.validate(xd, wd, yd);
  detail::check_call(x, w, y, e, 4);
  const int64_t P = pr.p(), Q = pr.q();
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int64_t n = 0; n < pr.n; ++n)
    for (int64_t k = 0; k < pr.k; ++k)
      for (int64_t p = 0; p < P; ++p)
        for (int64_t q = 0; q < Q; ++q) {
          float* out = y + n * yd.strides[0] + k * yd.strides[1] + p * yd.strides[2] + q * yd.strides[3];
          *out = detail::apply_epilogue(e, reference_point(pr, xd, x, wd, w, n, k, p, q), out,
                                        e.bias ? e.bias + k : nullptr);
        }
}

}  // namespace mconv::cpu
