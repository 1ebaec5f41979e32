// Host tensors of a case in a storage dtype: values rounded to the dtype (so the double reference
// multiplies exactly what the executor does) and their storage bytes, y poisoned with NaN.
#pragma once

#include "mconv/numeric.hpp"
#include "problem_gen.hpp"

namespace mconv::test {

/// Values stored in dtype `t` (each rounded to it), and stored bytes of `t` read back as values.
inline std::vector<unsigned char> storage_bytes(DType t, const std::vector<float>& v) {
  std::vector<unsigned char> b(v.size() * size_t(dtype_size(t)));
  from_float(t, v.data(), b.data(), int64_t(v.size()));
  return b;
}
inline std::vector<float> stored_values(DType t, const std::vector<unsigned char>& b) {
  std::vector<float> v(b.size() / size_t(dtype_size(t)));
  to_float(t, b.data(), v.data(), int64_t(v.size()));
  return v;
}

struct DtypeTensors {
  HostTensors f;  // the rounded values, fp32 descriptors
  DType dtype;
  TensorDesc xd, wd, yd;  // the same descriptors in `dtype`
  std::vector<unsigned char> x, w, y;

  DtypeTensors(const Case& c, std::mt19937_64& g, DType t) : f(c, g, false), dtype(t) {
    for (auto* v : {&f.x, &f.w, &f.y})
      for (float& e : *v) e = round_to_dtype(e, t);
    xd = f.xd;
    wd = f.wd;
    yd = f.yd;
    xd.dtype = wd.dtype = yd.dtype = t;
    x = bytes(f.x);
    w = bytes(f.w);
    y = bytes(f.y);  // NaN stays NaN in every dtype
  }
  std::vector<unsigned char> bytes(const std::vector<float>& v) const { return storage_bytes(dtype, v); }
  std::vector<float> values(const std::vector<unsigned char>& b) const { return stored_values(dtype, b); }
  /// The double reference of the case on the rounded inputs, rounded to the dtype like a stored y.
  std::vector<float> reference(const Case& c) const { return reference_on(c, f.x, f.w); }
  /// The double reference on x and w rounded to TF32 the way the tensor-core tiles round them (to
  /// nearest, ties away): the result of a TF32 convolution that makes no other error.
  std::vector<float> reference_on_tf32_inputs(const Case& c) const {
    std::vector<float> x = f.x, w = f.w;
    for (float& e : x) e = round_to_tf32(e);
    for (float& e : w) e = round_to_tf32(e);
    return reference_on(c, x, w);
  }
  /// The norm-relative error of an output against the double reference. Under TF32, against the
  /// closer of the exact reference and the TF32 one: rounding the inputs alone moves an output summed
  /// with cancellation (one pixel of a few hundred products, a small result) by up to about 1e-2 of
  /// its own norm, which no TF32 kernel avoids; a kernel error shows against both references.
  double error(const Case& c, MathMode m, const std::vector<float>& got) const {
    const double exact = rel_error(got, reference(c));
    return m == MathMode::TF32 ? std::min(exact, rel_error(got, reference_on_tf32_inputs(c))) : exact;
  }

 private:
  std::vector<float> reference_on(const Case& c, const std::vector<float>& x, const std::vector<float>& w) const {
    std::vector<float> ref = f.y;
    Epilogue e{c.alpha, c.beta, f.bias.empty() ? nullptr : f.bias.data(), c.act};
    cpu::reference_forward(c.p, f.xd, x.data(), f.wd, w.data(), f.yd, ref.data(), e);
    return ref;
  }
};

/// The norm-relative tolerance of a precision against the double reference.
inline double tolerance(DType t, MathMode m) {
  if (t != DType::Float32) return 1e-2;
  return m == MathMode::TF32 ? 1e-3 : 1e-5;
}

}  // namespace mconv::test
