// Host tensors of a backward pass of a case, in a storage dtype: the two inputs filled with values
// rounded to the dtype, the output poisoned with NaN (random where beta != 0), and the double
// reference with the error measure of its precision.
#pragma once

#include "dtype_tensors.hpp"

namespace mconv::test {

struct BackwardTensors {
  Pass pass;
  DType dtype;
  TensorDesc ad, bd, outd;       // dgrad: dy, w, dx; wgrad: x, dy, dw (in `dtype`)
  std::vector<float> a, b, out;  // values (rounded to the dtype)
  std::vector<unsigned char> a_bytes, b_bytes, out_bytes;

  BackwardTensors(const Case& c, Pass p, DType t, std::mt19937_64& g) : pass(p), dtype(t) {
    const TensorDesc xd = c.p.x_desc(c.xl, t), wd = c.p.w_desc(c.wl, t), yd = c.p.y_desc(c.yl, t);
    ad = p == Pass::BackwardData ? yd : xd;
    bd = p == Pass::BackwardData ? wd : yd;
    outd = p == Pass::BackwardData ? xd : wd;
    a = values(ad, g);
    b = values(bd, g);
    out.assign(size_t(outd.span_elements()), NAN);
    if (c.beta != 0.0f) out = values(outd, g);
    a_bytes = bytes(a);
    b_bytes = bytes(b);
    out_bytes = bytes(out);  // NaN stays NaN in every dtype
  }
  std::vector<float> values(const TensorDesc& d, std::mt19937_64& g) const {
    std::vector<float> v(size_t(d.span_elements()));
    fill(v, g, false);
    for (float& e : v) e = round_to_dtype(e, dtype);
    return v;
  }
  std::vector<unsigned char> bytes(const std::vector<float>& v) const {
    std::vector<unsigned char> r(v.size() * size_t(dtype_size(dtype)));
    from_float(dtype, v.data(), r.data(), int64_t(v.size()));
    return r;
  }
  std::vector<float> decode(const std::vector<unsigned char>& r) const {
    std::vector<float> v(r.size() / size_t(dtype_size(dtype)));
    to_float(dtype, r.data(), v.data(), int64_t(v.size()));
    return v;
  }
  // The pass in double on these values (`mag`: on their magnitudes, the scale of summation error).
  std::vector<float> reference(const Case& c, bool mag = false) const {
    auto m = [mag](std::vector<float> v) {
      if (mag)
        for (float& e : v) e = std::fabs(e);
      return v;
    };
    const std::vector<float> aa = m(a), bb = m(b);
    std::vector<float> r = m(out);
    TensorDesc a32 = ad, b32 = bd, o32 = outd;
    a32.dtype = b32.dtype = o32.dtype = DType::Float32;
    const float alpha = mag ? std::fabs(c.alpha) : c.alpha, beta = mag ? std::fabs(c.beta) : c.beta;
    if (pass == Pass::BackwardData)
      cpu::reference_backward_data(c.p, a32, aa.data(), b32, bb.data(), o32, r.data(), alpha, beta);
    else
      cpu::reference_backward_filter(c.p, a32, aa.data(), b32, bb.data(), o32, r.data(), alpha, beta);
    return r;
  }
  // ||got - ref|| over the norm of the pass on the magnitudes; infinity for a NaN where the reference
  // is finite (an element no step wrote). Only the output's own elements count.
  double error(const Case& c, const std::vector<float>& got) const {
    const std::vector<float> ref = reference(c), scale = reference(c, true);
    double e2 = 0, s2 = 0;
    for (int64_t i0 = 0; i0 < outd.dims[0]; ++i0)
      for (int64_t i1 = 0; i1 < outd.dims[1]; ++i1)
        for (int64_t i2 = 0; i2 < outd.dims[2]; ++i2)
          for (int64_t i3 = 0; i3 < outd.dims[3]; ++i3) {
            const size_t i =
                size_t(i0 * outd.strides[0] + i1 * outd.strides[1] + i2 * outd.strides[2] + i3 * outd.strides[3]);
            if (!std::isfinite(got[i])) return INFINITY;
            e2 += double(got[i] - ref[i]) * (got[i] - ref[i]);
            s2 += double(scale[i]) * scale[i];
          }
    return s2 > 0 ? std::sqrt(e2 / s2) : std::sqrt(e2);
  }
};

/// Cases for the backward passes: the forward edge cases and random ones, ReLU and bias dropped (a
/// backward pass has neither), wgrad's true convolutions turned into cross-correlations.
inline Case backward_case(Case c, Pass p) {
  c.act = Activation::Identity;
  c.bias = false;
  c.strided_x = false;
  c.x_offset = 0;
  if (p == Pass::BackwardFilter) c.p.mode = Mode::CrossCorrelation;
  return c;
}

/// Hand-picked backward shapes: stride 2 with P*stride != H, 1x1 stride 2 (phases no tap reaches),
/// stride 3 with dilation 2 (gcd 1) and dilation 2 with stride 2 (gcd 2), padding beyond the
/// filter, grouped with C/G > 1, depthwise with a multiplier.
inline std::vector<Case> backward_edge_cases() {
  std::vector<Case> v;
  v.push_back({make(2, 8, 9, 9, 6, 3, 3, 1, 2)});
  v.push_back({make(2, 8, 10, 11, 6, 3, 3, 1, 2)});
  v.push_back({make(2, 16, 8, 8, 24, 1, 1, 0, 2)});
  v.push_back({make(1, 5, 13, 12, 4, 3, 3, 2, 3, 2)});
  v.push_back({make(1, 4, 12, 12, 6, 3, 3, 2, 2, 2)});
  v.push_back({make(2, 3, 6, 7, 4, 1, 1, 2)});
  v.push_back({make(2, 12, 9, 9, 8, 3, 3, 1, 1, 1, 4)});
  v.push_back({make(2, 12, 9, 9, 8, 3, 3, 1, 2, 1, 4)});
  v.push_back({make(2, 6, 9, 8, 12, 3, 3, 1, 2, 1, 6)});
  v.push_back({make(2, 16, 14, 14, 16, 3, 3, 1, 1, 1, 16)});
  v.push_back({make(1, 3, 28, 28, 16, 7, 7, 3, 2)});
  Case beta{make(2, 8, 7, 7, 8, 3, 3, 1, 2)};
  beta.alpha = 0.5f;
  beta.beta = 0.75f;
  v.push_back(beta);
  // dgrad fills (1x1 at stride 2: three phases no tap reaches) scaling dx by beta: channels-last rows of
  // 16 channels (16-byte vectors in every dtype) and of 12 (no whole vector in 16-bit dtypes).
  for (int64_t c : {16, 12}) {
    Case fill{make(2, c, 9, 8, 8, 1, 1, 0, 2)};
    fill.alpha = 0.5f;
    fill.beta = 0.75f;
    v.push_back(fill);
  }
  return v;
}

}  // namespace mconv::test
