// Human and JSON views of a Plan (what `mconv plan` prints).
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "mconv/plan.hpp"

namespace mconv {
namespace {

// The families whose fp16/bf16 kernels multiply on the tensor cores (the others widen to fp32 FFMA).
bool on_tensor_cores(Algorithm a) {
  return a == Algorithm::ImplicitMma || a == Algorithm::FewChannel || a == Algorithm::FewChannelWgrad ||
         a == Algorithm::FewFilter || a == Algorithm::WindowMma;
}

const char* row_order_name(RowOrder o) {
  return o == RowOrder::CRS ? "CRS" : "RSC";
}

nlohmann::json desc_json(const TensorDesc& d) {
  return {
      {"dtype", dtype_name(d.dtype)}, {"layout", layout_name(d.layout())}, {"dims", d.dims}, {"strides", d.strides}};
}

}  // namespace

std::string Plan::to_text(int64_t max_rows) const {
  const Problem& p = problem_;
  const int esz = dtype_size(x_.dtype);
  std::ostringstream os;
  os << "mconv plan: " << algorithm_name(algorithm_) << " on " << target_name(target_)
     << (std::holds_alternative<std::monostate>(division_) ? "" : " tile " + division_name(division_)) << "\n";
  os << "problem   " << p.to_string() << "  ->  P=" << p.p() << " Q=" << p.q() << "  FLOPs=" << std::setprecision(4)
     << p.flops() << "\n";
  os << "dtype     " << dtype_name(x_.dtype) << " x, w, y; "
     << (x_.dtype != DType::Float32 && on_tensor_cores(algorithm_) ? "tensor cores, fp32 accumulation"
         : x_.dtype != DType::Float32 ? "fp32 arithmetic on the stored values (FFMA), rounded once into y"
         : math_ == MathMode::TF32    ? "math tf32 (tensor cores round x and w to tf32, fp32 accumulation)"
                                      : "math exact (fp32 products and sums)")
     << "\n";
  os << "x         " << x_.to_string() << "\n";
  os << "w         " << w_.to_string() << "\n";
  os << "y         " << y_.to_string() << "\n";
  os << "GEMM      per group: M = N*P*Q = " << p.n * p.p() * p.q() << " columns, N = K/G = " << p.k_per_group()
     << " filters, K = C/G*R*S = " << valid_rows_ << " rows; groups = " << p.groups << "\n";
  os << "start     start[n,p,q] = n*" << start_.stride_n << " + (p*" << start_.conv_stride_h << " - " << start_.pad_h
     << ")*" << start_.stride_h << " + (q*" << start_.conv_stride_w << " - " << start_.pad_w << ")*" << start_.stride_w
     << "   (elements; load predicated on 0 <= h0+dh < " << p.h << " && 0 <= w0+dw < " << p.w << ")\n";
  os << "output    y[n,k,p,q] = n*" << out_.stride_n << " + k*" << out_.stride_k << " + p*" << out_.stride_p << " + q*"
     << out_.stride_q << "\n";
  os << "groups    group g adds x " << group_.x << ", w " << group_.w << ", y " << group_.y << " elements\n";
  os << "offset table (row order " << row_order_name(row_order_) << ", " << valid_rows_ << " rows, " << rows_.size()
     << " stored with padding, " << table_bytes() << " bytes):\n";
  os << "   row    c    r    s   x_offset  byte_off    relo    dh    dw  w_offset\n";
  const int64_t cg = p.c_per_group();
  int32_t prev = 0;
  for (int64_t i = 0; i < valid_rows_ && (max_rows < 0 || i < max_rows); ++i) {
    const OffsetRow& r = rows_[i];
    int64_t c, rr, ss;
    if (row_order_ == RowOrder::CRS) {
      ss = i % p.s;
      rr = (i / p.s) % p.r;
      c = i / (p.s * p.r);
    } else {
      c = i % cg;
      ss = (i / cg) % p.s;
      rr = i / (cg * p.s);
    }
    os << std::setw(6) << i << std::setw(5) << c << std::setw(5) << rr << std::setw(5) << ss << std::setw(11)
       << r.x_offset << std::setw(10) << int64_t(r.x_offset) * esz << std::setw(8) << r.x_offset - prev << std::setw(6)
       << r.dh << std::setw(6) << r.dw << std::setw(10) << r.w_offset << "\n";
    prev = r.x_offset;
  }
  if (max_rows >= 0 && valid_rows_ > max_rows) os << "   ... " << valid_rows_ - max_rows << " more rows\n";
  const int64_t show = std::min<int64_t>(8, p.n * p.p() * p.q());
  os << "start addresses of the first " << show << " columns (elements):";
  const int64_t pq = p.p() * p.q();
  for (int64_t col = 0; col < show; ++col) os << " " << start_.start(col / pq, (col % pq) / p.q(), col % p.q());
  os << "\n";
  for (const auto& d : decisions_) os << "decision  " << d << "\n";
  if (target_ == Target::Cuda)
    os << "deterministic "
       << (deterministic() ? "yes (no atomics: bitwise the same y on every run)"
                           : "no (split-K sums with atomics; --deterministic turns it off)")
       << "\n";
  os << division_text(division_);
  if (target_ == Target::Cuda && algorithm_ != Algorithm::ImplicitPrecomp && algorithm_ != Algorithm::ImplicitMma)
    os << "extra bytes: 0 (" << algorithm_name(algorithm_) << " reads no table; no workspace)\n";
  else
    os << "extra bytes: " << table_bytes() << " (offset table; no im2col, no workspace)\n";
  return os.str();
}

std::string Plan::to_json(int64_t max_rows) const {
  const Problem& p = problem_;
  nlohmann::json j;
  j["algorithm"] = algorithm_name(algorithm_);
  j["target"] = target_name(target_);
  j["tile"] = division_name(division_);
  j["split_k"] = split_k();
  j["deterministic"] = deterministic();
  j["dtype"] = dtype_name(x_.dtype);
  j["math"] = math_mode_name(math_);
  j["problem"] = {{"n", p.n},
                  {"c", p.c},
                  {"h", p.h},
                  {"w", p.w},
                  {"k", p.k},
                  {"r", p.r},
                  {"s", p.s},
                  {"pad_h", p.pad_h},
                  {"pad_w", p.pad_w},
                  {"pad_h_end", p.end_pad_h()},
                  {"pad_w_end", p.end_pad_w()},
                  {"stride_h", p.stride_h},
                  {"stride_w", p.stride_w},
                  {"dil_h", p.dil_h},
                  {"dil_w", p.dil_w},
                  {"groups", p.groups},
                  {"mode", p.mode == Mode::Convolution ? "convolution" : "cross_correlation"},
                  {"p", p.p()},
                  {"q", p.q()},
                  {"flops", p.flops()}};
  j["x"] = desc_json(x_);
  j["w"] = desc_json(w_);
  j["y"] = desc_json(y_);
  j["row_order"] = row_order_name(row_order_);
  j["rows"] = valid_rows_;
  j["table_bytes"] = table_bytes();
  j["start_rule"] = {{"stride_n", start_.stride_n},
                     {"stride_h", start_.stride_h},
                     {"stride_w", start_.stride_w},
                     {"conv_stride_h", start_.conv_stride_h},
                     {"conv_stride_w", start_.conv_stride_w},
                     {"pad_h", start_.pad_h},
                     {"pad_w", start_.pad_w}};
  j["output_rule"] = {{"stride_n", out_.stride_n},
                      {"stride_k", out_.stride_k},
                      {"stride_p", out_.stride_p},
                      {"stride_q", out_.stride_q}};
  j["group_strides"] = {{"x", group_.x}, {"w", group_.w}, {"y", group_.y}};
  nlohmann::json rows = nlohmann::json::array();
  for (int64_t i = 0; i < valid_rows_ && (max_rows < 0 || i < max_rows); ++i)
    rows.push_back(
        {{"x_offset", rows_[i].x_offset}, {"dh", rows_[i].dh}, {"dw", rows_[i].dw}, {"w_offset", rows_[i].w_offset}});
  j["offset_table"] = rows;
  j["decisions"] = decisions_;
  return j.dump(2);
}

}  // namespace mconv
