// The CPU reference: direct loops over the definition, accumulating in double.
#include <cmath>

#include "../core/call_checks.hpp"
#include "mconv/cpu.hpp"

namespace mconv::cpu {

namespace {

template <class T>
double point(const Problem& pr, const TensorDesc& xd, const T* x, const TensorDesc& wd, const T* w, int64_t n,
             int64_t k, int64_t p, int64_t q) {
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

template <class T>
void forward_loops(const Problem& pr, const TensorDesc& xd, const T* x, const TensorDesc& wd, const T* w,
                   const TensorDesc& yd, T* y, const Epilogue& e) {
  pr.validate(xd, wd, yd);
  detail::check_call(x, w, y, e, sizeof(T));
  const int64_t P = pr.p(), Q = pr.q();
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int64_t n = 0; n < pr.n; ++n)
    for (int64_t k = 0; k < pr.k; ++k)
      for (int64_t p = 0; p < P; ++p)
        for (int64_t q = 0; q < Q; ++q) {
          T* out = y + n * yd.strides[0] + k * yd.strides[1] + p * yd.strides[2] + q * yd.strides[3];
          *out = static_cast<T>(
              detail::apply_epilogue(e, point(pr, xd, x, wd, w, n, k, p, q), out, e.bias ? e.bias + k : nullptr));
        }
}

template <class T>
double scaled(double grad, float alpha, float beta, const T* out) {
  return alpha * grad + (beta != 0.0f ? beta * double(*out) : 0.0);
}

// dx[n, c, h, x] of the definition (before alpha/beta), in double.
template <class T>
double data_point(const Problem& pr, const TensorDesc& dyd, const T* dy, const TensorDesc& wd, const T* w, int64_t n,
                  int64_t c, int64_t h, int64_t x) {
  const int64_t P = pr.p(), Q = pr.q(), cg = pr.c_per_group(), kg = pr.k_per_group(), g = c / cg;
  double acc = 0.0;
  for (int64_t k = g * kg; k < (g + 1) * kg; ++k)
    for (int64_t r = 0; r < pr.r; ++r) {
      const int64_t ph = h + pr.pad_h - r * pr.dil_h;
      if (ph < 0 || ph % pr.stride_h != 0 || ph / pr.stride_h >= P) continue;
      for (int64_t s = 0; s < pr.s; ++s) {
        const int64_t pw = x + pr.pad_w - s * pr.dil_w;
        if (pw < 0 || pw % pr.stride_w != 0 || pw / pr.stride_w >= Q) continue;
        const int64_t fr = pr.mode == Mode::Convolution ? pr.r - 1 - r : r;
        const int64_t fs = pr.mode == Mode::Convolution ? pr.s - 1 - s : s;
        acc += double(dy[n * dyd.strides[0] + k * dyd.strides[1] + ph / pr.stride_h * dyd.strides[2] +
                         pw / pr.stride_w * dyd.strides[3]]) *
               w[k * wd.strides[0] + (c - g * cg) * wd.strides[1] + fr * wd.strides[2] + fs * wd.strides[3]];
      }
    }
  return acc;
}

// dw[k, c, r, s] of the cross-correlation's definition (r, s as the sum sees them), in double.
template <class T>
double filter_point(const Problem& pr, const TensorDesc& xd, const T* x, const TensorDesc& dyd, const T* dy, int64_t k,
                    int64_t c, int64_t r, int64_t s) {
  const int64_t P = pr.p(), Q = pr.q(), ci = k / pr.k_per_group() * pr.c_per_group() + c;
  double acc = 0.0;
  for (int64_t n = 0; n < pr.n; ++n)
    for (int64_t p = 0; p < P; ++p) {
      const int64_t h = p * pr.stride_h - pr.pad_h + r * pr.dil_h;
      if (h < 0 || h >= pr.h) continue;
      for (int64_t q = 0; q < Q; ++q) {
        const int64_t ww = q * pr.stride_w - pr.pad_w + s * pr.dil_w;
        if (ww < 0 || ww >= pr.w) continue;
        acc += double(dy[n * dyd.strides[0] + k * dyd.strides[1] + p * dyd.strides[2] + q * dyd.strides[3]]) *
               x[n * xd.strides[0] + ci * xd.strides[1] + h * xd.strides[2] + ww * xd.strides[3]];
      }
    }
  return acc;
}

template <class T>
void backward_data_loops(const Problem& pr, const TensorDesc& dyd, const T* dy, const TensorDesc& wd, const T* w,
                         const TensorDesc& dxd, T* dx, float alpha, float beta) {
  pr.validate(dxd, wd, dyd);
  detail::check_call(dy, w, dx, Epilogue{alpha, beta}, sizeof(T), detail::TensorNames{"dy", "w", "dx"});
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int64_t n = 0; n < pr.n; ++n)
    for (int64_t c = 0; c < pr.c; ++c)
      for (int64_t h = 0; h < pr.h; ++h)
        for (int64_t x = 0; x < pr.w; ++x) {
          const double acc = data_point(pr, dyd, dy, wd, w, n, c, h, x);
          T* out = dx + n * dxd.strides[0] + c * dxd.strides[1] + h * dxd.strides[2] + x * dxd.strides[3];
          *out = static_cast<T>(scaled(acc, alpha, beta, out));
        }
}

template <class T>
void backward_filter_loops(const Problem& pr, const TensorDesc& xd, const T* x, const TensorDesc& dyd, const T* dy,
                           const TensorDesc& dwd, T* dw, float alpha, float beta) {
  pr.validate(xd, dwd, dyd);
  detail::check_call(x, dy, dw, Epilogue{alpha, beta}, sizeof(T), detail::TensorNames{"x", "dy", "dw"});
  const int64_t cg = pr.c_per_group();
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int64_t k = 0; k < pr.k; ++k)
    for (int64_t c = 0; c < cg; ++c)
      for (int64_t r = 0; r < pr.r; ++r)
        for (int64_t s = 0; s < pr.s; ++s) {
          const double acc = filter_point(pr, xd, x, dyd, dy, k, c, r, s);
          const int64_t fr = pr.mode == Mode::Convolution ? pr.r - 1 - r : r;
          const int64_t fs = pr.mode == Mode::Convolution ? pr.s - 1 - s : s;
          T* out = dw + k * dwd.strides[0] + c * dwd.strides[1] + fr * dwd.strides[2] + fs * dwd.strides[3];
          *out = static_cast<T>(scaled(acc, alpha, beta, out));
        }
}

}  // namespace

double reference_point(const Problem& pr, const TensorDesc& xd, const float* x, const TensorDesc& wd, const float* w,
                       int64_t n, int64_t k, int64_t p, int64_t q) {
  return point(pr, xd, x, wd, w, n, k, p, q);
}

void reference_forward(const Problem& pr, const TensorDesc& xd, const float* x, const TensorDesc& wd, const float* w,
                       const TensorDesc& yd, float* y, const Epilogue& e) {
  forward_loops(pr, xd, x, wd, w, yd, y, e);
}
void reference_forward(const Problem& pr, const TensorDesc& xd, const double* x, const TensorDesc& wd, const double* w,
                       const TensorDesc& yd, double* y, const Epilogue& e) {
  forward_loops(pr, xd, x, wd, w, yd, y, e);
}

double reference_backward_data_point(const Problem& pr, const TensorDesc& dyd, const float* dy, const TensorDesc& wd,
                                     const float* w, int64_t n, int64_t c, int64_t h, int64_t x) {
  return data_point(pr, dyd, dy, wd, w, n, c, h, x);
}

double reference_backward_filter_point(const Problem& pr, const TensorDesc& xd, const float* x, const TensorDesc& dyd,
                                       const float* dy, int64_t k, int64_t c, int64_t r, int64_t s) {
  return filter_point(pr, xd, x, dyd, dy, k, c, r, s);
}

void reference_backward_data(const Problem& pr, const TensorDesc& dyd, const float* dy, const TensorDesc& wd,
                             const float* w, const TensorDesc& dxd, float* dx, float alpha, float beta) {
  backward_data_loops(pr, dyd, dy, wd, w, dxd, dx, alpha, beta);
}

void reference_backward_filter(const Problem& pr, const TensorDesc& xd, const float* x, const TensorDesc& dyd,
                               const float* dy, const TensorDesc& dwd, float* dw, float alpha, float beta) {
  backward_filter_loops(pr, xd, x, dyd, dy, dwd, dw, alpha, beta);
}

}  // namespace mconv::cpu
