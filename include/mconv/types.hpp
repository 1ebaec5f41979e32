// mconv: convolution vocabulary, tensor descriptors and the error type.
//
// Conv vocabulary (used in every file of mconv, the CLI and the docs):
//   x: input  (N, C, H, W)      w: filter (K, C/G, R, S)      y: output (N, K, P, Q)
//   pad_h/pad_w, stride_h/stride_w, dil_h/dil_w, groups G;
//   P = (H + 2 pad_h - dil_h (R-1) - 1) / stride_h + 1, likewise Q.
// GEMM view (per group): M = N*P*Q columns of the virtual image matrix (pixels),
//   N = K/G filters, K = C/G*R*S rows of the virtual image matrix ("rows").
//   Row (c, r, s) of the virtual matrix is addressed by the offset table, column (n, p, q) by its
//   start address: element = x[start[col] + offset[row]] (techniques 1 and 2).
#pragma once

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace mconv {

/// Status codes shared by the C++ exceptions and the C ABI (`mconv_status_t`).
enum class Status : int {
  Success = 0,
  BadParam = 1,     ///< a size, stride or descriptor field is invalid
  Unsupported = 2,  ///< a valid combination mconv does not implement (yet)
  Overflow = 3,     ///< an element count or byte offset does not fit the index type
  NullPointer = 4,  ///< a required pointer is null
  Misaligned = 5,   ///< a pointer lacks the alignment of its element type
  CudaError = 6,    ///< the CUDA runtime reported an error (its message is attached)
  IoError = 7,      ///< a file could not be read or written, or is malformed
  NoDevice = 8,     ///< no usable GPU, or mconv was built without CUDA
  Internal = 9,
  OutOfMemory = 10,  ///< a host or device allocation could not be made (the message names it and its size)
};

const char* status_name(Status s);

/// The one exception type of mconv: a status plus a message naming the bad field.
class Error : public std::runtime_error {
 public:
  Error(Status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  Status status() const { return status_; }

 private:
  Status status_;
};

/// Float64 runs on the CPU executor only (the double reference loops), for gradient checks.
enum class DType : int { Float32 = 0, Float16 = 1, BFloat16 = 2, Float64 = 3 };
const char* dtype_name(DType t);  // "fp32", "fp16", "bf16", "fp64"
int dtype_size(DType t);
DType parse_dtype(const std::string& s);  // throws Error(BadParam) on an unknown name

/// Named memory orders. Any other order is expressed through explicit strides (Layout::Custom).
enum class Layout : int { NCHW = 0, NHWC = 1, CNHW = 2, Custom = 3 };
const char* layout_name(Layout l);
Layout parse_layout(const std::string& s);  // throws Error(BadParam) on an unknown name

/// A 4-d tensor: dtype, logical dims in the order (n, c, h, w) and element strides in the same order.
/// For a filter the logical dims are (k, c/g, r, s): "NCHW" for a filter is KCRS, "NHWC" is KRSC,
/// "CNHW" is CKRS (channel outermost: the strides of a CNHW tensor with dims (k, c, r, s)).
struct TensorDesc {
  DType dtype = DType::Float32;
  std::array<int64_t, 4> dims{};     // n, c, h, w
  std::array<int64_t, 4> strides{};  // in elements

  static TensorDesc packed(Layout layout, int64_t n, int64_t c, int64_t h, int64_t w, DType dtype = DType::Float32);
  static TensorDesc nchw(int64_t n, int64_t c, int64_t h, int64_t w) { return packed(Layout::NCHW, n, c, h, w); }
  static TensorDesc nhwc(int64_t n, int64_t c, int64_t h, int64_t w) { return packed(Layout::NHWC, n, c, h, w); }
  static TensorDesc cnhw(int64_t n, int64_t c, int64_t h, int64_t w) { return packed(Layout::CNHW, n, c, h, w); }

  /// Number of elements of the smallest buffer that holds every addressed element (Error(Overflow)
  /// if it does not fit 64 bits).
  int64_t span_elements() const;
  /// n*c*h*w (Error(Overflow) if it does not fit 64 bits).
  int64_t element_count() const;
  /// The named layout these strides are a packed instance of, or Custom.
  Layout layout() const;
  std::string to_string() const;
  bool operator==(const TensorDesc& o) const { return dtype == o.dtype && dims == o.dims && strides == o.strides; }
};

}  // namespace mconv
