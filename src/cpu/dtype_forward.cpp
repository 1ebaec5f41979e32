// cpu::forward: every dtype on the CPU. The fp32 executors do the arithmetic; 16-bit tensors are
// widened first (exactly) and the result rounded once when stored, as the GPU's epilogue does.
#include <vector>

#include "../core/call_checks.hpp"
#include "mconv/cpu.hpp"
#include "mconv/numeric.hpp"

namespace mconv::cpu {
namespace {

void run_fp32(const Plan& plan, const TensorDesc& xd, const float* x, const TensorDesc& wd, const float* w,
              const TensorDesc& yd, float* y, const Epilogue& e) {
  if (plan.algorithm() == Algorithm::Reference)
    reference_forward(plan.problem(), xd, x, wd, w, yd, y, e);
  else
    implicit_precomp_forward(plan, x, w, y, e);
}

TensorDesc as_fp32(TensorDesc d) {
  d.dtype = DType::Float32;
  return d;
}

}  // namespace

void forward(const Plan& plan, const void* x, const void* w, void* y, const Epilogue& e) {
  if (plan.target() != Target::Cpu) throw Error(Status::BadParam, "plan: a cuda plan given to the CPU executor");
  const DType t = plan.dtype();
  if (t == DType::Float64) {
    reference_forward(plan.problem(), plan.x_desc(), static_cast<const double*>(x), plan.w_desc(),
                      static_cast<const double*>(w), plan.y_desc(), static_cast<double*>(y), e);
    return;
  }
  if (t == DType::Float32) {
    run_fp32(plan, plan.x_desc(), static_cast<const float*>(x), plan.w_desc(), static_cast<const float*>(w),
             plan.y_desc(), static_cast<float*>(y), e);
    return;
  }
  detail::check_call(x, w, y, e, dtype_size(t));
  const TensorDesc& yd = plan.y_desc();
  const int64_t xs = plan.x_desc().span_elements(), ws = plan.w_desc().span_elements(), ys = yd.span_elements();
  std::vector<float> xf(xs), wf(ws), yf(ys, 0.0f);
  to_float(t, x, xf.data(), xs);
  to_float(t, w, wf.data(), ws);
  if (e.beta != 0.0f) to_float(t, y, yf.data(), ys);  // beta = 0 never reads y
  run_fp32(plan, as_fp32(plan.x_desc()), xf.data(), as_fp32(plan.w_desc()), wf.data(), as_fp32(yd), yf.data(), e);
  // Store only y's own elements: its span may cover memory between them that is not y's.
  auto* out = static_cast<uint16_t*>(y);
  for (int64_t n = 0; n < yd.dims[0]; ++n)
    for (int64_t k = 0; k < yd.dims[1]; ++k)
      for (int64_t p = 0; p < yd.dims[2]; ++p)
        for (int64_t q = 0; q < yd.dims[3]; ++q) {
          const int64_t i = n * yd.strides[0] + k * yd.strides[1] + p * yd.strides[2] + q * yd.strides[3];
          out[i] = float_to_bits(yf[i], t);
        }
}

void fill_view(const TensorDesc& v, void* out, float beta) {
  for (int64_t n = 0; n < v.dims[0]; ++n)
    for (int64_t c = 0; c < v.dims[1]; ++c)
      for (int64_t h = 0; h < v.dims[2]; ++h)
        for (int64_t w = 0; w < v.dims[3]; ++w) {
          const int64_t i = n * v.strides[0] + c * v.strides[1] + h * v.strides[2] + w * v.strides[3];
          if (v.dtype == DType::Float32) {
            float* p = static_cast<float*>(out) + i;
            *p = beta != 0.0f ? beta * *p : 0.0f;  // beta = 0 never reads
          } else if (v.dtype == DType::Float64) {
            double* p = static_cast<double*>(out) + i;
            *p = beta != 0.0f ? beta * *p : 0.0;
          } else {
            uint16_t* p = static_cast<uint16_t*>(out) + i;
            *p = float_to_bits(beta != 0.0f ? beta * bits_to_float(*p, v.dtype) : 0.0f, v.dtype);
          }
        }
}

}  // namespace mconv::cpu
