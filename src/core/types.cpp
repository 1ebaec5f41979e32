// Names, parsing and descriptor helpers of types.hpp.
#include "mconv/types.hpp"

#include <algorithm>
#include <sstream>

#include "checked_math.hpp"

namespace mconv {

const char* status_name(Status s) {
  switch (s) {
    case Status::Success:
      return "success";
    case Status::BadParam:
      return "bad parameter";
    case Status::Unsupported:
      return "unsupported";
    case Status::Overflow:
      return "overflow";
    case Status::NullPointer:
      return "null pointer";
    case Status::Misaligned:
      return "misaligned pointer";
    case Status::CudaError:
      return "CUDA error";
    case Status::IoError:
      return "I/O error";
    case Status::NoDevice:
      return "no device";
    case Status::Internal:
      return "internal error";
    case Status::OutOfMemory:
      return "out of memory";
  }
  return "unknown status";
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::Float32:
      return "fp32";
    case DType::Float16:
      return "fp16";
    case DType::BFloat16:
      return "bf16";
    case DType::Float64:
      return "fp64";
  }
  return "?";
}

int dtype_size(DType t) {
  return t == DType::Float64 ? 8 : t == DType::Float32 ? 4 : 2;
}

DType parse_dtype(const std::string& s) {
  for (DType t : {DType::Float32, DType::Float16, DType::BFloat16, DType::Float64})
    if (s == dtype_name(t)) return t;
  throw Error(Status::BadParam, "dtype: unknown name '" + s + "' (expected fp32, fp16, bf16 or fp64)");
}

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::NCHW:
      return "NCHW";
    case Layout::NHWC:
      return "NHWC";
    case Layout::CNHW:
      return "CNHW";
    case Layout::Custom:
      return "custom";
  }
  return "?";
}

Layout parse_layout(const std::string& s) {
  std::string u = s;
  std::transform(u.begin(), u.end(), u.begin(), ::toupper);
  if (u == "NCHW" || u == "KCRS") return Layout::NCHW;
  if (u == "NHWC" || u == "KRSC") return Layout::NHWC;
  if (u == "CNHW" || u == "CKRS") return Layout::CNHW;
  throw Error(Status::BadParam, "layout: unknown name '" + s + "' (expected NCHW, NHWC or CNHW)");
}

TensorDesc TensorDesc::packed(Layout layout, int64_t n, int64_t c, int64_t h, int64_t w, DType dtype) {
  using detail::checked_mul;
  TensorDesc d;
  d.dtype = dtype;
  d.dims = {n, c, h, w};
  for (int i = 0; i < 4; ++i)
    if (d.dims[i] < 1)
      throw Error(Status::BadParam, "dims[" + std::to_string(i) + "]: must be >= 1, got " + std::to_string(d.dims[i]));
  checked_mul(checked_mul(checked_mul(n, c, "tensor"), h, "tensor"), w, "tensor");  // the element count fits
  switch (layout) {
    case Layout::NCHW:
      d.strides = {c * h * w, h * w, w, 1};
      break;
    case Layout::NHWC:
      d.strides = {h * w * c, 1, w * c, c};
      break;
    case Layout::CNHW:
      d.strides = {h * w, n * h * w, w, 1};
      break;
    case Layout::Custom:
      throw Error(Status::BadParam, "layout: 'custom' has no packed form; give strides");
  }
  return d;
}

int64_t TensorDesc::span_elements() const {
  int64_t span = 1;
  for (int i = 0; i < 4; ++i)
    span = detail::checked_add(span, detail::checked_mul(dims[i] - 1, strides[i], "span"), "span");
  return span;
}

int64_t TensorDesc::element_count() const {
  using detail::checked_mul;
  return checked_mul(checked_mul(checked_mul(dims[0], dims[1], "elements"), dims[2], "elements"), dims[3], "elements");
}

Layout TensorDesc::layout() const {
  for (Layout l : {Layout::NCHW, Layout::NHWC, Layout::CNHW}) {
    TensorDesc p;
    try {
      p = packed(l, dims[0], dims[1], dims[2], dims[3], dtype);
    } catch (const Error&) {
      return Layout::Custom;  // no packed form: invalid or overflowing dims
    }
    bool same = true;
    for (int i = 0; i < 4; ++i) same = same && (dims[i] == 1 || p.strides[i] == strides[i]);
    if (same) return l;
  }
  return Layout::Custom;
}

std::string TensorDesc::to_string() const {
  std::ostringstream os;
  os << dtype_name(dtype) << " " << layout_name(layout()) << " dims(" << dims[0] << "," << dims[1] << "," << dims[2]
     << "," << dims[3] << ") strides(" << strides[0] << "," << strides[1] << "," << strides[2] << "," << strides[3]
     << ")";
  return os.str();
}

}  // namespace mconv
