// Validation of problems and descriptors. Every error names the field it is about.
#include "mconv/problem.hpp"

#include <algorithm>
#include <limits>
#include <sstream>

#include "checked_math.hpp"

namespace mconv {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

void require(bool ok, Status s, const std::string& msg) {
  if (!ok) throw Error(s, msg);
}

using detail::checked_mul;

void check_desc(const char* name, const TensorDesc& d, const std::array<int64_t, 4>& want, const char* dim_names) {
  std::string n(name);
  if (d.dtype != DType::Float32 && d.dtype != DType::Float16 && d.dtype != DType::BFloat16 && d.dtype != DType::Float64)
    throw Error(Status::BadParam, n + ".dtype: " + std::to_string(int(d.dtype)) + " is not a dtype");
  for (int i = 0; i < 4; ++i) {
    if (d.dims[i] != want[i]) {
      std::ostringstream os;
      os << n << ".dims[" << i << "] (" << dim_names[i] << "): descriptor says " << d.dims[i] << ", problem needs "
         << want[i];
      throw Error(Status::BadParam, os.str());
    }
    if (d.strides[i] < 0 || (d.strides[i] == 0 && d.dims[i] > 1)) {
      std::ostringstream os;
      os << n << ".strides[" << i << "] (" << dim_names[i] << "): " << d.strides[i]
         << " (strides must be positive; negative and broadcast strides are not supported)";
      throw Error(Status::Unsupported, os.str());
    }
  }
  int64_t span = 1;
  for (int i = 0; i < 4; ++i) span = detail::checked_add(span, checked_mul(d.dims[i] - 1, d.strides[i], n), n);
  checked_mul(span, dtype_size(d.dtype), n + " bytes");
}

// y must not alias itself: sorted by stride, each stride exceeds the farthest offset the smaller
// ones reach (so every element has its own address; a dgrad phase's rows every other row pass).
void check_no_overlap(const TensorDesc& y) {
  std::array<int, 4> order{0, 1, 2, 3};
  std::sort(order.begin(), order.end(), [&](int a, int b) { return y.strides[a] < y.strides[b]; });
  int64_t reach = 0;  // the largest offset the dimensions so far address
  for (int i : order) {
    if (y.dims[i] == 1) continue;
    if (y.strides[i] <= reach)
      throw Error(Status::BadParam, "y.strides: overlapping output strides (two outputs would share memory)");
    reach = detail::checked_add(reach, checked_mul(y.strides[i], y.dims[i] - 1, "y"), "y");
  }
}

}  // namespace

namespace {

// The output extent (in + pad + pad_end - dil (f - 1) - 1) / stride + 1, or 0 where the fields are invalid or
// the arithmetic would overflow (validate() then says which field).
int64_t output_extent(int64_t in, int64_t pad, int64_t pad_end, int64_t dil, int64_t f, int64_t stride) {
  if (stride <= 0 || dil <= 0 || f <= 0 || in <= 0 || pad < 0 || pad_end < 0) return 0;
  int64_t padded, span, rest;
  if (__builtin_add_overflow(pad, pad_end, &padded) || __builtin_add_overflow(in, padded, &padded)) return 0;
  if (__builtin_mul_overflow(dil, f - 1, &span) || __builtin_sub_overflow(padded, span + 1, &rest)) return 0;
  return rest < 0 ? 0 : rest / stride + 1;
}

}  // namespace

int64_t Problem::p() const {
  return output_extent(h, pad_h, end_pad_h(), dil_h, r, stride_h);
}
int64_t Problem::q() const {
  return output_extent(w, pad_w, end_pad_w(), dil_w, s, stride_w);
}

double Problem::flops() const {
  if (groups <= 0) return 0;
  return 2.0 * double(n) * double(k) * double(p()) * double(q()) * double(c / groups) * double(r) * double(s);
}

void Problem::validate() const {
  auto positive = [](int64_t v, const char* name) {
    require(v >= 1, Status::BadParam, std::string(name) + ": must be >= 1, got " + std::to_string(v));
  };
  positive(n, "n");
  positive(c, "c");
  positive(h, "h");
  positive(w, "w");
  positive(k, "k");
  positive(r, "r");
  positive(s, "s");
  positive(stride_h, "stride_h");
  positive(stride_w, "stride_w");
  positive(dil_h, "dil_h");
  positive(dil_w, "dil_w");
  positive(groups, "groups");
  require(pad_h >= 0, Status::BadParam, "pad_h: must be >= 0, got " + std::to_string(pad_h));
  require(pad_w >= 0, Status::BadParam, "pad_w: must be >= 0, got " + std::to_string(pad_w));
  require(pad_h_end >= kSameAsBegin, Status::BadParam,
          "pad_h_end: must be >= 0 (or -1, the same as pad_h), got " + std::to_string(pad_h_end));
  require(pad_w_end >= kSameAsBegin, Status::BadParam,
          "pad_w_end: must be >= 0 (or -1, the same as pad_w), got " + std::to_string(pad_w_end));
  require(c % groups == 0, Status::BadParam,
          "groups: " + std::to_string(groups) + " does not divide c = " + std::to_string(c));
  require(k % groups == 0, Status::BadParam,
          "groups: " + std::to_string(groups) + " does not divide k = " + std::to_string(k));
  // 32-bit limits of the kernels' per-dimension indices (addresses themselves are 64-bit).
  for (auto [v, name] : {std::pair{h, "h"},
                         {w, "w"},
                         {r, "r"},
                         {s, "s"},
                         {pad_h, "pad_h"},
                         {pad_w, "pad_w"},
                         {end_pad_h(), "pad_h_end"},
                         {end_pad_w(), "pad_w_end"},
                         {stride_h, "stride_h"},
                         {stride_w, "stride_w"},
                         {dil_h, "dil_h"},
                         {dil_w, "dil_w"}}) {
    require(v <= (1 << 24), Status::Overflow, std::string(name) + ": " + std::to_string(v) + " exceeds 2^24");
  }
  require(groups <= 65535, Status::Unsupported, "groups: more than 65535 groups are not supported");
  int64_t eff_r = dil_h * (r - 1) + 1, eff_s = dil_w * (s - 1) + 1;
  const int64_t padded_h = h + pad_h + end_pad_h(), padded_w = w + pad_w + end_pad_w();
  require(
      eff_r <= padded_h, Status::BadParam,
      "r: dilated filter height " + std::to_string(eff_r) + " exceeds padded input height " + std::to_string(padded_h));
  require(
      eff_s <= padded_w, Status::BadParam,
      "s: dilated filter width " + std::to_string(eff_s) + " exceeds padded input width " + std::to_string(padded_w));
  int64_t cols = checked_mul(checked_mul(n, p(), "n*p"), q(), "n*p*q");
  require(cols <= kInt32Max, Status::Overflow, "n*p*q: " + std::to_string(cols) + " output pixels exceed 2^31-1");
  int64_t rows = checked_mul(checked_mul(c / groups, r, "c*r"), s, "c/g*r*s");
  require(rows <= kInt32Max / 2, Status::Overflow, "c/g*r*s: " + std::to_string(rows) + " rows exceed 2^30");
  // The Plan stores one 16-byte offset-table row per (c, r, s): cap it at 256 MB (2^24 rows, 80x the
  // largest layer of the benchmark suites) rather than let a plan take gigabytes.
  require(rows <= (int64_t(1) << 24), Status::Unsupported,
          "c/g*r*s: " + std::to_string(rows) + " rows would make an offset table of " +
              std::to_string(rows * 16 / (1 << 20)) + " MB (at most 2^24 rows, 256 MB)");
  checked_mul(checked_mul(checked_mul(n, c, "x"), h, "x"), w, "x");
  checked_mul(checked_mul(checked_mul(k, c / groups, "w"), r, "w"), s, "w");
  checked_mul(cols, k, "y");
}

void Problem::validate(const TensorDesc& x, const TensorDesc& wd, const TensorDesc& y) const {
  validate();
  check_desc("x", x, {n, c, h, w}, "nchw");
  // One storage type for all three tensors (bias stays fp32); mixed dtypes are a cast the caller makes.
  for (auto [d, name] : {std::pair{&wd, "w"}, {&y, "y"}})
    require(d->dtype == x.dtype, Status::Unsupported,
            std::string(name) + ".dtype: " + dtype_name(d->dtype) + " differs from x.dtype " + dtype_name(x.dtype) +
                " (x, w and y share one dtype)");
  check_desc("w", wd, {k, c / groups, r, s}, "kcrs");
  check_desc("y", y, {n, k, p(), q()}, "nkpq");
  check_no_overlap(y);
  // Every address a window forms, padding included (start + offset, negative in the padding), must
  // stay far inside 64 bits: the executors add these terms without further checks.
  const int64_t reach_h = checked_mul(h + 2 * std::max(pad_h, end_pad_h()), x.strides[2], "x (rows with padding)");
  const int64_t reach_w = checked_mul(w + 2 * std::max(pad_w, end_pad_w()), x.strides[3], "x (columns with padding)");
  int64_t reach = checked_mul(n, x.strides[0], "x") / 2 + checked_mul(c, x.strides[1], "x") / 2;
  reach = detail::checked_add(reach, reach_h / 2 + reach_w / 2, "x");
  require(reach <= (int64_t(1) << 60), Status::Overflow, "x: its strides with the padding reach beyond 2^61 elements");
}

TensorDesc Problem::x_desc(Layout l, DType t) const {
  validate();
  return TensorDesc::packed(l, n, c, h, w, t);
}
TensorDesc Problem::w_desc(Layout l, DType t) const {
  validate();
  return TensorDesc::packed(l, k, c / groups, r, s, t);
}
TensorDesc Problem::y_desc(Layout l, DType t) const {
  validate();
  return TensorDesc::packed(l, n, k, p(), q(), t);
}

std::string Problem::to_string() const {
  std::ostringstream os;
  os << "n" << n << " c" << c << " h" << h << " w" << w << " k" << k << " r" << r << " s" << s << " pad" << pad_h;
  if (end_pad_h() != pad_h) os << ":" << end_pad_h();
  os << "," << pad_w;
  if (end_pad_w() != pad_w) os << ":" << end_pad_w();
  os << " stride" << stride_h << "," << stride_w << " dil" << dil_h << "," << dil_w << " g" << groups;
  if (mode == Mode::Convolution) os << " conv";
  return os.str();
}

}  // namespace mconv
